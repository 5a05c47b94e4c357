//! What handlers, filters, factories and lifecycle callbacks receive and return beyond the
//! root names: their contexts, cancellation, the parts of an error, the codec extension
//! points, and the calls that create objects or reach Instance Spots (spec 06 §6–§12,
//! §15–§19; 21 §7).

pub use crate::messaging::{
    BoxFuture, Cancellation, ChannelContext, CreationError, DispatchKind, DispatchScope,
    ERROR_REPLY_TAG, ErrorMessage, ErrorReply, Filter, FilterContext, FramePart, HandlerContext,
    HandlerKey, IdRole, InboundReply, InboundTarget, InternalError, InvalidCall, InvalidText,
    Metadata, MetadataBuilder, MoveRefusal, Next, NodeContext, NodeHandler,
    ObjectRelocationRefusal, OutboundMessage, PacketName, PayloadError, RelocationStoreError,
    RouteKind, SharedError, StaleReason, Target, TimerError, UnavailableReason, Unconfigured,
    decode_reply,
};
pub use crate::objects::{
    ActorHandle, ClosingContext, ClosingReason, CreateCall, Created, CreatedRef, CreationContext,
    FactoryContext, Handles, InstanceCall, Receives, RelocationReady, RelocationReadyOutcome,
    SpotHandle, TimerContext, TimerHandle, TimerKind, Timers,
};

display_by_name!(DispatchKind, ClosingReason, RelocationReadyOutcome);
