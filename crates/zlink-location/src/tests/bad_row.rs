//! One bad row costs that row only, also when the sweep's snapshot still read it fine: a row
//! whose *newest* stored record the Store cannot read (on Redis a garbage member above the
//! snapshot's sequence, so the scan lists the valid member below it) fails only its own
//! conditioned delete; the self-sweep skips and counts it and removes every other row.

use parking_lot::Mutex;
use zlink_store_spi::{ScanRequest, ScanResult, StoreError, StoreResult, UnreadableKey};
use zlink_store_spi::{UnreadableKind, WriteRequest, WriteResult};

use super::prelude::*;

/// A store whose marked keys fail exact reads and writes with `Unreadable(Corrupt)` while its
/// scans still list them: what a Redis record with a garbage newest member answers (the memory
/// store holds only bytes; on the live backends the member is planted for real and nothing is
/// marked here).
#[derive(Debug)]
struct NewestUnreadable {
    inner: Arc<dyn DynLocationStore>,
    marked: Mutex<Vec<StoreKey>>,
}

impl NewestUnreadable {
    fn error(&self, touches: impl Fn(&StoreKey) -> bool) -> Option<StoreError> {
        let marked = self.marked.lock();
        let key = marked.iter().find(|k| touches(k))?;
        Some(StoreError::Unreadable(UnreadableKey::new(
            key.clone(),
            UnreadableKind::Corrupt,
        )))
    }
}

impl LocationStore for NewestUnreadable {
    async fn read(&self, key: &StoreKey) -> StoreResult<ReadResult> {
        if let Some(e) = self.error(|k| k == key) {
            return Err(e);
        }
        self.inner.read(key).await
    }

    async fn write(&self, request: &WriteRequest) -> StoreResult<WriteResult> {
        let touches = |k: &StoreKey| {
            request.mutations().iter().any(|m| m.key() == k)
                || request.conditions().iter().any(|c| c.key() == k)
        };
        if let Some(e) = self.error(touches) {
            return Err(e);
        }
        self.inner.write(request).await
    }

    async fn scan(&self, request: &ScanRequest) -> StoreResult<ScanResult> {
        self.inner.scan(request).await
    }
}

/// Makes `key`'s newest record unreadable: planted for real on Redis, answered by `wrapper` on
/// memory.
async fn corrupt_newest(h: &Harness, wrapper: &NewestUnreadable, key: &StoreKey) {
    if !h.plant_corrupt_newest(key).await {
        wrapper.marked.lock().push(key.clone());
    }
}

/// The self-sweep with a corrupt newest record under one of this run's own authority rows and
/// `N` valid rows: every valid row is swept, the bad one is skipped, counted as unreadable and
/// left as it is, and the sweep (the shutdown) returns `Ok`.
pub(super) async fn self_sweep_skips_and_counts_a_row_whose_newest_record_is_unreadable(
    h: &Harness,
) {
    const N: usize = 40;
    let wrapper = Arc::new(NewestUnreadable {
        inner: h.store.clone(),
        marked: Mutex::new(Vec::new()),
    });
    let a = h
        .host_with(wrapper.clone(), LocationOptions::default(), None, 1)
        .await;
    for i in 0..N {
        active_actor(&a, &format!("x{i}")).await;
    }
    active_actor(&a, "bad").await;
    let bad = keys::authority(ObjectKind::Actor, &id("bad")).expect("key");
    corrupt_newest(h, &wrapper, &bad).await;
    let report = a.rt.shutdown().await.expect("the shutdown sweep completes");
    // Read from the run's index, the bad row is never matched: its read is unreadable.
    assert_eq!(
        (
            report.matched,
            report.removed,
            report.unreadable,
            report.changed
        ),
        (N, N, 1, 0),
        "{report:?}"
    );
    let reader = h
        .runtime_with(wrapper.clone(), LocationOptions::default(), None)
        .await;
    for i in 0..N {
        assert!(matches!(
            reader
                .authority()
                .read(ObjectKind::Actor, &id(&format!("x{i}")))
                .await
                .expect("read"),
            AuthorityRead::Missing { .. }
        ));
    }
    match wrapper.read(&bad).await {
        Err(StoreError::Unreadable(u)) => assert_eq!(u.key, bad),
        other => panic!("the bad row is left as it was: {other:?}"),
    }
}

/// The batched authority read answers each object on its own: found rows with their records,
/// a missing one as missing, and a row the Store cannot read costs only its own answer (the
/// others are still answered).
pub(super) async fn read_many_answers_each_object_and_an_unreadable_row_costs_only_itself(
    h: &Harness,
) {
    let wrapper = Arc::new(NewestUnreadable {
        inner: h.store.clone(),
        marked: Mutex::new(Vec::new()),
    });
    let a = h
        .host_with(wrapper.clone(), LocationOptions::default(), None, 1)
        .await;
    let handles = [
        active_actor(&a, "r0").await,
        active_actor(&a, "r1").await,
        active_actor(&a, "r2").await,
    ];
    let bad = crate::keys::authority(ObjectKind::Actor, handles[1].id()).expect("key");
    corrupt_newest(h, &wrapper, &bad).await;
    let objects: Vec<_> = ["r0", "r1", "nobody", "r2"]
        .iter()
        .map(|id| (ObjectKind::Actor, ObjectId::new(*id).expect("id")))
        .collect();
    let reads =
        a.rt.authority()
            .read_many(&objects)
            .await
            .expect("the Store answered");
    assert_eq!(reads.len(), 4);
    let found = |i: usize| match &reads[i] {
        Ok(AuthorityRead::Found { handle, .. }) => Some(handle.object_generation()),
        _ => None,
    };
    assert_eq!(found(0), Some(handles[0].object_generation()));
    assert!(reads[1].is_err(), "{:?}", reads[1]);
    assert!(
        matches!(reads[2], Ok(AuthorityRead::Missing { .. })),
        "{:?}",
        reads[2]
    );
    assert_eq!(found(3), Some(handles[2].object_generation()));
}
