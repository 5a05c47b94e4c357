#![doc = include_str!("../README.md")]

mod options;
mod scripts;
mod store;

pub use options::RedisRelocationOptions;
pub use store::RedisRelocationStore;
pub use zlink_redis_tls::{RedisTlsConfig, TlsConfigError, TlsConfigErrorKind, TlsRefusal};
