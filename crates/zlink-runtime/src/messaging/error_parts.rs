//! The typed parts of [`ZLinkError`] variants: which frame part is malformed, why a text is
//! invalid, a target unavailable or an authority fence stale, and why a creation, a local
//! call, a configuration, a runtime-internal payload, the Relocation Store or an internal step
//! failed. Each failure says
//! its [`ErrorKind`]; causes stay reachable through [`std::error::Error::source`] and never
//! cross the wire.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::target::Target;

use zlink_codec::records::ObjectKind;
use zlink_codec::{AuthorityKind, ChannelName, CodecError, ObjectId, StableType};
use zlink_relocation::unit::{AggregateRejection, RecordedStage};
use zlink_store_spi::{ArgumentError, StoreError};

#[cfg(doc)]
use super::error::ZLinkError;
use super::error::{ErrorKind, ErrorMessage};
use super::shared_error::SharedError;

/// Which part of an inbound frame or reply is malformed (a [`ZLinkError::MalformedFrame`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FramePart {
    /// The packet name.
    PacketName,
    /// The metadata bytes.
    Metadata,
    /// The payload bytes (they do not decode as the handler's declared type).
    Payload,
    /// An error reply.
    ErrorReply,
}

impl fmt::Display for FramePart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::PacketName => "packet name",
            Self::Metadata => "metadata",
            Self::Payload => "payload",
            Self::ErrorReply => "error reply",
        })
    }
}

/// Why a packet name or metadata entry is invalid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum InvalidText {
    /// It is empty.
    Empty,
    /// It is longer than its bound.
    TooLong {
        /// Its length in UTF-8 bytes.
        actual: usize,
        /// The bound.
        max: usize,
    },
    /// It contains a control character (NUL included).
    ControlCharacter,
}

impl fmt::Display for InvalidText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty => f.write_str("empty"),
            Self::TooLong { actual, max } => write!(f, "{actual} bytes, more than {max}"),
            Self::ControlCharacter => f.write_str("contains a control character"),
        }
    }
}

/// Why a known target is [`ZLinkError::Unavailable`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum UnavailableReason {
    /// The peer is known (discovered or a manual intent) but has no Ready connection.
    NotConnected,
    /// The channel has registered members but none is Ready with a positive weight.
    NoEligibleMember,
    /// The connection went down after the request was sent; it was not resent.
    ConnectionLost,
    /// The host is not serving yet.
    NotServing,
    /// The owner's local admission deadline has passed (its owner lease could not be renewed
    /// in time, spec 21 §5): it starts no new object work.
    AdmissionClosed,
    /// The object is moving: a relocation committed first, so the call was not applied.
    Moving,
    /// The Location Store could not be reached (or did not answer in time) to find the
    /// object's owner (spec 21 §10): nothing was sent, nothing was applied.
    StoreUnreachable,
    /// The host relocated (spec 28): it serves only what still reaches its objects.
    Relocated,
    /// The object's activation is closing.
    Closing,
    /// This node is not in its own discovery list yet.
    NotListed,
    /// This node's owner lease is not held.
    LeaseNotHeld,
    /// The object moved while the message was held for it: the caller sends it again to the
    /// owner the object's record names.
    Moved,
    /// The message was forwarded from owner to owner as many times as it may (the object's
    /// owner kept changing while it travelled).
    TooManyHops,
}

impl fmt::Display for UnavailableReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::NotConnected => "no ready connection",
            Self::NoEligibleMember => "no ready member with a positive weight",
            Self::ConnectionLost => "the connection went down before the reply",
            Self::NotServing => "the host is not serving",
            Self::AdmissionClosed => "the owner's admission deadline has passed",
            Self::Moving => "it is moving (a relocation committed first): nothing was applied",
            Self::StoreUnreachable => {
                "the location store could not be reached to find its owner: nothing was applied"
            }
            Self::Relocated => "the host relocated",
            Self::Closing => "its activation is closing",
            Self::NotListed => "the node is not in its own discovery list yet",
            Self::LeaseNotHeld => "the node's owner lease is not held",
            Self::Moved => "it moved while the message was held: its record names the new owner",
            Self::TooManyHops => "it was forwarded as many times as a message may be",
        })
    }
}

/// Why a creation did not give a ref (spec 21 §7; a [`ZLinkError::Creation`]).
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum CreationError {
    /// The creation callback declined (its terminal is `Rejected`); the reason is the
    /// application's and crosses the wire.
    #[error("the creation was rejected: {reason}")]
    Rejected {
        /// The application's reason (bounded, sanitised).
        reason: ErrorMessage,
    },
    /// The factory or the creation callback failed (its terminal is `Failed`).
    #[error("the creation failed: {failure}")]
    Failed {
        /// The stored failure text (bounded, sanitised).
        failure: ErrorMessage,
    },
    /// An exclusive creation found the object already there.
    #[error("{target} exists")]
    Exists {
        /// The object.
        target: Target,
    },
    /// No eligible Object Server has room for the type (spec 21 §4).
    #[error("no eligible Object Server has room for type {:?}", .stable_type.as_str())]
    NoRoom {
        /// The type to create.
        stable_type: StableType,
    },
    /// The node a reservation names does not host the reserved kind and type.
    #[error("this node has no {} type {:?}", .kind.as_str(), .stable_type.as_str())]
    NotHosted {
        /// The reserved kind.
        kind: ObjectKind,
        /// The reserved type.
        stable_type: StableType,
    },
    /// The creation request does not fit the 1 MiB record bound (spec 21 §3.4).
    #[error("the creation request does not fit the 1 MiB record bound")]
    RequestTooLarge {
        /// The bound the record breaks.
        #[source]
        source: SharedError<zlink_location::LocationError>,
    },
    /// The stored creation request does not verify: the factory did not run.
    #[error("the stored creation request does not verify")]
    RequestUnverified {
        /// The codec's reason.
        #[source]
        source: SharedError<CodecError>,
    },
    /// The creation's result does not fit a terminal record.
    #[error("the creation result cannot be stored")]
    ResultTooLarge {
        /// The bound the terminal breaks.
        #[source]
        source: SharedError<zlink_location::LocationError>,
    },
}

impl CreationError {
    /// The common kind of this creation failure.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::Rejected { .. } => ErrorKind::Rejected,
            Self::Failed { .. } => ErrorKind::InternalFailure,
            Self::Exists { .. } => ErrorKind::AlreadyExists,
            Self::NoRoom { .. } => ErrorKind::CapacityExceeded,
            Self::NotHosted { .. } => ErrorKind::TypeMismatch,
            Self::RequestTooLarge { .. } | Self::ResultTooLarge { .. } => {
                ErrorKind::InvalidOperation
            }
            Self::RequestUnverified { .. } => ErrorKind::DataLost,
        }
    }
}

/// A local call made with an invalid argument or in a state that does not allow it (a
/// [`ZLinkError::InvalidCall`], kind `InvalidOperation`).
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidCall {
    /// A Channel Server weight outside 0..=10000.
    #[error("channel weight {weight} is outside 0..=10000")]
    ChannelWeight {
        /// The weight asked for.
        weight: i64,
    },
    /// The channel is not a Channel Server membership of this node.
    #[error("{:?} is not a Channel Server membership of this node", .channel.as_str())]
    NotChannelServer {
        /// The channel.
        channel: ChannelName,
    },
    /// A manual peer endpoint is not `host:port`.
    #[error("manual peer endpoint {endpoint:?}: {reason}")]
    ManualPeerEndpoint {
        /// The endpoint as given.
        endpoint: String,
        /// Why it does not parse (bounded, sanitised).
        reason: ErrorMessage,
    },
    /// The ref names another incarnation than the stored one.
    #[error("{target} is incarnation {current}, not {named}")]
    OtherIncarnation {
        /// The object.
        target: Target,
        /// The incarnation the ref names.
        named: u64,
        /// The stored incarnation.
        current: u64,
    },
    /// A join's Actor or User Spot is another incarnation than its refs name.
    #[error("the Actor or the User Spot is another incarnation than the refs name")]
    JoinOtherIncarnation,
    /// A join of an Actor to a Spot on another node on an object host without the move entry
    /// such a join runs through (one the host layer did not build: a running host always
    /// installs it, so its cross-node joins move the Actor).
    #[error("a join to a Spot on another node needs live relocation, which this object host lacks")]
    JoinAcrossNodes,
    /// Several Instance Spot types are served and the call named none.
    #[error(
        "{} Instance Spot types are served ({}): name one with stable_type",
        .types.len(),
        .types.iter().map(StableType::as_str).collect::<Vec<_>>().join(", ")
    )]
    SeveralInstanceSpotTypes {
        /// The served types, sorted.
        types: Vec<StableType>,
    },
    /// Several MeshNodes of the root have an object role and the call named none.
    #[error("several MeshNodes have an object role: name one with actors_in / spots_in")]
    SeveralObjectNodes,
    /// A location list query is invalid (its page size or token).
    #[error("invalid location list query")]
    LocationQuery {
        /// The location runtime's reason.
        #[source]
        source: SharedError<zlink_location::InvalidOperation>,
    },
    /// A single-object relocation (`ZLinkHost::relocate_object`) was refused before anything
    /// moved: the object keeps serving where it is.
    #[error("object relocation refused: {reason}")]
    ObjectRelocation {
        /// Why.
        reason: ObjectRelocationRefusal,
    },
    /// An identifier the call names or uses is invalid; the codec's reason is the source.
    #[error("invalid {what}: it must be {}", .what.rule())]
    InvalidId {
        /// Which identifier.
        what: IdRole,
        /// The codec's reason.
        #[source]
        source: SharedError<CodecError>,
    },
    /// A call option was set twice.
    #[error("the {option} option was set twice")]
    OptionSetTwice {
        /// The option's name.
        option: &'static str,
    },
    /// The call's deadline is zero.
    #[error("the deadline must be positive")]
    ZeroDeadline,
    /// The call's deadline is too far away to be a point in time on this host.
    #[error("the deadline {deadline:?} is too far away")]
    DeadlineTooFar {
        /// The deadline asked for.
        deadline: Duration,
    },
    /// A user-named Spot id has the reserved Entry Spot form `<prefix>-entry-<uuid v4>`.
    #[error("{:?} has the reserved Entry Spot form <prefix>-entry-<uuid v4>", .id.as_str())]
    ReservedSpotId {
        /// The id asked for.
        id: ObjectId,
    },
    /// The ref names a User Spot incarnation the stored record is not (another incarnation, or
    /// not a User Spot).
    #[error("spot {:?} is not the User Spot incarnation {named}", .spot.as_str())]
    NotSpotIncarnation {
        /// The Spot's id.
        spot: ObjectId,
        /// The incarnation the ref names.
        named: u64,
    },
    /// A runtime command of the call could not be encoded as JSON (its fields are text, so
    /// this is not expected to happen).
    #[error("the {what} could not be encoded")]
    Unencodable {
        /// Which command.
        what: &'static str,
        /// The encoder's error.
        #[source]
        source: SharedError<serde_json::Error>,
    },
    /// The relocation machinery refused a move before the object moved.
    #[error(transparent)]
    Move(#[from] MoveRefusal),
}

impl InvalidCall {
    /// An invalid identifier `what`, keeping the codec's reason as the source.
    pub(crate) fn invalid_id(what: IdRole) -> impl FnOnce(CodecError) -> Self {
        move |e| Self::InvalidId {
            what,
            source: Arc::new(e).into(),
        }
    }

    /// A runtime command `what` that could not be encoded, keeping the encoder's error.
    pub(crate) fn unencodable(what: &'static str) -> impl FnOnce(serde_json::Error) -> Self {
        move |e| Self::Unencodable {
            what,
            source: Arc::new(e).into(),
        }
    }
}

/// Which identifier is invalid (an [`InvalidCall::InvalidId`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum IdRole {
    /// The Actor id an `ActorManager` call names.
    ActorId,
    /// The Spot id a `SpotManager` call names (a User or an Instance Spot).
    SpotId,
    /// The stable type a call names.
    StableType,
    /// The Spot id a `SpotWide` membership record names (read from the Location Store).
    MembershipSpotId,
    /// A creation or activation OperationId this node drew.
    OperationId,
}

impl IdRole {
    /// The rule the identifier breaks, in words.
    fn rule(self) -> &'static str {
        match self {
            Self::ActorId | Self::SpotId | Self::StableType | Self::MembershipSpotId => {
                "1..=255 bytes of UTF-8 without a NUL byte"
            }
            Self::OperationId => "a non-zero 128-bit number",
        }
    }
}

// The bound `IdRole::rule` states.
const _: () = assert!(ObjectId::MAX_LEN == 255 && StableType::MAX_LEN == 255);

impl fmt::Display for IdRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::ActorId => "actor id",
            Self::SpotId => "spot id",
            Self::StableType => "stable type",
            Self::MembershipSpotId => "spot id of a membership record",
            Self::OperationId => "operation id",
        })
    }
}

/// Why the relocation machinery refused a move of an object before it moved (an
/// [`InvalidCall::Move`]): the object keeps serving where it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MoveRefusal {
    /// Only a `SpotWide` User Spot moves as one unit with its members.
    #[error("only a SpotWide User Spot moves as one unit")]
    NotSpotWide,
    /// Only a `PerActor` User Spot moves by authority transition.
    #[error("only a PerActor User Spot moves by authority transition")]
    NotPerActor,
    /// The Spot is not an Instance Spot (a User Spot moves as a unit of its own).
    #[error("the Spot is not an Instance Spot (User Spots move as a unit of their own)")]
    NotInstanceSpot,
    /// The `SpotWide` Spot and its members do not make a unit that moves.
    #[error("the SpotWide Spot {:?} does not move ({:?})", .spot.as_str(), .source.kind())]
    SpotWideRejected {
        /// The Spot's id.
        spot: ObjectId,
        /// The unit machine's reason.
        #[source]
        source: AggregateRejection,
    },
    /// The object's type has `DisableRelocation`.
    #[error("{} {:?} has DisableRelocation: it does not move", .kind.as_str(), .id.as_str())]
    RelocationDisabled {
        /// The object's authority kind.
        kind: AuthorityKind,
        /// The object's id.
        id: ObjectId,
    },
    /// A member of the `PerActor` Spot has `DisableRelocation`: nothing moves.
    #[error(
        "the member {:?} of the PerActor Spot has DisableRelocation: nothing moves",
        .member.as_str()
    )]
    MemberRelocationDisabled {
        /// The member Actor's id.
        member: ObjectId,
    },
    /// A move of the object (or of a participant moving with it) is already running.
    #[error("a move of {} {:?} is already running", .kind.as_str(), .id.as_str())]
    AlreadyMoving {
        /// The moving object's authority kind.
        kind: AuthorityKind,
        /// The moving object's id.
        id: ObjectId,
    },
    /// The object's record names another owner than this node's run.
    #[error("{} {:?} is not owned by this node", .kind.as_str(), .id.as_str())]
    NotOwnedHere {
        /// The object's authority kind.
        kind: AuthorityKind,
        /// The object's id.
        id: ObjectId,
    },
    /// The Actor is a member of a User Spot: it moves with its Spot; only Entry Spot members
    /// move alone.
    #[error("a User Spot member moves with its Spot; only Entry Spot members move alone")]
    MovesWithSpot,
    /// The Actor is no member of the `PerActor` User Spot whose move names it.
    #[error("the Actor is no member of the PerActor User Spot")]
    NotPerActorMember,
    /// The named target does not offer every type of the `SpotWide` Spot and its members.
    #[error("the target does not offer every type of the SpotWide Spot")]
    TargetLacksTypes,
    /// The object's type preserves its state, but its capture found no state adapter.
    #[error(
        "{} {:?} preserves its state (PreserveStateWith) without an adapter",
        .kind.as_str(),
        .id.as_str()
    )]
    NoStateAdapter {
        /// The object's authority kind.
        kind: AuthorityKind,
        /// The object's id.
        id: ObjectId,
    },
    /// The `PerActor` Spot has more members than a move counts (`u32`).
    #[error("the PerActor Spot has {count} members, too many to move")]
    TooManyMembers {
        /// The member count.
        count: usize,
    },
}

/// Why an authority fence is stale (a [`ZLinkError::StaleFence`], kind `Unavailable`): the
/// record changed, moved, or names another node or run. A later call reads the record again.
#[derive(Debug, Clone, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum StaleReason {
    /// The reserved record, its version or its target run differ from the reservation a create
    /// command names, and no result is stored for its operation.
    #[error("the record, its version or the target run differ from the reservation")]
    ReservationChanged,
    /// The reservation does not name this node's run (another node, MeshName or run, or no
    /// longer `Reserved`).
    #[error("the reservation does not name this node's run")]
    ReservationElsewhere,
    /// The record changed before the creation (or the cold activation) committed it.
    #[error("the record changed before the commit")]
    ChangedBeforeCommit,
    /// The record changed before the creation's abort, and no result is stored for it.
    #[error("the record changed before the abort")]
    ChangedBeforeAbort,
    /// No result is stored for the creation's operation.
    #[error("no result is stored for the creation")]
    NoCreationResult,
    /// The record or the target run differ from the fence an end (Destroy / Close) request
    /// carries.
    #[error("the record or the target run differ from the request")]
    EndFenceChanged,
    /// The record is not an Active record of this node (its delete conflicted).
    #[error("the record is not an Active record of this node")]
    NotActiveHere,
    /// The Actor or the Spot of a join is moving.
    #[error("the Actor or the Spot is moving")]
    JoinPartyMoving,
    /// The Actor or the Spot of a join is not live on this node.
    #[error("the Actor or the Spot is not live on this node")]
    JoinPartyNotLive,
    /// The Actor's record changed before the join rewrote it.
    #[error("the Actor's record changed")]
    ChangedBeforeJoin,
    /// An Instance Spot activation envelope names another node, MeshName or lifecycle.
    #[error("the activation names another node or lifecycle")]
    ActivationElsewhere,
    /// This node serves no Instance Spot type of the envelope's name.
    #[error("this node serves no Instance Spot type {:?}", .stable_type.as_str())]
    TypeNotServed {
        /// The envelope's type.
        stable_type: StableType,
    },
    /// This node's published descriptor does not offer the envelope's type.
    #[error("this node's descriptor does not offer the type {:?}", .stable_type.as_str())]
    TypeNotOffered {
        /// The envelope's type.
        stable_type: StableType,
    },
    /// The object is not live on this node.
    #[error("{} {:?} is not live on this node", .kind.as_str(), .id.as_str())]
    NotLiveHere {
        /// The object's authority kind.
        kind: AuthorityKind,
        /// The object's id.
        id: ObjectId,
    },
    /// The move's target was not secured: the record changed, the target lease is gone or the
    /// target has no room.
    #[error("the record changed, the target lease is gone or the target has no room")]
    TargetNotSecured,
    /// The object's record changed during the move.
    #[error("the record changed during the move")]
    ChangedDuringMove,
    /// A stage record of the move conflicted: the object's record changed during the move.
    #[error("the object's record changed during the move ({stage:?} not recorded)")]
    StageConflict {
        /// The stage whose record was not written.
        stage: RecordedStage,
    },
    /// The move did not commit on the target.
    #[error("the move did not commit on the target")]
    MoveNotCommitted,
}

/// Why a single-object relocation was refused before anything moved (an
/// [`InvalidCall::ObjectRelocation`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum ObjectRelocationRefusal {
    /// The host is not `Serving` (a host Relocate runs, or it shuts down).
    #[error("the host is not Serving")]
    HostNotServing,
    /// The object is not live on an object node of this host (move it from its owner).
    #[error("the object is not live on this host")]
    NotLiveHere,
    /// A `SpotWide` or `PerActor` User Spot member moves with its Spot.
    #[error("a User Spot member moves with its Spot")]
    MovesWithSpot,
    /// The object's type (or a member's) has `DisableRelocation`.
    #[error("the object's type has DisableRelocation")]
    RelocationDisabled,
    /// The named target is this node.
    #[error("the target is this node")]
    TargetIsThisNode,
    /// The named target is not an eligible target for the object (spec 28 §4 filters: same
    /// application version and MeshName, `Serving`, lease valid, the type registered, a
    /// positive weight, room for the object, an admitted Ready peer).
    #[error("the target is not eligible for the object")]
    TargetNotEligible,
    /// No node is an eligible target for the object now.
    #[error("no eligible target for the object")]
    NoEligibleTarget,
}

/// What a call needed that is not configured (a [`ZLinkError::NotConfigured`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum Unconfigured {
    /// The node has not started.
    #[error("the node has not started")]
    NotStarted,
    /// Instance Spot cold activation needs a Relocation Store.
    #[error("Instance Spot cold activation needs a Relocation Store")]
    RelocationStore,
    /// Object placement needs automatic topology (a Location Store and discovery).
    #[error("object placement needs automatic topology")]
    AutomaticTopology,
    /// No MeshNode of this root has an object role.
    #[error("no MeshNode of this root has an object role")]
    NoObjectNode,
    /// The named MeshNode has no object role.
    #[error("this MeshNode has no object role")]
    NoObjectRole,
    /// The root has no Location Store (or it has stopped).
    #[error("this root has no Location Store (or it has stopped)")]
    LocationStore,
}

/// Why a runtime-internal payload (a command body, an object message, a ref, an activation
/// envelope) is malformed (the source of a [`ZLinkError::MalformedPayload`]).
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum PayloadError {
    /// The bytes are not the JSON the payload's schema describes.
    #[error(transparent)]
    Json(Arc<serde_json::Error>),
    /// A field breaks a bound of the canonical codec (an id, a generation, a record).
    #[error(transparent)]
    Codec(Arc<CodecError>),
    /// A numeric field does not parse.
    #[error("{field} is not a number")]
    Number {
        /// The field.
        field: &'static str,
        /// The parser's reason.
        #[source]
        source: std::num::ParseIntError,
    },
    /// The packet name is invalid.
    #[error("invalid packet name: {0}")]
    PacketName(InvalidText),
    /// A relayed or followed envelope's field breaks a transport bound (its address, packet
    /// name, content type or metadata).
    #[error("an envelope field breaks a transport bound")]
    Envelope(#[source] Arc<zlink_transport::TransportError>),
    /// A Restore header or payload chunk does not decode.
    #[error(transparent)]
    Transfer(zlink_relocation::transfer::FormatError),
    /// A Store value (a record version) breaks a bound of the Store SPI.
    #[error(transparent)]
    StoreArgument(zlink_store_spi::ArgumentError),
    /// The bytes break the payload's layout, or a field holds a value this runtime does not
    /// know.
    #[error("{0}")]
    Format(&'static str),
}

impl From<serde_json::Error> for PayloadError {
    fn from(e: serde_json::Error) -> Self {
        Self::Json(Arc::new(e))
    }
}

impl From<CodecError> for PayloadError {
    fn from(e: CodecError) -> Self {
        Self::Codec(Arc::new(e))
    }
}

impl From<zlink_transport::TransportError> for PayloadError {
    fn from(e: zlink_transport::TransportError) -> Self {
        Self::Envelope(Arc::new(e))
    }
}

impl From<zlink_relocation::transfer::FormatError> for PayloadError {
    fn from(e: zlink_relocation::transfer::FormatError) -> Self {
        Self::Transfer(e)
    }
}

impl From<zlink_store_spi::ArgumentError> for PayloadError {
    fn from(e: zlink_store_spi::ArgumentError) -> Self {
        Self::StoreArgument(e)
    }
}

/// Why a Relocation Store step failed (a [`ZLinkError::RelocationStore`]).
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum RelocationStoreError {
    /// The Store operation failed; if it had started, whether it committed is unknown.
    #[error("the relocation store operation failed")]
    Operation {
        /// The Store's error.
        #[source]
        source: SharedError<StoreError>,
    },
    /// Other bytes are stored under the reference.
    #[error("relocation store: other bytes are stored under the reference")]
    Conflict,
    /// The bytes read back are not the bytes stored.
    #[error("relocation store: the stored bytes do not verify")]
    Unverified,
    /// The bytes just stored were not found.
    #[error("relocation store: the bytes were not stored")]
    NotStored,
    /// A reference built by this runtime is outside the Store's bounds.
    #[error("relocation store: the reference is outside the store's bounds")]
    Reference {
        /// The bound.
        #[source]
        source: ArgumentError,
    },
    /// A reference read from a stored record is outside the Store's bounds: what it named is
    /// lost.
    #[error("relocation store: a stored reference is outside the store's bounds")]
    StoredReference {
        /// The bound.
        #[source]
        source: ArgumentError,
    },
}

impl RelocationStoreError {
    /// The failed Store operation `e`.
    pub(crate) fn operation(e: StoreError) -> Self {
        Self::Operation {
            source: Arc::new(e).into(),
        }
    }

    /// The common kind of this failure: a Store operation that timed out is
    /// `DeadlineExceeded` (spec 23: the framework maps the provider's operation timeout to
    /// it; a write already sent may still apply), a stored reference outside the bounds
    /// `DataLost`, every other failure `InternalFailure` (06 §20: activation infrastructure).
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::StoredReference { .. } => ErrorKind::DataLost,
            Self::Operation { source } if matches!(**source, StoreError::TimedOut) => {
                ErrorKind::DeadlineExceeded
            }
            Self::Operation { .. }
            | Self::Conflict
            | Self::Unverified
            | Self::NotStored
            | Self::Reference { .. } => ErrorKind::InternalFailure,
        }
    }
}

/// A runtime-internal step that failed (a [`ZLinkError::Internal`], kind `InternalFailure`):
/// nothing the caller did, and nothing of it crosses the wire but its text.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum InternalError {
    /// A runtime JSON body could not be encoded.
    #[error("encoding the {what} failed")]
    Json {
        /// What was encoded.
        what: &'static str,
        /// The encoder's error.
        #[source]
        source: SharedError<serde_json::Error>,
    },
    /// The transport refused to build or number a runtime-internal envelope.
    #[error("building the {what} failed")]
    Envelope {
        /// What was built.
        what: &'static str,
        /// The transport's error.
        #[source]
        source: SharedError<zlink_transport::TransportError>,
    },
    /// A runtime task panicked or was cancelled.
    #[error("a {what} task ended abnormally")]
    Task {
        /// What the task did.
        what: &'static str,
        /// The join error.
        #[source]
        source: SharedError<tokio::task::JoinError>,
    },
    /// A step of a live relocation failed on a typed error of the relocation machinery (the
    /// unit machine, the chunking, the inventory, a stage record).
    #[error("the relocation's {what} failed")]
    Relocation {
        /// Which step.
        what: &'static str,
        /// The typed cause.
        #[source]
        source: SharedError,
    },
    /// A runtime invariant did not hold (a bug, reported as an error instead of a panic).
    #[error("runtime invariant broken: {what}")]
    Invariant {
        /// Which invariant.
        what: &'static str,
    },
}

impl InternalError {
    /// A JSON encoding failure of `what`.
    pub(crate) fn json(what: &'static str) -> impl FnOnce(serde_json::Error) -> Self {
        move |e| Self::Json {
            what,
            source: Arc::new(e).into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_creation_failure_has_its_kind() {
        let st = StableType::new("t").expect("type");
        let lost = || Arc::new(zlink_location::LocationError::Contended).into();
        let cases = [
            (
                CreationError::Rejected {
                    reason: ErrorMessage::sanitise("no"),
                },
                ErrorKind::Rejected,
            ),
            (
                CreationError::Failed {
                    failure: ErrorMessage::sanitise("threw"),
                },
                ErrorKind::InternalFailure,
            ),
            (
                CreationError::Exists {
                    target: crate::messaging::Target::object(
                        zlink_codec::keys::AuthorityKind::Actor,
                        &zlink_codec::ObjectId::new("a").expect("id"),
                    ),
                },
                ErrorKind::AlreadyExists,
            ),
            (
                CreationError::NoRoom {
                    stable_type: st.clone(),
                },
                ErrorKind::CapacityExceeded,
            ),
            (
                CreationError::NotHosted {
                    kind: ObjectKind::Actor,
                    stable_type: st,
                },
                ErrorKind::TypeMismatch,
            ),
            (
                CreationError::RequestTooLarge { source: lost() },
                ErrorKind::InvalidOperation,
            ),
            (
                CreationError::ResultTooLarge { source: lost() },
                ErrorKind::InvalidOperation,
            ),
        ];
        for (e, kind) in cases {
            assert_eq!(e.kind(), kind, "{e}");
        }
    }

    #[test]
    fn a_stored_reference_out_of_bounds_is_data_lost_and_the_rest_internal() {
        let bound = zlink_store_spi::BlobRef::new("").expect_err("empty");
        assert_eq!(
            RelocationStoreError::StoredReference {
                source: bound.clone()
            }
            .kind(),
            ErrorKind::DataLost
        );
        for e in [
            RelocationStoreError::Reference { source: bound },
            RelocationStoreError::Conflict,
            RelocationStoreError::Unverified,
            RelocationStoreError::NotStored,
            RelocationStoreError::operation(StoreError::Cancelled),
        ] {
            assert_eq!(e.kind(), ErrorKind::InternalFailure, "{e}");
        }
    }
}
