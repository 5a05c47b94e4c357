#![doc = include_str!("../README.md")]

mod cursor;
mod layout;
mod options;
mod record;
mod store;
mod tls;

pub use options::RedisLocationOptions;
pub use store::RedisLocationStore;
pub use tls::{RedisTlsConfig, TlsConfigError, TlsConfigErrorKind};
