//! The Location Store as the runtime hands it to the location runtime: every call's duration
//! and whether it failed, recorded on handles resolved once per host. A call dropped before
//! it ended (its caller's own timeout) records nothing; a Store failure never changes what
//! the call returns (telemetry never blocks progress).

use std::sync::Arc;
use std::time::Instant;

use metrics::{Counter, Histogram};
use zlink_store_spi::{
    DynLocationStore, LocationStore, ReadResult, ScanRequest, ScanResult, StoreResult,
    WriteRequest, WriteResult,
};

use super::labels::{CallOutcome, StoreOp};
use super::names;

const OPS: [StoreOp; 3] = [StoreOp::Read, StoreOp::Write, StoreOp::Scan];
const OUTCOMES: [CallOutcome; 2] = [CallOutcome::Ok, CallOutcome::Failed];

/// A Location Store whose calls are timed and counted.
#[derive(Debug)]
pub(crate) struct MeteredStore {
    inner: Arc<dyn DynLocationStore>,
    /// `[op][outcome]`.
    duration: [[Histogram; 2]; 3],
    /// `[op]`.
    failures: [Counter; 3],
}

impl MeteredStore {
    /// `inner`, metered with the recorder installed now (none: the handles do nothing).
    pub(crate) fn wrap(inner: Arc<dyn DynLocationStore>) -> Arc<dyn DynLocationStore> {
        super::describe();
        Arc::new(Self {
            inner,
            duration: OPS.map(|op| {
                OUTCOMES.map(|o| {
                    metrics::histogram!(names::STORE_DURATION, "op" => op.as_str(), "outcome" => o.as_str())
                })
            }),
            failures: OPS.map(|op| metrics::counter!(names::STORE_FAILURES, "op" => op.as_str())),
        })
    }

    async fn timed<T>(
        &self,
        op: usize,
        call: impl std::future::Future<Output = StoreResult<T>>,
    ) -> StoreResult<T> {
        let started = Instant::now();
        let result = call.await;
        let failed = result.is_err();
        self.duration[op][usize::from(failed)].record(started.elapsed().as_secs_f64());
        if failed {
            self.failures[op].increment(1);
        }
        result
    }
}

impl LocationStore for MeteredStore {
    async fn read(&self, key: &zlink_store_spi::StoreKey) -> StoreResult<ReadResult> {
        self.timed(0, self.inner.read_dyn(key)).await
    }

    async fn write(&self, request: &WriteRequest) -> StoreResult<WriteResult> {
        self.timed(1, self.inner.write_dyn(request)).await
    }

    async fn scan(&self, request: &ScanRequest) -> StoreResult<ScanResult> {
        self.timed(2, self.inner.scan_dyn(request)).await
    }

    /// Timed as one read (the batch is one Store call).
    async fn read_many(&self, keys: &[zlink_store_spi::StoreKey]) -> StoreResult<Vec<ReadResult>> {
        self.timed(0, self.inner.read_many_dyn(keys)).await
    }

    async fn close(&self) {
        self.inner.close_dyn().await;
    }
}
