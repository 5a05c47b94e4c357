//! Live-test support: the backends from the environment (skipping loudly when absent, failing
//! under CI / ZLINK_REQUIRE_REDIS), a fresh key prefix per test purged afterwards (even on a
//! panic), raw fred writes, and the `zlink` binary.

#![allow(dead_code, clippy::unwrap_used)]

use std::process::Output;
use std::time::Duration;

use bytes::Bytes;
use fred::clients::Client;
use fred::interfaces::ClientLike;
use fred::types::{Builder, CustomCommand, Value};
use zlink_cli::redis::{Raw, Target};

/// A live backend.
#[derive(Debug, Clone)]
pub(crate) struct Backend {
    pub(crate) target: Target,
    pub(crate) name: &'static str,
}

fn required() -> bool {
    std::env::var_os("CI").is_some() || std::env::var_os("ZLINK_REQUIRE_REDIS").is_some()
}

fn env_or_skip(var: &str, test: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(v) if !v.trim().is_empty() => Some(v),
        _ => {
            assert!(
                !required(),
                "{test}: {var} is not set but live tests are required"
            );
            eprintln!("SKIPPED {test}: {var} is not set (live Redis test)");
            None
        }
    }
}

/// The single node (`ZLINK_TEST_REDIS_URL`).
pub(crate) fn single(test: &str) -> Option<Backend> {
    Some(Backend {
        target: Target::Single(env_or_skip("ZLINK_TEST_REDIS_URL", test)?),
        name: "redis",
    })
}

/// The Cluster (`ZLINK_TEST_REDIS_CLUSTER`).
pub(crate) fn cluster(test: &str) -> Option<Backend> {
    let seeds = env_or_skip("ZLINK_TEST_REDIS_CLUSTER", test)?;
    Some(Backend {
        target: Target::cluster_from(&seeds)
            .expect("ZLINK_TEST_REDIS_CLUSTER holds host:port seeds"),
        name: "cluster",
    })
}

impl Backend {
    /// The `--redis` / `--cluster` arguments of the binary.
    pub(crate) fn args(&self) -> Vec<String> {
        match &self.target {
            Target::Single(url) => vec!["--redis".into(), url.clone()],
            Target::Cluster(seeds) => vec!["--cluster".into(), seeds.join(",")],
        }
    }

    /// The Redis Location Store provider under `prefix`.
    pub(crate) async fn store(&self, prefix: &str) -> zlink_redis_location::RedisLocationStore {
        use zlink_redis_location::RedisLocationOptions;
        let options = match &self.target {
            Target::Single(url) => RedisLocationOptions::from_url(url),
            Target::Cluster(seeds) => RedisLocationOptions::cluster(seeds),
        }
        .expect("options")
        .with_key_prefix(prefix)
        .expect("prefix");
        zlink_redis_location::RedisLocationStore::connect(options)
            .await
            .expect("the test Redis is reachable")
    }

    /// A raw fred client (writes for the broken-record corpus).
    pub(crate) async fn client(&self) -> Client {
        let config = match &self.target {
            Target::Single(url) => fred::types::config::Config::from_url(url).expect("url"),
            Target::Cluster(seeds) => fred::types::config::Config {
                server: fred::types::config::ServerConfig::new_clustered(
                    seeds
                        .iter()
                        .map(|s| {
                            let (h, p) = s.rsplit_once(':').expect("host:port");
                            (h.to_owned(), p.parse::<u16>().expect("port"))
                        })
                        .collect(),
                ),
                ..Default::default()
            },
        };
        let client = Builder::from_config(config).build().expect("client");
        client.init().await.expect("raw client connects");
        client
    }
}

/// Runs one command on the key's slot.
pub(crate) async fn cmd(client: &Client, cmd: &'static str, key: &[u8], rest: Vec<Value>) -> Value {
    let mut args = vec![Value::Bytes(Bytes::copy_from_slice(key))];
    args.extend(rest);
    client
        .custom(
            CustomCommand::new_static(cmd, fred::util::redis_keyslot(key), false),
            args,
        )
        .await
        .unwrap_or_else(|e| panic!("{cmd}: {e}"))
}

/// A fresh prefix for `test`, purged when dropped.
pub(crate) struct Prefix {
    pub(crate) name: String,
    backend: Backend,
}

impl Prefix {
    pub(crate) fn new(backend: &Backend, test: &str) -> Prefix {
        Prefix {
            name: format!("zlink-cli-test-{test}-{}", uuid::Uuid::new_v4().simple()),
            backend: backend.clone(),
        }
    }
}

async fn purge(backend: Backend, prefix: String) {
    let Ok(raw) = Raw::connect(&backend.target, Duration::from_secs(5)).await else {
        return;
    };
    let names = raw.scan_prefix(&prefix).await.unwrap_or_default();
    raw.quit().await;
    let client = backend.client().await;
    for name in names {
        let _ = client
            .custom::<Value, Value>(
                CustomCommand::new_static("DEL", fred::util::redis_keyslot(&name), false),
                vec![Value::Bytes(Bytes::from(name))],
            )
            .await;
    }
    let _ = client.quit().await;
}

impl Drop for Prefix {
    fn drop(&mut self) {
        let backend = self.backend.clone();
        let prefix = self.name.clone();
        let _ = std::thread::spawn(move || {
            if let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                rt.block_on(purge(backend, prefix));
            }
        })
        .join();
    }
}

/// Runs the built `zlink` binary.
pub(crate) fn zlink(backend: &Backend, prefix: &str, args: &[&str]) -> Output {
    let mut all = backend.args();
    all.extend(["--prefix".to_owned(), prefix.to_owned()]);
    all.extend(args.iter().map(|s| (*s).to_owned()));
    std::process::Command::new(env!("CARGO_BIN_EXE_zlink"))
        .args(&all)
        .output()
        .expect("the zlink binary runs")
}

/// Whether any key is left under `prefix`.
pub(crate) async fn keys_left(backend: &Backend, prefix: &str) -> usize {
    let raw = Raw::connect(&backend.target, Duration::from_secs(5))
        .await
        .expect("raw");
    let n = raw.scan_prefix(prefix).await.expect("scan").len();
    raw.quit().await;
    n
}
