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
//! Spec 06 §25 "Handler registration and dispatch" and "Codec" (tests in `tests/`; classic
//! fanout is dispatched elsewhere):
//!
//! | spec item | test |
//! |---|---|
//! | the same dispatch key twice fails startup | `registering_the_same_dispatch_key_twice_fails_startup` |
//! | filters apply to node-direct/channel send and request | `filters_apply_to_node_direct_and_channel_send_and_request` |
//! | no `next`: handler skipped, request Rejected | `filter_without_next_skips_the_handler_and_rejects_the_request` |
//! | `next` twice: no re-run, application error, no retry | `second_next_call_is_an_application_error_and_does_not_rerun_the_handler`, `second_next_call_does_not_rerun_later_filters_either` |
//! | same canonical content type: last registration wins | `last_registration_of_the_same_canonical_content_type_replaces_earlier_ones` |
//! | receive content type not exactly registered: ProtocolError, never JSON | `content_type_not_exactly_registered_is_a_protocol_error_never_json` |
//! | declared type without an extension is sent as JSON | `declared_type_without_an_extension_is_sent_as_json` |
//! | several registrations match: the later one wins | `later_registration_wins_when_several_match_the_declared_type` |
//!
//! The rules behind them (§7 metadata, §9 keys and contexts, §10 order, scope, cancellation
//! and cleanup, §19 kinds and the error reply) have unit tests next to their code and in
//! `tests/`, e.g. `filters_run_in_registration_order_and_unwind_in_reverse`,
//! `instances_and_scope_are_cleaned_up_exactly_once_however_the_dispatch_ends`,
//! `cancellation_given_to_the_filter_reaches_the_handler`,
//! `unknown_key_is_not_found_and_runs_no_handler_or_filter`,
//! `metadata_of_1024_bytes_is_accepted_and_1025_rejected`,
//! `every_kind_round_trips_as_an_error_reply`.
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
