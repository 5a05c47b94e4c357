//! One entry of the relocation target list: which object must move (spec 21 §1.2, §8).

use std::cmp::Ordering;
use std::fmt;

use crate::inventory::error::{InventoryError, TextField, TextProblem};

/// The longest object id or stable type, in UTF-8 bytes.
pub const MAX_TEXT_LEN: usize = 255;

fn check_text(field: TextField, value: &str, nul_allowed: bool) -> Result<(), InventoryError> {
    let problem = if value.is_empty() {
        Some(TextProblem::Empty)
    } else if value.len() > MAX_TEXT_LEN {
        Some(TextProblem::TooLong { len: value.len() })
    } else if !nul_allowed && value.as_bytes().contains(&0) {
        Some(TextProblem::ContainsNul)
    } else {
        None
    };
    match problem {
        Some(problem) => Err(InventoryError::InvalidText { field, problem }),
        None => Ok(()),
    }
}

fn text_from_utf8(field: TextField, bytes: &[u8]) -> Result<&str, InventoryError> {
    std::str::from_utf8(bytes).map_err(|_| InventoryError::InvalidText {
        field,
        problem: TextProblem::NotUtf8,
    })
}

/// A global ActorId or SpotId: 1..=255 UTF-8 bytes without NUL, compared and ordered byte-wise
/// (no normalization or case folding; spec 21 §3.3–§3.4).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectId(String);

impl ObjectId {
    /// Validates and wraps an id.
    pub fn new(value: impl Into<String>) -> Result<Self, InventoryError> {
        let value = value.into();
        check_text(TextField::ObjectId, &value, false)?;
        Ok(Self(value))
    }

    /// Validates bytes as an id.
    pub fn from_utf8(bytes: &[u8]) -> Result<Self, InventoryError> {
        Self::new(text_from_utf8(TextField::ObjectId, bytes)?)
    }

    /// The id text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Length in UTF-8 bytes (1..=255).
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Always false: an id is never empty (present for API symmetry).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A stable type: the factory's language-independent type name, 1..=255 UTF-8 bytes.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StableType(String);

impl StableType {
    /// Validates and wraps a stable type.
    pub fn new(value: impl Into<String>) -> Result<Self, InventoryError> {
        let value = value.into();
        check_text(TextField::StableType, &value, true)?;
        Ok(Self(value))
    }

    /// Validates bytes as a stable type.
    pub fn from_utf8(bytes: &[u8]) -> Result<Self, InventoryError> {
        Self::new(text_from_utf8(TextField::StableType, bytes)?)
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Length in UTF-8 bytes (1..=255).
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Always false: a stable type is never empty (present for API symmetry).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for StableType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

/// An ObjectGeneration: distinguishes a re-created object from an earlier incarnation of the
/// same id. Issued range 1..=2^63-2 (2^63-1 is the exhausted sentinel, never issued; 21 §3.2).
/// Relocation keeps it unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectGeneration(u64);

impl ObjectGeneration {
    /// The smallest issued generation.
    pub const MIN: u64 = 1;
    /// The largest issued generation, 2^63-2.
    pub const MAX: u64 = (1 << 63) - 2;

    /// Validates a generation.
    pub fn new(value: u64) -> Result<Self, InventoryError> {
        if (Self::MIN..=Self::MAX).contains(&value) {
            Ok(Self(value))
        } else {
            Err(InventoryError::GenerationOutOfRange { value })
        }
    }

    /// The value.
    pub fn get(self) -> u64 {
        self.0
    }
}

/// The kind of a target-list entry. A SpotWide inventory holds exactly one User Spot and any
/// number of its member Actors (21 §1.2: "User Spot + Actor 1..1023").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum MemberKind {
    /// The User Spot the aggregate moves (ordered first).
    UserSpot,
    /// A member Actor of that Spot.
    Actor,
}

impl MemberKind {
    pub(crate) fn to_wire(self) -> u8 {
        match self {
            MemberKind::UserSpot => 1,
            MemberKind::Actor => 2,
        }
    }

    pub(crate) fn from_wire(byte: u8) -> Result<Self, InventoryError> {
        match byte {
            1 => Ok(MemberKind::UserSpot),
            2 => Ok(MemberKind::Actor),
            other => Err(InventoryError::UnknownMemberKind(other)),
        }
    }
}

/// The change the move applies to an entry's object (21 §8: "the change to apply during the
/// move").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum MemberChange {
    /// The object follows the aggregate to the new owner in the one SpotWide CAS: owner and
    /// AuthorityOwnerGeneration change, ObjectGeneration and membership stay, and its capacity
    /// (1 Actor slot; 1 Spot slot plus 1 slot of the Spot's stable type) is secured on the
    /// target. The only change a SpotWide host relocation applies.
    #[default]
    FollowOwner,
}

impl MemberChange {
    pub(crate) fn to_wire(self) -> u8 {
        match self {
            MemberChange::FollowOwner => 1,
        }
    }

    pub(crate) fn from_wire(byte: u8) -> Result<Self, InventoryError> {
        match byte {
            1 => Ok(MemberChange::FollowOwner),
            other => Err(InventoryError::UnknownChange(other)),
        }
    }
}

/// One entry of the relocation target list: which object must move — identity (kind and id),
/// ObjectGeneration, stable type and the change to apply. Never Actor state or payload.
///
/// Membership is structural: every Actor entry is a member of the inventory's one User Spot
/// entry, and the content checksum covers that Spot entry, so it covers membership too.
/// Entries are identified and ordered by (kind, id): the User Spot first, then Actors by id
/// bytes. An Actor and the Spot may share an id string (separate authority key spaces).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct InventoryEntry {
    kind: MemberKind,
    id: ObjectId,
    generation: ObjectGeneration,
    stable_type: StableType,
    change: MemberChange,
}

impl InventoryEntry {
    /// An entry whose object follows the aggregate's owner ([`MemberChange::FollowOwner`]).
    pub fn new(
        kind: MemberKind,
        id: ObjectId,
        generation: ObjectGeneration,
        stable_type: StableType,
    ) -> Self {
        Self {
            kind,
            id,
            generation,
            stable_type,
            change: MemberChange::FollowOwner,
        }
    }

    /// The same entry with another change.
    pub fn with_change(mut self, change: MemberChange) -> Self {
        self.change = change;
        self
    }

    /// The member kind.
    pub fn kind(&self) -> MemberKind {
        self.kind
    }

    /// The global id.
    pub fn id(&self) -> &ObjectId {
        &self.id
    }

    /// The ObjectGeneration.
    pub fn generation(&self) -> ObjectGeneration {
        self.generation
    }

    /// The stable type.
    pub fn stable_type(&self) -> &StableType {
        &self.stable_type
    }

    /// The change to apply.
    pub fn change(&self) -> MemberChange {
        self.change
    }

    /// The order of entries in the list: User Spot first, then by id bytes.
    pub fn cmp_identity(&self, other: &Self) -> Ordering {
        (self.kind, &self.id).cmp(&(other.kind, &other.id))
    }
}
