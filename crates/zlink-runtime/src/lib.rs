#![doc = include_str!("../README.md")]

// The layers, each importing only those above it in this list (docs/architecture.md; the
// `xtask` tidy test `runtime_layers_import_only_downward` enforces it).
pub(crate) mod host;
pub(crate) mod mesh;
pub(crate) mod messaging;
pub(crate) mod objects;
pub(crate) mod relocation;
pub(crate) mod telemetry;

pub mod config;
pub mod handler;
pub mod location;
#[cfg(feature = "redis")]
pub mod redis;
pub mod relocate;
pub mod status;
#[cfg(feature = "testing")]
pub mod testing;

pub use host::ZLinkHost;
pub use host::config::{MeshNodeBuilder, StartupError, ZLink, ZLinkBuilder};
pub use mesh::node::{CallOptions, MeshNode};
pub use messaging::{BoxError, ErrorKind, Message, Request, ZLinkError};
pub use objects::{Actor, ActorManager, ActorRef, MessageContext, Spot, SpotManager, SpotRef};
pub use zlink_codec::{ChannelName, MeshName};
pub use zlink_store_spi::{
    DynLocationStore, DynRelocationStore, MemoryLocationStore, MemoryRelocationStore,
};
