//! What objects hand a relocation and get back from it: a message held while its object moves,
//! and the result Message Follow answers a held activation one-way with. The relocation layer
//! fills and drains these; objects only name them, so they live here, below it.

use crate::messaging::{RouteKind, UnavailableReason, ZLinkError};
use crate::objects::live::Completion;
use crate::objects::registration::ObjectCall;

/// One message for an object, held by a relocation.
pub(crate) struct Held {
    pub(crate) route: RouteKind,
    pub(crate) call: ObjectCall,
    pub(crate) cost: usize,
    pub(crate) reply: Option<Completion>,
    /// The envelope it arrived in from another node (`None`: sent on this node). A followed
    /// message that has one is forwarded as received — OperationId, payload, original source
    /// and reply route kept — so the new owner answers the original source directly.
    pub(crate) origin: Option<zlink_transport::Envelope>,
}

/// What the Message Follow of a moved Instance Spot answers a held one-way whose caller waits
/// for its admission (a `zlink.spot.activate` one-way held here): it is not forwarded by the
/// follow; the activation path sends it to the owner the record names instead, which admits it
/// before answering, so that caller's next one-way — sent to the new owner once its record
/// read names it — cannot overtake it.
pub(crate) fn refollow(key: &crate::objects::host::ObjectKey) -> ZLinkError {
    ZLinkError::Unavailable {
        target: crate::messaging::Target::object(key.0, &key.1),
        reason: UnavailableReason::Moved,
    }
}

/// Whether `e` is the [`refollow`] result.
pub(crate) fn is_refollow(e: &ZLinkError) -> bool {
    matches!(
        e,
        ZLinkError::Unavailable {
            reason: UnavailableReason::Moved,
            ..
        }
    )
}
