//! The demo on small sizes, and its options.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_demo_on_memory_stores_adds_up() {
    let cfg = Config {
        actors: 60,
        requests: 300,
        concurrency: 8,
        progress: false,
        ..Config::default()
    };
    let summary = demo(&cfg).await.expect("the demo succeeds");
    assert_eq!(summary.counted, 300);
    assert_eq!(summary.requests, 300);
    assert_eq!(summary.owned.iter().sum::<usize>(), 60);
    assert_eq!(summary.spots_owned.iter().sum::<usize>(), 100);
    assert_eq!(
        summary.relocation.moved, summary.owned[0],
        "every actor of root 1 moved"
    );
    assert!(summary.relocation.answered > 0, "the streams ran");
    assert_eq!(
        summary.spots_owned[0], 0,
        "nothing is placed on a relocated root"
    );
    assert!(
        summary.spots_owned.iter().filter(|n| **n > 0).count() >= 2,
        "instance spots spread over the nodes: {:?}",
        summary.spots_owned
    );
    assert!(
        summary.owned.iter().filter(|n| **n > 0).count() >= 2,
        "actors spread over the nodes: {:?}",
        summary.owned
    );
}

/// The only test of this process that installs a global recorder (one per process).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_demo_with_metrics_shows_every_documented_instrument_in_its_scrape() {
    let cfg = Config {
        actors: 30,
        requests: 120,
        instances: 10,
        concurrency: 8,
        progress: false,
        metrics: Some("127.0.0.1:0".into()),
        ..Config::default()
    };
    let summary = demo(&cfg).await.expect("the demo succeeds");
    let documented = metrics::documented().expect("docs/metrics.md");
    assert_eq!(
        summary.metrics.len(),
        documented.len(),
        "{:?}",
        summary.metrics
    );
    let series = |name: &str| {
        summary
            .metrics
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, s)| *s)
            .unwrap_or_default()
    };
    assert!(series("zlink_host_state") >= 7, "one series per host state");
    assert!(series("zlink_host_shutdown") >= 1);
    assert!(series("zlink_relocation_interruption") >= 3, "a histogram");
}

#[test]
fn options_are_parsed_and_checked() {
    let args: Vec<String> = [
        "--actors",
        "5",
        "--requests",
        "7",
        "--instances",
        "9",
        "--concurrency",
        "3",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let cfg = parse(&args).expect("valid");
    assert_eq!(
        (cfg.actors, cfg.requests, cfg.instances, cfg.concurrency),
        (5, 7, 9, 3)
    );
    assert!(cfg.redis.is_none());
    assert!(parse(&["--actors".to_string(), "0".to_string()]).is_err());
    assert!(parse(&["--bogus".to_string()]).is_err());
    let with_metrics = parse(&["--metrics".to_string(), "127.0.0.1:9100".to_string()]);
    assert_eq!(
        with_metrics.expect("valid").metrics.as_deref(),
        Some("127.0.0.1:9100")
    );
    assert!(parse(&["--metrics".to_string()]).is_err());
    assert!(parse(&["--instances".to_string(), "0".to_string()]).is_err());
}
