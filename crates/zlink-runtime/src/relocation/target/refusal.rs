//! Why the target refused a Restore (its prepare is answered with the refusal): a typed cause
//! for every refusal, logged on the target; the reply carries its kind and a fixed text.

use std::sync::Arc;

use zlink_codec::records::ObjectKind;
use zlink_codec::{CodecError, ObjectId};
use zlink_location::LocationError;
use zlink_relocation::inventory::{InventoryError, MemberKind};
use zlink_relocation::transfer::{AssemblyError, PayloadMemoryError};

use super::super::gate::GateError;
use crate::messaging::{ErrorKind, ErrorMessage, ZLinkError};
use crate::objects::host::ObjectKey;

/// Why the target refused to assemble or build a Restore's instance.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub(super) enum Refusal {
    /// This node does not offer the object's kind and stable type (or no longer does).
    #[error("this node does not offer {} type {stable_type:?}", .kind.as_str())]
    NotOffered {
        /// The kind the Restore moves.
        kind: ObjectKind,
        /// The stable type the Restore moves.
        stable_type: String,
    },
    /// The object is live, or already moving, on this node.
    #[error("{} is live or already moving on this node", .id.as_str())]
    Occupied {
        /// The object.
        id: ObjectId,
    },
    /// The Restore declares more payload than its admission took.
    #[error("the Restore declares more than was admitted")]
    OverAdmitted(#[source] PayloadMemoryError),
    /// The unit gate had no permit or payload memory for a Restore without an admission.
    #[error("the unit gate refused the Restore")]
    Gate(#[source] GateError),
    /// The payload did not assemble (a bad chunk, a checksum mismatch, a conflicting header,
    /// or chunks missing at prepare).
    #[error("the payload did not assemble")]
    Assembly(#[source] AssemblyError),
    /// This node cannot be a target now (its run ended, or it has no descriptor).
    #[error("this node cannot be the target now")]
    NotTarget(#[source] ZLinkError),
    /// The reservation the Restore carries is not this node's, or does not decode.
    #[error("the reservation is not this node's")]
    Reservation(#[source] Arc<LocationError>),
    /// The ObjectGeneration is not a decimal u64.
    #[error("the ObjectGeneration is not a decimal u64")]
    Generation(#[source] std::num::ParseIntError),
    /// An id or stable type breaks a bound of the codec.
    #[error("an id or stable type breaks a codec bound")]
    Codec(#[source] Arc<CodecError>),
    /// The aggregate payload does not decode.
    #[error("the aggregate payload is malformed")]
    Payload(#[source] ZLinkError),
    /// The inventory root or pages do not verify (against each other or the recorded
    /// target-list checksum).
    #[error("the inventory does not verify")]
    Inventory(#[source] InventoryError),
    /// The recorded target-list checksum is not 32 bytes.
    #[error("the target-list checksum is not 32 bytes")]
    Checksum,
    /// The payload's states do not match the inventory's entries, or the inventory is of
    /// another Spot.
    #[error("the payload does not match the inventory")]
    Mismatch,
    /// An inventory entry is of a kind a `SpotWide` aggregate does not move.
    #[error("an inventory entry of kind {0:?}")]
    EntryKind(MemberKind),
    /// A participant's relocation policy here differs from the one its state was captured
    /// under.
    #[error("{}: the relocation policies differ", .id.as_str())]
    PolicyDiffers {
        /// The participant.
        id: ObjectId,
    },
    /// The Spot a cross-node join names is not live and Ready on this node (it moved, ended,
    /// or is another incarnation; `None`: this node has no Entry Spot).
    #[error("the joined Spot {:?} is not live here", .spot.as_ref().map(ObjectId::as_str))]
    JoinSpotNotHere {
        /// The User Spot the join names (`None`: the Entry Spot).
        spot: Option<ObjectId>,
    },
    /// The creation callback declined the rebuild (the application's reason).
    #[error("the rebuild was rejected: {0}")]
    Rejected(ErrorMessage),
    /// The factory or the creation callback failed (the application's failure, as text).
    #[error("the rebuild failed: {0}")]
    Failed(ErrorMessage),
    /// The adapter's restore failed on every allowed attempt (`StateIncompatible`, 28 §8).
    #[error("the state cannot be restored: {0}")]
    Incompatible(ErrorMessage),
}

impl Refusal {
    /// What was refused, in fixed words (the text of the reply; the cause stays here).
    fn what(&self) -> &'static str {
        match self {
            Self::NotOffered { .. } => "the target does not offer the type",
            Self::Occupied { .. } => "the object is live or moving on the target",
            Self::OverAdmitted(_) | Self::Gate(_) => "the target's unit gate",
            Self::Assembly(_) => "the target's payload assembly",
            Self::NotTarget(_) | Self::Reservation(_) => "the target's reservation",
            Self::Generation(_) | Self::Codec(_) | Self::Payload(_) => "the Restore's content",
            Self::Inventory(_) | Self::Checksum | Self::Mismatch | Self::EntryKind(_) => {
                "the Restore's inventory"
            }
            Self::PolicyDiffers { .. } => "the target's relocation policy",
            Self::JoinSpotNotHere { .. } => "the joined Spot is not live on the target",
            Self::Rejected(_) | Self::Failed(_) | Self::Incompatible(_) => "the target's rebuild",
        }
    }

    /// The error the prepare request is answered with (its kind crosses the wire): a single
    /// object's state that cannot be restored is `StateIncompatible` (`TypeMismatch`); a
    /// joined Spot that is not live there is `Unavailable` (re-read and try again); every
    /// other refusal is `InternalFailure`.
    pub(super) fn into_error(self, single: Option<&ObjectKey>) -> ZLinkError {
        match (self, single) {
            (Self::Incompatible(reason), Some(key)) => ZLinkError::StateIncompatible {
                target: crate::objects::host::what(key.0, &key.1),
                reason,
            },
            (refusal @ Self::JoinSpotNotHere { .. }, _) => ZLinkError::RelocationRefused {
                kind: ErrorKind::Unavailable,
                what: refusal.what(),
                source: Some(crate::messaging::SharedError::new(refusal)),
            },
            (refusal, _) => ZLinkError::RelocationRefused {
                kind: ErrorKind::InternalFailure,
                what: refusal.what(),
                source: Some(crate::messaging::SharedError::new(refusal)),
            },
        }
    }

    /// A creation outcome's application text.
    pub(super) fn text(text: &str) -> ErrorMessage {
        ErrorMessage::sanitise(text)
    }
}

impl From<CodecError> for Refusal {
    fn from(e: CodecError) -> Self {
        Self::Codec(Arc::new(e))
    }
}

impl From<LocationError> for Refusal {
    fn from(e: LocationError) -> Self {
        Self::Reservation(Arc::new(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zlink_codec::keys::AuthorityKind;

    #[test]
    fn a_target_refusal_keeps_its_typed_cause_and_replies_with_fixed_words() {
        let e = Refusal::Mismatch.into_error(None);
        assert_eq!(e.kind(), ErrorKind::InternalFailure);
        assert_eq!(
            e.reply_message().as_str(),
            "the relocation refused: the Restore's inventory"
        );
        let cause = std::error::Error::source(&e).map(|c| c.to_string());
        assert_eq!(
            cause.as_deref(),
            Some("the payload does not match the inventory")
        );
        let key = (AuthorityKind::Actor, ObjectId::new("a").expect("id"));
        let state = || Refusal::Incompatible(ErrorMessage::sanitise("bad state"));
        assert_eq!(
            state().into_error(Some(&key)).kind(),
            ErrorKind::TypeMismatch,
            "a single object's state that cannot be restored is StateIncompatible"
        );
        assert_eq!(
            state().into_error(None).kind(),
            ErrorKind::InternalFailure,
            "an aggregate's is a refusal"
        );
        let gone = Refusal::JoinSpotNotHere { spot: None }.into_error(Some(&key));
        assert_eq!(
            gone.kind(),
            ErrorKind::Unavailable,
            "a joined Spot that left the target: re-read and try again"
        );
    }
}
