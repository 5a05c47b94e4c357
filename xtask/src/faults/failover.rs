//! `cluster-failover-lost-writes` (short leases) and `cluster-failover-lost-writes-default-leases`:
//! a Redis Cluster failover that loses writes the store acknowledged.
//!
//! A private cluster of three masters with one replica each ([`Cluster`]); the three
//! `mesh_node` processes use it as their Location Store. While the first node probes the
//! `f-*` Actors (as every scenario does), the replica of the master holding the store's hash
//! slot is stopped (SIGSTOP), a ballast write fills its replication link (so what the master
//! writes next stays in the master's own memory), and the second node creates fresh Actors
//! (`get_or_create` of `g-*`: authority records, counter moves) and probes them — every
//! lease renewal of the time is held back too. Then the master is killed (`kill -9`) while its
//! replica is still stopped, the replica is resumed and promoted with
//! `CLUSTER FAILOVER TAKEOVER`: it serves the slot without the held-back stream. The offsets
//! show the gap achieved (bytes the promoted replica never received, and whether the
//! creations began past what it has).
//!
//! Besides every invariant the other scenarios check, once the stated bound (lease TTL +
//! renew interval + 5 s) has passed after the failover: no id may have a live activation on
//! two nodes (`LIVE-IDS`), no id may be stuck in Creating (read with `LocationReader`), and
//! every id (old and fresh) must have answered again within lease TTL + 5 s.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use super::cluster::Cluster;
use super::procs::{Node, signal};
use super::{
    FAULT_AT, Leases, PAUSE_MS, PROBE_TIMEOUT_MS, Row, Scenario, capacity_breaks, check, fence_all,
    node_args, reach_within_ms, store, wait_peers, wall_ms,
};

/// Fresh Actors the second node creates while the replica is held back (at most `--actors`).
const FRESH: u64 = 100;

/// Ballast written to the slot's master right after its replica stops, in values of
/// [`BALLAST_CHUNK`] bytes: 16 MiB, well past what the loopback link's kernel buffers take in
/// (about 5 MiB measured here: the replica's receive buffer and the master's send buffer,
/// which the kernel still delivers after the master is killed), so what the master writes
/// after it stays in the master's own memory and dies with it.
const BALLAST_CHUNKS: usize = 32;
const BALLAST_CHUNK: usize = 512 << 10;

/// Where the ballast goes: the store's hashtag (the same master), outside the run's prefix.
const BALLAST_KEY: &str = "faults-ballast:{zlink-location-v3}";

/// The shortest hold of the replica: writes (lease renewals, creations, probes) go on this
/// long at least while it receives nothing.
const HOLD: Duration = Duration::from_secs(1);

/// The time the hold and the failover are planned to take, for the load's window.
const FAILOVER_ESTIMATE: Duration = Duration::from_secs(4);

/// How long the load runs: until the stated bound has passed after the failover, plus a
/// margin.
pub(super) fn window(leases: Leases) -> Duration {
    FAULT_AT + FAILOVER_ESTIMATE + bound(leases) + Duration::from_secs(2)
}

/// The bound after the failover past which no id may be live twice: lease TTL + renew
/// interval + 5 s.
fn bound(leases: Leases) -> Duration {
    Duration::from_millis(leases.ttl + leases.renew + 5_000)
}

/// What the fault did to replication.
struct Gap {
    /// The master's offset when it was killed.
    master: u64,
    /// The master's offset when the fresh creations began (after the ballast).
    creations_from: u64,
    /// What the promoted replica had processed.
    promoted: u64,
}

impl Gap {
    fn show(&self) -> String {
        let lost = self.master.saturating_sub(self.promoted);
        let creations = if self.promoted < self.creations_from {
            "all creations lost"
        } else if self.promoted < self.master {
            "some creations kept"
        } else {
            "nothing lost"
        };
        format!("{lost} B ({creations})")
    }
}

pub(super) fn run_scenario(binary: &Path, s: Scenario, actors: u64) -> Result<Row, String> {
    let mut cluster = Cluster::start()?;
    let slot = fred::util::redis_keyslot(b"{zlink-location-v3}");
    let (master, replica) = cluster.master_and_replica_of(slot)?;
    let replica = replica.ok_or("the slot's master has no replica")?;
    let url = cluster.url();
    let prefix = format!("faults-{}", s.name());
    let leases = s.leases();
    let args = node_args(&url, &prefix, leases);
    let mut nodes = Vec::new();
    for _ in 0..3 {
        nodes.push(Node::start(binary, &args, Duration::from_secs(60))?);
    }
    for n in &mut nodes {
        wait_peers(n, 2)?;
    }
    let (driver, creator) = (0, 1);
    nodes[driver].send(&format!("ACTORS f 0 {actors}"))?;
    let done =
        nodes[driver].wait_for(Duration::from_secs(120), |l| l.starts_with("ACTORS-DONE"))?;
    if done != format!("ACTORS-DONE {actors} 0") {
        return Err(format!("creating the actors: {done}"));
    }
    let window = window(leases);
    nodes[driver].send(&format!(
        "LOAD f 0 {actors} {} {PAUSE_MS} {PROBE_TIMEOUT_MS}",
        window.as_millis()
    ))?;
    let load_start = Instant::now();
    std::thread::sleep(FAULT_AT);

    // Hold the replica back while writes go on.
    let fresh = FRESH.min(actors);
    let replica_pid = cluster.pid(replica)?;
    signal(replica_pid, "STOP")?;
    let held = Instant::now();
    let hold = hold_and_create(
        &cluster,
        master,
        &mut nodes[creator],
        fresh,
        window,
        load_start,
    );
    let master_offset = cluster.offset(master);
    // Killed while its replica is still stopped: the held-back stream dies with it.
    let killed = cluster.kill(master);
    let fault_at = wall_ms();
    signal(replica_pid, "CONT")?;
    let (creations_from, created) = hold?;
    let master_offset = master_offset?;
    killed?;
    let held_ms = held.elapsed().as_millis();
    let promoted = settled_offset(&cluster, replica)?;
    cluster.takeover(replica)?;
    cluster.wait_settled(|c| c.all_see_serving(replica, slot))?;
    let healed = wall_ms();
    // A caller without a cached route asks for the fresh ids now: with their records lost,
    // the Store says they do not exist.
    let third = 2;
    nodes[third].send(&format!("ACTORS g 0 {fresh}"))?;
    let asked_again =
        nodes[third].collect_until(Duration::from_secs(30), |l| l.starts_with("ACTORS-DONE"))?;
    let gap = Gap {
        master: master_offset,
        creations_from,
        promoted,
    };
    eprintln!(
        "xtask: faults: replica held {held_ms} ms, {} fresh Actors created; replication gap {} (master at {}, creations from {}, promoted replica at {}); failover took {} ms; asked again from a third node: {}",
        created.len(),
        gap.show(),
        gap.master,
        gap.creations_from,
        gap.promoted,
        healed.saturating_sub(fault_at),
        recreated(&created, &asked_again)
    );

    let left = (window + Duration::from_secs(60)).saturating_sub(load_start.elapsed());
    let lines = nodes[driver].collect_until(left, |l| l.starts_with("LOAD-DONE"))?;
    let left = (window + Duration::from_secs(60)).saturating_sub(load_start.elapsed());
    let fresh_lines = nodes[creator].collect_until(left, |l| l.starts_with("LOAD-DONE"))?;
    if let Some(dir) = std::env::var_os("ZLINK_FAULTS_LOG_DIR") {
        let path = std::path::PathBuf::from(dir).join(format!("load-{}.txt", s.name()));
        let all = [&lines, &fresh_lines, &asked_again].map(|l| l.join("\n"));
        let _ = std::fs::write(&path, all.join("\n"));
    }
    let (mut by_id, totals) = check::parse(&lines);
    let (fresh_by_id, fresh_totals) = check::parse(&fresh_lines);
    by_id.extend(fresh_by_id);
    let totals = totals
        .zip(fresh_totals)
        .map(|((a, b), (c, d))| (a + c, b + d));
    let lease_room = u128::from(leases.ttl - leases.fencing);
    let fenced = fence_all(&nodes, fault_at + lease_room, healed);
    let verdict = check::check(&by_id, totals, healed, &fenced, fault_at);

    // The stated bound after the failover, then: live twice, stuck in Creating.
    let until = healed + bound(leases).as_millis();
    let now = wall_ms();
    if now < until {
        std::thread::sleep(Duration::from_millis(
            u64::try_from(until - now).unwrap_or(u64::MAX),
        ));
    }
    let mut notes = Vec::new();
    let twice = live_twice(&mut nodes).unwrap_or_else(|e| {
        notes.push(format!("reading the live ids: {e}"));
        Vec::new()
    });
    let ids: Vec<String> = (0..actors)
        .map(|i| format!("f-{i}"))
        .chain((0..fresh).map(|i| format!("g-{i}")))
        .collect();
    let creating = store::creating(&url, &prefix, &ids).unwrap_or_else(|e| {
        notes.push(format!("looking the ids up: {e}"));
        Vec::new()
    });
    if !twice.is_empty() {
        notes.push(format!(
            "live twice: {}",
            twice.iter().take(5).cloned().collect::<Vec<_>>().join(" ")
        ));
    }
    if !creating.is_empty() {
        notes.push(format!(
            "stuck in Creating: {}",
            creating
                .iter()
                .take(5)
                .cloned()
                .collect::<Vec<_>>()
                .join(" ")
        ));
    }
    if gap.promoted >= gap.master {
        notes.push("the promoted replica had every write: nothing was lost".into());
    }
    let capacity = capacity_breaks(&mut nodes, None, &url, &prefix, actors + fresh)
        .unwrap_or_else(|e| vec![format!("reading the capacity rows: {e}")]);
    let mut shutdown = Vec::new();
    for n in &mut nodes {
        let line = n
            .quit(Duration::from_secs(60))
            .unwrap_or_else(|e| format!("STOPPED ? ({e})"));
        shutdown.push(line.trim_start_matches("STOPPED ").to_owned());
    }
    let clean = shutdown.iter().all(|o| o == "Stopped");
    let target = zlink_cli::redis::Target::Cluster(cluster.seeds());
    let keys = store::keys_left(&target, &prefix)
        .map(|keys| check::unexpected_left(&keys, &[], wall_ms()))
        .unwrap_or_else(|e| vec![format!("listing the keys left: {e}")]);
    if by_id.len() as u64 != actors + fresh {
        notes.push(format!(
            "{} of {} actors answered or failed at all",
            by_id.len(),
            actors + fresh
        ));
    }
    notes.extend(capacity.iter().take(3).cloned());
    notes.extend(keys.iter().take(3).cloned());
    let passed = notes.is_empty() && clean && verdict.holds(reach_within_ms(leases));
    Ok(Row {
        scenario: s,
        verdict,
        relocate: "-".into(),
        reconnect: format!("{} ms", healed.saturating_sub(fault_at)),
        capacity: capacity.len(),
        keys_left: keys.len(),
        shutdown: shutdown.join(" "),
        twice_creating: format!("{} / {}", twice.len(), creating.len()),
        gap: gap.show(),
        passed,
        note: notes.join("; "),
    })
}

/// With the replica stopped: writes the ballast to `master`, notes the master's offset, has
/// `creator` create `fresh` Actors `g-*` and start probing them for the rest of the load
/// window, and holds on until [`HOLD`] has passed. Returns the offset the creations began
/// at and each acknowledged creation (`id` → `generation node`).
fn hold_and_create(
    cluster: &Cluster,
    master: usize,
    creator: &mut Node,
    fresh: u64,
    window: Duration,
    load_start: Instant,
) -> Result<(u64, BTreeMap<String, String>), String> {
    let held = Instant::now();
    cluster.ballast(master, BALLAST_KEY, BALLAST_CHUNKS, BALLAST_CHUNK)?;
    let creations_from = cluster.offset(master)?;
    creator.send(&format!("ACTORS g 0 {fresh}"))?;
    let lines = creator.collect_until(Duration::from_secs(30), |l| l.starts_with("ACTORS-DONE"))?;
    let created = actors_of(&lines);
    let rest = window.saturating_sub(load_start.elapsed());
    creator.send(&format!(
        "LOAD g 0 {fresh} {} {PAUSE_MS} {PROBE_TIMEOUT_MS}",
        rest.as_millis()
    ))?;
    std::thread::sleep(HOLD.saturating_sub(held.elapsed()));
    Ok((creations_from, created))
}

/// The `ACTOR <id> <generation> <node>` lines among `lines`: `id` → `generation node`.
fn actors_of(lines: &[String]) -> BTreeMap<String, String> {
    lines
        .iter()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            match w.as_slice() {
                ["ACTOR", id, generation, node] => {
                    Some(((*id).to_owned(), format!("{generation} {node}")))
                }
                _ => None,
            }
        })
        .collect()
}

/// How the fresh ids answered when asked again after the failover: how many resolved to
/// the activation created during the hold, how many to another one (recreated), how many
/// failed.
fn recreated(created: &BTreeMap<String, String>, asked_again: &[String]) -> String {
    let again = actors_of(asked_again);
    let same = again
        .iter()
        .filter(|(id, v)| created.get(*id) == Some(*v))
        .count();
    let mut failed: BTreeMap<&str, usize> = BTreeMap::new();
    for l in asked_again {
        if let ["ACTOR-ERR", _, kind, ..] = l.split_whitespace().collect::<Vec<_>>().as_slice() {
            *failed.entry(kind).or_default() += 1;
        }
    }
    let failed: Vec<String> = failed.iter().map(|(k, n)| format!("{k} {n}")).collect();
    format!(
        "{same} the same activation, {} another one, failed: {}",
        again.len() - same,
        if failed.is_empty() {
            "none".to_owned()
        } else {
            failed.join(", ")
        }
    )
}

/// The resumed replica's offset once it has processed what reached it (stable for 100 ms;
/// bounded).
fn settled_offset(cluster: &Cluster, replica: usize) -> Result<u64, String> {
    let end = Instant::now() + Duration::from_secs(5);
    let mut last = cluster.offset(replica)?;
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let now = cluster.offset(replica)?;
        if now == last || Instant::now() >= end {
            return Ok(now);
        }
        last = now;
    }
}

/// Every id with a counter activation on more than one node, or more than one on a node
/// (`LIVE-IDS` of each node), as `id×n`.
fn live_twice(nodes: &mut [Node]) -> Result<Vec<String>, String> {
    let mut lines = Vec::with_capacity(nodes.len());
    for n in nodes.iter_mut() {
        n.send("LIVE-IDS")?;
        lines.push(n.wait_for(Duration::from_secs(10), |l| l.starts_with("LIVE-IDS"))?);
    }
    twice_of(&lines)
}

/// The ids live more than once over the nodes' `LIVE-IDS <id>:<n>…` lines, as `id×n`.
fn twice_of(lines: &[String]) -> Result<Vec<String>, String> {
    let mut count: BTreeMap<String, u32> = BTreeMap::new();
    for line in lines {
        for entry in line.split_whitespace().skip(1) {
            let (id, k) = entry
                .rsplit_once(':')
                .and_then(|(id, k)| Some((id, k.parse::<u32>().ok()?)))
                .ok_or_else(|| format!("a LIVE-IDS entry `{entry}`"))?;
            *count.entry(id.to_owned()).or_default() += k;
        }
    }
    Ok(count
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|(id, n)| format!("{id}×{n}"))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(l: &[&str]) -> Vec<String> {
        l.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn an_id_live_on_two_nodes_or_twice_on_one_is_live_twice() {
        let two_nodes = lines(&["LIVE-IDS f-1:1 g-2:1", "LIVE-IDS g-2:1", "LIVE-IDS"]);
        assert_eq!(twice_of(&two_nodes).unwrap(), vec!["g-2×2".to_owned()]);
        let one_node = lines(&["LIVE-IDS a:b:2", "LIVE-IDS f-1:1"]);
        assert_eq!(twice_of(&one_node).unwrap(), vec!["a:b×2".to_owned()]);
        let once = lines(&["LIVE-IDS f-1:1", "LIVE-IDS f-2:1"]);
        assert!(twice_of(&once).unwrap().is_empty());
        assert!(twice_of(&lines(&["LIVE-IDS f-1"])).is_err());
    }

    #[test]
    fn the_gap_says_whether_the_creations_were_lost() {
        let gap = |promoted| Gap {
            master: 300,
            creations_from: 200,
            promoted,
        };
        assert_eq!(gap(100).show(), "200 B (all creations lost)");
        assert_eq!(gap(250).show(), "50 B (some creations kept)");
        assert_eq!(gap(300).show(), "0 B (nothing lost)");
    }

    #[test]
    fn asked_again_tells_the_same_activation_from_another_and_failures() {
        let created: BTreeMap<String, String> = [("g-0", "5 n1"), ("g-1", "6 n2"), ("g-2", "7 n1")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        let again = lines(&[
            "ACTOR g-0 5 n1",
            "ACTOR g-1 9 n3",
            "ACTOR-ERR g-2 Unavailable",
            "ACTORS-DONE 2 1",
        ]);
        assert_eq!(
            recreated(&created, &again),
            "1 the same activation, 1 another one, failed: Unavailable 1"
        );
    }
}
