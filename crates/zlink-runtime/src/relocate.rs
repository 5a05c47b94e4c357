//! Moving live objects: host Relocate ([`ZLinkHost::relocate`](crate::ZLinkHost::relocate) with
//! [`RelocateOptions`], answered by a [`RelocationResult`]), one object moved on purpose
//! ([`ZLinkHost::relocate_object`](crate::ZLinkHost::relocate_object) with an [`ObjectToMove`]
//! and an [`ObjectTarget`], answered by an [`ObjectRelocation`]), and what an object type
//! declares for its moves: its [`RelocationOptions`] and, for `PreserveStateWith`, the state
//! adapter that captures and restores it ([`ActorStateAdapter`], [`SpotStateAdapter`], given an
//! [`AdapterContext`]) — spec 21 §9, 28.

pub use crate::host::config::{RelocationConfigError, RelocationOptions};
pub use crate::host::{
    ObjectRelocation, ObjectTarget, ObjectToMove, RelocateOptions, RelocationResult,
};
pub use crate::objects::{ActorStateAdapter, AdapterContext, JsonState, SpotStateAdapter};
