#![doc = include_str!("../README.md")]

mod faulty;
pub mod live;
mod location;
mod model;
mod private_redis;
mod relocation;
mod util;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use zlink_store_spi::{DynLocationStore, DynRelocationStore, ManualClock};

pub use faulty::{
    Fault, FaultyLocationStore, FaultyRelocationStore, InjectedError, LocationOp, RelocationOp,
    WriteHook,
};
pub use location::*;
pub use model::{ModelConfig, location_model_matches_reference};
pub use private_redis::PrivateRedis;
pub use relocation::*;

/// The result of one check: `Err` carries a human-readable reason.
pub type CheckResult<T = ()> = Result<T, String>;

/// Moves a provider clock forward (for providers whose clock a test can control).
pub type AdvanceClock = Arc<dyn Fn(Duration) + Send + Sync>;

fn random_prefix(kind: &str) -> String {
    format!(
        "zlink-conformance/{kind}/{}/",
        uuid::Uuid::new_v4().simple()
    )
}

/// What the Location Store suite may use besides the store itself.
#[derive(Clone)]
#[non_exhaustive]
pub struct LocationCapabilities {
    /// Every key the suite writes starts with this (random by default), and the suite deletes
    /// everything under it when a check ends.
    pub prefix: String,
    /// Moves the provider clock; without it the expiry checks sleep for real (short retentions).
    pub advance_clock: Option<AdvanceClock>,
    /// A handle on the same data whose write replies get lost after the write may have been
    /// applied (a time-out shorter than a delayed command, say):
    /// [`FaultyLocationStore::losing_write_replies`] around the store, or a provider's own way
    /// of losing a reply for real. Without it the result-loss check applies the write through
    /// the store under test and drops the result itself.
    pub lossy_writer: Option<Arc<dyn DynLocationStore>>,
    /// Cases of the model test (default 1,000).
    pub model_cases: u32,
}

impl fmt::Debug for LocationCapabilities {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocationCapabilities")
            .field("prefix", &self.prefix)
            .field("advance_clock", &self.advance_clock.is_some())
            .field("lossy_writer", &self.lossy_writer.is_some())
            .field("model_cases", &self.model_cases)
            .finish()
    }
}

impl Default for LocationCapabilities {
    fn default() -> Self {
        Self::new()
    }
}

impl LocationCapabilities {
    /// A random prefix, real time, no lossy writer, 1,000 model cases.
    pub fn new() -> Self {
        LocationCapabilities {
            prefix: random_prefix("location"),
            advance_clock: None,
            lossy_writer: None,
            model_cases: 1000,
        }
    }

    /// Uses a [`ManualClock`] shared with the provider.
    pub fn with_manual_clock(mut self, clock: ManualClock) -> Self {
        self.advance_clock = Some(Arc::new(move |d| clock.advance(d)));
        self
    }

    /// Uses a handle whose write replies get lost, e.g.
    /// `Arc::new(FaultyLocationStore::losing_write_replies(store.clone()))`.
    pub fn with_lossy_writer(mut self, lossy: Arc<dyn DynLocationStore>) -> Self {
        self.lossy_writer = Some(lossy);
        self
    }

    /// Sets the number of model-test cases.
    pub fn with_model_cases(mut self, cases: u32) -> Self {
        self.model_cases = cases;
        self
    }

    /// Sets the key prefix.
    pub fn with_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }
}

/// What the Relocation Store suite may use besides the store itself.
#[derive(Clone)]
#[non_exhaustive]
pub struct RelocationCapabilities {
    /// Every reference the suite writes starts with this (random by default); the suite deletes
    /// what it wrote.
    pub prefix: String,
    /// Moves the provider clock; without it expiry checks sleep for real.
    pub advance_clock: Option<AdvanceClock>,
    /// A handle on the same data whose put replies get lost after the put may have landed:
    /// [`FaultyRelocationStore::losing_put_replies`] around the store, or a provider's own way
    /// of losing a reply for real. Without it the check puts through the store under test and
    /// drops the result itself.
    pub lossy_putter: Option<Arc<dyn DynRelocationStore>>,
    /// Whether to round-trip a blob of exactly 64 MiB + 23 bytes (default true).
    pub largest_blob: bool,
}

impl fmt::Debug for RelocationCapabilities {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RelocationCapabilities")
            .field("prefix", &self.prefix)
            .field("advance_clock", &self.advance_clock.is_some())
            .field("lossy_putter", &self.lossy_putter.is_some())
            .field("largest_blob", &self.largest_blob)
            .finish()
    }
}

impl Default for RelocationCapabilities {
    fn default() -> Self {
        Self::new()
    }
}

impl RelocationCapabilities {
    /// A random prefix, real time, no lossy putter, largest blob on.
    pub fn new() -> Self {
        RelocationCapabilities {
            prefix: random_prefix("relocation"),
            advance_clock: None,
            lossy_putter: None,
            largest_blob: true,
        }
    }

    /// Uses a [`ManualClock`] shared with the provider.
    pub fn with_manual_clock(mut self, clock: ManualClock) -> Self {
        self.advance_clock = Some(Arc::new(move |d| clock.advance(d)));
        self
    }

    /// Uses a handle whose put replies get lost, e.g.
    /// `Arc::new(FaultyRelocationStore::losing_put_replies(store.clone()))`.
    pub fn with_lossy_putter(mut self, lossy: Arc<dyn DynRelocationStore>) -> Self {
        self.lossy_putter = Some(lossy);
        self
    }

    /// Skips (or keeps) the 64 MiB + 23 bytes round trip.
    pub fn with_largest_blob(mut self, on: bool) -> Self {
        self.largest_blob = on;
        self
    }

    /// Sets the reference prefix.
    pub fn with_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }
}

/// What a suite run found.
#[derive(Debug, Default, Clone)]
#[non_exhaustive]
pub struct SuiteReport {
    /// Checks that passed, by name.
    pub passed: Vec<&'static str>,
    /// Checks that failed, by name, with the reason.
    pub failed: Vec<(&'static str, String)>,
}

impl SuiteReport {
    fn record(&mut self, name: &'static str, result: CheckResult) {
        match result {
            Ok(()) => {
                tracing::info!(check = name, "passed");
                self.passed.push(name);
            }
            Err(reason) => {
                tracing::error!(check = name, %reason, "failed");
                self.failed.push((name, reason));
            }
        }
    }

    /// Panics with every failure listed, unless all checks passed. For use in tests.
    #[track_caller]
    pub fn assert_all_passed(&self) {
        if !self.failed.is_empty() {
            let list: Vec<String> = self
                .failed
                .iter()
                .map(|(n, r)| format!("  {n}: {r}"))
                .collect();
            panic!(
                "{} of {} conformance checks failed:\n{}",
                self.failed.len(),
                self.failed.len() + self.passed.len(),
                list.join("\n")
            );
        }
    }
}

impl fmt::Display for SuiteReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for name in &self.passed {
            writeln!(f, "ok     {name}")?;
        }
        for (name, reason) in &self.failed {
            writeln!(f, "FAILED {name}: {reason}")?;
        }
        write!(
            f,
            "{} passed, {} failed",
            self.passed.len(),
            self.failed.len()
        )
    }
}

/// Runs every Location Store check (spec 22 §10, SPI items) and the model test against
/// `store`, cleaning up its prefix after each check.
pub async fn run_location_suite(
    store: &dyn DynLocationStore,
    caps: &LocationCapabilities,
) -> SuiteReport {
    let mut report = SuiteReport::default();
    for (name, check) in location::all_checks() {
        let sub = LocationCapabilities {
            prefix: format!("{}{name}/", caps.prefix),
            ..caps.clone()
        };
        let result = check(store, &sub).await;
        let cleaned = util::cleanup(store, &sub.prefix).await;
        report.record(name, result.and(cleaned));
    }
    let sub = LocationCapabilities {
        prefix: format!("{}model/", caps.prefix),
        ..caps.clone()
    };
    let result = location_model_matches_reference(store, &sub, ModelConfig::from_caps(&sub)).await;
    let cleaned = util::cleanup(store, &sub.prefix).await;
    report.record("location_model_matches_reference", result.and(cleaned));
    report
}

/// Runs every Relocation Store check (spec 23, contract tests) against `store`.
pub async fn run_relocation_suite(
    store: &dyn DynRelocationStore,
    caps: &RelocationCapabilities,
) -> SuiteReport {
    let mut report = SuiteReport::default();
    for (name, check) in relocation::all_checks() {
        let sub = RelocationCapabilities {
            prefix: format!("{}{name}/", caps.prefix),
            ..caps.clone()
        };
        report.record(name, check(store, &sub).await);
    }
    report
}
