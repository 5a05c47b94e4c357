use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::ops::Bound;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::Mutex;

use super::clock::{StoreClock, SystemClock};

mod rollback;
#[cfg(test)]
mod tests;

use crate::{
    Condition, LocationStore, MAX_PAGE_ENCODED_LEN, Mutation, ReadResult, ScanCursor, ScanItem,
    ScanPage, ScanPrefix, ScanRequest, ScanResult, StoreKey, StoreResult, StoreTime, StoreVersion,
    WriteRequest, WriteResult,
};
pub use rollback::{ForeignCheckpoint, MemoryCheckpoint};

/// Options of a [`MemoryLocationStore`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct MemoryLocationOptions {
    /// How long a scan snapshot lives after its first page, by the store clock (default 60 s).
    pub snapshot_ttl: Duration,
    /// The most snapshots kept at once; creating one more drops the oldest, whose cursors then
    /// answer `Expired` (default 1,024).
    pub max_snapshots: usize,
}

impl Default for MemoryLocationOptions {
    fn default() -> Self {
        MemoryLocationOptions {
            snapshot_ttl: Duration::from_secs(60),
            max_snapshots: 1024,
        }
    }
}

impl MemoryLocationOptions {
    /// Sets the snapshot lifetime.
    pub fn snapshot_ttl(mut self, ttl: Duration) -> Self {
        self.snapshot_ttl = ttl;
        self
    }

    /// Sets the most snapshots kept at once (at least 1).
    pub fn max_snapshots(mut self, n: usize) -> Self {
        self.max_snapshots = n.max(1);
        self
    }
}

/// Commits between sweeps of expired values (at least; more when the store holds more keys).
const SWEEP_EVERY: usize = 1024;

#[derive(Clone)]
struct Live {
    bytes: Bytes,
    version: StoreVersion,
    expires_at: Option<StoreTime>,
}

impl Live {
    fn alive_at(&self, now: StoreTime) -> bool {
        self.expires_at.is_none_or(|e| e > now)
    }
}

/// One committed state of a key; `value: None` is a deletion.
struct Entry {
    seq: u64,
    value: Option<Live>,
}

struct Snapshot {
    boundary: u64,
    prefix: ScanPrefix,
    taken_at: StoreTime,
    expires_at: StoreTime,
}

struct State {
    instance: u64,
    seq: u64,
    /// Per key, its history in commit order; only the states some live snapshot (or the present)
    /// can see are kept.
    entries: BTreeMap<StoreKey, Vec<Entry>>,
    /// Commits since the last sweep of expired values.
    writes_since_sweep: usize,
    /// Keys whose history holds more than their latest state, by the sequence of that latest
    /// state: a snapshot at boundary `b` can only have pinned states of keys written after `b`,
    /// so when it ends only those are trimmed again (never every key with history).
    with_history: BTreeMap<u64, BTreeSet<StoreKey>>,
    /// How many keys the re-trims after ended snapshots looked at (a test measure).
    #[cfg(test)]
    pub(super) retrim_visits: usize,
    /// Live snapshots by id (ids increase, so this is creation order).
    snapshots: BTreeMap<u64, Snapshot>,
    next_snapshot: u64,
}

impl State {
    fn current(&self, key: &StoreKey, now: StoreTime) -> Option<&Live> {
        self.entries
            .get(key)
            .and_then(|h| h.last())
            .and_then(|e| e.value.as_ref())
            .filter(|l| l.alive_at(now))
    }

    fn boundaries(&self) -> Vec<u64> {
        let mut b: Vec<u64> = self.snapshots.values().map(|s| s.boundary).collect();
        b.sort_unstable();
        b.dedup();
        b
    }

    fn index_history(&mut self, latest: u64, key: &StoreKey) {
        self.with_history
            .entry(latest)
            .or_default()
            .insert(key.clone());
    }

    fn unindex_history(&mut self, latest: u64, key: &StoreKey) {
        if self.with_history.is_empty() {
            return;
        }
        if let Some(keys) = self.with_history.get_mut(&latest) {
            keys.remove(key);
            if keys.is_empty() {
                self.with_history.remove(&latest);
            }
        }
    }

    /// Takes `key` out of `with_history` before a new state is pushed (its latest changes; the
    /// trim after the push puts it back under the new one if it still keeps history).
    fn unindex_before_push(&mut self, key: &StoreKey) {
        let latest = match self.entries.get(key) {
            Some(history) if history.len() > 1 => history.last().map(|e| e.seq),
            _ => None,
        };
        if let Some(latest) = latest {
            self.unindex_history(latest, key);
        }
    }

    /// Drops the states of `key` that neither the present nor any live snapshot can see. The
    /// latest state is always kept, so the key's place in `with_history` only depends on
    /// whether more than it is left.
    fn trim(&mut self, key: &StoreKey, boundaries: &[u64]) {
        let Some(history) = self.entries.get_mut(key) else {
            return;
        };
        let Some(latest) = history.last().map(|e| e.seq) else {
            return;
        };
        if history.len() > 1 && boundaries.is_empty() {
            // No snapshot: only the present state matters.
            let n = history.len();
            history.drain(..n - 1);
        } else if history.len() > 1 {
            let n = history.len();
            let mut keep = vec![false; n];
            keep[n - 1] = true;
            for &b in boundaries {
                // The newest state at or before b is what a snapshot at b sees.
                if let Some(i) = history.iter().rposition(|e| e.seq <= b) {
                    keep[i] = true;
                }
            }
            let mut i = 0;
            history.retain(|_| {
                let k = keep[i];
                i += 1;
                k
            });
        }
        let len = history.len();
        let only_a_deletion = len == 1 && history[0].value.is_none();
        if only_a_deletion {
            self.entries.remove(key);
        }
        if len > 1 {
            self.index_history(latest, key);
        } else {
            self.unindex_history(latest, key);
        }
    }

    /// Forgets expired snapshots, then trims every key that kept history for them.
    ///
    /// Every snapshot of a store lives equally long, so ids (creation order) are also expiry
    /// order: only the oldest few need looking at, never the whole set. (A clock set backwards
    /// can break that order; a cursor's own expiry is checked again when it is used.)
    fn expire_snapshots(&mut self, now: StoreTime) {
        let mut oldest: Option<u64> = None;
        while self
            .snapshots
            .first_key_value()
            .is_some_and(|(_, s)| s.expires_at <= now)
        {
            if let Some((_, s)) = self.snapshots.pop_first() {
                oldest = Some(oldest.map_or(s.boundary, |o| o.min(s.boundary)));
            }
        }
        if let Some(b) = oldest {
            self.retrim_after(b);
        }
    }

    /// Drops the oldest snapshot (the cap on live snapshots) and what only it pinned.
    fn evict_oldest_snapshot(&mut self) {
        if let Some((_, s)) = self.snapshots.pop_first() {
            self.retrim_after(s.boundary);
        }
    }

    /// Removes keys whose only state is a value expired at `now` that no live snapshot taken
    /// before its expiry can still see.
    fn sweep_expired(&mut self, now: StoreTime) {
        let oldest_snapshot = self.snapshots.values().map(|s| s.taken_at).min();
        self.entries.retain(|_, history| {
            let [only] = history.as_slice() else {
                return true;
            };
            match only.value.as_ref().and_then(|l| l.expires_at) {
                Some(exp) if exp <= now => oldest_snapshot.is_some_and(|t| t < exp),
                _ => true,
            }
        });
    }

    /// Trims again, after a snapshot at `boundary` ended, the only keys it can have pinned a
    /// state of: those written after it (their latest state is past `boundary`). Keys written
    /// only before it never kept history for it, so a scan that ends costs what it pinned, not
    /// every key some other open snapshot still pins.
    fn retrim_after(&mut self, boundary: u64) {
        let boundaries = self.boundaries();
        let keys: Vec<StoreKey> = self
            .with_history
            .range(boundary.saturating_add(1)..)
            .flat_map(|(_, keys)| keys.iter().cloned())
            .collect();
        #[cfg(test)]
        {
            self.retrim_visits += keys.len();
        }
        for k in keys {
            self.trim(&k, &boundaries);
        }
    }
}

/// The in-memory Location Store: the embedded default for single-process use and the
/// reference provider of the contract suite.
///
/// Every commit gets a sequence number; each key keeps the states that the present or a live
/// scan snapshot can see, so a snapshot costs nothing to take and memory stays bounded by the
/// number of live snapshots (at most [`MemoryLocationOptions::max_snapshots`]), never by a
/// copy of the store. Expiry is judged by the store's [`StoreClock`].
#[derive(Clone)]
pub struct MemoryLocationStore {
    state: Arc<Mutex<State>>,
    clock: Arc<dyn StoreClock>,
    options: MemoryLocationOptions,
}

impl fmt::Debug for MemoryLocationStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.state.lock();
        f.debug_struct("MemoryLocationStore")
            .field("keys", &s.entries.len())
            .field("snapshots", &s.snapshots.len())
            .field("clock", &self.clock)
            .finish()
    }
}

impl Default for MemoryLocationStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryLocationStore {
    /// A store on the host wall clock with default options.
    pub fn new() -> Self {
        Self::with_clock(Arc::new(SystemClock))
    }

    /// A store on the given clock with default options.
    pub fn with_clock(clock: Arc<dyn StoreClock>) -> Self {
        Self::with_options(clock, MemoryLocationOptions::default())
    }

    /// A store on the given clock and options.
    pub fn with_options(clock: Arc<dyn StoreClock>, options: MemoryLocationOptions) -> Self {
        MemoryLocationStore {
            state: Arc::new(Mutex::new(State {
                instance: super::next_instance_id(),
                seq: 0,
                entries: BTreeMap::new(),
                writes_since_sweep: 0,
                with_history: BTreeMap::new(),
                #[cfg(test)]
                retrim_visits: 0,
                snapshots: BTreeMap::new(),
                next_snapshot: 1,
            })),
            clock,
            options,
        }
    }

    /// How many keys hold a state (deleted keys still needed by a snapshot included).
    pub fn key_count(&self) -> usize {
        self.state.lock().entries.len()
    }

    /// How many states are held in all (the measure of snapshot memory).
    pub fn retained_states(&self) -> usize {
        self.state.lock().entries.values().map(Vec::len).sum()
    }

    /// Drops expired snapshots and expired values now (it also happens on its own as writes
    /// come in: after every `max(1024, keys)` commits, so the cost per write stays constant).
    pub fn compact(&self) {
        let mut s = self.state.lock();
        let now = self.clock.now();
        s.expire_snapshots(now);
        s.sweep_expired(now);
    }

    /// How many scan snapshots are live.
    pub fn live_snapshots(&self) -> usize {
        let mut s = self.state.lock();
        s.expire_snapshots(self.clock.now());
        s.snapshots.len()
    }

    fn do_read(&self, key: &StoreKey) -> ReadResult {
        let state = self.state.lock();
        let now = self.clock.now();
        match state.current(key, now) {
            Some(l) => ReadResult::Found {
                bytes: l.bytes.clone(),
                version: l.version.clone(),
                expires_at: l.expires_at,
                store_now: now,
            },
            None => ReadResult::Missing { store_now: now },
        }
    }

    fn do_write(&self, request: &WriteRequest) -> WriteResult {
        let mut state = self.state.lock();
        let now = self.clock.now();
        state.expire_snapshots(now);
        let holds = request.conditions().iter().all(|c| match c {
            Condition::Missing(k) => state.current(k, now).is_none(),
            Condition::Version(k, v) => state.current(k, now).is_some_and(|l| l.version == *v),
        });
        if !holds {
            return WriteResult::Conflict { store_now: now };
        }
        state.seq += 1;
        let seq = state.seq;
        state.writes_since_sweep += 1;
        if state.writes_since_sweep >= SWEEP_EVERY.max(state.entries.len()) {
            state.writes_since_sweep = 0;
            state.sweep_expired(now);
        }
        // The sequence is decimal, so it is a valid 1..=20-byte version.
        let version = StoreVersion::new(seq.to_string()).unwrap_or_else(|_| unreachable_version());
        let boundaries = if state.snapshots.is_empty() {
            Vec::new()
        } else {
            state.boundaries()
        };
        let mut put_versions = Vec::with_capacity(request.put_count());
        for m in request.mutations() {
            match m {
                Mutation::Put {
                    key,
                    bytes,
                    retention,
                } => {
                    let live = Live {
                        bytes: Bytes::copy_from_slice(bytes),
                        version: version.clone(),
                        expires_at: retention.map(|r| now.plus(r)),
                    };
                    let entry = Entry {
                        seq,
                        value: Some(live),
                    };
                    state.unindex_before_push(key);
                    match state.entries.get_mut(key) {
                        Some(history) => history.push(entry),
                        None => {
                            state.entries.insert(key.clone(), vec![entry]);
                        }
                    }
                    put_versions.push(version.clone());
                    state.trim(key, &boundaries);
                }
                Mutation::Delete(key) => {
                    state.unindex_before_push(key);
                    if let Some(h) = state.entries.get_mut(key) {
                        h.push(Entry { seq, value: None });
                        state.trim(key, &boundaries);
                    }
                }
            }
        }
        WriteResult::Applied {
            put_versions,
            store_now: now,
        }
    }

    fn do_scan(&self, request: &ScanRequest) -> ScanResult {
        let mut state = self.state.lock();
        let now = self.clock.now();
        state.expire_snapshots(now);
        let (snapshot_id, after) = match &request.cursor {
            None => {
                while state.snapshots.len() >= self.options.max_snapshots {
                    state.evict_oldest_snapshot();
                }
                let id = state.next_snapshot;
                state.next_snapshot += 1;
                let ttl = u64::try_from(self.options.snapshot_ttl.as_millis()).unwrap_or(u64::MAX);
                let snapshot = Snapshot {
                    boundary: state.seq,
                    prefix: request.prefix.clone(),
                    taken_at: now,
                    expires_at: StoreTime::from_millis(now.as_millis().saturating_add(ttl)),
                };
                state.snapshots.insert(id, snapshot);
                (id, None)
            }
            Some(cursor) => match decode_cursor(cursor, state.instance) {
                Some((id, after))
                    if state
                        .snapshots
                        .get(&id)
                        .is_some_and(|s| s.prefix == request.prefix && s.expires_at > now) =>
                {
                    (id, Some(after))
                }
                _ => return ScanResult::Expired,
            },
        };
        let Some(snapshot) = state.snapshots.get(&snapshot_id) else {
            return ScanResult::Expired;
        };
        let (boundary, taken_at) = (snapshot.boundary, snapshot.taken_at);
        let prefix = request.prefix.as_str();
        let start = match &after {
            Some(k) => Bound::Excluded(k.as_str()),
            None => Bound::Included(prefix),
        };
        let limit = request.limit.get();
        let mut items = Vec::new();
        let mut size = 0usize;
        let mut more = false;
        for (key, history) in state.entries.range::<str, _>((start, Bound::Unbounded)) {
            if !key.as_bytes().starts_with(prefix.as_bytes()) {
                break;
            }
            let visible = history
                .iter()
                .rev()
                .find(|e| e.seq <= boundary)
                .and_then(|e| e.value.as_ref())
                .filter(|l| l.alive_at(taken_at));
            let Some(live) = visible else { continue };
            let item = ScanItem {
                key: key.clone(),
                bytes: live.bytes.clone(),
                version: live.version.clone(),
                expires_at: live.expires_at,
            };
            if items.len() == limit || size + item.encoded_len() > MAX_PAGE_ENCODED_LEN {
                more = true;
                break;
            }
            size += item.encoded_len();
            items.push(item);
        }
        let next_cursor = match (more, items.last()) {
            (true, Some(last)) => Some(encode_cursor(state.instance, snapshot_id, &last.key)),
            _ => {
                if let Some(ended) = state.snapshots.remove(&snapshot_id) {
                    state.retrim_after(ended.boundary);
                }
                None
            }
        };
        ScanResult::Page(ScanPage {
            items,
            // Every stored value is bytes this store wrote: nothing here is unreadable.
            unreadable: Vec::new(),
            next_cursor,
            store_now: now,
        })
    }
}

#[cold]
fn unreachable_version() -> StoreVersion {
    // A u64 in decimal is at most 20 bytes, always within 1..=4096.
    StoreVersion::new("0").unwrap_or_else(|_| unreachable_version())
}

const CURSOR_TAG: &str = "m1";

fn encode_cursor(instance: u64, snapshot: u64, last_key: &StoreKey) -> ScanCursor {
    let mut s = format!("{CURSOR_TAG}.{instance:x}.{snapshot:x}.");
    for b in last_key.as_bytes() {
        s.push_str(&format!("{b:02x}"));
    }
    // tag + two u64 in hex + 2 * 1024 hex digits < 4096 bytes.
    ScanCursor::new(s).unwrap_or_else(|_| unreachable_cursor())
}

#[cold]
fn unreachable_cursor() -> ScanCursor {
    ScanCursor::new(CURSOR_TAG).unwrap_or_else(|_| unreachable_cursor())
}

fn decode_cursor(cursor: &ScanCursor, instance: u64) -> Option<(u64, StoreKey)> {
    let mut parts = cursor.as_str().split('.');
    if parts.next()? != CURSOR_TAG {
        return None;
    }
    if u64::from_str_radix(parts.next()?, 16).ok()? != instance {
        return None;
    }
    let snapshot = u64::from_str_radix(parts.next()?, 16).ok()?;
    let hex = parts.next()?;
    if parts.next().is_some() || hex.len() % 2 != 0 {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect();
    let key = StoreKey::from_utf8(&bytes?).ok()?;
    Some((snapshot, key))
}

impl LocationStore for MemoryLocationStore {
    async fn read(&self, key: &StoreKey) -> StoreResult<ReadResult> {
        Ok(self.do_read(key))
    }

    async fn write(&self, request: &WriteRequest) -> StoreResult<WriteResult> {
        Ok(self.do_write(request))
    }

    async fn scan(&self, request: &ScanRequest) -> StoreResult<ScanResult> {
        Ok(self.do_scan(request))
    }
}
