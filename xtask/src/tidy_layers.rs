//! Repository rules as tests over source text: the `zlink-runtime` layers import only
//! downward (`docs/architecture.md`), runtime code keeps its failures typed (no
//! `ZLinkError::application(..)` outside handlers), and every test `docs/verification.md`
//! names exists.

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::BTreeMap;

    use crate::tidy_source::{is_test_file, non_test_code, ratchet, rust_files};
    use crate::workspace_root;

    /// The runtime's layers, bottom first: each may name only those before it.
    const LAYERS: [&str; 6] = [
        "telemetry",
        "messaging",
        "mesh",
        "objects",
        "relocation",
        "host",
    ];

    /// Upward references that exist today, with their exact count, each to be removed by a
    /// named piece of work (`docs/architecture.md`, "Known exceptions"). The test fails when
    /// a count grows and when it shrinks, so this list stays true. None today.
    const KNOWN_UPWARD: [(&str, &str, usize); 0] = [];

    /// The top-level modules a text names through `crate::` (also inside `crate::{..}`).
    fn crate_modules(text: &str) -> Vec<String> {
        let mut found = Vec::new();
        let mut rest = text;
        while let Some(at) = rest.find("crate::") {
            let before = rest[..at].chars().last();
            rest = &rest[at + "crate::".len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue; // `zlink_runtime_crate::` or similar, not this crate's root
            }
            if let Some(group) = rest.strip_prefix('{') {
                let mut depth = 1;
                let mut item = String::new();
                let mut at_item_start = true;
                for c in group.chars() {
                    match c {
                        '{' => depth += 1,
                        '}' => depth -= 1,
                        ',' if depth == 1 => at_item_start = true,
                        _ => {}
                    }
                    if depth == 0 {
                        break;
                    }
                    if at_item_start && (c.is_alphanumeric() || c == '_') {
                        item.push(c);
                    } else if !item.is_empty() {
                        found.push(std::mem::take(&mut item));
                        at_item_start = false;
                    }
                }
                if !item.is_empty() {
                    found.push(item);
                }
            } else {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                found.push(name);
            }
        }
        found
    }

    #[test]
    fn crate_modules_reads_paths_and_groups() {
        assert_eq!(
            crate_modules("use crate::mesh::node; x crate::{host::A, objects::{B, C}}"),
            ["mesh", "host", "objects"]
        );
        assert!(crate_modules("zlink_runtime_crate::x").is_empty());
    }

    #[test]
    fn runtime_layers_import_only_downward() {
        let src = workspace_root().join("crates/zlink-runtime/src");
        let mut upward: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
        for (rank, layer) in LAYERS.iter().enumerate() {
            let mut files = Vec::new();
            rust_files(&src.join(layer), &mut files);
            assert!(!files.is_empty(), "no sources under {layer}/");
            for file in files {
                let text = std::fs::read_to_string(&file).expect("readable source");
                for named in crate_modules(&text) {
                    let Some(named_rank) = LAYERS.iter().position(|l| *l == named) else {
                        continue; // the facade modules and `location` re-export crates only
                    };
                    if named_rank > rank {
                        let shown = file.strip_prefix(&src).unwrap_or(&file).display();
                        upward
                            .entry((layer.to_string(), named))
                            .or_default()
                            .push(shown.to_string());
                    }
                }
            }
        }
        let counts: BTreeMap<(String, String), usize> = upward
            .iter()
            .map(|(k, files)| (k.clone(), files.len()))
            .collect();
        let known: Vec<((String, String), usize)> = KNOWN_UPWARD
            .iter()
            .map(|(f, t, n)| ((f.to_string(), t.to_string()), *n))
            .collect();
        let problems = ratchet(
            &counts,
            &known,
            |(from, to), n, known| {
                format!(
                    "{from}/ names crate::{to} {n} times (known: {known:?}): {:?}",
                    upward[&(from.clone(), to.clone())]
                )
            },
            |(from, to), n| {
                format!(
                    "{from}/ no longer names crate::{to} ({n} known): update KNOWN_UPWARD and \
                     docs/architecture.md"
                )
            },
        );
        assert!(
            problems.is_empty(),
            "upward imports:\n{}",
            problems.join("\n")
        );
    }

    /// Runtime files that still turn a typed failure into `ZLinkError::application(..)`, with
    /// their exact count of calls, each to be converted to a typed variant. The test fails
    /// when a count grows and when it shrinks, so this list only ever shrinks; it is empty
    /// now, so any call in runtime code fails it.
    const KNOWN_APPLICATION_CALLS: [(&str, usize); 0] = [];

    /// `ZLinkError::application(kind, text)` is for handlers and filters that complete with a
    /// chosen kind; runtime code reports its own failures as typed variants that keep their
    /// source (`docs/architecture.md`, convention 4).
    #[test]
    fn runtime_code_never_calls_zlink_error_application() {
        let src = workspace_root().join("crates/zlink-runtime/src");
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        let mut found: BTreeMap<String, usize> = BTreeMap::new();
        for file in files {
            let shown = file.strip_prefix(&src).unwrap_or(&file);
            if is_test_file(shown) {
                continue;
            }
            let text = std::fs::read_to_string(&file).expect("readable source");
            let n = non_test_code(&text).matches("::application(").count();
            if n > 0 {
                let shown = shown.to_string_lossy().replace('\\', "/");
                found.insert(shown, n);
            }
        }
        let known: Vec<(String, usize)> = KNOWN_APPLICATION_CALLS
            .iter()
            .map(|(f, n)| (f.to_string(), *n))
            .collect();
        let problems = ratchet(
            &found,
            &known,
            |file, n, known| {
                format!(
                    "{file} calls ::application( {n} times (known: {known:?}): use a typed \
                     ZLinkError variant"
                )
            },
            |file, n| {
                format!(
                    "{file} no longer calls ::application( ({n} known): remove it from \
                     KNOWN_APPLICATION_CALLS"
                )
            },
        );
        assert!(
            problems.is_empty(),
            "runtime ZLinkError::application calls:\n{}",
            problems.join("\n")
        );
    }

    /// The runtime names the Redis providers only in `src/redis.rs`, the `redis` feature's
    /// re-export module (`docs/architecture.md`), and in its tests: runtime code holds stores
    /// as `dyn` SPI objects and never depends on one provider.
    #[test]
    fn runtime_code_never_names_a_provider_type() {
        let src = workspace_root().join("crates/zlink-runtime/src");
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        let mut found = Vec::new();
        for file in files {
            let shown = file.strip_prefix(&src).unwrap_or(&file);
            let shown = shown.to_string_lossy().replace('\\', "/");
            if shown == "redis.rs" || is_test_file(std::path::Path::new(&shown)) {
                continue;
            }
            let text = std::fs::read_to_string(&file).expect("readable source");
            for name in [
                "zlink_redis_location",
                "zlink_redis_relocation",
                "zlink_redis_tls",
            ] {
                if text.contains(name) {
                    found.push(format!("{shown} names {name}"));
                }
            }
        }
        assert!(
            found.is_empty(),
            "provider names in the runtime:\n{}",
            found.join("\n")
        );
    }

    /// Every `fn` name under `crates/` and `xtask/`.
    fn function_names() -> std::collections::BTreeSet<String> {
        let root = workspace_root();
        let mut files = Vec::new();
        rust_files(&root.join("crates"), &mut files);
        rust_files(&root.join("xtask"), &mut files);
        let mut names = std::collections::BTreeSet::new();
        for file in files {
            let text = std::fs::read_to_string(&file).expect("readable source");
            for part in text.split("fn ").skip(1) {
                let name: String = part
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                names.insert(name);
            }
        }
        names
    }

    /// The test names in the last column of every table row of `docs/verification.md`.
    fn verification_tests() -> Vec<String> {
        let path = workspace_root().join("docs/verification.md");
        let text = std::fs::read_to_string(&path).expect("docs/verification.md");
        let mut names = Vec::new();
        for line in text
            .lines()
            .filter(|l| l.starts_with('|') && !l.starts_with("|---"))
        {
            let cells: Vec<&str> = line.trim_matches('|').split('|').collect();
            let Some(last) = cells.last() else { continue };
            for quoted in last.split('`').skip(1).step_by(2) {
                let name = quoted.rsplit("::").next().unwrap_or(quoted).trim();
                let is_test_name = name.contains('_')
                    && name
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
                if is_test_name {
                    names.push(name.to_owned());
                }
            }
        }
        names
    }

    #[test]
    fn every_test_named_in_docs_verification_exists() {
        let names = verification_tests();
        assert!(names.len() > 100, "only {} test names read", names.len());
        let functions = function_names();
        let missing: Vec<_> = names.iter().filter(|n| !functions.contains(*n)).collect();
        assert!(
            missing.is_empty(),
            "docs/verification.md names tests that do not exist: {missing:?}"
        );
    }
}
