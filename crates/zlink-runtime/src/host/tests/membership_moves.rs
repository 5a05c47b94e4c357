//! Membership across moves (spec 21 §8.2): an ordinary move of an Entry Spot member makes it
//! a member of the target node's Entry Spot in the same owner change ("If it's an Entry Spot
//! member, source and target Entry membership also change").

use super::join_across::{Pair, Peek, record};
use super::support::*;
use crate::host::{ObjectTarget, RelocateOptions, RelocationOutcome};
use crate::objects::membership::Membership;
use zlink_testkit::Harness;

on_every_store!(
    an_entry_member_moved_by_relocate_object_becomes_a_member_of_the_targets_entry_spot,
    an_entry_member_moved_by_a_host_relocate_becomes_a_member_of_the_targets_entry_spot,
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
