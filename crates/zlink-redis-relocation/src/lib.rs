#![doc = include_str!("../README.md")]

mod options;
mod scripts;
mod store;
mod tls;
mod tls_refusal;

pub use options::RedisRelocationOptions;
pub use store::RedisRelocationStore;
pub use tls::{RedisTlsConfig, TlsConfigError, TlsConfigErrorKind};
pub use tls_refusal::TlsRefusal;
