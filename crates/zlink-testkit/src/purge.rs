//! Removes a test's key prefix from the live Redis after the test (even when it panicked), on
//! a single node or on the cluster node that serves the provider's one hash slot.

use fred::interfaces::{ClientLike, KeysInterface};
use fred::types::config::{Config, ServerConfig};
use fred::types::{Builder, CustomCommand, Value};

/// Where the test's keys live.
enum Server {
    Single(String),
    /// Cluster seeds `host:port`.
    Cluster(Vec<String>),
}

/// What to purge after a live test.
pub(crate) struct Purge {
    server: Server,
    prefix: String,
}

impl Purge {
    pub(crate) fn single(url: String, prefix: String) -> Self {
        Purge {
            server: Server::Single(url),
            prefix,
        }
    }

    pub(crate) fn cluster(seeds: Vec<String>, prefix: String) -> Self {
        Purge {
            server: Server::Cluster(seeds),
            prefix,
        }
    }

    fn config(&self) -> Option<Config> {
        match &self.server {
            Server::Single(url) => Config::from_url(url).ok(),
            Server::Cluster(seeds) => {
                let hosts = seeds
                    .iter()
                    .filter_map(|s| {
                        let (h, p) = s.rsplit_once(':')?;
                        Some((h.to_owned(), p.parse::<u16>().ok()?))
                    })
                    .collect();
                Some(Config {
                    server: ServerConfig::new_clustered(hosts),
                    ..Config::default()
                })
            }
        }
    }

    /// Replaces the record of logical key `key` by a plain Redis string: a key of another type
    /// under the store's namespace, still listed by the provider's scan index.
    pub(crate) async fn plant_foreign(&self, key: &zlink_store_spi::StoreKey) {
        use sha2::{Digest, Sha256};
        let config = self.config().expect("the test Redis config");
        let client = Builder::from_config(config).build().expect("raw client");
        client.init().await.expect("raw client connects");
        let sha: String = Sha256::digest(key.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let record = format!("{}:{{zlink-location-v3}}:opaque:{sha}", self.prefix);
        let _: i64 = client.del(record.as_str()).await.expect("DEL");
        let _: Value = client
            .custom(
                CustomCommand::new_static(
                    "SET",
                    fred::util::redis_keyslot(record.as_bytes()),
                    false,
                ),
                vec![Value::from(record.as_str()), Value::from("foreign")],
            )
            .await
            .expect("SET");
        let _ = client.quit().await;
    }

    /// Adds a member that is not of the record format to the record of logical key `key`,
    /// scored above every commit sequence: the record's newest member is garbage, while a
    /// snapshot taken before still reads the member below it.
    pub(crate) async fn plant_corrupt_newest(&self, key: &zlink_store_spi::StoreKey) {
        use sha2::{Digest, Sha256};
        let config = self.config().expect("the test Redis config");
        let client = Builder::from_config(config).build().expect("raw client");
        client.init().await.expect("raw client connects");
        let sha: String = Sha256::digest(key.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let record = format!("{}:{{zlink-location-v3}}:opaque:{sha}", self.prefix);
        let _: Value = client
            .custom(
                CustomCommand::new_static(
                    "ZADD",
                    fred::util::redis_keyslot(record.as_bytes()),
                    false,
                ),
                vec![
                    Value::from(record.as_str()),
                    Value::from("1e15"),
                    Value::from("garbage"),
                ],
            )
            .await
            .expect("ZADD");
        let _ = client.quit().await;
    }

    /// Deletes every key under `prefix:`. Best effort: a purge that cannot reach Redis leaves
    /// the keys (the prefix is unique to the test run).
    pub(crate) async fn run(&self) {
        let Some(config) = self.config() else {
            return;
        };
        let Ok(client) = Builder::from_config(config).build() else {
            return;
        };
        if client.init().await.is_err() {
            return;
        }
        // Every key of the provider carries the same hash tag, so one slot (and one node) holds
        // them all; SCAN is routed there.
        let slot = fred::util::redis_keyslot(b"{zlink-location-v3}");
        let pattern = format!("{}:*", self.prefix);
        let mut cursor = "0".to_owned();
        loop {
            let args: Vec<Value> = vec![
                cursor.as_str().into(),
                "MATCH".into(),
                pattern.as_str().into(),
                "COUNT".into(),
                1000.into(),
            ];
            let reply: Result<Value, _> = client
                .custom(CustomCommand::new_static("SCAN", slot, false), args)
                .await;
            let Ok(reply) = reply else { break };
            let parts = reply.into_array();
            let Some(next) = parts.first().and_then(|v| v.as_string()) else {
                break;
            };
            let keys: Vec<String> = parts
                .get(1)
                .cloned()
                .map(|v| v.into_array())
                .unwrap_or_default()
                .into_iter()
                .filter_map(|k| k.as_string())
                .collect();
            if !keys.is_empty() {
                let _: Result<i64, _> = client.del(keys).await;
            }
            if next == "0" {
                break;
            }
            cursor = next;
        }
        let _ = client.quit().await;
    }
}
