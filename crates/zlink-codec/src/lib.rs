#![doc = include_str!("../README.md")]
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod counter;
mod error;
mod ids;
pub mod inline_ref;
mod json;
pub mod keys;
pub mod payload;
pub mod records;
pub mod terminal;

pub use counter::Counter;
pub use error::{CodecError, CodecErrorKind, InlineRefRejection};
pub use ids::{
    ChannelName, Generation, MAX_U63, MeshName, ObjectId, OwnerId, RoutingId, StableType, lower_hex,
};
pub use keys::{AuthorityKind, KeyParts, LogicalKey, OperationId, hashed_key_part};
pub use records::{
    AuthorityRecord, ClientServerRecord, FanoutPublisherRecord, MeshNodeRecord, OwnerLeaseRecord,
};
