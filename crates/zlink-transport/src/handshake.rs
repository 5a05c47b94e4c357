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
#[cfg(test)]
use tokio::net::TcpStream;
use tokio_util::codec::{Decoder, Encoder, LengthDelimitedCodec};

use crate::connection::{Connection, spawn_io};
use crate::error::{HandshakeRejection, TransportError};
use crate::network::Connected;
use crate::peer::{DownReason, PeerIntent};
use crate::stream::{PeerRead, PeerStream, PeerWrite};
use crate::tls::SecurityIdentity;
use crate::transport::Shared;
use crate::wire::{self, HANDSHAKE_TIMEOUT, Hello, kind};

/// A socket during the handshake: framed reads and writes with the connection's codec.
pub(crate) struct HandshakeIo {
    stream: PeerStream,
    buf: BytesMut,
    codec: LengthDelimitedCodec,
    pub(crate) local_addr: SocketAddr,
    pub(crate) remote_addr: SocketAddr,
}

impl HandshakeIo {
    /// A plain socket (the TLS session, if any, is set up by [`Self::secure`]).
    pub(crate) fn new(connected: Connected) -> Result<Self, TransportError> {
        let (local_addr, remote_addr, stream) = match connected {
            Connected::Tcp(stream) => {
                let _ = stream.set_nodelay(true);
                (
                    stream.local_addr(),
                    stream.peer_addr(),
                    PeerStream::Plain(stream),
                )
            }
            Connected::Net(stream) => (
                stream.local_addr(),
                stream.peer_addr(),
                PeerStream::Net(stream),
            ),
        };
        let local_addr = local_addr.map_err(|e| TransportError::io("local address", e))?;
        let remote_addr = remote_addr.map_err(|e| TransportError::io("peer address", e))?;
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
        match self.stream {
            PeerStream::Plain(s) => s,
            PeerStream::Net(_) => panic!("a test of a replaced network has no tokio socket"),
            PeerStream::Tls(s) => match *s {
                tokio_rustls::TlsStream::Client(c) => c.into_inner().0,
                tokio_rustls::TlsStream::Server(c) => c.into_inner().0,
            },
        }
    }

    fn into_parts(self) -> (PeerRead, PeerWrite, BytesMut) {
        let (r, w) = self.stream.into_split();
        (r, w, self.buf)
    }

    /// Runs the TLS handshake on the plain socket when this transport speaks TLS: as the
    /// client verifying the server for `expected`, or as the server requiring a client
    /// certificate under the CA. A plain transport stays plain.
    async fn secure(
        mut self,
        shared: &Shared,
        dial: Option<Option<&SecurityIdentity>>,
    ) -> Result<Self, TransportError> {
        let Some(tls) = shared.tls() else {
            return Ok(self);
        };
        let PeerStream::Plain(tcp) = self.stream else {
            return Ok(self);
        };
        let tls_failed = |context: &'static str| {
            move |source: std::io::Error| TransportError::Tls { context, source }
        };
        let stream = match dial {
            Some(expected) => {
                let name = match expected {
                    Some(SecurityIdentity::Tls(name)) => Some(name.as_str()),
                    _ => None,
                };
                let (connector, server_name) = tls
                    .connector(name)
                    .map_err(|e| TransportError::InvalidArgument(e.to_string()))?;
                let s = connector
                    .connect(server_name, tcp)
                    .await
                    .map_err(tls_failed("TLS client handshake"))?;
                tokio_rustls::TlsStream::Client(s)
            }
            None => {
                let s = tls
                    .acceptor()
                    .accept(tcp)
                    .await
                    .map_err(tls_failed("TLS server handshake"))?;
                tokio_rustls::TlsStream::Server(s)
            }
        };
        self.stream = PeerStream::Tls(Box::new(stream));
        Ok(self)
    }

    /// The acceptor's check of the dialer's certificate against the identity the intent it
    /// holds for the dialer expects (from the dialer's descriptor).
    fn admits(
        &self,
        shared: &Shared,
        intent: Option<&PeerIntent>,
    ) -> Result<(), HandshakeRejection> {
        let Some(expected) = intent.and_then(|i| i.expected_identity.as_ref()) else {
            return Ok(());
        };
        let ours = shared.identity();
        match (shared.tls(), expected) {
            (Some(tls), SecurityIdentity::Tls(name)) => {
                if tls.peer_is(self.stream.peer_certificates(), name) {
                    Ok(())
                } else {
                    Err(HandshakeRejection::SecurityIdentity {
                        expected: expected.to_string(),
                        found: "a certificate not valid for that name".into(),
                    })
                }
            }
            (None, SecurityIdentity::Plaintext) => Ok(()),
            _ => Err(HandshakeRejection::SecurityIdentity {
                expected: expected.to_string(),
                found: ours.to_string(),
            }),
        }
    }
}

/// Whether this transport can speak to a peer that published `expected` (TLS to TLS, plain
/// to plain); checked before dialing.
fn compatible(shared: &Shared, intent: &PeerIntent) -> Result<(), TransportError> {
    let ours = shared.identity();
    match (&ours, intent.expected_identity.as_ref()) {
        (_, None)
        | (SecurityIdentity::Plaintext, Some(SecurityIdentity::Plaintext))
        | (SecurityIdentity::Tls(_), Some(SecurityIdentity::Tls(_))) => Ok(()),
        (_, Some(theirs)) => Err(TransportError::Handshake {
            rejection: HandshakeRejection::SecurityIdentity {
                expected: theirs.to_string(),
                found: ours.to_string(),
            },
            by_remote: false,
        }),
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
    compatible(shared, intent)?;
    let stream = Connected::connect(shared.network(), intent.endpoint.as_str())
        .await
        .map_err(|e| TransportError::io("connect", e))?;
    let io = HandshakeIo::new(stream)?;
    let handshake = async {
        let io = io
            .secure(shared, Some(intent.expected_identity.as_ref()))
            .await?;
        dial_handshake(shared, io, intent).await
    };
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake).await {
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
    stream: Connected,
) -> Result<Arc<Connection>, TransportError> {
    let io = HandshakeIo::new(stream)?;
    let handshake = async {
        let io = io.secure(shared, None).await?;
        accept_handshake(shared, io).await
    };
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake).await {
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
    if let Err(r) = io.admits(shared, intent.as_ref()) {
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
