#![doc = include_str!("../README.md")]

pub mod host;
pub mod location;
pub mod mesh;
pub mod messaging;
pub mod objects;
pub(crate) mod relocation;
