//! The simulation's network keeps what TCP keeps across a partition: a write made while the
//! link is cut arrives after the heal, in order, and nothing crosses the cut before it heals.
//! (turmoil's own partitions drop such a write and never resend it, and its TCP then waits for
//! the missing bytes forever: the stream stalls, as seed 6933 found.)

#![allow(missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use zlink_sim::{Cuts, TurmoilNetwork};
use zlink_transport::Network;

const HEAL_AT: Duration = Duration::from_millis(700);

fn simulation() -> turmoil::Sim<'static> {
    turmoil::Builder::new()
        .simulation_duration(Duration::from_secs(10))
        .build()
}

/// Host `name`'s view of the network under `cuts`.
fn network(name: &str, cuts: &Arc<Cuts>) -> TurmoilNetwork {
    TurmoilNetwork::new(name.to_owned(), cuts.clone())
}

#[test]
fn a_write_across_a_cut_arrives_in_order_after_the_heal_and_not_before() {
    let cuts = Arc::new(Cuts::default());
    let mut sim = simulation();
    let for_server = cuts.clone();
    sim.host("server", move || {
        let cuts = for_server.clone();
        async move {
            let net = network("server", &cuts);
            let listener = net.bind("0.0.0.0:9000").await?;
            let (mut s, _) = listener.accept().await?;
            let mut first = [0u8; 2];
            s.read_exact(&mut first).await?;
            assert_eq!(&first, b"ab");
            let mut rest = [0u8; 4];
            s.read_exact(&mut rest).await?;
            assert_eq!(&rest, b"cdef", "held bytes first, in order");
            let at = turmoil::sim_elapsed().unwrap_or_default();
            assert!(at >= HEAL_AT, "crossed the cut at {at:?}, before the heal");
            Ok(())
        }
    });
    let for_client = cuts.clone();
    sim.client("client", async move {
        let net = network("client", &for_client);
        let mut s = net.connect("server:9000").await?;
        s.write_all(b"ab").await?;
        tokio::time::sleep(Duration::from_millis(200)).await;
        for_client.cut("client", "server", true);
        s.write_all(b"cd").await?;
        tokio::time::sleep(HEAL_AT - Duration::from_millis(200)).await;
        for_client.heal("client", "server");
        s.write_all(b"ef").await?;
        // Stay connected until the server has read everything.
        tokio::time::sleep(Duration::from_secs(2)).await;
        Ok(())
    });
    sim.run().expect("both hosts finish");
}

#[test]
fn a_one_way_cut_stops_one_direction_only() {
    let cuts = Cuts::default();
    cuts.cut("a", "b", true);
    assert!(cuts.is_cut("a", "b"));
    assert!(!cuts.is_cut("b", "a"));
    cuts.cut("a", "b", false);
    assert!(cuts.is_cut("b", "a"), "a two-way draw of the same pair");
    cuts.heal("a", "b");
    assert!(cuts.is_cut("a", "b"), "one heal ends one draw of two");
    cuts.heal("a", "b");
    assert!(!cuts.is_cut("a", "b") && !cuts.is_cut("b", "a"));
}

#[test]
fn a_dropped_connection_fails_at_both_ends_at_once_and_can_be_dialled_again() {
    let cuts = Arc::new(Cuts::default());
    let mut sim = simulation();
    let for_server = cuts.clone();
    sim.host("server", move || {
        let cuts = for_server.clone();
        async move {
            let net = network("server", &cuts);
            let listener = net.bind("0.0.0.0:9000").await?;
            let (mut s, _) = listener.accept().await?;
            // Blocked in a read when the connection drops: woken with the error.
            let mut buf = [0u8; 1];
            let err = s.read_exact(&mut buf).await.expect_err("dropped");
            assert_eq!(err.kind(), std::io::ErrorKind::ConnectionReset);
            let (mut again, _) = listener.accept().await?;
            again.read_exact(&mut buf).await?;
            assert_eq!(&buf, b"x");
            Ok(())
        }
    });
    let for_client = cuts.clone();
    sim.client("client", async move {
        let net = network("client", &for_client);
        let mut s = net.connect("server:9000").await?;
        tokio::time::sleep(Duration::from_millis(100)).await;
        for_client.reset("client", "server");
        let err = s.write_all(b"y").await.expect_err("dropped");
        assert_eq!(err.kind(), std::io::ErrorKind::ConnectionReset);
        let mut again = net.connect("server:9000").await?;
        again.write_all(b"x").await?;
        tokio::time::sleep(Duration::from_secs(1)).await;
        Ok(())
    });
    sim.run().expect("both hosts finish");
}
