//! The closed value sets of every label (spec 28 §11, 06 §24: never a version, Actor or Spot
//! id, RID, endpoint, session or relocation id). Each label value is a `&'static str` from
//! one of these enums, so no instrument can grow a series per object, node or move.

use zlink_codec::records::HostState;

/// Every host state, in wire order (label `state` of [`HOST_STATE`](super::names::HOST_STATE)).
pub(crate) const HOST_STATES: [HostState; 7] = [
    HostState::Preparing,
    HostState::Serving,
    HostState::Relocating,
    HostState::Relocated,
    HostState::Draining,
    HostState::Stopped,
    HostState::Error,
];

/// The index of `state` in [`HOST_STATES`].
pub(crate) fn host_state_index(state: HostState) -> usize {
    HOST_STATES.iter().position(|s| *s == state).unwrap_or(0)
}

/// Label `kind` of sent and received messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MessageKind {
    /// A request (expects one reply).
    Request,
    /// A one-way send.
    OneWay,
}

impl MessageKind {
    /// The label value.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Request => "request",
            Self::OneWay => "one_way",
        }
    }
}

/// Label `path` of sent messages: to a peer, or to this node itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SendPath {
    /// Over the mesh to a peer.
    Remote,
    /// To this node (same mailbox and dispatcher, no network).
    Local,
}

impl SendPath {
    /// The label value.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Remote => "remote",
            Self::Local => "local",
        }
    }
}

/// Label `reason` of dropped inbound messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DropReason {
    /// The host no longer serves this kind of message (relocated, draining, stopped, error).
    NotServing,
    /// The host's admission refused it (shutting down, lease expired).
    NotAdmitted,
    /// Nothing on this node handles it (no object role, a malformed channel address).
    NoRoute,
    /// A one-way message whose handler or filters failed.
    HandlerFailed,
    /// A held one-way a failed move could not hand to any owner.
    Relocation,
}

impl DropReason {
    /// Every reason (the handles resolved per node).
    pub(crate) const ALL: [DropReason; 5] = [
        Self::NotServing,
        Self::NotAdmitted,
        Self::NoRoute,
        Self::HandlerFailed,
        Self::Relocation,
    ];

    /// The label value.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::NotServing => "not_serving",
            Self::NotAdmitted => "not_admitted",
            Self::NoRoute => "no_route",
            Self::HandlerFailed => "handler_failed",
            Self::Relocation => "relocation",
        }
    }
}

/// Label `outcome` of a request's duration and of a Store call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CallOutcome {
    /// Answered (a reply; for the Store, any answer: missing, conflict, ...).
    Ok,
    /// Ended otherwise (an error reply, a timeout, a lost connection, a Store failure).
    Failed,
}

impl CallOutcome {
    /// The label value.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Failed => "failed",
        }
    }
}

/// Label `source` of object routes: where an object call found its owner
/// (`objects/route_source.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RouteLabel {
    /// An activation live on this node took the call.
    Live,
    /// A route-cache hit.
    Cache,
    /// A read of the Location Store (a cache miss, or a cached owner that was unreachable).
    Store,
    /// Message Follow: the old owner forwarded the call to the new one, which answered.
    Follow,
}

impl RouteLabel {
    /// The label value.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Live => "live",
            Self::Cache => "cache",
            Self::Store => "store",
            Self::Follow => "follow",
        }
    }
}

/// Label `kind` of creations and live activations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ObjectLabel {
    /// An Actor.
    Actor,
    /// A Spot (User or Instance).
    Spot,
}

impl ObjectLabel {
    /// The label value.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Actor => "actor",
            Self::Spot => "spot",
        }
    }
}

/// Label `outcome` of creations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CreationOutcome {
    /// The call created the object (or found the one it had itself begun).
    Created,
    /// The object existed already (`get_or_create` found it; `create` refused it).
    Existing,
    /// The call failed.
    Failed,
}

impl CreationOutcome {
    /// The label value.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Created => "created",
            Self::Existing => "existing",
            Self::Failed => "failed",
        }
    }
}

/// Label `op` of Store calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StoreOp {
    /// A point read.
    Read,
    /// A conditional write batch.
    Write,
    /// A scan page.
    Scan,
}

impl StoreOp {
    /// The label value.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
            Self::Scan => "scan",
        }
    }
}

/// Label `outcome` of owner-lease renewals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RenewLabel {
    /// The lease was renewed.
    Renewed,
    /// The renew failed or timed out (the loop keeps trying until the admission deadline).
    Failed,
    /// The lease was found lost and taken over under a new generation.
    TakenOver,
}

impl RenewLabel {
    /// The label value.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Renewed => "renewed",
            Self::Failed => "failed",
            Self::TakenOver => "taken_over",
        }
    }
}
