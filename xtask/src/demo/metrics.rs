//! `cargo xtask demo --metrics ADDR`: the Prometheus endpoint of the demo's process (the
//! `mesh_node` example's glue, included from `crates/zlink-runtime/examples/mesh_node/
//! prometheus.rs`), and the demo's own scrape at its end: one raw HTTP GET whose text must
//! show every instrument `docs/metrics.md` lists; the demo prints each with its series.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[path = "../../../crates/zlink-runtime/examples/mesh_node/prometheus.rs"]
#[allow(dead_code, unreachable_pub)]
pub(crate) mod prometheus;

/// Installs the Prometheus recorder (before any root is built) and serves it on `addr`.
pub(crate) async fn start(addr: &str) -> Result<SocketAddr, String> {
    let bound = prometheus::install_and_serve(addr).await?;
    println!("metrics: Prometheus text at http://{bound}/metrics");
    Ok(bound)
}

/// One `GET /metrics` on `addr` over a plain TCP connection; the body.
pub(crate) async fn scrape(addr: SocketAddr) -> Result<String, String> {
    let exchange = async {
        let mut s = tokio::net::TcpStream::connect(addr).await?;
        s.write_all(
            format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .await?;
        let mut text = String::new();
        s.read_to_string(&mut text).await?;
        Ok::<_, std::io::Error>(text)
    };
    let text = tokio::time::timeout(Duration::from_secs(10), exchange)
        .await
        .map_err(|_| format!("scraping {addr} timed out"))?
        .map_err(|e| format!("scraping {addr}: {e}"))?;
    match text.split_once("\r\n\r\n") {
        Some((head, body)) if head.starts_with("HTTP/1.1 200") => Ok(body.to_owned()),
        _ => Err(format!("scraping {addr}: not a 200 response")),
    }
}

/// The instruments `docs/metrics.md` lists, in their Prometheus form (`.` → `_`).
pub(crate) fn documented() -> Result<Vec<String>, String> {
    let path = crate::workspace_root().join("docs/metrics.md");
    let doc = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(doc
        .lines()
        .filter_map(|l| l.strip_prefix("| `zlink."))
        .filter_map(|l| l.split('`').next())
        .map(|n| format!("zlink_{}", n.replace('.', "_")))
        .collect())
}

/// Per documented instrument, its series in `text` (lines naming it, histogram parts
/// included); an error names the instruments the text does not show.
pub(crate) fn check(text: &str, names: &[String]) -> Result<Vec<(String, usize)>, String> {
    let mut shown = Vec::new();
    let mut missing = Vec::new();
    for name in names {
        if !text.contains(&format!("# TYPE {name} ")) {
            missing.push(name.clone());
            continue;
        }
        let series = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter(|l| {
                l.strip_prefix(name.as_str()).is_some_and(|rest| {
                    let rest = ["_bucket", "_sum", "_count"]
                        .iter()
                        .find_map(|part| rest.strip_prefix(part))
                        .unwrap_or(rest);
                    rest.starts_with(['{', ' '])
                })
            })
            .count();
        shown.push((name.clone(), series));
    }
    if missing.is_empty() {
        Ok(shown)
    } else {
        Err(format!("the scrape does not show {missing:?}"))
    }
}

/// The end-of-demo scrape: checks and prints every instrument.
pub(crate) async fn report(addr: SocketAddr) -> Result<Vec<(String, usize)>, String> {
    let text = scrape(addr).await?;
    let shown = check(&text, &documented()?)?;
    println!("metrics scrape of http://{addr}/metrics shows every documented instrument:");
    for (name, series) in &shown {
        println!("  {name}: {series} series");
    }
    Ok(shown)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_names_the_instruments_a_scrape_does_not_show() {
        let text = "# TYPE zlink_a counter\nzlink_a{x=\"1\"} 2\nzlink_a{x=\"2\"} 0\nzlink_ab 1\n\
                    # TYPE zlink_h histogram\nzlink_h_bucket{le=\"1\"} 1\nzlink_h_sum 0.5\nzlink_h_count 1\n";
        let names = ["zlink_a".to_string(), "zlink_h".to_string()];
        assert_eq!(
            check(text, &names),
            Ok(vec![("zlink_a".to_string(), 2), ("zlink_h".to_string(), 3)])
        );
        let err = check(text, &["zlink_b".to_string()]).expect_err("zlink_b is missing");
        assert!(err.contains("zlink_b"), "{err}");
    }

    #[test]
    fn the_documented_instruments_are_read_in_prometheus_form() {
        let names = documented().expect("docs/metrics.md is readable");
        assert!(
            names.contains(&"zlink_messages_sent".to_string()),
            "{names:?}"
        );
        assert!(names.iter().all(|n| !n.contains('.')));
    }
}
