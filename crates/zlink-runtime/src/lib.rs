#![doc = include_str!("../README.md")]

/// `Display` for fieldless outcome, reason, state and mode enums of the public modules: each
/// value shows as its variant's name, which is the name the spec gives it (`ForceStopped`,
/// `TargetUnavailable`, `PlannedMaintenance`).
macro_rules! display_by_name {
    ($($t:ty),+ $(,)?) => {
        $(
            impl std::fmt::Display for $t {
                fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    std::fmt::Debug::fmt(self, f)
                }
            }
        )+
    };
}

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
