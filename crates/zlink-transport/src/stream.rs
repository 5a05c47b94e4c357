//! A peer connection's byte stream: plain TCP, TLS over TCP (`tls.rs`), or a stream of a
//! replaced network (`network.rs`, the simulation's). The plain case keeps tokio's owned halves
//! (no lock between reader and writer); the TLS and replaced cases split the stream with
//! `tokio::io::split`.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio_rustls::TlsStream;

use crate::network::NetStream;

/// A connected socket before it is split into a reader and a writer.
pub(crate) enum PeerStream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
    Net(Box<dyn NetStream>),
}

impl PeerStream {
    /// The reader and writer halves.
    pub(crate) fn into_split(self) -> (PeerRead, PeerWrite) {
        match self {
            Self::Plain(s) => {
                let (r, w) = s.into_split();
                (PeerRead::Plain(r), PeerWrite::Plain(w))
            }
            Self::Tls(s) => {
                let (r, w) = tokio::io::split(*s);
                (PeerRead::Tls(r), PeerWrite::Tls(w))
            }
            Self::Net(s) => {
                let (r, w) = tokio::io::split(s);
                (PeerRead::Net(r), PeerWrite::Net(w))
            }
        }
    }

    /// The client certificates the remote presented (TLS acceptor side), DER.
    pub(crate) fn peer_certificates(&self) -> &[rustls::pki_types::CertificateDer<'static>] {
        match self {
            Self::Tls(s) => s.get_ref().1.peer_certificates().unwrap_or(&[]),
            Self::Plain(_) | Self::Net(_) => &[],
        }
    }
}

/// The reading half of a [`PeerStream`].
pub(crate) enum PeerRead {
    Plain(OwnedReadHalf),
    Tls(tokio::io::ReadHalf<TlsStream<TcpStream>>),
    Net(tokio::io::ReadHalf<Box<dyn NetStream>>),
}

/// The writing half of a [`PeerStream`].
pub(crate) enum PeerWrite {
    Plain(OwnedWriteHalf),
    Tls(tokio::io::WriteHalf<TlsStream<TcpStream>>),
    Net(tokio::io::WriteHalf<Box<dyn NetStream>>),
}

impl AsyncRead for PeerStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
            Self::Net(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for PeerStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
            Self::Net(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_flush(cx),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
            Self::Net(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
            Self::Net(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

impl AsyncRead for PeerRead {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Self::Tls(s) => Pin::new(s).poll_read(cx, buf),
            Self::Net(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for PeerWrite {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Self::Tls(s) => Pin::new(s).poll_write(cx, buf),
            Self::Net(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Self::Tls(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Self::Net(s) => Pin::new(s).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Self::Plain(s) => s.is_write_vectored(),
            Self::Tls(s) => s.is_write_vectored(),
            Self::Net(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_flush(cx),
            Self::Tls(s) => Pin::new(s).poll_flush(cx),
            Self::Net(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Self::Tls(s) => Pin::new(s).poll_shutdown(cx),
            Self::Net(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}
