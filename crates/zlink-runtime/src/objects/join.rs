//! Actor JoinSpot / JoinEntrySpot on the Actor's owner (spec 06 §11, §17; 21 §1.3, §8.2).
//!
//! - **Same node** (the Spot lives where the Actor does; or the Entry Spot of the Actor's own
//!   node): the Actor's record is rewritten with a Preserve CAS (owner, generations and capacity
//!   kept) naming the new membership, and the activation stays — for a `SpotWide` Spot later
//!   turns run under the Spot's turn; back in the Entry Spot they run on their own again. No
//!   relocation payload, no adapter call (06 §11).
//! - **Another node**: the join moves the Actor there. It runs through the single move entry
//!   the host layer installs ([`JoinMover`]; objects never name the relocation layer): the live
//!   relocation of one Actor with its own policy (`DisableRelocation` refused before capture,
//!   nothing changed; `RecreateOnRelocation` a new instance; `PreserveStateWith` its state via
//!   the adapter), Message Follow as for any move, and one NewOwner CAS on the target that
//!   writes the owner, the capacity on both nodes, the AuthorityOwnerGeneration and the new
//!   membership together (21 §8.2 "Cross-node JoinSpot/JoinEntrySpot"). The source handler and
//!   scope are cleaned up and the target re-creates them (06 §11).

use zlink_codec::keys::AuthorityKind;
use zlink_codec::records::{AllocationState, ObjectKind};
use zlink_codec::{ObjectId, RoutingId};

use super::host::{ObjectHost, store_failure, what};
use super::membership::Membership;
use super::refs::ActorRef;
use crate::messaging::{
    BoxFuture, InvalidCall, MoveRefusal, StaleReason, UnavailableReason, ZLinkError,
};
use zlink_location::{AuthorityHandle, AuthorityRead, Outcome};

/// The Spot a join makes the Actor a member of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum JoinTarget {
    /// The User Spot incarnation `generation` of `id`.
    Spot { id: ObjectId, generation: u64 },
    /// The Entry Spot of the node the Actor ends on.
    Entry,
}

/// A cross-node join: the Actor `actor`, owned here, moves to the node `to` and becomes a
/// member of `target` there.
#[derive(Debug, Clone)]
pub(crate) struct JoinMove {
    pub(crate) actor: ActorRef,
    pub(crate) to: RoutingId,
    pub(crate) target: JoinTarget,
}

/// The single move entry a cross-node join runs through: the host layer implements it with
/// the relocation layer's move of one Actor and installs it on every object host.
pub(crate) trait JoinMover: Send + Sync + 'static {
    /// Moves the Actor of `join` and writes its new membership in the move's owner change.
    fn join_across(&self, join: JoinMove) -> BoxFuture<'static, Result<(), ZLinkError>>;
}

impl ObjectHost {
    /// The Actor's record, if it is the incarnation `generation` (a missing one is
    /// `NotFound`, another incarnation `InvalidOperation`).
    async fn joining_actor(
        &self,
        actor: &ObjectId,
        generation: u64,
    ) -> Result<AuthorityHandle, ZLinkError> {
        let read = self.location.authority().read(ObjectKind::Actor, actor);
        let AuthorityRead::Found { handle, .. } = read.await.map_err(store_failure)? else {
            return Err(ZLinkError::NoRoute {
                target: what(AuthorityKind::Actor, actor),
            });
        };
        if handle.object_generation().get() != generation || handle.kind() != ObjectKind::Actor {
            return Err(ZLinkError::InvalidCall(InvalidCall::JoinOtherIncarnation));
        }
        Ok(handle)
    }

    /// Joins the Actor incarnation `generation` of `actor`, owned here, to the User Spot
    /// incarnation `spot_generation` of `spot` (see the module doc): on this node with a
    /// Preserve CAS, the activation kept; on another node by moving the Actor there. Refused,
    /// nothing changed: the host not `Serving` → `Unavailable`; a missing Actor or Spot →
    /// `NotFound`; another incarnation → `InvalidOperation` (`JoinOtherIncarnation`); either
    /// party moving or not live here → `Stale`; the record changed meanwhile → `Stale`
    /// (`ChangedBeforeJoin`); across nodes, what the move refuses (its type
    /// `DisableRelocation`, a `SpotWide` member that moves with its Spot, ...).
    pub(crate) async fn join(
        &self,
        actor: &ObjectId,
        generation: u64,
        spot: &ObjectId,
        spot_generation: u64,
    ) -> Result<(), ZLinkError> {
        if !self.accepts_new_objects() {
            // Joins are rejected while Relocating, Relocated or Draining (spec 28 §10).
            return Err(self.not_accepting());
        }
        let a = self.joining_actor(actor, generation).await?;
        let read = self.location.authority().read(ObjectKind::UserSpot, spot);
        let AuthorityRead::Found { handle: s, .. } = read.await.map_err(store_failure)? else {
            return Err(ZLinkError::NoRoute {
                target: what(AuthorityKind::Spot, spot),
            });
        };
        if s.object_generation().get() != spot_generation || s.kind() != ObjectKind::UserSpot {
            return Err(ZLinkError::InvalidCall(InvalidCall::JoinOtherIncarnation));
        }
        if s.node() != a.node() {
            if s.state() != AllocationState::Active {
                return Err(ZLinkError::Unavailable {
                    target: what(AuthorityKind::Spot, spot),
                    reason: UnavailableReason::NotServing,
                });
            }
            let target = JoinTarget::Spot {
                id: spot.clone(),
                generation: spot_generation,
            };
            return self.join_across(&a, s.node().routing_id, target).await;
        }
        let spot_key = (AuthorityKind::Spot, spot.clone());
        if self.interception.covers(&spot_key) {
            return Err(StaleReason::JoinPartyMoving.into());
        }
        let Some(live_spot) = self.live_object(&spot_key) else {
            return Err(StaleReason::JoinPartyNotLive.into());
        };
        let turn = live_spot.turn();
        let membership = Membership {
            spot: spot.as_str().to_owned(),
            entry: false,
            spot_wide: turn.is_some(),
        };
        self.join_here(&a, &membership, turn).await
    }

    /// Joins the Actor incarnation `generation` of `actor`, owned here, to the Entry Spot of
    /// `node` (this node when `None`; see the module doc): on this node with a Preserve CAS,
    /// the activation kept and its turns its own again (already a member: nothing changes);
    /// on another node by moving the Actor there. Refused as [`join`](Self::join) is.
    pub(crate) async fn join_entry(
        &self,
        actor: &ObjectId,
        generation: u64,
        node: Option<&RoutingId>,
    ) -> Result<(), ZLinkError> {
        if !self.accepts_new_objects() {
            return Err(self.not_accepting());
        }
        let a = self.joining_actor(actor, generation).await?;
        let to = node.unwrap_or(&a.node().routing_id).clone();
        if to != a.node().routing_id {
            return self.join_across(&a, to, JoinTarget::Entry).await;
        }
        let Some(entry) = self.entry_spot.as_ref() else {
            return Err(StaleReason::JoinPartyNotLive.into());
        };
        let membership = Membership::entry(entry);
        if Membership::decode(a.payload()).as_ref() == Some(&membership) {
            return Ok(());
        }
        self.join_here(&a, &membership, None).await
    }

    /// A same-node join of the Actor recorded as `a`: the Preserve CAS naming `membership`,
    /// then its activation runs under `turn` (its own turn when `None`). Refused
    /// (`JoinPartyMoving`) while the Actor or the Spot it belongs to now is moving.
    async fn join_here(
        &self,
        a: &AuthorityHandle,
        membership: &Membership,
        turn: Option<super::live::Turn>,
    ) -> Result<(), ZLinkError> {
        let actor_key = (AuthorityKind::Actor, a.id().clone());
        if self.interception.covers(&actor_key) {
            return Err(StaleReason::JoinPartyMoving.into());
        }
        // Leaving a Spot that is moving would leave its move counting a member it no longer
        // has (or missing one it moves): refused as the cross-node join is.
        self.current_spot_settled(a).await?;
        let Some(live_actor) = self.live_object(&actor_key) else {
            return Err(StaleReason::JoinPartyNotLive.into());
        };
        match self
            .location
            .authority()
            .preserve(a, membership.encode())
            .await
        {
            Ok(Outcome::Applied(_)) => {
                live_actor.set_turn(turn);
                self.routes.forget(&actor_key);
                Ok(())
            }
            Ok(Outcome::Conflict(c)) => {
                tracing::info!(?c, "join conflicted");
                Err(StaleReason::ChangedBeforeJoin.into())
            }
            Err(e) => Err(store_failure(e)),
        }
    }

    /// Whether the Actor recorded as `a` may leave its User Spot by moving: not when that Spot
    /// is the one it joins (its Spot moved away without it: the Spot's own move moves it,
    /// `MovesWithSpot`), nor while its Spot moves ([`current_spot_settled`](Self::current_spot_settled)).
    /// An Entry Spot member, or a member of a Spot that no longer exists, may.
    async fn member_may_leave(
        &self,
        a: &AuthorityHandle,
        target: &JoinTarget,
    ) -> Result<(), ZLinkError> {
        if let Some(current) = Membership::decode(a.payload()).filter(|m| !m.entry) {
            if matches!(target, JoinTarget::Spot { id, .. } if id.as_str() == current.spot) {
                return Err(MoveRefusal::MovesWithSpot.into());
            }
        }
        self.current_spot_settled(a).await
    }

    /// Whether the User Spot the Actor recorded as `a` belongs to now is settled: not while it
    /// is moving here or owned on another node than the Actor (a `PerActor` move whose member
    /// units still count the Actor, or a `SpotWide` move whose aggregate does: leaving it then
    /// would make the move's member counts wrong, 21 §8.2) — `JoinPartyMoving`. An Entry Spot
    /// member, or a member of a Spot that no longer exists, is free to leave.
    async fn current_spot_settled(&self, a: &AuthorityHandle) -> Result<(), ZLinkError> {
        let Some(current) = Membership::decode(a.payload()).filter(|m| !m.entry) else {
            return Ok(());
        };
        let Ok(spot) = ObjectId::new(current.spot) else {
            return Ok(());
        };
        if self
            .interception
            .covers(&(AuthorityKind::Spot, spot.clone()))
        {
            return Err(StaleReason::JoinPartyMoving.into());
        }
        let read = self.location.authority().read(ObjectKind::UserSpot, &spot);
        match read.await.map_err(store_failure)? {
            AuthorityRead::Found { handle, .. } if handle.node() != a.node() => {
                Err(StaleReason::JoinPartyMoving.into())
            }
            _ => Ok(()),
        }
    }

    /// A join that moves the Actor recorded as `a` to the node `to`, through the move entry
    /// the host layer installed (none: `InvalidOperation`, `JoinAcrossNodes`).
    async fn join_across(
        &self,
        a: &AuthorityHandle,
        to: RoutingId,
        target: JoinTarget,
    ) -> Result<(), ZLinkError> {
        let Some(mover) = self.join_mover.get() else {
            return Err(ZLinkError::InvalidCall(InvalidCall::JoinAcrossNodes));
        };
        self.member_may_leave(a, &target).await?;
        let join = JoinMove {
            actor: ActorRef::of(a),
            to,
            target,
        };
        tracing::info!(actor = a.id().as_str(), to = ?join.to, target = ?join.target, "cross-node join: moving the Actor");
        mover.join_across(join).await
    }
}
