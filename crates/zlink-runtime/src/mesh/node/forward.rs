//! Forwarding a received request to another node unchanged (spec 21 §7.3): the envelope keeps
//! its OperationId, reply route and original source, so the node that handles it answers the
//! source directly and the source's pending request completes as if it had been sent there.
//! Message Follow and relocation relays (later layers) use this.

use zlink_transport::{Envelope, PeerHandle};

use super::core::{NodeInner, transport_error};
use crate::messaging::ZLinkError;

#[cfg_attr(not(test), allow(dead_code))]
impl NodeInner {
    /// Queues `envelope` — as received, untouched — on `to`'s application lane.
    pub(crate) async fn forward_app(
        &self,
        envelope: &Envelope,
        to: &PeerHandle,
    ) -> Result<(), ZLinkError> {
        to.send_app(envelope).await.map_err(transport_error)
    }
}
