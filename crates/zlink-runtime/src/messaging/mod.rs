//! The messaging core of the MeshNode runtime, independent of any transport (spec 06 §6, §7,
//! §9, §10, §12, §19, §20, §25).
//!
//! - [`Message`] / [`Request`]: typed business messages with a fixed, validated
//!   [`PacketName`].
//! - [`Metadata`]: the immutable, validated snapshot (≤ 1,024 UTF-8 bytes, last value wins).
//! - [`Dispatcher`]: node-direct and channel handlers keyed per spec 06 §9, process-level
//!   [filters](Filter) per §10, payloads through the root codec registry per §12. The mesh
//!   transport fills an [`InboundFrame`] and sends back what the [`DispatchOutcome`] says.
//! - [`ZLinkError`] with the 13 common [`ErrorKind`]s, and the [`ErrorReply`] wire form.
//!
//! # Verification map
//!
//! `docs/verification.md`, section "zlink-runtime messaging: dispatch, filters, codecs".

mod codec;
mod context;
mod dispatcher;
mod error;
mod error_parts;
mod error_reply;
mod filter;
mod frame;
mod handler;
mod metadata;
mod packet;
mod shared_error;
mod target;
mod timer_error;

#[cfg(test)]
mod tests;

pub use codec::{InboundReply, OutboundMessage, decode_reply};
pub(crate) use codec::{content_type_bytes, decode_payload, encode_payload, static_content_type};
pub(crate) use context::ScopedFactories;
pub use context::{
    Cancellation, ChannelContext, DispatchKind, DispatchScope, FilterContext, HandlerContext,
    InboundTarget, NodeContext, RouteKind,
};
#[cfg(test)]
use dispatcher::DispatcherBuilder;
pub(crate) use dispatcher::{Dispatcher, Started};
pub use error::{BoxError, ErrorKind, ErrorMessage, ZLinkError};
pub use error_parts::{
    CreationError, FramePart, IdRole, InternalError, InvalidCall, InvalidText, MoveRefusal,
    ObjectRelocationRefusal, PayloadError, RelocationStoreError, StaleReason, UnavailableReason,
    Unconfigured,
};
pub use error_reply::{ERROR_REPLY_TAG, ErrorReply};
pub(crate) use filter::FnFilter;
pub use filter::{Filter, Next};
pub(crate) use frame::{
    Correlation, DispatchOutcome, InboundFrame, ReplyExpectation, SendEnd, handler_error,
    request_error_reply, same_node_error,
};
pub use handler::{BoxFuture, HandlerKey, NodeHandler};
pub use metadata::{Metadata, MetadataBuilder};
pub use packet::{Message, PacketName, Request};
pub use shared_error::SharedError;
pub use target::Target;
pub use timer_error::TimerError;
