//! The stage records of a live Actor move (spec 21 §6.1, §8.2, §9.1): each is a Preserve of the
//! Actor's authority record that carries the move's reservation
//! ([`AuthorityClient::preserve_carrying`](zlink_location::AuthorityClient::preserve_carrying)),
//! conditioned on the version the previous write of this move returned, so a NewOwner
//! conditioned on the reservation is conditioned on the latest stage record.
//!
//! The record's framework-internal payload keeps its membership (`m1` + JSON, see
//! `objects::membership`) and gains one field, `relocation`, naming the stage:
//!
//! - `Preparing` / `Captured`: the RelocationId and the target-list checksum (hex);
//! - `Prepared`: the RelocationId, the target attempt, and the target owner (owner id, lease
//!   generation) and node.
//!
//! Membership readers ignore the extra field. A single Entry Spot member Actor has no
//! relocation target list (the list, spec 21 §1.2, is a `SpotWide` User Spot's member set, and
//! `zlink_relocation::inventory::target_list_checksum` refuses a list without its User Spot):
//! the move records [`no_target_list`], the all-zero checksum, and the unit it fences is the
//! Actor's record itself (its version and the reservation). An Instance Spot is moved the same
//! way: its record payload is empty once its first message completed (the cold-activation
//! recovery root removed), so it gets `m1` and the `relocation` field alone.

use serde_json::{Map, Value};
use zlink_relocation::unit::{StageRecord, TargetListChecksum};

use zlink_location::{
    AuthorityClient, AuthorityHandle, AuthorityRead, LocationError, Outcome, TargetReservation,
};

/// The tag of a membership payload (`objects::membership`).
const MEMBERSHIP_TAG: &[u8] = b"m1";

/// The target-list checksum a single Entry Spot member Actor records: none (all zero).
pub(crate) fn no_target_list() -> TargetListChecksum {
    TargetListChecksum::from_bytes([0; 32])
}

/// The payload `handle` gets for `record`: its membership JSON with the `relocation` field set
/// (an empty payload gets `m1` and that field alone). `None` for a payload of another form,
/// which a stage record must not overwrite.
pub(crate) fn payload(
    handle: &AuthorityHandle,
    relocation: u128,
    record: &StageRecord,
    target: &TargetReservation,
) -> Option<Vec<u8>> {
    let mark = match record {
        StageRecord::Preparing { target_list, .. } => serde_json::json!({
            "stage": "preparing",
            "id": relocation.to_string(),
            "targetList": target_list.to_hex(),
        }),
        StageRecord::Captured { target_list, .. } => serde_json::json!({
            "stage": "captured",
            "id": relocation.to_string(),
            "targetList": target_list.to_hex(),
        }),
        StageRecord::Prepared { binding, .. } => {
            let node = &target.target().node;
            serde_json::json!({
                "stage": "prepared",
                "id": relocation.to_string(),
                "attempt": binding.attempt.get().to_string(),
                "targetOwner": target.target().run.owner_id.as_str(),
                "targetLease": target.target().run.lease_generation.get().to_string(),
                "targetNode": node.routing_id.to_hex(),
            })
        }
        // Completed is the target's, after the owner change (`completion.rs`).
        _ => return None,
    };
    with_mark(handle, mark)
}

/// The payload `handle` gets with its `relocation` field set to `mark` (the completion
/// progress the new owner records after the move, `completion.rs`); `None` for a payload of
/// another form, which must not be overwritten.
pub(crate) fn with_mark(handle: &AuthorityHandle, mark: Value) -> Option<Vec<u8>> {
    let now = handle.payload();
    let mut object: Map<String, Value> = if now.is_empty() {
        Map::new()
    } else {
        match serde_json::from_slice(now.strip_prefix(MEMBERSHIP_TAG)?).ok()? {
            Value::Object(o) => o,
            _ => return None,
        }
    };
    object.insert("relocation".into(), mark);
    let mut out = MEMBERSHIP_TAG.to_vec();
    out.extend(serde_json::to_vec(&Value::Object(object)).ok()?);
    Some(out)
}

/// The `relocation` field of a record payload, if it has one.
pub(crate) fn mark_of(payload: &[u8]) -> Option<Value> {
    let json: Value = serde_json::from_slice(payload.strip_prefix(MEMBERSHIP_TAG)?).ok()?;
    json.get("relocation").cloned()
}

/// The stage a record payload names, if any (`"preparing"`, `"captured"`, `"prepared"`) and
/// the RelocationId it is for.
#[cfg(test)]
pub(crate) fn recorded(payload: &[u8]) -> Option<(String, String)> {
    let json: Value = serde_json::from_slice(payload.strip_prefix(MEMBERSHIP_TAG)?).ok()?;
    let mark = json.get("relocation")?;
    Some((
        mark.get("stage")?.as_str()?.to_owned(),
        mark.get("id")?.as_str()?.to_owned(),
    ))
}

/// Writes `record` (a reservation-carrying Preserve conditioned on `handle`'s version, which
/// is the record's condition). Applied: the record and the reservation now expecting its new
/// version.
pub(crate) async fn write(
    authority: &AuthorityClient,
    handle: &AuthorityHandle,
    reservation: &TargetReservation,
    relocation: u128,
    record: &StageRecord,
) -> Result<Outcome<(AuthorityHandle, TargetReservation)>, StageWriteError> {
    if record.condition() != handle.version() {
        return Err(StageWriteError::Condition);
    }
    let bytes = payload(handle, relocation, record, reservation).ok_or(StageWriteError::Payload)?;
    authority
        .preserve_carrying(handle, reservation, bytes)
        .await
        .map_err(StageWriteError::Store)
}

/// Why a stage record was not written.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StageWriteError {
    /// The machine's condition is not the version this move last wrote (a runtime bug).
    #[error("the stage record's condition is not the move's latest record version")]
    Condition,
    /// The record payload is neither empty nor a membership payload.
    #[error("the record payload has a form a stage record cannot extend")]
    Payload,
    /// The Location Store failed (the reply may be lost).
    #[error(transparent)]
    Store(LocationError),
}

/// What the store holds after a stage record write whose outcome is unknown.
pub(crate) enum Settled {
    /// The write applied: the record and the reservation as they are now.
    Applied(Box<(AuthorityHandle, TargetReservation)>),
    /// The record is still at the version the write was conditioned on: not applied.
    NotApplied,
    /// The record or the reservation changed otherwise (a conflict).
    Changed,
    /// The read failed too.
    Unknown,
}

/// Reads what a stage record write whose reply was lost left: applied when the record
/// holds exactly the record this move wrote (the previous record with this move's stage
/// mark, RelocationId and stage) at a newer version and the reservation row carried it
/// once more; not applied when the record is still at the version the write expected.
pub(crate) async fn settle(
    authority: &AuthorityClient,
    handle: &AuthorityHandle,
    relocation: u128,
    reservation: &TargetReservation,
    record: &StageRecord,
) -> Settled {
    let now = match authority.read(handle.kind(), handle.id()).await {
        Ok(AuthorityRead::Found { handle, .. }) => handle,
        Ok(AuthorityRead::Missing { .. }) => return Settled::Changed,
        Err(e) => {
            tracing::debug!(error = %e, "relocation stage record: re-read failed");
            return Settled::Unknown;
        }
    };
    if now.version() == handle.version() {
        return Settled::NotApplied;
    }
    let Some(payload) = payload(handle, relocation, record, reservation) else {
        return Settled::Changed;
    };
    let mut written = handle.record().clone();
    written.payload = payload;
    if now.record() != &written {
        return Settled::Changed;
    }
    match authority.reservation_now(reservation).await {
        Ok(Some(row)) if row.carried() == reservation.carried().saturating_add(1) => {
            let version = now.version().clone();
            Settled::Applied(Box::new((now, row.expecting(version))))
        }
        Ok(_) => Settled::Changed,
        Err(e) => {
            tracing::debug!(error = %e, "relocation reservation: re-read failed");
            Settled::Unknown
        }
    }
}
