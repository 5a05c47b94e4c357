//! Hosted services (spec 06 §22): application background work tied to the host lifecycle.
//! Started one at a time in registration order; stopped in reverse (all stop requests first,
//! then all stops).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// The error a hosted service reports.
pub type HostedError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// The boxed future of one hosted-service stage.
pub type HostedFuture<'a> = Pin<Box<dyn Future<Output = Result<(), HostedError>> + Send + 'a>>;

/// Background work the framework starts before the host serves and stops at shutdown
/// (spec 06 §22). Each stage returns a future; the framework awaits one service's start
/// before starting the next, so a start never has to block.
pub trait HostedService: Send + Sync + fmt::Debug + 'static {
    /// A name for logs and errors.
    fn name(&self) -> &str;
    /// Starts the service; a failure fails startup.
    fn start(&self) -> HostedFuture<'_>;
    /// Signals that no new work is accepted; a failure is recorded and shutdown continues.
    fn stop_request(&self) -> HostedFuture<'_>;
    /// Finishes in-flight work and releases resources; a failure is recorded and shutdown
    /// continues.
    fn stop(&self) -> HostedFuture<'_>;
}

/// Which stage of a hosted service failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HostedStage {
    /// `start`.
    Start,
    /// `stop_request`.
    StopRequest,
    /// `stop`.
    Stop,
}

impl fmt::Display for HostedStage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HostedStage::Start => "start",
            HostedStage::StopRequest => "stop request",
            HostedStage::Stop => "stop",
        })
    }
}

/// A recorded stage failure of one hosted service.
#[derive(Debug)]
pub struct HostedFailure {
    /// The service's name.
    pub service: String,
    /// The stage that failed.
    pub stage: HostedStage,
    /// The service's error.
    pub error: HostedError,
}

/// Startup failed because a hosted service failed to start (spec 06 §22); the services that
/// had started were stopped in reverse order.
#[derive(Debug, thiserror::Error)]
#[error("hosted service `{}` failed to start: {}", failure.service, failure.error)]
#[non_exhaustive]
pub struct HostedStartError {
    /// The start failure.
    pub failure: HostedFailure,
    /// Failures recorded while stopping the services that had started.
    pub stop_failures: Vec<HostedFailure>,
}

impl HostedStartError {
    /// The coarse kind (always a failed start).
    pub fn kind(&self) -> HostedStage {
        HostedStage::Start
    }
}

/// The hosted services that started, in start order; [`stop`](Self::stop) stops them.
#[derive(Debug)]
#[must_use = "started hosted services must be stopped at shutdown"]
pub(crate) struct RunningHostedServices {
    started: Vec<Arc<dyn HostedService>>,
}

/// Starts `services` one at a time in order. On the first failure, stops what started in
/// reverse and returns the failure (spec 06 §22).
pub(crate) async fn start_hosted_services(
    services: &[Arc<dyn HostedService>],
) -> Result<RunningHostedServices, HostedStartError> {
    let mut running = RunningHostedServices {
        started: Vec::with_capacity(services.len()),
    };
    for service in services {
        if let Err(error) = service.start().await {
            tracing::warn!(service = service.name(), %error, "hosted service failed to start");
            let failure = HostedFailure {
                service: service.name().to_owned(),
                stage: HostedStage::Start,
                error,
            };
            let stop_failures = running.stop().await;
            return Err(HostedStartError {
                failure,
                stop_failures,
            });
        }
        running.started.push(Arc::clone(service));
    }
    Ok(running)
}

impl RunningHostedServices {
    /// How many services are running.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.started.len()
    }

    /// Sends every stop request in reverse start order, then every stop in reverse order.
    /// A failure is recorded (and logged) and the sequence continues (spec 06 §22).
    pub(crate) async fn stop(self) -> Vec<HostedFailure> {
        let mut failures = self.request_stop().await;
        failures.extend(self.finish_stop().await);
        failures
    }

    /// The first half of [`stop`](Self::stop): every stop request, in reverse start order (at
    /// the beginning of shutdown).
    pub(crate) async fn request_stop(&self) -> Vec<HostedFailure> {
        self.run_stage(HostedStage::StopRequest).await
    }

    /// The second half of [`stop`](Self::stop): every stop, in reverse start order (after
    /// accepted work finished).
    pub(crate) async fn finish_stop(self) -> Vec<HostedFailure> {
        self.run_stage(HostedStage::Stop).await
    }

    async fn run_stage(&self, stage: HostedStage) -> Vec<HostedFailure> {
        let mut failures = Vec::new();
        for service in self.started.iter().rev() {
            let result = match stage {
                HostedStage::StopRequest => service.stop_request().await,
                _ => service.stop().await,
            };
            if let Err(error) = result {
                tracing::warn!(service = service.name(), %stage, %error, "hosted service stage failed");
                failures.push(HostedFailure {
                    service: service.name().to_owned(),
                    stage,
                    error,
                });
            }
        }
        failures
    }
}
