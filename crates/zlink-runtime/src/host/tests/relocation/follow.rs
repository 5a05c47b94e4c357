//! Message Follow rules (spec 21 §7.3, §12 "Location Cache And Completion Results"; 28 §7,
//! §13): a chain of previous owners, the 8-hop bound, the generation checks and the end of
//! the follow window.

use super::*;
use crate::messaging::{Metadata, OutboundMessage, RouteKind};
use crate::objects::host::ObjectKey;
use crate::relocation::MovesOf;
use crate::relocation::{Chain, Hop};

on_every_store!(
    a_stale_caller_is_followed_through_two_previous_owners_and_answered_once,
    a_message_forwarded_eight_times_is_delivered_and_a_ninth_forward_is_refused,
    a_followed_message_whose_generation_does_not_increase_is_refused,
    a_followed_message_for_a_previous_incarnation_is_refused,
    the_new_owner_refuses_a_followed_message_for_another_incarnation,
    past_the_follow_window_a_stale_caller_gets_unavailable_and_nothing_is_resent,
);

/// Three counter Object Servers and one client node over the harness's store.
struct Mesh3 {
    servers: Vec<(ZLinkHost, MeshNode)>,
    client: (ZLinkHost, MeshNode),
}

async fn mesh3(h: &Harness, options: zlink_location::LocationOptions) -> Mesh3 {
    let seen = Arc::new(Seen::default());
    let mut servers = Vec::new();
    for _ in 0..3 {
        servers.push(root(h, ObjectRole::Server, Policy::Preserve, &seen, &options).await);
    }
    let client = root(h, ObjectRole::Client, Policy::Preserve, &seen, &options).await;
    wait_connected(servers.iter().chain([&client])).await;
    Mesh3 { servers, client }
}

impl Mesh3 {
    /// The server whose node is `rid`.
    fn server(&self, rid: &zlink_codec::RoutingId) -> &ZLinkHost {
        let (host, _) = self
            .servers
            .iter()
            .find(|(_, n)| n.routing_id() == rid)
            .expect("a server");
        host
    }

    /// The servers other than the one whose node is `rid`.
    fn others(&self, rid: &zlink_codec::RoutingId) -> Vec<&ZLinkHost> {
        self.servers
            .iter()
            .filter(|(_, n)| n.routing_id() != rid)
            .map(|(h, _)| h)
            .collect()
    }

    async fn shutdown(self) {
        self.client.0.shutdown().await;
        for (h, _) in self.servers {
            h.shutdown().await;
        }
    }
}

fn key_of(id: &str) -> ObjectKey {
    (
        AuthorityKind::Actor,
        zlink_codec::ObjectId::new(id).expect("id"),
    )
}

fn objects_of(host: &ZLinkHost) -> Arc<crate::objects::host::ObjectHost> {
    Arc::clone(&host.actors().expect("manager").client.objects)
}

/// Moves `r` from `from` to the node `to`.
async fn move_to(from: &ZLinkHost, r: &ActorRef, to: &ZLinkHost) -> ActorRef {
    let client = from.actors().expect("manager").client;
    crate::relocation::relocate_actor(&client, r, Some(&rid_of(to)))
        .await
        .expect("moved")
}

/// Sends `step` one-way for the Actor `id` from the client node to `to` as a message another
/// previous owner followed there with `chain` (the follow command, as that owner sends it).
fn inject(from: &ZLinkHost, to: &ZLinkHost, id: &str, chain: &Chain, step: &StepSend) {
    let inner = &from.actors().expect("manager").client.node.inner;
    let msg = OutboundMessage::encode(inner.codecs(), step, &Metadata::empty()).expect("encode");
    let op = inner.transport.ids().next_operation_id().expect("op");
    send_followed(inner, to, id, chain, &msg, (op, None));
}

/// [`inject`] for a `Step` request sent by the client node itself: the error kind the client
/// hears as the request's original source.
async fn inject_request(
    from: &ZLinkHost,
    to: &ZLinkHost,
    id: &str,
    chain: &Chain,
    step: &Step,
) -> ErrorKind {
    let inner = &from.actors().expect("manager").client.node.inner;
    let msg = OutboundMessage::encode(inner.codecs(), step, &Metadata::empty()).expect("encode");
    let route = inner.transport.ids().next_reply_route_id().expect("route");
    let peer = inner.route_to(&rid_of(to)).expect("peer");
    let op = inner.transport.ids().next_operation_id().expect("op");
    let (_guard, rx) = inner.pending.register(route, op, peer.info());
    send_followed(inner, to, id, chain, &msg, (op, Some(route)));
    let reply = tokio::time::timeout(WAIT, rx)
        .await
        .expect("answered")
        .expect("pending")
        .0
        .expect("a reply");
    assert_eq!(reply.status(), zlink_transport::ReplyStatus::Error);
    let e = crate::messaging::ErrorReply::decode(&reply.into_payload())
        .expect("error reply")
        .into_error();
    e.kind()
}

/// Sends `msg` for the Actor `id` to `to` in a follow command carrying `chain` (a request
/// when a reply route is given) under the OperationId `op`.
fn send_followed(
    inner: &crate::mesh::node::NodeInner,
    to: &ZLinkHost,
    id: &str,
    chain: &Chain,
    msg: &OutboundMessage,
    (op, route): (
        zlink_transport::OperationId,
        Option<zlink_transport::ReplyRouteId>,
    ),
) {
    let mut payload = vec![u8::try_from(id.len()).expect("short id")];
    payload.extend_from_slice(id.as_bytes());
    payload.extend_from_slice(&msg.payload);
    let (rid, generation) = (&inner.rid, inner.generation);
    let env = match route {
        Some(r) => zlink_transport::Envelope::request(op, r, rid, generation, payload.into()),
        None => zlink_transport::Envelope::one_way(op, rid, generation, payload.into()),
    };
    let env = env
        .with_address(crate::mesh::node::Address::Actor.wire())
        .and_then(|e| e.with_packet_name(msg.packet.as_str()))
        .and_then(|e| e.with_content_type(&msg.content_type))
        .and_then(|e| e.with_metadata(msg.metadata.clone()))
        .expect("envelope");
    let body = crate::relocation::encode_follow(chain, &env).expect("body");
    let peer = inner.route_to(&rid_of(to)).expect("peer");
    inner
        .send_control(&peer, crate::relocation::FOLLOW, body)
        .expect("sent");
}

/// A chain that reached `at` (owning at `generation`) after `forwards` forwards through
/// other nodes, for the incarnation `object_generation`.
fn chain_at(at: &ZLinkHost, generation: u64, forwards: usize, object_generation: u64) -> Chain {
    let mut path: Vec<Hop> = (0..forwards)
        .map(|i| Hop {
            node: zlink_codec::RoutingId::from_hex(&format!("{:02x}", 0xa0 + i).repeat(16))
                .expect("rid"),
            owner_generation: 1,
        })
        .collect();
    path.push(Hop {
        node: rid_of(at),
        owner_generation: generation,
    });
    Chain {
        object_generation,
        path,
    }
}

/// Reads (total, applied steps, out-of-order) until `applied` reaches `want` (or the wait
/// ends). An `Incr` adds to the total only.
async fn totals_reaching(
    caller: &crate::objects::ActorManager,
    id: &str,
    want: u64,
) -> (u64, u64, u64) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let t = caller.request(id, &Totals).await.expect("totals");
        if t.1 >= want || tokio::time::Instant::now() > deadline {
            return t;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

async fn a_stale_caller_is_followed_through_two_previous_owners_and_answered_once(h: &Harness) {
    let m = mesh3(h, fast_options()).await;
    let caller = m.client.0.actors().expect("manager");
    let r = caller
        .get_or_create("counter", "h2")
        .await
        .expect("created");
    assert_eq!(caller.request("h2", &Incr).await.expect("incr"), 1);
    let key = key_of("h2");
    assert_eq!(
        caller.client.objects.routes.get(&key).as_deref(),
        Some(&r.node)
    );
    let a = m.server(&r.node);
    let others = m.others(&r.node);
    let (b, c) = (others[0], others[1]);
    let at_b = move_to(a, &r, b).await;
    let at_c = move_to(b, &at_b, c).await;
    assert_eq!(at_c.node, rid_of(c));
    assert_eq!(at_c.generation, r.generation, "the same incarnation");
    // Each previous owner keeps the record of its own move: the next owner and the
    // AuthorityOwnerGeneration its NewOwner issued, growing from hop to hop.
    let from_a = objects_of(a)
        .relocations()
        .follow_record(&key)
        .expect("a follows");
    let from_b = objects_of(b)
        .relocations()
        .follow_record(&key)
        .expect("b follows");
    assert_eq!((&from_a.to, &from_b.to), (&rid_of(b), &rid_of(c)));
    assert_eq!(from_a.object_generation, r.generation);
    assert_eq!(from_b.object_generation, r.generation);
    assert!(from_a.owner_generation > from_a.previous_owner_generation);
    assert_eq!(from_b.previous_owner_generation, from_a.owner_generation);
    assert!(from_b.owner_generation > from_b.previous_owner_generation);
    assert_eq!(record(c, "h2").await.1, from_b.owner_generation);
    // The caller still names A: A follows it to B, B on to C, which answers the caller once.
    assert_eq!(
        caller.client.objects.routes.get(&key).as_deref(),
        Some(&r.node)
    );
    assert_eq!(
        caller.request("h2", &Incr).await.expect("followed twice"),
        2
    );
    caller.client.objects.routes.forget(&key);
    assert_eq!(
        caller.request("h2", &Incr).await.expect("direct"),
        3,
        "the followed message ran exactly once"
    );
    assert_eq!(objects_of(a).relocations().follow_refusals(), 0);
    assert_eq!(objects_of(b).relocations().follow_refusals(), 0);
    m.shutdown().await;
}

async fn a_message_forwarded_eight_times_is_delivered_and_a_ninth_forward_is_refused(h: &Harness) {
    let m = mesh_of(h, Policy::Preserve).await;
    let (caller, r) = m.counter_at_one("h8").await;
    let (a, b) = m.owner_and_other(&r);
    move_to(a, &r, b).await;
    let key = key_of("h8");
    let follow = objects_of(a)
        .relocations()
        .follow_record(&key)
        .expect("a follows");
    let own = follow.previous_owner_generation;
    // Seven forwards before A: A's forward to B is the 8th — delivered.
    let at_bound = chain_at(a, own, 7, r.generation);
    inject(
        &m.client.0,
        a,
        "h8",
        &at_bound,
        &StepSend { stream: 1, seq: 1 },
    );
    let t = totals_reaching(&caller, "h8", 1).await;
    assert_eq!(t, (2, 1, 0), "the step forwarded an 8th time ran");
    // Eight forwards before A: a 9th is refused (a one-way: dropped and counted).
    let past = chain_at(a, own, 8, r.generation);
    inject(&m.client.0, a, "h8", &past, &StepSend { stream: 1, seq: 2 });
    let host_objects = objects_of(a);
    let relocations = host_objects.relocations();
    wait_until("the 9th forward is refused", || {
        relocations.follow_refusals() == 1
    })
    .await;
    // A request past the bound: its original source hears Unavailable.
    let step = Step { stream: 1, seq: 2 };
    let kind = inject_request(&m.client.0, a, "h8", &past, &step).await;
    assert_eq!(kind, ErrorKind::Unavailable);
    assert_eq!(relocations.follow_refusals(), 2);
    assert_eq!(
        caller.request("h8", &Totals).await.expect("totals"),
        (2, 1, 0),
        "nothing changed"
    );
    m.shutdown().await;
}

async fn a_followed_message_whose_generation_does_not_increase_is_refused(h: &Harness) {
    let m = mesh_of(h, Policy::Preserve).await;
    let (caller, r) = m.counter_at_one("g1").await;
    let (a, b) = m.owner_and_other(&r);
    move_to(a, &r, b).await;
    let follow = objects_of(a)
        .relocations()
        .follow_record(&key_of("g1"))
        .expect("a follows");
    // The message already carries B's generation: forwarding to B would not increase it.
    let stale = chain_at(a, follow.owner_generation, 1, r.generation);
    inject(
        &m.client.0,
        a,
        "g1",
        &stale,
        &StepSend { stream: 1, seq: 1 },
    );
    let host_objects = objects_of(a);
    let relocations = host_objects.relocations();
    wait_until("the forward is refused", || {
        relocations.follow_refusals() == 1
    })
    .await;
    assert_eq!(
        caller.request("g1", &Totals).await.expect("totals"),
        (1, 0, 0),
        "nothing ran"
    );
    let step = Step { stream: 1, seq: 1 };
    let kind = inject_request(&m.client.0, a, "g1", &stale, &step).await;
    assert_eq!(kind, ErrorKind::InvalidOperation, "answered to its source");
    // The same message with a lower generation carried goes through.
    let fine = chain_at(a, follow.previous_owner_generation, 1, r.generation);
    inject(&m.client.0, a, "g1", &fine, &StepSend { stream: 1, seq: 1 });
    assert_eq!(totals_reaching(&caller, "g1", 1).await, (2, 1, 0));
    m.shutdown().await;
}

async fn a_followed_message_for_a_previous_incarnation_is_refused(h: &Harness) {
    let m = mesh_of(h, Policy::Preserve).await;
    let (caller, r) = m.counter_at_one("g2").await;
    let (a, b) = m.owner_and_other(&r);
    move_to(a, &r, b).await;
    let follow = objects_of(a)
        .relocations()
        .follow_record(&key_of("g2"))
        .expect("a follows");
    let previous = chain_at(a, follow.previous_owner_generation, 1, r.generation - 1);
    inject(
        &m.client.0,
        a,
        "g2",
        &previous,
        &StepSend { stream: 1, seq: 1 },
    );
    let host_objects = objects_of(a);
    let relocations = host_objects.relocations();
    wait_until("the forward is refused", || {
        relocations.follow_refusals() == 1
    })
    .await;
    assert_eq!(
        caller.request("g2", &Totals).await.expect("totals"),
        (1, 0, 0),
        "nothing ran"
    );
    let step = Step { stream: 1, seq: 1 };
    let kind = inject_request(&m.client.0, a, "g2", &previous, &step).await;
    assert_eq!(kind, ErrorKind::InvalidOperation, "answered to its source");
    m.shutdown().await;
}

async fn past_the_follow_window_a_stale_caller_gets_unavailable_and_nothing_is_resent(h: &Harness) {
    // No route cache, a short window: the stale caller addresses the old owner itself.
    let options = fast_options()
        .route_cache_max_age(std::time::Duration::ZERO)
        .message_follow_duration(std::time::Duration::from_millis(300));
    let m = mesh_with(h, Policy::Preserve, options).await;
    let (caller, r) = m.counter_at_one("w1").await;
    let (a, b) = m.owner_and_other(&r);
    move_to(a, &r, b).await;
    let key = key_of("w1");
    let a_objects = objects_of(a);
    wait_until("the follow window ends", || {
        a_objects.relocations().follow_record(&key).is_none()
    })
    .await;
    let msg = OutboundMessage::encode(caller.client.node.inner.codecs(), &Incr, &Metadata::empty())
        .expect("encode");
    let call = crate::objects::registration::ObjectCall {
        content_type: bytes::Bytes::from(msg.content_type.into_bytes()),
        payload: msg.payload,
        typed_reply: false,
        context: crate::objects::registration::MessageContext {
            id: "w1".into(),
            packet: msg.packet,
            metadata: Metadata::empty(),
            relocation: Default::default(),
            node: Default::default(),
            timers: Default::default(),
        },
        job: crate::mesh::JobPermit::none(),
    };
    let err = caller
        .client
        .forward_held(&r.node, &key, RouteKind::Request, call)
        .await
        .expect_err("stale");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert_eq!(
        caller.request("w1", &Incr).await.expect("re-read"),
        2,
        "the stale message was neither run nor resent"
    );
    m.shutdown().await;
}

async fn the_new_owner_refuses_a_followed_message_for_another_incarnation(h: &Harness) {
    let m = mesh_of(h, Policy::Preserve).await;
    let (caller, r) = m.counter_at_one("g3").await;
    let (a, b) = m.owner_and_other(&r);
    let moved = move_to(a, &r, b).await;
    let (_, owner_generation, _) = super::record(b, "g3").await;
    // A message a previous owner followed to the new owner, for an earlier incarnation.
    let stale = chain_at(b, owner_generation, 1, moved.generation - 1);
    inject(
        &m.client.0,
        b,
        "g3",
        &stale,
        &StepSend { stream: 1, seq: 1 },
    );
    let host_objects = objects_of(b);
    let relocations = host_objects.relocations();
    wait_until("the message is refused", || {
        relocations.follow_refusals() == 1
    })
    .await;
    let step = Step { stream: 1, seq: 1 };
    let kind = inject_request(&m.client.0, b, "g3", &stale, &step).await;
    assert_eq!(kind, ErrorKind::InvalidOperation, "answered to its source");
    assert_eq!(
        caller.request("g3", &Totals).await.expect("totals"),
        (1, 0, 0),
        "nothing ran on the current incarnation"
    );
    // The same message for the current incarnation runs.
    let current = chain_at(b, owner_generation, 1, moved.generation);
    inject(
        &m.client.0,
        b,
        "g3",
        &current,
        &StepSend { stream: 1, seq: 1 },
    );
    assert_eq!(totals_reaching(&caller, "g3", 1).await, (2, 1, 0));
    m.shutdown().await;
}
