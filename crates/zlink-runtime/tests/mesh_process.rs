//! MeshNodes in separate processes (the `mesh_node` example) finding each other through the
//! live Redis and exchanging node-direct requests; a killed node ends an in-flight request
//! exactly once and nothing replays it elsewhere; a stalled (SIGSTOP) node times a request out
//! and serves again after SIGCONT; the Actors of a killed Object Server are recreated on the
//! survivors once its owner lease is gone, and none of its rows stay in the Location Store.
//!
//! Needs `ZLINK_TEST_REDIS_URL` (skips loudly without it, fails under `CI` /
//! `ZLINK_REQUIRE_REDIS`). Each test uses a key prefix of its own and purges it afterwards.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use common::{Node, Prefix, binary, is_outcome, signal};
use zlink_codec::records::AuthorityRecord;
use zlink_codec::{KeyParts, LogicalKey};
use zlink_redis_location::{RedisLocationOptions, RedisLocationStore};
use zlink_store_conformance::live;
use zlink_store_spi::{LocationStoreExt, PageLimit, ScanPrefix};

/// Three nodes over one prefix, each seeing the other two.
fn three_nodes(test: &str) -> Option<(Prefix, [Node; 3])> {
    let url = live::env_or_skip("ZLINK_TEST_REDIS_URL", test)?;
    let prefix = Prefix::new(url, test);
    let mut nodes = [
        Node::spawn("A", &prefix.url, &prefix.prefix),
        Node::spawn("B", &prefix.url, &prefix.prefix),
        Node::spawn("C", &prefix.url, &prefix.prefix),
    ];
    for n in &mut nodes {
        n.wait_peers(2);
    }
    Some((prefix, nodes))
}

#[test]
fn three_processes_find_each_other_through_redis_and_exchange_requests() {
    let Some((_prefix, mut nodes)) =
        three_nodes("three_processes_find_each_other_through_redis_and_exchange_requests")
    else {
        return;
    };
    let rids: Vec<String> = nodes.iter().map(|n| n.rid.clone()).collect();
    for (i, from) in nodes.iter_mut().enumerate() {
        for (j, to) in rids.iter().enumerate() {
            if i == j {
                continue;
            }
            let text = format!("from-{i}-to-{j}");
            assert_eq!(
                from.call(&format!("REQ {to} {text}")),
                format!("REPLY {text}")
            );
        }
    }
    for n in nodes {
        assert_eq!(n.quit(), "STOPPED Stopped");
    }
}

#[test]
fn killed_node_ends_an_in_flight_request_exactly_once_without_replay() {
    let Some((_prefix, [mut a, mut b, mut c])) =
        three_nodes("killed_node_ends_an_in_flight_request_exactly_once_without_replay")
    else {
        return;
    };
    a.send(&format!("SLOW {} 5000", b.rid));
    // The handler runs on B; then B dies with the request in flight.
    b.expect(|l| l == "SLOW-RAN 5000");
    std::thread::sleep(Duration::from_millis(200));
    b.child.kill().expect("kill -9 B");
    let _ = b.child.wait();

    let outcome = a.expect(is_outcome);
    assert!(
        outcome == "ERR Unavailable" || outcome == "ERR DeadlineExceeded",
        "the in-flight request ended with {outcome:?}"
    );
    // Past the Slow handler's own end: no second outcome on A, no replay on C.
    let later = a.drain(Duration::from_secs(6));
    assert!(
        !later.iter().any(|l| is_outcome(l)),
        "A printed more: {later:?}"
    );
    c.drain(Duration::from_millis(200));
    assert!(
        !c.seen.iter().any(|l| l.starts_with("SLOW-RAN")),
        "C ran the Slow handler: {:?}",
        c.seen
    );
    // The survivors still talk and stop in order.
    assert_eq!(a.call(&format!("REQ {} still", c.rid)), "REPLY still");
    assert_eq!(a.quit(), "STOPPED Stopped");
    assert_eq!(c.quit(), "STOPPED Stopped");
}

#[test]
fn stalled_node_times_out_then_recovers() {
    let Some((_prefix, [mut a, b, c])) = three_nodes("stalled_node_times_out_then_recovers") else {
        return;
    };
    assert!(signal("STOP", &b.pid()).expect("kill -STOP").success());
    let started = Instant::now();
    assert_eq!(
        a.call(&format!("REQ {} stalled 1000", b.rid)),
        "ERR DeadlineExceeded"
    );
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "timed out too early"
    );
    assert!(signal("CONT", &b.pid()).expect("kill -CONT").success());

    for i in 0..3 {
        let text = format!("after-{i}");
        assert_eq!(
            a.call(&format!("REQ {} {text} 5000", b.rid)),
            format!("REPLY {text}")
        );
    }
    // The timed-out request's late reply (if B sent one) was discarded, not printed.
    let later = a.drain(Duration::from_millis(300));
    assert!(
        !later.iter().any(|l| is_outcome(l)),
        "A printed more: {later:?}"
    );
    for n in [a, b, c] {
        assert_eq!(n.quit(), "STOPPED Stopped");
    }
}

/// The Location Store rows of one key prefix, read through the Redis provider (one snapshot).
struct StoreView {
    rt: tokio::runtime::Runtime,
    store: RedisLocationStore,
}

/// The rows the Actor test looks at, by what they are.
#[derive(Debug, Default)]
struct Rows {
    /// Actor id → its authority record.
    authority: BTreeMap<String, AuthorityRecord>,
    /// Actor id → the ObjectGeneration its lookup index row names.
    index: BTreeMap<String, u64>,
    /// Node RID hex → the actor slots its allocation row counts.
    capacity: BTreeMap<String, u64>,
}

impl StoreView {
    fn connect(prefix: &Prefix) -> StoreView {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime for the Store reads");
        let options = RedisLocationOptions::from_url(&prefix.url)
            .expect("ZLINK_TEST_REDIS_URL is a Redis URL")
            .with_key_prefix(prefix.prefix.clone())
            .expect("key prefix");
        let store = rt
            .block_on(RedisLocationStore::connect(options))
            .expect("the test Redis is reachable");
        StoreView { rt, store }
    }

    fn rows(&self) -> Rows {
        let items = self
            .rt
            .block_on(self.store.scan_all(
                &ScanPrefix::new("").expect("the empty prefix"),
                PageLimit::LARGEST,
                8,
            ))
            .expect("scan")
            .expect("the snapshot did not expire");
        let mut rows = Rows::default();
        for item in items.items {
            let key = item.key.as_str();
            let json = || -> serde_json::Value {
                serde_json::from_slice(&item.bytes).expect("a runtime-private JSON row")
            };
            let parts: Vec<&str> = key.split('\0').collect();
            match parts.as_slice() {
                ["location-index", "actor", _, id] => {
                    let generation = json()["objectGeneration"]
                        .as_str()
                        .and_then(|g| g.parse().ok())
                        .expect("objectGeneration");
                    rows.index.insert((*id).to_owned(), generation);
                }
                ["node-capacity", _, rid] => {
                    let actors = json()["actors"].as_u64().expect("actors");
                    rows.capacity.insert((*rid).to_owned(), actors);
                }
                _ => {
                    if let Ok(KeyParts::Authority { id, .. }) = LogicalKey::parse(key) {
                        let record = AuthorityRecord::decode(&item.bytes).expect("authority row");
                        rows.authority.insert(id.as_str().to_owned(), record);
                    }
                }
            }
        }
        rows
    }
}

impl Rows {
    /// Authority rows owned by `owner`.
    fn owned_by(&self, owner: &str) -> usize {
        self.authority
            .values()
            .filter(|r| r.owner_id.as_str() == owner)
            .count()
    }

    /// Lookup index rows that still name one of the `old` incarnations.
    fn old_index_rows(&self, old: &BTreeMap<String, (u64, String)>) -> usize {
        self.index
            .iter()
            .filter(|(id, g)| old.get(*id).is_some_and(|(before, _)| before == *g))
            .count()
    }
}

/// The Object Server arguments of the Actor test: owner lease timings short enough to expire
/// quickly (renew 500 + timeout 500 < TTL 3000 − fencing 1000) and a 200 ms discovery poll.
const OBJECT_SERVER: [&str; 11] = [
    "--objects",
    "--lease-ttl-ms",
    "3000",
    "--lease-renew-ms",
    "500",
    "--lease-renew-timeout-ms",
    "500",
    "--lease-fencing-ms",
    "1000",
    "--polling-ms",
    "200",
];

/// How many Actors the killed process owns.
const ACTORS: usize = 1_000;

/// How long the victim may take to own every Actor (its first discovery read comes first),
/// and how long the dead run's rows may take to go (lease TTL + a discovery poll + the sweep).
const ACTOR_WAIT: Duration = Duration::from_secs(60);

#[test]
fn actors_of_a_killed_process_are_recreated_on_the_survivors_with_higher_generations() {
    let test = "actors_of_a_killed_process_are_recreated_on_the_survivors_with_higher_generations";
    let Some(url) = live::env_or_skip("ZLINK_TEST_REDIS_URL", test) else {
        return;
    };
    let prefix = Prefix::new(url, "killed-actors");
    let store = StoreView::connect(&prefix);
    // Built (if needed) before the clock of the phase notes starts.
    binary();
    let started = Instant::now();
    let phase =
        |what: &str| eprintln!("{test}: {what} at {:.2} s", started.elapsed().as_secs_f64());

    // The victim alone: it is the only placement candidate, so it owns every Actor. Its first
    // discovery read may come after the first pass (no candidate yet): get_or_create is
    // idempotent, so the pass runs again until every id is Ready.
    let mut victim = Node::spawn_with("V", &prefix.url, &prefix.prefix, &OBJECT_SERVER);
    let command = format!("ACTORS k 0 {ACTORS}");
    let deadline = Instant::now() + ACTOR_WAIT;
    let before = loop {
        let pass = victim.get_or_create(&command);
        if pass.failed.is_empty() {
            break pass.refs;
        }
        assert!(
            Instant::now() < deadline,
            "V never created every actor; last failures: {:?}",
            &pass.failed[..pass.failed.len().min(5)]
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(before.len(), ACTORS);
    phase("V owns every actor");
    assert!(
        before.values().all(|(_, node)| *node == victim.rid),
        "every actor is on V"
    );

    // Two survivors join and see V (and each other) as Ready peers.
    let mut s1 = Node::spawn_with("S1", &prefix.url, &prefix.prefix, &OBJECT_SERVER);
    let mut s2 = Node::spawn_with("S2", &prefix.url, &prefix.prefix, &OBJECT_SERVER);
    s1.wait_peers(2);
    s2.wait_peers(2);
    phase("the survivors see V");

    // In the Store: V's run owns exactly the 1,000 rows, and its allocation row counts them.
    let rows = store.rows();
    let owners: BTreeSet<&str> = rows
        .authority
        .values()
        .map(|r| r.owner_id.as_str())
        .collect();
    assert_eq!(owners.len(), 1, "one owner run: {owners:?}");
    let dead_owner = owners.first().map(|o| (*o).to_owned()).unwrap_or_default();
    assert_eq!(rows.owned_by(&dead_owner), ACTORS);
    assert!(rows.authority.iter().all(|(id, r)| {
        r.allocation.descriptor.routing_id.to_hex() == victim.rid
            && before.get(id).map(|(g, _)| *g) == Some(r.object_generation.get())
    }));
    assert_eq!(rows.old_index_rows(&before), ACTORS);
    assert_eq!(rows.capacity.get(&victim.rid), Some(&(ACTORS as u64)));

    victim.child.kill().expect("kill -9 V");
    let _ = victim.child.wait();
    let killed = Instant::now();

    // After V's lease TTL and a discovery poll the survivors' recovery-sweeps remove every row
    // of the dead run: authority rows, lookup index rows and V's allocation row.
    let deadline = killed + ACTOR_WAIT;
    let gone = loop {
        let rows = store.rows();
        let left = (
            rows.owned_by(&dead_owner),
            rows.old_index_rows(&before),
            rows.capacity.get(&victim.rid).copied(),
        );
        if left == (0, 0, None) {
            break rows;
        }
        assert!(
            Instant::now() < deadline,
            "the dead run's rows are still there after {ACTOR_WAIT:?}: {} authority, {} index, \
             allocation row {:?}",
            left.0,
            left.1,
            left.2
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    phase(&format!(
        "the dead run's rows were gone {:.2} s after kill -9",
        killed.elapsed().as_secs_f64()
    ));
    assert!(gone.authority.is_empty() && gone.index.is_empty());

    // Every id is recreated through the survivors (half through each), with a higher
    // ObjectGeneration, on a survivor.
    let mut after = s1.get_or_create(&format!("ACTORS k 0 {}", ACTORS / 2)).refs;
    after.extend(
        s2.get_or_create(&format!("ACTORS k {} {}", ACTORS / 2, ACTORS - ACTORS / 2))
            .refs,
    );
    assert_eq!(after.len(), ACTORS, "every id was recreated");
    phase("every id recreated");
    let survivors = [s1.rid.clone(), s2.rid.clone()];
    for (id, (generation, node)) in &after {
        let (old, _) = &before[id];
        assert!(
            generation > old,
            "{id}: generation {generation} is not above {old}"
        );
        assert!(
            survivors.contains(node),
            "{id} is on {node}, not a survivor"
        );
    }

    // The Store agrees: the new incarnations, owned by the survivors' runs, and allocation
    // rows only for the survivors' nodes, adding up to the 1,000.
    let rows = store.rows();
    assert_eq!(rows.owned_by(&dead_owner), 0);
    assert_eq!(rows.authority.len(), ACTORS);
    for (id, r) in &rows.authority {
        assert_eq!(
            Some(&r.object_generation.get()),
            after.get(id).map(|(g, _)| g)
        );
        assert_eq!(rows.index.get(id), Some(&r.object_generation.get()));
    }
    assert!(!rows.capacity.contains_key(&victim.rid));
    assert!(rows.capacity.keys().all(|rid| survivors.contains(rid)));
    assert_eq!(rows.capacity.values().sum::<u64>(), ACTORS as u64);

    // A clean shutdown's self-sweep leaves nothing behind either.
    assert_eq!(s1.quit(), "STOPPED Stopped");
    assert_eq!(s2.quit(), "STOPPED Stopped");
    phase("the survivors stopped");
    let rows = store.rows();
    assert!(
        rows.authority.is_empty() && rows.index.is_empty() && rows.capacity.is_empty(),
        "rows left after both survivors stopped: {} authority, {} index, allocation rows {:?}",
        rows.authority.len(),
        rows.index.len(),
        rows.capacity
    );
}
