//! A Store that fails over to a replica missing the last acknowledged writes (issue 36 item 1;
//! `docs/store-epoch.md`): the failover rolls the Store back to a *prefix* of its write order,
//! simulated with the memory store's `checkpoint` / `roll_back_to`, and — for the scenarios
//! marked so — on a private `redis-server` rolled back with `SAVE` / `DEBUG RELOAD NOSAVE`
//! (`private_redis.rs`; run when the live Redis tests are, `ZLINK_TEST_REDIS_URL`). The lease
//! row back at an earlier version of this run, a write of this host gone, a counter read
//! behind: each is data loss, admission closes at once and the lease is taken over under a
//! higher generation; a later change by another host is never mistaken for one.

use zlink_redis_location::{RedisLocationOptions, RedisLocationStore};
use zlink_store_spi::{MemoryCheckpoint, MemoryLocationStore};

use super::prelude::*;
use super::private_redis::PrivateRedis;
use crate::written::Verdict;

/// A Store the test can roll back, and a checkpoint of it.
enum Rollback {
    Memory(Arc<MemoryLocationStore>),
    Redis(PrivateRedis),
}

enum Checkpoint {
    Memory(MemoryCheckpoint),
    Redis,
}

impl Rollback {
    fn checkpoint(&self) -> Checkpoint {
        match self {
            Rollback::Memory(m) => Checkpoint::Memory(m.checkpoint()),
            Rollback::Redis(r) => {
                r.checkpoint();
                Checkpoint::Redis
            }
        }
    }

    fn roll_back(&self, cp: &Checkpoint) {
        match (self, cp) {
            (Rollback::Memory(m), Checkpoint::Memory(cp)) => roll_back(m, cp),
            (Rollback::Redis(r), Checkpoint::Redis) => r.roll_back(),
            _ => panic!("a checkpoint of another store"),
        }
    }

    /// A fresh store over this backend (a new key prefix on Redis).
    async fn store(&self) -> Arc<dyn DynLocationStore> {
        match self {
            Rollback::Memory(m) => m.clone(),
            Rollback::Redis(r) => {
                let prefix = format!("rollback-{}", uuid::Uuid::new_v4().simple());
                let options = RedisLocationOptions::from_url(&r.url())
                    .expect("url")
                    .with_key_prefix(prefix)
                    .expect("prefix");
                Arc::new(
                    RedisLocationStore::connect(options)
                        .await
                        .expect("the private Redis answers"),
                )
            }
        }
    }
}

fn memory_rollback() -> Rollback {
    Rollback::Memory(Arc::new(MemoryLocationStore::new()))
}

/// A memory store on the host clock, as the runtime sees it and as the test rolls it back.
fn memory() -> (Arc<MemoryLocationStore>, Arc<dyn DynLocationStore>) {
    let mem = Arc::new(MemoryLocationStore::new());
    let store: Arc<dyn DynLocationStore> = mem.clone();
    (mem, store)
}

/// A host over `store` with the default options (renew loop off: the test renews).
async fn manual_host(store: &Arc<dyn DynLocationStore>, rid: u8) -> Host {
    Harness::memory()
        .host_with(store.clone(), LocationOptions::default(), None, rid)
        .await
}

async fn renewed(host: &Host) {
    assert!(
        matches!(
            host.rt.lease().renew().await.expect("renew"),
            RenewOutcome::Renewed { .. }
        ),
        "renew"
    );
}

async fn lease_version(store: &Arc<dyn DynLocationStore>, host: &Host) -> Option<String> {
    let key = lease::lease_key(host.rt.owner_id()).expect("key");
    match store.read(&key).await.expect("read") {
        ReadResult::Found { version, .. } => Some(version.as_str().to_owned()),
        ReadResult::Missing { .. } => None,
    }
}

/// After the loss is noticed: the renew reports the lease lost (admission stays closed) and
/// the takeover issues a LeaseGeneration above the one held.
async fn lost_and_taken_over(host: &Host, before: &HostRun) {
    assert_eq!(
        host.rt.lease().renew().await.expect("renew"),
        RenewOutcome::Lost
    );
    assert!(!host.rt.is_admitting());
    assert_eq!(host.rt.host_run(), None);
    let after = host.rt.lease().acquire().await.expect("take over");
    assert_eq!(after.owner_id, before.owner_id);
    assert!(after.lease_generation > before.lease_generation);
    assert!(host.rt.is_admitting());
}

fn roll_back(mem: &MemoryLocationStore, cp: &MemoryCheckpoint) {
    mem.roll_back_to(cp).expect("a checkpoint of this store");
}

/// The Store fails over to a replica that has the lease row as this run wrote it two renews
/// ago: the next renew conflicts onto a version this run wrote earlier in its term. That is a
/// rollback, never a renew whose answer was lost: the lease is lost (admission closed) and
/// taken over under a higher generation.
#[tokio::test]
async fn a_lease_row_rolled_back_to_an_older_version_of_ours_is_data_loss() {
    lease_row_rolled_back(&memory_rollback()).await;
}

async fn lease_row_rolled_back(rb: &Rollback) {
    let store = rb.store().await;
    let a = manual_host(&store, 1).await;
    active_actor(&a, "x").await;
    let before = a.run();
    let cp = rb.checkpoint();
    renewed(&a).await;
    renewed(&a).await;
    rb.roll_back(&cp);
    assert!(a.rt.is_admitting(), "nothing noticed before the renew");
    lost_and_taken_over(&a, &before).await;
}

/// A version of this run's row the run never wrote, with every renew answered, cannot be a
/// lost answer either: data loss.
#[tokio::test]
async fn an_unseen_version_of_our_row_with_every_renew_answered_is_data_loss() {
    let (_mem, store) = memory();
    let a = manual_host(&store, 1).await;
    let before = a.run();
    let key = lease::lease_key(a.rt.owner_id()).expect("key");
    let ReadResult::Found { bytes, .. } = store.read(&key).await.expect("read") else {
        panic!("no lease row")
    };
    // The same record under a version this run did not write.
    force_put(store.as_ref(), &key, &bytes).await;
    lost_and_taken_over(&a, &before).await;
}

/// A renew whose answer was lost applied under a version this run never saw: the next renew
/// conflicts onto it and adopts it (same run, no takeover), and the writes acknowledged before
/// the unanswered renew was sent are verified.
#[tokio::test]
async fn a_lost_renew_answer_is_still_adopted() {
    let (_mem, inner) = memory();
    let lossy = Arc::new(FaultyLocationStore::new(inner.clone()));
    let store: Arc<dyn DynLocationStore> = lossy.clone();
    let a = manual_host(&store, 1).await;
    let run = a.run();
    active_actor(&a, "x").await;
    // Two renews in a row whose answers are lost (both applied).
    lossy.set_fault([LocationOp::Write], Fault::LOSE_REPLY);
    assert!(a.rt.lease().renew().await.is_err());
    assert!(a.rt.lease().renew().await.is_err());
    lossy.heal();
    renewed(&a).await;
    assert_eq!(a.rt.host_run(), Some(run.clone()));
    assert!(a.rt.is_admitting());
    assert!(matches!(
        a.rt.verify_written().await,
        Some(Verdict::Held { kept: 0, .. })
    ));
    assert_eq!(a.rt.unverified_writes(), 0);
    renewed(&a).await;
    assert_eq!(a.rt.host_run(), Some(run));
}

/// The failover keeps the lease row as the last renew left it but drops an Actor created
/// after it: the renew loop's next renew succeeds, the verification after it finds the record
/// gone, admission closes and the lease is taken over under a higher generation — with no
/// further request of this host and no counter read.
#[tokio::test]
async fn a_write_lost_after_the_last_renew_is_noticed_at_the_next_renew() {
    let (mem, store) = memory();
    // 300 + 300 < 3000 - 1000.
    let options = LocationOptions::default()
        .owner_lease_renew_interval(Duration::from_millis(300))
        .owner_lease_renew_timeout(Duration::from_millis(300))
        .owner_lease_ttl(Duration::from_millis(3_000))
        .owner_lease_fencing_margin(Duration::from_millis(1_000));
    let rt = LocationRuntime::builder(store.clone())
        .options(options)
        .start()
        .await
        .expect("runtime starts");
    let a = Host {
        rt,
        desc: descriptor("main", &[1]),
    };
    let before = a.run();
    active_actor(&a, "kept").await;
    let mut lost = None;
    for attempt in 0..20 {
        // Right after a renew of the loop, so the next one is an interval away.
        let renewals = a.rt.health_probe().renewals().renewed;
        let waited = tokio::time::Instant::now() + Duration::from_secs(3);
        while a.rt.health_probe().renewals().renewed == renewals {
            assert!(
                tokio::time::Instant::now() < waited,
                "the loop does not renew"
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let row = lease_version(&store, &a).await;
        let cp = mem.checkpoint();
        let id = format!("lost-{attempt}");
        active_actor(&a, &id).await;
        // On the current-thread runtime nothing else runs between this read and the rollback.
        if lease_version(&store, &a).await == row {
            roll_back(&mem, &cp);
            lost = Some(id);
            break;
        }
    }
    let lost = lost.expect("a rollback with the lease row unchanged");
    assert!(
        matches!(
            a.rt.authority()
                .read(ObjectKind::Actor, &super::prelude::id(&lost))
                .await
                .expect("read"),
            AuthorityRead::Missing { .. }
        ),
        "the failover dropped the creation"
    );
    let waited = tokio::time::Instant::now() + Duration::from_secs(5);
    while a
        .rt
        .host_run()
        .is_none_or(|r| r.lease_generation <= before.lease_generation)
    {
        assert!(
            tokio::time::Instant::now() < waited,
            "the lost write was never noticed"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The same, driven by hand: the rollback drops a creation made after the last renew (the
/// lease row is unchanged); the next renew succeeds, its verification finds the write lost
/// and closes admission at once; the renew after reports the lease lost.
#[tokio::test]
async fn a_lost_creation_is_noticed_by_the_verification_after_the_next_renew() {
    lost_creation(&memory_rollback()).await;
}

async fn lost_creation(rb: &Rollback) {
    let store = rb.store().await;
    let a = manual_host(&store, 1).await;
    let before = a.run();
    active_actor(&a, "kept").await;
    renewed(&a).await;
    let cp = rb.checkpoint();
    active_actor(&a, "lost").await;
    rb.roll_back(&cp);
    renewed(&a).await;
    assert!(a.rt.is_admitting());
    let verdict = a.rt.verify_written().await.expect("a verification is due");
    assert!(matches!(verdict, Verdict::Lost { .. }), "{verdict:?}");
    assert!(!a.rt.is_admitting(), "admission closes at once");
    assert!(a.rt.admit(AdmissionOp::ObjectMessageStart).is_err());
    lost_and_taken_over(&a, &before).await;
}

/// A Commit lost by the failover leaves the record `Reserved` under the same generations (the
/// Actor would stay in Creating): an earlier state of what this host put is back.
#[tokio::test]
async fn a_lost_commit_is_noticed() {
    lost_commit(&memory_rollback()).await;
}

async fn lost_commit(rb: &Rollback) {
    let store = rb.store().await;
    let a = manual_host(&store, 1).await;
    let before = a.run();
    let reserved = reserve(&a, ObjectKind::Actor, "x", "chat", &a).await;
    renewed(&a).await;
    assert!(matches!(
        a.rt.verify_written().await,
        Some(Verdict::Held { kept: 0, .. })
    ));
    let cp = rb.checkpoint();
    a.rt.authority()
        .commit(&reserved, None)
        .await
        .expect("commit")
        .applied()
        .expect("committed");
    rb.roll_back(&cp);
    renewed(&a).await;
    assert!(matches!(
        a.rt.verify_written().await,
        Some(Verdict::Lost { .. })
    ));
    assert!(!a.rt.is_admitting());
    lost_and_taken_over(&a, &before).await;
}

/// A delete lost by the failover brings the record back with the generations it had: a record
/// this host deleted is back.
#[tokio::test]
async fn a_deleted_record_that_comes_back_is_noticed() {
    deleted_record_back(&memory_rollback()).await;
}

async fn deleted_record_back(rb: &Rollback) {
    let store = rb.store().await;
    let a = manual_host(&store, 1).await;
    let x = active_actor(&a, "x").await;
    renewed(&a).await;
    let cp = rb.checkpoint();
    a.rt.authority()
        .delete(&x)
        .await
        .expect("delete")
        .applied()
        .expect("deleted");
    rb.roll_back(&cp);
    renewed(&a).await;
    assert!(matches!(
        a.rt.verify_written().await,
        Some(Verdict::Lost { .. })
    ));
    assert!(!a.rt.is_admitting());
}

/// A counter that answers below a generation this host holds closes admission the moment it
/// is read, not at the next renew: the operation that read it is refused, nothing new is
/// admitted, and the next renew reports the lease lost.
#[tokio::test]
async fn a_counter_read_that_notices_loss_closes_admission_at_once() {
    let (mem, store) = memory();
    let a = manual_host(&store, 1).await;
    let before = a.run();
    let cp = mem.checkpoint();
    let x = active_actor(&a, "x").await;
    // Only the counters go back (the lease row is as it was).
    for kind in [GenerationKind::Object, GenerationKind::AuthorityOwner] {
        let key = kind.counter_key();
        match cp_read(&mem, &cp, &key).await {
            Some(bytes) => force_put(store.as_ref(), &key, &bytes).await,
            None => force_delete(store.as_ref(), &key).await,
        }
    }
    let e =
        a.rt.authority()
            .reserve(request(ObjectKind::Actor, "y", "chat", a.target()))
            .await
            .expect_err("refused");
    assert!(matches!(e, LocationError::Admission(_)), "{e}");
    assert!(!a.rt.is_admitting(), "admission closed at once");
    assert!(a.rt.admit(AdmissionOp::TimerStart).is_err());
    lost_and_taken_over(&a, &before).await;
    let y = active_actor(&a, "y").await;
    assert!(y.object_generation() > x.object_generation());
    assert!(y.authority_owner_generation() > x.authority_owner_generation());
}

/// What `key` held at `cp` (read from a scratch store rolled back to it would need the same
/// instance; instead: the value is read now, rolled back, read, and rolled forward).
async fn cp_read(
    mem: &MemoryLocationStore,
    cp: &MemoryCheckpoint,
    key: &StoreKey,
) -> Option<Vec<u8>> {
    let now = mem.checkpoint();
    mem.roll_back_to(cp).expect("same store");
    let then = mem
        .read(key)
        .await
        .expect("read")
        .bytes()
        .map(|b| b.to_vec());
    mem.roll_back_to(&now).expect("same store");
    then
}

/// Later changes by another host are not rollbacks: a record this host put and handed off
/// (NewOwner, then deleted by its new owner), a `Reserved` record committed and preserved by
/// its owner, a record this host deleted that another host created again (a higher
/// ObjectGeneration), a reservation aborted by its owner. The verification forgets them all
/// and admission stays open.
#[tokio::test]
async fn a_later_change_by_another_host_is_not_a_rollback() {
    let (_mem, store) = memory();
    let a = manual_host(&store, 1).await;
    let b = manual_host(&store, 2).await;
    renewed(&a).await;
    let _ = a.rt.verify_written().await;

    // Handed off, then deleted by the new owner.
    let x = active_actor(&a, "x").await;
    let res = secure(&a, &x, &b).await;
    let moved =
        b.rt.authority()
            .new_owner(&x, &res)
            .await
            .expect("new owner")
            .applied()
            .expect("moved");
    b.rt.authority()
        .delete(&moved)
        .await
        .expect("delete")
        .applied()
        .expect("deleted");
    // Reserved for B, committed and preserved by B.
    let y = reserve(&a, ObjectKind::Actor, "y", "chat", &b).await;
    let y =
        b.rt.authority()
            .commit(&y, None)
            .await
            .expect("commit")
            .applied()
            .expect("committed");
    b.rt.authority()
        .preserve(&y, b"later".to_vec())
        .await
        .expect("preserve")
        .applied()
        .expect("preserved");
    // Deleted here, created again by B.
    let z = active_actor(&a, "z").await;
    a.rt.authority()
        .delete(&z)
        .await
        .expect("delete")
        .applied()
        .expect("deleted");
    let again = active_actor(&b, "z").await;
    assert!(again.object_generation() > z.object_generation());
    // Reserved for B, aborted by B.
    let r = reserve(&a, ObjectKind::Actor, "r", "chat", &b).await;
    b.rt.authority()
        .abort(&r)
        .await
        .expect("abort")
        .applied()
        .expect("aborted");

    assert!(a.rt.unverified_writes() >= 4);
    renewed(&a).await;
    let verdict = a.rt.verify_written().await.expect("due");
    assert!(
        matches!(verdict, Verdict::Held { kept: 0, .. }),
        "{verdict:?}"
    );
    assert_eq!(a.rt.unverified_writes(), 0);
    assert!(a.rt.is_admitting());
    renewed(&a).await;
}

/// Writes acknowledged after a renew was sent wait for the next one; with the verification
/// switched off nothing is recorded.
#[tokio::test]
async fn writes_after_the_renew_wait_and_the_verification_can_be_switched_off() {
    let (_mem, store) = memory();
    let a = manual_host(&store, 1).await;
    renewed(&a).await;
    active_actor(&a, "x").await;
    // The renew was sent before the creation: nothing of it is due.
    assert!(matches!(
        a.rt.verify_written().await,
        Some(Verdict::Held {
            verified: 0,
            kept: 0
        })
    ));
    assert_eq!(a.rt.unverified_writes(), 1);
    renewed(&a).await;
    assert!(matches!(
        a.rt.verify_written().await,
        Some(Verdict::Held {
            verified: 1,
            kept: 0
        })
    ));
    assert_eq!(a.rt.unverified_writes(), 0);

    let off = Harness::memory()
        .host_with(
            store.clone(),
            LocationOptions::default().verify_acknowledged_writes(false),
            None,
            2,
        )
        .await;
    active_actor(&off, "y").await;
    assert_eq!(off.rt.unverified_writes(), 0);
}

/// A `SpotWide` member this host put, moved with its Spot (the aggregate NewOwner by the
/// target, the member following the Spot's new owner) and then deleted by that owner, is
/// handed off, not lost: this host wrote the Spot's reservation and the member resolves
/// through the Spot.
#[tokio::test]
async fn a_member_moved_with_its_spot_and_deleted_there_is_not_a_rollback() {
    let (_mem, store) = memory();
    let rt = LocationRuntime::builder(store.clone())
        .renew_loop(false)
        .spot_wide_members(crate::MemberResolver::new(|h| {
            h.id().as_str().starts_with('m').then(|| id("s"))
        }))
        .start()
        .await
        .expect("runtime starts");
    let a = Host {
        rt,
        desc: descriptor("main", &[1]),
    };
    let b = manual_host(&store, 2).await;
    let spot = active_spot(&a, "s").await;
    active_actor(&a, "m1").await;
    let res =
        a.rt.authority()
            .secure_spot_wide(&spot, &[ty("chat")], 1, b.target(), None)
            .await
            .expect("secure")
            .applied()
            .expect("secured");
    let moved =
        b.rt.authority()
            .new_owner_spot_wide(&spot, &res, b"root".to_vec())
            .await
            .expect("new owner")
            .applied()
            .expect("moved");
    let AuthorityRead::Found { handle, .. } =
        b.rt.authority()
            .read(ObjectKind::Actor, &id("m1"))
            .await
            .expect("read")
    else {
        panic!("m1 is missing");
    };
    let followed =
        b.rt.authority()
            .follow_spot_owner(&handle, &moved)
            .await
            .expect("follow")
            .applied()
            .expect("followed");
    b.rt.authority()
        .delete(&followed)
        .await
        .expect("delete")
        .applied()
        .expect("deleted");
    renewed(&a).await;
    let verdict = a.rt.verify_written().await.expect("due");
    assert!(
        matches!(verdict, Verdict::Held { kept: 0, .. }),
        "{verdict:?}"
    );
    assert!(a.rt.is_admitting());
}

/// The rollback scenarios on a private Redis rolled back from an RDB taken at the checkpoint
/// (its version sequence goes back with the data, as a failover's does). Run when the live
/// Redis tests are (`ZLINK_TEST_REDIS_URL`), one after the other on one server.
#[tokio::test]
async fn the_rollback_scenarios_hold_on_a_redis_rolled_back_from_an_earlier_rdb() {
    let test = "the_rollback_scenarios_hold_on_a_redis_rolled_back_from_an_earlier_rdb";
    if zlink_store_conformance::live::env_or_skip(zlink_testkit::REDIS_ENV, test).is_none() {
        return;
    }
    let redis = PrivateRedis::start()
        .await
        .expect("a private redis-server (with DEBUG enabled) starts on a loopback port");
    let rb = Rollback::Redis(redis);
    lease_row_rolled_back(&rb).await;
    lost_creation(&rb).await;
    lost_commit(&rb).await;
    deleted_record_back(&rb).await;
}

/// When every row holds what this host wrote, the verification reads nothing back: 300
/// creations are checked by two conditional batches without a mutation (256 rows each at
/// most); a row changed by another host costs reads of its chunk only.
#[tokio::test]
async fn the_check_reads_nothing_back_when_every_row_holds() {
    let (_mem, inner) = memory();
    let counting = Arc::new(FaultyLocationStore::new(inner.clone()));
    let store: Arc<dyn DynLocationStore> = counting.clone();
    let a = manual_host(&store, 1).await;
    let b = manual_host(&inner, 2).await;
    renewed(&a).await;
    let _ = a.rt.verify_written().await;
    let mut made = Vec::new();
    for i in 0..300 {
        made.push(active_actor(&a, &format!("x{i}")).await);
    }
    renewed(&a).await;
    let (reads, writes) = (counting.reads(), counting.writes());
    assert!(matches!(
        a.rt.verify_written().await,
        Some(Verdict::Held {
            verified: 300,
            kept: 0
        })
    ));
    assert_eq!(counting.reads(), reads, "nothing read back");
    assert_eq!(counting.writes(), writes + 2, "two checks");

    // One row moved by another host since: only its chunk is read back.
    let mut again = Vec::new();
    for h in made.iter().take(2) {
        again.push(
            a.rt.authority()
                .preserve(h, b"again".to_vec())
                .await
                .expect("preserve")
                .applied()
                .expect("preserved"),
        );
    }
    let res = secure(&a, &again[0], &b).await;
    b.rt.authority()
        .new_owner(&again[0], &res)
        .await
        .expect("new owner")
        .applied()
        .expect("moved");
    renewed(&a).await;
    let reads = counting.reads();
    assert!(matches!(
        a.rt.verify_written().await,
        Some(Verdict::Held {
            verified: 2,
            kept: 0
        })
    ));
    assert_eq!(
        counting.reads(),
        reads + 2,
        "the conflicting chunk, read back"
    );
    assert!(a.rt.is_admitting());
}
