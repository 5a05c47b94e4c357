//! What the transport delivers to the runtime: peer events, application and control frames
//! (credited: taking a frame out returns its receive-window credit to the sender), and replies.

use std::collections::VecDeque;
use std::sync::Arc;

use tokio::sync::mpsc;

use crate::connection::{Connection, Plane};
use crate::envelope::{Envelope, Reply};
use crate::peer::{PeerEvent, PeerInfo};

/// An application or control frame from a peer connection.
#[derive(Debug, Clone)]
pub struct InboundFrame {
    pub(crate) peer: Arc<PeerInfo>,
    pub(crate) envelope: Envelope,
    pub(crate) wire_len: u32,
}

impl InboundFrame {
    /// The connection it arrived on.
    pub fn peer(&self) -> &Arc<PeerInfo> {
        &self.peer
    }

    /// The envelope.
    pub fn envelope(&self) -> &Envelope {
        &self.envelope
    }

    /// Takes the envelope out.
    pub fn into_envelope(self) -> Envelope {
        self.envelope
    }
}

/// A reply or error reply from a peer connection.
#[derive(Debug, Clone)]
pub struct InboundReply {
    pub(crate) peer: Arc<PeerInfo>,
    pub(crate) reply: Reply,
}

impl InboundReply {
    /// The connection it arrived on.
    pub fn peer(&self) -> &Arc<PeerInfo> {
        &self.peer
    }

    /// The reply.
    pub fn reply(&self) -> &Reply {
        &self.reply
    }

    /// Takes the reply out.
    pub fn into_reply(self) -> Reply {
        self.reply
    }
}

pub(crate) struct FrameBatch {
    pub(crate) conn: Arc<Connection>,
    pub(crate) plane: Plane,
    pub(crate) frames: Vec<InboundFrame>,
}

/// Receives application (or control) frames of every peer connection, in each connection's
/// order. Taking a frame out returns its credit to the sender; frames not taken out hold the
/// sender within its window (backpressure without ever stalling the socket reader).
pub struct FrameReceiver {
    rx: mpsc::UnboundedReceiver<FrameBatch>,
    current: Option<(Arc<Connection>, Plane, std::vec::IntoIter<InboundFrame>)>,
    /// Frames and bytes taken from `current` whose credit is not returned yet.
    taken: (u64, u64),
}

const CREDIT_BATCH: u64 = 64;

impl std::fmt::Debug for FrameReceiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrameReceiver").finish_non_exhaustive()
    }
}

impl FrameReceiver {
    pub(crate) fn new(rx: mpsc::UnboundedReceiver<FrameBatch>) -> Self {
        Self {
            rx,
            current: None,
            taken: (0, 0),
        }
    }

    fn next_buffered(&mut self) -> Option<InboundFrame> {
        let (conn, plane, it) = self.current.as_mut()?;
        match it.next() {
            Some(f) => {
                // Credit is returned per CREDIT_BATCH frames taken and when a read batch is
                // used up, not per frame (fewer atomic operations on the hot path).
                self.taken.0 += 1;
                self.taken.1 += u64::from(f.wire_len);
                if self.taken.0 >= CREDIT_BATCH || it.len() == 0 {
                    conn.consumed(*plane, self.taken.0, self.taken.1);
                    self.taken = (0, 0);
                }
                Some(f)
            }
            None => {
                self.current = None;
                None
            }
        }
    }

    /// The next frame; `None` once the transport has shut down and everything was taken.
    pub async fn recv(&mut self) -> Option<InboundFrame> {
        loop {
            if let Some(f) = self.next_buffered() {
                return Some(f);
            }
            let b = self.rx.recv().await?;
            self.current = Some((b.conn, b.plane, b.frames.into_iter()));
        }
    }

    /// The next frame if one is ready.
    pub fn try_recv(&mut self) -> Option<InboundFrame> {
        loop {
            if let Some(f) = self.next_buffered() {
                return Some(f);
            }
            let b = self.rx.try_recv().ok()?;
            self.current = Some((b.conn, b.plane, b.frames.into_iter()));
        }
    }
}

/// Receives replies and error replies of every peer connection. Replies are not credited:
/// they complete requests this side issued, so the runtime's own request bound limits them.
pub struct ReplyReceiver {
    rx: mpsc::UnboundedReceiver<Vec<InboundReply>>,
    buf: VecDeque<InboundReply>,
}

impl std::fmt::Debug for ReplyReceiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplyReceiver").finish_non_exhaustive()
    }
}

impl ReplyReceiver {
    pub(crate) fn new(rx: mpsc::UnboundedReceiver<Vec<InboundReply>>) -> Self {
        Self {
            rx,
            buf: VecDeque::new(),
        }
    }

    /// The next reply; `None` once the transport has shut down and everything was taken.
    pub async fn recv(&mut self) -> Option<InboundReply> {
        loop {
            if let Some(r) = self.buf.pop_front() {
                return Some(r);
            }
            self.buf.extend(self.rx.recv().await?);
        }
    }

    /// The next reply if one is ready.
    pub fn try_recv(&mut self) -> Option<InboundReply> {
        loop {
            if let Some(r) = self.buf.pop_front() {
                return Some(r);
            }
            self.buf.extend(self.rx.try_recv().ok()?);
        }
    }
}

/// Everything a started transport delivers. Each receiver is independent: the runtime may
/// drain them from different tasks.
#[derive(Debug)]
#[non_exhaustive]
pub struct Inbound {
    /// Peer Up/Down events.
    pub events: mpsc::UnboundedReceiver<PeerEvent>,
    /// Application frames.
    pub app: FrameReceiver,
    /// Framework control frames (own namespace: never an application job).
    pub control: FrameReceiver,
    /// Replies and error replies (the completion path).
    pub replies: ReplyReceiver,
}
