//! The MeshNode layer (spec 06 §2, §4–§5): root and MeshNode configuration and the runtime
//! built on the location core.

pub mod config;
