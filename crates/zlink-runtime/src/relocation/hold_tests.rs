//! Tests of the source hold, the target temporary queue and the follow window (`hold.rs`).

use std::sync::Arc;

use crate::messaging::RouteKind;
use crate::objects::live::Completion;
use crate::objects::registration::ObjectCall;

use bytes::Bytes;
use zlink_codec::ObjectId;
use zlink_codec::keys::AuthorityKind;

use parking_lot::Mutex;

use super::*;
use crate::messaging::{ErrorKind, Metadata, PacketName};
use crate::objects::registration::MessageContext;

fn key() -> ObjectKey {
    (AuthorityKind::Actor, ObjectId::new("a").expect("id"))
}

/// A message of job cost `cost`; a request reports its outcome into `seen` (the relocation
/// layer's tests share it).
pub(crate) fn message(cost: usize, seen: Option<&Arc<Mutex<Vec<ErrorKind>>>>) -> Held {
    let reply = seen.map(|s| {
        let s = Arc::clone(s);
        Completion::new(move |out| {
            if let Err(e) = out {
                s.lock().push(e.kind());
            }
        })
    });
    Held {
        route: if reply.is_some() {
            RouteKind::Request
        } else {
            RouteKind::Send
        },
        call: ObjectCall {
            content_type: Bytes::new(),
            payload: Bytes::new(),
            typed_reply: false,
            context: MessageContext {
                id: "a".into(),
                packet: PacketName::new("P").expect("packet"),
                metadata: Metadata::empty(),
                relocation: Default::default(),
                node: Default::default(),
                timers: Default::default(),
            },
            job: crate::mesh::JobPermit::none(),
        },
        cost,
        reply,
        origin: None,
    }
}

/// A message numbered `n` (in its packet name) from another node (`remote`) or this one.
fn numbered(n: usize, remote: bool) -> Held {
    let mut m = message(1, None);
    m.call.context.packet = PacketName::new(format!("P{n}")).expect("packet");
    if remote {
        let source =
            zlink_codec::RoutingId::from_hex("0a0b0c0d0e0f10111213141516171819").expect("rid");
        let op = zlink_transport::OperationId::new(1).expect("op");
        let generation = zlink_codec::Generation::new(1).expect("generation");
        m.origin = Some(zlink_transport::Envelope::one_way(
            op,
            &source,
            generation,
            Bytes::new(),
        ));
    }
    m
}

fn record() -> FollowRecord {
    FollowRecord {
        to: zlink_codec::RoutingId::from_hex("0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b").expect("rid"),
        previous_owner_generation: 1,
        owner_generation: 2,
        object_generation: 1,
    }
}

fn number(m: &Held) -> usize {
    m.call.context.packet.as_str()[1..].parse().expect("number")
}

proptest::proptest! {
    /// Whatever mix of messages from other nodes and this one is held, the relay takes the
    /// remote ones in arrival order, and the follow then delivers the rest in arrival
    /// order followed by every later message: nothing lost, nothing twice, order kept.
    #[test]
    fn held_messages_leave_once_and_in_order(
        before in proptest::collection::vec(proptest::bool::ANY, 0..40),
        between in proptest::collection::vec(proptest::bool::ANY, 0..20),
        after in 0usize..10,
    ) {
        let r = Relocations::default();
        proptest::prop_assert!(r.seal(&key()));
        let mut n = 0;
        for remote in &before {
            proptest::prop_assert!(r.intercept(&key(), numbered(n, *remote)).is_none());
            n += 1;
        }
        let relayed: Vec<usize> = r.take_relayable(&key()).iter().map(number).collect();
        let want_relayed: Vec<usize> =
            (0..before.len()).filter(|&i| before[i]).collect();
        proptest::prop_assert_eq!(relayed, want_relayed);
        for remote in &between {
            proptest::prop_assert!(r.intercept(&key(), numbered(n, *remote)).is_none());
            n += 1;
        }
        let (tx, mut rx) = mpsc::unbounded_channel();
        r.follow(&key(), record(), Instant::now() + std::time::Duration::from_secs(60), tx);
        for _ in 0..after {
            proptest::prop_assert!(r.intercept(&key(), numbered(n, false)).is_none());
            n += 1;
        }
        let mut followed = Vec::new();
        while let Ok(followed_one) = rx.try_recv() {
            followed.push(number(&followed_one.0));
        }
        let want: Vec<usize> = (0..before.len())
            .filter(|&i| !before[i])
            .chain(before.len()..n)
            .collect();
        proptest::prop_assert_eq!(followed, want);
    }
}

#[test]
fn relaying_many_keys_at_once_takes_what_one_at_a_time_would() {
    let keys: Vec<ObjectKey> = (0..600)
        .map(|i| {
            (
                AuthorityKind::Actor,
                ObjectId::new(format!("a{i}")).expect("id"),
            )
        })
        .collect();
    let (each, one) = (Relocations::default(), Relocations::default());
    for r in [&each, &one] {
        for (i, k) in keys.iter().enumerate() {
            assert!(r.seal(k));
            // Every third key holds a remote message between two local ones.
            for (n, remote) in [(0, false), (1, i % 3 == 0), (2, false)] {
                assert!(r.intercept(k, numbered(3 * i + n, remote)).is_none());
            }
        }
    }
    let numbers = |taken: Vec<Vec<Held>>| -> Vec<Vec<usize>> {
        taken
            .iter()
            .map(|t| t.iter().map(number).collect())
            .collect()
    };
    let at_once = numbers(each.take_relayable_each(&keys));
    let singly = numbers(
        keys.iter()
            .map(|k| one.take_relayable(k))
            .filter(|t| !t.is_empty())
            .collect(),
    );
    assert_eq!(at_once.len(), 200);
    assert_eq!(at_once, singly);
    for k in &keys {
        let left = |r: &Relocations| match r.gates.lock().get(k) {
            Some(Gate::Holding(h)) => h.held.iter().map(number).collect::<Vec<_>>(),
            _ => Vec::new(),
        };
        assert_eq!(
            left(&each),
            left(&one),
            "the local ones stay held, in order"
        );
    }
}

fn held(r: &Relocations) -> usize {
    match r.gates.lock().get(&key()) {
        Some(Gate::Holding(h)) => h.held.len(),
        _ => 0,
    }
}

#[test]
fn a_sealed_actor_holds_up_to_1024_messages_and_refuses_the_next() {
    let r = Relocations::default();
    assert!(r.seal(&key()));
    assert!(!r.seal(&key()), "one move at a time");
    for _ in 0..HOLD_MAX_RECORDS {
        assert!(r.intercept(&key(), message(1, None)).is_none());
    }
    assert_eq!(held(&r), HOLD_MAX_RECORDS);
    let seen = Arc::new(Mutex::new(Vec::new()));
    assert!(r.intercept(&key(), message(1, Some(&seen))).is_none());
    assert_eq!(
        *seen.lock(),
        vec![ErrorKind::Unavailable],
        "a request past it"
    );
    assert!(r.intercept(&key(), message(1, None)).is_none());
    assert_eq!(
        r.dropped_one_way(),
        1,
        "the one-way counted (the request was answered)"
    );
    assert_eq!(held(&r), HOLD_MAX_RECORDS, "nothing else changed");
}

#[test]
fn a_sealed_actor_holds_up_to_16_mib_and_refuses_past_it() {
    let r = Relocations::default();
    assert!(r.seal(&key()));
    assert!(
        r.intercept(&key(), message(HOLD_MAX_BYTES - 1, None))
            .is_none()
    );
    assert!(r.intercept(&key(), message(1, None)).is_none());
    assert_eq!(held(&r), 2, "exactly at the bound");
    let seen = Arc::new(Mutex::new(Vec::new()));
    assert!(r.intercept(&key(), message(1, Some(&seen))).is_none());
    assert_eq!(*seen.lock(), vec![ErrorKind::Unavailable]);
    assert_eq!(held(&r), 2);
}

#[test]
fn an_unsealed_actor_gets_its_messages_back_and_a_passed_follow_window_ends() {
    let r = Relocations::default();
    assert!(r.intercept(&key(), message(1, None)).is_some());
    assert!(!r.covers(&key()));
    assert!(r.seal(&key()));
    let (tx, mut rx) = mpsc::unbounded_channel();
    assert!(r.intercept(&key(), message(1, None)).is_none());
    r.follow(
        &key(),
        record(),
        Instant::now() + std::time::Duration::from_secs(60),
        tx,
    );
    assert!(rx.try_recv().is_ok(), "the held message is forwarded first");
    assert!(r.intercept(&key(), message(1, None)).is_none());
    assert!(rx.try_recv().is_ok(), "a later one follows it");
    r.unfollow(&key());
    assert!(r.intercept(&key(), message(1, None)).is_some());
    assert!(!r.covers(&key()));
}

#[test]
fn a_follow_gives_way_to_a_move_back_only_once_it_has_nothing_left_to_forward() {
    let r = Relocations::default();
    assert!(r.seal(&key()));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let pending = r.follow(
        &key(),
        record(),
        Instant::now() + std::time::Duration::from_secs(60),
        tx,
    );
    assert!(r.intercept(&key(), message(1, None)).is_none());
    assert!(rx.try_recv().is_ok(), "followed");
    assert!(
        !r.queue(&key()),
        "a message still to forward: the move back is refused"
    );
    // The forwarder handed it to the connection to the owner.
    pending.fetch_sub(1, Ordering::SeqCst);
    assert!(
        r.queue(&key()),
        "nothing left to forward: the follow gives way"
    );
    assert!(
        r.intercept(&key(), message(1, None)).is_none(),
        "queued here"
    );
    assert!(rx.try_recv().is_err(), "not followed any more");
    assert!(!r.queue(&key()), "a queue refuses a second move");
}
