//! What the hosts of one run share (they are in one process): the in-memory Location Store
//! behind one fault wrapper per host, its clock, the checker and the counters that name
//! activations and requests.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use zlink_runtime::location::RoutingId;
use zlink_store_conformance::FaultyLocationStore;
use zlink_store_spi::{ManualClock, MemoryLocationStore, MemoryRelocationStore, StoreTime};

use crate::SimConfig;
use crate::checker::{Checker, Ending};
use crate::net::Cuts;

/// The Store clock's value at virtual time zero (any fixed instant: runs must replay).
const STORE_EPOCH_MS: u64 = 1_700_000_000_000;

/// The shared state of one run.
#[derive(Debug)]
pub(crate) struct World {
    pub(crate) seed: u64,
    pub(crate) config: SimConfig,
    pub(crate) memory: MemoryLocationStore,
    pub(crate) clock: ManualClock,
    /// One fault wrapper per host over [`Self::memory`]: a Store fault can hit one host.
    pub(crate) stores: Vec<Arc<FaultyLocationStore<MemoryLocationStore>>>,
    pub(crate) checker: Mutex<Checker>,
    serials: AtomicU64,
    requests: AtomicU64,
    /// How many times each host's software started (its run number).
    runs: Vec<AtomicU64>,
    /// The virtual time the driver last set, in milliseconds.
    time_ms: AtomicU64,
    /// Set once host 0's final probe went through every id.
    final_done: AtomicBool,
    /// The moves each host's software is asked to make (the driver adds, the host takes).
    moves: Vec<Mutex<Vec<MoveOrder>>>,
    /// Each host's MeshNode routing id, set when its current run starts serving.
    rids: Mutex<Vec<Option<RoutingId>>>,
    /// The Relocation Store the hosts share (on the Store clock).
    pub(crate) relocation: MemoryRelocationStore,
    /// The network partitions in effect (`net.rs`: held on the sending side, as TCP would).
    pub(crate) cuts: Arc<Cuts>,
}

/// A move a host is asked to make: its activation of `id` to host `to`, trying until
/// `until_ms` while no target is eligible yet (the target not yet discovered).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MoveOrder {
    pub(crate) id: String,
    pub(crate) to: usize,
    pub(crate) until_ms: u64,
}

impl World {
    pub(crate) fn new(seed: u64, config: SimConfig) -> Self {
        let clock = ManualClock::new(StoreTime::from_millis(STORE_EPOCH_MS));
        let memory = MemoryLocationStore::with_clock(Arc::new(clock.clone()));
        let relocation = MemoryRelocationStore::with_clock(Arc::new(clock.clone()));
        let stores = (0..config.hosts)
            .map(|_| Arc::new(FaultyLocationStore::new(memory.clone())))
            .collect();
        World {
            seed,
            memory,
            clock,
            stores,
            checker: Mutex::new(Checker::default()),
            serials: AtomicU64::new(0),
            requests: AtomicU64::new(0),
            runs: (0..config.hosts).map(|_| AtomicU64::new(0)).collect(),
            time_ms: AtomicU64::new(0),
            final_done: AtomicBool::new(false),
            moves: (0..config.hosts).map(|_| Mutex::new(Vec::new())).collect(),
            rids: Mutex::new(vec![None; config.hosts]),
            relocation,
            cuts: Arc::new(Cuts::default()),
            config,
        }
    }

    /// The virtual time of the running simulation, in milliseconds.
    pub(crate) fn now_ms() -> u64 {
        turmoil::sim_elapsed()
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .unwrap_or(0)
    }

    /// Moves the Store clock to virtual time `elapsed`.
    pub(crate) fn set_time(&self, elapsed: Duration) {
        let ms = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
        self.clock.set(StoreTime::from_millis(STORE_EPOCH_MS + ms));
        self.time_ms.store(ms, Ordering::Relaxed);
    }

    /// The virtual time the driver last set, in milliseconds.
    pub(crate) fn time_ms(&self) -> u64 {
        self.time_ms.load(Ordering::Relaxed)
    }

    pub(crate) fn next_serial(&self) -> u64 {
        self.serials.fetch_add(1, Ordering::Relaxed) + 1
    }

    pub(crate) fn next_request(&self) -> u64 {
        self.requests.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Starts the next run of `host`'s software; returns its run number (0 first).
    pub(crate) fn start_run(&self, host: usize) -> u64 {
        self.runs[host].fetch_add(1, Ordering::Relaxed)
    }

    /// The run of `host` now going (the last started).
    pub(crate) fn current_run(&self, host: usize) -> u64 {
        self.runs[host].load(Ordering::Relaxed).saturating_sub(1)
    }

    pub(crate) fn final_done(&self) {
        self.final_done.store(true, Ordering::Relaxed);
    }

    pub(crate) fn is_final_done(&self) -> bool {
        self.final_done.load(Ordering::Relaxed)
    }

    /// Asks `host` to make a move.
    pub(crate) fn order_move(&self, host: usize, order: MoveOrder) {
        self.moves[host].lock().push(order);
    }

    /// The moves `host` was asked to make since it last took them.
    pub(crate) fn take_moves(&self, host: usize) -> Vec<MoveOrder> {
        std::mem::take(&mut *self.moves[host].lock())
    }

    /// Records the routing id of `host`'s MeshNode.
    pub(crate) fn set_rid(&self, host: usize, rid: RoutingId) {
        self.rids.lock()[host] = Some(rid);
    }

    /// The routing id of `host`'s MeshNode, once it served.
    pub(crate) fn rid(&self, host: usize) -> Option<RoutingId> {
        self.rids.lock()[host].clone()
    }

    /// The host whose MeshNode has routing id `rid`.
    pub(crate) fn host_of(&self, rid: &RoutingId) -> Option<usize> {
        self.rids
            .lock()
            .iter()
            .position(|r| r.as_ref() == Some(rid))
    }

    pub(crate) fn note(&self, line: impl AsRef<str>) {
        self.checker.lock().note(Self::now_ms(), line);
    }

    pub(crate) fn handled(&self, id: &str, serial: u64, host: usize, count: u64, req: u64) {
        self.checker
            .lock()
            .handled(id, serial, host, count, req, Self::now_ms());
    }

    pub(crate) fn issued(&self, req: u64, run: (usize, u64), worker: usize, id: &str) {
        self.checker
            .lock()
            .issued(req, run, worker, id, Self::now_ms());
    }

    pub(crate) fn ended(&self, req: u64, worker: usize, ending: Ending) {
        self.checker
            .lock()
            .ended(req, worker, ending, Self::now_ms());
    }
}
