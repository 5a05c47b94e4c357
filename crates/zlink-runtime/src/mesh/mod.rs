//! The MeshNode runtime (spec 06 §4–§12): configuration and messaging over a RouteMesh.

pub mod messaging;
