//! The memory store's history bookkeeping (what scan snapshots pin and when it is trimmed) and
//! its rollback fault injection.

use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::{ManualClock, PageLimit, Retention};

fn key(s: &str) -> StoreKey {
    StoreKey::new(s).expect("key")
}

fn put(store: &MemoryLocationStore, k: &str, v: &str) -> StoreVersion {
    let req = WriteRequest::new(vec![], vec![Mutation::put(key(k), v.to_owned())]).expect("req");
    match store.do_write(&req) {
        WriteResult::Applied { put_versions, .. } => put_versions[0].clone(),
        WriteResult::Conflict { .. } => panic!("unconditional write conflicted"),
    }
}

fn delete(store: &MemoryLocationStore, k: &str) {
    let req = WriteRequest::new(vec![], vec![Mutation::Delete(key(k))]).expect("req");
    assert!(store.do_write(&req).is_applied());
}

/// Opens a snapshot of `prefix` with a one-item first page; returns the cursor (the snapshot
/// stays open while it is held and unfinished).
fn open_scan(store: &MemoryLocationStore, prefix: &str) -> Option<ScanCursor> {
    let prefix = ScanPrefix::new(prefix.to_owned()).expect("prefix");
    match store.do_scan(&ScanRequest::first(
        prefix,
        PageLimit::new(1).expect("limit"),
    )) {
        ScanResult::Page(p) => p.next_cursor,
        ScanResult::Expired => panic!("a first page expired"),
    }
}

/// Reads the snapshot of `cursor` to its end (the snapshot then ends).
fn finish_scan(store: &MemoryLocationStore, prefix: &str, mut cursor: ScanCursor) {
    let prefix = ScanPrefix::new(prefix.to_owned()).expect("prefix");
    loop {
        let request = ScanRequest::next(prefix.clone(), PageLimit::LARGEST, cursor);
        match store.do_scan(&request) {
            ScanResult::Page(p) => match p.next_cursor {
                Some(c) => cursor = c,
                None => return,
            },
            ScanResult::Expired => panic!("the snapshot expired"),
        }
    }
}

/// The states the present and the live snapshots need, computed from scratch: for each key its
/// latest state and, for each snapshot boundary, the newest state at or before it (a key whose
/// only needed state is a deletion needs nothing).
fn needed_states(store: &MemoryLocationStore) -> usize {
    let state = store.state.lock();
    let boundaries = state.boundaries();
    state
        .entries
        .values()
        .map(|history| {
            let n = history.len();
            let mut kept = BTreeSet::from([n - 1]);
            for &b in &boundaries {
                if let Some(i) = history.iter().rposition(|e| e.seq <= b) {
                    kept.insert(i);
                }
            }
            if kept.len() == 1 && history[n - 1].value.is_none() {
                0
            } else {
                kept.len()
            }
        })
        .sum()
}

fn retrim_visits(store: &MemoryLocationStore) -> usize {
    store.state.lock().retrim_visits
}

/// A scan that ends re-trims only the keys written since it was taken (the states it can have
/// pinned), not every key another open snapshot keeps history for: with 2,000 keys held by a
/// long snapshot, short scans that end cost nothing, one with five keys written during it
/// looks at those five, and the long one's end releases all its history.
#[test]
fn a_finished_scan_trims_only_what_it_pinned() {
    let store = MemoryLocationStore::with_clock(Arc::new(ManualClock::starting_now()));
    for i in 0..2_000 {
        put(&store, &format!("a/{i:05}"), "v0");
    }
    put(&store, "q/1", "x");
    put(&store, "q/2", "x");
    let long = open_scan(&store, "a/").expect("more pages");
    for i in 0..2_000 {
        put(&store, &format!("a/{i:05}"), "v1");
    }
    assert_eq!(
        store.retained_states(),
        4_002,
        "the long snapshot pins 2,000"
    );
    for _ in 0..50 {
        let c = open_scan(&store, "q/").expect("two keys, one per page");
        finish_scan(&store, "q/", c);
    }
    assert_eq!(
        retrim_visits(&store),
        0,
        "short scans over an unchanged store re-trimmed keys"
    );
    let short = open_scan(&store, "q/").expect("more pages");
    for i in 0..5 {
        put(&store, &format!("a/{i:05}"), "v2");
    }
    finish_scan(&store, "q/", short);
    assert_eq!(retrim_visits(&store), 5, "only the keys written during it");
    assert_eq!(store.retained_states(), needed_states(&store));
    finish_scan(&store, "a/", long);
    assert_eq!(
        store.retained_states(),
        2_002,
        "the long snapshot's history is gone"
    );
    assert!(store.state.lock().with_history.is_empty());
}

/// Random writes, deletes, scans opened, advanced and finished, and snapshots evicted by the
/// cap: after every step the store keeps exactly the states the present and the live
/// snapshots need (never fewer: a snapshot would read a wrong value; never more: memory).
#[test]
fn retained_history_is_exactly_what_live_snapshots_need() {
    for seed in 1..=40u64 {
        let options = MemoryLocationOptions::default().max_snapshots(4);
        let store =
            MemoryLocationStore::with_options(Arc::new(ManualClock::starting_now()), options);
        let mut rng = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let mut cursors: Vec<ScanCursor> = Vec::new();
        for step in 0..400 {
            let k = format!("k/{}", next() % 24);
            match next() % 10 {
                0..=4 => {
                    put(&store, &k, &step.to_string());
                }
                5 => delete(&store, &k),
                6 | 7 => {
                    if let Some(c) = open_scan(&store, "k/") {
                        cursors.push(c);
                    }
                }
                8 if !cursors.is_empty() => {
                    // One more page of a snapshot (it ends after its last page).
                    let i = (next() as usize) % cursors.len();
                    let c = cursors.swap_remove(i);
                    let request = ScanRequest::next(
                        ScanPrefix::new("k/").expect("prefix"),
                        PageLimit::new(3).expect("limit"),
                        c,
                    );
                    if let ScanResult::Page(p) = store.do_scan(&request) {
                        cursors.extend(p.next_cursor);
                    }
                }
                _ if !cursors.is_empty() => {
                    let c = cursors.swap_remove((next() as usize) % cursors.len());
                    let request = ScanRequest::next(
                        ScanPrefix::new("k/").expect("prefix"),
                        PageLimit::LARGEST,
                        c,
                    );
                    let _ = store.do_scan(&request);
                }
                _ => {}
            }
            assert_eq!(
                store.retained_states(),
                needed_states(&store),
                "seed {seed} step {step}"
            );
        }
    }
}

/// A rollback makes every key what it was at the checkpoint — the same bytes, version and
/// expiry, keys written since gone, keys deleted since back — and a write conditioned on a
/// version of the checkpoint applies again; scans open before it answer Expired; a checkpoint
/// of another store is refused and changes nothing.
#[test]
fn a_rollback_restores_exact_bytes_versions_and_expiries() {
    let clock = ManualClock::starting_now();
    let store = MemoryLocationStore::with_clock(Arc::new(clock.clone()));
    let lease = Retention::from_millis(10_000).expect("retention");
    let req = WriteRequest::new(
        vec![],
        vec![Mutation::put_expiring(key("lease"), b"l1".to_vec(), lease)],
    )
    .expect("req");
    assert!(store.do_write(&req).is_applied());
    let kept = put(&store, "kept", "k1");
    put(&store, "gone-later", "g1");
    let before = |k: &str| store.do_read(&key(k));
    let (lease_then, kept_then) = (before("lease"), before("kept"));
    let cp = store.checkpoint();
    assert_eq!(cp.key_count(), 3);

    clock.advance(Duration::from_millis(1_000));
    let req = WriteRequest::new(
        vec![],
        vec![Mutation::put_expiring(key("lease"), b"l2".to_vec(), lease)],
    )
    .expect("req");
    assert!(store.do_write(&req).is_applied());
    put(&store, "kept", "k2");
    delete(&store, "gone-later");
    put(&store, "new", "n");
    let cursor = open_scan(&store, "").expect("more pages");

    store.roll_back_to(&cp).expect("same store");
    let now = clock.now();
    for (k, then) in [("lease", &lease_then), ("kept", &kept_then)] {
        let (
            ReadResult::Found {
                bytes,
                version,
                expires_at,
                ..
            },
            ReadResult::Found {
                bytes: b0,
                version: v0,
                expires_at: e0,
                ..
            },
        ) = (store.do_read(&key(k)), then)
        else {
            panic!("{k} missing after the rollback")
        };
        assert_eq!((&bytes, &version, &expires_at), (b0, v0, e0), "{k}");
    }
    assert!(matches!(
        store.do_read(&key("gone-later")),
        ReadResult::Found { .. }
    ));
    assert!(matches!(
        store.do_read(&key("new")),
        ReadResult::Missing { .. }
    ));
    assert!(now > StoreTime::from_millis(0));
    // The checkpoint's version holds again.
    let req = WriteRequest::new(
        vec![Condition::Version(key("kept"), kept)],
        vec![Mutation::put(key("kept"), "k3")],
    )
    .expect("req");
    assert!(store.do_write(&req).is_applied());
    // A cursor of a snapshot taken before the rollback is expired.
    let next = ScanRequest::next(ScanPrefix::all(), PageLimit::LARGEST, cursor);
    assert!(matches!(store.do_scan(&next), ScanResult::Expired));

    // Another store's checkpoint changes nothing.
    let other = MemoryLocationStore::with_clock(Arc::new(clock.clone()));
    let theirs = other.checkpoint();
    assert_eq!(store.roll_back_to(&theirs), Err(ForeignCheckpoint));
    assert_eq!(store.key_count(), 3);
    assert!(
        matches!(store.do_read(&key("kept")), ReadResult::Found { ref bytes, .. } if bytes.as_ref() == b"k3")
    );
}

/// Expiry after a rollback is still judged by the store clock, which does not go back: a
/// value that expired since the checkpoint stays expired when it comes back.
#[test]
fn a_value_that_expired_since_the_checkpoint_comes_back_expired() {
    let clock = ManualClock::starting_now();
    let store = MemoryLocationStore::with_clock(Arc::new(clock.clone()));
    let req = WriteRequest::new(
        vec![],
        vec![Mutation::put_expiring(
            key("lease"),
            b"l".to_vec(),
            Retention::from_millis(500).expect("retention"),
        )],
    )
    .expect("req");
    assert!(store.do_write(&req).is_applied());
    let cp = store.checkpoint();
    clock.advance(Duration::from_millis(600));
    store.roll_back_to(&cp).expect("same store");
    assert!(matches!(
        store.do_read(&key("lease")),
        ReadResult::Missing { .. }
    ));
}
