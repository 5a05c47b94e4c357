//! Replies to followed requests reach their caller (spec 21 §7.3; issue 36 item 2): a caller
//! that is not connected to the new owner — its discovery has not dialed it yet — hears the
//! reply (or the error reply) back through every previous owner that forwarded the request,
//! exactly once, and the forwarding nodes keep no route once it is answered.

use std::time::Duration;

use super::*;
use crate::host::{RelocateOptions, RelocationOutcome};
use crate::mesh::node::CallOptions;
use crate::messaging::ZLinkError;

/// How long a followed request may take here: its reply comes back in milliseconds; without
/// the relay it never comes and the request ends at this reply timeout.
const REPLY_WITHIN: Duration = Duration::from_secs(1);

/// Counter Object Servers that discover quickly and one client node whose discovery polls
/// every `poll`, all Ready peers of each other at the start.
struct Polled {
    servers: Vec<Root>,
    client: Root,
    seen: Arc<Seen>,
}

impl Polled {
    async fn start(h: &Harness, servers: usize, poll: Duration) -> Self {
        let seen = Arc::new(Seen::default());
        let mut roots = Vec::new();
        for _ in 0..servers {
            roots.push(
                root(
                    h,
                    ObjectRole::Server,
                    Policy::Preserve,
                    &seen,
                    &fast_options(),
                )
                .await,
            );
        }
        let client_options = fast_options().polling_interval(poll);
        let client = root(
            h,
            ObjectRole::Client,
            Policy::Preserve,
            &seen,
            &client_options,
        )
        .await;
        wait_connected(roots.iter().chain([&client])).await;
        Self {
            servers: roots,
            client,
            seen,
        }
    }

    fn caller(&self) -> crate::objects::ActorManager {
        self.client.0.actors().expect("manager")
    }

    /// The server whose node is `rid`.
    fn server(&self, rid: &zlink_codec::RoutingId) -> &Root {
        self.servers
            .iter()
            .find(|(_, n)| n.routing_id() == rid)
            .expect("a server")
    }

    /// The servers other than the one whose node is `rid`, in start order.
    fn others(&self, rid: &zlink_codec::RoutingId) -> Vec<&Root> {
        self.servers
            .iter()
            .filter(|(_, n)| n.routing_id() != rid)
            .collect()
    }

    /// The counter `id` created through the client and incremented once (to 1); the client's
    /// route cache names its owner.
    async fn counter_at_one(&self, id: &str) -> ActorRef {
        let caller = self.caller();
        let r = caller.get_or_create("counter", id).await.expect("created");
        assert_eq!(caller.request(id, &Incr).await.expect("incr"), 1);
        assert_eq!(self.cached_owner(id), Some(r.node.clone()));
        r
    }

    /// The owner the client's route cache names for the Actor `id`.
    fn cached_owner(&self, id: &str) -> Option<zlink_codec::RoutingId> {
        let key = (
            zlink_codec::keys::AuthorityKind::Actor,
            zlink_codec::ObjectId::new(id).expect("id"),
        );
        let objects = &self.caller().client.objects;
        objects.routes.get(&key).as_deref().cloned()
    }

    async fn shutdown(self) {
        self.client.0.shutdown().await;
        for (h, _) in self.servers {
            h.shutdown().await;
        }
    }
}

/// Holds the nodes `x` and `y` apart: each drops its connect intent for the other and the
/// connection closes. Discovery adds an intent only for a node it has not listed before, so
/// neither dials the other again: as a caller whose discovery has not yet connected it to a
/// node that joined after its last poll.
async fn hold_apart(x: &MeshNode, y: &MeshNode) {
    x.inner.transport.remove_intent(y.endpoint());
    y.inner.transport.remove_intent(x.endpoint());
    wait_until("the two nodes are apart", || {
        let mut apart = true;
        for (from, to) in [(x, y), (y, x)] {
            if let Some(c) = from.inner.transport.peer(to.routing_id()) {
                // A dial that was in flight when the intent went: closed as well.
                c.close();
                apart = false;
            }
        }
        apart
    })
    .await;
}

/// Waits until the nodes `forwarders` keep no forwarded route (each relayed its reply), and
/// checks the caller discarded no reply: its request had exactly one terminal.
async fn routes_ended(m: &Polled, forwarders: &[&Root]) {
    wait_until("every forwarded route ended with its reply", || {
        forwarders
            .iter()
            .all(|(_, n)| n.status().forwarded_requests == 0)
    })
    .await;
    for (_, n) in forwarders {
        assert_eq!(n.status().replies_discarded, 0, "relayed, not discarded");
    }
    assert_eq!(
        m.client.1.status().replies_discarded,
        0,
        "the caller got no second terminal"
    );
}

/// Moves `r` from `from` to the node `to` (one object moved on purpose).
async fn move_to(from: &ZLinkHost, r: &ActorRef, to: &ZLinkHost) -> ActorRef {
    let client = from.actors().expect("manager").client;
    crate::relocation::relocate_actor(&client, r, Some(&rid_of(to)))
        .await
        .expect("moved")
}

/// `request` through the client with a reply timeout of [`REPLY_WITHIN`].
async fn request_within<R: Request>(
    m: &Polled,
    id: &str,
    request: &R,
) -> Result<R::Reply, ZLinkError> {
    let options = CallOptions::default().reply_timeout(REPLY_WITHIN);
    tokio::time::timeout(WAIT, m.caller().request_with(id, request, &options))
        .await
        .expect("the request ends")
}

/// A packet the counter type has no handler for: its owner answers `NotFound`.
#[derive(Debug, Serialize, Deserialize)]
struct Unhandled;
impl Message for Unhandled {
    const PACKET: &'static str = "Unhandled";
}
impl Request for Unhandled {
    type Reply = u64;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_polling_every_second_hears_its_followed_request_through_the_old_owner() {
    followed_reply_reaches_a_caller_not_connected_to_the_new_owner(Duration::from_secs(1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_polling_every_four_seconds_hears_its_followed_request_through_the_old_owner() {
    followed_reply_reaches_a_caller_not_connected_to_the_new_owner(Duration::from_secs(4)).await;
}

/// A host Relocate moves the Actor from A to B; the caller, not connected to B, still routes
/// to A and sends at once: A follows the request to B, B answers on A's connection (the only
/// way back it has) and A relays the reply to the caller.
async fn followed_reply_reaches_a_caller_not_connected_to_the_new_owner(poll: Duration) {
    let h = Harness::memory();
    let m = Polled::start(&h, 2, poll).await;
    let r = m.counter_at_one("f1").await;
    let (a, b) = (m.server(&r.node), m.others(&r.node)[0]);
    hold_apart(&m.client.1, &b.1).await;
    let result =
        a.0.relocate(RelocateOptions::planned_maintenance())
            .await
            .expect("valid options");
    assert_eq!(result.outcome, RelocationOutcome::Relocated, "{result:?}");
    assert_eq!(record(&a.0, "f1").await.0, rid_of(&b.0), "B owns it");
    assert_eq!(
        m.cached_owner("f1"),
        Some(r.node.clone()),
        "the caller still names A"
    );
    assert!(b.1.inner.transport.peer(m.client.1.routing_id()).is_none());
    let step = Step { stream: 1, seq: 1 };
    assert_eq!(
        request_within(&m, "f1", &step)
            .await
            .expect("the reply, relayed by A"),
        1
    );
    // The handler ran exactly once, on B.
    let on_b = b.0.actors().expect("manager");
    assert_eq!(
        on_b.request("f1", &Totals).await.expect("totals"),
        (2, 1, 0)
    );
    m.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_followed_through_two_previous_owners_comes_back_through_both() {
    let h = Harness::memory();
    let m = Polled::start(&h, 3, Duration::from_secs(1)).await;
    let r = m.counter_at_one("f2").await;
    let a = m.server(&r.node);
    let others = m.others(&r.node);
    let (b, d) = (others[0], others[1]);
    hold_apart(&m.client.1, &b.1).await;
    hold_apart(&m.client.1, &d.1).await;
    let at_b = move_to(&a.0, &r, &b.0).await;
    let at_d = move_to(&b.0, &at_b, &d.0).await;
    assert_eq!(at_d.node, rid_of(&d.0));
    assert_eq!(
        m.cached_owner("f2"),
        Some(r.node.clone()),
        "the caller still names A"
    );
    // A follows to B, B on to D; D answers B, B relays to A, A to the caller.
    let step = Step { stream: 1, seq: 1 };
    assert_eq!(
        request_within(&m, "f2", &step)
            .await
            .expect("relayed twice"),
        1
    );
    let on_d = d.0.actors().expect("manager");
    assert_eq!(
        on_d.request("f2", &Totals).await.expect("totals"),
        (2, 1, 0)
    );
    m.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_answered_to_a_followed_request_reaches_its_caller_once() {
    let h = Harness::memory();
    let m = Polled::start(&h, 2, Duration::from_secs(1)).await;
    let r = m.counter_at_one("f3").await;
    let (a, b) = (m.server(&r.node), m.others(&r.node)[0]);
    hold_apart(&m.client.1, &b.1).await;
    move_to(&a.0, &r, &b.0).await;
    let err = request_within(&m, "f3", &Unhandled)
        .await
        .expect_err("B has no handler for it");
    assert!(
        matches!(
            err,
            ZLinkError::Remote {
                kind: ErrorKind::NotFound,
                ..
            }
        ),
        "B's error reply, relayed by A: {err}"
    );
    let on_b = b.0.actors().expect("manager");
    assert_eq!(
        on_b.request("f3", &Totals).await.expect("totals"),
        (1, 0, 0),
        "no handler ran"
    );
    routes_ended(&m, &[a]).await;
    m.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forwarding_node_that_lost_its_caller_discards_the_late_reply_and_keeps_no_route() {
    let h = Harness::memory();
    let m = Polled::start(&h, 2, Duration::from_secs(1)).await;
    let r = m.counter_at_one("f4").await;
    let (a, b) = (m.server(&r.node), m.others(&r.node)[0]);
    hold_apart(&m.client.1, &b.1).await;
    move_to(&a.0, &r, &b.0).await;
    // A request B's handler holds until the test releases it, followed by A.
    let call = {
        let caller = m.caller();
        tokio::spawn(async move { caller.request("f4", &Gated).await })
    };
    wait_until("A keeps the followed request's route", || {
        a.1.status().forwarded_requests == 1
    })
    .await;
    // The caller's connection to A goes: its request ends there, and A drops the route.
    hold_apart(&m.client.1, &a.1).await;
    let ended = tokio::time::timeout(WAIT, call)
        .await
        .expect("ended")
        .expect("task");
    assert_eq!(
        ended.expect_err("connection lost").kind(),
        ErrorKind::Unavailable
    );
    wait_until("A dropped the route", || {
        a.1.status().forwarded_requests == 0
    })
    .await;
    // B answers A, the connection the request came on; nothing waits for it there.
    m.seen.release.store(true, Ordering::SeqCst);
    wait_until("A discarded the late reply", || {
        a.1.status().replies_discarded == 1
    })
    .await;
    let status = a.1.status();
    assert_eq!(status.forwarded_requests, 0, "no route left");
    assert_eq!(status.forwarded_requests_expired, 0);
    let on_b = b.0.actors().expect("manager");
    assert_eq!(
        on_b.request("f4", &Totals).await.expect("totals").0,
        2,
        "the handler ran once"
    );
    m.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forwarding_node_that_stops_keeps_no_route() {
    let h = Harness::memory();
    let m = Polled::start(&h, 2, Duration::from_secs(1)).await;
    let r = m.counter_at_one("f5").await;
    let (a, b) = (m.server(&r.node), m.others(&r.node)[0]);
    hold_apart(&m.client.1, &b.1).await;
    move_to(&a.0, &r, &b.0).await;
    let call = {
        let caller = m.caller();
        tokio::spawn(async move { caller.request("f5", &Gated).await })
    };
    wait_until("A keeps the followed request's route", || {
        a.1.status().forwarded_requests == 1
    })
    .await;
    a.0.shutdown().await;
    assert_eq!(a.1.status().forwarded_requests, 0, "ended with the node");
    let ended = tokio::time::timeout(WAIT, call)
        .await
        .expect("ended")
        .expect("task");
    assert_eq!(
        ended.expect_err("its connection went with A").kind(),
        ErrorKind::Unavailable
    );
    m.seen.release.store(true, Ordering::SeqCst);
    m.shutdown().await;
}
