//! The `mesh_node` example's Prometheus endpoint (`--metrics ADDR`, `docs/metrics.md`): two
//! Object Server processes on the live Redis; Actors created and called through one of them,
//! then that host relocated (PlannedMaintenance) to the other. A raw HTTP GET on the
//! endpoint finds the instruments with values the run explains — messages sent and answered,
//! Store calls, creations, routes, the host state and the Relocate result, unit
//! interruptions, lease renewals — and no label carries a RID or an Actor id.
//!
//! Needs `ZLINK_TEST_REDIS_URL` (skips loudly without it, fails under `CI` /
//! `ZLINK_REQUIRE_REDIS`). The test uses a key prefix of its own and purges it afterwards.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::{Node, Prefix, binary, is_outcome};
use zlink_store_conformance::live;

/// Object Servers whose counter type moves with its state, renewing the lease every 500 ms.
const OBJECT_SERVER: [&str; 13] = [
    "--objects",
    "--relocation",
    "preserve",
    "--polling-ms",
    "200",
    "--lease-ttl-ms",
    "3000",
    "--lease-renew-ms",
    "500",
    "--lease-renew-timeout-ms",
    "500",
    "--lease-fencing-ms",
    "1000",
];

/// Actors created through the scraped node.
const ACTORS: usize = 40;

/// `GET /metrics` over a plain TCP connection; the body.
fn scrape(addr: &str) -> String {
    let mut s = TcpStream::connect(addr).expect("the metrics endpoint accepts");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("a read timeout");
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .expect("the request is written");
    let mut text = String::new();
    s.read_to_string(&mut text).expect("the response is read");
    let (head, body) = text.split_once("\r\n\r\n").expect("an HTTP response");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    body.to_owned()
}

/// The value of the series `series` (name and labels exactly as rendered).
fn value(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no series {series} in:\n{text}"))
}

#[test]
fn a_scrape_of_the_example_node_shows_each_instrument_with_plausible_values() {
    let test = "a_scrape_of_the_example_node_shows_each_instrument_with_plausible_values";
    let Some(url) = live::env_or_skip("ZLINK_TEST_REDIS_URL", test) else {
        return;
    };
    let prefix = Prefix::new(url, "metrics-scrape");
    binary();
    let mut with_metrics = OBJECT_SERVER.to_vec();
    with_metrics.extend(["--metrics", "127.0.0.1:0"]);
    let mut a = Node::spawn_with("A", &prefix.url, &prefix.prefix, &with_metrics);
    let mut b = Node::spawn_with("B", &prefix.url, &prefix.prefix, &OBJECT_SERVER);
    a.wait_peers(1);
    b.wait_peers(1);
    a.send("METRICS");
    let line = a.expect(|l| l.starts_with("METRICS "));
    let addr = line["METRICS ".len()..].to_owned();

    let pass = a.get_or_create(&format!("ACTORS m 0 {ACTORS}"));
    assert!(pass.failed.is_empty(), "{:?}", pass.failed);
    let on_b = pass.refs.values().filter(|(_, n)| *n == b.rid).count();
    let ids: Vec<String> = pass.refs.keys().cloned().collect();
    for id in &ids {
        assert_eq!(a.call(&format!("INCR {id}")), "REPLY 1");
    }
    a.send(&format!("REQ {} hello", b.rid));
    assert!(is_outcome(&a.expect(is_outcome)));
    // The sampler publishes every second, the lease renews every 500 ms.
    std::thread::sleep(Duration::from_millis(2_500));

    let before = scrape(&addr);
    assert_eq!(value(&before, r#"zlink_host_state{state="serving"}"#), 1.0);
    assert_eq!(
        value(&before, r#"zlink_host_state{state="relocated"}"#),
        0.0
    );
    let remote = value(
        &before,
        r#"zlink_messages_sent{kind="request",path="remote"}"#,
    );
    assert!(
        remote >= (on_b + 1) as f64,
        "{remote} remote requests (at least {on_b} Actor calls to B and one REQ)"
    );
    let answered = value(&before, r#"zlink_request_duration_count{outcome="ok"}"#);
    assert!(
        answered >= (ACTORS + 1) as f64,
        "{answered} answered requests"
    );
    let created = value(
        &before,
        r#"zlink_objects_creations{kind="actor",outcome="created"}"#,
    );
    assert_eq!(
        created, ACTORS as f64,
        "each get_or_create created its Actor"
    );
    let routes = value(&before, r#"zlink_objects_route{source="live"}"#)
        + value(&before, r#"zlink_objects_route{source="cache"}"#)
        + value(&before, r#"zlink_objects_route{source="store"}"#);
    assert!(
        routes >= ACTORS as f64,
        "{routes} routes for {ACTORS} calls"
    );
    let live_here = value(&before, r#"zlink_objects_live{kind="actor"}"#);
    assert_eq!(
        live_here,
        (ACTORS - on_b) as f64,
        "the Actors A owns are live on A"
    );
    assert!(
        value(
            &before,
            r#"zlink_store_duration_count{op="read",outcome="ok"}"#
        ) > 0.0
    );
    assert!(
        value(
            &before,
            r#"zlink_store_duration_count{op="write",outcome="ok"}"#
        ) > 0.0
    );
    assert_eq!(value(&before, r#"zlink_store_failures{op="write"}"#), 0.0);
    assert!(value(&before, r#"zlink_lease_renewals{outcome="renewed"}"#) >= 1.0);
    assert_eq!(
        value(&before, r#"zlink_lease_renewals{outcome="failed"}"#),
        0.0
    );
    assert!(value(&before, "zlink_mailbox_jobs") >= 0.0);
    assert!(value(&before, "zlink_objects_mailbox_jobs") >= 0.0);
    assert!(value(&before, r#"zlink_messages_received{kind="request"}"#) >= 0.0);
    assert_eq!(
        value(&before, r#"zlink_messages_dropped{reason="no_route"}"#),
        0.0
    );
    assert!(
        before.contains("# TYPE zlink_request_duration histogram"),
        "{before}"
    );

    a.send("RELOCATE 20000");
    let relocated = a.expect_within(Duration::from_secs(40), |l| {
        l.starts_with("RELOCATED ") || l.starts_with("RELOCATE-ERR ")
    });
    assert!(
        relocated.starts_with("RELOCATED Relocated None"),
        "{relocated}"
    );
    std::thread::sleep(Duration::from_millis(1_500));
    let after = scrape(&addr);
    assert_eq!(value(&after, r#"zlink_host_state{state="relocated"}"#), 1.0);
    assert_eq!(value(&after, r#"zlink_host_state{state="serving"}"#), 0.0);
    assert_eq!(
        value(
            &after,
            r#"zlink_host_relocation{mode="planned_maintenance",outcome="relocated",reason="none"}"#
        ),
        1.0
    );
    let moved = (ACTORS - on_b) as f64;
    assert_eq!(
        value(
            &after,
            r#"zlink_relocation_units{outcome="moved",error="none"}"#
        ),
        moved,
        "one unit per Actor that moved"
    );
    assert_eq!(value(&after, "zlink_relocation_interruption_count"), moved);
    assert!(
        value(&after, "zlink_relocation_interruption_sum") < moved,
        "each under 1 s"
    );
    assert_eq!(value(&after, r#"zlink_objects_live{kind="actor"}"#), 0.0);
    assert_eq!(
        value(&after, "zlink_objects_mailbox_jobs"),
        0.0,
        "no activation left, no mailbox job"
    );

    // No label carries a node RID or an Actor id (28 §11).
    for text in [&before, &after] {
        assert!(!text.contains(&a.rid) && !text.contains(&b.rid));
        assert!(ids.iter().all(|id| !text.contains(&format!("\"{id}\""))));
    }
    assert_eq!(a.quit(), "STOPPED Stopped");
    assert_eq!(b.quit(), "STOPPED Stopped");
}
