//! One simulated host's software: a real `ZLink` root (one Object Server MeshNode) on the
//! turmoil network and the shared in-memory Location Store, and its workload: workers that
//! `get_or_create` counter Actors by id and probe them, every outcome to the checker. Host 0
//! also runs the final probe of every id once the faults have healed. When the seed draws
//! moves, every host shares the in-memory Relocation Store and makes the moves the driver asks
//! of it (`move_one`).

use std::sync::Arc;
use std::time::Duration;

use zlink_runtime::config::ObjectRole;
use zlink_runtime::handler::{InvalidCall, ObjectRelocationRefusal};
use zlink_runtime::location::LocationOptions;
use zlink_runtime::relocate::ObjectTarget;
use zlink_runtime::{
    ActorManager, CallOptions, DynLocationStore, DynRelocationStore, MeshName, ZLink, ZLinkError,
    ZLinkHost,
};

use crate::checker::Ending;
use crate::counter::{COUNTER, Probe, counter_type};
use crate::net::TurmoilNetwork;
use crate::rng::Rng;
use crate::world::{MoveOrder, World};

/// The port every host's MeshNode listens on.
const PORT: u16 = 7000;

/// How long a request waits for its reply.
const REPLY_TIMEOUT: Duration = Duration::from_secs(8);

/// How long a `get_or_create` may take (the runtime's default is 30 s; shorter keeps every call
/// well inside a run).
const CREATE_DEADLINE: Duration = Duration::from_secs(8);

/// The turmoil host name of host `h`.
pub(crate) fn host_name(h: usize) -> String {
    format!("h{h}")
}

/// The simulated hosts' owner-lease TTL, in milliseconds.
pub(crate) const LEASE_TTL_MS: u64 = 4_000;

/// The simulated hosts' owner-lease TTL.
const LEASE_TTL: Duration = Duration::from_millis(LEASE_TTL_MS);

/// Location options scaled for short runs: a lease of [`LEASE_TTL`] renewed every second.
fn location_options(write_verification: bool) -> LocationOptions {
    LocationOptions::default()
        .owner_lease_renew_interval(Duration::from_secs(1))
        .owner_lease_renew_timeout(Duration::from_millis(500))
        .owner_lease_ttl(LEASE_TTL)
        .owner_lease_fencing_margin(Duration::from_secs(1))
        .polling_interval(Duration::from_millis(500))
        .store_failure_grace(Duration::from_secs(5))
        .creation_cleanup_window(Duration::from_secs(3))
        .verify_acknowledged_writes(write_verification)
}

/// The software of host `h` (turmoil runs it again on a restart).
pub(crate) async fn host_main(world: Arc<World>, h: usize) -> turmoil::Result {
    let run = world.start_run(h);
    let name = host_name(h);
    let store: Arc<dyn DynLocationStore> = world.stores[h].clone();
    let mesh = MeshName::new("sim").map_err(|e| e.to_string())?;
    let for_node = Arc::clone(&world);
    let seed = world.seed ^ ((h as u64) << 48) ^ (run << 32) ^ 0x5eed;
    let node_name = name.clone();
    let world_cuts = world.cuts.clone();
    let net_name = name.clone();
    let mut builder = ZLink::builder();
    if world.config.moves > 0 {
        let relocation: Arc<dyn DynRelocationStore> = Arc::new(world.relocation.clone());
        builder = builder.relocation_store(relocation);
    }
    let started = builder
        .location_store(store)
        .location_options(location_options(world.config.write_verification))
        .route_mesh(mesh, move |n| {
            n.bind_host("0.0.0.0")
                .advertised_host(node_name.clone())
                .port(PORT)
                .routing_id_prefix(node_name)
                .network(Arc::new(TurmoilNetwork::new(
                    net_name.clone(),
                    world_cuts.clone(),
                )))
                .transport_seed(seed)
                .object_role(ObjectRole::Server)
                .actor_type(COUNTER, counter_type(for_node, h))
        })
        .build()
        .start()
        .await;
    let host = match started {
        Ok(host) => host,
        Err(e) => {
            world.note(format!("h{h}#{run} failed to start: {:?}", e.kind()));
            // Turmoil keeps the host; it simply serves nothing until a restart.
            std::future::pending::<()>().await;
            return Ok(());
        }
    };
    world.note(format!("h{h}#{run} serving"));
    if let Some(node) = host.nodes().first() {
        world.set_rid(h, node.routing_id().clone());
    }
    let actors = host
        .actors()
        .map_err(|e| e.to_string())?
        .with_deadline(CREATE_DEADLINE);
    let mut workers = Vec::new();
    for w in 0..world.config.workers {
        let world = Arc::clone(&world);
        let actors = actors.clone();
        workers.push(tokio::spawn(worker(world, actors, (h, run), w)));
    }
    if h == 0 && run == 0 {
        let world = Arc::clone(&world);
        let actors = actors.clone();
        tokio::spawn(final_probe(world, actors));
    }
    // The host lives until the simulation ends or turmoil crashes it (dropping the root
    // without a shutdown, as a killed process would), making the moves asked of it.
    if world.config.moves == 0 {
        std::future::pending::<()>().await;
    }
    loop {
        tokio::time::sleep(Duration::from_millis(20)).await;
        for order in world.take_moves(h) {
            let world = Arc::clone(&world);
            let (host, actors) = (host.clone(), actors.clone());
            tokio::spawn(async move { move_one(&world, &host, &actors, h, order).await });
        }
    }
}

/// Makes one move asked of host `h`: if its node owns the counter, moves it to the order's
/// host, trying again every 100 ms while that host is not an eligible target yet (not yet
/// discovered) until the order's deadline.
async fn move_one(world: &World, host: &ZLinkHost, actors: &ActorManager, h: usize, o: MoveOrder) {
    let id = &o.id;
    loop {
        let owner = match actors.find(id).await {
            Ok(Some(r)) => r,
            Ok(None) => return world.note(format!("h{h} move {id}: no record")),
            Err(e) => return world.note(format!("h{h} move {id}: find {:?}", e.kind())),
        };
        if world.host_of(&owner.node) != Some(h) {
            return world.note(format!("h{h} move {id}: not owned here"));
        }
        let Some(to) = world.rid(o.to) else {
            return world.note(format!("h{h} move {id}: h{} never served", o.to));
        };
        match host.relocate_object(owner, ObjectTarget::Node(to)).await {
            Ok(_) => return world.note(format!("h{h} moved {id} to h{}", o.to)),
            Err(ZLinkError::InvalidCall(InvalidCall::ObjectRelocation {
                reason:
                    reason @ (ObjectRelocationRefusal::TargetNotEligible
                    | ObjectRelocationRefusal::NoEligibleTarget),
            })) if World::now_ms() < o.until_ms => {
                let _ = reason;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => return world.note(format!("h{h} move {id} to h{} failed: {e}", o.to)),
        }
    }
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// How long one step of a call may take (its own deadline and 4 s more) before the checker
/// calls it hung (the simulation then stops waiting for it, so the trace says which step).
pub(crate) const HUNG_AFTER: Duration = Duration::from_secs(12);

async fn probe(actors: &ActorManager, id: &str, req: u64) -> Ending {
    let options = CallOptions::default().reply_timeout(REPLY_TIMEOUT);
    match tokio::time::timeout(HUNG_AFTER, actors.get_or_create(COUNTER, id)).await {
        Err(_) => return Ending::Hung("get_or_create"),
        Ok(Err(e)) => return Ending::Failed(format!("{:?}", e.kind())),
        Ok(Ok(_)) => {}
    }
    match tokio::time::timeout(
        HUNG_AFTER,
        actors.request_with(id, &Probe { req }, &options),
    )
    .await
    {
        Err(_) => Ending::Hung("request"),
        Ok(Ok(r)) => Ending::Answered {
            serial: r.serial,
            count: r.count,
        },
        Ok(Err(e)) => Ending::Failed(format!("{:?}", e.kind())),
    }
}

/// One worker: until the workload ends, waits a little, picks an id and probes it.
async fn worker(world: Arc<World>, actors: ActorManager, run: (usize, u64), w: usize) {
    let stream = ((run.0 as u64) << 40) | (run.1 << 20) | w as u64;
    let mut rng = Rng::new(world.seed, stream + 1);
    let until = ms(world.config.workload);
    loop {
        let pause = rng.between(1, world.config.max_pause_ms);
        tokio::time::sleep(Duration::from_millis(pause)).await;
        if World::now_ms() >= until {
            return;
        }
        // The ids in use grow over the workload, so creations (and their Store writes) keep
        // happening while faults hit, not only at the start.
        let ids = world.config.actors as u64;
        let grown = 2 + ids.saturating_sub(2) * World::now_ms() / until.max(1);
        let id = format!("c{}", rng.below(grown.min(ids)));
        let req = world.next_request();
        world.issued(req, run, w, &id);
        let ending = probe(&actors, &id, req).await;
        world.ended(req, w, ending);
    }
}

/// After every fault healed and the system settled: every id that ever answered answers
/// again within the bound (retrying until then).
async fn final_probe(world: Arc<World>, actors: ActorManager) {
    let at = ms(world.config.final_probe_at());
    let now = World::now_ms();
    tokio::time::sleep(Duration::from_millis(at.saturating_sub(now))).await;
    let ids = world.checker.lock().answered_ids();
    let bound = World::now_ms() + ms(world.config.reach_bound);
    for id in ids {
        loop {
            match probe(&actors, &id, 0).await {
                Ending::Answered { serial, count } => {
                    world.note(format!("final {id} = activation {serial} count {count}"));
                    break;
                }
                Ending::Hung(step) => {
                    let why = format!("{step} hung past {HUNG_AFTER:?}");
                    world.checker.lock().unreachable(&id, &why, World::now_ms());
                    break;
                }
                Ending::Failed(kind) if World::now_ms() >= bound => {
                    world
                        .checker
                        .lock()
                        .unreachable(&id, &kind, World::now_ms());
                    break;
                }
                Ending::Failed(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }
    world.note("final probe done");
    world.final_done();
}
