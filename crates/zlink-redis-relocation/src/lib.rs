#![doc = include_str!("../README.md")]

mod options;
mod scripts;
mod store;

pub use options::{OptionsError, RedisRelocationOptions};
pub use store::RedisRelocationStore;
