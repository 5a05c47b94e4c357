//! Mesh TLS end to end (spec 06 §23): nodes with TLS settings from one CA find each other
//! through the Location Store, publish `tls:{name}` and exchange requests; a plaintext node of
//! the same RouteMesh is never connected to them.

use std::time::Duration;

use zlink_codec::records::{DescriptorRecord, MeshNodeDescriptor};
use zlink_transport::{MeshTls, SecurityIdentity};

use super::support::*;
use crate::messaging::ErrorKind;
use zlink_testkit::Harness;

on_every_store!(
    tls_nodes_publish_their_identity_and_exchange_requests,
    a_plaintext_node_is_never_a_peer_of_tls_nodes
);

/// A CA issuing node certificates for test names.
struct Ca(rcgen::CertifiedIssuer<'static, rcgen::KeyPair>);

impl Ca {
    fn new() -> Self {
        let key = rcgen::KeyPair::generate().expect("key");
        let mut params = rcgen::CertificateParams::new(Vec::new()).expect("params");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        Self(rcgen::CertifiedIssuer::self_signed(params, key).expect("ca"))
    }

    fn tls(&self, name: &str) -> MeshTls {
        let key = rcgen::KeyPair::generate().expect("key");
        let cert = rcgen::CertificateParams::new(vec![name.to_owned()])
            .expect("params")
            .signed_by(&key, &self.0)
            .expect("cert");
        MeshTls::from_pem(
            self.0.pem().as_bytes(),
            cert.pem().as_bytes(),
            key.serialize_pem().as_bytes(),
            name,
        )
        .expect("tls settings")
    }
}

async fn tls_nodes_publish_their_identity_and_exchange_requests(h: &Harness) {
    let ca = Ca::new();
    let (ta, tb) = (ca.tls("node-a.test"), ca.tls("node-b.test"));
    let (ha, a) = start(h, |b| echo_node(b).tls(ta)).await;
    let (hb, b) = start(h, |b| echo_node(b).tls(tb)).await;
    wait_peers(&a, 1).await;
    wait_peers(&b, 1).await;
    let reply = a
        .request(
            b.routing_id(),
            &Echo {
                text: "over tls".into(),
            },
        )
        .await
        .expect("reply");
    assert_eq!(reply, "over tls");
    let who = b.request(a.routing_id(), &Who).await.expect("reply");
    assert_eq!(who, a.routing_id().to_string());
    let published = zlink_testkit::snapshot_of(h.store.as_ref(), "mesh-node\0")
        .await
        .values()
        .filter_map(|(bytes, _)| DescriptorRecord::<MeshNodeDescriptor>::decode(bytes).ok())
        .map(|r| r.descriptor.security_identity)
        .collect::<std::collections::BTreeSet<_>>();
    assert_eq!(
        published,
        ["tls:node-a.test", "tls:node-b.test"]
            .map(str::to_owned)
            .into(),
    );
    assert_eq!(
        SecurityIdentity::parse("tls:node-a.test").expect("parse"),
        SecurityIdentity::Tls("node-a.test".into())
    );
    hb.shutdown().await;
    ha.shutdown().await;
}

async fn a_plaintext_node_is_never_a_peer_of_tls_nodes(h: &Harness) {
    let ca = Ca::new();
    let (ta, tb) = (ca.tls("node-a.test"), ca.tls("node-b.test"));
    let (ha, a) = start(h, |b| echo_node(b).tls(ta)).await;
    let (hb, b) = start(h, |b| echo_node(b).tls(tb)).await;
    let (hp, p) = start(h, echo_node).await;
    wait_peers(&a, 1).await;
    wait_peers(&b, 1).await;
    // Long enough for several discovery rounds and redials.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    for tls_node in [&a, &b] {
        let peers: Vec<_> = tls_node
            .status()
            .peers
            .iter()
            .map(|s| s.routing_id.clone())
            .collect();
        assert!(!peers.contains(p.routing_id()), "{peers:?}");
    }
    assert!(p.status().peers.is_empty(), "{:?}", p.status().peers);
    let err = p.request(a.routing_id(), &Who).await.expect_err("no peer");
    assert!(
        matches!(err.kind(), ErrorKind::NotFound | ErrorKind::Unavailable),
        "{err:?}"
    );
    hp.shutdown().await;
    hb.shutdown().await;
    ha.shutdown().await;
}
