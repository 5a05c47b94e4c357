//! Actor membership (spec 21 §1.2, §7, §8.2; 06 §11): every Actor belongs to exactly one Spot —
//! the Entry Spot of the node that owns it (the one that placed it, until it moves), or a User
//! Spot it was created into or joined. The membership is kept in the Location Store, in the
//! framework-internal payload of the Actor's authority record (written with the Ready commit,
//! rewritten by a same-node join with a Preserve CAS, and by the target's NewOwner CAS of a
//! cross-node join or of an Entry Spot member's move, which names the target's Entry Spot),
//! so live relocation can build a Spot's relocation target list from the Store.
//!
//! A member of a `SpotWide` User Spot runs under the Spot's turn — the Spot and all its members
//! take one turn at a time — and resolves its owner through the Spot's authority record, the
//! aggregate that a whole-Spot move rewrites in one CAS (one batch holds at most 2,048 keys,
//! spec 22 §4, so a move never rewrites every member's record).
//!
//! The payload form is `m1` followed by JSON `{"spot": SpotId, "entry": bool, "spotWide":
//! bool}`; a payload without the tag names no membership.

use serde::{Deserialize, Serialize};

const TAG: &[u8] = b"m1";

/// Which Spot an Actor belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Membership {
    /// The Spot's global id.
    pub(crate) spot: String,
    /// Whether the Spot is the owning node's Entry Spot.
    pub(crate) entry: bool,
    /// Whether the Spot is a `SpotWide` User Spot (its members resolve through it).
    #[serde(default)]
    pub(crate) spot_wide: bool,
}

impl Membership {
    /// The record payload form.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = TAG.to_vec();
        // A struct of two strings and bools always serialises.
        out.extend(serde_json::to_vec(self).unwrap_or_default());
        out
    }

    /// The Entry Spot `spot` as a membership.
    pub(crate) fn entry(spot: &zlink_codec::ObjectId) -> Self {
        Self {
            spot: spot.as_str().to_owned(),
            entry: true,
            spot_wide: false,
        }
    }

    /// The record payload `payload` naming this membership instead of the one it names: any
    /// other field it carries (a relocation's stage mark) is kept; a payload of another form
    /// (or none) becomes this membership alone.
    pub(crate) fn rewrite(&self, payload: &[u8]) -> Vec<u8> {
        let kept = payload
            .strip_prefix(TAG)
            .and_then(|json| serde_json::from_slice::<serde_json::Value>(json).ok());
        let (Some(serde_json::Value::Object(mut fields)), Ok(serde_json::Value::Object(ours))) =
            (kept, serde_json::to_value(self))
        else {
            return self.encode();
        };
        fields.extend(ours);
        let mut out = TAG.to_vec();
        // A map of JSON values always serialises.
        out.extend(serde_json::to_vec(&fields).unwrap_or_default());
        out
    }

    /// The membership a record payload names, if any.
    pub(crate) fn decode(payload: &[u8]) -> Option<Self> {
        payload
            .strip_prefix(TAG)
            .and_then(|json| serde_json::from_slice(json).ok())
    }
}

/// The `SpotWide` User Spot the Actor record `handle` resolves its owner through, if it is a
/// member of one: what the location core's sweeps and at-access recovery are told, so they
/// never delete a member that moved with its Spot (`zlink_location::MemberResolver`).
pub(crate) fn spot_wide_spot(
    handle: &zlink_location::AuthorityHandle,
) -> Option<zlink_codec::ObjectId> {
    if handle.kind() != zlink_codec::records::ObjectKind::Actor {
        return None;
    }
    Membership::decode(handle.payload())
        .filter(|m| m.spot_wide)
        .and_then(|m| zlink_codec::ObjectId::new(m.spot).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn membership_round_trips_through_the_record_payload() {
        let m = Membership {
            spot: "lobby".into(),
            entry: false,
            spot_wide: true,
        };
        assert_eq!(Membership::decode(&m.encode()), Some(m));
        assert_eq!(Membership::decode(b""), None);
        assert_eq!(Membership::decode(b"other"), None);
    }

    #[test]
    fn a_rewritten_payload_names_the_new_membership_and_keeps_the_stage_mark() {
        let old =
            br#"m1{"spot":"e-1","entry":true,"spotWide":false,"relocation":{"stage":"prepared"}}"#;
        let new = Membership {
            spot: "room".into(),
            entry: false,
            spot_wide: true,
        };
        let out = new.rewrite(old);
        assert_eq!(Membership::decode(&out), Some(new.clone()));
        let json: serde_json::Value =
            serde_json::from_slice(out.strip_prefix(TAG).expect("tag")).expect("json");
        assert_eq!(json["relocation"]["stage"], "prepared");
        assert_eq!(new.rewrite(b""), new.encode());
        assert_eq!(new.rewrite(b"other"), new.encode());
    }
}
