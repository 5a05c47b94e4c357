#![doc = include_str!("../README.md")]

mod cursor;
mod layout;
mod options;
mod record;
mod store;
mod tls;
mod tls_refusal;

pub use options::RedisLocationOptions;
pub use store::RedisLocationStore;
pub use tls::{RedisTlsConfig, TlsConfigError, TlsConfigErrorKind};
pub use tls_refusal::TlsRefusal;
