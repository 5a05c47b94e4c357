//! TLS (`rediss://`, cluster over TLS): who is refused, and how. The servers (`cargo xtask
//! services`) require client certificates signed by the test CA and present a certificate
//! for 127.0.0.1 and localhost signed by it; the happy path is the whole relocation suite in
//! `conformance.rs`.

#![allow(clippy::unwrap_used)] // Test code: a failed unwrap is a failed test.

mod common;

use std::time::Duration;

use common::tls::{self as live_tls, Pem, foreign_ca_pem, full_tls};
use common::{random_prefix, reference};
use zlink_redis_relocation::{
    RedisRelocationOptions, RedisRelocationStore, RedisTlsConfig, TlsRefusal,
};
use zlink_store_spi::{BlobReadResult, FailureKind, RelocationStore, Retention, StoreError};

/// Both TLS deployments' options with the test PKI's files; `None` after the skip notices.
fn deployments(test: &str) -> Option<(Pem, Vec<(&'static str, RedisRelocationOptions)>)> {
    let url = live_tls::url(test)?;
    let seeds = live_tls::cluster_seeds(test)?;
    let pem = live_tls::pem(test)?;
    let short = Duration::from_secs(3);
    let single = RedisRelocationOptions::from_url(&url)
        .and_then(|o| o.with_operation_timeout(short))
        .and_then(|o| o.with_key_prefix(random_prefix()))
        .unwrap();
    let cluster = RedisRelocationOptions::cluster(&seeds)
        .and_then(|o| o.with_operation_timeout(short))
        .and_then(|o| o.with_key_prefix(random_prefix()))
        .unwrap();
    Some((pem, vec![("single", single), ("cluster", cluster)]))
}

/// The connection must be refused as a failure of kind `Unavailable` (never a timeout: a
/// refused handshake is known at once) whose source says why the handshake was refused.
async fn refusal(name: &str, options: RedisRelocationOptions) -> TlsRefusal {
    let e = match RedisRelocationStore::connect(options).await {
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

fn untrusted(why: &TlsRefusal) -> bool {
    matches!(
        why,
        TlsRefusal::ServerCertificate(rustls::Error::InvalidCertificate(
            rustls::CertificateError::UnknownIssuer
        ))
    )
}

fn wrong_name(why: &TlsRefusal) -> bool {
    matches!(
        why,
        TlsRefusal::ServerCertificate(rustls::Error::InvalidCertificate(
            rustls::CertificateError::NotValidForNameContext { .. }
        ))
    )
}

#[tokio::test]
async fn a_client_not_trusting_the_servers_ca_is_refused_for_the_servers_certificate() {
    let Some((pem, deployments)) =
        deployments("a_client_not_trusting_the_servers_ca_is_refused_for_the_servers_certificate")
    else {
        return;
    };
    let foreign = RedisTlsConfig::from_ca_pem(foreign_ca_pem().as_bytes())
        .unwrap()
        .with_client_identity_pem(&pem.cert, &pem.key)
        .unwrap();
    for (name, options) in deployments {
        let why = refusal(name, options.with_tls_config(foreign.clone())).await;
        assert!(untrusted(&why), "{name}: {why:?}");
    }
}

#[tokio::test]
async fn a_client_without_a_client_certificate_is_refused() {
    let Some((pem, deployments)) = deployments("a_client_without_a_client_certificate_is_refused")
    else {
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
    let Some((pem, deployments)) = deployments("a_server_name_not_on_the_certificate_is_refused")
    else {
        return;
    };
    let wrong = full_tls(&pem)
        .with_server_name("not-the-server.test")
        .unwrap();
    for (name, options) in deployments {
        let why = refusal(name, options.with_tls_config(wrong.clone())).await;
        assert!(wrong_name(&why), "{name}: {why:?}");
    }
}

#[tokio::test]
async fn a_server_name_on_the_certificate_connects_and_round_trips() {
    let Some((pem, deployments)) =
        deployments("a_server_name_on_the_certificate_connects_and_round_trips")
    else {
        return;
    };
    // The certificate names localhost; the seeds and the cluster's nodes are 127.0.0.1.
    let named = full_tls(&pem).with_server_name("localhost").unwrap();
    for (name, options) in deployments {
        let store = RedisRelocationStore::connect(options.with_tls_config(named.clone()))
            .await
            .unwrap_or_else(|e| panic!("{name}: {e:?}"));
        let r = reference("tls-named");
        let blob = bytes::Bytes::from_static(b"over tls");
        store
            .put(&r, &blob, Retention::from_millis(30_000).unwrap())
            .await
            .unwrap_or_else(|e| panic!("{name}: put: {e:?}"));
        match store.read(&r).await {
            Ok(BlobReadResult::Found { bytes, .. }) => assert_eq!(bytes, blob, "{name}"),
            other => panic!("{name}: read: {other:?}"),
        }
        store.delete(&r).await.unwrap();
        store.close().await;
    }
}
