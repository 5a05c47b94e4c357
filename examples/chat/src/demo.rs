//! `zlink-chat demo`: three node processes, a scripted conversation, one node leaving with
//! its users and rooms, every history checked, everything stopped and the Redis keys purged.
#![allow(
    clippy::print_stdout,
    reason = "the demo's report is its user-facing output"
)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use zlink_runtime::config::ObjectRole;

use crate::model::{HISTORY_LEN, Place};
use crate::node;
use crate::nodes::{self, NodeProcess};
use crate::script::{Chat, Expected};

/// How many node processes the demo starts.
const NODES: usize = 3;
/// How long the client root may take to connect to the nodes.
const READY_WITHIN: Duration = Duration::from_secs(30);
/// How long the final purge of the key prefix may take.
const PURGE_WITHIN: Duration = Duration::from_secs(30);
/// How many lines of a room's history the report shows at each end.
const SHOWN: usize = 3;

/// Runs the whole demo against the Redis at `redis`; an error says what went wrong.
pub(crate) async fn run(redis: &str) -> Result<(), String> {
    let started = Instant::now();
    let prefix = fresh_prefix();
    println!("zlink-chat demo: {NODES} nodes of mesh `chat` on {redis}, key prefix {prefix}");
    let outcome = run_nodes(redis, &prefix).await;
    // Every node is gone by now: stopped, or killed by its guard.
    match tokio::time::timeout(PURGE_WITHIN, purge(redis, &prefix)).await {
        Ok(Ok(n)) => println!("purged {n} Redis key(s) left under {prefix}"),
        Ok(Err(e)) => println!("could not purge {prefix}: {e}"),
        Err(_) => println!("could not purge {prefix}: no answer in {PURGE_WITHIN:?}"),
    }
    outcome?;
    println!(
        "chat demo passed in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// A key prefix no other run uses.
fn fresh_prefix() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    format!("zlink-chat-{}-{nanos}", std::process::id())
}

/// Starts the nodes and a client root, plays the demo, and stops them all.
async fn run_nodes(redis: &str, prefix: &str) -> Result<(), String> {
    let mut nodes = nodes::start_all(NODES, redis, prefix).await?;
    for n in &nodes {
        println!("{} ready: pid {}, routing id {}", n.name, n.pid, n.rid);
    }
    let client = node::start(redis, prefix, ObjectRole::Client)
        .await
        .map_err(|e| format!("client root: {e}"))?;
    let played = play(&client, &mut nodes).await;
    client.shutdown().await;
    let (mut stopped, mut failed) = (Vec::new(), Ok(()));
    for n in nodes.iter_mut().filter(|n| !n.rid.is_empty()) {
        match n.stop().await {
            Ok(outcome) => stopped.push(format!("{} {outcome}", n.name)),
            Err(e) => failed = failed.and(Err(e)),
        }
    }
    println!("stopped {}", stopped.join(", "));
    played.and(failed)
}

/// The demo proper, on the client root `client`.
async fn play(client: &zlink_runtime::ZLinkHost, nodes: &mut [NodeProcess]) -> Result<(), String> {
    client
        .ready(READY_WITHIN)
        .await
        .map_err(|e| format!("client root: {e}"))?;
    let chat = Chat::new(client)?;
    let want = chat.converse().await?;
    let lines: u64 = want.rooms.values().map(|r| r.posted).sum();
    println!(
        "{} users entered {} rooms and posted {lines} lines",
        want.users.len(),
        want.rooms.len()
    );
    chat.check(&want, "before the move").await?;
    show_rooms(&chat, &want).await?;

    let before = chat.places(&want).await?;
    println!("where each object lives (the node that answers `Where`):");
    show_places(&before, nodes);
    let leaver = busiest(&before, nodes).ok_or("no node owns anything")?;
    let name = nodes[leaver].name.clone();
    let owned = before
        .values()
        .filter(|p| p.node == nodes[leaver].rid)
        .count();
    println!(
        "{name} leaves (SIGTERM) with {owned} objects: host Relocate PlannedMaintenance, then shutdown"
    );
    let left = nodes[leaver].leave().await?;
    nodes[leaver].rid.clear(); // gone: not stopped again
    println!(
        "{name} relocated: {} {}, {} moved, {} remaining; shutdown {}",
        left.outcome, left.reason, left.moved, left.remaining, left.stopped
    );
    if left.outcome != "Relocated" || left.remaining != 0 {
        return Err(format!(
            "{name} could not move everything away ({} {})",
            left.outcome, left.reason
        ));
    }

    let after = chat.places(&want).await?;
    println!("where each object lives now:");
    show_places(&after, nodes);
    if let Some((label, _)) = after.iter().find(|(_, p)| p.pid == nodes[leaver].pid) {
        return Err(format!("{label} still answers from {name}, which left"));
    }
    chat.check(&want, "after the move").await?;
    println!(
        "after the move: all {} room histories and {} users intact ({lines} lines, none lost or duplicated)",
        want.rooms.len(),
        want.users.len()
    );
    Ok(())
}

/// Prints every room's members and history (its first and last lines).
async fn show_rooms(chat: &Chat, want: &Expected) -> Result<(), String> {
    for (id, room) in chat.rooms(want).await? {
        let members: Vec<&str> = room.members.iter().map(String::as_str).collect();
        println!(
            "#{id}: members {}; {} lines posted, the last {} kept (at most {HISTORY_LEN})",
            members.join(", "),
            room.posted,
            room.lines.len()
        );
        let n = room.lines.len();
        for (i, line) in room.lines.iter().enumerate() {
            if i == SHOWN && n > 2 * SHOWN {
                println!("  … {} more", n - 2 * SHOWN);
            }
            if i < SHOWN || i >= n.saturating_sub(SHOWN) {
                println!("  {:>3} {}: {}", line.seq, line.from, line.text);
            }
        }
    }
    Ok(())
}

/// Prints where each object lives, naming the node.
fn show_places(places: &BTreeMap<String, Place>, nodes: &[NodeProcess]) {
    for (label, place) in places {
        let node = nodes
            .iter()
            .find(|n| n.pid == place.pid)
            .map_or("an unknown node", |n| n.name.as_str());
        println!("  {label:<12} {node} (pid {})", place.pid);
    }
}

/// The index of the node that owns the most objects.
fn busiest(places: &BTreeMap<String, Place>, nodes: &[NodeProcess]) -> Option<usize> {
    (0..nodes.len())
        .map(|i| {
            (
                places.values().filter(|p| p.node == nodes[i].rid).count(),
                i,
            )
        })
        .filter(|(owned, _)| *owned > 0)
        .max_by_key(|(owned, i)| (*owned, std::cmp::Reverse(*i)))
        .map(|(_, i)| i)
}

/// Deletes every key under `prefix` (SCAN + UNLINK); returns how many there were. The
/// runtime's shutdown sweeps its own rows; what stays (counters, Relocation Store entries)
/// goes here.
async fn purge(redis: &str, prefix: &str) -> Result<usize, String> {
    use fred::prelude::*;
    use fred::types::CustomCommand;
    let config = Config::from_url(redis).map_err(|e| e.to_string())?;
    let client = Builder::from_config(config)
        .build()
        .map_err(|e| e.to_string())?;
    client.init().await.map_err(|e| e.to_string())?;
    let pattern = format!("{prefix}:*");
    let (mut cursor, mut purged) = ("0".to_owned(), 0);
    // Bounded: a SCAN over a few thousand keys ends in a few rounds.
    for _ in 0..10_000 {
        let scan = CustomCommand::new_static("SCAN", None, false);
        let args = vec![cursor.as_str(), "MATCH", pattern.as_str(), "COUNT", "1000"];
        let (next, keys): (String, Vec<String>) =
            client.custom(scan, args).await.map_err(|e| e.to_string())?;
        if !keys.is_empty() {
            purged += keys.len();
            let unlink = CustomCommand::new_static("UNLINK", None, false);
            let _: i64 = client
                .custom(unlink, keys)
                .await
                .map_err(|e| e.to_string())?;
        }
        cursor = next;
        if cursor == "0" {
            break;
        }
    }
    let _ = client.quit().await;
    Ok(purged)
}
