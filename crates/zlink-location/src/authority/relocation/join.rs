//! The cross-node Actor JoinSpot / JoinEntrySpot owner change in the location core (spec 21
//! §1.3, §8.2 "Cross-node JoinSpot/JoinEntrySpot: Actor owner, source/target membership,
//! capacity, and whole-change generation"): one NewOwner CAS that also rewrites the Actor
//! record's framework-internal payload, which names its membership, so the new owner and the
//! new membership are never two writes.

use zlink_codec::records::ObjectKind;

use super::super::super::error::{InvalidOperation, LocationError};
use super::super::AuthorityClient;
use super::super::handle::AuthorityHandle;
use super::super::outcome::{Conflict, Outcome};
use super::TargetReservation;
use crate::admission::AdmissionOp;

impl AuthorityClient {
    /// NewOwner of the Actor `actor` through `reservation` (see
    /// [`new_owner`](Self::new_owner): the ObjectGeneration kept, the next
    /// AuthorityOwnerGeneration issued, the secured target capacity turned into capacity in
    /// use and the source's returned, the reservation consumed) that, in the same batch,
    /// replaces the record's framework-internal payload with `payload` — the membership of a
    /// cross-node join, or the target's Entry Spot membership of an Entry Spot member's
    /// ordinary move (21 §8.2 "source and target Entry membership also change"). Run by the
    /// target. Only an Actor joins (another kind is an invalid
    /// operation); a record changed since the reservation was secured or last carried is a
    /// `Conflict` and nothing changes.
    pub async fn new_owner_joining(
        &self,
        actor: &AuthorityHandle,
        reservation: &TargetReservation,
        payload: Vec<u8>,
    ) -> Result<Outcome<AuthorityHandle>, LocationError> {
        if actor.kind() != ObjectKind::Actor {
            return Err(InvalidOperation::ReservationForAnotherObject.into());
        }
        let admission = self.gate.admit(AdmissionOp::RelocationChange)?;
        let same = reservation.same_object(actor);
        let mut record = match Self::new_owner_record(actor, reservation, &admission.run, same)? {
            Ok(record) => record,
            Err(c) => return Ok(Outcome::Conflict(c)),
        };
        record.payload = payload;
        // Without another row, a conflict is never on that row alone.
        Ok(self
            .new_owner_with(actor, reservation, admission, record, None)
            .await?
            .unwrap_or(Outcome::Conflict(Conflict::Reservation)))
    }
}
