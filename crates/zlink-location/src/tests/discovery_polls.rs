//! What a discovery poll costs the Store (issue 38): an idle poll reads the change number
//! only; leases are re-read, all in one batched read, only when the list changed or a lease
//! expiry last read is near; a peer whose lease expired is still dropped although the change
//! number did not move.

use std::sync::atomic::AtomicU64;

use zlink_store_spi::{ScanRequest, ScanResult, StoreResult, WriteRequest, WriteResult};

use super::prelude::*;

/// Store calls of one kind, counted by [`Counting`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Calls {
    /// Exact reads.
    reads: u64,
    /// `read_many` calls.
    batches: u64,
    /// Keys named by those calls.
    batch_keys: u64,
    /// Scan pages.
    scans: u64,
}

impl Calls {
    fn since(self, earlier: Calls) -> Calls {
        Calls {
            reads: self.reads - earlier.reads,
            batches: self.batches - earlier.batches,
            batch_keys: self.batch_keys - earlier.batch_keys,
            scans: self.scans - earlier.scans,
        }
    }
}

/// Counts every call that reaches the Store, `read_many` as one call (passed on whole).
#[derive(Debug)]
struct Counting {
    inner: Arc<dyn DynLocationStore>,
    reads: AtomicU64,
    batches: AtomicU64,
    batch_keys: AtomicU64,
    scans: AtomicU64,
}

impl Counting {
    fn new(inner: Arc<dyn DynLocationStore>) -> Arc<Self> {
        Arc::new(Counting {
            inner,
            reads: AtomicU64::new(0),
            batches: AtomicU64::new(0),
            batch_keys: AtomicU64::new(0),
            scans: AtomicU64::new(0),
        })
    }

    fn calls(&self) -> Calls {
        Calls {
            reads: self.reads.load(Ordering::SeqCst),
            batches: self.batches.load(Ordering::SeqCst),
            batch_keys: self.batch_keys.load(Ordering::SeqCst),
            scans: self.scans.load(Ordering::SeqCst),
        }
    }
}

impl LocationStore for Counting {
    async fn read(&self, key: &StoreKey) -> StoreResult<ReadResult> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        self.inner.read_dyn(key).await
    }
    async fn write(&self, request: &WriteRequest) -> StoreResult<WriteResult> {
        self.inner.write_dyn(request).await
    }
    async fn scan(&self, request: &ScanRequest) -> StoreResult<ScanResult> {
        self.scans.fetch_add(1, Ordering::SeqCst);
        self.inner.scan_dyn(request).await
    }
    async fn read_many(&self, keys: &[StoreKey]) -> StoreResult<Vec<ReadResult>> {
        self.batches.fetch_add(1, Ordering::SeqCst);
        self.batch_keys
            .fetch_add(keys.len() as u64, Ordering::SeqCst);
        self.inner.read_many_dyn(keys).await
    }
}

/// A reader host (no descriptor) over `store`, with lease timings short enough that its
/// discovery re-reads a lease only 600 ms before the expiry it holds (fencing margin 500 ms +
/// polling interval 100 ms).
async fn reader(h: &Harness, store: Arc<dyn DynLocationStore>) -> LocationRuntime {
    h.runtime_with(
        store,
        short_lease().polling_interval(Duration::from_millis(100)),
        None,
    )
    .await
}

/// A host of `main` with routing id `[rid]` and these options, its descriptor published.
async fn published(h: &Harness, options: LocationOptions, rid: u8) -> Host {
    let x = h.host_with(h.store.clone(), options, None, rid).await;
    publish(&x).await;
    x
}

fn runs(view: &crate::DiscoveryView) -> Vec<HostRun> {
    view.nodes.iter().map(|n| n.run.clone()).collect()
}

async fn change_number(h: &Harness) -> Option<zlink_store_spi::StoreVersion> {
    let mesh = zlink_codec::MeshName::new("main").expect("mesh");
    let key = keys::PrivateKey::MeshChange(&mesh)
        .store_key()
        .expect("key");
    h.store.read(&key).await.expect("read").version().cloned()
}

/// Once a full list is read, a poll that finds the change number where it was and no lease
/// expiry near costs one Store call: the change-number read. The list it returns is the one
/// read before, lease ends included.
pub(super) async fn an_idle_poll_reads_only_the_change_number(h: &Harness) {
    let a = published(h, LocationOptions::default(), 1).await;
    let b = published(h, LocationOptions::default(), 2).await;
    let counting = Counting::new(h.store.clone());
    let rt = reader(h, counting.clone()).await;
    let d = rt.discovery(&a.desc.mesh_name).expect("discovery");
    let first = d.refresh().await.expect("full read");
    assert_eq!(runs(&first), vec![a.run(), b.run()]);
    for poll in 0..3 {
        let before = counting.calls();
        let view = d.refresh().await.expect("idle poll");
        assert_eq!(
            counting.calls().since(before),
            Calls {
                reads: 1,
                ..Calls::default()
            },
            "idle poll {poll}"
        );
        assert_eq!(view.status, DiscoveryStatus::Fresh);
        assert_eq!(view.nodes, first.nodes, "idle poll {poll}");
    }
}

/// A peer's lease row expires without any descriptor change (the change number stays): the
/// first poll after the expiry its last lease read showed re-reads the leases, in one batched
/// read without any page, and drops it; the peer whose lease lives stays, and the poll after
/// that is idle again.
pub(super) async fn a_peer_whose_lease_expired_is_dropped_without_a_change_number_move(
    h: &Harness,
) {
    // B's lease ends 3 s after it was taken (no renew loop); D's after 15 s.
    let short = LocationOptions::default()
        .owner_lease_renew_interval(Duration::from_millis(100))
        .owner_lease_renew_timeout(Duration::from_millis(100))
        .owner_lease_ttl(Duration::from_millis(3000))
        .owner_lease_fencing_margin(Duration::from_millis(500));
    let b = published(h, short, 2).await;
    let d = published(h, LocationOptions::default(), 4).await;
    let counting = Counting::new(h.store.clone());
    let rt = reader(h, counting.clone()).await;
    let discovery = rt.discovery(&b.desc.mesh_name).expect("discovery");
    assert_eq!(
        runs(&discovery.refresh().await.expect("full read")),
        vec![b.run(), d.run()]
    );
    let change = change_number(h).await;
    let before = counting.calls();
    let view = discovery.refresh().await.expect("idle poll");
    assert_eq!(runs(&view), vec![b.run(), d.run()]);
    assert_eq!(
        counting.calls().since(before),
        Calls {
            reads: 1,
            ..Calls::default()
        },
        "no lease is near its end yet"
    );

    h.advance_store_time(Duration::from_millis(3100)).await;
    let before = counting.calls();
    let view = discovery
        .refresh()
        .await
        .expect("poll after B's lease ended");
    assert_eq!(
        runs(&view),
        vec![d.run()],
        "B's lease expired: B is dropped"
    );
    assert_eq!(view.status, DiscoveryStatus::Fresh);
    assert_eq!(
        counting.calls().since(before),
        Calls {
            reads: 1,
            batches: 1,
            batch_keys: 2,
            scans: 0,
        },
        "the change number, then every listed lease in one batched read"
    );
    assert_eq!(
        change_number(h).await,
        change,
        "the change number did not move"
    );
    assert!(!discovery.is_connect_target(&b.node()));
    assert!(discovery.is_connect_target(&d.node()));

    let before = counting.calls();
    assert_eq!(
        runs(&discovery.refresh().await.expect("idle again")),
        vec![d.run()]
    );
    assert_eq!(
        counting.calls().since(before),
        Calls {
            reads: 1,
            ..Calls::default()
        },
        "D's lease was just read: idle again"
    );
}

/// A list read — the first, and again after a publish moved the change number — reads every
/// listed host's lease in one batched read (one key per host), not one read per descriptor;
/// the new node is listed by the first poll after its publish.
pub(super) async fn a_changed_mesh_reads_every_lease_in_one_batched_read(h: &Harness) {
    let mut hosts = Vec::new();
    for rid in 1..=5u8 {
        hosts.push(published(h, LocationOptions::default(), rid).await);
    }
    let counting = Counting::new(h.store.clone());
    let rt = reader(h, counting.clone()).await;
    let d = rt.discovery(&hosts[0].desc.mesh_name).expect("discovery");
    let before = counting.calls();
    let view = d.refresh().await.expect("full read");
    assert_eq!(view.nodes.len(), 5);
    let full = Calls {
        reads: 2,
        batches: 1,
        batch_keys: 5,
        scans: 1,
    };
    assert_eq!(
        counting.calls().since(before),
        full,
        "change number twice, one page, one batched lease read"
    );

    hosts.push(published(h, LocationOptions::default(), 6).await);
    let before = counting.calls();
    let view = d.refresh().await.expect("poll after a publish");
    assert_eq!(
        runs(&view),
        hosts.iter().map(Host::run).collect::<Vec<_>>(),
        "the new node is listed by the first poll after its publish"
    );
    assert_eq!(
        counting.calls().since(before),
        Calls {
            batch_keys: 6,
            ..full
        }
    );
}

/// After a Store failure the kept list is served under grace, and the first poll the Store
/// answers again reads the whole list — pages and leases — even though the change number did
/// not move (spec 21 §10); the poll after it is idle again.
pub(super) async fn the_first_poll_after_a_store_failure_reads_the_whole_list(h: &Harness) {
    let a = published(h, LocationOptions::default(), 1).await;
    let flaky = Arc::new(FaultyLocationStore::new(h.store.clone()));
    let counting = Counting::new(flaky.clone());
    let rt = reader(h, counting.clone()).await;
    let d = rt.discovery(&a.desc.mesh_name).expect("discovery");
    assert_eq!(runs(&d.refresh().await.expect("full read")), vec![a.run()]);

    flaky.set_fault(LocationOp::READS, Fault::UNAVAILABLE);
    let view = d.refresh().await.expect("kept list");
    assert!(matches!(view.status, DiscoveryStatus::Grace { .. }));
    flaky.heal();

    let before = counting.calls();
    let view = d.refresh().await.expect("after recovery");
    assert_eq!(view.status, DiscoveryStatus::Fresh);
    assert!(!view.unchanged);
    assert_eq!(runs(&view), vec![a.run()]);
    assert_eq!(
        counting.calls().since(before),
        Calls {
            reads: 2,
            batches: 1,
            batch_keys: 1,
            scans: 1,
        },
        "a full read"
    );
    let before = counting.calls();
    assert!(d.refresh().await.expect("idle").unchanged);
    assert_eq!(
        counting.calls().since(before),
        Calls {
            reads: 1,
            ..Calls::default()
        }
    );
}
