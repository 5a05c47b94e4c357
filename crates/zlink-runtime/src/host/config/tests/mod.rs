//! Startup validation tests: one test per rule, at the bound and one past it where there is
//! one.

use std::sync::Arc;

use zlink_codec::{ChannelName, MeshName};
use zlink_store_spi::{
    DynLocationStore, DynRelocationStore, MemoryLocationStore, MemoryRelocationStore,
};

use super::{MeshNodeBuilder, StartupError, ZLink, ZLinkBuilder, ZLinkPlan};

mod hosted;
mod job_queue;
mod node;
mod objects;
mod root;
mod timers;

fn mesh(name: &str) -> MeshName {
    MeshName::new(name).unwrap()
}

fn ch(name: &str) -> ChannelName {
    ChannelName::new(name).unwrap()
}

fn location_store() -> Arc<dyn DynLocationStore> {
    Arc::new(MemoryLocationStore::new())
}

fn relocation_store() -> Arc<dyn DynRelocationStore> {
    Arc::new(MemoryRelocationStore::new())
}

/// A root with a Location Store; handler values are `u32` tags.
fn root() -> ZLinkBuilder<u32> {
    ZLink::builder_with_handlers().location_store(location_store())
}

fn start(builder: ZLinkBuilder<u32>) -> Result<ZLinkPlan<u32>, StartupError> {
    builder.build().start_plan()
}

/// A registration step of a MeshNode builder.
type Reg = fn(MeshNodeBuilder<u32>) -> MeshNodeBuilder<u32>;

/// Every (first, second) pair of Client and Server registrations of the ChannelName `chat`.
fn chat_role_pairs() -> [(Reg, Reg); 4] {
    let client: Reg = |n| n.channel_client(ch("chat"));
    let server: Reg = |n| n.channel_server(ch("chat"));
    [
        (client, client),
        (client, server),
        (server, client),
        (server, server),
    ]
}

/// Starts a root (with a Location Store) holding one MeshNode `m` configured by `f`.
fn start_node(
    f: impl FnOnce(MeshNodeBuilder<u32>) -> MeshNodeBuilder<u32>,
) -> Result<ZLinkPlan<u32>, StartupError> {
    start(root().route_mesh(mesh("m"), f))
}
