//! What the repository rules over source text share: the Rust files under a folder, which of
//! them are test files, a file's non-test code, and the ratchet that compares what a rule
//! finds with what it knows of (a count may neither grow nor fall unnoticed).

#![cfg(test)]

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`, recursively (none if `dir` cannot be read).
pub(crate) fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Whether `shown` (a path relative to a crate's `src/`) is a test file: under a `tests`
/// folder, or named `tests.rs` or `*tests.rs`.
pub(crate) fn is_test_file(shown: &Path) -> bool {
    shown.components().any(|c| c.as_os_str() == "tests")
        || shown
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.ends_with("tests.rs"))
}

/// The non-test code of a source text: comment lines dropped, and nothing from an inline
/// `#[cfg(test)] mod .. {` on (test modules close their files).
pub(crate) fn non_test_code(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let trimmed = line.trim();
        if trimmed == "#[cfg(test)]"
            && lines.peek().is_some_and(|next| {
                let next = next.trim_start();
                next.starts_with("mod ") && next.trim_end().ends_with('{')
            })
        {
            break;
        }
        if !trimmed.starts_with("//") {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// A rule's ratchet: every key `found` with a count other than the one `known` lists is
/// reported by `changed(key, count, known count)`, and every key `known` lists that is no
/// longer found by `gone(key, known count)`. Empty when the list is exactly true.
pub(crate) fn ratchet<K: Ord + Debug>(
    found: &BTreeMap<K, usize>,
    known: &[(K, usize)],
    changed: impl Fn(&K, usize, Option<usize>) -> String,
    gone: impl Fn(&K, usize) -> String,
) -> Vec<String> {
    let mut problems = Vec::new();
    for (key, n) in found {
        let k = known.iter().find(|(k, _)| k == key).map(|(_, n)| *n);
        if k != Some(*n) {
            problems.push(changed(key, *n, k));
        }
    }
    for (key, n) in known {
        if !found.contains_key(key) {
            problems.push(gone(key, *n));
        }
    }
    problems
}

#[test]
fn non_test_code_stops_at_an_inline_test_module() {
    let text = "a::application(x)\n// b::application(\n#[cfg(test)]\nuse y;\n\
                #[cfg(test)]\nmod tests {\n    c::application(\n}\n";
    assert_eq!(
        non_test_code(text),
        "a::application(x)\n#[cfg(test)]\nuse y;\n"
    );
}

#[test]
fn the_ratchet_reports_a_count_that_grew_fell_or_appeared_and_a_known_key_gone() {
    let found = BTreeMap::from([("a", 2), ("b", 1), ("new", 1)]);
    let known = [("a", 2), ("b", 2), ("old", 1)];
    let problems = ratchet(
        &found,
        &known,
        |k, n, was| format!("{k} {n} {was:?}"),
        |k, n| format!("{k} gone {n}"),
    );
    assert_eq!(problems, ["b 1 Some(2)", "new 1 None", "old gone 1"]);
    assert!(
        ratchet(
            &found,
            &[("a", 2), ("b", 1), ("new", 1)],
            |_, _, _| String::new(),
            |_, _| String::new()
        )
        .is_empty()
    );
}
