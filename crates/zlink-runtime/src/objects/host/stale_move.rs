//! A record of this node's run naming a move of it that no longer runs (spec 21 §9.1
//! "Required information disappears right before Captured or Prepared: cancels the move
//! without changing owner"; §10).
//!
//! A source's stage records (`preparing`, `captured`, `prepared`) keep the source as owner
//! until the target's owner change. Two things leave such a record behind with no move and no
//! activation on its owner:
//!
//! - a Store rollback (an asynchronous-replica failover) that loses the owner change and
//!   everything after it, while the source's own writes survive (its verification finds
//!   nothing lost): the source finished the move and follows the object to the target, the
//!   target's activation closes once it sees the record name another owner, and every
//!   message is then answered `Unavailable` for good;
//! - a move abandoned after its activation closed whose record could not be removed.
//!
//! Any read of such a record on its owner node judges it ([`ObjectHost::remove_if_stale_move`],
//! from `ObjectClient::read`): an Actor record, `Active`, naming this node's current run, with
//! a source stage mark, no activation live here and no relocation of it here other than the
//! follow of a move that completed. The record is removed in the background, conditioned on
//! the version read, and once it is the follow ends (a read from just before a move's owner
//! change, judged after its follow began, finds the record changed: the follow stays), so the
//! next access creates a new incarnation
//! under a higher ObjectGeneration (the moved state was lost with the owner change: no
//! activation holds it). A record that changed since the read is left as it is. A `SpotWide`
//! member is never judged (its record follows its Spot's owner).

use std::sync::Arc;

use zlink_codec::keys::AuthorityKind;
use zlink_codec::records::AllocationState;
use zlink_location::{AuthorityRead, Outcome};

use super::{ObjectHost, ObjectKey};

impl ObjectHost {
    /// Judges `read`, a read of `key` on this node, as the module docs say; `true` when the
    /// record is a stale move and its removal started.
    pub(crate) fn remove_if_stale_move(
        self: &Arc<Self>,
        key: &ObjectKey,
        read: &AuthorityRead,
    ) -> bool {
        let AuthorityRead::Found { handle, .. } = read else {
            return false;
        };
        if key.0 != AuthorityKind::Actor
            || handle.state() != AllocationState::Active
            || self.location.host_run().as_ref() != Some(handle.owner())
            || crate::objects::membership::Membership::decode(handle.payload())
                .is_some_and(|m| m.spot_wide)
            || self.is_live(key)
            || !self.interception.stale_move(key, handle.payload())
        {
            return false;
        }
        let (host, key, handle) = (Arc::clone(self), key.clone(), handle.clone());
        tokio::spawn(async move {
            match host.location.authority().delete(&handle).await {
                Ok(Outcome::Applied(())) => {
                    host.routes.forget(&key);
                    host.interception.stale_move_removed(&key);
                    tracing::warn!(
                        object = %super::what(key.0, &key.1),
                        generation = handle.object_generation().get(),
                        "a record of this run naming a move that no longer runs (its owner change lost) is removed: the next access creates the object again"
                    );
                }
                Ok(Outcome::Conflict(c)) => {
                    tracing::debug!(object = %super::what(key.0, &key.1), ?c, "a stale move's record changed before its removal");
                }
                Err(e) => {
                    tracing::debug!(object = %super::what(key.0, &key.1), error = %e, "a stale move's record was not removed; a later read tries again");
                }
            }
        });
        true
    }
}
