//! One outbound lane of a peer connection: a FIFO of encoded frames bounded on count and bytes
//! together (spec 06 §11: both axes reserved in one step, a refusal changes neither).
//!
//! A frame's reservation lasts until the writer has written it to the socket, so the bound
//! covers queued frames and the batch being written. Waiting senders are admitted strictly in
//! arrival order; a `try_push` does not overtake a waiter.

use std::collections::VecDeque;

use bytes::Bytes;
use parking_lot::Mutex;
use tokio::sync::oneshot;

use crate::error::{Lane, TransportError};

/// The bound of an outbound lane: frames and frame bytes (frame body length), both at least 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueLimits {
    /// Most frames queued or being written.
    pub count: usize,
    /// Most frame bytes queued or being written.
    pub bytes: usize,
}

impl QueueLimits {
    /// Validated limits (both axes at least 1).
    pub fn new(count: usize, bytes: usize) -> Result<Self, TransportError> {
        if count == 0 || bytes == 0 {
            return Err(TransportError::InvalidArgument(
                "queue limits must be at least 1 frame and 1 byte".into(),
            ));
        }
        Ok(Self { count, bytes })
    }
}

/// One encoded frame body as the writer writes it: `head`, then `tail`. A frame built in one
/// buffer has an empty tail; a frame whose payload is shared bytes keeps them as its tail, so
/// they are written from their own buffer and never copied into the frame.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct OutFrame {
    /// The frame's first bytes (the kind byte first).
    pub(crate) head: Bytes,
    /// The rest of the frame (possibly empty).
    pub(crate) tail: Bytes,
}

impl OutFrame {
    /// The frame body length (what the lane's byte bound and the peer's window count).
    pub(crate) fn len(&self) -> usize {
        self.head.len() + self.tail.len()
    }
}

impl From<Bytes> for OutFrame {
    fn from(head: Bytes) -> Self {
        Self {
            head,
            tail: Bytes::new(),
        }
    }
}

struct Waiter {
    frame: OutFrame,
    done: oneshot::Sender<Result<(), TransportError>>,
}

struct State {
    queue: VecDeque<OutFrame>,
    count: usize,
    bytes: usize,
    waiters: VecDeque<Waiter>,
    closed: bool,
}

/// A bounded (or, for the reply lane, count-unbounded) FIFO of encoded frames.
pub(crate) struct OutLane {
    lane: Lane,
    limits: Option<QueueLimits>,
    state: Mutex<State>,
}

/// How an async push ends: admitted now, or a waiter to await.
pub(crate) enum Pushed {
    Queued,
    Waiting(oneshot::Receiver<Result<(), TransportError>>),
}

impl OutLane {
    pub(crate) fn new(lane: Lane, limits: Option<QueueLimits>) -> Self {
        Self {
            lane,
            limits,
            state: Mutex::new(State {
                queue: VecDeque::new(),
                count: 0,
                bytes: 0,
                waiters: VecDeque::new(),
                closed: false,
            }),
        }
    }

    fn fits(&self, s: &State, len: usize) -> bool {
        match self.limits {
            None => true,
            Some(l) => s.count < l.count && len <= l.bytes.saturating_sub(s.bytes),
        }
    }

    fn check_size(&self, len: usize) -> Result<(), TransportError> {
        match self.limits {
            Some(l) if len > l.bytes => Err(TransportError::InvalidArgument(format!(
                "a {len}-byte frame can never fit the {} queue's {}-byte bound",
                self.lane, l.bytes
            ))),
            _ => Ok(()),
        }
    }

    fn reserve(s: &mut State, frame: OutFrame) {
        s.count += 1;
        s.bytes = s.bytes.saturating_add(frame.len());
        s.queue.push_back(frame);
    }

    /// Queues the frame if both axes have room and nobody waits; otherwise `Full`.
    pub(crate) fn try_push(&self, frame: OutFrame) -> Result<(), TransportError> {
        self.check_size(frame.len())?;
        let mut s = self.state.lock();
        if s.closed {
            return Err(TransportError::Unavailable);
        }
        if !s.waiters.is_empty() || !self.fits(&s, frame.len()) {
            return Err(TransportError::Full {
                lane: self.lane,
                count: s.count,
                bytes: s.bytes,
            });
        }
        Self::reserve(&mut s, frame);
        Ok(())
    }

    /// Queues the frame now, or parks it as the last waiter.
    pub(crate) fn push(&self, frame: OutFrame) -> Result<Pushed, TransportError> {
        self.check_size(frame.len())?;
        let mut s = self.state.lock();
        if s.closed {
            return Err(TransportError::Unavailable);
        }
        if s.waiters.is_empty() && self.fits(&s, frame.len()) {
            Self::reserve(&mut s, frame);
            return Ok(Pushed::Queued);
        }
        let (done, rx) = oneshot::channel();
        s.waiters.push_back(Waiter { frame, done });
        Ok(Pushed::Waiting(rx))
    }

    /// Moves queued frames to `out` while `admit(len)` agrees; they stay reserved until
    /// [`OutLane::release`]. Returns (frames, bytes) moved.
    pub(crate) fn pop_while(
        &self,
        out: &mut Vec<OutFrame>,
        mut admit: impl FnMut(usize) -> bool,
    ) -> (usize, usize) {
        let mut s = self.state.lock();
        let (mut n, mut b) = (0, 0);
        while let Some(front) = s.queue.front() {
            if !admit(front.len()) {
                break;
            }
            let Some(frame) = s.queue.pop_front() else {
                break;
            };
            n += 1;
            b += frame.len();
            out.push(frame);
        }
        (n, b)
    }

    /// Ends the reservation of written frames and admits waiters in order. Returns whether a
    /// waiter's frame was queued.
    pub(crate) fn release(&self, count: usize, bytes: usize) -> bool {
        let mut s = self.state.lock();
        s.count = s.count.saturating_sub(count);
        s.bytes = s.bytes.saturating_sub(bytes);
        let mut admitted = false;
        while let Some(w) = s.waiters.front() {
            if w.done.is_closed() {
                s.waiters.pop_front();
                continue;
            }
            if !self.fits(&s, w.frame.len()) {
                break;
            }
            let Some(w) = s.waiters.pop_front() else {
                break;
            };
            Self::reserve(&mut s, w.frame);
            let _ = w.done.send(Ok(()));
            admitted = true;
        }
        admitted
    }

    /// Refuses everything from now on; queued frames are dropped and waiters get
    /// `Unavailable`.
    pub(crate) fn close(&self) {
        let mut s = self.state.lock();
        s.closed = true;
        s.queue.clear();
        for w in s.waiters.drain(..) {
            let _ = w.done.send(Err(TransportError::Unavailable));
        }
    }

    /// (frames, bytes) reserved now.
    pub(crate) fn usage(&self) -> (usize, usize) {
        let s = self.state.lock();
        (s.count, s.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TransportErrorKind;

    fn frame(len: usize) -> OutFrame {
        Bytes::from(vec![7u8; len]).into()
    }

    fn lane(count: usize, bytes: usize) -> OutLane {
        OutLane::new(Lane::App, Some(QueueLimits::new(count, bytes).unwrap()))
    }

    #[test]
    fn count_bound_admits_the_limit_and_refuses_one_past() {
        let l = lane(4, 1_000_000);
        for _ in 0..4 {
            l.try_push(frame(10)).unwrap();
        }
        let err = l.try_push(frame(10)).unwrap_err();
        assert_eq!(err.kind(), TransportErrorKind::Full);
        assert_eq!(l.usage(), (4, 40));
    }

    #[test]
    fn byte_bound_admits_the_limit_and_refuses_one_past() {
        let l = lane(100, 100);
        l.try_push(frame(60)).unwrap();
        l.try_push(frame(40)).unwrap();
        assert_eq!(l.usage(), (2, 100));
        let err = l.try_push(frame(1)).unwrap_err();
        assert_eq!(err.kind(), TransportErrorKind::Full);
        let l = lane(100, 100);
        l.try_push(frame(60)).unwrap();
        assert_eq!(
            l.try_push(frame(41)).unwrap_err().kind(),
            TransportErrorKind::Full
        );
    }

    #[test]
    fn a_refusal_on_one_axis_changes_neither_axis() {
        let l = lane(2, 100);
        l.try_push(frame(90)).unwrap();
        assert!(l.try_push(frame(20)).is_err()); // bytes refuse, count had room
        assert_eq!(l.usage(), (1, 90));
        l.try_push(frame(5)).unwrap();
        assert!(l.try_push(frame(1)).is_err()); // count refuses, bytes had room
        assert_eq!(l.usage(), (2, 95));
    }

    #[test]
    fn a_frame_larger_than_the_byte_bound_is_an_invalid_argument() {
        let l = lane(2, 100);
        assert_eq!(
            l.try_push(frame(101)).unwrap_err().kind(),
            TransportErrorKind::InvalidArgument
        );
    }

    #[test]
    fn reservation_lasts_until_release_not_until_pop() {
        let l = lane(1, 100);
        l.try_push(frame(10)).unwrap();
        let mut out = Vec::new();
        assert_eq!(l.pop_while(&mut out, |_| true), (1, 10));
        assert!(l.try_push(frame(10)).is_err());
        l.release(1, 10);
        l.try_push(frame(10)).unwrap();
    }

    #[tokio::test]
    async fn waiters_are_admitted_in_order_and_try_push_does_not_overtake() {
        let l = lane(1, 100);
        l.try_push(frame(10)).unwrap();
        let Pushed::Waiting(first) = l.push(frame(11)).unwrap() else {
            panic!("expected a waiter")
        };
        let Pushed::Waiting(second) = l.push(frame(12)).unwrap() else {
            panic!("expected a waiter")
        };
        let mut out = Vec::new();
        l.pop_while(&mut out, |_| true);
        l.release(1, 10);
        // The first waiter is queued; the lane is full again, and a try_push is refused.
        assert!(l.try_push(frame(1)).is_err());
        first.await.unwrap().unwrap();
        out.clear();
        l.pop_while(&mut out, |_| true);
        assert_eq!(out[0].len(), 11);
        l.release(1, 11);
        second.await.unwrap().unwrap();
        out.clear();
        l.pop_while(&mut out, |_| true);
        assert_eq!(out[0].len(), 12);
    }

    #[tokio::test]
    async fn close_fails_waiters_with_unavailable() {
        let l = lane(1, 100);
        l.try_push(frame(10)).unwrap();
        let Pushed::Waiting(w) = l.push(frame(10)).unwrap() else {
            panic!("expected a waiter")
        };
        l.close();
        assert_eq!(
            w.await.unwrap().unwrap_err().kind(),
            TransportErrorKind::Unavailable
        );
        assert_eq!(
            l.try_push(frame(1)).unwrap_err().kind(),
            TransportErrorKind::Unavailable
        );
    }
}
