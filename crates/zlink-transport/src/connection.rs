//! One Ready connection: its lanes, its credit windows, and the reader and writer tasks.
//!
//! The writer serves the reply lane first, then control, then application frames, and writes a
//! batch when nothing more is ready or 64 KiB are gathered. Application and control frames are
//! only written within the receive window the peer granted in `HELLO`, so the peer's reader
//! never has to stop reading (and replies behind those frames are never held up on the wire);
//! the peer returns credit with `CREDIT` frames as its runtime takes frames out of the
//! [`crate::FrameReceiver`].

use std::sync::Arc;
use std::sync::Weak;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use bytes::{Bytes, BytesMut};
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::codec::{Decoder, Encoder, LengthDelimitedCodec};
use tokio_util::sync::CancellationToken;

use crate::envelope::{Envelope, Reply};
use crate::error::Lane;
use crate::inbound::{InboundFrame, InboundReply};
use crate::lane::{OutFrame, OutLane, QueueLimits};
use crate::peer::{DownReason, PeerEvent, PeerInfo};
use crate::stream::{PeerRead, PeerWrite};
use crate::transport::Shared;
use crate::wire::{self, HEARTBEAT_INTERVAL, LIVENESS_TIMEOUT, Window, kind};

/// Gather at most this much before writing.
const FLUSH_AT: usize = 64 * 1024;

/// A frame at least this long is written from its own buffer (after its length prefix)
/// instead of being copied into the gathering buffer; the bytes on the wire are the same.
const DIRECT_AT: usize = 64 * 1024;

/// Which credited plane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Plane {
    App,
    Control,
}

/// Credit the peer granted us (send side): its window, and credit it returned that the
/// writer has not folded in yet.
struct SendWindow {
    window: Window,
    returned_count: AtomicU64,
    returned_bytes: AtomicU64,
}

/// The window we granted the peer (receive side).
struct RecvWindow {
    window: Window,
    delivered_count: AtomicU64,
    delivered_bytes: AtomicU64,
    consumed_count: AtomicU64,
    consumed_bytes: AtomicU64,
    reported_count: AtomicU64,
    reported_bytes: AtomicU64,
}

impl RecvWindow {
    fn new(window: Window) -> Self {
        Self {
            window,
            delivered_count: AtomicU64::new(0),
            delivered_bytes: AtomicU64::new(0),
            consumed_count: AtomicU64::new(0),
            consumed_bytes: AtomicU64::new(0),
            reported_count: AtomicU64::new(0),
            reported_bytes: AtomicU64::new(0),
        }
    }

    /// Records a delivered frame; `false` when the peer overran the window it was granted.
    fn deliver(&self, len: u64) -> bool {
        let out_c = self.delivered_count.load(Ordering::Relaxed)
            - self.reported_count.load(Ordering::Acquire);
        let out_b = self.delivered_bytes.load(Ordering::Relaxed)
            - self.reported_bytes.load(Ordering::Acquire);
        if out_c + 1 > u64::from(self.window.count)
            || (out_c > 0 && out_b + len > self.window.bytes)
        {
            return false;
        }
        self.delivered_count.fetch_add(1, Ordering::Relaxed);
        self.delivered_bytes.fetch_add(len, Ordering::Release);
        true
    }

    /// Records frames the runtime took; `true` when the writer should send credit now.
    fn consume(&self, count: u64, len: u64) -> bool {
        let c = self.consumed_count.fetch_add(count, Ordering::AcqRel) + count;
        let b = self.consumed_bytes.fetch_add(len, Ordering::AcqRel) + len;
        let pending_c = c - self.reported_count.load(Ordering::Acquire);
        let pending_b = b - self.reported_bytes.load(Ordering::Acquire);
        pending_c * 4 >= u64::from(self.window.count)
            || pending_b * 4 >= self.window.bytes
            || c == self.delivered_count.load(Ordering::Acquire)
    }

    /// Credit to report now (count, bytes), marked as reported.
    fn take_report(&self) -> Option<(u32, u64)> {
        let c = self.consumed_count.load(Ordering::Acquire);
        let b = self.consumed_bytes.load(Ordering::Acquire);
        let rc = self.reported_count.load(Ordering::Relaxed);
        let rb = self.reported_bytes.load(Ordering::Relaxed);
        if c == rc && b == rb {
            return None;
        }
        self.reported_count.store(c, Ordering::Release);
        self.reported_bytes.store(b, Ordering::Release);
        Some(((c - rc).min(u64::from(u32::MAX)) as u32, b - rb))
    }
}

/// One Ready (or about to be Ready) connection.
pub(crate) struct Connection {
    pub(crate) info: Arc<PeerInfo>,
    pub(crate) app: OutLane,
    pub(crate) control: OutLane,
    pub(crate) reply: OutLane,
    wake: Notify,
    pub(crate) cancel: CancellationToken,
    down: Mutex<Option<DownReason>>,
    installed: AtomicBool,
    app_tx: SendWindow,
    control_tx: SendWindow,
    app_rx: RecvWindow,
    control_rx: RecvWindow,
    owner: Weak<Shared>,
}

pub(crate) struct ConnectionParams {
    pub(crate) info: PeerInfo,
    pub(crate) app_queue: QueueLimits,
    pub(crate) control_queue: QueueLimits,
    pub(crate) peer_app_window: Window,
    pub(crate) peer_control_window: Window,
    pub(crate) our_app_window: Window,
    pub(crate) our_control_window: Window,
}

impl Connection {
    pub(crate) fn new(
        p: ConnectionParams,
        owner: Weak<Shared>,
        parent: &CancellationToken,
    ) -> Self {
        let send = |window| SendWindow {
            window,
            returned_count: AtomicU64::new(0),
            returned_bytes: AtomicU64::new(0),
        };
        Self {
            info: Arc::new(p.info),
            app: OutLane::new(Lane::App, Some(p.app_queue)),
            control: OutLane::new(Lane::Control, Some(p.control_queue)),
            reply: OutLane::new(Lane::Reply, None),
            wake: Notify::new(),
            cancel: parent.child_token(),
            down: Mutex::new(None),
            installed: AtomicBool::new(false),
            app_tx: send(p.peer_app_window),
            control_tx: send(p.peer_control_window),
            app_rx: RecvWindow::new(p.our_app_window),
            control_rx: RecvWindow::new(p.our_control_window),
            owner,
        }
    }

    pub(crate) fn wake(&self) {
        self.wake.notify_one();
    }

    pub(crate) fn is_down(&self) -> bool {
        self.down.lock().is_some()
    }

    fn down_reason(&self) -> Option<DownReason> {
        *self.down.lock()
    }

    /// The runtime took `count` frames (`bytes` in all) of `plane` out of a receiver: return
    /// their credit.
    pub(crate) fn consumed(&self, plane: Plane, count: u64, bytes: u64) {
        let w = match plane {
            Plane::App => &self.app_rx,
            Plane::Control => &self.control_rx,
        };
        if w.consume(count, bytes) {
            self.wake();
        }
    }

    /// Marks the connection Ready and announces it; `false` if it already went down (then
    /// nothing is announced, and no `Down` will be).
    pub(crate) fn mark_installed(&self, shared: &Shared) -> bool {
        let d = self.down.lock();
        if d.is_some() {
            return false;
        }
        self.installed.store(true, Ordering::Release);
        shared.emit(PeerEvent::Up(self.info.clone()));
        true
    }

    /// Takes the connection down once: stops its tasks, refuses and drops queued frames,
    /// removes it from the peer table and (if it was announced) sends `Down`.
    pub(crate) fn close(&self, reason: DownReason) {
        {
            let mut d = self.down.lock();
            if d.is_some() {
                return;
            }
            *d = Some(reason);
        }
        tracing::debug!(peer = %self.info.rid, conn = %self.info.connection, ?reason, "connection down");
        self.cancel.cancel();
        self.app.close();
        self.control.close();
        self.reply.close();
        if let Some(shared) = self.owner.upgrade() {
            shared.forget(self);
            if self.installed.load(Ordering::Acquire) {
                shared.emit(PeerEvent::Down {
                    peer: self.info.clone(),
                    reason,
                });
            }
        }
    }
}

/// Starts the reader and writer of an installed connection.
pub(crate) fn spawn_io(
    shared: &Shared,
    conn: &Arc<Connection>,
    read: PeerRead,
    write: PeerWrite,
    leftover: BytesMut,
) {
    let c = conn.clone();
    let inbound = shared.inbound_senders();
    shared.tracker.spawn(async move {
        let reason = read_loop(&c, read, leftover, inbound).await;
        c.close(reason);
    });
    let c = conn.clone();
    shared.tracker.spawn(async move {
        write_loop(&c, write).await;
    });
}

pub(crate) struct InboundSenders {
    pub(crate) app: tokio::sync::mpsc::UnboundedSender<crate::inbound::FrameBatch>,
    pub(crate) control: tokio::sync::mpsc::UnboundedSender<crate::inbound::FrameBatch>,
    pub(crate) reply: tokio::sync::mpsc::UnboundedSender<Vec<InboundReply>>,
}

async fn read_loop(
    conn: &Arc<Connection>,
    mut read: PeerRead,
    mut buf: BytesMut,
    inbound: InboundSenders,
) -> DownReason {
    let mut codec = wire::codec();
    // One liveness timer for the connection, moved on only when it fires (not re-armed per
    // read): a read batch costs no timer-wheel work.
    let mut last_read = Instant::now();
    let liveness = tokio::time::sleep_until(last_read + LIVENESS_TIMEOUT);
    tokio::pin!(liveness);
    // Registered once, not per read.
    let cancelled = conn.cancel.cancelled();
    tokio::pin!(cancelled);
    loop {
        let mut app = Vec::new();
        let mut control = Vec::new();
        let mut replies = Vec::new();
        // A GOODBYE ends the connection, but only after the frames read before it in the
        // same batch are delivered (a reply written just before an orderly close completes).
        let mut closed = false;
        loop {
            let frame = match codec.decode(&mut buf) {
                Ok(Some(f)) => f.freeze(),
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(peer = %conn.info.rid, error = %e, "undecodable frame");
                    return DownReason::Protocol;
                }
            };
            let Some(&k) = frame.first() else {
                return DownReason::Protocol;
            };
            let len = frame.len() as u64;
            match k {
                kind::HEARTBEAT => {}
                kind::GOODBYE => {
                    closed = true;
                    break;
                }
                kind::CREDIT => {
                    let Ok((plane, count, bytes)) = wire::decode_credit(frame) else {
                        return DownReason::Protocol;
                    };
                    let w = match plane {
                        wire::PLANE_APP => &conn.app_tx,
                        wire::PLANE_CONTROL => &conn.control_tx,
                        _ => return DownReason::Protocol,
                    };
                    w.returned_count
                        .fetch_add(u64::from(count), Ordering::AcqRel);
                    w.returned_bytes.fetch_add(bytes, Ordering::AcqRel);
                    conn.wake();
                }
                kind::APP | kind::CONTROL => {
                    let (window, out) = if k == kind::APP {
                        (&conn.app_rx, &mut app)
                    } else {
                        (&conn.control_rx, &mut control)
                    };
                    if !window.deliver(len) {
                        tracing::warn!(peer = %conn.info.rid, "peer overran its receive window");
                        return DownReason::Protocol;
                    }
                    match Envelope::decode_from(frame, Some(&conn.info.rid)) {
                        Ok(envelope) => out.push(InboundFrame {
                            peer: conn.info.clone(),
                            envelope,
                            wire_len: len as u32,
                        }),
                        Err(e) => {
                            tracing::warn!(peer = %conn.info.rid, error = %e, "bad envelope");
                            return DownReason::Protocol;
                        }
                    }
                }
                kind::REPLY => match Reply::decode(frame) {
                    Ok(reply) => replies.push(InboundReply {
                        peer: conn.info.clone(),
                        reply,
                    }),
                    Err(e) => {
                        tracing::warn!(peer = %conn.info.rid, error = %e, "bad reply");
                        return DownReason::Protocol;
                    }
                },
                other => {
                    tracing::warn!(peer = %conn.info.rid, kind = other, "unexpected frame kind");
                    return DownReason::Protocol;
                }
            }
        }
        // Replies first: a consumer waiting on them never waits behind this batch.
        if !replies.is_empty() {
            let _ = inbound.reply.send(replies);
        }
        if !control.is_empty() {
            let _ = inbound.control.send(crate::inbound::FrameBatch {
                conn: conn.clone(),
                plane: Plane::Control,
                frames: control,
            });
        }
        if !app.is_empty() {
            let _ = inbound.app.send(crate::inbound::FrameBatch {
                conn: conn.clone(),
                plane: Plane::App,
                frames: app,
            });
        }
        if closed {
            return DownReason::Closed;
        }
        buf.reserve(64 * 1024);
        tokio::select! {
            biased;
            () = &mut cancelled => {
                let reason = conn.down_reason().unwrap_or(DownReason::Local);
                if matches!(reason, DownReason::Local | DownReason::Superseded) {
                    // The writer sends GOODBYE; keep reading (and discarding) until the peer
                    // closes, so unread bytes do not turn our close into a reset that could
                    // overtake the GOODBYE. Bounded.
                    let _ = tokio::time::timeout(HEARTBEAT_INTERVAL, async {
                        loop {
                            buf.clear();
                            match read.read_buf(&mut buf).await {
                                Ok(0) | Err(_) => break,
                                Ok(_) => {}
                            }
                        }
                    })
                    .await;
                }
                return reason;
            }
            () = &mut liveness => {
                let due = last_read + LIVENESS_TIMEOUT;
                if Instant::now() >= due {
                    return DownReason::TimedOut;
                }
                liveness.as_mut().reset(due);
            }
            r = read.read_buf(&mut buf) => match r {
                Ok(0) => return DownReason::ConnectionLost,
                Ok(_) => last_read = Instant::now(),
                Err(e) => {
                    tracing::debug!(peer = %conn.info.rid, error = %e, "read failed");
                    return DownReason::ConnectionLost;
                }
            }
        }
    }
}

/// Frames gathered for one write, per lane, for releasing their reservations afterwards.
#[derive(Default)]
struct Gathered {
    reply: (usize, usize),
    control: (usize, usize),
    app: (usize, usize),
}

struct Outstanding {
    count: u64,
    bytes: u64,
}

impl Outstanding {
    fn fold(&mut self, w: &SendWindow) {
        let c = w.returned_count.swap(0, Ordering::AcqRel);
        let b = w.returned_bytes.swap(0, Ordering::AcqRel);
        self.count = self.count.saturating_sub(c);
        self.bytes = self.bytes.saturating_sub(b);
    }

    fn admit(&mut self, w: &Window, len: usize) -> bool {
        let len = len as u64;
        if self.count >= u64::from(w.count) || (self.count > 0 && self.bytes + len > w.bytes) {
            return false;
        }
        self.count += 1;
        self.bytes += len;
        true
    }
}

fn encode_into(codec: &mut LengthDelimitedCodec, frame: Bytes, buf: &mut BytesMut) {
    // Every frame was checked against MAX_FRAME_LEN when it was encoded.
    if let Err(e) = codec.encode(frame, buf) {
        tracing::error!(error = %e, "frame rejected by the length codec");
    }
}

/// Lays `frame` out for writing: its length prefix goes into `buf`, and so does each of its
/// two parts (head, tail) shorter than [`DIRECT_AT`]; a longer part is written from its own
/// buffer instead: `buf` so far and then the part are queued in `parts` as they are (no
/// copy). The bytes written are those of the length codec on the joined frame.
fn lay_out(frame: OutFrame, buf: &mut BytesMut, parts: &mut Vec<Bytes>) {
    let len = frame.len();
    let Some(prefix) = u32::try_from(len)
        .ok()
        .filter(|_| len <= wire::MAX_FRAME_LEN)
    else {
        // Every frame was checked against MAX_FRAME_LEN when it was encoded.
        tracing::error!(len, "frame rejected by the length codec");
        return;
    };
    buf.extend_from_slice(&prefix.to_be_bytes());
    for part in [frame.head, frame.tail] {
        if part.len() < DIRECT_AT {
            buf.extend_from_slice(&part);
        } else {
            parts.push(buf.split().freeze());
            parts.push(part);
        }
    }
}

/// Writes the laid-out `parts` and then what `buf` holds, in order.
async fn write_parts(write: &mut PeerWrite, parts: &[Bytes], buf: &[u8]) -> std::io::Result<()> {
    for part in parts {
        write.write_all(part).await?;
    }
    if !buf.is_empty() {
        write.write_all(buf).await?;
    }
    // A no-op on plain TCP; TLS hands its buffered records to the socket.
    write.flush().await
}

async fn write_loop(conn: &Arc<Connection>, mut write: PeerWrite) {
    let mut codec = wire::codec();
    let mut buf = BytesMut::with_capacity(FLUSH_AT * 2);
    let mut batch: Vec<OutFrame> = Vec::new();
    let mut parts: Vec<Bytes> = Vec::new();
    let mut app_out = Outstanding { count: 0, bytes: 0 };
    let mut control_out = Outstanding { count: 0, bytes: 0 };
    let mut last_write = Instant::now();
    // One heartbeat timer, moved on only when it fires (an idle wait arms no new timer).
    let heartbeat = tokio::time::sleep_until(last_write + HEARTBEAT_INTERVAL);
    tokio::pin!(heartbeat);
    // Registered once, not per wait or write.
    let cancelled = conn.cancel.cancelled();
    tokio::pin!(cancelled);
    loop {
        if conn.cancel.is_cancelled() {
            break;
        }
        app_out.fold(&conn.app_tx);
        control_out.fold(&conn.control_tx);
        buf.clear();
        parts.clear();
        for (w, plane) in [
            (&conn.app_rx, wire::PLANE_APP),
            (&conn.control_rx, wire::PLANE_CONTROL),
        ] {
            if let Some((c, b)) = w.take_report() {
                encode_into(&mut codec, wire::credit(plane, c, b), &mut buf);
            }
        }
        let mut g = Gathered::default();
        let mut size = buf.len();
        let room = |size: &mut usize, len: usize| {
            let ok = *size < FLUSH_AT;
            if ok {
                *size += len + 4;
            }
            ok
        };
        g.reply = conn.reply.pop_while(&mut batch, |len| room(&mut size, len));
        let win = conn.control_tx.window;
        g.control = conn.control.pop_while(&mut batch, |len| {
            size < FLUSH_AT && control_out.admit(&win, len) && room(&mut size, len)
        });
        let win = conn.app_tx.window;
        g.app = conn.app.pop_while(&mut batch, |len| {
            size < FLUSH_AT && app_out.admit(&win, len) && room(&mut size, len)
        });
        for frame in batch.drain(..) {
            lay_out(frame, &mut buf, &mut parts);
        }
        if buf.is_empty() && parts.is_empty() {
            if last_write.elapsed() >= HEARTBEAT_INTERVAL {
                encode_into(&mut codec, wire::bare(kind::HEARTBEAT), &mut buf);
            } else {
                tokio::select! {
                    biased;
                    () = &mut cancelled => break,
                    () = conn.wake.notified() => {}
                    () = &mut heartbeat => heartbeat.as_mut().reset(last_write + HEARTBEAT_INTERVAL),
                }
                continue;
            }
        }
        let written = tokio::select! {
            biased;
            () = &mut cancelled => break,
            r = write_parts(&mut write, &parts, &buf) => r,
        };
        if let Err(e) = written {
            tracing::debug!(peer = %conn.info.rid, error = %e, "write failed");
            // The reader usually knows better why (a GOODBYE or EOF may be waiting there);
            // give it a moment before calling the connection lost.
            let _ = tokio::time::timeout(HEARTBEAT_INTERVAL, conn.cancel.cancelled()).await;
            conn.close(DownReason::ConnectionLost);
            break;
        }
        last_write = Instant::now();
        conn.reply.release(g.reply.0, g.reply.1);
        conn.control.release(g.control.0, g.control.1);
        conn.app.release(g.app.0, g.app.1);
    }
    // An orderly close tells the peer (bounded: a stalled peer does not hold shutdown up).
    if matches!(
        conn.down_reason(),
        Some(DownReason::Local | DownReason::Superseded)
    ) {
        let reason = if conn.down_reason() == Some(DownReason::Superseded) {
            2
        } else {
            0
        };
        buf.clear();
        encode_into(&mut codec, wire::goodbye(reason), &mut buf);
        let _ = tokio::time::timeout(HEARTBEAT_INTERVAL, async {
            let _ = write.write_all(&buf).await;
            let _ = write.shutdown().await;
        })
        .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn send_window_admits_one_oversized_frame_only_when_nothing_is_outstanding() {
        let w = Window {
            count: 10,
            bytes: 100,
        };
        let mut o = Outstanding { count: 0, bytes: 0 };
        assert!(o.admit(&w, 500));
        assert!(!o.admit(&w, 1));
        let mut o = Outstanding { count: 0, bytes: 0 };
        assert!(o.admit(&w, 60));
        assert!(o.admit(&w, 40));
        assert!(!o.admit(&w, 1));
    }

    /// The bytes `frame` is written as (its parts, then the gathering buffer), and the parts.
    fn laid_out(frame: OutFrame) -> (Vec<u8>, Vec<Bytes>) {
        let mut buf = BytesMut::new();
        let mut parts = Vec::new();
        lay_out(frame, &mut buf, &mut parts);
        let mut all: Vec<u8> = parts.iter().flat_map(|p| p.iter().copied()).collect();
        all.extend_from_slice(&buf);
        (all, parts)
    }

    #[test]
    fn a_frame_in_two_parts_is_written_as_the_codec_writes_the_joined_frame() {
        let bytes = |len: usize, seed: usize| -> Bytes {
            (0..len)
                .map(|i| (i * 31 + seed) as u8)
                .collect::<Vec<u8>>()
                .into()
        };
        for (head_len, tail_len) in [
            (10, 0),
            (10, 5),
            (DIRECT_AT - 1, 0),
            (DIRECT_AT, 0),
            (10, DIRECT_AT - 11),
            (10, DIRECT_AT),
            (108, 256 * 1024),
            (DIRECT_AT, DIRECT_AT),
        ] {
            let (head, tail) = (bytes(head_len, 1), bytes(tail_len, 2));
            let mut joined = head.to_vec();
            joined.extend_from_slice(&tail);
            let mut expected = BytesMut::new();
            encode_into(&mut wire::codec(), Bytes::from(joined), &mut expected);
            let (all, parts) = laid_out(OutFrame {
                head: head.clone(),
                tail: tail.clone(),
            });
            assert_eq!(all, expected.to_vec(), "head {head_len}, tail {tail_len}");
            // A long part is written from its own buffer, not copied.
            for part in [&head, &tail] {
                if part.len() >= DIRECT_AT {
                    assert!(parts.iter().any(|p| p.as_ptr() == part.as_ptr()));
                }
            }
        }
    }

    #[test]
    fn receive_window_refuses_a_peer_that_overruns_it() {
        let r = RecvWindow::new(Window {
            count: 2,
            bytes: 100,
        });
        assert!(r.deliver(50));
        assert!(r.deliver(50));
        assert!(!r.deliver(1));
        r.consume(1, 50);
        r.consume(1, 50);
        assert_eq!(r.take_report(), Some((2, 100)));
        assert!(r.deliver(100));
    }
}
