//! The MeshNode layer (spec 06 §2, §4–§12, §19–§23), being built on the location core:
//! [`config`] validates the ZLink root and MeshNode configuration into an immutable plan
//! before anything binds or writes, and [`messaging`] dispatches inbound application frames
//! (handler keys, filters, codecs, metadata, error replies) with no network. Starting a node
//! over `zlink-transport` builds on both and is not there yet.

pub mod config;
pub mod messaging;
