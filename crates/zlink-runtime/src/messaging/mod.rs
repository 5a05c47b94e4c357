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
//!
//! # Example
//!
//! ```
//! use zlink_codec::payload::Registry;
//! use zlink_codec::{MeshName, RoutingId};
//! use zlink_runtime::messaging::*;
//!
//! #[derive(serde::Serialize, serde::Deserialize)]
//! struct Ping { n: u32 }
//! impl Message for Ping { const PACKET: &'static str = "Ping"; }
//! impl Request for Ping { type Reply = u32; }
//!
//! # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
//! let mesh = MeshName::new("game")?;
//! let dispatcher = Dispatcher::builder(Registry::json_only())
//!     .node_request::<Ping, _, _>(mesh.clone(), |ping, _ctx| async move { Ok(ping.n + 1) })
//!     .build()?;
//! let frame = InboundFrame {
//!     target: InboundTarget::NodeDirect {
//!         mesh,
//!         source: RoutingId::new(*b"a")?,
//!         target: RoutingId::new(*b"b")?,
//!     },
//!     expect: ReplyExpectation::Reply(Correlation::new(&b"op-1"[..])),
//!     packet: "Ping".into(),
//!     content_type: "application/json".into(),
//!     metadata: Default::default(),
//!     payload: r#"{"n":41}"#.into(),
//! };
//! match dispatcher.dispatch(frame, Cancellation::new()).await {
//!     DispatchOutcome::Reply { payload, .. } => assert_eq!(payload, b"42"),
//!     other => panic!("{other:?}"),
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod codec;
mod context;
mod dispatcher;
mod error;
mod error_reply;
mod filter;
mod frame;
mod handler;
mod metadata;
mod packet;

#[cfg(test)]
mod tests;

pub use codec::{InboundReply, OutboundMessage, decode_reply};
pub(crate) use codec::{decode_payload, encode_payload};
pub(crate) use context::ScopedFactories;
pub use context::{
    Cancellation, ChannelContext, DispatchKind, DispatchScope, FilterContext, HandlerContext,
    InboundTarget, NodeContext, RouteKind,
};
pub use dispatcher::{Dispatcher, DispatcherBuilder};
pub use error::{
    BoxError, ErrorKind, ErrorMessage, FramePart, InvalidText, UnavailableReason, ZLinkError,
};
pub use error_reply::{ERROR_REPLY_TAG, ErrorReply};
pub(crate) use filter::FnFilter;
pub use filter::{Filter, Next};
pub use frame::{Correlation, DispatchOutcome, InboundFrame, ReplyExpectation, SendEnd};
pub use handler::{BoxFuture, HandlerKey, NodeHandler};
pub use metadata::{Metadata, MetadataBuilder};
pub use packet::{Message, PacketName, Request};
