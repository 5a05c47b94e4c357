//! The driver of one seed: builds the turmoil simulation (one host per simulated node, one
//! thread, virtual time), steps it, applies the seed's faults at their times, keeps the Store
//! clock on virtual time, and hands the checker's verdict back.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use zlink_store_spi::entropy::Simulation;

use crate::SimConfig;
use crate::faults::{self, Action};
use crate::host::{host_main, host_name};
use crate::world::{MoveOrder, World};

/// What one seed's run found.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SeedReport {
    /// The seed.
    pub seed: u64,
    /// The invariant violations (empty: clean).
    pub violations: Vec<String>,
    /// A hash of the whole trace.
    pub trace_hash: String,
    /// The trace's last lines (all of it with [`SimConfig::full_trace`]).
    pub trace_tail: Vec<String>,
    /// Requests answered.
    pub answered: u64,
    /// Requests failed, by error kind.
    pub failed: std::collections::BTreeMap<String, u64>,
    /// Fault actions applied.
    pub faults: usize,
    /// Virtual time simulated.
    pub simulated: Duration,
    /// Whether the simulation itself failed (a host's software returned an error or panicked).
    pub sim_error: Option<String>,
    /// Two activations of one id that answered at once right after a Store rollback, within
    /// the bound the runtime guarantees (`docs/store-epoch.md`, "What the runtime cannot
    /// do"): (id, overlap in ms). Not violations; an overlap past the bound is one.
    pub rollback_doubles: Vec<(String, u64)>,
}

impl SeedReport {
    /// Whether the seed ran clean.
    pub fn is_clean(&self) -> bool {
        self.violations.is_empty() && self.sim_error.is_none()
    }
}

/// Runs seed `seed` under `config`.
///
/// The run goes on a thread of its own: a task that never yields (a retry loop that awaits
/// only ready futures) stops virtual time inside one turmoil step, so a run that takes longer
/// than [`SimConfig::wall_limit`] of real time is reported as stuck, with its virtual time
/// and trace, and left behind (the thread ends with the process).
pub fn run_seed(seed: u64, config: &SimConfig) -> SeedReport {
    let world = Arc::new(World::new(seed, config.clone()));
    let (tx, rx) = std::sync::mpsc::channel();
    let for_run = Arc::clone(&world);
    let spawned = std::thread::Builder::new()
        .name(format!("sim-seed-{seed}"))
        .spawn(move || {
            let _ = tx.send(run_world(for_run));
        });
    if let Err(e) = spawned {
        return stuck_report(&world, format!("cannot start the run's thread: {e}"));
    }
    match rx.recv_timeout(config.wall_limit) {
        Ok(report) => report,
        Err(_) => {
            let at = world.time_ms();
            stuck_report(
                &world,
                format!(
                    "stuck: virtual time stopped at {at} ms for {:?} of real time (a task that never yields?)",
                    config.wall_limit
                ),
            )
        }
    }
}

/// The report of a run that did not end: what the checker has so far.
fn stuck_report(world: &World, why: String) -> SeedReport {
    let (violations, trace_hash, trace_tail, answered, failed) = match world.checker.try_lock() {
        Some(c) => {
            let (answered, failed) = c.tally();
            let t = c.trace();
            (
                c.violations().to_vec(),
                c.trace_hash(),
                t[t.len().saturating_sub(40)..].to_vec(),
                answered,
                failed,
            )
        }
        None => (Vec::new(), String::new(), Vec::new(), 0, Default::default()),
    };
    SeedReport {
        seed: world.seed,
        violations,
        trace_hash,
        trace_tail,
        answered,
        failed,
        faults: 0,
        simulated: Duration::from_millis(world.time_ms()),
        sim_error: Some(why),
        rollback_doubles: Vec::new(),
    }
}

/// The hosts' wall clock at virtual time zero: each seed in its own span of 1,000,000 s
/// (11.6 days) from 2023-11-14, later for a larger seed (modulo 1,000,000; the largest stays
/// below 2^53 ms, so every record field holding it is exact in JSON). A lifecycle generation is the
/// start time made strictly increasing within the process, so a seed run after others in one
/// process issues the same generations as when it runs alone only if its clock starts past
/// theirs (virtual runs last minutes, far less than one span).
fn wall_epoch(seed: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(1_700_000_000_000 + (seed % 1_000_000) * 1_000_000_000)
}

/// Removes one `x` from `v` (if any).
fn remove_one<T: PartialEq>(v: &mut Vec<T>, x: &T) {
    if let Some(i) = v.iter().position(|y| y == x) {
        v.remove(i);
    }
}

fn run_world(world: Arc<World>) -> SeedReport {
    let seed = world.seed;
    let config = &world.config.clone();
    // Every host runs on this thread: from here on, ids, the wall clock and map hashing come
    // from the seed (zlink_store_spi::entropy).
    let epoch = wall_epoch(seed);
    let _entered = Simulation::enter(seed ^ 0x0e47_0e47, move || {
        epoch + turmoil::sim_elapsed().unwrap_or_default()
    });
    let end = config.end();
    let mut sim = turmoil::Builder::new()
        .simulation_duration(end + Duration::from_secs(1))
        .tick_duration(config.tick)
        .min_message_latency(Duration::from_millis(1))
        .max_message_latency(config.max_latency)
        .rng_seed(seed)
        .build();
    for h in 0..config.hosts {
        let world = Arc::clone(&world);
        sim.host(host_name(h), move || host_main(Arc::clone(&world), h));
    }
    let schedule = if config.faults > 0 {
        faults::draw(seed, config.hosts, config.workload, config.faults)
    } else {
        Vec::new()
    };
    let schedule = faults::draw_moves(seed, config.hosts, config.workload, config.moves, schedule);
    // Partitions and crashed hosts in effect (a reply may be lost while any is).
    // (Vecs, not sets: two draws may cut the same pair or crash the same host at once.)
    let mut cut: Vec<(usize, usize)> = Vec::new();
    let mut down: Vec<usize> = Vec::new();
    // Hosts whose software is crashed now: a `Restart` brings one back. Two crash draws of one
    // host may overlap, so the first `Restart` brings it back while `down` still counts the
    // other draw, and the second one bounces a running host: its run ends then too.
    let mut crashed: Vec<usize> = Vec::new();
    let mut next = 0;
    let mut checkpoint = None;
    let mut sim_error = None;
    loop {
        let elapsed = sim.elapsed();
        world.set_time(elapsed);
        let now_ms = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
        while let Some((at, action)) = schedule.get(next).filter(|(at, _)| *at <= now_ms) {
            let _ = at;
            next += 1;
            world
                .checker
                .lock()
                .note(now_ms, format!("fault {action:?}"));
            match action {
                Action::Partition { a, b, one_way } => {
                    cut.push((*a, *b));
                    world.cuts.cut(&host_name(*a), &host_name(*b), *one_way);
                }
                Action::Repair { a, b } => {
                    remove_one(&mut cut, &(*a, *b));
                    world.cuts.heal(&host_name(*a), &host_name(*b));
                }
                Action::DropConnections { a, b } => {
                    world.cuts.reset(&host_name(*a), &host_name(*b));
                    // What was on its way is lost: for the checker, a fault in effect now.
                    world.checker.lock().network_faults(now_ms, true);
                }
                Action::Crash(h) => {
                    down.push(*h);
                    let run = world.current_run(*h);
                    sim.crash(host_name(*h));
                    if !crashed.contains(h) {
                        crashed.push(*h);
                        world.checker.lock().run_ended((*h, run), now_ms);
                    }
                }
                Action::Restart(h) => {
                    remove_one(&mut down, h);
                    if !crashed.contains(h) {
                        // A bounce of a running host: the run it had ends here.
                        let run = world.current_run(*h);
                        world.checker.lock().run_ended((*h, run), now_ms);
                    }
                    crashed.retain(|c| c != h);
                    sim.bounce(host_name(*h));
                }
                Action::Move { to, pick } => {
                    let order = world.checker.lock().move_order(*to, *pick, &down);
                    match order {
                        Some((from, id)) => {
                            let until_ms = now_ms + 2_000;
                            world.order_move(
                                from,
                                MoveOrder {
                                    id,
                                    to: *to,
                                    until_ms,
                                },
                            );
                        }
                        None => world.checker.lock().note(now_ms, "no counter to move"),
                    }
                }
                Action::Checkpoint => checkpoint = Some(world.memory.checkpoint()),
                Action::RollBack => {
                    if let Some(c) = checkpoint.take() {
                        if world.memory.roll_back_to(&c).is_err() {
                            sim_error = Some("a checkpoint of another store".to_owned());
                        }
                        world.checker.lock().rolled_back(now_ms);
                    }
                }
                Action::StallStore { host, .. }
                | Action::FailStore(host)
                | Action::HealStore(host)
                | Action::LoseNextWriteReply(host) => {
                    faults::store_fault(&world.stores[*host], action);
                }
            }
            world
                .checker
                .lock()
                .network_faults(now_ms, !cut.is_empty() || !down.is_empty());
        }
        if elapsed >= end || world.is_final_done() && elapsed >= config.final_probe_at() {
            break;
        }
        if let Err(e) = sim.step() {
            sim_error = Some(e.to_string());
            break;
        }
    }
    let simulated = sim.elapsed();
    let end_ms = u64::try_from(simulated.as_millis()).unwrap_or(u64::MAX);
    if !world.is_final_done() && sim_error.is_none() {
        world
            .checker
            .lock()
            .note(end_ms, "the final probe did not finish within the run");
    }
    // The hosts (and every runtime in them) go before the verdict is read.
    drop(sim);
    let mut checker = world.checker.lock();
    // A request whose steps could still be inside their deadlines is not counted open.
    let in_flight = u64::try_from(2 * crate::host::HUNG_AFTER.as_millis()).unwrap_or(u64::MAX);
    checker.finish(end_ms, end_ms.saturating_sub(in_flight));
    let (answered, failed) = checker.tally();
    let trace = checker.trace();
    let keep = if config.full_trace { trace.len() } else { 40 };
    SeedReport {
        seed,
        violations: checker.violations().to_vec(),
        trace_hash: checker.trace_hash(),
        trace_tail: trace[trace.len().saturating_sub(keep)..].to_vec(),
        answered,
        failed,
        faults: next,
        simulated,
        sim_error,
        rollback_doubles: checker.rollback_doubles().to_vec(),
    }
}
