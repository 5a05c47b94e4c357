//! Helpers shared by the live Redis tests: env-gated connections, raw clients, a TCP proxy.

#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

pub mod tls;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fred::prelude::*;
use fred::types::config::ServerConfig;
use fred::types::{ClusterHash, CustomCommand};
use tokio::net::{TcpListener, TcpStream};
use zlink_redis_relocation::{RedisRelocationOptions, RedisRelocationStore};
use zlink_store_conformance::live::env_or_skip;
use zlink_store_spi::BlobRef;

/// `ZLINK_TEST_REDIS_URL`, or `None` after a loud skip notice (a failure where live tests are
/// required: see `env_or_skip`).
pub fn single_url(test: &str) -> Option<String> {
    env_or_skip("ZLINK_TEST_REDIS_URL", test)
}

/// `ZLINK_TEST_REDIS_CLUSTER` seeds, or `None` after a loud skip notice.
pub fn cluster_seeds(test: &str) -> Option<Vec<String>> {
    env_or_skip("ZLINK_TEST_REDIS_CLUSTER", test).map(|s| {
        s.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    })
}

/// `ZLINK_TEST_REDIS_URL_2`, or `None` after a loud skip notice.
pub fn second_url(test: &str) -> Option<String> {
    env_or_skip("ZLINK_TEST_REDIS_URL_2", test)
}

/// A random, brace-free key prefix.
pub fn random_prefix() -> String {
    format!("zlink-test-reloc-{}", uuid::Uuid::new_v4().simple())
}

/// A reference under the test.
pub fn reference(name: &str) -> BlobRef {
    BlobRef::new(format!("{name}-{}", uuid::Uuid::new_v4().simple())).unwrap()
}

/// The blob key format, written out independently of the crate (spec 23).
pub fn blob_key(prefix: &str, reference: &BlobRef) -> String {
    format!("{prefix}:{{zlink-relocation-v1}}:blob:{reference}")
}

pub async fn connect_single(url: &str, prefix: &str, timeout: Duration) -> RedisRelocationStore {
    let options = RedisRelocationOptions::from_url(url)
        .and_then(|o| o.with_key_prefix(prefix))
        .and_then(|o| o.with_operation_timeout(timeout))
        .unwrap();
    RedisRelocationStore::connect(options).await.unwrap()
}

pub async fn connect_cluster(seeds: &[String], prefix: &str) -> RedisRelocationStore {
    let options = RedisRelocationOptions::cluster(seeds)
        .and_then(|o| o.with_key_prefix(prefix))
        .unwrap();
    RedisRelocationStore::connect(options).await.unwrap()
}

/// A plain client for looking at what the store wrote.
pub async fn raw_client(url: &str) -> Client {
    let client = Builder::from_config(Config::from_url(url).unwrap())
        .build()
        .unwrap();
    client.init().await.unwrap();
    client
}

/// A plain cluster client.
pub async fn raw_cluster_client(seeds: &[String]) -> Client {
    let hosts: Vec<(String, u16)> = seeds
        .iter()
        .map(|s| {
            let (h, p) = s.rsplit_once(':').unwrap();
            (h.to_string(), p.parse().unwrap())
        })
        .collect();
    let config = Config {
        server: ServerConfig::new_clustered(hosts),
        ..Config::default()
    };
    let client = Builder::from_config(config).build().unwrap();
    client.init().await.unwrap();
    client
}

/// The Redis clock in milliseconds.
pub async fn redis_time_ms(client: &Client) -> u64 {
    let t: Vec<String> = client
        .custom(
            CustomCommand::new_static("TIME", ClusterHash::Random, false),
            Vec::<String>::new(),
        )
        .await
        .unwrap();
    t[0].parse::<u64>().unwrap() * 1000 + t[1].parse::<u64>().unwrap() / 1000
}

/// A TCP proxy in front of a real Redis that can be cut: every accepted connection and the
/// listener stop when `cut` is called.
pub struct Proxy {
    pub addr: String,
    conns: Arc<Mutex<Vec<tokio::task::AbortHandle>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    pub async fn start(target: String) -> Proxy {
        Self::start_on("127.0.0.1:0", target).await
    }

    /// A proxy listening on `addr` (e.g. the address of a proxy that was cut).
    pub async fn start_on(addr: &str, target: String) -> Proxy {
        let listener = TcpListener::bind(addr).await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let conns: Arc<Mutex<Vec<tokio::task::AbortHandle>>> = Arc::default();
        let held = conns.clone();
        let task = tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                let target = target.clone();
                let conn = tokio::spawn(async move {
                    let Ok(outbound) = TcpStream::connect(target).await else {
                        return;
                    };
                    let (mut ri, mut wi) = inbound.into_split();
                    let (mut ro, mut wo) = outbound.into_split();
                    let _ = tokio::join!(
                        tokio::io::copy(&mut ri, &mut wo),
                        tokio::io::copy(&mut ro, &mut wi)
                    );
                });
                held.lock().unwrap().push(conn.abort_handle());
            }
        });
        Proxy { addr, conns, task }
    }

    /// Drops every proxied connection and stops accepting new ones (the port refuses).
    pub fn cut(self) {
        self.task.abort();
        for c in self.conns.lock().unwrap().drain(..) {
            c.abort();
        }
    }
}

/// A listener that accepts connections and never answers.
pub async fn black_hole() -> (String, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let task = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = listener.accept().await {
            held.push(s);
        }
    });
    (addr, task)
}

/// `host:port` of a `redis://host:port` URL.
pub fn host_port(url: &str) -> String {
    let rest = url.split_once("://").map(|(_, r)| r).unwrap_or(url);
    let rest = rest.rsplit_once('@').map(|(_, r)| r).unwrap_or(rest);
    let hp = rest.split('/').next().unwrap();
    if hp.contains(':') {
        hp.to_string()
    } else {
        format!("{hp}:6379")
    }
}

/// The hash slot of the whole blob domain (`{zlink-relocation-v1}`).
pub fn blob_slot() -> u16 {
    fred::util::redis_keyslot(b"{zlink-relocation-v1}")
}

/// A put whose reply is lost for real: Redis writes are paused (`CLIENT PAUSE WRITE`, from a
/// second connection, on the node owning the blob slot) while a store with a short operation
/// timeout sends the put; it answers `TimedOut`, and the put runs when the pause ends. Before
/// answering, this waits until the pause is over and the put has landed, so a retry sees it.
/// Read, renew and delete go to a patient store on the same data.
#[derive(Debug)]
pub struct PausingPutter {
    pub hasty: RedisRelocationStore,
    pub patient: RedisRelocationStore,
    pub control: Client,
    pub prefix: String,
}

impl PausingPutter {
    async fn pause(&self, ms: u64) {
        let _: Value = self
            .control
            .custom(
                CustomCommand::new_static("CLIENT", ClusterHash::Custom(blob_slot()), false),
                vec!["PAUSE".to_string(), ms.to_string(), "WRITE".to_string()],
            )
            .await
            .unwrap();
    }

    /// Returns once writes run again on the blob slot's node.
    async fn wait_for_writes(&self) {
        let marker = format!("{}:{{zlink-relocation-v1}}:pause-marker", self.prefix);
        let _: () = self
            .control
            .set(&marker, "x", None, None, false)
            .await
            .unwrap();
        let _: i64 = self.control.del(&marker).await.unwrap();
    }
}

impl zlink_store_spi::RelocationStore for PausingPutter {
    async fn put(
        &self,
        reference: &BlobRef,
        payload: &bytes::Bytes,
        retention: zlink_store_spi::Retention,
    ) -> zlink_store_spi::StoreResult<zlink_store_spi::PutResult> {
        self.pause(700).await;
        let outcome = self.hasty.put(reference, payload, retention).await;
        self.wait_for_writes().await;
        for _ in 0..200 {
            if let zlink_store_spi::BlobReadResult::Found { .. } =
                self.patient.read(reference).await?
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        outcome
    }

    async fn read(
        &self,
        reference: &BlobRef,
    ) -> zlink_store_spi::StoreResult<zlink_store_spi::BlobReadResult> {
        self.patient.read(reference).await
    }

    async fn renew(
        &self,
        reference: &BlobRef,
        retention: zlink_store_spi::Retention,
    ) -> zlink_store_spi::StoreResult<zlink_store_spi::RenewResult> {
        self.patient.renew(reference, retention).await
    }

    async fn delete(
        &self,
        reference: &BlobRef,
    ) -> zlink_store_spi::StoreResult<zlink_store_spi::Deleted> {
        self.patient.delete(reference).await
    }
}
