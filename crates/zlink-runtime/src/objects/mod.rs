//! Actors and Spots (spec 06 §4, §11, §15–§18; 21 §7), built on the MeshNode layer.
//!
//! What exists today:
//!
//! - **Registration** ([`ActorType`], [`SpotType`]) on an Object Server's MeshNode builder:
//!   factories, the one relocation policy each type chooses, User Spot execution and readiness
//!   modes, typed message handlers (`on_request`, `on_send`) for Actors and Spots, a User
//!   Spot's creation callback ([`SpotType::on_create`]) and the node's Entry Spot callback for
//!   Actors (`MeshNodeBuilder::on_actor_create`); validated at startup and published as the
//!   descriptor's object capabilities with a per-lifecycle Entry Spot id (an id that already
//!   exists as a Spot ends startup with `AlreadyExists`).
//! - **Activations**: one per object on its owner node, built once by the factory, behind a
//!   mailbox bounded on both jobs and bytes (reserved together, returned when the handler
//!   finishes; work a relocation held and hands over enters past the bound, the hold being
//!   bounded itself — `relocation` module doc), running one turn at a time with a bounded slice; a `SpotWide` User Spot and its
//!   member Actors share one turn; closed exactly once after accepted turns.
//! - **Managers**: [`ActorManager`] (`ZLinkHost::actors` / `actors_in`) and [`SpotManager`]
//!   (`ZLinkHost::spots` / `spots_in`; none → NotConfigured, several → InvalidOperation,
//!   unknown MeshName → NotFound). `create` / `get_or_create` return a fluent [`CreateCall`]
//!   (creation request ≤ 1 MiB stored inline in the `Creating` record and bounded so the record
//!   fits 1 MiB whatever node it lands on; deadline; `in_spot` for Actors; each option at most
//!   once). Creation: read → follow an existing or in-progress one (the 21 §7 result table) →
//!   reserve on an eligible Object Server by weight and capacity (one conditional batch) → the
//!   target verifies the `zlink.object.create` fence (source and target run generations,
//!   OperationId, kind, id, type, ObjectGeneration, AuthorityOwnerGeneration, first-secured
//!   StoreVersion), runs the factory and the deciding callback (Entry Spot for Actors, the
//!   Spot's own for User Spots), and writes Ready + the Created terminal, or the deletion +
//!   returned capacity + the Rejected / Failed terminal, in one batch
//!   (`creation-operation-terminal-v1`, kept until 5 minutes past the original deadline by
//!   Store time, readable only under the same source RID, run generation and OperationId). A
//!   lost reply is recovered from the terminal; a target that never answers is cancelled at
//!   the deadline by the first-secured version (`DeadlineExceeded`, no `Reserved` row left).
//!   Every creation ends (21 §7, §10): the Reserve records the operation and its Store-clock
//!   deadline beside the record (`creation-deadline` row); a lost Reserve reply is resolved by
//!   reading that row; a Store error on the Ready commit is confirmed by reading again (live,
//!   or aborted with a typed Failed terminal); an abort or cancel the Store does not confirm
//!   is retried until the deadline plus `creationCleanupWindow`; and a caller that meets a
//!   `Reserved` record whose creating run's lease is gone, or whose deadline plus window has
//!   passed on the Store's clock, cancels it in one guarded batch and competes again.
//!   `find` returns only a Ready ref ([`ActorRef`] / [`SpotRef`], ObjectGeneration as a
//!   decimal string in JSON). `destroy` / `close` end exactly the ref's incarnation (missing →
//!   false, other incarnation → InvalidOperation, not Ready or unreachable → Unavailable).
//! - **The admission door** (spec 21 §5, `door.rs`): every message job an activation starts —
//!   Actor or Spot, local or from the mesh, relayed or followed — passes the host's admission
//!   gate when it is submitted and again when it starts, and a factory's activation is
//!   confirmed and made live only through it; past the local admission deadline the caller
//!   gets `Unavailable` (`AdmissionClosed`) and nothing runs. The check is lock-free.
//! - **Timers** (`timer/`, spec 21 §1, §1.2, §5; 06 §11): one-shot and periodic timers by
//!   name from the factory, a handler or a tick; a tick is a job of the activation (one turn,
//!   the bounded mailbox) that asks the admission gate for `TimerStart`; the activation's
//!   close cancels its timers once; a move carries them (see the `timer` module doc).
//! - **Membership** (kept in the Actor's authority record): the placing node's Entry Spot, or
//!   the User Spot an Actor was created into (`in_spot`, placed on the Spot's node) or joined
//!   on the same node ([`ActorManager::join`], a Preserve CAS; the activation stays). A member
//!   of a `SpotWide` Spot resolves its owner through the Spot's record.
//! - **Messaging by global id**: `request` / `send` on either manager resolve the Ready owner
//!   through the node's route cache (`routeCacheMaxAge`, and never past the last time the
//!   owner accepts new work as discovery last read its lease, spec 21 §7.3; Missing /
//!   Creating / Store errors never cached; an entry is dropped when a read shows another
//!   StoreVersion, ObjectGeneration or AuthorityOwnerGeneration, when a call through it ends
//!   NotFound / Unavailable, and with every entry of a run whose lease is gone). A node that no longer holds the activation
//!   answers by the record, so a stale route never runs a message on a previous incarnation.
//! - **Owner death** (an explicit extension beyond spec 21, which leaves object failover to a
//!   future contract): when a fresh discovery list no longer names a host run (its owner lease
//!   is gone), each surviving object node runs the recovery-sweep over that run — delete only,
//!   rows with relocation progress skipped, nothing while the run's lease is held — after which
//!   `get_or_create` makes a new incarnation with a higher ObjectGeneration. A Ready Instance
//!   Spot of that run whose first message had not completed is restored first (below).
//! - **Instance Spots** (spec 06 §15–§16, §18; 21 §7.1; `instance/`): no create call.
//!   [`SpotManager::instance`] returns an [`InstanceCall`] (options: stable type, deadline,
//!   metadata, each at most once) whose `request` / `send` reaches the Ready Instance Spot, or
//!   — when its record is Missing — creates it from that first message (cold activation): the
//!   source picks an eligible node (no reservation of its own) and sends it the activation
//!   envelope over `zlink.spot.activate`; the target stores the envelope in the Relocation
//!   Store and verifies it, reserves `Creating` + capacity + the recovery root in one batch,
//!   runs the factory, commits `Ready`, runs the first message before any other, then removes
//!   the root (Preserve) and deletes the envelope, and answers. Racing first messages run one
//!   factory: the losers forward to the winner, every message runs once. The stable type,
//!   when omitted, is the only Instance Spot type the mesh serves. A dead owner's Ready
//!   Instance Spot is restored from its stored first message by a survivor (a takeover
//!   conditioned on the dead run's lease); one that never reached Ready is cancelled by the
//!   recovery-sweep; an envelope no record points at expires (`coldActivationRetention`).
//! - **Owner death** (an extension beyond spec 21, delete only): when discovery sees an owner
//!   run leave the list, the recovery-sweep deletes its rows (capacity returned) and
//!   `get_or_create` makes a new incarnation. A host whose own lease was lost and taken over
//!   under a new generation republishes its descriptors, closes its earlier run's activations
//!   and sweeps that run the same way.
//! - **Operational queries**: `ZLinkHost::locate` / `list_locations` (spec 21 §7.4) and
//!   `ZLinkHost::object_capacity`.
//!
//! ```
//! use std::sync::Arc;
//! use zlink_runtime::config::ObjectRole;
//! use zlink_runtime::{Actor, DynLocationStore, MemoryLocationStore, MeshName, Message, Request, ZLink};
//!
//! struct Counter { n: u64 }
//! impl Actor for Counter {}
//! #[derive(serde::Serialize, serde::Deserialize)]
//! struct Incr;
//! impl Message for Incr { const PACKET: &'static str = "Incr"; }
//! impl Request for Incr { type Reply = u64; }
//!
//! # tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(async {
//! let store: Arc<dyn DynLocationStore> = Arc::new(MemoryLocationStore::new());
//! let host = ZLink::builder().location_store(store)
//!     .route_mesh(MeshName::new("game")?, |node| node.object_role(ObjectRole::Server)
//!         .actor_type::<Counter>("counter", |t| t
//!             .factory(|_ctx| async { Ok(Counter { n: 0 }) })
//!             .disable_relocation()
//!             .on_request::<Incr, _>(|c, _incr, _ctx| Box::pin(async move { c.n += 1; Ok(c.n) }))))
//!     .build().start().await?;
//! let actors = host.actors()?;
//! # tokio::time::sleep(std::time::Duration::from_millis(1200)).await; // first discovery read
//! let r = actors.get_or_create("counter", "visits").await?;
//! assert_eq!(actors.request("visits", &Incr).await?, 1);
//! assert_eq!(actors.request("visits", &Incr).await?, 2);
//! assert_eq!(actors.find("visits").await?, Some(r));
//! host.shutdown().await;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Moves are the `relocation` layer's: objects reach it only through the interception seam
//! (`interception.rs`) the host installs on each object host. Not built yet: Instance Spot activation by Logical Multicast, the
//! durable activation inbox beyond the first message, and the descriptor's live
//! `activationConcurrency.active` count (the permits are enforced, the count is not
//! published).

pub(crate) mod activation;
mod call;
pub(crate) mod client;
pub(crate) mod create;
pub(crate) mod door;
pub(crate) mod held;
pub(crate) mod here;
pub(crate) mod host;
pub(crate) mod inbound;
pub(crate) mod instance;
pub(crate) mod interception;
pub(crate) mod join;
mod json_state;
pub(crate) mod lifecycle;
pub(crate) mod live;
pub(crate) mod live_set;
mod manager;
pub(crate) mod membership;
pub(crate) mod messages;
mod projection;
pub(crate) mod recovery;
mod refs;
pub(crate) mod registration;
mod relocation_options;
pub(crate) mod reply;
pub(crate) mod route_source;
mod routes;
mod spot_of;
mod spots;
#[cfg(feature = "testing")]
pub(crate) mod testing;
pub(crate) mod timer;
mod typed;

pub use call::{CreateCall, Created, CreatedRef};
pub use client::DEFAULT_CREATE_DEADLINE;
pub use host::{DEFAULT_ACTOR_MAILBOX_BYTES, DEFAULT_ACTOR_MAILBOX_JOBS};
pub(crate) use inbound::{END_OBJECT, JOIN_SPOT, create_command, end_command, join_command};
pub use instance::InstanceCall;
pub use json_state::JsonState;
pub use lifecycle::{ClosingContext, ClosingReason, RelocationReady, RelocationReadyOutcome};
pub use manager::ActorManager;
pub use refs::{ActorRef, SpotRef};
pub use registration::{
    Actor, ActorStateAdapter, ActorType, AdapterContext, CreationContext, CreationDecision,
    FactoryContext, MessageContext, ReadinessMode, RelocationChoice, Spot, SpotExecution,
    SpotStateAdapter, SpotType,
};
pub(crate) use registration::{EntryCallback, EntryClosing, Registration};
pub use relocation_options::{DEFAULT_RELOCATE_DEADLINE, RelocationConfigError, RelocationOptions};
pub use spots::SpotManager;
pub use timer::{
    DEFAULT_MAX_TIMERS_PER_OBJECT, DEFAULT_MIN_TIMER_PERIOD, MAX_MAX_TIMERS_PER_OBJECT,
    MAX_MIN_TIMER_PERIOD, MIN_MIN_TIMER_PERIOD, TimerContext, TimerHandle, TimerKind, TimerLimits,
    Timers,
};
pub use typed::{ActorHandle, Handles, Receives, SpotHandle};
