//! The target's owner change (spec 21 §9.1 "Owner change", §10): NewOwner through the move's
//! reservation, settled by reading when its Store reply is lost and tried again with the same
//! key, version and fence until the deadline.

use std::time::Duration;

use tokio::time::Instant;
use zlink_codec::records::{AllocationState, ObjectKind};

use super::wire::PerActorPart;
use zlink_location::{
    AuthorityClient, AuthorityHandle, AuthorityRead, Conflict, LocationError, Outcome,
    OwnerChangeRead, RecordName, TargetReservation,
};

/// The pause between two attempts after a failed Store request.
const RETRY_PAUSE: Duration = Duration::from_millis(50);

/// Which NewOwner a move runs.
#[derive(Debug, Clone, Copy)]
pub(super) enum Change<'a> {
    /// One object's (an Entry Spot member Actor, an Instance Spot). `entry`: the membership
    /// of the target node's Entry Spot, which an Entry Spot member's record takes in the same
    /// CAS (21 §8.2 "One Actor's host relocation": "If it's an Entry Spot member, source and
    /// target Entry membership also change"); `None` on a node without one.
    Single {
        entry: Option<&'a crate::objects::membership::Membership>,
    },
    /// A unit of a `PerActor` User Spot move: the Spot authority transition or one member,
    /// each also writing its move record (spec 21 §8.2).
    PerActor(&'a PerActorPart),
    /// A `SpotWide` User Spot aggregate's, writing the inventory root `root` (21 §8).
    SpotWide { root: &'a [u8] },
    /// A cross-node Actor join's, writing the Actor's new membership (21 §8.2).
    Join(&'a crate::objects::membership::Membership),
}

/// Runs NewOwner for `id` (of `kind`) through `reservation`. A refusal of the admission gate
/// (this node's lease not renewed in time: the Store was briefly down; nothing was sent) is
/// tried again after a pause until `until`, like a Store failure. A Store failure or a
/// contention whose outcome is unknown is never guessed: the record is read again — still the version the
/// reservation expects → the same NewOwner again (same condition and reservation row);
/// naming this reservation's target for the same incarnation → it applied; anything else →
/// a conflict (another change: the move is stale) — until `until`. At that give-up point the
/// record is read once more ([`settled_at_give_up`]): the last attempt may have applied with
/// its reply lost; only when that read does not show the change applied is the last error
/// returned (`location_update_failed`: the caller removes its prepared object). `change` names the
/// NewOwner (see [`Change`]); the applied read is the same for every one: the record names
/// the reservation's target for the same incarnation.
pub(super) async fn new_owner_settled(
    authority: &AuthorityClient,
    kind: ObjectKind,
    id: &zlink_codec::ObjectId,
    reservation: &TargetReservation,
    until: Instant,
    change: Change<'_>,
) -> Result<Outcome<AuthorityHandle>, LocationError> {
    let per_actor = match change {
        Change::Single { .. } | Change::SpotWide { .. } | Change::Join(_) => None,
        Change::PerActor(p) => {
            let spot = zlink_codec::ObjectId::new(p.spot.as_str())
                .map_err(|_| LocationError::corrupt(RecordName::PerActorMove))?;
            let operation = p
                .operation()
                .map_err(|_| LocationError::corrupt(RecordName::PerActorMove))?;
            Some((spot, operation, p.members))
        }
    };
    let mut attempt = 0u32;
    loop {
        attempt += 1;
        let tried = match authority.read(kind, id).await {
            Ok(AuthorityRead::Found { handle, .. }) => match match change {
                Change::SpotWide { .. } => reservation.owner_change_read_of_aggregate(&handle),
                _ => reservation.owner_change_read(&handle),
            } {
                OwnerChangeRead::NotApplied if handle.state() == AllocationState::Active => {
                    match &per_actor {
                        None => match change {
                            Change::SpotWide { root } => {
                                authority
                                    .new_owner_spot_wide(&handle, reservation, root.to_vec())
                                    .await
                            }
                            Change::Join(m) => {
                                let payload = m.rewrite(handle.payload());
                                authority
                                    .new_owner_joining(&handle, reservation, payload)
                                    .await
                            }
                            Change::Single { entry: Some(m) } if is_entry_member(&handle) => {
                                let payload = m.rewrite(handle.payload());
                                authority
                                    .new_owner_joining(&handle, reservation, payload)
                                    .await
                            }
                            _ => authority.new_owner(&handle, reservation).await,
                        },
                        Some((_, operation, Some(members))) => {
                            authority
                                .new_owner_per_actor_spot(
                                    &handle,
                                    reservation,
                                    *operation,
                                    *members,
                                )
                                .await
                        }
                        Some((spot, operation, None)) => {
                            authority
                                .new_owner_per_actor_member(&handle, reservation, spot, *operation)
                                .await
                        }
                    }
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
            // Refused by the admission gate: this node's lease was not renewed in time (the
            // Store was briefly unreachable). Nothing was sent; once the lease renews the gate
            // opens again, so it is tried again like any transient Store failure.
            Err(e @ LocationError::Admission(_)) if Instant::now() + RETRY_PAUSE < until => {
                tracing::info!(
                    attempt,
                    error = %e,
                    object = id.as_str(),
                    "relocation NewOwner refused by the admission gate: trying again"
                );
                tokio::time::sleep(RETRY_PAUSE).await;
            }
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
            Err(
                e @ (LocationError::Store(_)
                | LocationError::Contended
                | LocationError::Admission(_)),
            ) => {
                return settled_at_give_up(authority, kind, id, reservation, change, e).await;
            }
            other => return other,
        }
    }
}

/// Whether `handle` is the record of an Actor that is a member of an Entry Spot (its
/// membership moves to the target's Entry Spot with its owner).
fn is_entry_member(handle: &AuthorityHandle) -> bool {
    handle.kind() == ObjectKind::Actor
        && crate::objects::membership::Membership::decode(handle.payload()).is_some_and(|m| m.entry)
}

/// How many reads of the record the give-up point makes before the outcome stays unknown.
const GIVE_UP_READS: u32 = 3;

/// The give-up point of [`new_owner_settled`]: the deadline passed with the last attempt's
/// outcome unknown (`last`) — that attempt may have applied, its reply lost. The record is
/// read once more (at most [`GIVE_UP_READS`] reads, [`RETRY_PAUSE`] apart) before anything is
/// dropped: naming this reservation's target for the same incarnation → applied (the target
/// keeps its instance and finishes); any other change → a conflict; still the version the
/// reservation expects, or not readable → `last` (`location_update_failed`, 21 §10: the
/// caller removes its prepared object). Nothing is written here.
async fn settled_at_give_up(
    authority: &AuthorityClient,
    kind: ObjectKind,
    id: &zlink_codec::ObjectId,
    reservation: &TargetReservation,
    change: Change<'_>,
    last: LocationError,
) -> Result<Outcome<AuthorityHandle>, LocationError> {
    for read in 1..=GIVE_UP_READS {
        match authority.read(kind, id).await {
            Ok(AuthorityRead::Found { handle, .. }) => {
                let seen = match change {
                    Change::SpotWide { .. } => reservation.owner_change_read_of_aggregate(&handle),
                    _ => reservation.owner_change_read(&handle),
                };
                return match seen {
                    OwnerChangeRead::Applied => {
                        tracing::info!(
                            object = id.as_str(),
                            "relocation NewOwner settled at the deadline: it applied"
                        );
                        Ok(Outcome::Applied(handle))
                    }
                    OwnerChangeRead::NotApplied => Err(last),
                    OwnerChangeRead::Other => Ok(Outcome::Conflict(Conflict::Reservation)),
                };
            }
            Ok(AuthorityRead::Missing { .. }) => {
                return Ok(Outcome::Conflict(Conflict::Reservation));
            }
            Err(e) if read < GIVE_UP_READS => {
                tracing::debug!(read, error = %e, object = id.as_str(), "relocation NewOwner give-up read failed");
                tokio::time::sleep(RETRY_PAUSE).await;
            }
            Err(e) => {
                tracing::debug!(read, error = %e, object = id.as_str(), "relocation NewOwner give-up read failed");
            }
        }
    }
    Err(last)
}
