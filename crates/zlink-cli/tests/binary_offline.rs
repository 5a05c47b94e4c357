//! The built `zlink` binary without a Redis: usage errors exit 2, a decoded member prints its
//! fields and exits 0 (conforming) or 1 (not), an unreachable Redis exits 4.

use std::process::Command;

fn zlink(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_zlink"))
        .args(args)
        .output()
        .expect("the zlink binary runs")
}

#[test]
fn usage_errors_exit_2() {
    assert_eq!(zlink(&["no-such-command"]).status.code(), Some(2));
    assert_eq!(zlink(&["locate", "entity", "x"]).status.code(), Some(2));
    assert_eq!(zlink(&["decode", "not a key"]).status.code(), Some(2));
}

#[test]
fn decode_prints_a_conforming_member_and_exits_0() {
    // The golden owner-lease tombstone.
    let out = zlink(&[
        "decode",
        "0195b36f776e65722d6c65617365006f776e65722d61a0a2343300c3",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    for field in [
        "originalKey",
        "owner-lease\\0owner-a",
        "version",
        "tombstone",
        "true",
    ] {
        assert!(text.contains(field), "{field} missing:\n{text}");
    }
}

#[test]
fn decode_of_a_broken_member_names_the_field_and_exits_1() {
    // Tag 0x02: an unknown version tag.
    let out = zlink(&["--json", "decode", "0295a16ba176a13100c2"]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let problem = v["decoded"]["problem"].as_str().unwrap_or_default();
    assert!(
        problem.contains("tag") && problem.contains("unknown version tag 0x02"),
        "{problem}"
    );
}

#[test]
fn an_unreachable_redis_exits_4() {
    let out = zlink(&[
        "--redis",
        "redis://127.0.0.1:1",
        "--timeout-ms",
        "300",
        "audit",
    ]);
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
