//! The capacity invariant: after any sequence of authority operations, conflicting and
//! concurrent ones included, every node's capacity row equals the sum of the allocations
//! recorded in authority rows (reserved / active by state) and relocation reservations
//! (reserved on the target), and no row passes its node's limits.
//!
//! `proptest_capacity_invariant` explores sequences with shrinking on the memory store; the
//! suite test `capacity_counters_equal_allocations_after_random_operations` runs seeded
//! sequences on every backend.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use proptest::prelude::*;
use zlink_codec::records::{AuthorityRecord, ObjectKind};
use zlink_store_spi::StoreKey;

use super::support::{Harness, HarnessExt, Host, capability, descriptor, snapshot_of};
use crate::authority::decode_reservation;
use crate::{
    AuthorityHandle, AuthorityRead, CapacityBundle, CapacityRow, Outcome, PlacementRng,
    ReserveRequest, TargetReservation,
};
use crate::{LocationError, NodeKey, ObjectId};

const OBJECTS: u8 = 6;
const HOSTS: usize = 3;

#[derive(Debug, Clone)]
pub(crate) enum Step {
    Reserve { obj: u8, spot: bool, by: u8, on: u8 },
    Commit { obj: u8 },
    Abort { obj: u8 },
    Delete { obj: u8 },
    Preserve { obj: u8 },
    Secure { obj: u8, to: u8 },
    NewOwner { obj: u8 },
    Release { obj: u8 },
    StaleDelete { obj: u8 },
}

fn step_strategy() -> impl Strategy<Value = Step> {
    let obj = 0..OBJECTS;
    let host = 0..HOSTS as u8;
    prop_oneof![
        3 => (obj.clone(), any::<bool>(), host.clone(), host.clone())
            .prop_map(|(obj, spot, by, on)| Step::Reserve { obj, spot, by, on }),
        3 => obj.clone().prop_map(|obj| Step::Commit { obj }),
        1 => obj.clone().prop_map(|obj| Step::Abort { obj }),
        1 => obj.clone().prop_map(|obj| Step::Delete { obj }),
        1 => obj.clone().prop_map(|obj| Step::Preserve { obj }),
        2 => (obj.clone(), host).prop_map(|(obj, to)| Step::Secure { obj, to }),
        2 => obj.clone().prop_map(|obj| Step::NewOwner { obj }),
        1 => obj.clone().prop_map(|obj| Step::Release { obj }),
        1 => obj.prop_map(|obj| Step::StaleDelete { obj }),
    ]
}

/// Groups of 1..=3 steps; the steps of a group run concurrently.
fn groups_strategy(max: usize) -> impl Strategy<Value = Vec<Vec<Step>>> {
    prop::collection::vec(prop::collection::vec(step_strategy(), 1..=3), 1..max)
}

fn seeded_groups(seed: u64, n: usize) -> Vec<Vec<Step>> {
    let mut rng = PlacementRng::seeded(seed);
    let mut pick = |n: u64| rng.below(n);
    (0..n)
        .map(|_| {
            (0..=pick(3))
                .map(|_| {
                    let obj = pick(u64::from(OBJECTS)) as u8;
                    let h = |v: u64| v as u8;
                    match pick(15) {
                        0..=2 => Step::Reserve {
                            obj,
                            spot: pick(2) == 0,
                            by: h(pick(HOSTS as u64)),
                            on: h(pick(HOSTS as u64)),
                        },
                        3..=5 => Step::Commit { obj },
                        6 => Step::Abort { obj },
                        7 => Step::Delete { obj },
                        8 => Step::Preserve { obj },
                        9 | 10 => Step::Secure {
                            obj,
                            to: h(pick(HOSTS as u64)),
                        },
                        11 | 12 => Step::NewOwner { obj },
                        13 => Step::Release { obj },
                        _ => Step::StaleDelete { obj },
                    }
                })
                .collect()
        })
        .collect()
}

struct World {
    hosts: Vec<Arc<Host>>,
    /// Latest known handle per object, and one older handle (for stale operations).
    handles: HashMap<u8, AuthorityHandle>,
    stale: HashMap<u8, AuthorityHandle>,
    reservations: HashMap<u8, TargetReservation>,
}

fn oid(obj: u8) -> ObjectId {
    ObjectId::new(format!("obj-{obj}")).expect("id")
}

async fn world(h: &Harness) -> World {
    let mut hosts = Vec::new();
    for i in 0..HOSTS {
        let mut d = descriptor("main", &[i as u8 + 1]);
        // Host 0: 3 actors, 2 spots, 1 "game"; host 1: 2 actors; host 2: unlimited.
        match i {
            0 => {
                d.capacity.actors.limit = 3;
                d.capacity.spots.limit = 2;
                d.object_capabilities = vec![
                    capability(ObjectKind::Actor, "chat", 0),
                    capability(ObjectKind::UserSpot, "game", 1),
                ];
            }
            1 => d.capacity.actors.limit = 2,
            _ => {}
        }
        hosts.push(Arc::new(Host {
            rt: h.runtime().await,
            desc: d,
        }));
    }
    World {
        hosts,
        handles: HashMap::new(),
        stale: HashMap::new(),
        reservations: HashMap::new(),
    }
}

impl World {
    fn owner_host(&self, handle: &AuthorityHandle) -> Arc<Host> {
        self.hosts
            .iter()
            .find(|h| &h.run() == handle.owner())
            .cloned()
            .unwrap_or_else(|| self.hosts[0].clone())
    }
}

enum Done {
    Handle(u8, Option<AuthorityHandle>),
    Moved(u8, AuthorityHandle),
    Reserved(u8, Option<Box<TargetReservation>>),
    Nothing,
}

fn allowed(e: &LocationError) -> bool {
    matches!(
        e,
        LocationError::CapacityExceeded | LocationError::InvalidOperation(_)
    )
}

async fn run_step(w: &World, step: Step) -> Done {
    let kind_of = |spot: bool| {
        if spot {
            ObjectKind::UserSpot
        } else {
            ObjectKind::Actor
        }
    };
    let outcome_handle = |obj: u8, r: Result<Outcome<AuthorityHandle>, LocationError>| match r {
        Ok(Outcome::Applied(h)) => Done::Handle(obj, Some(h)),
        Ok(Outcome::Conflict(_)) => Done::Nothing,
        Err(e) if allowed(&e) => Done::Nothing,
        Err(e) => panic!("unexpected error: {e}"),
    };
    let outcome_unit = |obj: u8, r: Result<Outcome<()>, LocationError>| match r {
        Ok(Outcome::Applied(())) => Done::Handle(obj, None),
        Ok(Outcome::Conflict(_)) => Done::Nothing,
        Err(e) if allowed(&e) => Done::Nothing,
        Err(e) => panic!("unexpected error: {e}"),
    };
    match step {
        Step::Reserve { obj, spot, by, on } => {
            let target = w.hosts[usize::from(on)].target();
            let r = w.hosts[usize::from(by)]
                .rt
                .authority()
                .reserve(ReserveRequest {
                    kind: kind_of(spot),
                    id: oid(obj),
                    stable_type: super::support::ty(if spot { "game" } else { "chat" }),
                    target,
                    payload: Vec::new(),
                    pending_creation: None,
                    creation: None,
                })
                .await;
            outcome_handle(obj, r)
        }
        Step::Commit { obj } => match w.handles.get(&obj) {
            Some(h) => outcome_handle(obj, w.owner_host(h).rt.authority().commit(h, None).await),
            None => Done::Nothing,
        },
        Step::Abort { obj } => match w.handles.get(&obj) {
            Some(h) => outcome_unit(obj, w.owner_host(h).rt.authority().abort(h).await),
            None => Done::Nothing,
        },
        Step::Delete { obj } => match w.handles.get(&obj) {
            Some(h) => outcome_unit(obj, w.owner_host(h).rt.authority().delete(h).await),
            None => Done::Nothing,
        },
        Step::StaleDelete { obj } => match w.stale.get(&obj) {
            Some(h) => outcome_unit(obj, w.owner_host(h).rt.authority().delete(h).await),
            None => Done::Nothing,
        },
        Step::Preserve { obj } => match w.handles.get(&obj) {
            Some(h) => outcome_handle(
                obj,
                w.owner_host(h).rt.authority().preserve(h, vec![obj]).await,
            ),
            None => Done::Nothing,
        },
        Step::Secure { obj, to } => match w.handles.get(&obj) {
            Some(h) if !w.reservations.contains_key(&obj) => {
                let r = w
                    .owner_host(h)
                    .rt
                    .authority()
                    .secure_target(h, w.hosts[usize::from(to)].target(), None)
                    .await;
                match r {
                    Ok(Outcome::Applied(res)) => Done::Reserved(obj, Some(Box::new(res))),
                    Ok(Outcome::Conflict(_)) => Done::Nothing,
                    Err(e) if allowed(&e) => Done::Nothing,
                    Err(e) => panic!("unexpected error: {e}"),
                }
            }
            _ => Done::Nothing,
        },
        Step::NewOwner { obj } => match (w.handles.get(&obj), w.reservations.get(&obj)) {
            (Some(h), Some(res)) => {
                let target = w
                    .hosts
                    .iter()
                    .find(|x| x.run() == res.target().run)
                    .cloned()
                    .unwrap_or_else(|| w.hosts[0].clone());
                match target.rt.authority().new_owner(h, res).await {
                    Ok(Outcome::Applied(moved)) => Done::Moved(obj, moved),
                    Ok(Outcome::Conflict(_)) => Done::Nothing,
                    Err(e) if allowed(&e) => Done::Nothing,
                    Err(e) => panic!("unexpected error: {e}"),
                }
            }
            _ => Done::Nothing,
        },
        Step::Release { obj } => match w.reservations.get(&obj) {
            Some(res) => match w.hosts[0].rt.authority().release_target(res).await {
                Ok(Outcome::Applied(())) => Done::Reserved(obj, None),
                Ok(Outcome::Conflict(_)) => Done::Reserved(obj, None),
                Err(e) if allowed(&e) => Done::Nothing,
                Err(e) => panic!("unexpected error: {e}"),
            },
            None => Done::Nothing,
        },
    }
}

/// Runs the groups, then checks the invariant.
pub(crate) async fn execute(h: &Harness, groups: Vec<Vec<Step>>) {
    let mut w = world(h).await;
    for group in groups {
        let shared = Arc::new(World {
            hosts: w.hosts.clone(),
            handles: w.handles.clone(),
            stale: w.stale.clone(),
            reservations: w.reservations.clone(),
        });
        let mut tasks = Vec::new();
        for step in group {
            let shared = shared.clone();
            tasks.push(tokio::spawn(async move { run_step(&shared, step).await }));
        }
        for t in tasks {
            match t.await.expect("step task") {
                Done::Handle(obj, handle) => {
                    if let Some(old) = w.handles.remove(&obj) {
                        w.stale.insert(obj, old);
                    }
                    if let Some(handle) = handle {
                        w.handles.insert(obj, handle);
                    }
                }
                Done::Moved(obj, handle) => {
                    if let Some(old) = w.handles.insert(obj, handle) {
                        w.stale.insert(obj, old);
                    }
                    w.reservations.remove(&obj);
                }
                Done::Reserved(obj, Some(r)) => {
                    w.reservations.insert(obj, *r);
                }
                Done::Reserved(obj, None) => {
                    w.reservations.remove(&obj);
                }
                Done::Nothing => {}
            }
        }
        // Conflicts leave handles stale: re-read every object the model knows.
        for obj in 0..OBJECTS {
            for kind in [ObjectKind::Actor, ObjectKind::UserSpot] {
                if let AuthorityRead::Found { handle, .. } = w.hosts[0]
                    .rt
                    .authority()
                    .read(kind, &oid(obj))
                    .await
                    .expect("read")
                {
                    if w.handles.get(&obj) != Some(&handle) {
                        if let Some(old) = w.handles.insert(obj, handle) {
                            w.stale.insert(obj, old);
                        }
                    }
                }
            }
        }
        check_invariant(h, &w).await;
    }
}

async fn check_invariant(h: &Harness, w: &World) {
    let mut expected: BTreeMap<NodeKey, CapacityRow> = BTreeMap::new();
    let unlimited = crate::CapacityLimits::unlimited();
    for (_, (bytes, _)) in snapshot_of(h.store.as_ref(), "authority\0").await {
        let r = AuthorityRecord::decode(&bytes).expect("authority row");
        let node = NodeKey {
            mesh: r.allocation.descriptor.mesh_name.clone(),
            routing_id: r.allocation.descriptor.routing_id.clone(),
        };
        let bundle = CapacityBundle::from_record(&r.allocation.capacity).expect("bundle");
        expected
            .entry(node)
            .or_default()
            .add_within(&bundle, &unlimited)
            .expect("unlimited");
    }
    for (_, (bytes, _)) in snapshot_of(h.store.as_ref(), "capacity-reservation\0").await {
        let (node, bundle) = decode_reservation(&bytes).expect("reservation row");
        expected
            .entry(node)
            .or_default()
            .add_within(&bundle, &unlimited)
            .expect("unlimited");
    }
    let mut actual: BTreeMap<NodeKey, CapacityRow> = BTreeMap::new();
    for (key, (bytes, _)) in snapshot_of(h.store.as_ref(), "node-capacity\0").await {
        actual.insert(
            node_of(&key),
            CapacityRow::decode(&bytes).expect("allocation row"),
        );
    }
    actual.retain(|_, r| r != &CapacityRow::default());
    expected.retain(|_, r| r != &CapacityRow::default());
    assert_eq!(
        actual, expected,
        "allocation rows differ from the recorded allocations"
    );
    for host in &w.hosts {
        let limits = host.target().limits;
        if let Some(row) = actual.get(&host.node()) {
            let over = |n: u64, l: u32| l > 0 && n > u64::from(l);
            assert!(
                !over(row.actors, limits.actors),
                "actor limit passed: {row:?}"
            );
            assert!(!over(row.spots, limits.spots), "spot limit passed: {row:?}");
            for (k, n) in &row.spot_types {
                let l = limits.spot_types.get(k).copied().unwrap_or(0);
                assert!(!over(*n, l), "type limit passed: {row:?}");
            }
        }
    }
}

fn node_of(key: &StoreKey) -> NodeKey {
    let parts: Vec<&str> = key.as_str().split('\0').collect();
    NodeKey {
        mesh: zlink_codec::MeshName::new(parts[1]).expect("mesh"),
        routing_id: zlink_codec::RoutingId::from_hex(parts[2]).expect("rid"),
    }
}

/// The suite entry: seeded sequences (fewer on Redis).
pub(crate) async fn run_on(h: &Harness) {
    let groups = if h.backend == "redis" { 60 } else { 150 };
    execute(h, seeded_groups(0x5eed_0001, groups)).await;
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn proptest_capacity_invariant(groups in groups_strategy(30)) {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async move {
            let h = Harness::memory();
            execute(&h, groups).await;
        });
    }
}
