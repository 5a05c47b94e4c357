#![doc = include_str!("../README.md")]

pub mod location;
pub mod mesh;
mod objects;
