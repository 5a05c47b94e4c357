//! The startup error (spec 06 §23): one variant per configuration rule, each naming what it
//! rejected, then one per way a valid root can still fail to start (the Location Store, a
//! bind, a manual peer, a hosted service, an existing Entry Spot id).

use zlink_codec::records::{ObjectKind, ObjectRole};
use zlink_codec::{ChannelName, CodecError, MeshName, ObjectId, StableType};
use zlink_transport::TransportError;

use super::HostedStartError;
use crate::mesh::peer::{EndpointError, HostProblem};
use crate::messaging::{HandlerKey, ZLinkError};
use zlink_location::{ConfigError, LocationError};

/// What a [`StartupError`] is about, coarse enough to branch on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StartupErrorKind {
    /// The root was already started (or its start already failed): a root starts once.
    AlreadyStarted,
    /// A name, key, store or peer is registered twice.
    Duplicate,
    /// A number is outside its range.
    OutOfRange,
    /// A text value (host, endpoint, routing id, prefix, packet name, wave) is malformed.
    InvalidFormat,
    /// A registration needs a Location Store that is not registered.
    MissingStore,
    /// Settings that cannot be combined (role, topology, handler and membership).
    InvalidCombination,
    /// The location options or the codec registry reject their values.
    InvalidOptions,
    /// The handler registrations or a manual peer intent were refused while the root started
    /// (a configuration error found only then; nothing was written for it).
    Refused,
    /// The Location Store failed (the owner lease or a descriptor could not be written).
    Store,
    /// A MeshNode listener could not bind.
    Network,
    /// A hosted service failed to start.
    HostedService,
    /// Something that must be new already exists (the Entry Spot id).
    AlreadyExists,
}

/// Which of the two root stores (spec 06 §13).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StoreKind {
    /// The Location Store.
    Location,
    /// The Relocation Store.
    Relocation,
}

impl std::fmt::Display for StoreKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StoreKind::Location => "Location Store",
            StoreKind::Relocation => "Relocation Store",
        })
    }
}

/// Why a MeshNode needs a Location Store (spec 06 §13, §23).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StoreRequirement {
    /// Object role Client or Server.
    ObjectRole(ObjectRole),
    /// Automatic topology: descriptors are published and peers discovered through the Store.
    AutomaticDiscovery,
}

impl std::fmt::Display for StoreRequirement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreRequirement::ObjectRole(role) => write!(f, "object role `{role}`"),
            StoreRequirement::AutomaticDiscovery => f.write_str("automatic topology"),
        }
    }
}

/// Which host of a network identity (spec 06 §2, §23).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HostField {
    /// The bind host the listener binds.
    Bind,
    /// The advertised host peers connect to.
    Advertised,
}

impl std::fmt::Display for HostField {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            HostField::Bind => "bind host",
            HostField::Advertised => "advertised host",
        })
    }
}

fn scope(mesh: &Option<MeshName>) -> String {
    match mesh {
        Some(m) => format!("MeshNode `{m}`"),
        None => "root".to_owned(),
    }
}

/// Why a root failed to start: an invalid configuration (spec 06 §23; [`Self::is_configuration`]:
/// nothing was bound or written, every such error surfaces before any socket binds or Store
/// request), or a failure of a valid root while it started.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartupError {
    /// The root was already started once (spec 06 §2: a root is configured once per process).
    #[error("the ZLink root was already started; a root starts once")]
    RootAlreadyStarted,
    /// A Location Store or Relocation Store is registered more than once (spec 06 §13).
    #[error("the {store} is registered {count} times; register it exactly once")]
    StoreRegisteredTwice {
        /// Which store.
        store: StoreKind,
        /// How many registrations were made.
        count: usize,
    },
    /// The same MeshName is registered twice (spec 06 §2).
    #[error("MeshName `{mesh}` is registered twice")]
    DuplicateMeshName {
        /// The repeated name.
        mesh: MeshName,
    },
    /// The same ChannelName is registered on two RouteMeshes, whatever the roles (spec 06 §2).
    #[error("ChannelName `{channel}` is registered on MeshName `{first}` and `{second}`")]
    ChannelOnTwoMeshes {
        /// The channel.
        channel: ChannelName,
        /// The first mesh registering it.
        first: MeshName,
        /// The second mesh registering it.
        second: MeshName,
    },
    /// One MeshNode registers a ChannelName twice (Client and Server, or the same role twice;
    /// a Server already includes the outbound path, spec 06 §4).
    #[error("MeshNode `{mesh}` registers ChannelName `{channel}` more than once")]
    DuplicateChannelRole {
        /// The mesh.
        mesh: MeshName,
        /// The channel.
        channel: ChannelName,
    },
    /// A Channel handler whose ChannelName is not a Server membership of its MeshNode
    /// (spec 06 §4, §23: handlers belong to the Server role only).
    #[error(
        "MeshNode `{mesh}` has a handler for ChannelName `{channel}` without a Server membership"
    )]
    ChannelHandlerWithoutServerMembership {
        /// The mesh.
        mesh: MeshName,
        /// The channel.
        channel: ChannelName,
    },
    /// The same handler dispatch key is registered twice (spec 06 §9).
    #[error("handler key {key} is registered twice")]
    DuplicateHandlerKey {
        /// The repeated key.
        key: HandlerKey,
    },
    /// A handler's packet name is not a valid packet name (1..=255 UTF-8 bytes, no control
    /// characters).
    #[error("MeshNode `{mesh}` registers a handler with the invalid packet name {packet:?}")]
    InvalidPacketName {
        /// The mesh.
        mesh: MeshName,
        /// The packet name given.
        packet: String,
    },
    /// An Object Client registers an application Node direct handler (spec 06 §4).
    #[error("Object Client MeshNode `{mesh}` cannot register Node direct handler {key}")]
    NodeDirectHandlerOnObjectClient {
        /// The mesh.
        mesh: MeshName,
        /// The rejected key.
        key: HandlerKey,
    },
    /// A MeshNode needs a Location Store and none is registered (spec 06 §13).
    #[error("MeshNode `{mesh}` uses {requirement} but no Location Store is registered")]
    LocationStoreRequired {
        /// The mesh.
        mesh: MeshName,
        /// What needs the store.
        requirement: StoreRequirement,
    },
    /// The automatic routing-id prefix is not 1..=64 characters of `[A-Za-z0-9._-]`
    /// (spec 06 §23).
    #[error("MeshNode `{mesh}` routing-id prefix {prefix:?} is invalid: {reason}")]
    InvalidRoutingIdPrefix {
        /// The mesh.
        mesh: MeshName,
        /// The prefix given.
        prefix: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// A fixed routing id is not 1..=255 bytes (the RoutingId rule of the codec).
    #[error("MeshNode `{mesh}` fixed routing id has {len} bytes, outside 1..=255")]
    InvalidFixedRoutingId {
        /// The mesh.
        mesh: MeshName,
        /// The length given.
        len: usize,
    },
    /// A fixed routing id with an object role other than None (spec 06 §23).
    #[error(
        "MeshNode `{mesh}` has a fixed routing id, which needs object role `none`, not `{role}`"
    )]
    FixedRoutingIdNeedsRoleNone {
        /// The mesh.
        mesh: MeshName,
        /// The role configured.
        role: ObjectRole,
    },
    /// A fixed routing id on a node with automatic (Location-based) topology (spec 06 §4, §23).
    #[error("MeshNode `{mesh}` has a fixed routing id but automatic topology; use manual topology")]
    FixedRoutingIdWithAutomaticTopology {
        /// The mesh.
        mesh: MeshName,
    },
    /// A manual peer endpoint is not `host:port` with port 1..=65535 (spec 06 §5, §23).
    #[error("MeshNode `{mesh}` manual peer endpoint {endpoint:?} is invalid: {reason}")]
    InvalidPeerEndpoint {
        /// The mesh.
        mesh: MeshName,
        /// The endpoint given.
        endpoint: String,
        /// What is wrong.
        #[source]
        reason: EndpointError,
    },
    /// A manual peer's expected routing id is not 1..=255 bytes (spec 06 §5, §23).
    #[error(
        "MeshNode `{mesh}` manual peer {endpoint:?} expects a routing id of {len} bytes, \
         outside 1..=255"
    )]
    InvalidExpectedRoutingId {
        /// The mesh.
        mesh: MeshName,
        /// The peer's endpoint.
        endpoint: String,
        /// The length given.
        len: usize,
    },
    /// The same manual peer endpoint is registered twice on one MeshNode (intents are released
    /// by endpoint, spec 06 §5).
    #[error("MeshNode `{mesh}` registers manual peer {endpoint:?} twice")]
    DuplicateManualPeer {
        /// The mesh.
        mesh: MeshName,
        /// The repeated endpoint.
        endpoint: String,
    },
    /// A Channel Server weight outside 0..=10000 (spec 06 §4).
    #[error("MeshNode `{mesh}` ChannelName `{channel}` weight {value} is outside 0..=10000")]
    ChannelWeightOutOfRange {
        /// The mesh.
        mesh: MeshName,
        /// The channel.
        channel: ChannelName,
        /// The value given.
        value: i64,
    },
    /// The node-wide placement weight outside 0..=10000 (spec 06 §4).
    #[error("MeshNode `{mesh}` placement weight {value} is outside 0..=10000")]
    PlacementWeightOutOfRange {
        /// The mesh.
        mesh: MeshName,
        /// The value given.
        value: i64,
    },
    /// A capacity limit outside 0..=2^31-1 (spec 06 §4; 0 means unlimited).
    #[error("MeshNode `{mesh}` capacity limit `{option}` = {value} is outside 0..=2147483647")]
    CapacityLimitOutOfRange {
        /// The mesh.
        mesh: MeshName,
        /// Which limit (`actors`, `spots` or `spotType:<kind>:<stable type>`).
        option: String,
        /// The value given.
        value: i64,
    },
    /// A per-type capacity limit names an object kind that is not a Spot kind.
    #[error("MeshNode `{mesh}` per-type capacity limit names `{kind}`, not a Spot kind")]
    NotASpotKind {
        /// The mesh.
        mesh: MeshName,
        /// The kind given.
        kind: ObjectKind,
    },
    /// The same (Spot kind, stable type) limit is set twice.
    #[error("MeshNode `{mesh}` sets the capacity limit of ({kind}, {stable_type}) twice")]
    DuplicateSpotTypeLimit {
        /// The mesh.
        mesh: MeshName,
        /// The Spot kind.
        kind: ObjectKind,
        /// The stable type.
        stable_type: StableType,
    },
    /// Activation concurrency outside 1..=2^31-1 (spec 06 §4: positive only).
    #[error("MeshNode `{mesh}` activation concurrency {value} is outside 1..=2147483647")]
    ActivationConcurrencyOutOfRange {
        /// The mesh.
        mesh: MeshName,
        /// The value given.
        value: i64,
    },
    /// An Entry Spot creation callback on a node that is not an Object Server (only a Server
    /// has an Entry Spot, spec 06 §15).
    #[error(
        "MeshNode `{mesh}` sets an Entry Spot creation callback, which only an Object Server has (role `{role}`)"
    )]
    EntryCallbackOnNonServer {
        /// The mesh.
        mesh: MeshName,
        /// The node's role.
        role: ObjectRole,
    },
    /// The Entry Spot creation callback set twice on one node.
    #[error("MeshNode `{mesh}` sets the Entry Spot creation callback twice")]
    EntryCallbackTwice {
        /// The mesh.
        mesh: MeshName,
    },
    /// An object type registered on a node that is not an Object Server (spec 06 §4: only a
    /// Server has factories).
    #[error(
        "MeshNode `{mesh}` registers object type {stable_type:?}, which only an Object Server can (role `{role}`)"
    )]
    ObjectTypeOnNonServer {
        /// The mesh.
        mesh: MeshName,
        /// The stable type given.
        stable_type: String,
        /// The node's role.
        role: ObjectRole,
    },
    /// A stable type that is not 1..=255 UTF-8 bytes.
    #[error("MeshNode `{mesh}` stable type {stable_type:?} is invalid: {reason}")]
    InvalidStableType {
        /// The mesh.
        mesh: MeshName,
        /// The stable type given.
        stable_type: String,
        /// Why.
        reason: String,
    },
    /// The same stable type registered twice on one Object Server (spec 06 §4, §25).
    #[error("MeshNode `{mesh}` registers stable type {stable_type:?} twice")]
    DuplicateStableType {
        /// The mesh.
        mesh: MeshName,
        /// The stable type.
        stable_type: String,
    },
    /// The same Actor handler key (send or request, packet name) registered twice on one type
    /// (spec 06 §9).
    #[error("MeshNode `{mesh}` object type {stable_type:?} registers the handler {key} twice")]
    DuplicateObjectHandler {
        /// The mesh.
        mesh: MeshName,
        /// The stable type.
        stable_type: String,
        /// The handler key, as text.
        key: String,
    },
    /// An object type without a factory.
    #[error("MeshNode `{mesh}` object type {stable_type:?} has no factory")]
    MissingFactory {
        /// The mesh.
        mesh: MeshName,
        /// The stable type.
        stable_type: String,
    },
    /// A factory's configure step chose no relocation policy (spec 06 §25: exactly one).
    #[error(
        "MeshNode `{mesh}` object type {stable_type:?} chooses no relocation policy (DisableRelocation, RecreateOnRelocation or PreserveStateWith)"
    )]
    RelocationPolicyNotChosen {
        /// The mesh.
        mesh: MeshName,
        /// The stable type.
        stable_type: String,
    },
    /// A factory's configure step chose more than one relocation policy.
    #[error("MeshNode `{mesh}` object type {stable_type:?} chooses both {first} and {second}")]
    RelocationPolicyChosenTwice {
        /// The mesh.
        mesh: MeshName,
        /// The stable type.
        stable_type: String,
        /// The first choice.
        first: crate::objects::RelocationChoice,
        /// The second choice.
        second: crate::objects::RelocationChoice,
    },
    /// A Spot mode set where it has no meaning: an execution mode or readiness mode on an
    /// Instance Spot, or a readiness mode on a `PerActor` User Spot (spec 06 §17, 28 §5).
    #[error(
        "MeshNode `{mesh}` object type {stable_type:?} sets `{setting}`, which a {kind} of this mode does not have"
    )]
    SpotModeNotApplicable {
        /// The mesh.
        mesh: MeshName,
        /// The stable type.
        stable_type: String,
        /// The object kind.
        kind: ObjectKind,
        /// `execution` or `readiness`.
        setting: &'static str,
    },
    /// An Instance Spot type exists or a type chooses RecreateOnRelocation/PreserveStateWith,
    /// and no Relocation Store is registered (spec 06 §23, §25: exactly one is required).
    #[error(
        "MeshNode `{mesh}` object type {stable_type:?} needs a Relocation Store ({reason}), and none is registered"
    )]
    RelocationStoreRequired {
        /// The mesh.
        mesh: MeshName,
        /// The stable type.
        stable_type: String,
        /// Why.
        reason: &'static str,
    },
    /// `max_timers_per_object` outside 1..=`MAX_MAX_TIMERS_PER_OBJECT`.
    #[error("MeshNode `{mesh}` max_timers_per_object {value} is outside 1..={max}")]
    MaxTimersOutOfRange {
        /// The mesh.
        mesh: MeshName,
        /// The value given.
        value: usize,
        /// The largest value allowed.
        max: usize,
    },
    /// `min_timer_period` outside `MIN_MIN_TIMER_PERIOD..=MAX_MIN_TIMER_PERIOD`.
    #[error("MeshNode `{mesh}` min_timer_period {value:?} is outside {min:?}..={max:?}")]
    MinTimerPeriodOutOfRange {
        /// The mesh.
        mesh: MeshName,
        /// The value given.
        value: std::time::Duration,
        /// The smallest value allowed.
        min: std::time::Duration,
        /// The largest value allowed.
        max: std::time::Duration,
    },
    /// An Application Job Queue setting outside its range (spec 06 §3): the manual
    /// `MaxQueuedApplicationJobs` 1..=2^31-1, the pause percent 1..=100, the resume percent
    /// 0..=99. There is no unlimited mode.
    #[error("{setting} {value} is outside {min}..={max}")]
    JobQueueSettingOutOfRange {
        /// The setting's spec name.
        setting: &'static str,
        /// The value given.
        value: i64,
        /// The smallest value allowed.
        min: i64,
        /// The largest value allowed.
        max: i64,
    },
    /// The Application Job Queue resume percent is not below the pause percent (spec 06 §3).
    #[error("application job queue resume percent {resume} is not below the pause percent {pause}")]
    JobQueueThresholdsInverted {
        /// The pause percent.
        pause: i64,
        /// The resume percent.
        resume: i64,
    },
    /// The profile's effective maximum (processors × jobs per processor) overflows 2^31-1
    /// (spec 06 §3: a startup configuration error).
    #[error(
        "application job queue: {processors} processors x {jobs_per_processor} jobs overflows 2^31-1"
    )]
    JobQueueOverflow {
        /// The effective processor count.
        processors: u32,
        /// The profile's jobs per processor.
        jobs_per_processor: u32,
    },
    /// An application mailbox bound outside its range: jobs 1..=2^31-1, bytes 1..=2^62
    /// (spec 06 §11: both axes are bounded).
    #[error("MeshNode `{mesh}` mailbox {axis} bound {value} is outside 1..={max}")]
    MailboxLimitOutOfRange {
        /// The mesh.
        mesh: MeshName,
        /// `jobs` or `bytes`.
        axis: &'static str,
        /// The value given.
        value: i64,
        /// The largest value allowed.
        max: i64,
    },
    /// A placement setting (weight, capacity, activation concurrency) on a node that is not an
    /// Object Server (spec 06 §4, §23: role matches placement target).
    #[error("MeshNode `{mesh}` sets `{setting}`, which only an Object Server has (role `{role}`)")]
    ServerSettingOnNonServer {
        /// The mesh.
        mesh: MeshName,
        /// The setting.
        setting: &'static str,
        /// The role configured.
        role: ObjectRole,
    },
    /// The location options (root, or with a MeshNode's route cache / Message Follow
    /// overrides) break a rule of spec 21 §5 / §7.3.
    #[error("{} location options are invalid: {source}", scope(mesh))]
    LocationOptions {
        /// The MeshNode whose overrides were applied, `None` for the root options.
        mesh: Option<MeshName>,
        /// The rule broken.
        #[source]
        source: ConfigError,
    },
    /// The root relocation settings break a rule of spec 06 §3 / 28 §5.
    #[error("relocation options are invalid: {source}")]
    RelocationOptions {
        /// The rule broken.
        #[source]
        source: super::RelocationConfigError,
    },
    /// A codec registration is invalid (spec 06 §12).
    #[error("codec registration is invalid: {0}")]
    Codec(#[source] CodecError),
    /// The application version is above 2^63-1 (the descriptor's `applicationVersion` range).
    #[error("application version {value} is above 2^63-1")]
    ApplicationVersionOutOfRange {
        /// The value given.
        value: u64,
    },
    /// The maintenance wave is not a stable id (1..=255 bytes UTF-8 without NUL).
    #[error("maintenance wave {wave:?} is invalid: {reason}")]
    InvalidMaintenanceWave {
        /// The value given.
        wave: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// A bind or advertised host is not an IP address or a DNS host name.
    #[error("{} {field} {host:?} is invalid: {reason}", scope(mesh))]
    InvalidHost {
        /// The MeshNode overriding it, `None` for the root network identity.
        mesh: Option<MeshName>,
        /// Which host.
        field: HostField,
        /// The value given.
        host: String,
        /// What is wrong.
        #[source]
        reason: HostProblem,
    },
    /// The effective advertised host is an unspecified address (`0.0.0.0`, `::`): peers could
    /// not connect to the endpoint built from it (spec 06 §23).
    #[error(
        "MeshNode `{mesh}` advertises the unspecified address {host:?}; set an advertised host"
    )]
    UnspecifiedAdvertisedHost {
        /// The mesh.
        mesh: MeshName,
        /// The effective advertised host.
        host: String,
    },
    /// The handler registrations could not be assembled into the dispatch table.
    #[error("handler registration failed: {0}")]
    Handlers(#[source] ZLinkError),
    /// The owner lease or a descriptor could not be written.
    #[error("location runtime failed to start: {0}")]
    Location(#[source] LocationError),
    /// A MeshNode listener could not bind.
    #[error("MeshNode {mesh} could not bind {endpoint}: {source}")]
    Bind {
        /// The MeshName.
        mesh: MeshName,
        /// The bind endpoint.
        endpoint: String,
        /// The transport's error.
        #[source]
        source: TransportError,
    },
    /// A manual peer intent was refused by the transport.
    #[error("manual peer of MeshNode {mesh} refused: {source}")]
    ManualPeer {
        /// The MeshName.
        mesh: MeshName,
        /// Why.
        #[source]
        source: ZLinkError,
    },
    /// A hosted service failed to start; the ones that started were stopped in reverse.
    #[error(transparent)]
    Hosted(#[from] HostedStartError),
    /// The framework-issued Entry Spot id of an Object Server is already a Spot id in the
    /// Location Store (spec 06 §15): startup ends at once, no other id is tried.
    #[error("MeshNode {mesh}: the Entry Spot id {id} already exists")]
    EntrySpotExists {
        /// The MeshName.
        mesh: MeshName,
        /// The Entry Spot id.
        id: ObjectId,
    },
}

impl StartupError {
    /// The coarse kind of this error.
    pub fn kind(&self) -> StartupErrorKind {
        use StartupError as E;
        use StartupErrorKind as K;
        match self {
            E::RootAlreadyStarted => K::AlreadyStarted,
            E::StoreRegisteredTwice { .. }
            | E::DuplicateMeshName { .. }
            | E::ChannelOnTwoMeshes { .. }
            | E::DuplicateChannelRole { .. }
            | E::DuplicateHandlerKey { .. }
            | E::DuplicateManualPeer { .. }
            | E::DuplicateSpotTypeLimit { .. }
            | E::EntryCallbackTwice { .. } => K::Duplicate,
            E::ChannelWeightOutOfRange { .. }
            | E::PlacementWeightOutOfRange { .. }
            | E::CapacityLimitOutOfRange { .. }
            | E::ActivationConcurrencyOutOfRange { .. }
            | E::MailboxLimitOutOfRange { .. }
            | E::JobQueueSettingOutOfRange { .. }
            | E::JobQueueOverflow { .. }
            | E::MaxTimersOutOfRange { .. }
            | E::MinTimerPeriodOutOfRange { .. }
            | E::ApplicationVersionOutOfRange { .. } => K::OutOfRange,
            E::InvalidPacketName { .. }
            | E::InvalidRoutingIdPrefix { .. }
            | E::InvalidFixedRoutingId { .. }
            | E::InvalidPeerEndpoint { .. }
            | E::InvalidExpectedRoutingId { .. }
            | E::InvalidMaintenanceWave { .. }
            | E::InvalidHost { .. } => K::InvalidFormat,
            E::LocationStoreRequired { .. } | E::RelocationStoreRequired { .. } => K::MissingStore,
            E::ObjectTypeOnNonServer { .. }
            | E::EntryCallbackOnNonServer { .. }
            | E::MissingFactory { .. }
            | E::RelocationPolicyNotChosen { .. }
            | E::RelocationPolicyChosenTwice { .. }
            | E::SpotModeNotApplicable { .. }
            | E::JobQueueThresholdsInverted { .. } => K::InvalidCombination,
            E::InvalidStableType { .. } => K::InvalidFormat,
            E::DuplicateStableType { .. } | E::DuplicateObjectHandler { .. } => K::Duplicate,
            E::ChannelHandlerWithoutServerMembership { .. }
            | E::NodeDirectHandlerOnObjectClient { .. }
            | E::FixedRoutingIdNeedsRoleNone { .. }
            | E::FixedRoutingIdWithAutomaticTopology { .. }
            | E::NotASpotKind { .. }
            | E::ServerSettingOnNonServer { .. }
            | E::UnspecifiedAdvertisedHost { .. } => K::InvalidCombination,
            E::LocationOptions { .. } | E::RelocationOptions { .. } | E::Codec(_) => {
                K::InvalidOptions
            }
            E::Handlers(_) | E::ManualPeer { .. } => K::Refused,
            E::Location(_) => K::Store,
            E::Bind { .. } => K::Network,
            E::Hosted(_) => K::HostedService,
            E::EntrySpotExists { .. } => K::AlreadyExists,
        }
    }

    /// Whether this is a configuration error: the root's settings are invalid (the handler
    /// registrations and the manual peers included), and nothing was bound or written.
    pub fn is_configuration(&self) -> bool {
        !matches!(
            self.kind(),
            StartupErrorKind::Store
                | StartupErrorKind::Network
                | StartupErrorKind::HostedService
                | StartupErrorKind::AlreadyExists
        )
    }
}
