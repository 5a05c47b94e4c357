//! Message Follow rules (spec 21 §7.3, §12 "Location Cache And Completion Results"; 28 §7,
//! §13): the follow record a previous owner keeps when its move completed, the chain a
//! followed message carries from hop to hop, the pure check of the next hop, and the
//! [`wire::FOLLOW`] command a node receives a followed message by.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use zlink_codec::RoutingId;
use zlink_codec::keys::AuthorityKind;
use zlink_transport::Envelope;

use super::{Held, Relocations, wire};
use crate::mesh::node::{NodeInner, SPOT_ADDRESS};
use crate::messaging::{ErrorKind, RouteKind, UnavailableReason, ZLinkError};
use crate::objects::client::ObjectClient;
use crate::objects::host::{ObjectHost, ObjectKey};
use crate::objects::inbound;
use crate::objects::messages::owner_unreachable;
use crate::relocation::MovesOf;

/// The most times one message is forwarded from a previous owner to a newer one (21 §7.3).
pub(crate) const MAX_FOLLOW_HOPS: usize = 8;

/// What a previous owner keeps when its move completed, and all it follows by: it never
/// re-reads the store for a followed message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FollowRecord {
    /// The new owner's node.
    pub(crate) to: RoutingId,
    /// This node's AuthorityOwnerGeneration for the Actor (the one the move replaced).
    pub(crate) previous_owner_generation: u64,
    /// The AuthorityOwnerGeneration the new owner's NewOwner issued.
    pub(crate) owner_generation: u64,
    /// The ObjectGeneration of the incarnation that moved.
    pub(crate) object_generation: u64,
}

/// One owner on a followed message's path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Hop {
    pub(crate) node: RoutingId,
    pub(crate) owner_generation: u64,
}

/// What a followed message carries besides its envelope: the incarnation it is for and its
/// path — the previous owner it first reached (with that owner's AuthorityOwnerGeneration),
/// then each owner it was forwarded to (with the generation the forwarding node's record
/// named). Its forwards so far are the path's length less one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FollowChain {
    pub(crate) object_generation: u64,
    pub(crate) path: Vec<Hop>,
}

impl FollowChain {
    /// How many times the message was forwarded.
    pub(crate) fn forwards(&self) -> usize {
        self.path.len().saturating_sub(1)
    }
}

/// A message the gate took, with the chain it arrived with (`None`: it reached this node
/// directly, or was sent on it).
pub(crate) type Followed = (Held, Option<FollowChain>);

/// Where a source's follow window hands each [`Followed`] message to its forwarding task.
/// Boxed: a channel allocates its first block of slots when it is made, and a `SpotWide`
/// aggregate makes one per participant (10,000 members: 10,000 blocks of 32 slots), almost
/// all of which never carry a message; a slot of a box is a pointer wide.
pub(crate) type FollowTx = tokio::sync::mpsc::UnboundedSender<Box<Followed>>;

/// The receiving end of a [`FollowTx`].
pub(crate) type FollowRx = tokio::sync::mpsc::UnboundedReceiver<Box<Followed>>;

/// Why a previous owner does not forward a message (spec 21 §7.3).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum FollowRefused {
    /// The forward would be the `forwards`-th, past [`MAX_FOLLOW_HOPS`].
    #[error("message follow: forward {forwards} is past the {MAX_FOLLOW_HOPS}-hop bound")]
    HopLimit { forwards: usize },
    /// The next owner is this node, or a node the message already passed whose ownership did
    /// not advance since.
    #[error("message follow: a cycle (node {node} again)")]
    Cycle { node: String },
    /// The next owner's AuthorityOwnerGeneration is not greater than the last one the message
    /// carried.
    #[error("message follow: AuthorityOwnerGeneration {next} is not greater than {last}")]
    GenerationNotIncreasing { last: u64, next: u64 },
    /// The message is for another incarnation than the one that moved (a previous one).
    #[error("message follow: ObjectGeneration {message} is not the followed {followed}")]
    StaleObjectGeneration { message: u64, followed: u64 },
}

impl FollowRefused {
    /// The error kind the original source hears: a cycle or the hop bound is `Unavailable`, a
    /// generation mismatch `InvalidOperation`.
    pub(crate) fn kind(&self) -> ErrorKind {
        match self {
            Self::HopLimit { .. } | Self::Cycle { .. } => ErrorKind::Unavailable,
            Self::GenerationNotIncreasing { .. } | Self::StaleObjectGeneration { .. } => {
                ErrorKind::InvalidOperation
            }
        }
    }
}

impl From<FollowRefused> for ZLinkError {
    fn from(r: FollowRefused) -> Self {
        ZLinkError::RelocationRefused {
            kind: r.kind(),
            what: "Message Follow",
            source: Some(crate::messaging::SharedError::new(r)),
        }
    }
}

/// The chain of a message this node (`me`) forwards by `record`, one hop longer — or why it is
/// not forwarded. A message without a chain starts one at this node. Checked in order: the
/// incarnation (another ObjectGeneration: `InvalidOperation`), the hop bound (the 9th forward:
/// `Unavailable`), a cycle (the next owner is this node, or one already on the path while the
/// generation does not advance: `Unavailable`), then the generation (not greater than the last
/// one carried: `InvalidOperation`).
pub(crate) fn next_hop(
    chain: Option<&FollowChain>,
    record: &FollowRecord,
    me: &RoutingId,
) -> Result<FollowChain, FollowRefused> {
    let mut chain = match chain {
        Some(c) => c.clone(),
        None => FollowChain {
            object_generation: record.object_generation,
            path: vec![Hop {
                node: me.clone(),
                owner_generation: record.previous_owner_generation,
            }],
        },
    };
    if chain.object_generation != record.object_generation {
        return Err(FollowRefused::StaleObjectGeneration {
            message: chain.object_generation,
            followed: record.object_generation,
        });
    }
    let forwards = chain.forwards() + 1;
    if forwards > MAX_FOLLOW_HOPS {
        return Err(FollowRefused::HopLimit { forwards });
    }
    let cycle = || FollowRefused::Cycle {
        node: record.to.to_hex(),
    };
    if &record.to == me {
        return Err(cycle());
    }
    let last = chain
        .path
        .last()
        .map_or(record.previous_owner_generation, |h| h.owner_generation);
    if record.owner_generation <= last {
        if chain.path.iter().any(|h| h.node == record.to) {
            return Err(cycle());
        }
        return Err(FollowRefused::GenerationNotIncreasing {
            last,
            next: record.owner_generation,
        });
    }
    chain.path.push(Hop {
        node: record.to.clone(),
        owner_generation: record.owner_generation,
    });
    Ok(chain)
}

impl Relocations {
    /// A message not forwarded: a request hears `refused`, a one-way is dropped; both counted.
    pub(crate) fn refuse_follow(&self, m: Held, refused: FollowRefused) {
        self.follow_refused.fetch_add(1, Ordering::Relaxed);
        if let Some(done) = m.reply {
            done.complete(Err(refused.into()));
        }
    }

    /// Tests: how many followed messages this node refused (hop bound, cycle, generation).
    #[cfg(test)]
    pub(crate) fn follow_refusals(&self) -> u64 {
        self.follow_refused.load(Ordering::Relaxed)
    }
}

/// The node this one got a message it now forwards with `chain` (its path ending at this node
/// and the next owner) from: the owner before this one on the path, or — the message reached
/// this node directly — its original source.
fn previous_hop<'a>(chain: &'a FollowChain, env: &'a Envelope) -> &'a RoutingId {
    match chain.path.len().checked_sub(3) {
        Some(i) => &chain.path[i].node,
        None => env.source_rid(),
    }
}

/// Sends one followed message ([`wire::FOLLOW`]) to `to` on the command plane, waiting for
/// room on the lane (a follow retains without a cap, spec 21 §7.3). A request's route back is
/// kept first (`mesh::node::forward`), to the connection of the node this one got it from
/// ([`previous_hop`]): the new owner answers the original source directly when it is a peer
/// of its own, and otherwise back here, and this node relays that reply to the caller — each
/// hop of a longer chain the same. A forward that fails forgets the route (the request is
/// answered here with the failure); with no connection to the caller left, none is kept (its
/// request ended there, and a reply is discarded and counted).
pub(super) async fn send_followed(
    client: &ObjectClient,
    to: &RoutingId,
    chain: &FollowChain,
    env: &Envelope,
) -> Result<(), ZLinkError> {
    let inner = &client.node.inner;
    let peer = inner.route_to(to).map_err(owner_unreachable)?;
    let body = wire::encode_follow(chain, env)?;
    let lost = |e: zlink_transport::TransportError| {
        tracing::debug!(error = %e, "followed message not queued");
        ZLinkError::Unavailable {
            target: crate::messaging::Target::Node(to.clone()),
            reason: UnavailableReason::ConnectionLost,
        }
    };
    let op = inner.transport.ids().next_operation_id().map_err(lost)?;
    let frame = Envelope::one_way(op, &inner.rid, inner.generation, body)
        .with_packet_name(wire::FOLLOW)
        .map_err(lost)?;
    let kept = inner.keep_route_back(env, previous_hop(chain, env));
    let sent = peer.send_control(&frame).await.map_err(lost);
    if let (Err(_), Some(kept)) = (&sent, kept) {
        inner.pending.forwarded.forget(kept);
    }
    sent
}

/// The [`wire::FOLLOW`] command: a message a previous owner followed here. A follow window
/// here (this node moved the Actor on) forwards it again with its chain; a hold or queue takes
/// it like any message from another node; otherwise it runs on the activation here and is
/// answered to its original source (no activation: answered by the record).
pub(crate) async fn followed(
    host: Arc<ObjectHost>,
    node: Arc<NodeInner>,
    env: Envelope,
) -> Result<Option<Bytes>, ZLinkError> {
    let (chain, message) = wire::decode_follow(env.payload())?;
    let from = env.source_rid().clone();
    let kind = if message.address() == SPOT_ADDRESS {
        AuthorityKind::Spot
    } else {
        AuthorityKind::Actor
    };
    let (id, call, cost) = match inbound::prepare(&message) {
        Ok(p) => p,
        Err(e) => {
            crate::mesh::node::answer_request(&node, &from, &message, Err(e));
            return Ok(None);
        }
    };
    let key: ObjectKey = (kind, id);
    let reply = message
        .reply_route()
        .is_some()
        .then(|| inbound::answering(Arc::clone(&node), from, message.clone(), Box::new(())));
    let held = Held {
        route: if reply.is_some() {
            RouteKind::Request
        } else {
            RouteKind::Send
        },
        call,
        cost,
        reply,
        origin: Some(message),
    };
    let generation = chain.object_generation;
    let Some(held) = host.relocations().intercept_followed(&key, held, chain) else {
        return Ok(None);
    };
    match host.live_incarnation(&key) {
        Some((_, live_generation)) if live_generation != generation => {
            // Followed for a previous incarnation: never run on this one (spec 21 §7.3).
            host.relocations().refuse_follow(
                held,
                FollowRefused::StaleObjectGeneration {
                    message: generation,
                    followed: live_generation,
                },
            );
        }
        Some((live, _)) => {
            // A refused request is answered through its completion.
            if let Err(e) = live.submit(held.route, held.call, held.cost, held.reply) {
                tracing::debug!(error = %e, "followed message refused by the activation");
            }
        }
        None => {
            let e = ObjectHost::not_live(Arc::clone(&host.location), key, Some(host)).await;
            match held.reply {
                Some(done) => done.complete(Err(e)),
                None => tracing::debug!(error = %e, "followed one-way found no activation"),
            }
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rid(n: u8) -> RoutingId {
        RoutingId::from_hex(&format!("{n:02x}").repeat(16)).expect("rid")
    }

    /// This node (1) owned the Actor at generation 5; node 2 owns it now at generation 7.
    fn record() -> FollowRecord {
        FollowRecord {
            to: rid(2),
            previous_owner_generation: 5,
            owner_generation: 7,
            object_generation: 3,
        }
    }

    /// A chain that reached node 1 after `forwards` forwards, its generations 1, 2, … and
    /// the last (node 1's) `last`.
    fn chain(forwards: usize, last: u64) -> FollowChain {
        let mut path: Vec<Hop> = (0..forwards)
            .map(|i| Hop {
                node: rid(100 + i as u8),
                owner_generation: i as u64 + 1,
            })
            .collect();
        path.push(Hop {
            node: rid(1),
            owner_generation: last,
        });
        FollowChain {
            object_generation: 3,
            path,
        }
    }

    #[test]
    fn a_message_reaching_a_previous_owner_directly_starts_its_chain_there() {
        let next = next_hop(None, &record(), &rid(1)).expect("forwarded");
        assert_eq!(next.object_generation, 3);
        assert_eq!(
            next.path,
            vec![
                Hop {
                    node: rid(1),
                    owner_generation: 5
                },
                Hop {
                    node: rid(2),
                    owner_generation: 7
                }
            ]
        );
        assert_eq!(next.forwards(), 1);
    }

    #[test]
    fn the_eighth_forward_goes_and_the_ninth_is_refused_unavailable() {
        let at = next_hop(Some(&chain(7, 5)), &record(), &rid(1)).expect("the 8th");
        assert_eq!(at.forwards(), 8);
        let past = chain(8, 5);
        let refused = next_hop(Some(&past), &record(), &rid(1)).expect_err("the 9th");
        assert_eq!(refused, FollowRefused::HopLimit { forwards: 9 });
        assert_eq!(refused.kind(), ErrorKind::Unavailable);
        assert_eq!(ZLinkError::from(refused).kind(), ErrorKind::Unavailable);
        assert_eq!(past, chain(8, 5), "the chain is unchanged");
    }

    #[test]
    fn a_generation_that_does_not_increase_is_refused_invalid_operation() {
        for last in [7, 8] {
            let refused = next_hop(Some(&chain(1, last)), &record(), &rid(1)).expect_err("stale");
            assert_eq!(
                refused,
                FollowRefused::GenerationNotIncreasing { last, next: 7 }
            );
            assert_eq!(refused.kind(), ErrorKind::InvalidOperation);
        }
        assert!(next_hop(Some(&chain(1, 6)), &record(), &rid(1)).is_ok());
        // A record whose new owner is not newer than this node's own ownership.
        let mut broken = record();
        broken.owner_generation = 5;
        let refused = next_hop(None, &broken, &rid(1)).expect_err("not newer");
        assert_eq!(refused.kind(), ErrorKind::InvalidOperation);
    }

    #[test]
    fn a_forward_back_to_a_node_already_passed_or_to_itself_is_a_cycle() {
        // Node 2 already on the path at generation 7; the record points there again.
        let mut c = chain(0, 5);
        c.path.insert(
            0,
            Hop {
                node: rid(2),
                owner_generation: 7,
            },
        );
        c.path.last_mut().expect("last").owner_generation = 8;
        let refused = next_hop(Some(&c), &record(), &rid(1)).expect_err("cycle");
        assert!(matches!(refused, FollowRefused::Cycle { .. }), "{refused}");
        assert_eq!(refused.kind(), ErrorKind::Unavailable);
        let mut to_me = record();
        to_me.to = rid(1);
        let refused = next_hop(None, &to_me, &rid(1)).expect_err("to itself");
        assert!(matches!(refused, FollowRefused::Cycle { .. }));
        // Back to a node passed earlier under a newer ownership is progress, not a cycle.
        let mut back = chain(0, 5);
        back.path.insert(
            0,
            Hop {
                node: rid(2),
                owner_generation: 4,
            },
        );
        assert!(next_hop(Some(&back), &record(), &rid(1)).is_ok());
    }

    /// A held message; a request reports its outcome's error kind into `seen`.
    fn held(seen: Option<&Arc<parking_lot::Mutex<Vec<ErrorKind>>>>) -> Held {
        crate::relocation::hold::tests::message(1, seen)
    }

    #[test]
    fn a_refused_request_hears_the_typed_error_and_a_refused_one_way_is_counted() {
        let r = Relocations::default();
        let seen = Arc::new(parking_lot::Mutex::new(Vec::new()));
        r.refuse_follow(held(Some(&seen)), FollowRefused::HopLimit { forwards: 9 });
        r.refuse_follow(
            held(Some(&seen)),
            FollowRefused::GenerationNotIncreasing { last: 7, next: 7 },
        );
        assert_eq!(
            *seen.lock(),
            vec![ErrorKind::Unavailable, ErrorKind::InvalidOperation]
        );
        r.refuse_follow(held(None), FollowRefused::HopLimit { forwards: 9 });
        assert_eq!(r.follow_refusals(), 3);
    }

    #[test]
    fn a_message_for_a_previous_incarnation_is_refused_not_forwarded() {
        let mut c = chain(1, 5);
        c.object_generation = 2;
        let refused = next_hop(Some(&c), &record(), &rid(1)).expect_err("previous");
        assert_eq!(
            refused,
            FollowRefused::StaleObjectGeneration {
                message: 2,
                followed: 3
            }
        );
        assert_eq!(refused.kind(), ErrorKind::InvalidOperation);
    }
}
