//! The versions this run's lease row was written with in its current term (`lease.rs`): what
//! tells a renew whose answer was lost from a Store rolled back to an earlier version.

use std::collections::VecDeque;

use zlink_store_spi::StoreVersion;

/// How many of the term's lease row versions are kept at least (more while the writes before
/// them are not verified yet).
pub(super) const HISTORY_KEPT: usize = 64;

/// The versions this run's lease row was written with in the current term, oldest first (the
/// current one last), and whether a renew since the current one went unanswered.
#[derive(Debug, Default)]
pub(super) struct History {
    /// Each version with the stamp of the renew (or acquire) that wrote it.
    pub(super) versions: VecDeque<(StoreVersion, u64)>,
    /// The stamp of the first renew since the current version whose answer was not received
    /// (`None`: every renew since was answered, so the row can hold no version this run has
    /// not seen).
    pub(super) unanswered_since: Option<u64>,
    /// Every write acknowledged before this stamp was verified (`written.rs`).
    pub(super) verified_before: u64,
}

impl History {
    pub(super) fn push(&mut self, version: StoreVersion, stamp: u64) {
        if self.versions.back().is_some_and(|(v, _)| *v == version) {
            return;
        }
        self.versions.push_back((version, stamp));
        while self.versions.len() > HISTORY_KEPT
            && self
                .versions
                .front()
                .is_some_and(|(_, s)| *s < self.verified_before)
        {
            self.versions.pop_front();
        }
    }

    /// Whether `version` was written by this run earlier in the term (not the current one).
    pub(super) fn earlier(&self, version: &StoreVersion) -> bool {
        let n = self.versions.len();
        self.versions
            .iter()
            .take(n.saturating_sub(1))
            .any(|(v, _)| v == version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(n: u64) -> StoreVersion {
        StoreVersion::new(n.to_string()).expect("version")
    }

    #[test]
    fn versions_are_kept_past_the_ring_until_verified_and_only_earlier_ones_count() {
        let mut h = History::default();
        for n in 1..=100 {
            h.push(v(n), n);
        }
        // Nothing verified yet: every version of the term is kept.
        assert_eq!(h.versions.len(), 100);
        assert!(h.earlier(&v(1)));
        assert!(
            !h.earlier(&v(100)),
            "the current version is not an earlier one"
        );
        assert!(!h.earlier(&v(101)), "never written");
        // The same version twice (an adopted answer) is kept once.
        h.push(v(100), 101);
        assert_eq!(h.versions.len(), 100);
        // Everything before stamp 90 verified: the ring keeps the last 64 at least.
        h.verified_before = 90;
        h.push(v(101), 102);
        assert_eq!(h.versions.len(), HISTORY_KEPT);
        assert!(!h.earlier(&v(37)));
        assert!(h.earlier(&v(38)));
        // Versions not verified yet stay past the ring.
        h.verified_before = 0;
        for n in 102..=200 {
            h.push(v(n), n + 1);
        }
        assert_eq!(h.versions.len(), HISTORY_KEPT + 99);
    }
}
