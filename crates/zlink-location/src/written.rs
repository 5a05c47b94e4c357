//! Acknowledged-write verification (`docs/store-epoch.md`, "What the runtime does"): after each
//! renew, this host checks that what it wrote before the renew was sent is still in the Store,
//! so a Store that failed over to a replica missing acknowledged writes is noticed within one
//! renew interval.
//!
//! A Store replicated asynchronously rolls back, on failover, to a *prefix* of the old
//! master's write order. Every authority row this host puts or deletes is recorded here once
//! the Store acknowledged it, with a [stamp](WrittenBook::mark) taken after the answer
//! arrived; only the latest expectation per key is kept. The renew loop hands over the stamp
//! taken before each successful renew was sent; [`WrittenBook::verify`] then checks every key
//! recorded before it and forgets those that hold. Why that is enough: a write acknowledged
//! before renew *k* was sent was applied before it; renew *k* applied on the version renew
//! *k−1* left, so the Store's prefix holds renew *k−1*. If a verified write is lost later,
//! renew *k* is lost with it, and renew *k+1* conflicts onto a version this run wrote earlier
//! in its term, which the owner lease reads as a rollback (`lease.rs`). Keys acknowledged after
//! the stamp wait for the next renew.
//!
//! **The check.** [`CHECK_KEYS`] keys at a time go into one conditional batch *without a
//! mutation*: each put's version, each delete's absence. It applies only if every row still
//! holds exactly what this host wrote — the usual case, one Store call for 256 rows. Only the
//! rows of a chunk that conflicts are read back one by one (at most [`MAX_READS_IN_FLIGHT`] at
//! once) and judged. (This relies on the Store never giving a row the same version twice; a
//! Store whose version counter itself goes back with a rollback may, rarely, reissue a lost
//! write's version to a later write of the same row: `docs/store-epoch.md`.)
//!
//! **`Reserved` puts are not checked**, only forgotten: a lost Reserve only makes its own
//! Commit conflict (no activation rests on it), and a `Reserved` record is ended by others in
//! the normal course (its owner commits it, any node may cancel an abandoned one) — checking it
//! would only turn the check into reads.
//!
//! What a row read back may hold, judged against what this host wrote (a [`Verdict::Lost`]
//! closes admission at once and wakes the renew loop to take the lease over):
//!
//! - **A put** holds if the row is the bytes put, or a *later* record: a strictly greater
//!   (ObjectGeneration, AuthorityOwnerGeneration) pair (a NewOwner, a takeover, a re-creation),
//!   or the `Active` record committed from a `Reserved` one. A missing row holds for a record
//!   this host handed off — it wrote a relocation reservation for the object, or for the
//!   `SpotWide` User Spot it resolves through, within the last [`HANDOFF_ROUNDS`] rounds: the
//!   new owner may have deleted it. Anything else — missing, the same pair in an earlier state
//!   (a lost Commit leaves `Reserved`), a lower pair — is a lost write.
//! - **A delete** holds if the row is missing, or holds a record whose ObjectGeneration is
//!   above every ObjectGeneration this host had seen when it sent the delete (a re-creation
//!   issues from the counter after it). A record at or below is a deleted record come back.
//! - A row that does not decode is not a rollback this can judge: forgotten and logged. A read
//!   that fails, or a check that fails, keeps the keys for the next renew; a key with a write of
//!   this host in flight (or written again meanwhile) is judged at the next renew against the
//!   newer write.
//!
//! A write whose outcome is unknown (a transport error, a time-out) is not recorded, and the
//! keys it touched are forgotten: which of the two values the row should hold cannot be told.
//! A new lease term forgets everything (the takeover reclaims the earlier run's rows).
//!
//! Memory: one entry per distinct authority key written since the last verified renew (the
//! bytes put are kept, shared with the request, not copied) — the writes of about one renew
//! interval — plus the relocation reservations of the last [`HANDOFF_ROUNDS`] rounds.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};

use parking_lot::Mutex;
use serde::Deserialize;
use zlink_codec::records::{AllocationState, AuthorityRecord};
use zlink_codec::{KeyParts, LogicalKey};
use zlink_store_spi::Bytes;
use zlink_store_spi::entropy::HashMap;
use zlink_store_spi::{
    Condition, DynLocationStore, LocationStore, Mutation, ReadResult, ScanPrefix, StoreErrorKind,
    StoreKey, StoreVersion, WriteRequest, WriteResult,
};

use super::authority::{AuthorityHandle, MemberResolver};
use super::epoch::StoreEpoch;
use super::generation::GenerationKind;
use super::identity::{ObjectId, ObjectKind};
use super::keys::{self, PrivateFamily};

/// The most verification reads in flight at once.
pub(crate) const MAX_READS_IN_FLIGHT: usize = 32;

/// How many keys one verification check (a conditional batch without a mutation) covers.
pub(crate) const CHECK_KEYS: usize = 256;

/// How many verification rounds a relocation reservation this host wrote keeps a missing
/// record of its object from counting as lost (12 rounds: a minute at the default renew
/// interval).
pub(crate) const HANDOFF_ROUNDS: u64 = 12;

/// What one key should hold.
#[derive(Debug, Clone)]
enum Expected {
    /// The bytes put (and the version they were put under).
    Put { bytes: Bytes, version: StoreVersion },
    /// Absent, or a record created after the delete: `object_before` is the highest
    /// ObjectGeneration this host had seen when it sent the delete.
    Deleted { object_before: u64 },
}

#[derive(Debug, Clone)]
struct Entry {
    stamp: u64,
    expected: Expected,
}

#[derive(Debug, Default)]
struct Book {
    /// Bumped by every new lease term: answers of an earlier term are dropped.
    term: u64,
    entries: HashMap<StoreKey, Entry>,
    /// Authority keys of objects this host wrote a relocation reservation for, with the round
    /// it was written in.
    handoffs: HashMap<StoreKey, u64>,
    /// Writes of this host in flight, per tracked key.
    writing: HashMap<StoreKey, u32>,
    /// Verification rounds completed this term.
    round: u64,
}

/// A tracked write on its way to the Store (see [`WrittenBook::before_write`]).
#[derive(Debug)]
pub(crate) struct Watch {
    term: u64,
    object_before: u64,
    keys: Vec<StoreKey>,
}

/// How one verification round ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Every key judged held (or was left for the next round).
    Held {
        /// Keys read back and forgotten.
        verified: usize,
        /// Keys left for the next round (a failed read, a write in flight).
        kept: usize,
    },
    /// An acknowledged write of this host is no longer in the Store.
    Lost {
        /// The key.
        key: StoreKey,
        /// What was found.
        why: &'static str,
    },
    /// The lease term changed meanwhile: nothing judged.
    Stale,
}

/// The acknowledged writes of one host awaiting verification (see the module docs).
pub(crate) struct WrittenBook {
    enabled: bool,
    ticks: AtomicU64,
    epoch: Arc<StoreEpoch>,
    members: Option<MemberResolver>,
    book: Mutex<Book>,
}

impl std::fmt::Debug for WrittenBook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let b = self.book.lock();
        f.debug_struct("WrittenBook")
            .field("enabled", &self.enabled)
            .field("term", &b.term)
            .field("pending", &b.entries.len())
            .finish()
    }
}

static AUTHORITY_PREFIX: LazyLock<ScanPrefix> = LazyLock::new(keys::authority_prefix);
static RESERVATION_PREFIX: LazyLock<ScanPrefix> =
    LazyLock::new(|| PrivateFamily::CapacityReservation.prefix());

fn is_authority(key: &StoreKey) -> bool {
    key.as_str().starts_with(AUTHORITY_PREFIX.as_str())
}

fn is_reservation(key: &StoreKey) -> bool {
    key.as_str().starts_with(RESERVATION_PREFIX.as_str())
}

fn mutation_key(m: &Mutation) -> &StoreKey {
    match m {
        Mutation::Put { key, .. } | Mutation::Delete(key) => key,
    }
}

/// The object a relocation reservation row names (its layout is `authority/rows.rs`'s; only
/// the two fields are read).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReservedObject {
    object_kind: String,
    id: String,
}

fn reserved_object(bytes: &[u8]) -> Option<StoreKey> {
    let r: ReservedObject = serde_json::from_slice(bytes).ok()?;
    let kind = ObjectKind::parse(&r.object_kind).ok()?;
    let id = ObjectId::new(r.id).ok()?;
    keys::authority(kind, &id).ok()
}

fn pair(r: &AuthorityRecord) -> (u64, u64) {
    (
        r.object_generation.get(),
        r.authority_owner_generation.get(),
    )
}

/// How one key read back compares with what this host wrote.
#[derive(Debug, PartialEq, Eq)]
enum Judged {
    Holds,
    Lost(&'static str),
    /// Not decodable: not judged, forgotten.
    Unjudgeable,
}

impl WrittenBook {
    /// A book for one host; `enabled: false` records nothing (only stamps are issued).
    pub(crate) fn new(
        enabled: bool,
        epoch: Arc<StoreEpoch>,
        members: Option<MemberResolver>,
    ) -> Self {
        WrittenBook {
            enabled,
            ticks: AtomicU64::new(1),
            epoch,
            members,
            book: Mutex::new(Book::default()),
        }
    }

    /// Whether writes are recorded and verified.
    pub(crate) fn enabled(&self) -> bool {
        self.enabled
    }

    /// A stamp: every stamp is greater than every one taken before it. Taken before a renew
    /// is sent and after a write's answer arrived, so `ack < renew` means the write was
    /// applied before the renew was sent.
    pub(crate) fn mark(&self) -> u64 {
        self.ticks.fetch_add(1, Ordering::AcqRel)
    }

    /// Forgets everything (a new lease term).
    pub(crate) fn new_term(&self) {
        let mut b = self.book.lock();
        b.term += 1;
        b.entries.clear();
        b.handoffs.clear();
        b.round = 0;
    }

    /// How many keys await verification.
    #[cfg(test)]
    pub(crate) fn pending(&self) -> usize {
        self.book.lock().entries.len()
    }

    /// Called before `request` is sent: `Some` if it writes an authority row or a relocation
    /// reservation (its keys are marked in flight until [`after_write`](Self::after_write)).
    pub(crate) fn before_write(&self, request: &WriteRequest) -> Option<Watch> {
        if !self.enabled {
            return None;
        }
        let keys: Vec<StoreKey> = request
            .mutations()
            .iter()
            .map(mutation_key)
            .filter(|k| is_authority(k))
            .cloned()
            .collect();
        let reserves = request
            .mutations()
            .iter()
            .any(|m| is_reservation(mutation_key(m)));
        if keys.is_empty() && !reserves {
            return None;
        }
        let object_before = self.epoch.highest(GenerationKind::Object);
        let mut b = self.book.lock();
        for k in &keys {
            *b.writing.entry(k.clone()).or_insert(0) += 1;
        }
        Some(Watch {
            term: b.term,
            object_before,
            keys,
        })
    }

    /// Called with the write's answer: `Some(put_versions)` if it applied, `None` if it did
    /// not (a conflict: nothing changes) — and `unknown` when it may or may not have applied.
    pub(crate) fn after_write(
        &self,
        watch: Watch,
        request: &WriteRequest,
        applied: Option<&[StoreVersion]>,
        unknown: bool,
    ) {
        let stamp = self.mark();
        let mut b = self.book.lock();
        for k in &watch.keys {
            if let Some(n) = b.writing.get_mut(k) {
                *n -= 1;
                if *n == 0 {
                    b.writing.remove(k);
                }
            }
        }
        if b.term != watch.term {
            return;
        }
        if unknown {
            for k in &watch.keys {
                b.entries.remove(k);
            }
            return;
        }
        let Some(versions) = applied else {
            return;
        };
        let round = b.round;
        let mut put = 0;
        for m in request.mutations() {
            match m {
                Mutation::Put { key, bytes, .. } => {
                    let version = versions.get(put).cloned();
                    put += 1;
                    if is_authority(key) {
                        if let Some(version) = version {
                            let expected = Expected::Put {
                                bytes: bytes.clone(),
                                version,
                            };
                            b.entries.insert(key.clone(), Entry { stamp, expected });
                        }
                    } else if is_reservation(key) {
                        if let Some(object) = reserved_object(bytes) {
                            b.handoffs.insert(object, round);
                        }
                    }
                }
                Mutation::Delete(key) if is_authority(key) => {
                    let expected = Expected::Deleted {
                        object_before: watch.object_before,
                    };
                    b.entries.insert(key.clone(), Entry { stamp, expected });
                }
                Mutation::Delete(_) => {}
            }
        }
    }

    /// Whether this host handed the record at `key` off (see the module docs): it wrote a
    /// relocation reservation for it, or for the `SpotWide` User Spot it resolves through.
    fn handed_off(&self, key: &StoreKey, bytes: &[u8], version: &StoreVersion) -> bool {
        let b = self.book.lock();
        if b.handoffs.contains_key(key) {
            return true;
        }
        drop(b);
        let Some(members) = &self.members else {
            return false;
        };
        let Ok(KeyParts::Authority { id, .. }) = LogicalKey::parse(key.as_str()) else {
            return false;
        };
        let Ok(handle) = AuthorityHandle::decode(id, bytes, version.clone()) else {
            return false;
        };
        let Some(spot) = members.resolve(&handle) else {
            return false;
        };
        keys::authority(ObjectKind::UserSpot, &spot)
            .is_ok_and(|k| self.book.lock().handoffs.contains_key(&k))
    }

    fn judge(&self, key: &StoreKey, expected: &Expected, read: &ReadResult) -> Judged {
        match expected {
            Expected::Put { bytes, version } => {
                if let ReadResult::Found { bytes: now, .. } = read {
                    if now == bytes {
                        return Judged::Holds;
                    }
                }
                let Ok(ours) = AuthorityRecord::decode(bytes) else {
                    return Judged::Unjudgeable;
                };
                match read {
                    ReadResult::Missing { .. } => {
                        if ours.allocation.state == AllocationState::Reserved
                            || self.handed_off(key, bytes, version)
                        {
                            Judged::Holds
                        } else {
                            Judged::Lost("the record this host put is gone")
                        }
                    }
                    ReadResult::Found { bytes: now, .. } => {
                        let Ok(theirs) = AuthorityRecord::decode(now) else {
                            return Judged::Unjudgeable;
                        };
                        let committed = ours.allocation.state == AllocationState::Reserved
                            && theirs.allocation.state == AllocationState::Active;
                        if pair(&theirs) > pair(&ours)
                            || (pair(&theirs) == pair(&ours) && committed)
                        {
                            Judged::Holds
                        } else {
                            Judged::Lost("an earlier state of the record this host put is back")
                        }
                    }
                }
            }
            Expected::Deleted { object_before } => match read {
                ReadResult::Missing { .. } => Judged::Holds,
                ReadResult::Found { bytes, .. } => match AuthorityRecord::decode(bytes) {
                    Ok(r) if r.object_generation.get() > *object_before => Judged::Holds,
                    Ok(_) => Judged::Lost("a record this host deleted is back"),
                    Err(_) => Judged::Unjudgeable,
                },
            },
        }
    }

    /// One verification round over every key recorded before `before` (a stamp taken before a
    /// successful renew was sent): `Reserved` puts are forgotten unread (see the module docs);
    /// the others are checked [`CHECK_KEYS`] at a time by one conditional batch without a
    /// mutation (each put's version, each delete's absence) — it applies only if every one
    /// still holds exactly what this host wrote — and only a chunk that conflicts is read back
    /// key by key (at most [`MAX_READS_IN_FLIGHT`] reads at once) and judged. Stops at the
    /// first lost write.
    pub(crate) async fn verify(
        self: &Arc<Self>,
        store: &Arc<dyn DynLocationStore>,
        before: u64,
    ) -> Verdict {
        let (term, todo): (u64, Vec<(StoreKey, Entry)>) = {
            let b = self.book.lock();
            (
                b.term,
                b.entries
                    .iter()
                    .filter(|(_, e)| e.stamp < before)
                    .map(|(k, e)| (k.clone(), e.clone()))
                    .collect(),
            )
        };
        let mut verified = 0;
        let mut kept = 0;
        let mut checked = Vec::with_capacity(todo.len());
        for (key, entry) in todo {
            if let Expected::Put { bytes, .. } = &entry.expected {
                if AuthorityRecord::decode(bytes)
                    .is_ok_and(|r| r.allocation.state == AllocationState::Reserved)
                {
                    verified += 1;
                    self.forget_if_same(term, &key, entry.stamp);
                    continue;
                }
            }
            checked.push((key, entry));
        }
        let mut to_read = Vec::new();
        for chunk in checked.chunks(CHECK_KEYS) {
            let conditions = chunk
                .iter()
                .map(|(key, entry)| match &entry.expected {
                    Expected::Put { version, .. } => {
                        Condition::Version(key.clone(), version.clone())
                    }
                    Expected::Deleted { .. } => Condition::Missing(key.clone()),
                })
                .collect();
            let check = match WriteRequest::new(conditions, Vec::new()) {
                Ok(check) => store.write(&check).await,
                // Never over the bounds (256 keys of at most 1 KiB); read them instead.
                Err(_) => Ok(WriteResult::Conflict {
                    store_now: zlink_store_spi::StoreTime::from_millis(0),
                }),
            };
            match check {
                Ok(WriteResult::Applied { .. }) => {
                    for (key, entry) in chunk {
                        verified += 1;
                        self.forget_if_same(term, key, entry.stamp);
                    }
                }
                Ok(WriteResult::Conflict { .. }) => to_read.extend_from_slice(chunk),
                Err(_) => kept += chunk.len(),
            }
            if self.book.lock().term != term {
                return Verdict::Stale;
            }
        }
        let mut to_read = to_read.into_iter();
        let mut reads = tokio::task::JoinSet::new();
        loop {
            while reads.len() < MAX_READS_IN_FLIGHT {
                let Some((key, entry)) = to_read.next() else {
                    break;
                };
                let store = Arc::clone(store);
                reads.spawn(async move {
                    let read = store.read(&key).await;
                    (key, entry, read)
                });
            }
            let Some(done) = reads.join_next().await else {
                break;
            };
            let Ok((key, entry, read)) = done else {
                kept += 1;
                continue;
            };
            let read = match read {
                Ok(read) => read,
                Err(e) if e.kind() == StoreErrorKind::Unreadable => {
                    tracing::warn!(%key, error = %e, "write verification skips a key the Store cannot read");
                    self.forget_if_same(term, &key, entry.stamp);
                    continue;
                }
                Err(_) => {
                    kept += 1;
                    continue;
                }
            };
            {
                let b = self.book.lock();
                if b.term != term {
                    return Verdict::Stale;
                }
                // Written again, or a write in flight: judged against the newer write later.
                let same = b.entries.get(&key).is_some_and(|e| e.stamp == entry.stamp);
                if !same || b.writing.contains_key(&key) {
                    kept += 1;
                    continue;
                }
            }
            match self.judge(&key, &entry.expected, &read) {
                Judged::Holds => {
                    verified += 1;
                    self.forget_if_same(term, &key, entry.stamp);
                }
                Judged::Unjudgeable => {
                    tracing::warn!(%key, "write verification skips a row that does not decode");
                    self.forget_if_same(term, &key, entry.stamp);
                }
                Judged::Lost(why) => {
                    reads.abort_all();
                    if self.book.lock().term != term {
                        return Verdict::Stale;
                    }
                    return Verdict::Lost { key, why };
                }
            }
        }
        let mut b = self.book.lock();
        if b.term != term {
            return Verdict::Stale;
        }
        b.round += 1;
        let round = b.round;
        b.handoffs
            .retain(|_, at| at.saturating_add(HANDOFF_ROUNDS) >= round);
        Verdict::Held { verified, kept }
    }

    fn forget_if_same(&self, term: u64, key: &StoreKey, stamp: u64) {
        let mut b = self.book.lock();
        if b.term == term && b.entries.get(key).is_some_and(|e| e.stamp == stamp) {
            b.entries.remove(key);
        }
    }
}
