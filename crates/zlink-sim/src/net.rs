//! turmoil's simulated TCP behind the transport's [`Network`] seam, with partitions that
//! behave as they do on real TCP.
//!
//! turmoil's own partitions drop whatever crosses the cut and never resend it, and its TCP
//! then waits forever for the missing segment: a connection that lost one write during a cut
//! stalls for good after the heal, so everything written on it later is lost too. Real TCP
//! retransmits: what was written during a short cut arrives after the heal, in order, and only
//! a cut longer than the endpoints' own liveness timeout ends the connection. So the cuts are
//! modelled here, on the sender's side of each stream ([`Cuts`]):
//! - a write across a cut is held in the stream, in order, and sent after the heal with the
//!   next write or flush (the transport writes a heartbeat at least every 500 ms, the order of a
//!   retransmission timeout);
//! - a connection closed or dropped while its data is held keeps it: the bytes, then the close,
//!   are sent after the heal (as TCP would), or never if the host crashes first;
//! - a dial across a cut (either way: the SYN or its answer would be lost) is retried like a
//!   SYN, after 1, 2, 4, 4, ... s, until the cut heals.
//!
//! A connection drop is its own fault ([`Cuts::reset`]): every connection between two hosts
//! fails at once at both ends (`ConnectionReset`, as after an RST), held bytes and all; the
//! hosts dial again.

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::io::AsyncWrite;
use zlink_transport::{NetFuture, NetListener, NetStream, Network};

/// The cuts in effect: one entry per partition draw, `(a, b, one_way)` by host name (a
/// one-way cut stops `a` → `b` only). Two draws of one pair overlap; each heal ends one.
#[derive(Debug, Default)]
pub struct Cuts {
    draws: Mutex<Vec<(String, String, bool)>>,
    /// Connection drops so far, by pair of hosts (in name order).
    resets: Mutex<BTreeMap<Pair, u64>>,
    /// Streams waiting to read: woken by a drop of their pair.
    readers: Mutex<BTreeMap<u64, (Pair, Waker)>>,
    streams: AtomicU64,
}

/// Two hosts, in name order.
type Pair = (String, String);

fn pair(a: &str, b: &str) -> Pair {
    if a <= b {
        (a.to_owned(), b.to_owned())
    } else {
        (b.to_owned(), a.to_owned())
    }
}

impl Cuts {
    /// A partition between `a` and `b` begins (from `a` to `b` only if `one_way`).
    pub fn cut(&self, a: &str, b: &str, one_way: bool) {
        self.draws
            .lock()
            .push((a.to_owned(), b.to_owned(), one_way));
    }

    /// The partition drawn between `a` and `b` heals (one draw of that pair).
    pub fn heal(&self, a: &str, b: &str) {
        let mut draws = self.draws.lock();
        if let Some(i) = draws.iter().position(|(x, y, _)| x == a && y == b) {
            draws.remove(i);
        }
    }

    /// Drops every connection between `a` and `b` now, at both ends.
    pub fn reset(&self, a: &str, b: &str) {
        let key = pair(a, b);
        *self.resets.lock().entry(key.clone()).or_default() += 1;
        let woken: Vec<Waker> = {
            let mut readers = self.readers.lock();
            let ids: Vec<u64> = readers
                .iter()
                .filter(|(_, (p, _))| *p == key)
                .map(|(id, _)| *id)
                .collect();
            ids.iter()
                .filter_map(|id| readers.remove(id).map(|(_, w)| w))
                .collect()
        };
        woken.into_iter().for_each(Waker::wake);
    }

    fn drops(&self, a: &str, b: &str) -> u64 {
        self.resets.lock().get(&pair(a, b)).copied().unwrap_or(0)
    }

    /// Whether what `from` sends to `to` is cut now.
    pub fn is_cut(&self, from: &str, to: &str) -> bool {
        self.draws
            .lock()
            .iter()
            .any(|(a, b, one_way)| (a == from && b == to) || (!*one_way && a == to && b == from))
    }
}

/// Binds and dials on turmoil's simulated network (inside a turmoil host only), as host
/// `host`, under the run's [`Cuts`].
#[derive(Debug, Clone)]
pub struct TurmoilNetwork {
    host: String,
    cuts: Arc<Cuts>,
}

impl TurmoilNetwork {
    /// The network as host `host` sees it.
    pub fn new(host: String, cuts: Arc<Cuts>) -> Self {
        TurmoilNetwork { host, cuts }
    }

    fn stream(&self, s: turmoil::net::TcpStream) -> Stream {
        let peer = s
            .peer_addr()
            .ok()
            .and_then(|a| turmoil::reverse_lookup(a.ip()))
            .unwrap_or_default();
        Stream {
            id: self.cuts.streams.fetch_add(1, Ordering::Relaxed),
            born: self.cuts.drops(&self.host, &peer),
            inner: Some(s),
            from: self.host.clone(),
            to: peer,
            cuts: self.cuts.clone(),
            held: Vec::new(),
            closed: false,
        }
    }
}

/// One end of a connection: what it writes across a cut is held until the heal.
struct Stream {
    id: u64,
    /// The drops of this pair before the stream was made: one more fails it.
    born: u64,
    inner: Option<turmoil::net::TcpStream>,
    from: String,
    to: String,
    cuts: Arc<Cuts>,
    /// Written while the link was cut (or behind such bytes), not yet sent.
    held: Vec<u8>,
    /// Closed by this end while bytes were held: the close goes after them.
    closed: bool,
}

struct Listener {
    inner: turmoil::net::TcpListener,
    network: TurmoilNetwork,
}

impl Stream {
    fn cut(&self) -> bool {
        self.cuts.is_cut(&self.from, &self.to)
    }

    fn dropped(&self) -> bool {
        self.cuts.drops(&self.from, &self.to) != self.born
    }

    fn reset_error() -> io::Error {
        io::Error::new(
            io::ErrorKind::ConnectionReset,
            "the simulation dropped the connection",
        )
    }

    /// Sends the held bytes (the link is not cut); ready once none are left.
    fn poll_send_held(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let Some(inner) = self.inner.as_mut() else {
            return Poll::Ready(Err(io::ErrorKind::NotConnected.into()));
        };
        while !self.held.is_empty() {
            match Pin::new(&mut *inner).poll_write(cx, &self.held) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => {
                    self.held.drain(..n);
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        self.cuts.readers.lock().remove(&self.id);
        if self.dropped() || self.held.is_empty() && !self.cut() {
            return;
        }
        // Held bytes (or a close across a cut) go after the heal, then the close; the task
        // ends with the host if it crashes first.
        let (Some(mut inner), Ok(runtime)) =
            (self.inner.take(), tokio::runtime::Handle::try_current())
        else {
            return;
        };
        let (from, to, cuts) = (
            std::mem::take(&mut self.from),
            std::mem::take(&mut self.to),
            self.cuts.clone(),
        );
        let held = std::mem::take(&mut self.held);
        runtime.spawn(async move {
            while cuts.is_cut(&from, &to) {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            use tokio::io::AsyncWriteExt;
            if inner.write_all(&held).await.is_ok() {
                let _ = inner.shutdown().await;
            }
        });
    }
}

impl tokio::io::AsyncRead for Stream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.dropped() {
            return Poll::Ready(Err(Self::reset_error()));
        }
        let this = &mut *self;
        let Some(inner) = this.inner.as_mut() else {
            return Poll::Ready(Err(io::ErrorKind::NotConnected.into()));
        };
        let read = Pin::new(inner).poll_read(cx, buf);
        if read.is_pending() {
            this.cuts
                .readers
                .lock()
                .insert(this.id, (pair(&this.from, &this.to), cx.waker().clone()));
        }
        read
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if this.dropped() {
            return Poll::Ready(Err(Self::reset_error()));
        }
        if this.closed {
            return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
        }
        if this.cut() {
            this.held.extend_from_slice(buf);
            return Poll::Ready(Ok(buf.len()));
        }
        match this.poll_send_held(cx) {
            Poll::Ready(Ok(())) => {}
            other => return other.map(|r| r.map(|()| 0)),
        }
        match this.inner.as_mut() {
            Some(inner) => Pin::new(inner).poll_write(cx, buf),
            None => Poll::Ready(Err(io::ErrorKind::NotConnected.into())),
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.dropped() {
            return Poll::Ready(Err(Self::reset_error()));
        }
        if this.cut() {
            return Poll::Ready(Ok(()));
        }
        match this.poll_send_held(cx) {
            Poll::Ready(Ok(())) => {}
            other => return other,
        }
        match this.inner.as_mut() {
            Some(inner) => Pin::new(inner).poll_flush(cx),
            None => Poll::Ready(Ok(())),
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.dropped() {
            return Poll::Ready(Err(Self::reset_error()));
        }
        if this.cut() || !this.held.is_empty() && this.poll_send_held(cx).is_pending() {
            // The close goes after the held bytes, once the cut heals (see `Drop`).
            this.closed = true;
            return Poll::Ready(Ok(()));
        }
        this.closed = true;
        match this.inner.as_mut() {
            Some(inner) => Pin::new(inner).poll_shutdown(cx),
            None => Poll::Ready(Ok(())),
        }
    }
}

impl NetStream for Stream {
    fn local_addr(&self) -> io::Result<SocketAddr> {
        match &self.inner {
            Some(inner) => inner.local_addr(),
            None => Err(io::ErrorKind::NotConnected.into()),
        }
    }

    fn peer_addr(&self) -> io::Result<SocketAddr> {
        match &self.inner {
            Some(inner) => inner.peer_addr(),
            None => Err(io::ErrorKind::NotConnected.into()),
        }
    }
}

impl NetListener for Listener {
    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    fn accept(&self) -> NetFuture<'_, (Box<dyn NetStream>, SocketAddr)> {
        Box::pin(async move {
            let (s, addr) = self.inner.accept().await?;
            Ok((Box::new(self.network.stream(s)) as Box<dyn NetStream>, addr))
        })
    }
}

impl Network for TurmoilNetwork {
    fn bind<'a>(&'a self, endpoint: &'a str) -> NetFuture<'a, Box<dyn NetListener>> {
        Box::pin(async move {
            let inner = turmoil::net::TcpListener::bind(endpoint).await?;
            Ok(Box::new(Listener {
                inner,
                network: self.clone(),
            }) as Box<dyn NetListener>)
        })
    }

    fn connect<'a>(&'a self, endpoint: &'a str) -> NetFuture<'a, Box<dyn NetStream>> {
        Box::pin(async move {
            let peer = endpoint.split(':').next().unwrap_or(endpoint);
            // The SYN (or its answer) is lost across a cut and sent again, as TCP does.
            let mut retry = Duration::from_secs(1);
            while self.cuts.is_cut(&self.host, peer) || self.cuts.is_cut(peer, &self.host) {
                tokio::time::sleep(retry).await;
                retry = (retry * 2).min(Duration::from_secs(4));
            }
            let s = turmoil::net::TcpStream::connect(endpoint).await?;
            Ok(Box::new(self.stream(s)) as Box<dyn NetStream>)
        })
    }
}
