//! A state adapter is told which object and node it runs for (issue: node identity in every
//! context): `capture_in` on the source node, `restore_in` on the target node.

use std::sync::Arc;

use parking_lot::Mutex;
use zlink_codec::records::ObjectRole;

use super::support::*;
use crate::host::ObjectTarget;
use crate::messaging::BoxError;
use crate::objects::{Actor, ActorStateAdapter, AdapterContext};
use zlink_testkit::Harness;

on_every_store!(a_state_adapter_captures_on_the_source_and_restores_on_the_target_it_is_told_of);

/// An Actor whose state is one byte.
#[derive(Default)]
struct Kept(u8);
impl Actor for Kept {}

/// Records every context it is called with: `("capture" | "restore", ctx)`.
#[derive(Clone, Default)]
struct Witness(Arc<Mutex<Vec<(&'static str, AdapterContext)>>>);
impl ActorStateAdapter<Kept> for Witness {
    fn capture(&self, k: &Kept) -> Result<Vec<u8>, BoxError> {
        Ok(vec![k.0])
    }
    fn restore(&self, bytes: &[u8]) -> Result<Kept, BoxError> {
        Ok(Kept(*bytes.first().ok_or("empty state")?))
    }
    fn capture_in(&self, ctx: &AdapterContext, k: &Kept) -> Result<bytes::Bytes, BoxError> {
        self.0.lock().push(("capture", ctx.clone()));
        self.capture_bytes(k)
    }
    fn restore_in(&self, ctx: &AdapterContext, bytes: bytes::Bytes) -> Result<Kept, BoxError> {
        self.0.lock().push(("restore", ctx.clone()));
        self.restore_bytes(bytes)
    }
}

async fn a_state_adapter_captures_on_the_source_and_restores_on_the_target_it_is_told_of(
    h: &Harness,
) {
    let witness = Witness::default();
    let serve = |w: Witness| {
        move |n: crate::host::config::MeshNodeBuilder<crate::messaging::NodeHandler>| {
            n.actor_type::<Kept>("kept", move |t| {
                t.factory(|_ctx| async { Ok(Kept(7)) })
                    .preserve_state_with(w)
            })
        }
    };
    let a = object_root(
        Arc::clone(&h.store),
        ObjectRole::Server,
        &fast_options(),
        serve(witness.clone()),
    )
    .await;
    let b = object_root(
        Arc::clone(&h.store),
        ObjectRole::Server,
        &fast_options(),
        serve(witness.clone()),
    )
    .await;
    wait_connected([&a, &b]).await;
    let actors = a.0.actors().expect("manager");
    let r = actors.get_or_create("kept", "w1").await.expect("created");
    let (source, target) = if &r.node == a.1.routing_id() {
        (&a, &b)
    } else {
        (&b, &a)
    };
    let moved = source
        .0
        .relocate_object(r, ObjectTarget::Node(target.1.routing_id().clone()))
        .await
        .expect("moved");
    assert_eq!(&moved.target, target.1.routing_id());
    let seen = witness.0.lock().clone();
    let at = |op: &str| -> Vec<AdapterContext> {
        seen.iter()
            .filter(|(o, _)| *o == op)
            .map(|(_, c)| c.clone())
            .collect()
    };
    let (captured, restored) = (at("capture"), at("restore"));
    assert_eq!(captured.len(), 1, "{seen:?}");
    assert_eq!(restored.len(), 1, "{seen:?}");
    for (ctx, node) in [(&captured[0], source), (&restored[0], target)] {
        assert_eq!(ctx.id, "w1");
        assert_eq!(ctx.stable_type, "kept");
        assert_eq!(ctx.mesh, mesh());
        assert_eq!(&ctx.routing_id, node.1.routing_id());
    }
    b.0.shutdown().await;
    a.0.shutdown().await;
}
