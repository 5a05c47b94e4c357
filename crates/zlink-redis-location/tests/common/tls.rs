//! The live TLS targets: a single node requiring client certificates and a TLS 3-master
//! cluster, with the test PKI's files named by the environment (`cargo xtask services`).

use std::sync::Arc;

use fred::types::config::{Config, ServerConfig, TlsConfig, TlsHostMapping};
use zlink_redis_location::{RedisLocationOptions, RedisTlsConfig};
use zlink_store_conformance::live;

use super::{Raw, Target};

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

fn read(var: &str) -> Option<Vec<u8>> {
    let path = live::env_or_skip(var, &live::current_test())?;
    Some(std::fs::read(&path).unwrap_or_else(|e| panic!("{var}={path}: {e}")))
}

/// The PEM files, or `None` after the skip notice.
pub fn pem() -> Option<Pem> {
    Some(Pem {
        ca: read(TLS_CA_ENV)?,
        cert: read(TLS_CERT_ENV)?,
        key: read(TLS_KEY_ENV)?,
    })
}

/// The full TLS settings: the test CA and the client certificate.
pub fn full_tls(pem: &Pem) -> RedisTlsConfig {
    RedisTlsConfig::from_ca_pem(&pem.ca)
        .expect("test CA")
        .with_client_identity_pem(&pem.cert, &pem.key)
        .expect("test client identity")
}

/// A CA nobody signed the servers' certificates with.
pub fn foreign_ca_pem() -> String {
    let key = rcgen::KeyPair::generate().expect("key");
    let mut params = rcgen::CertificateParams::new(Vec::new()).expect("params");
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.self_signed(&key).expect("foreign CA").pem()
}

/// A plain fred TLS client configuration with the test CA and client certificate (built
/// here independently of the provider).
fn raw_tls(pem: &Pem) -> TlsConfig {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(&pem.ca) {
        roots.add(c.expect("CA PEM")).expect("CA");
    }
    let chain = CertificateDer::pem_slice_iter(&pem.cert)
        .collect::<Result<Vec<_>, _>>()
        .expect("client PEM");
    let key = PrivateKeyDer::from_pem_slice(&pem.key).expect("key PEM");
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_root_certificates(roots)
    .with_client_auth_cert(chain, key)
    .expect("client identity");
    TlsConfig {
        connector: config.into(),
        hostnames: TlsHostMapping::None,
    }
}

/// The TLS single node, or `None` after the skip notice.
pub async fn single() -> Option<Target> {
    let url = live::env_or_skip(TLS_URL_ENV, &live::current_test())?;
    let pem = pem()?;
    let options = RedisLocationOptions::from_url(&url)
        .expect("TLS URL")
        .with_tls_config(full_tls(&pem));
    let mut config = Config::from_url(&url).expect("TLS URL");
    config.tls = Some(raw_tls(&pem));
    Some(Target {
        name: "tls-single",
        options,
        raw: Raw::connect(config).await,
    })
}

/// The TLS seeds, or `None` after the skip notice.
pub fn cluster_seeds() -> Option<Vec<String>> {
    let v = live::env_or_skip(TLS_CLUSTER_ENV, &live::current_test())?;
    Some(
        v.split(',')
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .collect(),
    )
}

/// The TLS cluster, or `None` after the skip notice.
pub async fn cluster() -> Option<Target> {
    let seeds = cluster_seeds()?;
    let pem = pem()?;
    let options = RedisLocationOptions::cluster(&seeds)
        .expect("TLS cluster seeds")
        .with_tls_config(full_tls(&pem));
    let hosts = seeds
        .iter()
        .map(|s| {
            let (h, p) = s.rsplit_once(':').expect("host:port");
            (h.to_owned(), p.parse::<u16>().expect("port"))
        })
        .collect();
    let config = Config {
        server: ServerConfig::new_clustered(hosts),
        tls: Some(raw_tls(&pem)),
        ..Config::default()
    };
    Some(Target {
        name: "tls-cluster",
        options,
        raw: Raw::connect(config).await,
    })
}
