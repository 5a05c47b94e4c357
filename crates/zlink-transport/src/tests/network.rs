//! The [`Network`](crate::Network) seam: two transports on an in-memory network (tokio duplex
//! pipes, no socket) connect, handshake and exchange a frame; TLS over it is refused.

use std::collections::HashMap;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;
use tokio::io::DuplexStream;
use tokio::sync::mpsc;

use super::support::{WAIT, config, expect_up, one_way};
use crate::{NetFuture, NetListener, NetStream, Network, PeerIntent, Transport};

/// Where a bound listener takes its connections: its address and its queue.
type Bound = (SocketAddr, mpsc::UnboundedSender<(Pipe, SocketAddr)>);

/// Endpoints by name; a connect hands one end of a fresh pipe to the bound listener.
#[derive(Debug, Default)]
struct Pipes {
    bound: Mutex<HashMap<String, Bound>>,
    next_port: Mutex<u16>,
}

struct Pipe {
    io: DuplexStream,
    local: SocketAddr,
    peer: SocketAddr,
}

impl tokio::io::AsyncRead for Pipe {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for Pipe {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<io::Result<usize>> {
        std::pin::Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

impl NetStream for Pipe {
    fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.local)
    }

    fn peer_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.peer)
    }
}

struct PipeListener {
    addr: SocketAddr,
    incoming: tokio::sync::Mutex<mpsc::UnboundedReceiver<(Pipe, SocketAddr)>>,
}

impl NetListener for PipeListener {
    fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.addr)
    }

    fn accept(&self) -> NetFuture<'_, (Box<dyn NetStream>, SocketAddr)> {
        Box::pin(async move {
            match self.incoming.lock().await.recv().await {
                Some((pipe, from)) => Ok((Box::new(pipe) as Box<dyn NetStream>, from)),
                None => Err(io::ErrorKind::NotConnected.into()),
            }
        })
    }
}

impl Pipes {
    fn port(&self) -> u16 {
        let mut p = self.next_port.lock();
        *p += 1;
        *p
    }
}

impl Network for Pipes {
    fn bind<'a>(&'a self, endpoint: &'a str) -> NetFuture<'a, Box<dyn NetListener>> {
        Box::pin(async move {
            let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, self.port()));
            let (tx, rx) = mpsc::unbounded_channel();
            self.bound.lock().insert(endpoint.to_owned(), (addr, tx));
            Ok(Box::new(PipeListener {
                addr,
                incoming: tokio::sync::Mutex::new(rx),
            }) as Box<dyn NetListener>)
        })
    }

    fn connect<'a>(&'a self, endpoint: &'a str) -> NetFuture<'a, Box<dyn NetStream>> {
        Box::pin(async move {
            let (to, tx) = self
                .bound
                .lock()
                .get(endpoint)
                .cloned()
                .ok_or(io::Error::from(io::ErrorKind::ConnectionRefused))?;
            let from = SocketAddr::from((Ipv4Addr::LOCALHOST, self.port()));
            let (near, far) = tokio::io::duplex(64 * 1024);
            tx.send((
                Pipe {
                    io: far,
                    local: to,
                    peer: from,
                },
                from,
            ))
            .map_err(|_| io::Error::from(io::ErrorKind::ConnectionRefused))?;
            Ok(Box::new(Pipe {
                io: near,
                local: from,
                peer: to,
            }) as Box<dyn NetStream>)
        })
    }
}

#[tokio::test]
async fn two_transports_on_a_replaced_network_connect_and_exchange_a_frame() {
    let pipes: Arc<dyn Network> = Arc::new(Pipes::default());
    let (bt, mut bi) = Transport::start(config(2, 1).listen("b").network(pipes.clone()))
        .await
        .unwrap();
    let (at, mut ai) = Transport::start(config(1, 1).listen("a").network(pipes))
        .await
        .unwrap();
    let peer = at.connect(&PeerIntent::new("b")).await.unwrap();
    expect_up(&mut ai).await;
    expect_up(&mut bi).await;
    peer.send_app(&one_way(&at, Bytes::from_static(b"over the pipe")))
        .await
        .unwrap();
    let got = tokio::time::timeout(WAIT, bi.app.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.envelope().payload().as_ref(), b"over the pipe");
    drop(bt);
}

#[tokio::test]
async fn tls_over_a_replaced_network_is_refused_at_start() {
    let tls = super::tls::Ca::new().tls("a");
    let err = Transport::start(config(1, 1).network(Arc::new(Pipes::default())).tls(tls))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), crate::TransportErrorKind::InvalidArgument);
}
