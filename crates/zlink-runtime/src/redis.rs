//! The official Redis Location and Relocation Store providers (feature `redis`), re-exported so
//! that an application on Redis needs one dependency line:
//!
//! ```toml
//! zlink-runtime = { path = "../zlink-rs/crates/zlink-runtime", features = ["redis"] }
//! ```
//!
//! Both providers work on a single Redis node and on a Redis Cluster (every key of one store
//! shares one hash slot), over `redis://` or `rediss://` (TLS, [`RedisTlsConfig`]). The
//! runtime never names these types itself: a root holds its stores as
//! [`DynLocationStore`](crate::DynLocationStore) / [`DynRelocationStore`](crate::DynRelocationStore).
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use zlink_runtime::ZLink;
//! use zlink_runtime::redis::{
//!     RedisLocationOptions, RedisLocationStore, RedisRelocationOptions, RedisRelocationStore,
//! };
//!
//! let url = "redis://127.0.0.1:6379";
//! let location = RedisLocationStore::connect(RedisLocationOptions::from_url(url)?).await?;
//! let relocation = RedisRelocationStore::connect(RedisRelocationOptions::from_url(url)?).await?;
//! let host = ZLink::builder()
//!     .location_store(Arc::new(location))
//!     .relocation_store(Arc::new(relocation))
//!     .build()
//!     .start()
//!     .await?;
//! host.shutdown().await;
//! # Ok(()) }
//! ```

pub use zlink_redis_location::{
    Durability, NotReplicated, RedisLocationOptions, RedisLocationStore, RedisTlsConfig,
    TlsConfigError, TlsConfigErrorKind, TlsRefusal,
};
pub use zlink_redis_relocation::{RedisRelocationOptions, RedisRelocationStore};
