//! Actors and Spots (spec 06 §4, §11, §15–§18; 21 §7), built on the MeshNode layer.
//!
//! What exists today:
//!
//! - **Registration** ([`ActorType`], [`SpotType`]) on an Object Server's MeshNode builder:
//!   factories, the one relocation policy each type chooses, User Spot execution and readiness
//!   modes, typed Actor handlers ([`ActorType::on_request`], [`ActorType::on_send`]); validated
//!   at startup and published as the descriptor's object capabilities with a per-lifecycle
//!   Entry Spot id.
//! - **Activations**: one per Actor on its owner node, built once by the factory, behind a
//!   mailbox bounded on both jobs and bytes (reserved together, returned when the handler
//!   finishes), running one turn at a time with a bounded slice; closed exactly once at
//!   shutdown after its accepted turns.
//! - **The Actor manager** ([`ActorManager`], from `ZLinkHost::actors`):
//!   [`get_or_create`](ActorManager::get_or_create) / [`create`](ActorManager::create) read
//!   the authority record, follow an existing or in-progress creation, or reserve on an
//!   eligible Object Server chosen by weight and capacity (one conditional batch) and run the
//!   factory there — locally, or over the `zlink.actor.create` command, whose target re-reads
//!   the record and checks id, type, generation and that it names this host run — then commit
//!   `Ready`; a failing factory aborts the reservation and returns its capacity.
//!   [`find`](ActorManager::find) returns only a Ready ref. [`request`](ActorManager::request)
//!   / [`send`](ActorManager::send) resolve the owner through the node's route cache
//!   (`routeCacheMaxAge`; Missing and Creating are never cached; an entry is dropped on a
//!   NotFound/Unavailable result, and every entry of a host run whose owner lease is gone is
//!   dropped when discovery stops listing it) and deliver to the activation; one sender's
//!   messages keep their order. An owner that cannot be reached is `Unavailable`; a node that
//!   no longer holds the activation answers by the record (gone → `NotFound`, else
//!   `Unavailable`), so a stale cached route never runs a message on a previous incarnation.
//!   [`destroy`](ActorManager::destroy) ends exactly the ref's incarnation (its owner deletes
//!   the record, returning its capacity, then closes the activation after its accepted turns;
//!   over the `zlink.actor.destroy` command when remote): missing → `false`, another
//!   incarnation → `InvalidOperation`.
//! - **Owner death** (an explicit extension beyond spec 21, which leaves object failover to a
//!   future contract): when a fresh discovery list no longer names a host run (its owner lease
//!   is gone), each surviving object node runs the recovery-sweep over that run — delete only,
//!   rows with relocation progress skipped, nothing while the run's lease is held — after which
//!   `get_or_create` makes a new incarnation with a higher ObjectGeneration.
//!
//! ```
//! use std::sync::Arc;
//! use zlink_codec::{MeshName, records::ObjectRole};
//! use zlink_runtime::mesh::{config::ZLink, messaging::{Message, Request}};
//! use zlink_runtime::objects::Actor;
//! use zlink_store_spi::{DynLocationStore, MemoryLocationStore};
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
//! Not built yet: the Entry Spot creation callback and membership, User Spots and Instance
//! Spots at runtime (their types register and validate, their factories do not run),
//! creation terminal records, Spot close, recovery of rows left by runs this node never
//! saw in its list (for example its own previous run), operational listing of
//! live objects through the manager (the Store-level lookup/list exist on
//! `LocationRuntime`), route-cache invalidation by a newer StoreVersion or generation seen on
//! a read, and `cargo xtask bench objects`. (`cargo xtask demo` runs Actors only.)

pub(crate) mod activation;
pub(crate) mod actor;
pub(crate) mod host;
mod inbound;
pub(crate) mod manager;
mod registration;
mod routes;
#[cfg(feature = "testing")]
pub mod testing;

pub use host::{ActorRef, DEFAULT_ACTOR_MAILBOX_BYTES, DEFAULT_ACTOR_MAILBOX_JOBS};
pub(crate) use inbound::{create_command, destroy_command};
pub use manager::{ActorManager, DEFAULT_CREATE_DEADLINE};
pub(crate) use registration::Registration;
pub use registration::{
    Actor, ActorContext, ActorStateAdapter, ActorType, FactoryContext, ReadinessMode,
    RelocationChoice, Spot, SpotExecution, SpotStateAdapter, SpotType,
};
