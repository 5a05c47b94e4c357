//! Shared harness of the live-Redis tests: targets from the environment (single node, cluster,
//! second server), a plain Redis client to inspect what the provider stored, the spec's key
//! formula computed independently, and cleanup.
#![allow(dead_code, unreachable_pub)]

pub mod private_servers;
pub mod tls;

use std::time::Duration;

use fred::clients::Client;
use fred::interfaces::ClientLike;
use fred::types::config::Config;
use fred::types::{Builder, CustomCommand, Value};
use sha2::{Digest, Sha256};
use zlink_redis_location::{RedisLocationOptions, RedisLocationStore};
use zlink_store_conformance::live;
use zlink_store_spi::{
    LocationStore, ReadResult, ScanRequest, ScanResult, StoreKey, StoreResult, WriteRequest,
    WriteResult,
};

pub const SINGLE_ENV: &str = "ZLINK_TEST_REDIS_URL";
pub const CLUSTER_ENV: &str = "ZLINK_TEST_REDIS_CLUSTER";
pub const SECOND_ENV: &str = "ZLINK_TEST_REDIS_URL_2";

/// The hashtag of every key of the store (spec 22 §8–§9).
pub const HASHTAG: &str = "{zlink-location-v3}";

/// One Redis deployment to test against.
pub struct Target {
    pub name: &'static str,
    pub options: RedisLocationOptions,
    pub raw: Raw,
}

/// A plain Redis client whose commands go to the node owning the store's hash slot.
#[derive(Clone)]
pub struct Raw {
    pub client: Client,
    slot: u16,
}

impl Raw {
    async fn connect(config: Config) -> Raw {
        let client = Builder::from_config(config).build().expect("raw client");
        client.init().await.expect("raw client connects");
        Raw {
            client,
            slot: fred::util::redis_keyslot(HASHTAG.as_bytes()),
        }
    }

    /// Sends one command to the node of the store's slot.
    pub async fn cmd(&self, name: &str, args: Vec<Value>) -> Value {
        self.try_cmd(name, args)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    /// Sends one command to the node of the store's slot, returning errors.
    pub async fn try_cmd(&self, name: &str, args: Vec<Value>) -> Result<Value, fred::error::Error> {
        self.try_cmd_at(self.slot, name, args).await
    }

    /// Sends one command to the node of `slot`, returning errors.
    pub async fn try_cmd_at(
        &self,
        slot: u16,
        name: &str,
        args: Vec<Value>,
    ) -> Result<Value, fred::error::Error> {
        let cmd = CustomCommand::new(name.to_owned(), Some(slot), false);
        self.client.custom::<Value, Value>(cmd, args).await
    }

    /// Deletes one key wherever it hashes.
    pub async fn del(&self, key: &str) {
        let slot = fred::util::redis_keyslot(key.as_bytes());
        self.try_cmd_at(slot, "DEL", vec![key.into()])
            .await
            .expect("DEL");
    }

    /// Every member of a ZSET with its score, lowest first.
    pub async fn zset(&self, key: &str) -> Vec<(Vec<u8>, f64)> {
        let v = self
            .cmd(
                "ZRANGE",
                vec![key.into(), 0.into(), (-1).into(), "WITHSCORES".into()],
            )
            .await;
        let flat = v.into_array();
        flat.chunks(2)
            .map(|p| {
                let m = p[0].as_bytes().expect("member").to_vec();
                let s = p[1].as_str().expect("score").parse().expect("score number");
                (m, s)
            })
            .collect()
    }

    pub async fn int(&self, name: &str, args: Vec<Value>) -> i64 {
        self.cmd(name, args).await.as_i64().expect("integer reply")
    }

    /// Every key under `prefix:` (the provider's namespace of that prefix).
    pub async fn keys_under(&self, prefix: &str) -> Vec<String> {
        let pattern = format!("{}:*", glob_escape(prefix));
        let mut cursor = "0".to_owned();
        let mut keys = Vec::new();
        loop {
            let reply = self
                .cmd(
                    "SCAN",
                    vec![
                        cursor.as_str().into(),
                        "MATCH".into(),
                        pattern.as_str().into(),
                        "COUNT".into(),
                        1000.into(),
                    ],
                )
                .await
                .into_array();
            cursor = reply[0].as_string().expect("cursor");
            for k in reply[1].clone().into_array() {
                keys.push(k.as_string().expect("key"));
            }
            if cursor == "0" {
                return keys;
            }
        }
    }

    /// Every key under `prefix:` with its serialized value (`DUMP`), to compare states.
    pub async fn state(&self, prefix: &str) -> std::collections::BTreeMap<String, Vec<u8>> {
        let mut out = std::collections::BTreeMap::new();
        for k in self.keys_under(prefix).await {
            let v = self.cmd("DUMP", vec![k.as_str().into()]).await;
            out.insert(k, v.as_bytes().map(<[u8]>::to_vec).unwrap_or_default());
        }
        out
    }

    /// Deletes every key under `prefix:`.
    pub async fn purge(&self, prefix: &str) {
        for chunk in self.keys_under(prefix).await.chunks(500) {
            let args: Vec<Value> = chunk.iter().map(|k| Value::from(k.as_str())).collect();
            self.cmd("DEL", args).await;
        }
    }
}

fn glob_escape(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// `{prefix}:{zlink-location-v3}:opaque:{sha256hex(K)}`, computed here from the spec.
pub fn record_key(prefix: &str, key: &[u8]) -> String {
    format!("{prefix}:{HASHTAG}:opaque:{}", hex(&Sha256::digest(key)))
}

pub fn seq_key(prefix: &str) -> String {
    format!("{prefix}:{HASHTAG}:seq")
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

pub fn key(s: &str) -> StoreKey {
    StoreKey::new(s).expect("test key")
}

/// A fresh, unique key prefix.
pub fn fresh_prefix(test: &str) -> String {
    format!("zlt-{test}-{}", uuid::Uuid::new_v4().simple())
}

/// The cluster seeds, or `None` after the skip notice (a failure where live tests are required).
fn seeds() -> Option<Vec<String>> {
    let v = live::env_or_skip(CLUSTER_ENV, &live::current_test())?;
    let seeds: Vec<String> = v
        .split(',')
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect();
    (!seeds.is_empty()).then_some(seeds)
}

/// The single node, if `ZLINK_TEST_REDIS_URL` is set (see [`live::env_or_skip`] otherwise).
pub async fn single() -> Option<Target> {
    let url = live::env_or_skip(SINGLE_ENV, &live::current_test())?;
    Some(url_target("single", &url).await)
}

/// The second independent server, if `ZLINK_TEST_REDIS_URL_2` is set (see
/// [`live::env_or_skip`] otherwise).
pub async fn second() -> Option<Target> {
    let url = live::env_or_skip(SECOND_ENV, &live::current_test())?;
    Some(url_target("second", &url).await)
}

/// A target for the server at `url`.
pub async fn url_target(name: &'static str, url: &str) -> Target {
    let options = RedisLocationOptions::from_url(url).expect("test URL");
    let raw = Raw::connect(Config::from_url(url).expect("test URL")).await;
    Target { name, options, raw }
}

/// The 3-master cluster, if `ZLINK_TEST_REDIS_CLUSTER` is set (see [`live::env_or_skip`]
/// otherwise).
pub async fn cluster() -> Option<Target> {
    let seeds = seeds()?;
    let options = RedisLocationOptions::cluster(&seeds).expect("cluster seeds");
    let hosts = seeds
        .iter()
        .map(|s| {
            let (h, p) = s.rsplit_once(':').expect("host:port");
            (h.to_owned(), p.parse::<u16>().expect("port"))
        })
        .collect();
    let config = Config {
        server: fred::types::config::ServerConfig::new_clustered(hosts),
        ..Config::default()
    };
    Some(Target {
        name: "cluster",
        options,
        raw: Raw::connect(config).await,
    })
}

/// Every configured target among the single node and the cluster; each missing one is
/// reported by [`live::env_or_skip`] (a failure where live tests are required).
pub async fn targets() -> Vec<Target> {
    let mut t = Vec::new();
    t.extend(single().await);
    t.extend(cluster().await);
    t
}

impl Target {
    pub async fn store(&self, prefix: &str) -> RedisLocationStore {
        self.store_with(prefix, RedisLocationOptions::DEFAULT_OPERATION_TIMEOUT)
            .await
    }

    pub async fn store_with(&self, prefix: &str, timeout: Duration) -> RedisLocationStore {
        let options = self
            .options
            .clone()
            .with_key_prefix(prefix)
            .expect("prefix")
            .with_operation_timeout(timeout)
            .expect("timeout");
        RedisLocationStore::connect(options)
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "{}: connect: {e} ({:?})",
                    self.name,
                    std::error::Error::source(&e)
                )
            })
    }
}

impl std::fmt::Debug for Raw {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Raw").field("slot", &self.slot).finish()
    }
}

/// How long [`PausingWriter`] pauses the server's writes, and its own operation timeout.
pub const PAUSE_MS: u64 = 500;
pub const SHORT_TIMEOUT: Duration = Duration::from_millis(150);

/// A handle on the same data whose write replies get lost: before each write a second
/// connection runs `CLIENT PAUSE 500 WRITE` on the node of the store's slot, and the write is
/// sent by a store whose operation timeout (150 ms) is shorter than the pause. The write is
/// delivered, times out on the client, and runs once the pause ends.
#[derive(Debug)]
pub struct PausingWriter {
    pub store: RedisLocationStore,
    pub raw: Raw,
}

impl PausingWriter {
    pub async fn new(target: &Target, prefix: &str) -> PausingWriter {
        PausingWriter {
            store: target.store_with(prefix, SHORT_TIMEOUT).await,
            raw: target.raw.clone(),
        }
    }

    pub async fn pause_writes(&self) {
        self.raw
            .cmd(
                "CLIENT",
                vec!["PAUSE".into(), (PAUSE_MS as i64).into(), "WRITE".into()],
            )
            .await;
    }
}

impl LocationStore for PausingWriter {
    async fn read(&self, key: &StoreKey) -> StoreResult<ReadResult> {
        self.store.read(key).await
    }

    async fn write(&self, request: &WriteRequest) -> StoreResult<WriteResult> {
        self.pause_writes().await;
        self.store.write(request).await
    }

    async fn scan(&self, request: &ScanRequest) -> StoreResult<ScanResult> {
        self.store.scan(request).await
    }
}
