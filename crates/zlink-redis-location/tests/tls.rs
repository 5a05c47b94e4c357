//! TLS (`rediss://`, cluster over TLS): who is refused, and how. The servers (`cargo xtask
//! services`) require client certificates signed by the test CA and present a certificate
//! for 127.0.0.1 and localhost signed by it; the happy path is the whole contract suite in
//! `conformance.rs`.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::tls::{self as live_tls, Pem, foreign_ca_pem, full_tls};
use common::{fresh_prefix, key};
use zlink_redis_location::{RedisLocationOptions, RedisLocationStore, RedisTlsConfig, TlsRefusal};
use zlink_store_spi::{FailureKind, LocationStore, ReadResult, StoreError};

/// Where each TLS deployment is, with the test PKI; `None` after the skip notices.
async fn deployments() -> Option<(Pem, Vec<(&'static str, RedisLocationOptions)>)> {
    let url = zlink_store_conformance::live::env_or_skip(
        live_tls::TLS_URL_ENV,
        &zlink_store_conformance::live::current_test(),
    )?;
    let seeds = live_tls::cluster_seeds()?;
    let pem = live_tls::pem()?;
    let short = Duration::from_secs(3);
    let single = RedisLocationOptions::from_url(&url)
        .unwrap()
        .with_operation_timeout(short)
        .unwrap();
    let cluster = RedisLocationOptions::cluster(&seeds)
        .unwrap()
        .with_operation_timeout(short)
        .unwrap();
    Some((pem, vec![("single", single), ("cluster", cluster)]))
}

/// The connection's error, which must be a failure of kind `Unavailable` (never a timeout:
/// a refused handshake is known at once) whose source says why the handshake was refused.
async fn refusal(name: &str, options: RedisLocationOptions) -> TlsRefusal {
    let prefix = fresh_prefix("tls-refused");
    let e = match RedisLocationStore::connect(options.with_key_prefix(prefix).unwrap()).await {
        Ok(_) => panic!("{name}: the connection was accepted"),
        Err(e) => e,
    };
    assert!(
        matches!(
            e,
            StoreError::Failure {
                kind: FailureKind::Unavailable,
                ..
            }
        ),
        "{name}: {e:?}"
    );
    std::error::Error::source(&e)
        .and_then(|s| s.downcast_ref::<TlsRefusal>())
        .unwrap_or_else(|| panic!("{name}: no TlsRefusal behind {e:?}"))
        .clone()
}

#[tokio::test]
async fn a_client_not_trusting_the_servers_ca_is_refused_for_the_servers_certificate() {
    let Some((pem, deployments)) = deployments().await else {
        return;
    };
    let foreign = RedisTlsConfig::from_ca_pem(foreign_ca_pem().as_bytes())
        .unwrap()
        .with_client_identity_pem(&pem.cert, &pem.key)
        .unwrap();
    for (name, options) in deployments {
        let why = refusal(name, options.with_tls_config(foreign.clone())).await;
        assert!(
            matches!(
                why,
                TlsRefusal::ServerCertificate(rustls::Error::InvalidCertificate(
                    rustls::CertificateError::UnknownIssuer
                ))
            ),
            "{name}: {why:?}"
        );
    }
}

#[tokio::test]
async fn a_client_without_a_client_certificate_is_refused() {
    let Some((pem, deployments)) = deployments().await else {
        return;
    };
    let no_identity = RedisTlsConfig::from_ca_pem(&pem.ca).unwrap();
    for (name, options) in deployments {
        let why = refusal(name, options.with_tls_config(no_identity.clone())).await;
        assert!(
            matches!(why, TlsRefusal::ClientCertificateRequired),
            "{name}: {why:?}"
        );
    }
}

#[tokio::test]
async fn a_server_name_not_on_the_certificate_is_refused() {
    let Some((pem, deployments)) = deployments().await else {
        return;
    };
    let wrong = full_tls(&pem)
        .with_server_name("not-the-server.test")
        .unwrap();
    for (name, options) in deployments {
        let why = refusal(name, options.with_tls_config(wrong.clone())).await;
        assert!(
            matches!(
                why,
                TlsRefusal::ServerCertificate(rustls::Error::InvalidCertificate(
                    rustls::CertificateError::NotValidForNameContext { .. }
                ))
            ),
            "{name}: {why:?}"
        );
    }
}

#[tokio::test]
async fn a_server_name_on_the_certificate_connects_to_every_node() {
    let Some((pem, deployments)) = deployments().await else {
        return;
    };
    // The certificate names localhost; the seeds and the cluster's nodes are 127.0.0.1.
    let named = full_tls(&pem).with_server_name("localhost").unwrap();
    for (name, options) in deployments {
        let prefix = fresh_prefix("tls-named");
        let options = options
            .with_tls_config(named.clone())
            .with_key_prefix(prefix)
            .unwrap();
        let store = RedisLocationStore::connect(options)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e:?}"));
        let read = store.read(&key("absent")).await.unwrap();
        assert!(
            matches!(read, ReadResult::Missing { .. }),
            "{name}: {read:?}"
        );
        store.close().await;
    }
}
