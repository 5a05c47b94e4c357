//! The `PerActor` User Spot move (spec 28 §5, §6 "`PerActor` User Spot", §12 item 6; 21 §8,
//! §8.2, §9.2): the Spot authority transition, then each member Actor as its own unit, the
//! move record counting them.

mod rig;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use zlink_codec::keys::AuthorityKind;
use zlink_codec::records::{HostState, ObjectKind};

use super::Totals;
use crate::host::tests::support::*;
use crate::host::{RelocateOptions, RelocationOutcome, RelocationReason};
use crate::messaging::ErrorKind;
use crate::objects::ActorRef;
use crate::relocation::MovesOf;
use rig::{Serves, Where, live_here, member_ref, rig};
use zlink_location::AuthorityRead;
use zlink_testkit::Harness;

on_every_store!(
    per_actor_spot_and_members_move_with_host_relocate,
    after_spot_transition_create_and_join_go_to_the_target,
    to_actor_reaches_each_actors_current_owner,
    per_actor_move_record_counts_sum_to_membership,
    a_spot_transition_refused_by_the_target_leaves_the_store_untouched_and_the_spot_serving,
    a_per_actor_member_with_disable_relocation_blocks_the_host_relocate,
    a_resent_spot_restore_never_runs_twice,
    spot_messages_during_the_transition_are_served_once_by_the_target,
    a_target_without_a_member_type_is_no_target_for_a_per_actor_spot,
    a_per_actor_member_restore_waits_for_its_ready_no_longer_than_the_moves_deadline,
);

async fn per_actor_spot_and_members_move_with_host_relocate(h: &Harness) {
    let rig = rig(h, 4, 3, &[], Serves::All).await;
    let result = rig
        .source()
        .host
        .relocate(RelocateOptions::planned_maintenance())
        .await
        .expect("valid options");
    assert_eq!(result.outcome, RelocationOutcome::Relocated, "{result:?}");
    assert_eq!(
        result.moved, 5,
        "the Spot authority transition and one unit per member"
    );
    assert_eq!(rig.source().host.state(), HostState::Relocated);
    let target = rig.target().node.routing_id().clone();
    assert_eq!(
        rig.node_of(ObjectKind::UserSpot, rig.room.id.as_str())
            .await,
        target
    );
    assert!(live_here(
        rig.target(),
        AuthorityKind::Spot,
        rig.room.id.as_str()
    ));
    assert!(!live_here(
        rig.source(),
        AuthorityKind::Spot,
        rig.room.id.as_str()
    ));
    let actors = rig.client().host.actors().expect("actors");
    for id in &rig.members {
        assert_eq!(rig.node_of(ObjectKind::Actor, id).await, target, "{id}");
        assert!(live_here(rig.target(), AuthorityKind::Actor, id));
        assert_eq!(
            actors.request(id, &Totals).await.expect("totals"),
            (6, 3, 0),
            "{id}'s state moved with it"
        );
    }
    let record = rig.move_record().await.expect("a move record");
    assert_eq!(
        (record.total, record.source_actors, record.target_actors),
        (4, 0, 4)
    );
    assert_eq!(record.total, rig.membership().await);
    assert_eq!(record.target_node.routing_id, target);
    assert_eq!(
        rig.source().room_captures.load(Ordering::SeqCst),
        0,
        "no Spot adapter call"
    );
    let spots = rig.client().host.spots().expect("spots");
    let (label, _) = spots
        .request(rig.room.id.as_str(), &Where)
        .await
        .expect("ToSpot");
    assert_eq!(label, 2, "the target serves the Spot");
    rig.shutdown().await;
}

async fn after_spot_transition_create_and_join_go_to_the_target(h: &Harness) {
    let rig = rig(h, 3, 1, &[], Serves::All).await;
    let client = rig.source_client();
    let moving =
        crate::relocation::per_actor::transition_per_actor_spot(&client, &rig.room.id, None)
            .await
            .expect("the Spot authority moved");
    let target = rig.target().node.routing_id().clone();
    let source = rig.source().node.routing_id().clone();
    assert_eq!(moving.target(), &target);
    assert_eq!(moving.members().len(), 3);
    // ToSpot: the target's empty shell serves (its count starts again: no state moved).
    let spots = rig.client().host.spots().expect("spots");
    assert_eq!(
        spots
            .request(rig.room.id.as_str(), &Where)
            .await
            .expect("ToSpot"),
        (2, 1)
    );
    // Create into the Spot: placed on the target.
    let actors = rig.client().host.actors().expect("actors");
    let late = actors
        .get_or_create("member", "pa-late")
        .in_spot(&rig.room)
        .await
        .expect("created into the moved Spot");
    assert_eq!(late.node, target);
    // Join: an Actor on the target joins; one on the source cannot (another node).
    let mut joiner: Option<ActorRef> = None;
    for i in 0..60 {
        let a = actors
            .get_or_create("member", &format!("pa-entry-{i}"))
            .await
            .expect("an entry actor");
        if a.node == target {
            joiner = Some(a);
            break;
        }
    }
    let joiner = joiner.expect("placement never chose the target");
    actors
        .join(&joiner, &rig.room)
        .await
        .expect("the target serves the Join");
    let unmoved = member_ref(&rig, &rig.members[0], &source).await;
    let refused = actors.join(&unmoved, &rig.room).await;
    assert_eq!(
        refused.err().map(|e| e.kind()),
        Some(ErrorKind::InvalidOperation),
        "the Spot is no longer on the source"
    );
    // Every member is still on the source, serving there.
    for id in &rig.members {
        assert_eq!(rig.node_of(ObjectKind::Actor, id).await, source, "{id}");
        assert_eq!(actors.request(id, &Where).await.expect("ToActor").0, 1);
    }
    assert_eq!(moving.move_members().await.expect("members moved"), 3);
    moving.finish().await;
    for id in &rig.members {
        assert_eq!(actors.request(id, &Where).await.expect("ToActor").0, 2);
    }
    rig.shutdown().await;
}

async fn to_actor_reaches_each_actors_current_owner(h: &Harness) {
    let rig = rig(h, 4, 2, &[], Serves::All).await;
    let client = rig.source_client();
    let moving =
        crate::relocation::per_actor::transition_per_actor_spot(&client, &rig.room.id, None)
            .await
            .expect("the Spot authority moved");
    let first = moving.members()[0].clone();
    let moved = moving.move_member(&first).await.expect("one member moved");
    assert_eq!(&moved.node, moving.target());
    let actors = rig.client().host.actors().expect("actors");
    for id in &rig.members {
        let (label, applied) = actors.request(id, &Where).await.expect("ToActor");
        let want = if id == first.id.as_str() { 2 } else { 1 };
        assert_eq!(label, want, "{id} answers from its current owner");
        assert_eq!(applied, 2, "{id} keeps its state");
        let node = rig.node_of(ObjectKind::Actor, id).await;
        let owner = if want == 2 {
            rig.target()
        } else {
            rig.source()
        };
        assert_eq!(&node, owner.node.routing_id(), "{id}'s record");
        assert!(live_here(owner, AuthorityKind::Actor, id));
    }
    assert_eq!(moving.move_members().await.expect("the rest moved"), 3);
    moving.finish().await;
    rig.shutdown().await;
}

async fn per_actor_move_record_counts_sum_to_membership(h: &Harness) {
    let rig = rig(h, 5, 1, &[], Serves::All).await;
    assert!(
        rig.move_record().await.is_none(),
        "no move before the transition"
    );
    let client = rig.source_client();
    let moving =
        crate::relocation::per_actor::transition_per_actor_spot(&client, &rig.room.id, None)
            .await
            .expect("the Spot authority moved");
    let record = rig
        .move_record()
        .await
        .expect("written by the authority CAS");
    assert_eq!(
        (record.total, record.source_actors, record.target_actors),
        (5, 5, 0)
    );
    assert_ne!(record.operation, 0);
    assert_eq!(
        &record.source_node.routing_id,
        rig.source().node.routing_id()
    );
    assert_eq!(
        &record.target_node.routing_id,
        rig.target().node.routing_id()
    );
    assert_eq!(
        record.total,
        rig.membership().await,
        "the Spot's membership count"
    );
    let operation = record.operation;
    let members = moving.members().to_vec();
    for (k, m) in members.iter().enumerate() {
        moving.move_member(m).await.expect("member moved");
        let now = rig.move_record().await.expect("record");
        assert_eq!(now.operation, operation, "the same relocation operation");
        assert_eq!(now.target_actors as usize, k + 1);
        assert_eq!(now.source_actors + now.target_actors, now.total);
        assert_eq!(now.total, rig.membership().await);
    }
    moving.finish().await;
    let done = rig.move_record().await.expect("record");
    assert_eq!((done.source_actors, done.target_actors), (0, 5));
    rig.shutdown().await;
}

async fn a_spot_transition_refused_by_the_target_leaves_the_store_untouched_and_the_spot_serving(
    h: &Harness,
) {
    let rig = rig(h, 2, 1, &[], Serves::RefusingRooms).await;
    let source = rig.source().node.routing_id().clone();
    let objects = rig.client().host.object_host(0);
    let authority = objects.location.authority();
    let AuthorityRead::Found { handle: before, .. } = authority
        .read(ObjectKind::UserSpot, &rig.room.id)
        .await
        .expect("read")
    else {
        panic!("no room record");
    };
    let spots = rig.client().host.spots().expect("spots");
    assert_eq!(
        spots
            .request(rig.room.id.as_str(), &Where)
            .await
            .expect("ToSpot"),
        (1, 1)
    );
    let client = rig.source_client();
    let refused =
        crate::relocation::per_actor::transition_per_actor_spot(&client, &rig.room.id, None).await;
    assert!(refused.is_err(), "the target's shell could not be built");
    let AuthorityRead::Found { handle: after, .. } = authority
        .read(ObjectKind::UserSpot, &rig.room.id)
        .await
        .expect("read")
    else {
        panic!("no room record");
    };
    assert_eq!(after.node().routing_id, source, "the owner is unchanged");
    assert_eq!(after.owner(), before.owner());
    assert_eq!(
        after.authority_owner_generation(),
        before.authority_owner_generation()
    );
    assert_eq!(after.object_generation(), before.object_generation());
    assert!(rig.move_record().await.is_none(), "no move record");
    let target_node = zlink_location::NodeKey {
        mesh: rig.target().node.mesh_name().clone(),
        routing_id: rig.target().node.routing_id().clone(),
    };
    let held = authority
        .node_capacity(&target_node)
        .await
        .expect("the target's allocation row");
    assert_eq!(held.spots, 0, "the target's Spot capacity was released");
    assert!(!live_here(
        rig.target(),
        AuthorityKind::Spot,
        rig.room.id.as_str()
    ));
    // The source Spot serves on, with its state.
    assert_eq!(
        spots
            .request(rig.room.id.as_str(), &Where)
            .await
            .expect("ToSpot"),
        (1, 2)
    );
    let actors = rig.client().host.actors().expect("actors");
    for id in &rig.members {
        assert_eq!(rig.node_of(ObjectKind::Actor, id).await, source);
        assert_eq!(actors.request(id, &Where).await.expect("ToActor"), (1, 1));
    }
    rig.shutdown().await;
}

async fn a_per_actor_member_with_disable_relocation_blocks_the_host_relocate(h: &Harness) {
    let rig = rig(h, 3, 1, &[1], Serves::All).await;
    let result = rig
        .source()
        .host
        .relocate(RelocateOptions::planned_maintenance())
        .await
        .expect("valid options");
    assert_eq!(result.outcome, RelocationOutcome::Blocked, "{result:?}");
    assert_eq!(result.reason, RelocationReason::RelocationDisabled);
    assert_eq!(result.moved, 0);
    assert_eq!(rig.source().host.state(), HostState::Serving);
    assert!(rig.move_record().await.is_none());
    assert_eq!(
        rig.node_of(ObjectKind::UserSpot, rig.room.id.as_str())
            .await,
        rig.source().node.routing_id().clone()
    );
    rig.shutdown().await;
}

async fn a_resent_spot_restore_never_runs_twice(h: &Harness) {
    let rig = rig(h, 2, 2, &[], Serves::All).await;
    let target = rig.target().host.object_host(0);
    let resent = Arc::new(AtomicUsize::new(0));
    let (t, n) = (Arc::clone(&target), Arc::clone(&resent));
    // Once a unit is Prepared (its target built and queued it), its Restore and prepare
    // arrive at the target again.
    let hook: crate::relocation::StageHook = Arc::new(move |stage| {
        let (t, n) = (Arc::clone(&t), Arc::clone(&n));
        Box::pin(async move {
            if stage == zlink_relocation::unit::RecordedStage::Prepared {
                let k = crate::relocation::per_actor::resend_restores(&t)
                    .await
                    .expect("the resent Restore is accepted");
                n.fetch_add(k, Ordering::SeqCst);
            }
        })
    });
    rig.source()
        .host
        .object_host(0)
        .relocations()
        .probe
        .on_stage(Some(hook));
    let client = rig.source_client();
    let moving =
        crate::relocation::per_actor::transition_per_actor_spot(&client, &rig.room.id, None)
            .await
            .expect("the Spot authority moved");
    assert_eq!(
        resent.load(Ordering::SeqCst),
        1,
        "the Spot's Restore was resent"
    );
    assert_eq!(
        rig.target().rooms_built.load(Ordering::SeqCst),
        1,
        "the shell was built once"
    );
    let spots = rig.client().host.spots().expect("spots");
    assert_eq!(
        spots
            .request(rig.room.id.as_str(), &Where)
            .await
            .expect("ToSpot"),
        (2, 1),
        "one shell serves, once"
    );
    // Each member's Restore too, one member at a time.
    for m in moving.members().to_vec() {
        moving.move_member(&m).await.expect("member moved");
    }
    moving.finish().await;
    assert_eq!(resent.load(Ordering::SeqCst), 3);
    let actors = rig.client().host.actors().expect("actors");
    for id in &rig.members {
        assert_eq!(
            actors.request(id, &Totals).await.expect("totals"),
            (3, 2, 0),
            "{id} was restored once, its state intact"
        );
        assert!(live_here(rig.target(), AuthorityKind::Actor, id));
    }
    rig.shutdown().await;
}

async fn spot_messages_during_the_transition_are_served_once_by_the_target(h: &Harness) {
    let rig = rig(h, 2, 1, &[], Serves::All).await;
    let spots = rig.client().host.spots().expect("spots");
    let sent = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let (s, room, out) = (spots.clone(), rig.room.id.clone(), Arc::clone(&sent));
    // Once the Spot is sealed (captured), ToSpot requests from another node arrive: held,
    // relayed or followed, never run on the source.
    let hook: crate::relocation::StageHook = Arc::new(move |stage| {
        let (s, room, out) = (s.clone(), room.clone(), Arc::clone(&out));
        Box::pin(async move {
            if stage == zlink_relocation::unit::RecordedStage::Captured {
                for _ in 0..5 {
                    let (s, room) = (s.clone(), room.clone());
                    out.lock().push(tokio::spawn(async move {
                        s.request(room.as_str(), &Where).await
                    }));
                }
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        })
    });
    rig.source()
        .host
        .object_host(0)
        .relocations()
        .probe
        .on_stage(Some(hook));
    let client = rig.source_client();
    let moving =
        crate::relocation::per_actor::transition_per_actor_spot(&client, &rig.room.id, None)
            .await
            .expect("the Spot authority moved");
    rig.source()
        .host
        .object_host(0)
        .relocations()
        .probe
        .on_stage(None);
    let waiting: Vec<_> = std::mem::take(&mut *sent.lock());
    assert_eq!(waiting.len(), 5);
    let mut counts = Vec::new();
    for w in waiting {
        let (label, n) = w.await.expect("task").expect("answered");
        assert_eq!(label, 2, "served by the target's Spot");
        counts.push(n);
    }
    counts.sort_unstable();
    assert_eq!(counts, vec![1, 2, 3, 4, 5], "each ran once, none lost");
    assert_eq!(moving.move_members().await.expect("members moved"), 2);
    moving.finish().await;
    rig.shutdown().await;
}

async fn a_target_without_a_member_type_is_no_target_for_a_per_actor_spot(h: &Harness) {
    let rig = rig(h, 2, 1, &[], Serves::NoMembers).await;
    let result = rig
        .source()
        .host
        .relocate(
            RelocateOptions::planned_maintenance().deadline(std::time::Duration::from_secs(2)),
        )
        .await
        .expect("valid options");
    assert_eq!(result.outcome, RelocationOutcome::Blocked, "{result:?}");
    assert_eq!(result.reason, RelocationReason::TargetUnavailable);
    assert_eq!(result.moved, 0);
    assert_eq!(rig.source().host.state(), HostState::Serving);
    assert!(rig.move_record().await.is_none());
    let source = rig.source().node.routing_id().clone();
    assert_eq!(
        rig.node_of(ObjectKind::UserSpot, rig.room.id.as_str())
            .await,
        source
    );
    for id in &rig.members {
        assert_eq!(rig.node_of(ObjectKind::Actor, id).await, source);
    }
    rig.shutdown().await;
}

/// Issue 20: a member unit of a `PerActor` move carries the move's deadline in its Restore
/// command (`deadlineMs`) like every other unit. The source stalls right after the member's
/// `Prepared` record (no ready): the target releases the member's reservation and drops its
/// prepared instance once that deadline passed — before, it waited its longest wait (a
/// minute). The late ready is refused and the member stays on the source.
async fn a_per_actor_member_restore_waits_for_its_ready_no_longer_than_the_moves_deadline(
    h: &Harness,
) {
    use super::target_faults::{objects_of, stall_after_prepared, target_released};
    let rig = rig(h, 1, 1, &[], Serves::All).await;
    let client = rig.source_client();
    let deadline = std::time::Duration::from_secs(3);
    let started = tokio::time::Instant::now();
    let moving = crate::relocation::per_actor::transition_per_actor_spot_within(
        &client,
        &rig.room.id,
        None,
        Some(started + deadline),
    )
    .await
    .expect("the Spot authority moved");
    let (gate, reached) = (
        Gate::new(),
        Arc::new(std::sync::atomic::AtomicBool::new(false)),
    );
    stall_after_prepared(&rig.source().host, &gate, &reached);
    let member = moving.members()[0].clone();
    let unit = tokio::spawn(async move {
        let out = moving.move_member(&member).await;
        (moving, out)
    });
    wait_until("the member's Prepared record", || {
        reached.load(Ordering::SeqCst)
    })
    .await;
    let target = &rig.target().host;
    assert_eq!(objects_of(target).relocations().incoming_units(), 1);
    target_released(h, target, "the target released the member's reservation").await;
    let waited = started.elapsed();
    assert!(waited >= deadline, "not before the deadline: {waited:?}");
    assert!(!live_here(
        rig.target(),
        AuthorityKind::Actor,
        &rig.members[0]
    ));
    gate.open();
    let (moving, out) = tokio::time::timeout(WAIT, unit)
        .await
        .expect("the member unit ends")
        .expect("task");
    assert!(out.is_err(), "the member did not move: {out:?}");
    let source = rig.source().node.routing_id().clone();
    assert_eq!(
        rig.node_of(ObjectKind::Actor, &rig.members[0]).await,
        source
    );
    moving.finish().await;
    rig.shutdown().await;
}
