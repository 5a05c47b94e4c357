//! Which User Spot an Actor belongs to now (spec 06 §17: "the operation for looking up which
//! User Spot an Actor currently belongs to also returns only the current SpotRef").
//!
//! The answer comes from the Location Store, not from any node's memory: the Actor's authority
//! record names its Spot (its membership, rewritten by a join and by a move with its Spot), and
//! the Spot's own record says which incarnation of it is Ready now.

use zlink_codec::records::{AllocationState, ObjectKind};
use zlink_location::AuthorityRead;

use super::manager::{ActorManager, key};
use super::membership::Membership;
use super::refs::SpotRef;
use crate::messaging::ZLinkError;

impl ActorManager {
    /// The current User Spot the Actor `id` belongs to: `None` when the Actor has no Ready
    /// record, when it belongs to the Entry Spot of the node that owns it (no User Spot), or
    /// when the Spot it names has no Ready incarnation now. Two Store reads; nothing is created
    /// or changed. A Store failure is the call's error.
    pub async fn spot_of(&self, id: &str) -> Result<Option<SpotRef>, ZLinkError> {
        let (_, id) = key(id)?;
        let AuthorityRead::Found { handle, .. } = self.client.read(ObjectKind::Actor, &id).await?
        else {
            return Ok(None);
        };
        if handle.kind() != ObjectKind::Actor || handle.state() != AllocationState::Active {
            return Ok(None);
        }
        let Some(member) = Membership::decode(handle.payload()).filter(|m| !m.entry) else {
            return Ok(None);
        };
        let Ok(spot) = zlink_codec::ObjectId::new(member.spot) else {
            // A record this runtime wrote always names a valid id; a foreign one names none.
            return Ok(None);
        };
        Ok(match self.client.read(ObjectKind::UserSpot, &spot).await? {
            AuthorityRead::Found { handle, .. }
                if handle.kind() == ObjectKind::UserSpot
                    && handle.state() == AllocationState::Active =>
            {
                Some(SpotRef::of(&handle))
            }
            _ => None,
        })
    }
}
