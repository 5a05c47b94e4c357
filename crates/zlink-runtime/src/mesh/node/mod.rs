//! Running MeshNodes over `zlink-transport` (spec 06 §2, §4–§11, §20, §24; 21 §4, §10): peers,
//! node-direct and channel calls, inbound dispatch through the mailbox, the command plane,
//! descriptors and discovery, and a node's status. It knows no object or host: the host layer
//! starts nodes, and objects plug in through [`ObjectSink`].
//!
//! - **Peers.** Automatic topology turns the live descriptors of the MeshName into connection
//!   intents (the smaller RID dials; the handshake checks RID, lifecycle generation and
//!   ChannelName set); a node whose lease expired is dropped. Manual peers (endpoint, or
//!   endpoint and expected RID) can be added, released and listed at runtime.
//! - **Messaging.** [`MeshNode::send`] / [`MeshNode::request`] address a RID on the node's
//!   MeshName. A request ends exactly once: reply, error reply, reply timeout
//!   (`DeadlineExceeded`), connection lost (`Unavailable`, never resent) or shutdown; dropping
//!   its future cancels it and a late reply is discarded (and counted).
//! - **Forwarding.** A request forwarded to another node unchanged (Message Follow) keeps its
//!   route back here until its reply comes, which is relayed to its caller once
//!   ([`forward`]).
//! - **Inbound.** Application frames take an application-mailbox slot (count and bytes,
//!   reserved together; a full mailbox holds the sender back through transport credit), then
//!   run through the process-level filters and the handler. Replies travel on the transport's
//!   reply lane and complete on their own loop, so a full mailbox never delays a reply.
//! - **Command plane.** Framework commands are control frames in a namespace of their own:
//!   never matched against handler keys, never filtered, never mailbox jobs.

pub(crate) mod connections;
pub(crate) mod control;
pub(crate) mod core;
pub(crate) mod discover;
pub(crate) mod forward;
pub(crate) mod handle;
pub(crate) mod inbound;
pub(crate) mod inline;
pub(crate) mod lifecycle;
pub(crate) mod mailbox;
pub(crate) mod peers;
pub(crate) mod pending;
mod ready;
mod status;
pub(crate) mod takeover;

pub(crate) use self::core::{Address, NodeInner, ObjectSink, ReplyBody, SPOT_ADDRESS};
pub use self::core::{CallOptions, DEFAULT_REPLY_TIMEOUT, DEFAULT_SEND_TIMEOUT};
pub use connections::{ConnectionState, ConnectionStatus, PeerRole};
pub use handle::MeshNode;
pub(crate) use inbound::{answer as answer_request, reply_for};
pub(crate) use lifecycle::StateListener;
pub use mailbox::{DEFAULT_MAILBOX_BYTES, DEFAULT_MAILBOX_JOBS, JOB_OVERHEAD_BYTES};
pub(crate) use mailbox::{Mailbox, MailboxPermit, job_cost};
pub use ready::{NotReady, Waiting};
pub use status::{ManualPeerStatus, NodeStatus, PeerStatus};
