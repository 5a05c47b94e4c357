//! The live TLS deployments: a single node requiring client certificates and a TLS 3-master
//! cluster, with the test PKI's files named by the environment (`cargo xtask services`).

use std::sync::Arc;

use fred::prelude::*;
use fred::types::config::{ServerConfig, TlsConfig, TlsHostMapping};
use zlink_redis_relocation::{RedisRelocationOptions, RedisTlsConfig};
use zlink_store_conformance::live::env_or_skip;

pub const TLS_URL_ENV: &str = "ZLINK_TEST_REDIS_TLS_URL";
pub const TLS_CLUSTER_ENV: &str = "ZLINK_TEST_REDIS_TLS_CLUSTER";
pub const TLS_CA_ENV: &str = "ZLINK_TEST_REDIS_TLS_CA";
pub const TLS_CERT_ENV: &str = "ZLINK_TEST_REDIS_TLS_CERT";
pub const TLS_KEY_ENV: &str = "ZLINK_TEST_REDIS_TLS_KEY";

/// The test PKI as PEM: CA bundle, client certificate, client key.
pub struct Pem {
    pub ca: Vec<u8>,
    pub cert: Vec<u8>,
    pub key: Vec<u8>,
}

fn read(var: &str, test: &str) -> Option<Vec<u8>> {
    let path = env_or_skip(var, test)?;
    Some(std::fs::read(&path).unwrap_or_else(|e| panic!("{var}={path}: {e}")))
}

/// The PEM files, or `None` after the skip notice.
pub fn pem(test: &str) -> Option<Pem> {
    Some(Pem {
        ca: read(TLS_CA_ENV, test)?,
        cert: read(TLS_CERT_ENV, test)?,
        key: read(TLS_KEY_ENV, test)?,
    })
}

/// `ZLINK_TEST_REDIS_TLS_URL`, or `None` after the skip notice.
pub fn url(test: &str) -> Option<String> {
    env_or_skip(TLS_URL_ENV, test)
}

/// `ZLINK_TEST_REDIS_TLS_CLUSTER` seeds, or `None` after the skip notice.
pub fn cluster_seeds(test: &str) -> Option<Vec<String>> {
    env_or_skip(TLS_CLUSTER_ENV, test).map(|s| {
        s.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    })
}

/// The full TLS settings: the test CA and the client certificate.
pub fn full_tls(pem: &Pem) -> RedisTlsConfig {
    RedisTlsConfig::from_ca_pem(&pem.ca)
        .unwrap()
        .with_client_identity_pem(&pem.cert, &pem.key)
        .unwrap()
}

/// A CA nobody signed the servers' certificates with.
pub fn foreign_ca_pem() -> String {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.self_signed(&key).unwrap().pem()
}

/// A plain fred TLS configuration with the test CA and client certificate (built here
/// independently of the provider).
fn raw_tls(pem: &Pem) -> TlsConfig {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(&pem.ca) {
        roots.add(c.unwrap()).unwrap();
    }
    let chain = CertificateDer::pem_slice_iter(&pem.cert)
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_slice(&pem.key).unwrap();
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_client_auth_cert(chain, key)
    .unwrap();
    TlsConfig {
        connector: config.into(),
        hostnames: TlsHostMapping::None,
    }
}

/// A plain TLS client for `servers` (one server, or cluster seeds).
pub async fn raw_client(server: ServerConfig, pem: &Pem) -> Client {
    let config = Config {
        server,
        tls: Some(raw_tls(pem)),
        ..Config::default()
    };
    let client = Builder::from_config(config).build().unwrap();
    client.init().await.unwrap();
    client
}

/// The TLS single node's options with the test PKI and a plain client on it, or `None`
/// after the skip notices.
pub async fn single(test: &str) -> Option<(RedisRelocationOptions, Client)> {
    let url = url(test)?;
    let pem = pem(test)?;
    let options = RedisRelocationOptions::from_url(&url)
        .unwrap()
        .with_tls_config(full_tls(&pem));
    let server = Config::from_url(&url).unwrap().server;
    Some((options, raw_client(server, &pem).await))
}

/// The TLS cluster's options with the test PKI and a plain cluster client, or `None` after
/// the skip notices.
pub async fn cluster(test: &str) -> Option<(RedisRelocationOptions, Client)> {
    let seeds = cluster_seeds(test)?;
    let pem = pem(test)?;
    let options = RedisRelocationOptions::cluster(&seeds)
        .unwrap()
        .with_tls_config(full_tls(&pem));
    let hosts: Vec<(String, u16)> = seeds
        .iter()
        .map(|s| {
            let (h, p) = s.rsplit_once(':').unwrap();
            (h.to_string(), p.parse().unwrap())
        })
        .collect();
    let client = raw_client(ServerConfig::new_clustered(hosts), &pem).await;
    Some((options, client))
}
