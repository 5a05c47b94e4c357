//! The interception seam: how a relocation takes an object's messages while the object moves
//! (holds them at the seal, queues early ones on the target, follows them after the cutover).
//! Objects own the trait and call it on every message; the relocation layer implements it and
//! the host installs that implementation on each object host, so objects never name a
//! relocation type; where nothing moves, a message costs one dynamic call and one uncontended
//! lock with a map check in the implementation (its envelope is copied only when a relocation
//! takes it, decided under that lock).

use std::any::Any;
use std::sync::Arc;

use zlink_location::HostRun;

use super::held::Held;
use super::host::{ObjectHost, ObjectKey};
use super::live::LiveObject;
use crate::messaging::{BoxFuture, ZLinkError};

/// What objects ask of the relocations of their host.
pub(crate) trait Interception: Send + Sync + 'static {
    /// Whether a relocation currently takes messages for `key`.
    fn covers(&self, key: &ObjectKey) -> bool;

    /// Whether a previous owner's follow of `key` here still has earlier messages to forward
    /// to the new owner: a message sent on this node then joins them (it must not overtake
    /// them by going to the new owner directly).
    fn forwards_pending(&self, key: &ObjectKey) -> bool;

    /// An activation of `key` went live here (a creation, a move's target, an Instance Spot
    /// activation): a follow of an earlier move of `key` away from here ends, so the new
    /// activation takes this node's calls instead of the node the old incarnation moved to.
    fn went_live(&self, key: &ObjectKey);

    /// Whether the record payload `payload` of `key` — read on this node, naming this node's
    /// run as owner, with no activation of `key` live here — names a move of `key` away from
    /// here that no relocation here runs any more (a source stage mark, and nothing of `key`
    /// held, queued or sealed here: at most the follow of a move that completed). See
    /// `objects::host::stale_move`.
    fn stale_move(&self, key: &ObjectKey, payload: &[u8]) -> bool;

    /// The record of `key` that named a move no longer running here was removed: a follow of
    /// that move ends (the object never left; the next access creates it again).
    fn stale_move_removed(&self, key: &ObjectKey);

    /// The run `source` ended (its owner lease is gone, judged again here): target capacity it
    /// secured on this node for a move whose Restore never arrived goes back (spec 21 §9.1:
    /// the source terminated during preparation or capture, so the move is cancelled). Until
    /// then the recovery sweep leaves the moving object's record to this target, and every
    /// message to the object is answered `Unavailable`.
    fn source_ended<'a>(
        &'a self,
        host: &'a Arc<ObjectHost>,
        source: &'a HostRun,
    ) -> BoxFuture<'a, ()>;

    /// Takes `m` when a relocation holds, queues or follows `key` (`None`); gives it back
    /// otherwise.
    fn intercept(&self, key: &ObjectKey, m: Held) -> Option<Held>;

    /// [`intercept`](Self::intercept), and when no relocation takes `m`, submits it to `live`
    /// under the same lock, so a seal never falls between the check and the submit. A message
    /// that is taken keeps `origin`, the envelope it arrived in from another node, when it has
    /// none (the copy is made only then, under that lock). A refused submit is returned.
    fn submit_unless_taken(
        &self,
        key: &ObjectKey,
        m: Held,
        live: &dyn LiveObject,
        origin: Option<&zlink_transport::Envelope>,
    ) -> Result<(), ZLinkError>;

    /// [`submit_unless_taken`](Self::submit_unless_taken) for a one-way whose completion
    /// answers its caller once it is admitted (an Instance Spot activation one-way): when no
    /// relocation takes `m`, its completion ends at once (handed over: admitted) and `m` is
    /// submitted without it, under the same lock; taken, the completion stays with it.
    fn admit_unless_taken(
        &self,
        key: &ObjectKey,
        m: Held,
        live: &dyn LiveObject,
    ) -> Result<(), ZLinkError>;

    /// The implementation itself, for the layer that installed it.
    fn as_any(&self) -> &dyn Any;
}

/// No relocation: nothing is ever intercepted (an object host the host layer has not given
/// the relocation layer's interception).
#[derive(Debug)]
pub(crate) struct NoMoves;

impl Interception for NoMoves {
    fn covers(&self, _: &ObjectKey) -> bool {
        false
    }

    fn forwards_pending(&self, _: &ObjectKey) -> bool {
        false
    }

    fn went_live(&self, _: &ObjectKey) {}

    fn stale_move(&self, _: &ObjectKey, _: &[u8]) -> bool {
        false
    }

    fn stale_move_removed(&self, _: &ObjectKey) {}

    fn source_ended<'a>(&'a self, _: &'a Arc<ObjectHost>, _: &'a HostRun) -> BoxFuture<'a, ()> {
        Box::pin(std::future::ready(()))
    }

    fn intercept(&self, _: &ObjectKey, m: Held) -> Option<Held> {
        Some(m)
    }

    fn submit_unless_taken(
        &self,
        _: &ObjectKey,
        m: Held,
        live: &dyn LiveObject,
        _: Option<&zlink_transport::Envelope>,
    ) -> Result<(), ZLinkError> {
        live.submit(m.route, m.call, m.cost, m.reply)
    }

    fn admit_unless_taken(
        &self,
        _: &ObjectKey,
        mut m: Held,
        live: &dyn LiveObject,
    ) -> Result<(), ZLinkError> {
        if let Some(done) = m.reply.take() {
            done.handed_over();
        }
        live.submit(m.route, m.call, m.cost, None)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
