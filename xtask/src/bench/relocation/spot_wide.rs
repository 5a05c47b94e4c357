//! Case 3, `spotwide`: one `SpotWide` User Spot with N member Actors (default 10,000) moved
//! by a host Relocate, beside writing the same relocation inventory pages raw to the same
//! Redis.
//!
//! Two ZLink roots run in this process on one tokio runtime, each over its own connections to
//! the Redis Location and Relocation Stores under a fresh key prefix. A starts alone, creates
//! the Spot `bench.hall` and N members `bench.member` into it (c=64; a member lands on the
//! Spot's node), then B starts. The figure is the wall time of `A.relocate(PlannedMaintenance)`
//! — one aggregate unit: every participant sealed, captured (8-byte member state), one
//! reservation, one aggregate Restore, one NewOwner CAS on the Spot writing the inventory root,
//! the member records following it. The baseline, in the same run: the inventory of the same
//! Spot and members (`zlink_relocation::inventory`: pages of ≤ 1,024 entries / 1 MiB and the
//! root) written with plain Redis `SET`s, 64 in flight, on a fresh connection. Both are printed
//! with their ratio; the aim is a move under 1 s.

use std::time::{Duration, Instant};

use fred::interfaces::{ClientLike, KeysInterface};
use zlink_codec::records::ObjectRole;
use zlink_relocation::inventory::{
    InventoryBuilder, InventoryEntry, MemberKind, ObjectGeneration, ObjectId, StableType,
};
use zlink_runtime::Actor;
use zlink_runtime::BoxError;
use zlink_runtime::Spot;
use zlink_runtime::SpotRef;
use zlink_runtime::ZLinkHost;
use zlink_runtime::relocate::ActorStateAdapter;
use zlink_runtime::relocate::RelocateOptions;

use super::{Args, ms, to_string};

const HALL: &str = "bench.hall";
const MEMBER: &str = "bench.member";
/// Creations and raw writes in flight.
const C: usize = 64;
/// How long the roots may take to see each other.
const SETUP: Duration = Duration::from_secs(30);
/// The Relocate's deadline.
const RELOCATE_DEADLINE: Duration = Duration::from_secs(600);

/// The Spot (no state of its own: recreated on the target).
struct Hall;
impl Spot for Hall {}

/// A member Actor with an 8-byte counter.
struct Member {
    n: u64,
}
impl Actor for Member {}

struct MemberAdapter;
impl ActorStateAdapter<Member> for MemberAdapter {
    fn capture(&self, m: &Member) -> Result<Vec<u8>, BoxError> {
        Ok(m.n.to_le_bytes().to_vec())
    }
    fn restore(&self, bytes: &[u8]) -> Result<Member, BoxError> {
        let n = <[u8; 8]>::try_from(bytes).map_err(|_| "a member's state is 8 bytes")?;
        Ok(Member {
            n: u64::from_le_bytes(n),
        })
    }
}

pub(super) async fn run(args: &Args) -> Result<(), String> {
    let prefix = super::fresh_prefix("spotwide");
    println!();
    println!(
        "3. spotwide: one SpotWide User Spot with {} member Actors (PreserveStateWith, 8-byte \
         state) moved from A to B by host Relocate, beside writing the same inventory pages raw \
         (SET, {C} in flight); Redis at {} (key prefix {prefix})",
        args.actors, args.url
    );
    let mut hosts = Vec::new();
    let result = on_redis(args, &prefix, &mut hosts).await;
    for h in hosts.iter().rev() {
        let report = h.shutdown().await;
        if !report.failures.is_empty() {
            println!("   shutdown: {:?}", report.failures);
        }
    }
    drop(hosts);
    super::purge(&args.url, &prefix).await;
    result
}

async fn start_root(url: &str, prefix: &str) -> Result<ZLinkHost, String> {
    super::start_root(url, prefix, |n| {
        n.object_role(ObjectRole::Server)
            .user_spot_type::<Hall>(HALL, |t| {
                t.factory(|_ctx| async { Ok(Hall) })
                    .recreate_on_relocation()
            })
            .actor_type::<Member>(MEMBER, |t| {
                t.factory(|_ctx| async { Ok(Member { n: 0 }) })
                    .preserve_state_with(MemberAdapter)
            })
    })
    .await
}

async fn on_redis(args: &Args, prefix: &str, hosts: &mut Vec<ZLinkHost>) -> Result<(), String> {
    hosts.push(start_root(&args.url, prefix).await?);
    let t = Instant::now();
    // A root that just started is not yet among its own placement candidates: retry.
    let spots = hosts[0].spots().map_err(to_string)?;
    let deadline = Instant::now() + SETUP;
    let hall = loop {
        match spots.get_or_create(HALL, "bench-hall").await {
            Ok(hall) => break hall,
            Err(e) if Instant::now() >= deadline => return Err(format!("the hall: {e}")),
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    };
    let members = populate(&hosts[0], &hall, args.actors).await?;
    println!(
        "   the Spot and {} members created on A (alone) in {:.2} s",
        members.len(),
        t.elapsed().as_secs_f64()
    );
    hosts.push(start_root(&args.url, prefix).await?);
    for h in hosts.iter() {
        wait_peers(h).await?;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;

    let raw = raw_pages(&args.url, prefix, &hall, &members).await?;
    let t = Instant::now();
    let r = hosts[0]
        .relocate(RelocateOptions::planned_maintenance().deadline(RELOCATE_DEADLINE))
        .await
        .map_err(|e| format!("relocate: {e}"))?;
    let took = t.elapsed();
    if !r.is_relocated() {
        return Err(format!("the SpotWide Relocate ended {r:?}"));
    }
    let b = hosts[1]
        .nodes()
        .first()
        .map(|n| n.routing_id().clone())
        .ok_or("B has no node")?;
    let found = hosts[1]
        .spots()
        .map_err(to_string)?
        .find(hall.id.as_str())
        .await
        .map_err(to_string)?
        .ok_or("the hall is gone")?;
    if found.node != b {
        return Err("the hall is not on B after the move".into());
    }
    println!(
        "   host Relocate (1 aggregate unit, {} participants): {:.1} ms   (aim < 1 s)",
        members.len() + 1,
        ms(took)
    );
    println!(
        "   raw inventory: {} pages + root, {} bytes, SET in {:.1} ms",
        raw.pages,
        raw.bytes,
        ms(raw.took)
    );
    println!(
        "   raw pages / move = {:.3}x (the move's wall time against writing its inventory alone)",
        raw.took.as_secs_f64() / took.as_secs_f64()
    );
    println!(
        "   interruption of the aggregate unit: max {:.1} ms",
        ms(r.interruption.max)
    );
    Ok(())
}

/// Creates `n` members into `hall` through A's manager, `C` at a time; returns (id, generation).
async fn populate(
    host: &ZLinkHost,
    hall: &SpotRef,
    n: usize,
) -> Result<Vec<(String, u64)>, String> {
    let actors = host.actors().map_err(to_string)?;
    let mut out = Vec::with_capacity(n);
    let mut set = tokio::task::JoinSet::new();
    let mut next = 0;
    loop {
        while set.len() < C && next < n {
            let (actors, hall) = (actors.clone(), hall.clone());
            let id = format!("member-{next}");
            next += 1;
            set.spawn(async move {
                let r = actors.create(MEMBER, &id).in_spot(&hall).await;
                r.map(|a| (id, a.generation))
            });
        }
        let Some(done) = set.join_next().await else {
            break;
        };
        out.push(
            done.map_err(to_string)?
                .map_err(|e| format!("a member: {e}"))?,
        );
    }
    Ok(out)
}

async fn wait_peers(host: &ZLinkHost) -> Result<(), String> {
    let deadline = Instant::now() + SETUP;
    loop {
        let ready = host
            .nodes()
            .first()
            .map(|n| n.status().peers.iter().any(|p| p.weights.is_some()))
            .unwrap_or(false);
        if ready {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(format!("no Ready peer after {SETUP:?}"));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

struct Raw {
    pages: usize,
    bytes: usize,
    took: Duration,
}

/// Builds the inventory of `hall` and `members` and writes its pages and root with plain `SET`s
/// under `prefix`, `C` in flight.
async fn raw_pages(
    url: &str,
    prefix: &str,
    hall: &SpotRef,
    members: &[(String, u64)],
) -> Result<Raw, String> {
    let entry = |kind, id: &str, generation: u64, ty: &str| -> Result<InventoryEntry, String> {
        Ok(InventoryEntry::new(
            kind,
            ObjectId::new(id).map_err(to_string)?,
            ObjectGeneration::new(generation).map_err(to_string)?,
            StableType::new(ty).map_err(to_string)?,
        ))
    };
    let mut builder = InventoryBuilder::new();
    builder.push(entry(
        MemberKind::UserSpot,
        hall.id.as_str(),
        hall.generation,
        HALL,
    )?);
    for (id, generation) in members {
        builder.push(entry(MemberKind::Actor, id, *generation, MEMBER)?);
    }
    let inventory = builder.build().map_err(to_string)?;
    let mut writes: Vec<(String, bytes::Bytes)> = inventory
        .pages()
        .iter()
        .enumerate()
        .map(|(i, p)| (format!("{prefix}:raw-page:{i}"), p.bytes().clone()))
        .collect();
    writes.push((format!("{prefix}:raw-root"), inventory.root().encode()));
    let pages = writes.len() - 1;
    let bytes = writes.iter().map(|(_, b)| b.len()).sum();

    let config = fred::types::config::Config::from_url(url).map_err(to_string)?;
    let client = fred::types::Builder::from_config(config)
        .build()
        .map_err(to_string)?;
    client.init().await.map_err(to_string)?;
    let t = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    let mut queue = writes.into_iter();
    loop {
        while set.len() < C {
            let Some((key, value)) = queue.next() else {
                break;
            };
            let client = client.clone();
            set.spawn(async move {
                client
                    .set::<(), _, _>(key, value.to_vec(), None, None, false)
                    .await
            });
        }
        let Some(done) = set.join_next().await else {
            break;
        };
        done.map_err(to_string)?.map_err(to_string)?;
    }
    let took = t.elapsed();
    let _ = client.quit().await;
    Ok(Raw { pages, bytes, took })
}
