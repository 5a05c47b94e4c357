//! A repository rule as a test: the runtime crates draw randomness, read the wall clock and
//! build hash maps only through `zlink_store_spi::entropy`, the one seam the deterministic
//! simulation replaces (`docs/architecture.md`, "The simulation seams"). A direct
//! `Uuid::new_v4`, `SystemTime::now`, `RandomState` or standard `HashMap`/`HashSet` in their
//! non-test code would make a seed replay differently from run to run.

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use crate::tidy_source::{is_test_file, non_test_code, ratchet, rust_files};
    use crate::workspace_root;

    /// The crates whose code runs inside a simulated host and may reach the seam.
    const CRATES: [&str; 4] = [
        "zlink-store-spi",
        "zlink-location",
        "zlink-relocation",
        "zlink-runtime",
    ];

    /// What bypasses the seam.
    const PATTERNS: [&str; 6] = [
        "Uuid::new_v4",
        "SystemTime::now",
        "RandomState",
        "std::collections::HashMap",
        "std::collections::HashSet",
        "std::collections::{",
    ];

    /// Uses that stay, with their exact count, each for a reason. The test fails when a count
    /// grows and when it shrinks, so this list stays true.
    const KNOWN: [(&str, &str, usize); 2] = [
        // The clock of providers whose clock is the host's (a simulation gives the memory
        // store a `ManualClock`).
        ("zlink-store-spi/src/types.rs", "SystemTime::now", 1),
        // Reply routes keyed by a fixed hasher (`RouteHasher`): no random keys to replace.
        (
            "zlink-runtime/src/mesh/node/pending.rs",
            "std::collections::HashMap",
            1,
        ),
    ];

    /// The seam itself.
    const SEAM: &str = "zlink-store-spi/src/entropy.rs";

    #[test]
    fn runtime_crates_draw_randomness_time_and_map_order_only_through_the_entropy_seam() {
        let root = workspace_root().join("crates");
        let mut found: BTreeMap<(String, &str), usize> = BTreeMap::new();
        for krate in CRATES {
            let mut files = Vec::new();
            rust_files(&root.join(krate).join("src"), &mut files);
            for file in files {
                let shown = file.strip_prefix(&root).unwrap_or(&file);
                if is_test_file(shown) || shown == std::path::Path::new(SEAM) {
                    continue;
                }
                let text = std::fs::read_to_string(&file).expect("readable source");
                let code = non_test_code(&text);
                let shown = shown.to_string_lossy().replace('\\', "/");
                for pattern in PATTERNS {
                    let mut n = code.matches(pattern).count();
                    if pattern == "std::collections::{" {
                        // A braced import bypasses the seam only if it names a hash collection.
                        n = code
                            .split(pattern)
                            .skip(1)
                            .filter(|rest| {
                                let group = rest.split('}').next().unwrap_or("");
                                group.contains("HashMap") || group.contains("HashSet")
                            })
                            .count();
                    }
                    if n > 0 {
                        found.insert((shown.clone(), pattern), n);
                    }
                }
            }
        }
        let known: Vec<((String, &str), usize)> = KNOWN
            .iter()
            .map(|(f, p, n)| ((f.to_string(), *p), *n))
            .collect();
        let problems = ratchet(
            &found,
            &known,
            |(file, pattern), n, known| {
                format!(
                    "{file}: {pattern} {n} times (known: {known:?}); use \
                     zlink_store_spi::entropy (uuid_v4, random_u128, system_time, HashMap, \
                     HashSet)"
                )
            },
            |(file, pattern), n| {
                format!("{file} no longer has {pattern} ({n} known): remove it from KNOWN")
            },
        );
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }
}
