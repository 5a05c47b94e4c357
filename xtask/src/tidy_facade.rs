//! The runtime's public facade as a repository rule (issue 40): the crate root names at most
//! `ROOT_LIMIT` items, and no item is exported under two public paths (the root and a
//! module, or two modules). The limit can only ratchet down.

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use crate::workspace_root;

    /// The most names the crate root of `zlink-runtime` may export (lower it when the facade
    /// shrinks; never raise it).
    const ROOT_LIMIT: usize = 25;

    /// The public modules whose `pub use` lists make the rest of the facade.
    const MODULES: [&str; 6] = [
        "config.rs",
        "handler.rs",
        "location.rs",
        "relocate.rs",
        "status.rs",
        "redis.rs",
    ];

    /// The names a file's `pub use` items export (`pub use a::b::{C, D};`, `pub use a::E;`),
    /// outside its doc comments.
    fn exported(text: &str) -> Vec<String> {
        let code: String = text
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        let mut names = Vec::new();
        for item in code.split("pub use ").skip(1) {
            let item = item.split(';').next().unwrap_or_default();
            let list = match item.find('{') {
                Some(open) => item[open + 1..].trim_end().trim_end_matches('}').to_owned(),
                None => item.rsplit("::").next().unwrap_or_default().to_owned(),
            };
            for name in list.split(',') {
                let name = name.trim();
                let name = name.rsplit(" as ").next().unwrap_or(name).trim();
                let name = name.rsplit("::").next().unwrap_or(name).trim();
                if !name.is_empty() && name != "*" {
                    names.push(name.to_owned());
                }
            }
        }
        names
    }

    fn source(file: &str) -> String {
        let path = workspace_root().join("crates/zlink-runtime/src").join(file);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    #[test]
    fn the_runtime_root_exports_at_most_its_limit_and_each_name_once() {
        let root = exported(&source("lib.rs"));
        assert!(
            root.len() <= ROOT_LIMIT,
            "the zlink-runtime root exports {} names (limit {ROOT_LIMIT}): {root:?}; put the \
             new one in a module",
            root.len()
        );
        let mut paths: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for name in root {
            paths.entry(name).or_default().push("zlink_runtime".into());
        }
        for module in MODULES {
            for name in exported(&source(module)) {
                paths
                    .entry(name)
                    .or_default()
                    .push(format!("zlink_runtime::{}", module.trim_end_matches(".rs")));
            }
        }
        let twice: Vec<String> = paths
            .iter()
            .filter(|(_, at)| at.len() > 1)
            .map(|(name, at)| format!("{name}: {}", at.join(", ")))
            .collect();
        assert!(twice.is_empty(), "exported twice:\n{}", twice.join("\n"));
    }

    #[test]
    fn exported_names_are_read_from_lists_single_items_and_renames() {
        let text = "//! pub use not::This;\npub use a::b::{C, d::E as F};\npub use g::H;\n";
        assert_eq!(exported(text), ["C", "F", "H"]);
    }
}
