//! The live set of one object host: its live activations by [`ObjectKey`], with the counts
//! the descriptor's usage projection, the host status and the metrics sampler read (Actors,
//! Spots, Spots per kind and stable type) kept as entries come and go, so reading them costs
//! the number of Spot types, never a walk over every activation.

use std::collections::BTreeMap;
use std::collections::hash_map::{self, HashMap};

use zlink_codec::StableType;
use zlink_codec::records::ObjectKind;

use super::host::ObjectKey;

/// What the live set counts an entry by.
pub(crate) trait Classified {
    /// The object kind.
    fn kind(&self) -> ObjectKind;
    /// The registered stable type.
    fn stable_type(&self) -> &StableType;
}

/// Live activations: Actors, Spots, and Spots per (kind, stable type).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LiveCounts {
    pub(crate) actors: u64,
    pub(crate) spots: u64,
    /// Only kinds and types with a live Spot.
    pub(crate) spot_types: BTreeMap<(ObjectKind, StableType), u64>,
}

impl LiveCounts {
    fn add(&mut self, kind: ObjectKind, stable_type: &StableType) {
        if kind.is_spot() {
            self.spots += 1;
            *self
                .spot_types
                .entry((kind, stable_type.clone()))
                .or_insert(0) += 1;
        } else {
            self.actors += 1;
        }
    }

    fn sub(&mut self, kind: ObjectKind, stable_type: &StableType) {
        if kind.is_spot() {
            self.spots = self.spots.saturating_sub(1);
            let key = (kind, stable_type.clone());
            if let Some(n) = self.spot_types.get_mut(&key) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    self.spot_types.remove(&key);
                }
            }
        } else {
            self.actors = self.actors.saturating_sub(1);
        }
    }

    /// The counts of `entries`, by a walk (what the kept counts must equal).
    #[cfg(test)]
    fn walk<'a, E: Classified + 'a>(entries: impl Iterator<Item = &'a E>) -> Self {
        let mut c = Self::default();
        for e in entries {
            c.add(e.kind(), e.stable_type());
        }
        c
    }
}

/// The live activations of one host, keyed by object, with their counts.
#[derive(Debug)]
pub(crate) struct LiveSet<E> {
    entries: HashMap<ObjectKey, E>,
    counts: LiveCounts,
}

impl<E> Default for LiveSet<E> {
    fn default() -> Self {
        Self {
            entries: HashMap::default(),
            counts: LiveCounts::default(),
        }
    }
}

impl<E: Classified> LiveSet<E> {
    /// Makes `entry` the one of `key`; returns the entry it replaced.
    pub(crate) fn insert(&mut self, key: ObjectKey, entry: E) -> Option<E> {
        self.counts.add(entry.kind(), entry.stable_type());
        let old = self.entries.insert(key, entry);
        if let Some(o) = &old {
            self.counts.sub(o.kind(), o.stable_type());
        }
        old
    }

    /// Takes the entry of `key` out.
    pub(crate) fn remove(&mut self, key: &ObjectKey) -> Option<E> {
        let old = self.entries.remove(key)?;
        self.counts.sub(old.kind(), old.stable_type());
        Some(old)
    }

    /// Takes every entry out.
    pub(crate) fn drain(&mut self) -> impl Iterator<Item = (ObjectKey, E)> + '_ {
        self.counts = LiveCounts::default();
        self.entries.drain()
    }

    /// Takes out every entry `pick` chooses.
    pub(crate) fn remove_where(&mut self, mut pick: impl FnMut(&E) -> bool) -> Vec<E> {
        let keys: Vec<ObjectKey> = self
            .entries
            .iter()
            .filter(|(_, e)| pick(e))
            .map(|(k, _)| k.clone())
            .collect();
        keys.iter().filter_map(|k| self.remove(k)).collect()
    }

    /// The entry of `key`.
    pub(crate) fn get(&self, key: &ObjectKey) -> Option<&E> {
        self.entries.get(key)
    }

    /// Whether `key` has an entry.
    pub(crate) fn contains_key(&self, key: &ObjectKey) -> bool {
        self.entries.contains_key(key)
    }

    /// How many entries there are.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Every entry (a walk: not for a per-message or per-poll path).
    pub(crate) fn iter(&self) -> hash_map::Iter<'_, ObjectKey, E> {
        self.entries.iter()
    }

    /// The counts, kept as entries come and go.
    pub(crate) fn counts(&self) -> &LiveCounts {
        &self.counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use zlink_codec::ObjectId;
    use zlink_codec::keys::AuthorityKind;

    struct E(ObjectKind, StableType);
    impl Classified for E {
        fn kind(&self) -> ObjectKind {
            self.0
        }
        fn stable_type(&self) -> &StableType {
            &self.1
        }
    }

    const KINDS: [ObjectKind; 3] = [
        ObjectKind::Actor,
        ObjectKind::UserSpot,
        ObjectKind::InstanceSpot,
    ];

    fn key(i: u8) -> ObjectKey {
        let kind = if i % 2 == 0 {
            AuthorityKind::Actor
        } else {
            AuthorityKind::Spot
        };
        (kind, ObjectId::new(format!("o{i}")).expect("id"))
    }

    fn entry(kind: usize, ty: u8) -> E {
        E(
            KINDS[kind % KINDS.len()],
            StableType::new(format!("t{ty}")).expect("stable type"),
        )
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u8, usize, u8),
        Remove(u8),
        RemoveWhere(usize),
        Drain,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (0u8..24, 0usize..3, 0u8..3).prop_map(|(k, kind, ty)| Op::Insert(k, kind, ty)),
            4 => (0u8..24).prop_map(Op::Remove),
            1 => (0usize..3).prop_map(Op::RemoveWhere),
            1 => Just(Op::Drain),
        ]
    }

    proptest! {
        #[test]
        fn the_kept_counts_equal_a_walk_after_any_inserts_and_removes(
            ops in proptest::collection::vec(op(), 1..200)
        ) {
            let mut set = LiveSet::default();
            for op in ops {
                match op {
                    Op::Insert(k, kind, ty) => {
                        set.insert(key(k), entry(kind, ty));
                    }
                    Op::Remove(k) => {
                        set.remove(&key(k));
                    }
                    Op::RemoveWhere(kind) => {
                        let kind = KINDS[kind];
                        set.remove_where(|e| e.0 == kind);
                    }
                    Op::Drain => {
                        let n = set.len();
                        prop_assert_eq!(set.drain().count(), n);
                    }
                }
                let walked = LiveCounts::walk(set.iter().map(|(_, e)| e));
                prop_assert_eq!(set.counts(), &walked);
                prop_assert_eq!(set.counts().actors + set.counts().spots, set.len() as u64);
            }
        }
    }

    #[test]
    fn replacing_an_entry_counts_the_new_one_only() {
        let mut set = LiveSet::default();
        set.insert(key(1), entry(1, 0));
        set.insert(key(1), entry(0, 0));
        assert_eq!(set.counts().actors, 1);
        assert_eq!(set.counts().spots, 0);
        assert!(set.counts().spot_types.is_empty());
    }
}
