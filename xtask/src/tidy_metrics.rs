//! Repository rule as a test: every instrument the runtime records
//! (`crates/zlink-runtime/src/telemetry/names.rs`) is documented in `docs/metrics.md`, and the
//! document names no instrument the runtime does not record.

#[cfg(test)]
mod tests {
    use crate::workspace_root;

    /// The `"zlink.…"` string literals of a source text.
    fn instrument_names(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut rest = text;
        while let Some(at) = rest.find("\"zlink.") {
            rest = &rest[at + 1..];
            let name: String = rest.chars().take_while(|c| *c != '"').collect();
            rest = &rest[name.len()..];
            out.push(name);
        }
        out
    }

    /// The backquoted `zlink.…` names of the document's instrument table rows.
    fn documented(text: &str) -> Vec<String> {
        text.lines()
            .filter_map(|l| l.strip_prefix("| `zlink."))
            .filter_map(|l| l.split('`').next())
            .map(|n| format!("zlink.{n}"))
            .collect()
    }

    #[test]
    fn instrument_names_reads_string_literals() {
        assert_eq!(
            instrument_names("const A: &str = \"zlink.a.b\"; \"other\" \"zlink.c\""),
            ["zlink.a.b", "zlink.c"]
        );
    }

    #[test]
    fn every_instrument_is_documented() {
        let root = workspace_root();
        let names =
            std::fs::read_to_string(root.join("crates/zlink-runtime/src/telemetry/names.rs"))
                .expect("telemetry/names.rs is readable");
        let doc = std::fs::read_to_string(root.join("docs/metrics.md"))
            .expect("docs/metrics.md is readable");
        let recorded = instrument_names(&names);
        let listed = documented(&doc);
        assert!(
            recorded.len() >= 10,
            "names.rs lists the instruments: {recorded:?}"
        );
        let missing: Vec<_> = recorded.iter().filter(|n| !listed.contains(n)).collect();
        let extra: Vec<_> = listed.iter().filter(|n| !recorded.contains(n)).collect();
        assert!(
            missing.is_empty(),
            "instruments not in docs/metrics.md: {missing:?}"
        );
        assert!(
            extra.is_empty(),
            "docs/metrics.md names unknown instruments: {extra:?}"
        );
    }
}
