//! [`JsonState`]: the state adapter of any Actor or Spot that is `Serialize` and
//! `Deserialize` — its whole state moves as JSON (`PreserveStateWith`), with no adapter to
//! write and no format crate to add.

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::registration::{Actor, ActorStateAdapter, Spot, SpotStateAdapter};
use crate::messaging::BoxError;

/// Moves an Actor's or a Spot's whole state as JSON: `capture` serialises the object itself,
/// `restore` deserialises it on the target. Fields marked `#[serde(skip)]` come back as their
/// `Default`. A value that does not serialise fails the capture (the move is refused and the
/// object stays where it is); bytes that do not deserialise fail the restore.
///
/// ```
/// use zlink_runtime::relocate::JsonState;
/// use zlink_runtime::{Actor, MemoryLocationStore, MeshName, ZLink};
///
/// #[derive(Default, serde::Serialize, serde::Deserialize)]
/// struct Counter { n: u64 }
/// impl Actor for Counter {}
///
/// # fn build() -> Result<(), Box<dyn std::error::Error>> {
/// let builder = ZLink::builder()
///     .location_store(std::sync::Arc::new(MemoryLocationStore::new()))
///     .route_mesh(MeshName::new("game")?, |node| {
///         node.object_role(zlink_runtime::config::ObjectRole::Server)
///             .actor_type::<Counter>("counter", |t| {
///                 t.factory(|_ctx| async { Ok(Counter::default()) })
///                     .preserve_state_with(JsonState)
///             })
///     });
/// # let _ = builder; Ok(()) }
/// # build().unwrap();
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct JsonState;

impl<A: Actor + Serialize + DeserializeOwned> ActorStateAdapter<A> for JsonState {
    fn capture(&self, actor: &A) -> Result<Vec<u8>, BoxError> {
        Ok(serde_json::to_vec(actor)?)
    }

    fn restore(&self, bytes: &[u8]) -> Result<A, BoxError> {
        Ok(serde_json::from_slice(bytes)?)
    }
}

impl<S: Spot + Serialize + DeserializeOwned> SpotStateAdapter<S> for JsonState {
    fn capture(&self, spot: &S) -> Result<Vec<u8>, BoxError> {
        Ok(serde_json::to_vec(spot)?)
    }

    fn restore(&self, bytes: &[u8]) -> Result<S, BoxError> {
        Ok(serde_json::from_slice(bytes)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
    struct Room {
        lines: Vec<String>,
        #[serde(skip)]
        cache: u32,
    }
    impl Actor for Room {}
    impl Spot for Room {}

    #[test]
    fn json_state_moves_the_whole_state_and_refuses_bytes_it_did_not_write() {
        let room = Room {
            lines: vec!["a".into(), "b".into()],
            cache: 7,
        };
        let bytes = ActorStateAdapter::<Room>::capture(&JsonState, &room).expect("captured");
        let back: Room = ActorStateAdapter::restore(&JsonState, &bytes).expect("restored");
        assert_eq!(back.lines, room.lines);
        assert_eq!(back.cache, 0, "a skipped field comes back as its default");
        let spot_bytes = SpotStateAdapter::<Room>::capture(&JsonState, &room).expect("captured");
        assert_eq!(spot_bytes, bytes);
        let spot: Room = SpotStateAdapter::restore(&JsonState, &bytes).expect("restored");
        assert_eq!(spot.lines, room.lines);
        assert!(ActorStateAdapter::<Room>::restore(&JsonState, b"not json").is_err());
    }
}
