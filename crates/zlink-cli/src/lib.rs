#![doc = include_str!("../README.md")]
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod audit;
pub mod decode;
pub mod error;
pub mod family;
pub mod finding;
pub mod member;
pub mod nodes;
pub mod query;
pub mod redis;
pub mod schema;
pub mod value;

pub use error::{CliError, ErrorKind};
