//! The target's owner change (spec 21 §9.1 "Owner change", §10): NewOwner through the move's
//! reservation, settled by reading when its Store reply is lost and tried again with the same
//! key, version and fence until the deadline.

use std::time::Duration;

use tokio::time::Instant;
use zlink_codec::records::{AllocationState, ObjectKind};

use crate::location::{
    AuthorityClient, AuthorityHandle, AuthorityRead, Conflict, LocationError, Outcome,
    OwnerChangeRead, TargetReservation,
};

/// The pause between two attempts after a failed Store request.
const RETRY_PAUSE: Duration = Duration::from_millis(50);

/// Runs NewOwner for `id` (of `kind`) through `reservation`. A Store failure or a contention
/// whose outcome is unknown is never guessed: the record is read again — still the version the
/// reservation expects → the same NewOwner again (same condition and reservation row);
/// naming this reservation's target for the same incarnation → it applied; anything else →
/// a conflict (another change: the move is stale) — until `until`, then the last error
/// (`location_update_failed`: the caller removes its prepared object).
pub(super) async fn new_owner_settled(
    authority: &AuthorityClient,
    kind: ObjectKind,
    id: &zlink_codec::ObjectId,
    reservation: &TargetReservation,
    until: Instant,
) -> Result<Outcome<AuthorityHandle>, LocationError> {
    let mut attempt = 0u32;
    loop {
        attempt += 1;
        let tried = match authority.read(kind, id).await {
            Ok(AuthorityRead::Found { handle, .. }) => match reservation.owner_change_read(&handle)
            {
                OwnerChangeRead::NotApplied if handle.state() == AllocationState::Active => {
                    authority.new_owner(&handle, reservation).await
                }
                OwnerChangeRead::Applied => return Ok(Outcome::Applied(handle)),
                _ => return Ok(Outcome::Conflict(Conflict::Reservation)),
            },
            Ok(AuthorityRead::Missing { .. }) => {
                return Ok(Outcome::Conflict(Conflict::Reservation));
            }
            Err(e) => Err(e),
        };
        match tried {
            Err(e @ (LocationError::Store(_) | LocationError::Contended))
                if Instant::now() + RETRY_PAUSE < until =>
            {
                tracing::warn!(
                    attempt,
                    error = %e,
                    object = id.as_str(),
                    "relocation NewOwner outcome unknown: reading the record again"
                );
                tokio::time::sleep(RETRY_PAUSE).await;
            }
            other => return other,
        }
    }
}
