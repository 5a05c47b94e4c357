//! Gating of tests that need a live service (a Redis server, a cluster): they run when their
//! environment variable names the service, fail when the environment demands live tests, and
//! otherwise skip with a notice the test harness cannot swallow.
//!
//! ```no_run
//! # async fn demo() {
//! use zlink_store_conformance::live;
//!
//! let Some(url) = live::env_or_skip("ZLINK_TEST_REDIS_URL", "my_live_test") else {
//!     return; // skipped, and said so on the terminal
//! };
//! // ... connect to `url` and test ...
//! # }
//! ```

use std::io::Write as _;

/// Set (to anything but empty, `0` or `false`) to make a missing live-test variable a test
/// failure instead of a skip. `cargo xtask test` sets it.
pub const REQUIRE_ENV: &str = "ZLINK_REQUIRE_REDIS";

/// The variable continuous-integration systems set; when on, a missing live-test variable is a
/// test failure, as with [`REQUIRE_ENV`].
pub const CI_ENV: &str = "CI";

/// What a live test does, given its environment (see [`LiveDecision::decide`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LiveDecision {
    /// The variable is set: run against this value (surrounding whitespace removed).
    Run(String),
    /// The variable is missing and nothing demands live tests: skip, loudly.
    Skip,
    /// The variable is missing but the named variable ([`REQUIRE_ENV`] or [`CI_ENV`]) demands
    /// live tests: the test must fail.
    Fail {
        /// Which variable demanded the live test.
        required_by: &'static str,
    },
}

impl LiveDecision {
    /// Decides from the values `lookup` gives for `var`, [`REQUIRE_ENV`] and [`CI_ENV`] (a
    /// pure function of them, so it is testable without touching the process environment).
    ///
    /// A variable that is unset, empty or only whitespace counts as missing; [`REQUIRE_ENV`] and
    /// [`CI_ENV`] are on unless missing, `0` or `false` (any case).
    pub fn decide(var: &str, lookup: impl Fn(&str) -> Option<String>) -> LiveDecision {
        if let Some(value) = lookup(var) {
            let value = value.trim();
            if !value.is_empty() {
                return LiveDecision::Run(value.to_owned());
            }
        }
        for flag in [REQUIRE_ENV, CI_ENV] {
            if lookup(flag).as_deref().is_some_and(flag_is_on) {
                return LiveDecision::Fail { required_by: flag };
            }
        }
        LiveDecision::Skip
    }
}

fn flag_is_on(value: &str) -> bool {
    let value = value.trim();
    !(value.is_empty() || value == "0" || value.eq_ignore_ascii_case("false"))
}

/// The value of the live-test variable `var` for the test `test`, or `None` after a skip notice.
///
/// - `var` set: returns its value.
/// - `var` missing and [`REQUIRE_ENV`] or [`CI_ENV`] on: **panics**, so the test fails instead
///   of passing without having run.
/// - otherwise: writes `SKIPPED <test>: <var> not set` straight to the process's standard error
///   (not through `eprintln!`, which the test harness captures and hides for passing tests),
///   and returns `None`.
///
/// # Panics
///
/// When `var` is missing but live tests are required (see above).
#[track_caller]
pub fn env_or_skip(var: &str, test: &str) -> Option<String> {
    match LiveDecision::decide(var, |name| std::env::var(name).ok()) {
        LiveDecision::Run(value) => Some(value),
        LiveDecision::Skip => {
            report_skip(test, &format!("{var} not set"));
            None
        }
        LiveDecision::Fail { required_by } => panic!(
            "{test}: {var} is not set, but {required_by} is, so live tests must run rather than \
             skip. Start the services with `cargo xtask services` and export the variables it \
             prints, or run `cargo xtask test`."
        ),
    }
}

/// Writes `SKIPPED <test>: <reason>` straight to the process's standard error, past the test
/// harness's output capture, so a skipped test never reads as a silent `ok`.
pub fn report_skip(test: &str, reason: &str) {
    let line = format!("SKIPPED {test}: {reason}\n");
    // Nowhere to report a failure to write the notice; the test goes on either way.
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// The name of the running test, as the test harness names its thread (`module::test_name`),
/// or `"unnamed test"` on an unnamed thread.
pub fn current_test() -> String {
    std::thread::current()
        .name()
        .unwrap_or("unnamed test")
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        }
    }

    const VAR: &str = "ZLINK_TEST_REDIS_URL";

    #[test]
    fn set_variable_runs_whatever_else_is_set() {
        for others in [
            vec![],
            vec![(CI_ENV, "true")],
            vec![(REQUIRE_ENV, "1"), (CI_ENV, "1")],
        ] {
            let mut pairs = vec![(VAR, " redis://127.0.0.1:6379 ")];
            pairs.extend(others);
            assert_eq!(
                LiveDecision::decide(VAR, env(&pairs)),
                LiveDecision::Run("redis://127.0.0.1:6379".into())
            );
        }
    }

    #[test]
    fn missing_variable_skips_when_nothing_requires_live_tests() {
        for pairs in [
            vec![],
            vec![(VAR, "")],
            vec![(VAR, "   ")],
            vec![(CI_ENV, "")],
            vec![(CI_ENV, "false"), (REQUIRE_ENV, "0")],
            vec![(CI_ENV, "FALSE"), (REQUIRE_ENV, " ")],
            vec![("ZLINK_TEST_REDIS_URL_2", "redis://other")],
        ] {
            assert_eq!(
                LiveDecision::decide(VAR, env(&pairs)),
                LiveDecision::Skip,
                "{pairs:?}"
            );
        }
    }

    #[test]
    fn missing_variable_fails_when_ci_is_set() {
        for value in ["true", "1", "yes"] {
            assert_eq!(
                LiveDecision::decide(VAR, env(&[(CI_ENV, value)])),
                LiveDecision::Fail {
                    required_by: CI_ENV
                }
            );
        }
    }

    #[test]
    fn missing_variable_fails_when_live_tests_are_required() {
        assert_eq!(
            LiveDecision::decide(VAR, env(&[(VAR, ""), (REQUIRE_ENV, "1")])),
            LiveDecision::Fail {
                required_by: REQUIRE_ENV
            }
        );
        // Both on: the explicit requirement is named.
        assert_eq!(
            LiveDecision::decide(VAR, env(&[(REQUIRE_ENV, "1"), (CI_ENV, "true")])),
            LiveDecision::Fail {
                required_by: REQUIRE_ENV
            }
        );
    }

    #[test]
    fn current_test_is_the_harness_thread_name() {
        assert!(
            current_test().ends_with("current_test_is_the_harness_thread_name"),
            "{}",
            current_test()
        );
    }
}
