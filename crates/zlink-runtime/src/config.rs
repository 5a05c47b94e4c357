//! Everything a host is configured with beyond the root names: the topology, hosted services,
//! object-type choices, relocation settings, the startup errors validation returns, the
//! validated plan, and the defaults and bounds (spec 06 §2, §4, §5, §13, §22, §23; 28 §5).

pub use crate::host::config::{
    ApplicationJobQueueProfile, DEFAULT_JOB_QUEUE_PAUSE_PERCENT, DEFAULT_JOB_QUEUE_RESUME_PERCENT,
    MAX_QUEUED_APPLICATION_JOBS,
};
pub use crate::host::config::{
    DEFAULT_ACTIVATION_CONCURRENCY, DEFAULT_BIND_HOST, DEFAULT_ROUTING_ID_PREFIX, EndpointError,
    HostField, HostProblem, HostedError, HostedFailure, HostedFuture, HostedService, HostedStage,
    HostedStartError, MAX_MAINTENANCE_WAVE_LEN, MAX_ROUTING_ID_PREFIX_LEN, ManualPeer,
    MeshNodePlan, ObjectTypePlan, PeerEndpoint, RoutingIdPlan, StartupErrorKind, StoreKind,
    StoreRequirement, Topology, ZLinkPlan,
};
pub use crate::host::{DEFAULT_RELOCATE_DEADLINE, DEFAULT_SHUTDOWN_DEADLINE, RelocationMode};
pub use crate::mesh::JobQueueLimits;
pub use crate::mesh::node::{
    DEFAULT_MAILBOX_BYTES, DEFAULT_MAILBOX_JOBS, DEFAULT_REPLY_TIMEOUT, DEFAULT_SEND_TIMEOUT,
    JOB_OVERHEAD_BYTES,
};
pub use crate::objects::{ActorType, SpotType};
pub use crate::objects::{
    CreationDecision, DEFAULT_ACTOR_MAILBOX_BYTES, DEFAULT_ACTOR_MAILBOX_JOBS,
    DEFAULT_CREATE_DEADLINE, DEFAULT_MAX_TIMERS_PER_OBJECT, DEFAULT_MIN_TIMER_PERIOD,
    MAX_MAX_TIMERS_PER_OBJECT, MAX_MIN_TIMER_PERIOD, MIN_MIN_TIMER_PERIOD, ReadinessMode,
    RelocationChoice, SpotExecution, TimerLimits,
};
pub use zlink_codec::records::ObjectRole;
pub use zlink_transport::{MeshTls, MeshTlsError, MeshTlsErrorKind, SecurityIdentity};

display_by_name!(
    ApplicationJobQueueProfile,
    StartupErrorKind,
    Topology,
    RelocationMode,
    ReadinessMode,
    SpotExecution
);
