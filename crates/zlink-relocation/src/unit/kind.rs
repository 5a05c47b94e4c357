//! What moves (the unit kinds of spec 28 §5) and how its state moves (the relocation policy of
//! spec 06 §17), with the bounds that depend on them.

/// The largest application state a `PreserveStateWith` adapter may capture for one object,
/// 64 MiB (28 §5: "Adapter output > 64 MiB → `Blocked/StateIncompatible`").
pub const MAX_STATE_LEN: u64 = 64 * 1024 * 1024;

/// The largest whole payload (state, queue, timers, framing) of a single Actor or Instance
/// Spot unit, 256 MiB (28 §5: "A single Actor or Instance Spot must fit in 256 MiB"). A
/// `SpotWide` aggregate has no such bound: a larger one runs alone (a scheduling rule outside
/// this machine).
pub const MAX_SINGLE_PAYLOAD_LEN: u64 = 256 * 1024 * 1024;

/// One relocation unit's boundary (28 §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum UnitKind {
    /// One Actor of an Entry Spot; restored into the target's startup Entry Spot, its node and
    /// Entry membership change together (28 §6 "Entry Spot Actor").
    EntryMemberActor,
    /// One member Actor of a `PerActor` User Spot; moves as its own unit after the Spot
    /// authority transition, with its own policy and adapter (28 §6 step 5).
    PerActorSpotActor,
    /// The Spot authority transition of a `PerActor` User Spot: the target's stateless Spot
    /// shell plus the Spot-level queue authority (28 §5). No Spot state is restored and no
    /// Spot adapter is called; it moves before its member Actors and is completed only after
    /// the last of them (21 §8.1).
    PerActorSpotShell,
    /// A `SpotWide` User Spot: the Spot and every member Actor at the seal, moved by one owner
    /// change (21 §8.1, 28 §6).
    SpotWideAggregate,
    /// One Instance Spot (no Actor membership).
    InstanceSpot,
}

impl UnitKind {
    /// Every kind, for tests and tables.
    pub const ALL: [UnitKind; 5] = [
        UnitKind::EntryMemberActor,
        UnitKind::PerActorSpotActor,
        UnitKind::PerActorSpotShell,
        UnitKind::SpotWideAggregate,
        UnitKind::InstanceSpot,
    ];

    /// Whether a `PreserveStateWith` policy makes this unit capture and restore application
    /// state. False only for the `PerActor` Spot shell ("no Spot fields restored → no Spot
    /// adapter call", 28 §6).
    pub fn restores_application_state(self) -> bool {
        !matches!(self, UnitKind::PerActorSpotShell)
    }

    /// Whether this unit's completion waits for other units: the `PerActor` Spot shell is
    /// recorded `Completed` only once the last member Actor and the source relay finish
    /// (21 §8.1), and its owner change starts the member Actor units (28 §6 step 5).
    pub fn waits_for_members(self) -> bool {
        matches!(self, UnitKind::PerActorSpotShell)
    }

    /// The bound on the unit's whole captured payload, if any (see [`MAX_SINGLE_PAYLOAD_LEN`]).
    pub fn payload_bound(self) -> Option<u64> {
        match self {
            UnitKind::SpotWideAggregate => None,
            _ => Some(MAX_SINGLE_PAYLOAD_LEN),
        }
    }
}

/// The relocation policy a factory chose (exactly one, 06 §17).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Policy {
    /// `DisableRelocation`: a cross-node move is rejected before capture; the object stays.
    Disable,
    /// `RecreateOnRelocation`: no application state; the target factory runs for the same id
    /// and only the framework's unfinished work (queue, timers) moves.
    Recreate,
    /// `PreserveStateWith(adapter)`: the adapter's captured bytes (at most
    /// [`MAX_STATE_LEN`]) are restored into the instance the target factory built.
    Preserve,
}

impl Policy {
    /// Every policy, for tests and tables.
    pub const ALL: [Policy; 3] = [Policy::Disable, Policy::Recreate, Policy::Preserve];
}

/// One participant of a `SpotWide` aggregate (the Spot or a member Actor) as the preflight
/// sees it: its policy and whether the chosen target supports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Participant {
    /// The participant's factory policy.
    pub policy: Policy,
    /// The target registered a compatible factory for the participant's stable type.
    pub target_supports_type: bool,
    /// The target registered the state adapter (needed only under [`Policy::Preserve`]).
    pub target_has_adapter: bool,
}

/// Why a whole `SpotWide` move is rejected before any state is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AggregateRejection {
    /// No participants were given; an aggregate has at least its Spot.
    #[error("a SpotWide aggregate has at least its Spot")]
    Empty,
    /// A participant uses `DisableRelocation`.
    #[error("participant {index} uses DisableRelocation")]
    RelocationDisabled {
        /// Position in the list given.
        index: usize,
    },
    /// The target does not offer the participant's stable type.
    #[error("the target does not support participant {index}'s type")]
    TargetUnsupported {
        /// Position in the list given.
        index: usize,
    },
    /// The participant preserves state but the target has no adapter for it.
    #[error("the target has no state adapter for participant {index}")]
    AdapterMissing {
        /// Position in the list given.
        index: usize,
    },
}

/// What kind of [`AggregateRejection`] it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AggregateRejectionKind {
    /// [`AggregateRejection::Empty`].
    Empty,
    /// [`AggregateRejection::RelocationDisabled`].
    RelocationDisabled,
    /// [`AggregateRejection::TargetUnsupported`].
    TargetUnsupported,
    /// [`AggregateRejection::AdapterMissing`].
    AdapterMissing,
}

impl AggregateRejection {
    /// What kind of rejection it is.
    pub fn kind(&self) -> AggregateRejectionKind {
        match self {
            AggregateRejection::Empty => AggregateRejectionKind::Empty,
            AggregateRejection::RelocationDisabled { .. } => {
                AggregateRejectionKind::RelocationDisabled
            }
            AggregateRejection::TargetUnsupported { .. } => {
                AggregateRejectionKind::TargetUnsupported
            }
            AggregateRejection::AdapterMissing { .. } => AggregateRejectionKind::AdapterMissing,
        }
    }
}

/// The preflight of a `SpotWide` move: every participant (the Spot, then its member Actors)
/// must pass the policy, adapter and target-support check, or the whole move is rejected
/// before any state is stored (21 §8.2, 28 §6). The first failing participant is reported.
///
/// On success it returns the policy the aggregate unit runs under: [`Policy::Preserve`] if any
/// participant preserves state (the capture then carries state), else [`Policy::Recreate`].
///
/// ```
/// use zlink_relocation::unit::{check_spot_wide, AggregateRejection, Participant, Policy};
/// let ok = Participant { policy: Policy::Recreate, target_supports_type: true, target_has_adapter: false };
/// let off = Participant { policy: Policy::Disable, ..ok };
/// assert_eq!(check_spot_wide(&[ok, ok]), Ok(Policy::Recreate));
/// assert_eq!(check_spot_wide(&[ok, off]), Err(AggregateRejection::RelocationDisabled { index: 1 }));
/// ```
pub fn check_spot_wide(participants: &[Participant]) -> Result<Policy, AggregateRejection> {
    if participants.is_empty() {
        return Err(AggregateRejection::Empty);
    }
    let mut policy = Policy::Recreate;
    for (index, p) in participants.iter().enumerate() {
        match p.policy {
            Policy::Disable => return Err(AggregateRejection::RelocationDisabled { index }),
            _ if !p.target_supports_type => {
                return Err(AggregateRejection::TargetUnsupported { index });
            }
            Policy::Preserve if !p.target_has_adapter => {
                return Err(AggregateRejection::AdapterMissing { index });
            }
            Policy::Preserve => policy = Policy::Preserve,
            Policy::Recreate => {}
        }
    }
    Ok(policy)
}
