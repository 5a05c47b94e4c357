//! Running MeshNodes (spec 06 §2, §4–§11, §20, §22–§24; 21 §4, §9.3, §10; 28 §3, §9, §10).
//!
//! [`ZLink::start`](crate::mesh::config::ZLink::start) validates the configuration, acquires
//! the owner lease (with a Location Store), binds each MeshNode's listener over
//! `zlink-transport`, publishes its descriptor, starts the hosted services and moves the host
//! to `Serving`; it returns a [`ZLinkHost`].
//!
//! - **Peers.** Automatic topology turns the live descriptors of the MeshName into connection
//!   intents (the smaller RID dials; the handshake checks RID, lifecycle generation and
//!   ChannelName set); a node whose lease expired is dropped. Manual peers (endpoint, or
//!   endpoint and expected RID) can be added, released and listed at runtime.
//! - **Messaging.** [`MeshNode::send`] / [`MeshNode::request`] address a RID on the node's
//!   MeshName; [`ZLinkHost::channel_send`] / [`ZLinkHost::channel_request`] look the
//!   ChannelName up in the process-local route index and pick one Ready Server member by
//!   weight (64-bit sum, weight 0 excluded). A request ends exactly once: reply, error reply,
//!   reply timeout (`DeadlineExceeded`), connection lost (`Unavailable`, never resent) or
//!   shutdown; dropping its future cancels it and a late reply is discarded.
//! - **Inbound.** Application frames take an application-mailbox slot (count and bytes,
//!   reserved together; a full mailbox holds the sender back through transport credit), then
//!   run through the process-level filters and the handler. Replies travel on the transport's
//!   reply lane and complete on their own loop, so a full mailbox never delays a reply.
//!   Node-direct and channel handlers run concurrently; no order between them is promised.
//! - **Command plane.** Framework commands are control frames in a namespace of their own:
//!   never matched against handler keys, never filtered, never mailbox jobs.
//! - **Shutdown** follows spec 28 §9 (see [`ZLinkHost::shutdown_within`]).
//!
//! # Verification map
//!
//! | behaviour | test (`tests/mesh_*`) |
//! |---|---|
//! | see `crates/zlink-runtime/tests/mesh_node.rs` and `mesh_process.rs` | |

mod control;
mod core;
mod discover;
mod handle;
mod host;
mod inbound;
mod lifecycle;
mod mailbox;
mod peers;
mod pending;
mod start;
mod status;

#[cfg(test)]
mod tests;

pub use self::core::{CallOptions, DEFAULT_REPLY_TIMEOUT, DEFAULT_SEND_TIMEOUT};
pub use handle::MeshNode;
pub use host::{DEFAULT_SHUTDOWN_DEADLINE, ZLinkHost};
pub use mailbox::{DEFAULT_MAILBOX_BYTES, DEFAULT_MAILBOX_JOBS, JOB_OVERHEAD_BYTES};
pub use start::{StartError, StartErrorKind};
pub use status::{
    HostStatus, ManualPeerStatus, NodeStatus, PeerStatus, ShutdownOutcome, ShutdownReason,
    ShutdownReport,
};
pub use zlink_codec::records::HostState;
