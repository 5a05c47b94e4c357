//! Membership across moves (spec 21 §8.2): an ordinary move of an Entry Spot member makes it
//! a member of the target node's Entry Spot in the same owner change ("If it's an Entry Spot
//! member, source and target Entry membership also change"), and a same-node join never takes
//! an Actor out of a Spot while that Spot moves (the move's member counts stay right).

use std::sync::atomic::Ordering;

use zlink_codec::keys::AuthorityKind;

use super::join_across::{Hold, Pair, Peek, record};
use super::support::*;
use crate::host::{ObjectTarget, RelocateOptions, RelocationOutcome};
use crate::messaging::{StaleReason, ZLinkError};
use crate::objects::membership::Membership;
use zlink_testkit::Harness;

on_every_store!(
    an_entry_member_moved_by_relocate_object_becomes_a_member_of_the_targets_entry_spot,
    an_entry_member_moved_by_a_host_relocate_becomes_a_member_of_the_targets_entry_spot,
    a_same_node_join_while_the_actors_spot_moves_is_refused_join_party_moving,
);

/// The Entry Spot of the node `i` of `p`.
fn entry_of(p: &Pair, i: usize) -> Membership {
    let entry = p.hosts[i]
        .object_host(0)
        .entry_spot
        .clone()
        .expect("an Entry Spot");
    Membership::entry(&entry)
}

async fn an_entry_member_moved_by_relocate_object_becomes_a_member_of_the_targets_entry_spot(
    h: &Harness,
) {
    let p = Pair::start(h).await;
    let actors = p.hosts[0].actors().expect("actors");
    let actor = actors.get_or_create("kept", "em1").await.expect("actor");
    actors.request("em1", &Peek).await.expect("peek");
    let from = usize::from(actor.node == p.rid(1));
    let to = 1 - from;
    let before = record(&p.hosts[0], "em1").await;
    assert_eq!(
        Membership::decode(before.payload()),
        Some(entry_of(&p, from))
    );
    p.hosts[from]
        .relocate_object(actor, ObjectTarget::Node(p.rid(to)))
        .await
        .expect("moved");
    let after = record(&p.hosts[0], "em1").await;
    assert_eq!(after.node().routing_id, p.rid(to));
    assert_eq!(
        Membership::decode(after.payload()),
        Some(entry_of(&p, to)),
        "the record names the target's Entry Spot, from the owner change on"
    );
    assert_eq!(actors.spot_of("em1").await.expect("spot_of"), None);
    let (_, n, node) = actors.request("em1", &Peek).await.expect("served there");
    assert_eq!((n, node), (2, p.rid(to).to_hex()), "state moved with it");
    p.shutdown().await;
}

async fn an_entry_member_moved_by_a_host_relocate_becomes_a_member_of_the_targets_entry_spot(
    h: &Harness,
) {
    let p = Pair::start(h).await;
    let actors = p.hosts[0].actors().expect("actors");
    let actor = actors.get_or_create("kept", "em2").await.expect("actor");
    let from = usize::from(actor.node == p.rid(1));
    let to = 1 - from;
    let result = p.hosts[from]
        .relocate(RelocateOptions::planned_maintenance())
        .await
        .expect("valid options");
    assert_eq!(result.outcome, RelocationOutcome::Relocated, "{result:?}");
    let after = record(&p.hosts[to], "em2").await;
    assert_eq!(after.node().routing_id, p.rid(to));
    assert_eq!(Membership::decode(after.payload()), Some(entry_of(&p, to)));
    p.shutdown().await;
}

/// A member of a `PerActor` Spot is counted by that Spot's move while it runs: a same-node
/// join to another Spot meanwhile is refused (`JoinPartyMoving`), its record unchanged, and
/// the move takes it along. Before, the join's Preserve CAS applied mid-move.
async fn a_same_node_join_while_the_actors_spot_moves_is_refused_join_party_moving(h: &Harness) {
    let p = Pair::start(h).await;
    let spots = p.hosts[0].spots().expect("spots");
    let parlor = spots.create("parlor").await.expect("parlor");
    let on = usize::from(parlor.node == p.rid(1));
    let actors = p.hosts[on].actors().expect("actors");
    let member = actors
        .create("kept", "pm1")
        .in_spot(&parlor)
        .await
        .expect("member");
    assert_eq!(
        member.node, parlor.node,
        "a PerActor member starts on its Spot's node"
    );
    let mut lobby = None;
    for _ in 0..40 {
        let s = spots.create("lobby").await.expect("lobby");
        if s.node == parlor.node {
            lobby = Some(s);
            break;
        }
    }
    let lobby = lobby.expect("a lobby on the parlor's node");
    // The parlor is inside its turn: its move waits for it, sealed.
    spots.send(parlor.id.as_str(), &Hold).await.expect("hold");
    wait_until("the parlor is inside its turn", || {
        p.shared.busy.load(Ordering::SeqCst)
    })
    .await;
    let mover = p.hosts[on].clone();
    let (moved, to) = (parlor.clone(), p.rid(1 - on));
    let moving =
        tokio::spawn(async move { mover.relocate_object(moved, ObjectTarget::Node(to)).await });
    let objects = p.hosts[on].object_host(0);
    let key = (AuthorityKind::Spot, parlor.id.clone());
    wait_until("the parlor's move covers it", || {
        objects.interception.covers(&key)
    })
    .await;
    let before = record(&p.hosts[0], "pm1").await;
    let err = actors.join(&member, &lobby).await.expect_err("refused");
    assert!(
        matches!(
            &err,
            ZLinkError::StaleFence {
                reason: StaleReason::JoinPartyMoving
            }
        ),
        "{err:?}"
    );
    let after = record(&p.hosts[0], "pm1").await;
    assert_eq!(after.version(), before.version(), "the record is unchanged");
    p.shared.gate.open();
    moving.await.expect("task").expect("the parlor moved");
    // The move took the member along, and a `PerActor` member keeps its Spot (no Entry Spot
    // rewrite for it).
    let deadline = tokio::time::Instant::now() + WAIT;
    let moved = loop {
        let r = record(&p.hosts[0], "pm1").await;
        if r.node().routing_id == p.rid(1 - on) {
            break r;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the member never moved"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    let m = Membership::decode(moved.payload()).expect("membership");
    assert_eq!(
        (m.spot.as_str(), m.entry),
        (parlor.id.as_str(), false),
        "still the parlor's member"
    );
    p.shutdown().await;
}
