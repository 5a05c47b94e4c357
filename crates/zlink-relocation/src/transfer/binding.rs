//! The binding values that tie a Restore request, each of its chunks and the target's owner CAS
//! to one move and one target attempt (spec 21 §8.1, §9.1).

use std::fmt;
use std::num::{NonZeroU64, NonZeroU128};

use super::error::{BindingError, FenceField};

/// The largest generation a source fence carries: 2^63 − 2, the last issued value (21 §3.2:
/// the stored range is 1..2^63−1 and 2^63−1 is the exhausted sentinel, never issued).
pub const MAX_FENCE_GENERATION: u64 = (1 << 63) - 2;

/// The source fence of one move: the two generations the target's Location Store CAS is fenced
/// by, from the source's current authority (21 §3.1, §3.2, §9.1).
///
/// Chosen as two generations rather than opaque bytes: both are fixed-size, already part of the
/// authority record the target reads, and compared for equality only. The source's
/// `AuthorityOwnerGeneration` says which owner incarnation of the object captured the payload;
/// the source's `OwnerLeaseGeneration` says which host process run holds it, so a payload from
/// an earlier run of the same host never matches. Both are in `1..=2^63−2`.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct SourceFence {
    authority_owner_generation: NonZeroU64,
    owner_lease_generation: NonZeroU64,
}

impl SourceFence {
    /// A fence from the source's `AuthorityOwnerGeneration` and `OwnerLeaseGeneration`, each
    /// in `1..=`[`MAX_FENCE_GENERATION`].
    pub fn new(
        authority_owner_generation: u64,
        owner_lease_generation: u64,
    ) -> Result<Self, BindingError> {
        Ok(SourceFence {
            authority_owner_generation: generation(
                FenceField::AuthorityOwnerGeneration,
                authority_owner_generation,
            )?,
            owner_lease_generation: generation(
                FenceField::OwnerLeaseGeneration,
                owner_lease_generation,
            )?,
        })
    }

    /// The source's `AuthorityOwnerGeneration`.
    pub fn authority_owner_generation(&self) -> NonZeroU64 {
        self.authority_owner_generation
    }

    /// The source's `OwnerLeaseGeneration` (its host run).
    pub fn owner_lease_generation(&self) -> NonZeroU64 {
        self.owner_lease_generation
    }
}

impl fmt::Debug for SourceFence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "SourceFence(owner-gen {}, lease-gen {})",
            self.authority_owner_generation, self.owner_lease_generation
        )
    }
}

fn generation(field: FenceField, value: u64) -> Result<NonZeroU64, BindingError> {
    match NonZeroU64::new(value) {
        Some(v) if value <= MAX_FENCE_GENERATION => Ok(v),
        _ => Err(BindingError::GenerationOutOfRange {
            field,
            value,
            max: MAX_FENCE_GENERATION,
        }),
    }
}

/// What binds a Restore request and every chunk to one move and one target attempt: the
/// `RelocationId` (non-zero 128-bit), the `TargetAttemptGeneration` (non-zero, compared for
/// equality only) and the [`SourceFence`] (21 §8.1, §9.1).
///
/// The target puts a chunk into assembly only when all three are exactly equal to the Restore
/// request's; anything else is discarded, so a late payload of an earlier attempt never mixes
/// into the current one.
///
/// The identifiers are kept as plain validated integers here; the runtime maps its own
/// `RelocationId` and `TargetAttemptGeneration` types onto them.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct TransferBinding {
    relocation_id: NonZeroU128,
    target_attempt: NonZeroU64,
    source_fence: SourceFence,
}

impl TransferBinding {
    /// The encoded length: 16 + 8 + 8 + 8 bytes.
    pub(crate) const ENCODED_LEN: usize = 40;

    /// A binding from a non-zero `RelocationId`, a non-zero target attempt and the source fence.
    pub fn new(
        relocation_id: u128,
        target_attempt: u64,
        source_fence: SourceFence,
    ) -> Result<Self, BindingError> {
        let relocation_id =
            NonZeroU128::new(relocation_id).ok_or(BindingError::ZeroRelocationId)?;
        let target_attempt =
            NonZeroU64::new(target_attempt).ok_or(BindingError::ZeroTargetAttempt)?;
        Ok(TransferBinding {
            relocation_id,
            target_attempt,
            source_fence,
        })
    }

    /// The `RelocationId` of the move.
    pub fn relocation_id(&self) -> NonZeroU128 {
        self.relocation_id
    }

    /// The `TargetAttemptGeneration` of the Restore request.
    pub fn target_attempt(&self) -> NonZeroU64 {
        self.target_attempt
    }

    /// The source fence.
    pub fn source_fence(&self) -> SourceFence {
        self.source_fence
    }

    /// Appends the 40-byte big-endian layout: relocation id, target attempt, authority owner
    /// generation, owner lease generation.
    pub(crate) fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.relocation_id.get().to_be_bytes());
        out.extend_from_slice(&self.target_attempt.get().to_be_bytes());
        out.extend_from_slice(
            &self
                .source_fence
                .authority_owner_generation
                .get()
                .to_be_bytes(),
        );
        out.extend_from_slice(&self.source_fence.owner_lease_generation.get().to_be_bytes());
    }

    /// Reads the 40-byte layout from exactly [`Self::ENCODED_LEN`] bytes.
    pub(crate) fn read(b: &[u8; Self::ENCODED_LEN]) -> Result<Self, BindingError> {
        let mut id = [0u8; 16];
        id.copy_from_slice(&b[0..16]);
        let fence = SourceFence::new(be_u64(&b[24..32]), be_u64(&b[32..40]))?;
        TransferBinding::new(u128::from_be_bytes(id), be_u64(&b[16..24]), fence)
    }
}

impl fmt::Debug for TransferBinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "TransferBinding(relocation {:032x}, attempt {}, {:?})",
            self.relocation_id, self.target_attempt, self.source_fence
        )
    }
}

/// A big-endian u64 from exactly 8 bytes (shorter input reads as zero-padded; callers pass 8).
pub(crate) fn be_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    let n = b.len().min(8);
    a[..n].copy_from_slice(&b[..n]);
    u64::from_be_bytes(a)
}

/// A big-endian u32 from exactly 4 bytes (shorter input reads as zero-padded; callers pass 4).
pub(crate) fn be_u32(b: &[u8]) -> u32 {
    let mut a = [0u8; 4];
    let n = b.len().min(4);
    a[..n].copy_from_slice(&b[..n]);
    u32::from_be_bytes(a)
}
