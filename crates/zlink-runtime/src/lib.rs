#![doc = include_str!("../README.md")]

pub mod location;
pub mod mesh;
pub mod objects;
pub(crate) mod relocation;
