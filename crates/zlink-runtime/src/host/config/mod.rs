//! The root builder and MeshNode builder configuration with startup validation (spec 06 §2,
//! §4, §5, §9, §12, §13, §22, §23).
//!
//! [`ZLink::builder`] collects stores, location options, codecs, deployment and network
//! identity, hosted services and RouteMesh registrations ([`MeshNodeBuilder`]). Nothing is
//! checked while building: [`ZLink::start_plan`] validates everything once, before any socket
//! binds or Store request, and returns the immutable [`ZLinkPlan`] or the first
//! [`StartupError`]. A root starts once; a second `start_plan` is
//! [`StartupError::RootAlreadyStarted`].
//!
//! ```
//! use zlink_runtime::config::Topology;
//! use zlink_runtime::ZLink;
//! use zlink_codec::{ChannelName, MeshName};
//!
//! let root = ZLink::builder()
//!     .route_mesh(MeshName::new("game").unwrap(), |node| {
//!         node.topology(Topology::Manual)
//!             .routing_id_prefix("lobby")
//!             .channel_server(ChannelName::new("chat").unwrap())
//!             .manual_peer("10.0.0.7:7000")
//!     })
//!     .build();
//! let plan = root.start_plan().unwrap();
//! assert!(plan.nodes()[0].new_routing_id().to_string().len() > 0);
//! // The same root never starts twice.
//! assert!(root.start_plan().is_err());
//! ```
//!
//! Hosted services (spec 06 §22) start one at a time in registration order through
//! [`start_hosted_services`] and stop in reverse through [`RunningHostedServices::stop`].
//!
//! # Verification map
//!
//! `docs/verification.md`, section "zlink-runtime host configuration: startup validation".

mod error;
mod hosted;
mod job_queue;
mod node;
mod plan;
mod root;
mod timer_limits;
mod validate;

#[cfg(test)]
mod tests;

pub use crate::mesh::peer::{EndpointError, HostProblem, ManualPeer, PeerEndpoint, Topology};
pub use crate::objects::{RelocationConfigError, RelocationOptions};
pub use error::{HostField, StartupError, StartupErrorKind, StoreKind, StoreRequirement};
pub use hosted::{
    HostedError, HostedFailure, HostedFuture, HostedService, HostedStage, HostedStartError,
};
pub(crate) use hosted::{RunningHostedServices, start_hosted_services};
pub use job_queue::{
    ApplicationJobQueueProfile, DEFAULT_JOB_QUEUE_PAUSE_PERCENT, DEFAULT_JOB_QUEUE_RESUME_PERCENT,
    MAX_QUEUED_APPLICATION_JOBS,
};
pub use node::{DEFAULT_ACTIVATION_CONCURRENCY, DEFAULT_ROUTING_ID_PREFIX, MeshNodeBuilder};
pub use plan::{MeshNodePlan, ObjectTypePlan, RoutingIdPlan, ZLinkPlan};
pub use root::{DEFAULT_BIND_HOST, ZLink, ZLinkBuilder};
pub use validate::{MAX_MAINTENANCE_WAVE_LEN, MAX_ROUTING_ID_PREFIX_LEN};
