//! Repository rules as tests (`cargo test -p xtask`): the crate dependency rule drawn in
//! `docs/architecture.md` (for `crates/*` and the example applications `examples/*`) and no
//! machine paths in tracked files.

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::process::Command;

    use crate::workspace_root;

    /// The crate names listed under `[dependencies]` of the crate `crates/<krate>`.
    fn normal_dependencies(krate: &str) -> Vec<String> {
        let manifest = workspace_root()
            .join("crates")
            .join(krate)
            .join("Cargo.toml");
        dependencies_in(&manifest)
    }

    /// The crate names listed under `[dependencies]` of a manifest.
    fn dependencies_in(manifest: &Path) -> Vec<String> {
        let text = std::fs::read_to_string(manifest)
            .unwrap_or_else(|e| panic!("{}: {e}", manifest.display()));
        let mut in_deps = false;
        let mut deps = Vec::new();
        for line in text.lines().map(str::trim) {
            if line.starts_with('[') {
                in_deps = line == "[dependencies]";
                continue;
            }
            if in_deps && !line.is_empty() && !line.starts_with('#') {
                let name = line
                    .split(['=', '.', ' '])
                    .next()
                    .unwrap_or_default()
                    .trim();
                deps.push(name.to_string());
            }
        }
        deps
    }

    /// The dependency table of `docs/architecture.md`: crate → the zlink crates it may name.
    fn drawn_dependencies() -> std::collections::BTreeMap<String, Vec<String>> {
        let path = workspace_root().join("docs").join("architecture.md");
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let mut table = std::collections::BTreeMap::new();
        for line in text.lines() {
            let cells: Vec<&str> = line.trim().trim_matches('|').split('|').collect();
            let [krate, allowed] = cells[..] else {
                continue;
            };
            let krate = krate.trim();
            if !krate.starts_with("zlink-") {
                continue;
            }
            let allowed = allowed
                .split(',')
                .map(str::trim)
                .filter(|d| d.starts_with("zlink-"))
                .map(str::to_owned)
                .collect();
            table.insert(krate.to_owned(), allowed);
        }
        table
    }

    /// The package name in a manifest's `[package]` table.
    fn package_name(manifest: &Path) -> String {
        let text = std::fs::read_to_string(manifest)
            .unwrap_or_else(|e| panic!("{}: {e}", manifest.display()));
        text.lines()
            .map(str::trim)
            .skip_while(|l| *l != "[package]")
            .find_map(|l| l.strip_prefix("name").map(|v| v.trim_start()))
            .and_then(|v| v.strip_prefix('='))
            .map(|v| v.trim().trim_matches('"').to_owned())
            .unwrap_or_else(|| panic!("{}: no [package] name", manifest.display()))
    }

    /// Every crate under `crates/` (named by its directory) and `examples/` (named by its
    /// package), with its manifest, sorted by name.
    fn workspace_crates() -> Vec<(String, std::path::PathBuf)> {
        let mut crates = Vec::new();
        for dir in ["crates", "examples"] {
            let dir = workspace_root().join(dir);
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.filter_map(Result::ok) {
                let manifest = entry.path().join("Cargo.toml");
                if !manifest.is_file() {
                    continue;
                }
                let name = if dir.ends_with("examples") {
                    package_name(&manifest)
                } else {
                    entry.file_name().to_string_lossy().into_owned()
                };
                crates.push((name, manifest));
            }
        }
        crates.sort();
        crates
    }

    #[test]
    fn every_crate_depends_only_on_the_zlink_crates_docs_architecture_draws() {
        let table = drawn_dependencies();
        let found = workspace_crates();
        let crates: Vec<&String> = found.iter().map(|(name, _)| name).collect();
        let mut problems = Vec::new();
        for (krate, manifest) in &found {
            let Some(allowed) = table.get(krate) else {
                problems.push(format!("{krate} is not drawn in docs/architecture.md"));
                continue;
            };
            for dep in dependencies_in(manifest) {
                if dep.starts_with("zlink-") && !allowed.contains(&dep) {
                    problems.push(format!(
                        "{krate} depends on {dep}, which docs/architecture.md does not draw"
                    ));
                }
            }
        }
        for drawn in table.keys() {
            if !crates.contains(&drawn) {
                problems.push(format!(
                    "docs/architecture.md draws {drawn}, which does not exist"
                ));
            }
        }
        assert!(problems.is_empty(), "{problems:#?}");
    }

    #[test]
    fn location_core_depends_on_the_spi_and_the_codec_only() {
        let zlink: Vec<String> = normal_dependencies("zlink-location")
            .into_iter()
            .filter(|d| d.starts_with("zlink-") && d != "zlink-store-spi" && d != "zlink-codec")
            .collect();
        assert!(
            zlink.is_empty(),
            "zlink-location depends on {zlink:?}; it knows no network, object or relocation engine"
        );
    }

    #[test]
    fn spi_depends_on_bytes_thiserror_and_uuid_only() {
        let deps = normal_dependencies("zlink-store-spi");
        // uuid: the entropy seam's draws from the operating system (`src/entropy.rs`).
        let allowed = ["bytes", "thiserror", "parking_lot", "uuid"];
        let extra: Vec<&String> = deps
            .iter()
            .filter(|d| !allowed.contains(&d.as_str()))
            .collect();
        assert!(
            extra.is_empty(),
            "zlink-store-spi may not depend on {extra:?} (no tokio, serde or client crate)"
        );
    }

    #[test]
    fn provider_crates_depend_on_no_zlink_crate_but_the_spi() {
        for krate in [
            "zlink-redis-location",
            "zlink-redis-relocation",
            "zlink-redis-tls",
        ] {
            let zlink: Vec<String> = normal_dependencies(krate)
                .into_iter()
                .filter(|d| {
                    d.starts_with("zlink-") && d != "zlink-store-spi" && d != "zlink-redis-tls"
                })
                .collect();
            assert!(
                zlink.is_empty(),
                "{krate} depends on {zlink:?}; providers depend on zlink-store-spi (and the \
                 shared zlink-redis-tls) only"
            );
        }
    }

    #[test]
    fn codec_and_conformance_keep_their_layer() {
        let codec: Vec<String> = normal_dependencies("zlink-codec")
            .into_iter()
            .filter(|d| d.starts_with("zlink-"))
            .collect();
        assert!(codec.is_empty(), "zlink-codec depends on {codec:?}");
        let conf: Vec<String> = normal_dependencies("zlink-store-conformance")
            .into_iter()
            .filter(|d| d.starts_with("zlink-") && d != "zlink-store-spi")
            .collect();
        assert!(
            conf.is_empty(),
            "zlink-store-conformance depends on {conf:?}"
        );
    }

    #[test]
    fn transport_depends_on_no_zlink_crate_but_the_codec() {
        let zlink: Vec<String> = normal_dependencies("zlink-transport")
            .into_iter()
            .filter(|d| d.starts_with("zlink-") && d != "zlink-codec")
            .collect();
        assert!(
            zlink.is_empty(),
            "zlink-transport depends on {zlink:?}; it knows nothing of locations or objects"
        );
    }

    /// The runtime holds stores as `Arc<dyn ...>`; a provider may appear in its
    /// `[dependencies]` only as an optional dependency of the `redis` feature, which re-exports
    /// it (`src/redis.rs`; `runtime_code_never_names_a_provider_type` keeps it there).
    #[test]
    fn runtime_depends_on_a_provider_only_as_an_optional_re_export() {
        let manifest = workspace_root().join("crates/zlink-runtime/Cargo.toml");
        let text = std::fs::read_to_string(&manifest).expect("readable manifest");
        let line_of = |dep: &str| {
            text.lines()
                .map(str::trim)
                .find(|l| l.starts_with(dep) && l[dep.len()..].trim_start().starts_with(['=', '.']))
                .unwrap_or_default()
                .to_owned()
        };
        let zlink: Vec<String> = normal_dependencies("zlink-runtime")
            .into_iter()
            .filter(|d| d.starts_with("zlink-"))
            .filter(|d| {
                ![
                    "zlink-store-spi",
                    "zlink-codec",
                    "zlink-transport",
                    "zlink-location",
                    "zlink-relocation",
                ]
                .contains(&d.as_str())
            })
            .filter(|d| {
                let optional_provider = ["zlink-redis-location", "zlink-redis-relocation"]
                    .contains(&d.as_str())
                    && line_of(d).contains("optional = true");
                !optional_provider
            })
            .collect();
        assert!(
            zlink.is_empty(),
            "zlink-runtime depends on {zlink:?}; it holds stores as Arc<dyn ...> and names a \
             provider only as an optional dependency its `redis` feature re-exports"
        );
    }

    #[test]
    fn tracked_files_carry_no_machine_paths() {
        let root = workspace_root();
        let out = Command::new("git")
            .args(["ls-files", "-z"])
            .current_dir(&root)
            .output();
        let Some(out) = out.ok().filter(|o| o.status.success()) else {
            eprintln!("SKIPPED: not a git checkout");
            return;
        };
        // Spelled in pieces so this file does not match itself.
        let forbidden = [
            ["/wo", "rk/main"].concat(),
            ["/ro", "ot/"].concat(),
            ["/home", "/"].concat(),
        ];
        let mut hits = Vec::new();
        for path in out.stdout.split(|&b| b == 0).filter(|p| !p.is_empty()) {
            let rel = String::from_utf8_lossy(path).into_owned();
            let Ok(text) = std::fs::read_to_string(root.join(Path::new(&rel))) else {
                continue;
            };
            for f in &forbidden {
                if text.contains(f.as_str()) {
                    hits.push(format!("{rel}: {f}"));
                }
            }
        }
        assert!(hits.is_empty(), "machine paths in tracked files: {hits:?}");
    }
}
