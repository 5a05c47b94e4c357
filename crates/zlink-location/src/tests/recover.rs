//! Recovering what a dead run nobody saw leave left behind: one object at access, and the
//! bounded listing of owner runs a periodic sweep judges (see `authority::recover`).

use super::prelude::*;

/// The at-access recovery of a record whose owner run is dead removes it with its lookup
/// index and capacity (the dead run's allocation row goes once empty); while the owner's lease
/// is held nothing changes; this host's own records are refused; a record changed since it
/// was read conflicts.
pub(super) async fn recover_object_removes_a_dead_runs_record_only_once_its_lease_is_gone(
    h: &Harness,
) {
    // A short lease, so it can run out by Store time (the renew loop is off).
    let a = h.host_with(h.store.clone(), short_lease(), None, 1).await;
    let b = host(h, "main", 2).await;
    let x = active_actor(&a, "x").await;
    let s = reserve(&a, ObjectKind::UserSpot, "s", "game", &a).await;
    let z = active_actor(&b, "z").await;
    let before = h.snapshot().await;
    for handle in [&x, &s] {
        assert_eq!(
            b.rt.authority()
                .recover_object(handle)
                .await
                .expect("recover"),
            Outcome::Conflict(Conflict::RunStillLive),
            "a stalled but live owner is never recovered"
        );
    }
    assert_eq!(
        h.snapshot().await,
        before,
        "nothing changed while the lease is held"
    );
    assert!(matches!(
        b.rt.authority().recover_object(&z).await,
        Err(LocationError::InvalidOperation(
            crate::InvalidOperation::RecoveryOfOwnRun
        ))
    ));
    // A's lease runs out by Store time (nobody released it).
    h.advance_store_time(Duration::from_millis(1100)).await;
    assert_eq!(
        b.rt.authority().recover_object(&x).await.expect("recover"),
        Outcome::Applied(())
    );
    assert!(matches!(
        b.rt.authority()
            .read(ObjectKind::Actor, &id("x"))
            .await
            .expect("read"),
        AuthorityRead::Missing { .. }
    ));
    assert_eq!(capacity(&b, &a).await.actors.active, 0);
    assert!(matches!(
        b.rt.authority().recover_object(&x).await.expect("again"),
        Outcome::Conflict(Conflict::Record { current: None })
    ));
    assert_eq!(
        b.rt.authority().recover_object(&s).await.expect("recover"),
        Outcome::Applied(())
    );
    assert_eq!(capacity(&b, &a).await, NodeUsage::default());
    let rows = snapshot_of(h.store.as_ref(), "node-capacity\0").await;
    assert_eq!(
        rows.len(),
        1,
        "the dead run's emptied allocation row is gone: {rows:?}"
    );
    assert!(matches!(
        b.rt.authority().read(ObjectKind::Actor, &id("z")).await.expect("read"),
        AuthorityRead::Found { handle, .. } if handle == z
    ));
}

/// A record of this host's *earlier* run (its lease taken over under a higher generation) is
/// recovered at access like a dead run's — its capacity returned, conditioned on this run's
/// lease — while a record of the current run is still refused and left as it is.
pub(super) async fn recover_object_of_this_hosts_earlier_run_applies_and_of_the_current_run_is_refused(
    h: &Harness,
) {
    let a = host(h, "main", 1).await;
    let old = active_actor(&a, "old").await;
    a.rt.lease().release().await.expect("release");
    a.rt.lease().acquire().await.expect("takeover");
    let new = active_actor(&a, "new").await;
    assert_eq!(capacity(&a, &a).await.actors.active, 2);
    let before = h.snapshot().await;
    assert!(matches!(
        a.rt.authority().recover_object(&new).await,
        Err(LocationError::InvalidOperation(
            crate::InvalidOperation::RecoveryOfOwnRun
        ))
    ));
    assert_eq!(
        h.snapshot().await,
        before,
        "a refused recovery changes nothing"
    );
    assert_eq!(
        a.rt.authority()
            .recover_object(&old)
            .await
            .expect("recover"),
        Outcome::Applied(())
    );
    assert!(matches!(
        a.rt.authority()
            .read(ObjectKind::Actor, &id("old"))
            .await
            .expect("read"),
        AuthorityRead::Missing { .. }
    ));
    assert_eq!(capacity(&a, &a).await.actors.active, 1);
    assert!(matches!(
        a.rt.authority().read(ObjectKind::Actor, &id("new")).await.expect("read"),
        AuthorityRead::Found { handle, .. } if handle == new
    ));
}

/// Two survivors recovering the same record at once: exactly one batch applies; the
/// creations that follow are decided by Reserve, so exactly one new incarnation exists, with a
/// higher ObjectGeneration.
pub(super) async fn concurrent_recoveries_make_exactly_one_new_incarnation(h: &Harness) {
    let a = host(h, "main", 1).await;
    let b = Arc::new(host(h, "main", 2).await);
    let c = Arc::new(host(h, "main", 3).await);
    let old = active_actor(&a, "x").await;
    a.rt.lease().release().await.expect("A stops");
    let mut tasks = Vec::new();
    for by in [&b, &c] {
        let (by, old) = (Arc::clone(by), old.clone());
        tasks.push(tokio::spawn(async move {
            let recovered = by
                .rt
                .authority()
                .recover_object(&old)
                .await
                .expect("recover");
            let created = by
                .rt
                .authority()
                .reserve(request(ObjectKind::Actor, "x", "chat", by.target()))
                .await
                .expect("reserve");
            (recovered, created)
        }));
    }
    let mut applied = 0;
    let mut created = Vec::new();
    for t in tasks {
        let (recovered, reserve) = t.await.expect("task");
        match recovered {
            Outcome::Applied(()) => applied += 1,
            Outcome::Conflict(Conflict::Record { .. }) => {}
            other => panic!("unexpected {other:?}"),
        }
        if let Outcome::Applied(h) = reserve {
            created.push(h);
        }
    }
    assert_eq!(applied, 1, "exactly one recovery applied");
    assert_eq!(created.len(), 1, "exactly one new incarnation");
    assert!(created[0].object_generation() > old.object_generation());
}

/// A move of the dead run's object that a live target may still complete keeps the record.
pub(super) async fn recover_object_keeps_a_record_a_live_target_may_still_move(h: &Harness) {
    let a = host(h, "main", 1).await;
    let b = host(h, "main", 2).await;
    let c = host(h, "main", 3).await;
    let x = active_actor(&a, "x").await;
    secure(&a, &x, &c).await;
    a.rt.lease().release().await.expect("A stops");
    let before = h.snapshot().await;
    assert_eq!(
        b.rt.authority().recover_object(&x).await.expect("recover"),
        Outcome::Conflict(Conflict::Relocating)
    );
    assert_eq!(h.snapshot().await, before);
}

/// The owner runs of the authority rows, each once, in bounded pages of one snapshot
/// continued by cursor.
pub(super) async fn owner_runs_lists_each_run_once_in_bounded_pages(h: &Harness) {
    let a = host(h, "main", 1).await;
    let b = host(h, "main", 2).await;
    for i in 0..3 {
        active_actor(&a, &format!("a-{i}")).await;
    }
    for i in 0..2 {
        active_actor(&b, &format!("b-{i}")).await;
    }
    let auth = b.rt.authority();
    let all = auth
        .owner_runs(None, 10, PageLimit::LARGEST)
        .await
        .expect("runs");
    assert_eq!((all.rows, all.skipped, all.next.is_none()), (5, 0, true));
    let mut runs: Vec<_> = all.runs.clone();
    runs.sort_by_key(|r| r.owner_id.as_str().to_owned());
    let mut want = vec![a.run(), b.run()];
    want.sort_by_key(|r| r.owner_id.as_str().to_owned());
    assert_eq!(runs, want, "each run once");
    // One page of two rows at a time: the pages together read the five rows once.
    let two = PageLimit::new(2).expect("limit");
    let mut from = None;
    let (mut rows, mut calls) = (0, 0);
    let mut seen = std::collections::HashSet::new();
    loop {
        let page = auth.owner_runs(from, 1, two).await.expect("page");
        calls += 1;
        assert!(page.rows <= 2, "bounded by the pages asked for");
        rows += page.rows;
        seen.extend(page.runs);
        match page.next {
            Some(c) => from = Some(c),
            None => break,
        }
        assert!(calls < 10, "the listing ends");
    }
    assert_eq!(rows, 5);
    assert_eq!(seen.len(), 2);
}
