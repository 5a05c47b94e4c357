//! The network seam: where a transport binds its listener and dials its peers.
//!
//! A transport started without a [`Network`] (the default) uses tokio's TCP directly, with no
//! dynamic call on any path. A [`Network`] set on the [`TransportConfig`](crate::TransportConfig)
//! replaces both ends, so a deterministic simulation (turmoil's simulated TCP, `crates/zlink-sim`)
//! runs the real transport, handshake and lanes over its own sockets. Such a transport speaks
//! plain frames only: TLS over a replaced network is refused at start.

use std::fmt;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;

use tokio::io::{AsyncRead, AsyncWrite};

/// A boxed future of a [`Network`] call.
pub type NetFuture<'a, T> = Pin<Box<dyn Future<Output = io::Result<T>> + Send + 'a>>;

/// A connected byte stream of a replaced network.
pub trait NetStream: AsyncRead + AsyncWrite + Send + Sync + Unpin + 'static {
    /// This end's address.
    fn local_addr(&self) -> io::Result<SocketAddr>;
    /// The remote end's address.
    fn peer_addr(&self) -> io::Result<SocketAddr>;
}

/// A bound listener of a replaced network.
pub trait NetListener: Send + Sync + 'static {
    /// The bound address (the actual port when bound with port 0).
    fn local_addr(&self) -> io::Result<SocketAddr>;
    /// The next inbound connection and its remote address.
    fn accept(&self) -> NetFuture<'_, (Box<dyn NetStream>, SocketAddr)>;
}

/// Binds listeners and dials endpoints (`host:port`) in place of tokio's TCP.
pub trait Network: Send + Sync + fmt::Debug + 'static {
    /// Binds a listener on `endpoint`.
    fn bind<'a>(&'a self, endpoint: &'a str) -> NetFuture<'a, Box<dyn NetListener>>;
    /// Connects to `endpoint`.
    fn connect<'a>(&'a self, endpoint: &'a str) -> NetFuture<'a, Box<dyn NetStream>>;
}

/// The listener a transport accepts on: tokio's, or a replaced network's.
pub(crate) enum Listener {
    Tcp(tokio::net::TcpListener),
    Net(Box<dyn NetListener>),
}

/// A freshly connected socket before the handshake.
pub(crate) enum Connected {
    Tcp(tokio::net::TcpStream),
    Net(Box<dyn NetStream>),
}

impl Listener {
    pub(crate) async fn bind(network: Option<&dyn Network>, endpoint: &str) -> io::Result<Self> {
        match network {
            None => Ok(Self::Tcp(tokio::net::TcpListener::bind(endpoint).await?)),
            Some(n) => Ok(Self::Net(n.bind(endpoint).await?)),
        }
    }

    pub(crate) fn local_addr(&self) -> io::Result<SocketAddr> {
        match self {
            Self::Tcp(l) => l.local_addr(),
            Self::Net(l) => l.local_addr(),
        }
    }

    pub(crate) async fn accept(&self) -> io::Result<(Connected, SocketAddr)> {
        match self {
            Self::Tcp(l) => l.accept().await.map(|(s, a)| (Connected::Tcp(s), a)),
            Self::Net(l) => l.accept().await.map(|(s, a)| (Connected::Net(s), a)),
        }
    }
}

impl Connected {
    pub(crate) async fn connect(network: Option<&dyn Network>, endpoint: &str) -> io::Result<Self> {
        match network {
            None => Ok(Self::Tcp(tokio::net::TcpStream::connect(endpoint).await?)),
            Some(n) => Ok(Self::Net(n.connect(endpoint).await?)),
        }
    }
}
