//! Close vs relocation of an Instance Spot on its owner (spec 28 §7 last bullet): whichever
//! of the two claims the Spot first is the one that proceeds. Both run only on the Spot's
//! owner (a Close is sent there with the record version it read as its fence; a move is
//! started there), and each claims the Spot before its first authority write, so the claim
//! order here is the order of their authority commits: a Close claimed first completes and
//! the move is refused before it writes anything (no move); a move claimed first makes a
//! later Close answer a *moving* result (`Unavailable`, the Close not applied and never
//! resubmitted by the runtime).

use std::sync::Arc;

use parking_lot::Mutex;
use zlink_codec::ObjectId;
use zlink_store_spi::entropy::HashMap;

/// What holds an Instance Spot on its owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    /// A Close is deleting its record.
    Closing,
    /// A relocation moves it.
    Moving,
}

/// The claims of this node, by SpotId.
#[derive(Debug, Default)]
pub(crate) struct Endings(Arc<Mutex<HashMap<ObjectId, Ending>>>);

/// One claim; dropping it ends the claim.
#[derive(Debug)]
pub(crate) struct Claim {
    id: ObjectId,
    map: Arc<Mutex<HashMap<ObjectId, Ending>>>,
}

impl Drop for Claim {
    fn drop(&mut self) {
        self.map.lock().remove(&self.id);
    }
}

impl Endings {
    /// Claims `id` for `what`; the claim already held otherwise.
    pub(crate) fn claim(&self, id: &ObjectId, what: Ending) -> Result<Claim, Ending> {
        let mut map = self.0.lock();
        if let Some(held) = map.get(id) {
            return Err(*held);
        }
        map.insert(id.clone(), what);
        Ok(Claim {
            id: id.clone(),
            map: Arc::clone(&self.0),
        })
    }
}

/// The *moving* result of a Close that came after the relocation of the Spot `id` began.
pub(crate) fn moving(id: &ObjectId) -> crate::messaging::ZLinkError {
    crate::messaging::ZLinkError::Unavailable {
        target: crate::messaging::Target::object(zlink_codec::keys::AuthorityKind::Spot, id),
        reason: crate::messaging::UnavailableReason::Moving,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_claim_wins_until_it_ends() {
        let endings = Endings::default();
        let id = ObjectId::new("room").expect("id");
        let close = endings.claim(&id, Ending::Closing).expect("first");
        assert_eq!(
            endings.claim(&id, Ending::Moving).expect_err("held"),
            Ending::Closing
        );
        drop(close);
        let _moving = endings.claim(&id, Ending::Moving).expect("free again");
        assert_eq!(
            endings.claim(&id, Ending::Closing).expect_err("held"),
            Ending::Moving
        );
    }
}
