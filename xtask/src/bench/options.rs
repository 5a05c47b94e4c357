//! The command-line options the benches share (`--seconds`, `--redis`, `--case`): each parser
//! takes the option's value and names its bench in the error, so every bench refuses a bad value
//! the same way.

/// The value of `--seconds` for `bench`: a number of seconds in (0, 60].
pub(super) fn seconds(bench: &str, value: Option<&String>) -> Result<f64, String> {
    value
        .and_then(|n| n.parse().ok())
        .filter(|n: &f64| *n > 0.0 && *n <= 60.0)
        .ok_or_else(|| format!("bench {bench}: --seconds needs a number in (0, 60]"))
}

/// The value of `--redis` for `bench`: a URL.
pub(super) fn url(bench: &str, value: Option<&String>) -> Result<String, String> {
    value
        .cloned()
        .ok_or_else(|| format!("bench {bench}: --redis needs a URL"))
}

/// The value of `--case` for `bench`: one of `cases`.
pub(super) fn case(bench: &str, value: Option<&String>, cases: &[&str]) -> Result<String, String> {
    value
        .filter(|c| cases.contains(&c.as_str()))
        .cloned()
        .ok_or_else(|| format!("bench {bench}: --case needs {}", one_of(cases)))
}

/// Whether `case` runs when `--case` chose `only` (`None`: every case runs).
pub(super) fn runs(only: Option<&str>, case: &str) -> bool {
    only.is_none_or(|c| c == case)
}

/// `a, b or c`.
fn one_of(cases: &[&str]) -> String {
    match cases.split_last() {
        Some((last, [])) => (*last).to_owned(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// Tests: a command line as the parsers get it.
#[cfg(test)]
pub(super) fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_checked_and_a_refusal_names_the_bench() {
        let v = |s: &str| Some(s.to_owned());
        assert_eq!(seconds("mesh", v("60").as_ref()), Ok(60.0));
        assert_eq!(
            seconds("mesh", v("60.5").as_ref()),
            Err("bench mesh: --seconds needs a number in (0, 60]".to_owned())
        );
        assert!(seconds("mesh", v("0").as_ref()).is_err());
        assert!(seconds("mesh", None).is_err());
        assert_eq!(
            url("x", v("redis://h").as_ref()),
            Ok("redis://h".to_owned())
        );
        assert_eq!(
            url("x", None),
            Err("bench x: --redis needs a URL".to_owned())
        );
        let cases = ["one-way", "c1", "c64"];
        assert_eq!(case("t", v("c1").as_ref(), &cases), Ok("c1".to_owned()));
        assert_eq!(
            case("t", v("c2").as_ref(), &cases),
            Err("bench t: --case needs one-way, c1 or c64".to_owned())
        );
        assert_eq!(one_of(&["mesh"]), "mesh");
        assert!(runs(None, "c1") && runs(Some("c1"), "c1") && !runs(Some("c64"), "c1"));
    }
}
