//! `zlink-chat node`: one Object Server process of the chat mesh on the Redis Location and
//! Relocation Stores, serving `user` Actors and `room` Instance Spots.
//!
//! It speaks to whoever started it in lines on stdout:
//!
//! - `READY <routing-id> <pid>` (the routing id as text) once the host is ready (connected to every node discovery lists);
//! - on SIGTERM it leaves gracefully: a host Relocate (`PlannedMaintenance`) moves every user
//!   and room it owns, with their state, to the other nodes —
//!   `RELOCATED <outcome> <reason> <moved> <remaining>` — and then it shuts down;
//! - on end of stdin (or SIGINT) it shuts down without moving anything;
//! - last, `STOPPED <outcome>` and exit 0.
#![allow(
    clippy::print_stdout,
    reason = "the READY / RELOCATED / STOPPED lines are this process's protocol with the demo"
)]

use std::io::BufRead;
use std::sync::Arc;
use std::time::Duration;

use tokio::signal::unix::{SignalKind, signal};
use zlink_runtime::config::ObjectRole;
use zlink_runtime::location::LocationOptions;
use zlink_runtime::redis::{
    RedisLocationOptions, RedisLocationStore, RedisRelocationOptions, RedisRelocationStore,
};
use zlink_runtime::relocate::RelocateOptions;
use zlink_runtime::{BoxError, MeshName, ZLink, ZLinkHost};

use crate::model::{self, MESH, ROOM, USER};

/// How long the host may take to connect to the nodes it discovers at start.
const READY_WITHIN: Duration = Duration::from_secs(30);
/// How long a leaving node's host Relocate may take.
const RELOCATE_DEADLINE: Duration = Duration::from_secs(30);
/// How often each node reads the list of nodes (the default is 1 s; a demo wants it quicker).
const POLLING: Duration = Duration::from_millis(200);

/// Runs one chat node until it is told to leave or stop (see the module docs).
pub(crate) async fn run(redis: &str, prefix: &str) -> Result<(), BoxError> {
    let host = start(redis, prefix, ObjectRole::Server).await?;
    let ending = serve(&host).await;
    if matches!(ending, Ok(Ending::Leave)) {
        leave(&host).await;
    }
    // Whatever happened once it started, the host shuts down: its rows are swept and its
    // owner lease released.
    let report = host.shutdown().await;
    println!("STOPPED {:?}", report.outcome);
    ending.map(drop)
}

/// Serves until SIGTERM, SIGINT or the end of stdin, once the host is ready.
async fn serve(host: &ZLinkHost) -> Result<Ending, BoxError> {
    host.ready(READY_WITHIN).await?;
    let node = host.nodes().first().ok_or("the host has no MeshNode")?;
    let rid = model::rid_text(node.routing_id());
    println!("READY {rid} {}", std::process::id());
    wait_for_leave_or_stop().await
}

/// Starts a root with one MeshNode of the chat mesh on the Redis stores under `prefix`: an
/// Object Server hosting users and rooms, or an Object Client that only calls them.
pub(crate) async fn start(
    redis: &str,
    prefix: &str,
    role: ObjectRole,
) -> Result<ZLinkHost, BoxError> {
    let server = role == ObjectRole::Server;
    let location = RedisLocationOptions::from_url(redis)?.with_key_prefix(prefix)?;
    let unreachable = |e| format!("cannot reach the Redis at {redis}: {e}");
    let location = RedisLocationStore::connect(location)
        .await
        .map_err(unreachable)?;
    let mut root = ZLink::builder()
        .location_store(Arc::new(location))
        .location_options(LocationOptions::default().polling_interval(POLLING));
    if server {
        // Where a moving object's state and a new room's first message wait (a client that
        // only calls objects needs none).
        let relocation = RedisRelocationOptions::from_url(redis)?.with_key_prefix(prefix)?;
        let relocation = RedisRelocationStore::connect(relocation)
            .await
            .map_err(unreachable)?;
        root = root.relocation_store(Arc::new(relocation));
    }
    let host = root
        .route_mesh(MeshName::new(MESH)?, |node| {
            let node = node.object_role(role).routing_id_prefix(MESH);
            if !server {
                return node;
            }
            node.actor_type(USER, model::user_type)
                .instance_spot_type(ROOM, model::room_type)
        })
        .build()
        .start()
        .await?;
    Ok(host)
}

/// How a node's run ends.
#[derive(Debug, PartialEq, Eq)]
enum Ending {
    /// SIGTERM: move every object away, then stop.
    Leave,
    /// End of stdin or SIGINT: stop.
    Stop,
}

/// Waits for SIGTERM, SIGINT or the end of stdin.
async fn wait_for_leave_or_stop() -> Result<Ending, BoxError> {
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    // stdin on a plain thread: a read of stdin cannot be cancelled, so it is not a task.
    let (eof_tx, eof) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        for _ in std::io::stdin().lock().lines().map_while(Result::ok) {}
        let _ = eof_tx.send(());
    });
    Ok(tokio::select! {
        _ = term.recv() => Ending::Leave,
        _ = int.recv() => Ending::Stop,
        _ = eof => Ending::Stop,
    })
}

/// Moves every object of `host` to the other nodes (host Relocate, `PlannedMaintenance`) and
/// prints the result.
async fn leave(host: &ZLinkHost) {
    let options = RelocateOptions::planned_maintenance().deadline(RELOCATE_DEADLINE);
    match host.relocate(options).await {
        Ok(r) => println!(
            "RELOCATED {:?} {:?} {} {}",
            r.outcome, r.reason, r.moved, r.remaining
        ),
        Err(e) => {
            tracing::warn!(error = %e, "host Relocate refused");
            println!("RELOCATED Refused {:?} 0 0", e.kind());
        }
    }
}
