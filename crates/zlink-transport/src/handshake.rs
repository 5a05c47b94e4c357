//! The admission handshake (`docs/transport.md`, "Handshake").
//!
//! ```text
//! dialer D                         acceptor A
//!   HELLO(D)  ------------------->   verify D       (or REJECT, close)
//!   verify A  <-------------------   HELLO(A)
//!   if D < A: decide; COMMIT or REJECT(Duplicate|Stale) ---->  install on COMMIT
//!   else:     CONFIRM  ---------->   decide; COMMIT or REJECT
//!   install on COMMIT <-----------
//! ```
//!
//! The node with the smaller RoutingId decides for every connection of the pair, whichever side
//! dialed, under its peer-table lock: the first candidate to reach the decision becomes Ready,
//! later candidates of the same lifecycle generation collapse (`REJECT Duplicate`), a newer
//! generation supersedes the Ready connection, an older one is refused as stale. The other
//! node installs only on `COMMIT`, so both ends hold the same single connection (guide 10 §2).

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::codec::{Decoder, Encoder, LengthDelimitedCodec};

use crate::connection::{Connection, spawn_io};
use crate::error::{HandshakeRejection, TransportError};
use crate::peer::{DownReason, PeerIntent};
use crate::transport::Shared;
use crate::wire::{self, HANDSHAKE_TIMEOUT, Hello, kind};

/// A socket during the handshake: framed reads and writes with the connection's codec.
pub(crate) struct HandshakeIo {
    stream: TcpStream,
    buf: BytesMut,
    codec: LengthDelimitedCodec,
    pub(crate) local_addr: SocketAddr,
    pub(crate) remote_addr: SocketAddr,
}

impl HandshakeIo {
    pub(crate) fn new(stream: TcpStream) -> Result<Self, TransportError> {
        let _ = stream.set_nodelay(true);
        let local_addr = stream
            .local_addr()
            .map_err(|e| TransportError::io("local address", e))?;
        let remote_addr = stream
            .peer_addr()
            .map_err(|e| TransportError::io("peer address", e))?;
        Ok(Self {
            stream,
            buf: BytesMut::with_capacity(4096),
            codec: wire::codec(),
            local_addr,
            remote_addr,
        })
    }

    pub(crate) async fn read(&mut self) -> Result<Bytes, TransportError> {
        loop {
            match self.codec.decode(&mut self.buf) {
                Ok(Some(f)) => return Ok(f.freeze()),
                Ok(None) => {}
                Err(e) => return Err(TransportError::Protocol(e.to_string())),
            }
            let n = self
                .stream
                .read_buf(&mut self.buf)
                .await
                .map_err(|e| TransportError::io("handshake read", e))?;
            if n == 0 {
                return Err(TransportError::io(
                    "handshake read",
                    std::io::ErrorKind::UnexpectedEof.into(),
                ));
            }
        }
    }

    pub(crate) async fn write(&mut self, frame: Bytes) -> Result<(), TransportError> {
        let mut out = BytesMut::with_capacity(frame.len() + 4);
        self.codec
            .encode(frame, &mut out)
            .map_err(|e| TransportError::Protocol(e.to_string()))?;
        self.stream
            .write_all(&out)
            .await
            .map_err(|e| TransportError::io("handshake write", e))
    }

    /// Sends `REJECT` (best effort) and returns the matching local error.
    async fn refuse(mut self, rejection: HandshakeRejection) -> TransportError {
        let _ = self.write(wire::encode_reject(&rejection)).await;
        let _ = self.stream.shutdown().await;
        TransportError::Handshake {
            rejection,
            by_remote: false,
        }
    }

    /// Reads the remote's `HELLO` (a `REJECT` becomes the remote's rejection).
    async fn read_hello(&mut self) -> Result<Result<Hello, HandshakeRejection>, TransportError> {
        let frame = self.read().await?;
        match frame.first() {
            Some(&kind::REJECT) => Err(remote_rejection(frame)),
            _ => Ok(Hello::decode(frame)),
        }
    }

    /// Reads the decision step (`CONFIRM` or `COMMIT` as `expect`), or the remote's rejection.
    async fn read_step(&mut self, expect: u8) -> Result<(), TransportError> {
        let frame = self.read().await?;
        match frame.first() {
            Some(&k) if k == expect && frame.len() == 1 => Ok(()),
            Some(&kind::REJECT) => Err(remote_rejection(frame)),
            _ => Err(TransportError::Protocol(format!(
                "expected handshake step {expect:#04x}"
            ))),
        }
    }

    #[cfg(test)]
    pub(crate) fn into_stream(self) -> TcpStream {
        self.stream
    }

    fn into_parts(
        self,
    ) -> (
        tokio::net::tcp::OwnedReadHalf,
        tokio::net::tcp::OwnedWriteHalf,
        BytesMut,
    ) {
        let (r, w) = self.stream.into_split();
        (r, w, self.buf)
    }
}

fn remote_rejection(frame: Bytes) -> TransportError {
    let rejection = wire::decode_reject(frame).unwrap_or_else(|r| r);
    TransportError::Handshake {
        rejection,
        by_remote: true,
    }
}

/// Dials `intent.endpoint` once and runs the dialer side of the handshake.
pub(crate) async fn dial(
    shared: &Arc<Shared>,
    intent: &PeerIntent,
) -> Result<Arc<Connection>, TransportError> {
    let stream = TcpStream::connect(intent.endpoint.as_str())
        .await
        .map_err(|e| TransportError::io("connect", e))?;
    let io = HandshakeIo::new(stream)?;
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, dial_handshake(shared, io, intent)).await {
        Ok(r) => r,
        Err(_) => Err(TransportError::HandshakeTimedOut(HANDSHAKE_TIMEOUT)),
    }
}

async fn dial_handshake(
    shared: &Arc<Shared>,
    mut io: HandshakeIo,
    intent: &PeerIntent,
) -> Result<Arc<Connection>, TransportError> {
    io.write(shared.hello().encode()).await?;
    let remote = match io.read_hello().await? {
        Ok(h) => h,
        Err(r) => return Err(io.refuse(r).await),
    };
    shared.learned(&intent.endpoint, &remote.rid);
    if let Err(r) = shared.verify(&remote, Some(intent)) {
        return Err(io.refuse(r).await);
    }
    if shared.rid() < &remote.rid {
        let conn = match shared.decide(&remote, &io, true) {
            Ok(c) => c,
            Err(Decline::Rejected(r)) => return Err(io.refuse(r).await),
            Err(Decline::ShuttingDown) => return Err(TransportError::ShuttingDown),
        };
        if let Err(e) = io.write(wire::bare(kind::COMMIT)).await {
            conn.close(DownReason::ConnectionLost);
            return Err(e);
        }
        start(shared, conn, io)
    } else {
        io.write(wire::bare(kind::CONFIRM)).await?;
        io.read_step(kind::COMMIT).await?;
        let conn = shared.install(&remote, &io, true)?;
        start(shared, conn, io)
    }
}

/// Runs the acceptor side of the handshake on an accepted socket.
pub(crate) async fn accept(
    shared: &Arc<Shared>,
    stream: TcpStream,
) -> Result<Arc<Connection>, TransportError> {
    let io = HandshakeIo::new(stream)?;
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, accept_handshake(shared, io)).await {
        Ok(r) => r,
        Err(_) => Err(TransportError::HandshakeTimedOut(HANDSHAKE_TIMEOUT)),
    }
}

async fn accept_handshake(
    shared: &Arc<Shared>,
    mut io: HandshakeIo,
) -> Result<Arc<Connection>, TransportError> {
    let remote = match io.read_hello().await? {
        Ok(h) => h,
        Err(r) => return Err(io.refuse(r).await),
    };
    let intent = shared.intent_for_rid(&remote.rid);
    if let Err(r) = shared.verify(&remote, intent.as_ref()) {
        return Err(io.refuse(r).await);
    }
    io.write(shared.hello().encode()).await?;
    if shared.rid() < &remote.rid {
        io.read_step(kind::CONFIRM).await?;
        let conn = match shared.decide(&remote, &io, false) {
            Ok(c) => c,
            Err(Decline::Rejected(r)) => return Err(io.refuse(r).await),
            Err(Decline::ShuttingDown) => return Err(TransportError::ShuttingDown),
        };
        if let Err(e) = io.write(wire::bare(kind::COMMIT)).await {
            conn.close(DownReason::ConnectionLost);
            return Err(e);
        }
        start(shared, conn, io)
    } else {
        io.read_step(kind::COMMIT).await?;
        let conn = shared.install(&remote, &io, false)?;
        start(shared, conn, io)
    }
}

/// Why the deciding side did not install a candidate.
pub(crate) enum Decline {
    Rejected(HandshakeRejection),
    ShuttingDown,
}

fn start(
    shared: &Arc<Shared>,
    conn: Arc<Connection>,
    io: HandshakeIo,
) -> Result<Arc<Connection>, TransportError> {
    tracing::debug!(
        peer = %conn.info.rid,
        conn = %conn.info.connection,
        initiated_locally = conn.info.initiated_locally,
        "connection ready"
    );
    if !conn.mark_installed(shared) {
        return Err(TransportError::Unavailable);
    }
    let (r, w, leftover) = io.into_parts();
    spawn_io(shared, &conn, r, w, leftover);
    Ok(conn)
}
