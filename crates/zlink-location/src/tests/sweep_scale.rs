//! A large self-sweep on a short lease: the renew loop keeps the lease while the engine works
//! through every row (issue 38). In-memory store only (the row count is the point, not the
//! backend); the store's clock is real time, so a renew that starved would let the lease row
//! expire in the store too.

use std::sync::atomic::AtomicUsize;

use zlink_codec::records::ObjectKind;
use zlink_store_spi::MemoryLocationStore;

use super::prelude::*;
use crate::{CapacityLimits, HostRun, ReserveRequest, TargetNode};

const ROWS: usize = 100_000;
const CREATORS: usize = 256;

/// TTL 1 s, renewed every 200 ms (each renew bounded by 200 ms), fencing margin 500 ms:
/// admission closes about 500 ms after the last renew that succeeded.
fn short_renewing_lease() -> LocationOptions {
    LocationOptions::default()
        .owner_lease_renew_interval(Duration::from_millis(200))
        .owner_lease_renew_timeout(Duration::from_millis(200))
        .owner_lease_ttl(Duration::from_millis(1000))
        .owner_lease_fencing_margin(Duration::from_millis(500))
}

fn target(run: HostRun) -> TargetNode {
    let d = descriptor("main", &[1]);
    TargetNode {
        node: crate::NodeKey {
            mesh: d.mesh_name,
            routing_id: d.routing_id,
        },
        run,
        lifecycle_generation: 1,
        limits: CapacityLimits::unlimited(),
        offers: BTreeSet::from([(ObjectKind::Actor, ty("chat"))]),
    }
}

/// Watches the host until told to stop: every 5 ms, whether admission is open and the host
/// run is the one it started with; returns how many samples saw otherwise.
fn watch(
    rt: Arc<LocationRuntime>,
    run: HostRun,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<usize> {
    tokio::spawn(async move {
        let mut bad = 0;
        while !stop.load(Ordering::Acquire) {
            if !rt.is_admitting() || rt.host_run().as_ref() != Some(&run) {
                bad += 1;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        bad
    })
}

/// A 100,000-row self-sweep on a 1 s lease renewed every 200 ms, with the renew loop on, on a
/// multi-thread runtime: every row is swept, and at no point (setup included) is admission
/// closed, the host run changed, or a renew failed or taken over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_renewal_never_starves_during_a_large_self_sweep() {
    let store: Arc<dyn DynLocationStore> = Arc::new(MemoryLocationStore::new());
    let rt = Arc::new(
        LocationRuntime::builder(store)
            .options(short_renewing_lease())
            .start()
            .await
            .expect("runtime starts"),
    );
    let run = rt.host_run().expect("lease held");
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = watch(rt.clone(), run.clone(), stop.clone());
    let next = Arc::new(AtomicUsize::new(0));
    let mut creators = Vec::new();
    for _ in 0..CREATORS {
        let (rt, run, next) = (rt.clone(), run.clone(), next.clone());
        creators.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= ROWS {
                    return;
                }
                let reserved = rt
                    .authority()
                    .reserve(ReserveRequest {
                        kind: ObjectKind::Actor,
                        id: id(&format!("a{i}")),
                        stable_type: ty("chat"),
                        target: target(run.clone()),
                        payload: Vec::new(),
                        pending_creation: None,
                        creation: None,
                    })
                    .await
                    .expect("reserve")
                    .applied()
                    .expect("reserved");
                rt.authority()
                    .commit(&reserved, None)
                    .await
                    .expect("commit")
                    .applied()
                    .expect("committed");
            }
        }));
    }
    for c in creators {
        c.await.expect("creator");
    }
    let report = rt.self_sweep().await.expect("the sweep completes");
    stop.store(true, Ordering::Release);
    let closed = watcher.await.expect("watcher");
    assert_eq!(report.removed, ROWS, "{report:?}");
    let renewals = rt.health_probe().renewals();
    assert_eq!(
        (closed, renewals.failed, renewals.taken_over),
        (0, 0, 0),
        "admission closed or the run changed in {closed} samples; renewals {renewals:?}"
    );
    assert!(renewals.renewed > 0, "the renew loop ran: {renewals:?}");
    assert_eq!(rt.host_run(), Some(run));
    rt.release_lease().await.expect("release");
}
