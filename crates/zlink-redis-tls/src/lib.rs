#![doc = include_str!("../README.md")]

mod config;
mod refusal;

pub use config::{RedisTlsConfig, TlsConfigError, TlsConfigErrorKind};
pub use refusal::{Observer, TlsRefusal};
