//! The store epoch (spec 21 §3, §5, §10; `docs/store-epoch.md`): what one host has seen of the
//! Store-wide generation counters, so a Store that lost its data (restarted without
//! persistence, restored from an older snapshot) is detected and never hands a generation back.
//!
//! - Every generation this host issues (owner lease acquire, authority batches) or holds
//!   (records it reads or takes over) is recorded as the highest *seen* of its kind.
//! - A counter read that answers at or below the highest of its kind seen *before the read*
//!   can only come from a Store that lost data (a correct counter only grows past every value
//!   it issued; a value seen after the read may be newer, so it does not count): it is
//!   *noticed* as data loss and
//!   the value is raised to `highest + 1` before anything is issued from it, so the next
//!   issuance is strictly above every generation this host has seen. The counter move rides
//!   in the same conditional batch as before (under the version or the absence just read).
//! - A noticed data loss — here, by the owner lease (its row rolled back, `lease.rs`) or by the
//!   acknowledged-write verification (`written.rs`) — is a lost lease: admission closes at
//!   once and the renew loop is woken, so it reports the lease lost and takes over under a
//!   strictly higher LeaseGeneration now, not at its next tick (see
//!   [`OwnerLease`](super::lease)).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use zlink_codec::counter::EXHAUSTED;

use super::admission::AdmissionGate;
use super::counters::CounterRow;
use super::generation::GenerationKind;

/// What one host has seen of the generation counters, shared by its owner lease, its
/// authority engine and its authority client.
#[derive(Debug, Default)]
pub(crate) struct StoreEpoch {
    owner_lease: AtomicU64,
    object: AtomicU64,
    authority_owner: AtomicU64,
    /// A data loss noticed and not yet handled by a renew.
    lost: AtomicBool,
    /// How many data losses were noticed so far: a shared row cached before the latest one
    /// may hold content the loss took away under a version the Store now reissues.
    losses: AtomicU64,
    /// Closed the moment a loss is noticed (`None` in unit tests of the epoch alone).
    gate: Option<Arc<AdmissionGate>>,
    /// Wakes the renew loop when a loss is noticed.
    wake: tokio::sync::Notify,
}

impl StoreEpoch {
    /// An epoch that closes `gate` the moment it notices a loss.
    pub(crate) fn with_gate(gate: Arc<AdmissionGate>) -> Self {
        StoreEpoch {
            gate: Some(gate),
            ..StoreEpoch::default()
        }
    }

    fn slot(&self, kind: GenerationKind) -> &AtomicU64 {
        match kind {
            GenerationKind::OwnerLease => &self.owner_lease,
            GenerationKind::Object => &self.object,
            GenerationKind::AuthorityOwner => &self.authority_owner,
        }
    }

    /// Records a generation issued or held by this host.
    pub(crate) fn observe(&self, kind: GenerationKind, value: u64) {
        self.slot(kind).fetch_max(value, Ordering::AcqRel);
    }

    /// The highest generation of `kind` this host has seen (0 if none).
    pub(crate) fn highest(&self, kind: GenerationKind) -> u64 {
        self.slot(kind).load(Ordering::Acquire)
    }

    /// Whether `row` answers at or below `seen`, the [`highest`](Self::highest) of its kind
    /// taken *before* the row was read (Store data loss). A value seen after the read may have
    /// been issued after it, so only what was seen before counts.
    pub(crate) fn is_behind(row: &CounterRow, seen: u64) -> bool {
        seen > 0 && row.next <= seen
    }

    /// `row` as it may be issued from, `seen` being the highest of its kind taken before the
    /// read: a counter behind it is noticed as data loss and raised to one past it (at most
    /// the exhausted sentinel, so issuing from it stays `GenerationExhausted` past the range).
    /// The row's version is kept: the raise is written under the same condition as any
    /// counter move.
    pub(crate) fn checked(&self, mut row: CounterRow, seen: u64) -> CounterRow {
        if Self::is_behind(&row, seen) {
            let highest = seen;
            tracing::warn!(
                counter = %row.kind,
                stored = row.next,
                highest_seen = highest,
                "Store data loss: a generation counter answered at or below a value this host holds; raised past it"
            );
            self.notice_loss();
            row.next = highest.saturating_add(1).min(EXHAUSTED);
        }
        row
    }

    /// Notes a data loss: admission closes now (nothing new is admitted on what the Store may
    /// no longer hold) and the renew loop is woken to handle it (lose the lease, take it over
    /// under a higher generation).
    pub(crate) fn notice_loss(&self) {
        self.count_loss();
        self.lost.store(true, Ordering::Release);
        if let Some(gate) = &self.gate {
            gate.close();
        }
        self.wake.notify_one();
    }

    /// Counts a data loss the renew loop handles itself (the owner lease row rolled back or
    /// gone while held): only the engine's cached rows are dropped, the loop is not woken.
    pub(crate) fn count_loss(&self) {
        self.losses.fetch_add(1, Ordering::AcqRel);
    }

    /// How many data losses were noticed so far (never reset): what the engine compares to
    /// drop every shared row it cached before the latest loss (`docs/store-epoch.md`,
    /// "Version reuse").
    pub(crate) fn losses(&self) -> u64 {
        self.losses.load(Ordering::Acquire)
    }

    /// Completes once a loss is noticed (at once if one was noticed since the last wait).
    pub(crate) async fn loss_noticed(&self) {
        self.wake.notified().await;
    }

    /// Whether a data loss was noticed since the last call (and clears it).
    pub(crate) fn take_loss(&self) -> bool {
        self.lost.swap(false, Ordering::AcqRel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zlink_codec::counter::MAX_ISSUED;

    fn row(kind: GenerationKind, next: u64) -> CounterRow {
        CounterRow {
            kind,
            next,
            version: None,
        }
    }

    #[test]
    fn a_counter_at_or_below_a_seen_generation_is_raised_past_it_and_noticed() {
        let epoch = StoreEpoch::default();
        // Nothing seen: any counter is taken as it is.
        assert_eq!(epoch.checked(row(GenerationKind::Object, 1), 0).next, 1);
        assert!(!epoch.take_loss());
        epoch.observe(GenerationKind::Object, 904);
        epoch.observe(GenerationKind::Object, 276);
        let seen = epoch.highest(GenerationKind::Object);
        assert_eq!(seen, 904);
        // Above what was seen: untouched, nothing noticed.
        assert_eq!(
            epoch.checked(row(GenerationKind::Object, 905), seen).next,
            905
        );
        assert!(!epoch.take_loss());
        // At or below: raised to one past it, noticed once.
        assert_eq!(
            epoch.checked(row(GenerationKind::Object, 904), seen).next,
            905
        );
        assert!(epoch.take_loss());
        assert!(!epoch.take_loss());
        assert_eq!(
            epoch.checked(row(GenerationKind::Object, 1), seen).next,
            905
        );
        assert!(epoch.take_loss());
        // Kinds never mix.
        assert_eq!(
            epoch
                .checked(
                    row(GenerationKind::AuthorityOwner, 1),
                    epoch.highest(GenerationKind::AuthorityOwner)
                )
                .next,
            1
        );
        assert!(!epoch.take_loss());
    }

    #[test]
    fn raising_past_the_last_issuable_value_stays_exhausted() {
        let epoch = StoreEpoch::default();
        epoch.observe(GenerationKind::OwnerLease, MAX_ISSUED);
        let seen = epoch.highest(GenerationKind::OwnerLease);
        let raised = epoch.checked(row(GenerationKind::OwnerLease, 1), seen);
        assert_eq!(raised.next, EXHAUSTED);
        assert!(raised.issue(1).is_err());
    }
}
