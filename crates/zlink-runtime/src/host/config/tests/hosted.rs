//! Hosted service lifecycle (spec 06 §22).

use std::sync::Arc;

use parking_lot::Mutex;

use crate::host::config::{HostedFuture, HostedService, HostedStage, start_hosted_services};

/// Records every stage call into a shared log; fails the stages listed in `fail`.
#[derive(Debug)]
struct Recorder {
    name: &'static str,
    log: Arc<Mutex<Vec<String>>>,
    fail: Vec<HostedStage>,
}

impl Recorder {
    fn run(&self, stage: HostedStage) -> HostedFuture<'_> {
        Box::pin(async move {
            // Yield once so a start that is not awaited before the next one would interleave.
            tokio::task::yield_now().await;
            self.log.lock().push(format!("{stage} {}", self.name));
            if self.fail.contains(&stage) {
                Err(format!("{} {stage} failed", self.name).into())
            } else {
                Ok(())
            }
        })
    }
}

impl HostedService for Recorder {
    fn name(&self) -> &str {
        self.name
    }
    fn start(&self) -> HostedFuture<'_> {
        self.run(HostedStage::Start)
    }
    fn stop_request(&self) -> HostedFuture<'_> {
        self.run(HostedStage::StopRequest)
    }
    fn stop(&self) -> HostedFuture<'_> {
        self.run(HostedStage::Stop)
    }
}

fn services(
    log: &Arc<Mutex<Vec<String>>>,
    specs: &[(&'static str, &[HostedStage])],
) -> Vec<Arc<dyn HostedService>> {
    specs
        .iter()
        .map(|(name, fail)| {
            Arc::new(Recorder {
                name,
                log: Arc::clone(log),
                fail: fail.to_vec(),
            }) as Arc<dyn HostedService>
        })
        .collect()
}

fn take(log: &Arc<Mutex<Vec<String>>>) -> Vec<String> {
    std::mem::take(&mut *log.lock())
}

#[tokio::test]
async fn hosted_services_start_in_order_and_stop_in_reverse() {
    let log = Arc::default();
    let list = services(&log, &[("a", &[]), ("b", &[]), ("c", &[])]);
    // Registration order survives into the plan.
    let plan = super::start(
        list.iter()
            .fold(super::root(), |r, s| r.hosted_service(Arc::clone(s))),
    )
    .unwrap();
    let names: Vec<_> = plan.hosted_services().iter().map(|s| s.name()).collect();
    assert_eq!(names, ["a", "b", "c"]);

    let running = start_hosted_services(plan.hosted_services()).await.unwrap();
    assert_eq!(running.len(), 3);
    assert_eq!(take(&log), ["start a", "start b", "start c"]);
    assert!(running.stop().await.is_empty());
    assert_eq!(
        take(&log),
        [
            "stop request c",
            "stop request b",
            "stop request a",
            "stop c",
            "stop b",
            "stop a"
        ]
    );
}

#[tokio::test]
async fn failed_hosted_start_stops_started_services_in_reverse() {
    let log = Arc::default();
    let list = services(
        &log,
        &[
            ("a", &[]),
            ("b", &[]),
            ("c", &[HostedStage::Start]),
            ("d", &[]),
        ],
    );
    let err = start_hosted_services(&list).await.unwrap_err();
    assert_eq!(err.failure.service, "c");
    assert_eq!(err.failure.stage, HostedStage::Start);
    assert!(err.stop_failures.is_empty());
    // `d` never starts; `c` is not stopped because it never started.
    assert_eq!(
        take(&log),
        [
            "start a",
            "start b",
            "start c",
            "stop request b",
            "stop request a",
            "stop b",
            "stop a"
        ]
    );
}

#[tokio::test]
async fn hosted_stop_failures_are_recorded_and_shutdown_continues() {
    let log = Arc::default();
    let list = services(
        &log,
        &[
            ("a", &[HostedStage::Stop]),
            ("b", &[HostedStage::StopRequest]),
        ],
    );
    let running = start_hosted_services(&list).await.unwrap();
    take(&log);
    let failures = running.stop().await;
    let seen: Vec<_> = failures
        .iter()
        .map(|f| (f.service.as_str(), f.stage))
        .collect();
    assert_eq!(
        seen,
        [("b", HostedStage::StopRequest), ("a", HostedStage::Stop)]
    );
    assert_eq!(
        take(&log),
        ["stop request b", "stop request a", "stop b", "stop a"]
    );
}
