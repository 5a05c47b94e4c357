//! The `PerActor` User Spot move in the location core (spec 21 §8, §8.2): the Spot authority
//! transition writes the move record; each member's NewOwner moves one Actor from the source
//! count to the target count in the same CAS, only for the move's relocation operation.

use super::prelude::*;
use crate::PerActorMoveRecord;

async fn record(host: &Host, spot: &str) -> Option<PerActorMoveRecord> {
    host.rt
        .authority()
        .per_actor_move(&id(spot))
        .await
        .expect("read the move record")
}

async fn read(host: &Host, kind: ObjectKind, object: &str) -> AuthorityHandle {
    match host
        .rt
        .authority()
        .read(kind, &id(object))
        .await
        .expect("read")
    {
        AuthorityRead::Found { handle, .. } => handle,
        AuthorityRead::Missing { .. } => panic!("{object} is missing"),
    }
}

/// The Spot authority CAS moves only the Spot (same ObjectGeneration, greater
/// AuthorityOwnerGeneration, its capacity) and writes the move record with every member on
/// the source; a member CAS of another operation changes nothing; each member CAS of the
/// move moves its Actor and one count, the counts always summing to the member count; a
/// replayed member CAS conflicts and changes nothing.
pub(super) async fn per_actor_moves_keep_the_move_record_counts_summing_to_the_members(
    h: &Harness,
) {
    let a = host(h, "main", 1).await;
    let b = host(h, "main", 2).await;
    let spot = active_spot(&a, "s").await;
    for m in ["m1", "m2"] {
        active_actor(&a, m).await;
    }
    let res = secure(&a, &spot, &b).await;
    let moved =
        b.rt.authority()
            .new_owner_per_actor_spot(&spot, &res, 7, 2)
            .await
            .expect("authority transition")
            .applied()
            .expect("moved");
    assert_eq!(moved.object_generation(), spot.object_generation());
    assert!(moved.authority_owner_generation() > spot.authority_owner_generation());
    assert_eq!(moved.node(), b.node());
    let (ua, ub) = (capacity(&a, &a).await, capacity(&a, &b).await);
    assert_eq!(
        (ua.spots.active, ua.actors.active),
        (0, 2),
        "only the Spot moved"
    );
    assert_eq!((ub.spots.active, ub.actors.active), (1, 0));
    let r = record(&a, "s").await.expect("the move record");
    assert_eq!(
        (r.operation, r.total, r.source_actors, r.target_actors),
        (7, 2, 2, 0)
    );
    assert_eq!(
        (r.source_node.clone(), r.target_node.clone()),
        (a.node(), b.node())
    );
    assert_eq!(r.object_generation, spot.object_generation());
    for (k, m) in ["m1", "m2"].into_iter().enumerate() {
        let actor = read(&a, ObjectKind::Actor, m).await;
        let res = secure(&a, &actor, &b).await;
        let before = h.snapshot().await;
        assert!(matches!(
            b.rt.authority()
                .new_owner_per_actor_member(&actor, &res, &id("s"), 8)
                .await
                .expect("another operation"),
            Outcome::Conflict(_)
        ));
        assert_eq!(
            h.snapshot().await,
            before,
            "another operation changes nothing"
        );
        let now =
            b.rt.authority()
                .new_owner_per_actor_member(&actor, &res, &id("s"), 7)
                .await
                .expect("member move")
                .applied()
                .expect("moved");
        assert_eq!(now.node(), b.node());
        assert_eq!(now.object_generation(), actor.object_generation());
        let r = record(&a, "s").await.expect("the move record");
        assert_eq!(r.target_actors as usize, k + 1);
        assert_eq!(r.source_actors + r.target_actors, r.total);
        let before = h.snapshot().await;
        assert!(matches!(
            b.rt.authority()
                .new_owner_per_actor_member(&actor, &res, &id("s"), 7)
                .await
                .expect("replay"),
            Outcome::Conflict(_)
        ));
        assert_eq!(h.snapshot().await, before, "a replay changes nothing");
    }
    let (ua, ub) = (capacity(&a, &a).await, capacity(&a, &b).await);
    assert_eq!((ua.spots.active, ua.actors.active), (0, 0));
    assert_eq!((ub.spots.active, ub.actors.active), (1, 2));
}
