//! Mesh TLS: mutual verification by one CA and the descriptor's security identity checked at
//! the handshake (spec 06 §5, §23; `docs/transport.md`, "TLS").

use std::time::Duration;

use bytes::Bytes;

use super::support::*;
use crate::{
    HandshakeRejection, MeshTls, MeshTlsErrorKind, PeerIntent, Reply, ReplyStatus,
    SecurityIdentity, TransportConfig, TransportError, TransportErrorKind,
};

/// A CA and the PEM of certificates it issues.
pub(super) struct Ca {
    issuer: rcgen::CertifiedIssuer<'static, rcgen::KeyPair>,
}

impl Ca {
    pub(super) fn new() -> Self {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        Self {
            issuer: rcgen::CertifiedIssuer::self_signed(params, key).unwrap(),
        }
    }

    fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// A node certificate for `name` (no EKU extension: valid as server and client).
    fn node(&self, name: &str) -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec![name.to_owned()])
            .unwrap()
            .signed_by(&key, &self.issuer)
            .unwrap();
        (cert.pem(), key.serialize_pem())
    }

    pub(super) fn tls(&self, name: &str) -> MeshTls {
        let (cert, key) = self.node(name);
        MeshTls::from_pem(self.pem().as_bytes(), cert.as_bytes(), key.as_bytes(), name).unwrap()
    }
}

fn tls_config(r: u8, tls: MeshTls) -> TransportConfig {
    config(r, 1).tls(tls)
}

fn identity(name: &str) -> SecurityIdentity {
    SecurityIdentity::Tls(name.to_owned())
}

#[tokio::test]
async fn tls_peers_verified_by_one_ca_connect_and_exchange_requests() {
    let ca = Ca::new();
    let (bt, mut bi) = start(tls_config(2, ca.tls("node-b"))).await;
    let (at, mut ai) = start(tls_config(1, ca.tls("node-a"))).await;
    let intent = PeerIntent::new(endpoint(&bt)).expect_identity(identity("node-b"));
    let to_b = at.connect(&intent).await.unwrap();
    expect_up(&mut ai).await;
    expect_up(&mut bi).await;
    let to_a = bt.peer(&rid(1)).unwrap();
    // Sizes across TLS record boundaries (16 KiB) and up to 1 MiB, each byte checked.
    for size in [1usize, 16 * 1024 + 1, 1024 * 1024] {
        let payload: Bytes = (0..size).map(|i| (i * 31 + size) as u8).collect();
        let req = request(&at, payload.clone());
        to_b.send_app(&req).await.unwrap();
        let got = tokio::time::timeout(WAIT, bi.app.recv())
            .await
            .unwrap()
            .unwrap();
        let env = got.envelope();
        assert_eq!(env.payload(), &payload);
        assert_eq!(env.operation_id(), req.operation_id());
        let reply = Reply::to(env, ReplyStatus::Ok, env.payload().clone()).unwrap();
        to_a.send_reply(&reply).unwrap();
        let r = tokio::time::timeout(WAIT, ai.replies.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(r.reply().payload(), &payload);
    }
}

#[tokio::test]
async fn a_server_certificate_not_valid_for_the_published_identity_is_refused_at_the_handshake() {
    let ca = Ca::new();
    let (bt, mut bi) = start(tls_config(2, ca.tls("node-b"))).await;
    let (at, _ai) = start(tls_config(1, ca.tls("node-a"))).await;
    // The descriptor of the node at that endpoint claims another identity.
    let intent = PeerIntent::new(endpoint(&bt)).expect_identity(identity("node-c"));
    let err = at.connect(&intent).await.unwrap_err();
    assert!(matches!(err, TransportError::Tls { .. }), "{err:?}");
    assert_eq!(err.kind(), TransportErrorKind::HandshakeRejected);
    no_event_for(&mut bi, Duration::from_millis(200)).await;
    assert!(at.peers().is_empty() && bt.peers().is_empty());
}

#[tokio::test]
async fn a_client_certificate_from_another_ca_is_refused_by_the_acceptor() {
    let ca = Ca::new();
    let rogue = Ca::new();
    let (bt, mut bi) = start(tls_config(2, ca.tls("node-b"))).await;
    // The dialer trusts `ca` (so it accepts node-b) but presents a rogue-issued certificate.
    let (cert, key) = rogue.node("node-a");
    let mixed = MeshTls::from_pem(
        format!("{}{}", ca.pem(), rogue.pem()).as_bytes(),
        cert.as_bytes(),
        key.as_bytes(),
        "node-a",
    )
    .unwrap();
    let (at, _ai) = start(tls_config(1, mixed)).await;
    let intent = PeerIntent::new(endpoint(&bt)).expect_identity(identity("node-b"));
    assert!(at.connect(&intent).await.is_err());
    no_event_for(&mut bi, Duration::from_millis(200)).await;
    assert!(bt.peers().is_empty());
}

#[tokio::test]
async fn an_acceptor_refuses_a_dialer_whose_certificate_is_not_its_descriptors_identity() {
    let ca = Ca::new();
    let (bt, mut bi) = start(tls_config(2, ca.tls("node-b"))).await;
    let (at, _ai) = start(tls_config(1, ca.tls("node-a"))).await;
    // b learned from a's descriptor that RID 1 is `node-x`; a's certificate says `node-a`.
    bt.add_intent(
        PeerIntent::new(endpoint(&at))
            .expect_rid(rid(1))
            .expect_identity(identity("node-x")),
    )
    .unwrap();
    let intent = PeerIntent::new(endpoint(&bt)).expect_identity(identity("node-b"));
    let err = at.connect(&intent).await.unwrap_err();
    match err {
        TransportError::Handshake {
            rejection: HandshakeRejection::SecurityIdentity { expected, .. },
            by_remote: true,
        } => assert_eq!(expected, "tls:node-x"),
        other => panic!("expected a SecurityIdentity rejection, got {other:?}"),
    }
    no_event_for(&mut bi, Duration::from_millis(200)).await;
}

#[tokio::test]
async fn a_plaintext_node_and_a_tls_node_never_connect() {
    let ca = Ca::new();
    let (tls_t, mut tls_i) = start(tls_config(2, ca.tls("node-b"))).await;
    let (plain, mut plain_i) = node(1, 1).await;
    // The descriptor says TLS: the plaintext node refuses before dialing.
    let intent = PeerIntent::new(endpoint(&tls_t)).expect_identity(identity("node-b"));
    match plain.connect(&intent).await.unwrap_err() {
        TransportError::Handshake {
            rejection: HandshakeRejection::SecurityIdentity { .. },
            by_remote: false,
        } => {}
        other => panic!("expected a local SecurityIdentity refusal, got {other:?}"),
    }
    // Dialing without knowing: the TLS acceptor sees no TLS ClientHello and drops it.
    assert!(
        plain
            .connect(&PeerIntent::new(endpoint(&tls_t)))
            .await
            .is_err()
    );
    // And the TLS node dialing the plaintext one fails its TLS handshake.
    assert!(
        tls_t
            .connect(&PeerIntent::new(endpoint(&plain)))
            .await
            .is_err()
    );
    no_event_for(&mut tls_i, Duration::from_millis(200)).await;
    no_event_for(&mut plain_i, Duration::ZERO).await;
}

#[test]
fn tls_settings_whose_certificate_is_not_valid_for_the_identity_fail_to_build() {
    let ca = Ca::new();
    let (cert, key) = ca.node("node-a");
    let err = MeshTls::from_pem(
        ca.pem().as_bytes(),
        cert.as_bytes(),
        key.as_bytes(),
        "node-b",
    )
    .unwrap_err();
    assert_eq!(err.kind(), MeshTlsErrorKind::Identity);
    let other = Ca::new();
    let err = MeshTls::from_pem(
        other.pem().as_bytes(),
        cert.as_bytes(),
        key.as_bytes(),
        "node-a",
    )
    .unwrap_err();
    assert_eq!(err.kind(), MeshTlsErrorKind::Identity);
    let err = MeshTls::from_pem(b"", cert.as_bytes(), key.as_bytes(), "node-a").unwrap_err();
    assert_eq!(err.kind(), MeshTlsErrorKind::Pem);
    let err = MeshTls::from_pem(ca.pem().as_bytes(), cert.as_bytes(), b"", "node-a").unwrap_err();
    assert_eq!(err.kind(), MeshTlsErrorKind::Pem);
}

#[test]
fn a_security_identity_round_trips_through_its_descriptor_text() {
    let rid = rid(7);
    for id in [SecurityIdentity::Plaintext, identity("node-7.mesh")] {
        assert_eq!(SecurityIdentity::parse(&id.published(&rid)).unwrap(), id);
    }
    assert_eq!(SecurityIdentity::Plaintext.published(&rid), "plaintext:07");
    assert!(SecurityIdentity::parse("kerberos:x").is_err());
    assert!(SecurityIdentity::parse("tls:").is_err());
}
