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
    assert!(parse(&["--instances".to_string(), "0".to_string()]).is_err());
}
