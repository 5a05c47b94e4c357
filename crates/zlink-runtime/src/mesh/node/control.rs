//! The internal command plane: framework-to-framework commands that travel as control frames
//! (spec 21 §9.3). A command's name is the envelope's packet name in a namespace of its own:
//! it is never matched against application handler keys, never runs through filters and never
//! takes an application mailbox slot. Requests carry an OperationId and a ReplyRouteId like
//! application requests, and their replies take the same completion path.
//!
//! Built-in commands:
//!
//! | command | kind | payload | effect |
//! |---|---|---|---|
//! | `zlink.weights` | one-way | JSON object ChannelName → weight | the sender's current Channel Server weights |
//! | `zlink.ping` | request | empty | an empty reply (liveness of the command plane) |
//!
//! Later layers (object creation, relocation) add commands to the [`ControlRegistry`] before the
//! node starts.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use zlink_codec::ChannelName;
use zlink_store_spi::entropy::HashMap;
use zlink_transport::{Envelope, InboundFrame as WireFrame, Reply, ReplyStatus};

use super::core::NodeInner;
use crate::messaging::{
    BoxFuture, ErrorReply, FramePart, HandlerKey, PacketName, PayloadError, RouteKind, ZLinkError,
};

/// The weights announcement.
pub(crate) const WEIGHTS: &str = "zlink.weights";
/// The command-plane ping.
pub(crate) const PING: &str = "zlink.ping";

/// What a control command answers: `Some` reply bytes for a request, `None` for a one-way.
pub(crate) type ControlResult = Result<Option<Bytes>, ZLinkError>;

/// A command handler: the node and the received envelope.
pub(crate) type ControlHandler =
    Arc<dyn Fn(Arc<NodeInner>, Envelope) -> BoxFuture<'static, ControlResult> + Send + Sync>;

/// The command table of a node, fixed when it starts.
#[derive(Clone)]
pub(crate) struct ControlRegistry {
    by_name: HashMap<&'static str, ControlHandler>,
}

impl fmt::Debug for ControlRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut names: Vec<_> = self.by_name.keys().collect();
        names.sort();
        f.debug_struct("ControlRegistry")
            .field("commands", &names)
            .finish()
    }
}

impl ControlRegistry {
    /// The built-in commands.
    pub(crate) fn with_builtins() -> Self {
        let mut r = Self {
            by_name: HashMap::default(),
        };
        r.register(
            WEIGHTS,
            Arc::new(|node, env| Box::pin(async move { weights(&node, &env) })),
        );
        r.register(
            PING,
            Arc::new(|_, _| Box::pin(async { Ok(Some(Bytes::new())) })),
        );
        r
    }

    /// Adds (or replaces) a command.
    pub(crate) fn register(&mut self, name: &'static str, handler: ControlHandler) {
        self.by_name.insert(name, handler);
    }

    fn get(&self, name: &str) -> Option<&ControlHandler> {
        self.by_name.get(name)
    }
}

/// Encodes this node's weights announcement.
pub(crate) fn weights_payload(weights: &BTreeMap<ChannelName, u16>) -> Bytes {
    let map: BTreeMap<&str, u16> = weights.iter().map(|(c, w)| (c.as_str(), *w)).collect();
    // A map of strings to integers always serialises.
    Bytes::from(serde_json::to_vec(&map).unwrap_or_default())
}

fn weights(node: &NodeInner, env: &Envelope) -> ControlResult {
    let bad = ZLinkError::malformed_payload("weights announcement");
    let raw: BTreeMap<String, u16> =
        serde_json::from_slice(env.payload()).map_err(|e| bad(e.into()))?;
    let mut weights = BTreeMap::new();
    for (name, w) in raw {
        let channel = ChannelName::new(name).map_err(|e| bad(e.into()))?;
        if w > zlink_codec::records::MAX_WEIGHT {
            return Err(bad(PayloadError::Format("announced weight above 10000")));
        }
        weights.insert(channel, w);
    }
    tracing::debug!(peer = %env.source_rid(), ?weights, "peer announced channel weights");
    node.peers.write().announce(env.source_rid(), weights);
    Ok(None)
}

/// Runs one inbound control frame and sends its reply, if it is a request.
pub(crate) async fn handle(node: Arc<NodeInner>, frame: WireFrame) {
    let peer_rid = frame.peer().rid.clone();
    let env = frame.into_envelope();
    let name = env.packet_name().to_owned();
    let result = match node.control.get(&name) {
        Some(h) => h(Arc::clone(&node), env.clone()).await,
        None => Err(match PacketName::new(&name) {
            Ok(command) => ZLinkError::NoHandler {
                key: HandlerKey::Control {
                    route: if env.reply_route().is_some() {
                        RouteKind::Request
                    } else {
                        RouteKind::Send
                    },
                    command,
                },
            },
            Err(e) => ZLinkError::malformed(FramePart::PacketName, e),
        }),
    };
    let reply = match (&result, env.reply_route()) {
        (_, None) => {
            if let Err(e) = &result {
                tracing::warn!(command = %name, error = %e, "control command failed");
            }
            return;
        }
        (Ok(bytes), Some(_)) => Reply::to(&env, ReplyStatus::Ok, bytes.clone().unwrap_or_default()),
        (Err(e), Some(_)) => Reply::to(
            &env,
            ReplyStatus::Error,
            Bytes::from(ErrorReply::from_error(e).encode()),
        ),
    };
    let Some(reply) = reply else { return };
    match node.transport.peer(&peer_rid) {
        Some(p) => {
            if let Err(e) = p.send_reply(&reply) {
                tracing::debug!(command = %name, %e, "control reply not sent");
            }
        }
        None => tracing::debug!(command = %name, "control reply dropped: the peer is gone"),
    }
}
