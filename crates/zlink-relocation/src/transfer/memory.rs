//! The process-wide relocation payload memory cap (`MaxRelocationPayloadInFlightBytes`, 28 §5).

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::error::{PayloadMemoryError, SettingsError};

/// The largest `Capture` output of one `PreserveStateWith` object, and what is reserved up
/// front for it: 64 MiB (28 §5).
pub const MAX_ADAPTER_STATE_LEN: u64 = 64 * 1024 * 1024;

/// Checks one adapter's `Capture` output: over 64 MiB is
/// [`PayloadMemoryError::AdapterOutputTooLarge`] (`Blocked/StateIncompatible`).
pub fn check_adapter_output(len: u64) -> Result<(), PayloadMemoryError> {
    if len > MAX_ADAPTER_STATE_LEN {
        Err(PayloadMemoryError::AdapterOutputTooLarge {
            actual: len,
            max: MAX_ADAPTER_STATE_LEN,
        })
    } else {
        Ok(())
    }
}

/// The kind of relocation unit a claim is for (28 §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PayloadUnit {
    /// One Actor, one Instance Spot or a `PerActor` Spot authority transition: must fit the cap.
    Single,
    /// A whole `SpotWide` User Spot aggregate: may exceed the cap, and then runs alone.
    SpotWideAggregate,
}

/// How much payload memory one unit asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PayloadClaim {
    unit: PayloadUnit,
    bytes: u64,
}

impl PayloadClaim {
    /// The up-front claim before `Capture` (28 §5): 64 MiB per `PreserveStateWith` object plus
    /// `framework_bytes`, the largest stored size of the queue, journal, timers, list info and
    /// framing. No application estimate is used.
    pub fn before_capture(
        unit: PayloadUnit,
        preserve_state_objects: u32,
        framework_bytes: u64,
    ) -> Result<Self, PayloadMemoryError> {
        let bytes = u64::from(preserve_state_objects)
            .checked_mul(MAX_ADAPTER_STATE_LEN)
            .and_then(|b| b.checked_add(framework_bytes))
            .ok_or(PayloadMemoryError::ClaimOverflow)?;
        Ok(PayloadClaim { unit, bytes })
    }

    /// A claim of exactly `bytes` (for example the target's declared Restore length).
    pub fn exact(unit: PayloadUnit, bytes: u64) -> Self {
        PayloadClaim { unit, bytes }
    }

    /// The unit kind.
    pub fn unit(&self) -> PayloadUnit {
        self.unit
    }

    /// The bytes asked for.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

#[derive(Debug, Default)]
struct State {
    used: u64,
    permits: u64,
    alone: bool,
}

/// The payload memory one process holds for relocations, under one cap (default 256 MiB).
/// Cheap to clone; clones share the account.
///
/// A claim is granted whole or not at all. The sum held never exceeds the cap, with one
/// exception: a `SpotWide` aggregate whose claim exceeds the cap starts only when nothing else
/// is held, and while its permit lives nothing else starts, even after it shrank.
#[derive(Clone)]
pub struct PayloadMemory {
    cap: u64,
    state: Arc<Mutex<State>>,
}

impl fmt::Debug for PayloadMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.lock();
        f.debug_struct("PayloadMemory")
            .field("cap", &self.cap)
            .field("used", &state.used)
            .field("permits", &state.permits)
            .field("held_alone", &state.alone)
            .finish()
    }
}

impl PayloadMemory {
    /// An account with a positive `cap`; zero is [`SettingsError::ZeroPayloadMemoryCap`].
    pub fn new(cap: u64) -> Result<Self, SettingsError> {
        if cap == 0 {
            return Err(SettingsError::ZeroPayloadMemoryCap);
        }
        Ok(PayloadMemory::with_cap(cap))
    }

    /// An account with a cap already validated positive.
    pub(crate) fn with_cap(cap: u64) -> Self {
        PayloadMemory {
            cap,
            state: Arc::new(Mutex::new(State::default())),
        }
    }

    /// The cap.
    pub fn cap(&self) -> u64 {
        self.cap
    }

    /// Bytes held now.
    pub fn used(&self) -> u64 {
        self.lock().used
    }

    /// Permits alive now.
    pub fn permits(&self) -> u64 {
        self.lock().permits
    }

    /// Whether an oversized `SpotWide` aggregate holds the memory alone.
    pub fn is_held_alone(&self) -> bool {
        self.lock().alone
    }

    /// Reserves a claim; the permit gives it back when dropped.
    ///
    /// * a [`PayloadUnit::Single`] claim over the cap: [`PayloadMemoryError::SingleUnitTooLarge`]
    ///   (it never fits; the caller blocks the unit);
    /// * a [`PayloadUnit::SpotWideAggregate`] claim over the cap: granted alone when nothing is
    ///   held, else [`PayloadMemoryError::Exhausted`];
    /// * any other claim while an aggregate holds the memory alone:
    ///   [`PayloadMemoryError::HeldAlone`];
    /// * otherwise granted when it fits beside what is held, else `Exhausted`.
    ///
    /// A refusal reserves nothing; the unit returns its other permits and retries later.
    pub fn try_reserve(
        &self,
        claim: PayloadClaim,
    ) -> Result<PayloadMemoryPermit, PayloadMemoryError> {
        let need = claim.bytes;
        let oversized = need > self.cap;
        if oversized && claim.unit == PayloadUnit::Single {
            return Err(PayloadMemoryError::SingleUnitTooLarge {
                need,
                cap: self.cap,
            });
        }
        let mut state = self.lock();
        if state.alone {
            return Err(PayloadMemoryError::HeldAlone);
        }
        let fits = if oversized {
            state.permits == 0
        } else {
            state.used.checked_add(need).is_some_and(|n| n <= self.cap)
        };
        if !fits {
            return Err(PayloadMemoryError::Exhausted {
                need,
                used: state.used,
                cap: self.cap,
            });
        }
        state.used += need;
        state.permits += 1;
        state.alone = oversized;
        if oversized {
            tracing::info!(
                need,
                cap = self.cap,
                "oversized SpotWide aggregate takes the relocation payload memory alone"
            );
        }
        Ok(PayloadMemoryPermit {
            bytes: need,
            alone: oversized,
            state: self.state.clone(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    // The state is a few integers updated together under the lock; a panic elsewhere cannot
    // leave them half-written, so a poisoned lock is still consistent.
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Payload memory held by one unit; dropping it gives the bytes back (and ends an alone run).
pub struct PayloadMemoryPermit {
    bytes: u64,
    alone: bool,
    state: Arc<Mutex<State>>,
}

impl fmt::Debug for PayloadMemoryPermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PayloadMemoryPermit")
            .field("bytes", &self.bytes)
            .field("alone", &self.alone)
            .finish()
    }
}

impl PayloadMemoryPermit {
    /// Bytes held.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Whether this is an oversized aggregate running alone.
    pub fn is_alone(&self) -> bool {
        self.alone
    }

    /// Shrinks the permit to `bytes` after `Capture` (the real encoded size is known). Growing
    /// is [`PayloadMemoryError::WouldGrow`] and changes nothing. An alone run stays alone.
    pub fn shrink_to(&mut self, bytes: u64) -> Result<(), PayloadMemoryError> {
        if bytes > self.bytes {
            return Err(PayloadMemoryError::WouldGrow {
                current: self.bytes,
                requested: bytes,
            });
        }
        let mut state = lock(&self.state);
        state.used -= self.bytes - bytes;
        self.bytes = bytes;
        Ok(())
    }
}

impl Drop for PayloadMemoryPermit {
    fn drop(&mut self) {
        let mut state = lock(&self.state);
        state.used -= self.bytes;
        state.permits -= 1;
        if self.alone {
            state.alone = false;
        }
    }
}
