//! Repository rules as tests over source text, for the relocation seam (issue #39): every
//! `match` over a relocation machine's effects (`Effect`, `TargetEffect`) in the runtime's
//! `relocation/` names every effect (no `_` arm), and the runtime's structs grow no more
//! `#[cfg(test)]` fields (a ratchet: the count may only fall).

#[cfg(test)]
mod tests {

    use crate::tidy_source::{is_test_file, non_test_code, rust_files};
    use crate::workspace_root;

    /// `#[cfg(test)]` fields inside the runtime's structs today (`crates/zlink-runtime/src`,
    /// test files and inline test modules excluded). The test fails when the count grows and
    /// when it falls, so this number only ever goes down (issue #39). It reached 0: the
    /// relocation layer's test hooks are fail points and observation points installed on a
    /// running node (`relocation/probe.rs`, `completion::CompletionProbe`) and the gate's
    /// counters are always kept.
    const KNOWN_CFG_TEST_FIELDS: usize = 0;

    /// The text inside the braces that open at byte `open` (which holds `{`), and the byte
    /// after the closing brace.
    fn block(text: &str, open: usize) -> Option<(&str, usize)> {
        let mut depth = 0usize;
        for (i, c) in text[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        return Some((&text[open + 1..open + i], open + i + 1));
                    }
                }
                _ => {}
            }
        }
        None
    }

    /// A block's own text, each nested `{..}` replaced by `{}`.
    fn top_level(body: &str) -> String {
        let mut out = String::new();
        let mut depth = 0usize;
        for c in body.chars() {
            match c {
                '{' => {
                    if depth == 0 {
                        out.push('{');
                    }
                    depth += 1;
                }
                '}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        out.push('}');
                    }
                }
                _ if depth == 0 => out.push(c),
                _ => {}
            }
        }
        out
    }

    /// Whether some arm of a `match` body (its own text) is a bare `_` (with or without a
    /// guard).
    fn has_wildcard_arm(arms: &str) -> bool {
        let mut rest = arms;
        while let Some(at) = rest.find("=>") {
            let before = &rest[..at];
            let start = before.rfind([',', '}']).map_or(0, |i| i + 1);
            let pattern = before[start..].trim();
            if pattern == "_" || pattern.starts_with("_ if ") {
                return true;
            }
            rest = &rest[at + 2..];
        }
        false
    }

    /// The `match` blocks over a relocation machine's effects in `code` that have a `_` arm,
    /// as the first line of each.
    fn wildcard_effect_matches(code: &str) -> Vec<String> {
        let mut found = Vec::new();
        let mut from = 0;
        while let Some(at) = code[from..].find("match ") {
            let at = from + at;
            from = at + "match ".len();
            let word_start = at == 0
                || !code[..at]
                    .chars()
                    .last()
                    .is_some_and(|c| c.is_alphanumeric() || c == '_');
            let Some(open) = code[at..].find('{').map(|i| at + i) else {
                continue;
            };
            if !word_start {
                continue;
            }
            let Some((body, _)) = block(code, open) else {
                continue;
            };
            let arms = top_level(body);
            if arms.contains("Effect::") && has_wildcard_arm(&arms) {
                let line = code[at..].lines().next().unwrap_or_default().trim();
                found.push(line.to_owned());
            }
        }
        found
    }

    /// How many `#[cfg(test)]` fields the named-field structs of `code` declare.
    fn cfg_test_fields(code: &str) -> usize {
        let mut count = 0;
        let mut from = 0;
        while let Some(at) = code[from..].find("struct ") {
            let at = from + at;
            from = at + "struct ".len();
            let word_start = at == 0
                || !code[..at]
                    .chars()
                    .last()
                    .is_some_and(|c| c.is_alphanumeric() || c == '_');
            let (Some(open), semi) = (
                code[at..].find('{').map(|i| at + i),
                code[at..].find([';', '(']).map(|i| at + i),
            ) else {
                continue;
            };
            if !word_start || semi.is_some_and(|s| s < open) {
                continue; // a unit or tuple struct, or `struct` in other text
            }
            if let Some((body, _)) = block(code, open) {
                count += top_level(body)
                    .lines()
                    .filter(|l| l.trim() == "#[cfg(test)]")
                    .count();
            }
        }
        count
    }

    #[test]
    fn the_wildcard_detector_finds_a_wildcard_arm_only_on_effects() {
        let wild = "match e { Effect::A => 1, Effect::B(x, _) => 2, _ => { f() } }";
        assert_eq!(wildcard_effect_matches(wild).len(), 1);
        let guarded = "match e { TargetEffect::A => 1, _ if x => 2 }";
        assert_eq!(wildcard_effect_matches(guarded).len(), 1);
        let exhaustive = "match e { Effect::A => { match y { _ => 0 } } Effect::B(_, _) => 2 }";
        assert!(wildcard_effect_matches(exhaustive).is_empty());
        let other = "match k { Kind::A => 1, _ => 2 }";
        assert!(wildcard_effect_matches(other).is_empty());
    }

    #[test]
    fn the_field_counter_counts_cfg_test_fields_in_structs_only() {
        let text = "pub(crate) struct S {\n    a: u8,\n    #[cfg(test)]\n    b: u8,\n    \
                    c: Option<Box<dyn Fn() -> u8>>,\n}\nstruct T(u8);\nfn f() {\n    \
                    #[cfg(test)]\n    g();\n}\nstruct U {\n    #[cfg(test)]\n    x: u8,\n}\n";
        assert_eq!(cfg_test_fields(text), 2);
    }

    /// Issue #39: the runtime performs every effect a relocation machine returns, so each is
    /// named in every `match` over them; a `_` arm would silently drop a new one.
    #[test]
    fn relocation_never_matches_an_effect_with_a_wildcard() {
        let src = workspace_root().join("crates/zlink-runtime/src");
        let mut files = Vec::new();
        rust_files(&src.join("relocation"), &mut files);
        assert!(!files.is_empty(), "no sources under relocation/");
        let mut problems = Vec::new();
        for file in files {
            let text = std::fs::read_to_string(&file).expect("readable source");
            for line in wildcard_effect_matches(&non_test_code(&text)) {
                let shown = file.strip_prefix(&src).unwrap_or(&file).display();
                problems.push(format!("{shown}: `{line}` has a `_` arm"));
            }
        }
        assert!(
            problems.is_empty(),
            "matches over relocation effects with a wildcard arm:\n{}",
            problems.join("\n")
        );
    }

    /// Issue #39: test hooks belong in seams the tests replace, not in production structs.
    #[test]
    fn runtime_structs_gain_no_cfg_test_fields() {
        let src = workspace_root().join("crates/zlink-runtime/src");
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        let mut total = 0;
        let mut by_file = Vec::new();
        for file in files {
            let shown = file.strip_prefix(&src).unwrap_or(&file).to_path_buf();
            if is_test_file(&shown) {
                continue;
            }
            let text = std::fs::read_to_string(&file).expect("readable source");
            let n = cfg_test_fields(&non_test_code(&text));
            if n > 0 {
                by_file.push(format!("{}: {n}", shown.display()));
                total += n;
            }
        }
        assert_eq!(
            total,
            KNOWN_CFG_TEST_FIELDS,
            "#[cfg(test)] fields in runtime structs (lower KNOWN_CFG_TEST_FIELDS when it falls; \
             never raise it):\n{}",
            by_file.join("\n")
        );
    }
}
