#![doc = include_str!("../README.md")]

mod cursor;
mod durability;
mod layout;
mod options;
mod record;
mod store;

pub use durability::{Durability, NotReplicated};
pub use options::RedisLocationOptions;
pub use store::RedisLocationStore;
pub use zlink_redis_tls::{RedisTlsConfig, TlsConfigError, TlsConfigErrorKind, TlsRefusal};
