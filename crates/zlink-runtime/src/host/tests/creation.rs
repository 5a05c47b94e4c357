//! Creation (spec 21 §7, §12 "Creation"; 06 §15, §17): the inline creation request and its
//! bound, the deciding callback (Approved / Rejected / Failed), the terminal record written with
//! the result, the fenced `zlink.object.create` command, lost replies and the deadline.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use zlink_codec::records::{ObjectKind, ObjectRole};
use zlink_codec::terminal::{CreationOutcome, CreationTerminal};
use zlink_store_spi::{LocationStore, ReadResult};

use super::support::*;
use crate::host::ZLinkHost;
use crate::host::config::MeshNodeBuilder;
use crate::messaging::{ErrorKind, Message, NodeHandler, Request};
use crate::objects::create::{CreateCommand, CreationOrder};
use crate::objects::{Actor, ActorType, CreationDecision};
use zlink_location::{AuthorityRead, OperationKey, Outcome};
use zlink_testkit::Harness;

/// An Actor that remembers the creation request it was built with.
struct Keeper {
    request: Vec<u8>,
}
impl Actor for Keeper {}

#[derive(Debug, Serialize, Deserialize)]
struct Show;
impl Message for Show {
    const PACKET: &'static str = "Show";
}
impl Request for Show {
    type Reply = Vec<u8>;
}

fn keeper(factories: &Arc<AtomicUsize>) -> impl FnOnce(ActorType<Keeper>) -> ActorType<Keeper> {
    let factories = Arc::clone(factories);
    move |t| {
        t.factory(move |ctx| {
            let factories = Arc::clone(&factories);
            async move {
                factories.fetch_add(1, Ordering::SeqCst);
                Ok(Keeper {
                    request: ctx.request.map(|b| b.to_vec()).unwrap_or_default(),
                })
            }
        })
        .disable_relocation()
        .on_request::<Show, _>(|k, _s, _ctx| {
            let r = k.request.clone();
            Box::pin(async move { Ok(r) })
        })
    }
}

/// An Object Server of the `keeper` type whose Entry Spot approves ids starting `ok`
/// (replying with the request reversed), rejects `no…` and fails on anything else.
fn deciding_server(
    factories: &Arc<AtomicUsize>,
    limit: i64,
) -> impl FnOnce(MeshNodeBuilder<NodeHandler>) -> MeshNodeBuilder<NodeHandler> {
    let f = Arc::clone(factories);
    move |b| {
        b.object_role(ObjectRole::Server)
            .actor_limit(limit)
            .actor_type::<Keeper>("keeper", keeper(&f))
            .on_actor_create(|ctx| async move {
                if ctx.id.starts_with("ok") {
                    let mut reply = ctx.request.map(|b| b.to_vec()).unwrap_or_default();
                    reply.reverse();
                    Ok(CreationDecision::Approve { reply: Some(reply) })
                } else if ctx.id.starts_with("no") {
                    Ok(CreationDecision::reject("not on the list"))
                } else {
                    Err("the callback threw".into())
                }
            })
    }
}

/// Every creation terminal row in the Store, decoded.
async fn terminals(h: &Harness) -> Vec<CreationTerminal> {
    h.snapshot()
        .await
        .into_iter()
        .filter(|(k, _)| k.as_str().starts_with("creation-terminal"))
        .map(|(_, (bytes, _))| CreationTerminal::decode(&bytes).expect("a terminal"))
        .collect()
}

on_every_store!(
    the_creation_request_reaches_the_factory_and_the_approving_reply_returns,
    a_declined_creation_is_rejected_stores_its_terminal_and_returns_the_capacity,
    a_failing_callback_is_failed_and_returns_the_capacity,
    the_terminal_is_kept_until_five_minutes_past_the_original_deadline,
    the_create_command_verifies_every_fence_and_answers_the_stored_result_again,
    a_request_at_the_record_bound_fits_and_one_byte_more_changes_nothing,
    a_target_that_never_answers_ends_deadline_exceeded_without_a_reserved_row,
);

async fn the_creation_request_reaches_the_factory_and_the_approving_reply_returns(h: &Harness) {
    let factories = Arc::new(AtomicUsize::new(0));
    let (ha, _a) = start(h, deciding_server(&factories, 100)).await;
    wait_discovered(&[&ha]).await;
    let m = ha.actors().expect("manager");
    let created = m
        .get_or_create("keeper", "ok-1")
        .request(Bytes::from_static(b"abc"))
        .submit()
        .await
        .expect("created");
    assert!(created.created);
    assert_eq!(created.reply.as_deref(), Some(&b"cba"[..]));
    assert_eq!(m.request("ok-1", &Show).await.expect("show"), b"abc");
    // The record no longer carries the request once Ready.
    let again = m
        .get_or_create("keeper", "ok-1")
        .submit()
        .await
        .expect("existing");
    assert!(!again.created, "the second call finds the first");
    assert_eq!(
        again.reply, None,
        "an earlier attempt's reply is not shared"
    );
    assert_eq!(again.object, created.object);
    assert_eq!(factories.load(Ordering::SeqCst), 1);
    let t = terminals(h).await;
    assert_eq!(t.len(), 1, "one terminal for the one creating operation");
    assert_eq!(t[0].outcome, CreationOutcome::Created);
    assert_eq!(t[0].request_sha256, zlink_codec::inline_ref::sha256(b"abc"));
    ha.shutdown().await;
}

async fn a_declined_creation_is_rejected_stores_its_terminal_and_returns_the_capacity(h: &Harness) {
    let factories = Arc::new(AtomicUsize::new(0));
    let (ha, _a) = start(h, deciding_server(&factories, 1)).await;
    wait_discovered(&[&ha]).await;
    let m = ha.actors().expect("manager");
    let err = m.create("keeper", "no-1").await.expect_err("declined");
    assert_eq!(err.kind(), ErrorKind::Rejected);
    assert!(err.to_string().contains("not on the list"), "{err}");
    assert_eq!(m.find("no-1").await.expect("find"), None);
    let t = terminals(h).await;
    assert_eq!(t.len(), 1);
    assert_eq!(t[0].outcome, CreationOutcome::Rejected);
    // The one slot is free again.
    m.create("keeper", "ok-2").await.expect("room again");
    ha.shutdown().await;
}

async fn a_failing_callback_is_failed_and_returns_the_capacity(h: &Harness) {
    let factories = Arc::new(AtomicUsize::new(0));
    let (ha, _a) = start(h, deciding_server(&factories, 1)).await;
    wait_discovered(&[&ha]).await;
    let m = ha.actors().expect("manager");
    let err = m.create("keeper", "boom").await.expect_err("failed");
    assert_eq!(err.kind(), ErrorKind::InternalFailure);
    assert!(err.to_string().contains("the callback threw"), "{err}");
    let t = terminals(h).await;
    assert!(
        matches!(&t[..], [one] if matches!(one.outcome, CreationOutcome::Failed { .. })),
        "{t:?}"
    );
    assert_eq!(m.find("boom").await.expect("find"), None);
    m.create("keeper", "ok-3").await.expect("room again");
    ha.shutdown().await;
}

async fn the_terminal_is_kept_until_five_minutes_past_the_original_deadline(h: &Harness) {
    let factories = Arc::new(AtomicUsize::new(0));
    let (ha, _a) = start(h, deciding_server(&factories, 10)).await;
    wait_discovered(&[&ha]).await;
    let deadline = Duration::from_secs(20);
    ha.actors()
        .expect("manager")
        .create("keeper", "ok-4")
        .deadline(deadline)
        .await
        .expect("created");
    let (key, _) = h
        .snapshot()
        .await
        .into_iter()
        .find(|(k, _)| k.as_str().starts_with("creation-terminal"))
        .expect("a terminal row");
    let ReadResult::Found {
        expires_at: Some(expires),
        store_now,
        ..
    } = h.store.read(&key).await.expect("read")
    else {
        panic!("the terminal must be stored with an expiry");
    };
    let left = Duration::from_millis(store_now.millis_until(expires));
    let five = Duration::from_secs(300);
    assert!(
        left > five && left <= five + deadline,
        "kept {left:?}: until 5 minutes past a deadline of {deadline:?}"
    );
    if h.store_clock.is_some() {
        h.advance_store_time(left + Duration::from_millis(1)).await;
        assert!(terminals(h).await.is_empty(), "expired by Store time");
    }
    ha.shutdown().await;
}

/// Reserves `id` on `host`'s node (as a creating source would) and returns the handle.
async fn reserve_on(host: &ZLinkHost, id: &str) -> zlink_location::AuthorityHandle {
    let objects = host.object_host(0);
    let discovery = host.object_discovery(0);
    let authority = objects.location.authority();
    let candidates = discovery.candidates(authority).await.expect("candidates");
    match authority
        .place_and_reserve(
            candidates,
            ObjectKind::Actor,
            zlink_codec::ObjectId::new(id).expect("id"),
            zlink_codec::StableType::new("keeper").expect("type"),
            Vec::new(),
            None,
        )
        .await
        .expect("reserve")
    {
        Outcome::Applied(h) => h,
        other => panic!("not reserved: {other:?}"),
    }
}

async fn the_create_command_verifies_every_fence_and_answers_the_stored_result_again(h: &Harness) {
    let factories = Arc::new(AtomicUsize::new(0));
    let (ha, node) = start(h, deciding_server(&factories, 10)).await;
    wait_discovered(&[&ha]).await;
    let host = ha.object_host(0);
    let handle = reserve_on(&ha, "ok-5").await;
    let run = host.location.host_run().expect("run");
    let order = CreationOrder {
        op: OperationKey {
            source: node.inner.rid.clone(),
            source_run: run.lease_generation.to_codec(),
            operation: zlink_codec::OperationId::new(0x5eed).expect("op"),
        },
        remaining: Duration::from_secs(10),
    };
    let good = CreateCommand::of(&handle, &order);
    let source = node.inner.rid.clone();
    type Change = Box<dyn Fn(&mut CreateCommand)>;
    let wrong: [(&str, Change); 6] = [
        ("version", Box::new(|c| c.first_version.push('0'))),
        ("target run", Box::new(|c| c.target_run = "999999".into())),
        (
            "object generation",
            Box::new(|c| c.object_generation = "999999".into()),
        ),
        (
            "owner generation",
            Box::new(|c| c.owner_generation = "999999".into()),
        ),
        ("stable type", Box::new(|c| c.stable_type = "other".into())),
        ("kind", Box::new(|c| c.kind = "userSpot".into())),
    ];
    for (what, change) in wrong {
        let mut cmd = good.clone();
        change(&mut cmd);
        let err = host
            .create_command(cmd, &source)
            .await
            .expect_err("a wrong fence is refused");
        assert!(
            matches!(err.kind(), ErrorKind::Unavailable),
            "{what}: {err}"
        );
    }
    assert_eq!(factories.load(Ordering::SeqCst), 0, "nothing ran");
    let first = host
        .create_command(good.clone(), &source)
        .await
        .expect("created");
    assert_eq!(first.outcome, CreationOutcome::Created);
    // The same operation again: the stored result, no second factory.
    let again = host.create_command(good, &source).await.expect("stored");
    assert_eq!(again, first);
    assert_eq!(factories.load(Ordering::SeqCst), 1);
    // Another source cannot name that operation's result.
    assert!(
        host.location
            .authority()
            .read_terminal(&OperationKey {
                source: zlink_codec::RoutingId::new(vec![9, 9]).expect("rid"),
                ..order.op.clone()
            })
            .await
            .expect("read")
            .is_none()
    );
    ha.shutdown().await;
}

async fn a_request_at_the_record_bound_fits_and_one_byte_more_changes_nothing(h: &Harness) {
    let factories = Arc::new(AtomicUsize::new(0));
    let (ha, _a) = start(h, deciding_server(&factories, 10)).await;
    wait_discovered(&[&ha]).await;
    let fits = |n: usize| {
        // The reservation id of a creation is its OperationId in 32 hex digits.
        let p = zlink_codec::records::PendingCreation::for_request("0".repeat(32), &vec![7u8; n]);
        p.is_ok_and(|p| {
            zlink_location::AuthorityClient::creation_record_fits(
                &mesh(),
                ObjectKind::Actor,
                &zlink_codec::StableType::new("keeper").expect("type"),
                &p,
            )
            .is_ok()
        })
    };
    let (mut lo, mut hi) = (0usize, 1 << 20);
    while lo + 1 < hi {
        let mid = (lo + hi) / 2;
        if fits(mid) { lo = mid } else { hi = mid }
    }
    assert!(
        fits(lo) && !fits(lo + 1) && lo > 700_000,
        "largest fitting request {lo}"
    );
    let m = ha.actors().expect("manager");
    let before = h.snapshot().await;
    let err = m
        .create("keeper", "ok-big")
        .request(vec![7u8; lo + 1])
        .await
        .expect_err("one byte past the bound");
    assert_eq!(err.kind(), ErrorKind::InvalidOperation);
    assert_eq!(h.snapshot().await, before, "nothing was written");
    let r = m
        .create("keeper", "ok-big")
        .request(vec![7u8; lo])
        .await
        .expect("the largest request that fits");
    assert_eq!(
        m.request(r.id.as_str(), &Show).await.expect("show").len(),
        lo
    );
    ha.shutdown().await;
}

async fn a_target_that_never_answers_ends_deadline_exceeded_without_a_reserved_row(h: &Harness) {
    let gate = Gate::new();
    let g = gate.clone();
    let built = Arc::new(AtomicUsize::new(0));
    let b2 = Arc::clone(&built);
    // The source serves another type, so the creation is placed on the slow target.
    let (ha, a) = start(h, |b| {
        b.object_role(ObjectRole::Server)
            .actor_type::<Keeper>("other", keeper(&Arc::new(AtomicUsize::new(0))))
    })
    .await;
    let (hb, _b) = start(h, move |b| {
        b.object_role(ObjectRole::Server)
            .actor_type::<Keeper>("keeper", move |t| {
                t.factory(move |_ctx| {
                    let g = g.clone();
                    let b2 = Arc::clone(&b2);
                    async move {
                        g.pass().await;
                        b2.fetch_add(1, Ordering::SeqCst);
                        Ok(Keeper {
                            request: Vec::new(),
                        })
                    }
                })
                .disable_relocation()
            })
    })
    .await;
    wait_peers(&a, 1).await;
    wait_discovered(&[&ha, &hb]).await;
    let m = ha.actors().expect("manager");
    let err = m
        .create("keeper", "slow")
        .deadline(Duration::from_millis(500))
        .await
        .expect_err("deadline");
    assert_eq!(err.kind(), ErrorKind::DeadlineExceeded, "{err}");
    assert!(
        matches!(
            ha.object_host(0)
                .location
                .authority()
                .read(
                    ObjectKind::Actor,
                    &zlink_codec::ObjectId::new("slow").expect("id")
                )
                .await
                .expect("read"),
            AuthorityRead::Missing { .. }
        ),
        "the reservation was cancelled"
    );
    // The factory finishing late commits nothing: its commit finds the record gone.
    gate.open();
    wait_until("the late factory ran", || built.load(Ordering::SeqCst) == 1).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(m.find("slow").await.expect("find"), None);
    stop_all(&[&ha, &hb]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn activation_concurrency_bounds_the_factories_running_at_once() {
    let h = Harness::memory();
    let running = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let (r, m) = (Arc::clone(&running), Arc::clone(&most));
    let (ha, _a) = start(&h, move |b| {
        b.object_role(ObjectRole::Server)
            .activation_concurrency(1)
            .actor_type::<Keeper>("keeper", move |t| {
                t.factory(move |_ctx| {
                    let (r, m) = (Arc::clone(&r), Arc::clone(&m));
                    async move {
                        let now = r.fetch_add(1, Ordering::SeqCst) + 1;
                        m.fetch_max(now, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(30)).await;
                        r.fetch_sub(1, Ordering::SeqCst);
                        Ok(Keeper {
                            request: Vec::new(),
                        })
                    }
                })
                .disable_relocation()
            })
    })
    .await;
    wait_discovered(&[&ha]).await;
    let actors = ha.actors().expect("actors");
    let calls: Vec<_> = (0..8)
        .map(|i| {
            let a = actors.clone();
            tokio::spawn(async move { a.create("keeper", &format!("k{i}")).await })
        })
        .collect();
    for c in calls {
        c.await.expect("task").expect("created");
    }
    assert_eq!(most.load(Ordering::SeqCst), 1, "one factory at a time");
    ha.shutdown().await;
}
