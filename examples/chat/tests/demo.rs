//! Runs `zlink-chat demo` against the live Redis named by `ZLINK_TEST_REDIS_URL` and checks
//! that it passed: every room's history and every user's state intact after a node left.
//!
//! Without the variable the test says `SKIPPED` on the terminal and passes — unless `CI` or
//! `ZLINK_REQUIRE_REDIS` is set (to anything but empty, `0` or `false`): then it fails.
#![allow(
    clippy::print_stdout,
    reason = "the demo's output is shown when the test fails"
)]

use std::io::Write as _;
use std::process::Stdio;
use std::time::Duration;

/// The demo is killed past this (it takes a few seconds).
const DEADLINE: Duration = Duration::from_secs(120);

/// The Redis URL, or `None` after a skip notice; panics when live tests are required.
fn redis_url_or_skip(test: &str) -> Option<String> {
    let var = "ZLINK_TEST_REDIS_URL";
    if let Some(url) = std::env::var(var).ok().filter(|u| !u.trim().is_empty()) {
        return Some(url.trim().to_owned());
    }
    let on = |flag: &str| {
        std::env::var(flag).is_ok_and(|v| {
            let v = v.trim();
            !(v.is_empty() || v == "0" || v.eq_ignore_ascii_case("false"))
        })
    };
    for flag in ["ZLINK_REQUIRE_REDIS", "CI"] {
        assert!(
            !on(flag),
            "{test}: {var} is not set, and {flag} requires live tests"
        );
    }
    // Straight to stderr: libtest captures `eprintln!` of a passing test.
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {var} not set");
    None
}

#[tokio::test]
async fn demo_keeps_every_history_when_a_node_leaves() {
    let Some(url) = redis_url_or_skip("demo_keeps_every_history_when_a_node_leaves") else {
        return;
    };
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_zlink-chat"))
        .args(["demo", "--redis", &url])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true) // past the deadline the future is dropped, and the demo killed
        .spawn()
        .expect("start zlink-chat demo");
    let output = tokio::time::timeout(DEADLINE, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("zlink-chat demo did not end within {DEADLINE:?} (killed)"))
        .expect("wait for zlink-chat demo");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}\n--- stderr ---\n{stderr}");
    assert!(
        output.status.success(),
        "zlink-chat demo failed: {}",
        output.status
    );
    for expected in [
        "4 users entered 3 rooms and posted 117 lines",
        "#random: members bob, cyd, dee; 112 lines posted, the last 100 kept",
        "relocated: Relocated None,",
        "after the move: all 3 room histories and 4 users intact (117 lines, none lost or duplicated)",
        "chat demo passed in",
    ] {
        assert!(stdout.contains(expected), "no line with {expected:?}");
    }
    assert!(
        stdout.contains("0 remaining; shutdown Stopped"),
        "the leaving node kept objects"
    );
}
