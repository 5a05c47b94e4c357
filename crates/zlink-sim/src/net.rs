//! turmoil's simulated TCP behind the transport's [`Network`] seam.

use std::io;
use std::net::SocketAddr;

use zlink_transport::{NetFuture, NetListener, NetStream, Network};

/// Binds and dials on turmoil's simulated network (inside a turmoil host only).
#[derive(Debug, Default, Clone, Copy)]
pub struct TurmoilNetwork;

struct Stream(turmoil::net::TcpStream);
struct Listener(turmoil::net::TcpListener);

impl tokio::io::AsyncRead for Stream {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for Stream {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<io::Result<usize>> {
        std::pin::Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

impl NetStream for Stream {
    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.0.local_addr()
    }

    fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.0.peer_addr()
    }
}

impl NetListener for Listener {
    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.0.local_addr()
    }

    fn accept(&self) -> NetFuture<'_, (Box<dyn NetStream>, SocketAddr)> {
        Box::pin(async move {
            let (s, addr) = self.0.accept().await?;
            Ok((Box::new(Stream(s)) as Box<dyn NetStream>, addr))
        })
    }
}

impl Network for TurmoilNetwork {
    fn bind<'a>(&'a self, endpoint: &'a str) -> NetFuture<'a, Box<dyn NetListener>> {
        Box::pin(async move {
            let l = turmoil::net::TcpListener::bind(endpoint).await?;
            Ok(Box::new(Listener(l)) as Box<dyn NetListener>)
        })
    }

    fn connect<'a>(&'a self, endpoint: &'a str) -> NetFuture<'a, Box<dyn NetStream>> {
        Box::pin(async move {
            let s = turmoil::net::TcpStream::connect(endpoint).await?;
            Ok(Box::new(Stream(s)) as Box<dyn NetStream>)
        })
    }
}
