//! Handlers written as plain `async fn`s in trait impls, and Actor and Spot handles typed by
//! the object's state type (issue 40): a request to an object that does not handle it is a
//! compile error, not a `NoHandler` at run time.

use std::future::Future;
use std::marker::PhantomData;

use super::manager::ActorManager;
use super::registration::{Actor, MessageContext, Spot};
use super::spots::SpotManager;
use crate::mesh::node::CallOptions;
use crate::messaging::{Message, Request, ZLinkError};

/// An object state type's handler of the request `R`, written as an `async fn` (boxed inside
/// the runtime). Register it with `.handles::<R>()` on the object's type.
///
/// ```
/// use zlink_runtime::handler::{Handles, Receives};
/// use zlink_runtime::{MessageContext, Message, Request, ZLinkError};
///
/// #[derive(serde::Serialize, serde::Deserialize)]
/// struct Incr;
/// impl Message for Incr { const PACKET: &'static str = "Incr"; }
/// impl Request for Incr { type Reply = u64; }
///
/// #[derive(serde::Serialize, serde::Deserialize)]
/// struct Reset;
/// impl Message for Reset { const PACKET: &'static str = "Reset"; }
///
/// struct Counter { n: u64 }
/// impl zlink_runtime::Actor for Counter {}
///
/// impl Handles<Incr> for Counter {
///     async fn handle(&mut self, _: Incr, _: MessageContext) -> Result<u64, ZLinkError> {
///         self.n += 1;
///         Ok(self.n)
///     }
/// }
/// impl Receives<Reset> for Counter {
///     async fn receive(&mut self, _: Reset, _: MessageContext) -> Result<(), ZLinkError> {
///         self.n = 0;
///         Ok(())
///     }
/// }
/// // Registered with `.handles::<Incr>()` and `.receives::<Reset>()` on the Actor type;
/// // addressed with `actors.actor::<Counter>("c-1").request(&Incr)`.
/// ```
pub trait Handles<R: Request>: Send + 'static {
    /// Handles one request on the object's state, one turn at a time; the result is the
    /// typed reply.
    fn handle(
        &mut self,
        request: R,
        ctx: MessageContext,
    ) -> impl Future<Output = Result<R::Reply, ZLinkError>> + Send;
}

/// An object state type's handler of the one-way message `M`, written as an `async fn`.
/// Register it with `.receives::<M>()` on the object's type.
pub trait Receives<M: Message>: Send + 'static {
    /// Handles one message on the object's state, one turn at a time.
    fn receive(
        &mut self,
        message: M,
        ctx: MessageContext,
    ) -> impl Future<Output = Result<(), ZLinkError>> + Send;
}

/// A handle typed by an object's state type: the struct, its `Clone`, `Debug`, id and the
/// typed `request`, `request_with` and `send` (one definition for Actors and Spots).
macro_rules! typed_handle {
    ($(#[$doc:meta])* $handle:ident, $manager:ident, $bound:ident, $what:literal) => {
        $(#[$doc])*
        pub struct $handle<T> {
            manager: $manager,
            id: String,
            _state: PhantomData<fn() -> T>,
        }

        impl<T> Clone for $handle<T> {
            fn clone(&self) -> Self {
                Self {
                    manager: self.manager.clone(),
                    id: self.id.clone(),
                    _state: PhantomData,
                }
            }
        }

        impl<T> std::fmt::Debug for $handle<T> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($handle))
                    .field("type", &std::any::type_name::<T>())
                    .field("id", &self.id)
                    .finish()
            }
        }

        impl<T: $bound> $handle<T> {
            fn new(manager: &$manager, id: String) -> Self {
                Self {
                    manager: manager.clone(),
                    id,
                    _state: PhantomData,
                }
            }

            #[doc = concat!("The ", $what, "'s global id.")]
            pub fn id(&self) -> &str {
                &self.id
            }

            #[doc = concat!("A request the ", $what, "'s type handles, to the Ready ", $what, " (as [`", stringify!($manager), "::request`]).")]
            pub async fn request<R>(&self, request: &R) -> Result<R::Reply, ZLinkError>
            where
                R: Request,
                T: Handles<R>,
            {
                self.manager.request(&self.id, request).await
            }

            /// [`request`](Self::request) with call options.
            pub async fn request_with<R>(
                &self,
                request: &R,
                options: &CallOptions,
            ) -> Result<R::Reply, ZLinkError>
            where
                R: Request,
                T: Handles<R>,
            {
                self.manager.request_with(&self.id, request, options).await
            }

            #[doc = concat!("A one-way message the ", $what, "'s type receives, to the Ready ", $what, " (as [`", stringify!($manager), "::send`]).")]
            pub async fn send<M>(&self, message: &M) -> Result<(), ZLinkError>
            where
                M: Message,
                T: Receives<M>,
            {
                self.manager.send(&self.id, message).await
            }
        }
    };
}

typed_handle!(
    /// An Actor addressed by its global id, typed by its state type `T`: it sends only the
    /// requests `T` [`Handles`] and the messages it [`Receives`] (checked at compile time). Get
    /// one with [`ActorManager::actor`].
    ///
    /// A request the Actor's type does not handle does not compile:
    ///
    /// ```compile_fail,E0277
    /// use zlink_runtime::{ActorManager, Message, Request};
    ///
    /// #[derive(serde::Serialize, serde::Deserialize)]
    /// struct Ping;
    /// impl Message for Ping { const PACKET: &'static str = "Ping"; }
    /// impl Request for Ping { type Reply = (); }
    ///
    /// struct Quiet;
    /// impl zlink_runtime::Actor for Quiet {}
    ///
    /// async fn ask(actors: &ActorManager) {
    ///     // `Quiet` does not implement `Handles<Ping>`.
    ///     let _ = actors.actor::<Quiet>("q-1").request(&Ping).await;
    /// }
    /// ```
    ActorHandle,
    ActorManager,
    Actor,
    "Actor"
);

typed_handle!(
    /// A Spot (a User or Instance Spot) addressed by its global id, typed by its state type
    /// `T`: it sends only the requests `T` [`Handles`] and the messages it [`Receives`]
    /// (checked at compile time). Get one with [`SpotManager::spot`]. It reaches the Ready
    /// Spot; an Instance Spot's first message, which may create it, goes through
    /// [`SpotManager::instance`].
    ///
    /// A request the Spot's type does not handle does not compile:
    ///
    /// ```compile_fail,E0277
    /// use zlink_runtime::{Message, Request, SpotManager};
    ///
    /// #[derive(serde::Serialize, serde::Deserialize)]
    /// struct Ping;
    /// impl Message for Ping { const PACKET: &'static str = "Ping"; }
    /// impl Request for Ping { type Reply = (); }
    ///
    /// struct Hall;
    /// impl zlink_runtime::Spot for Hall {}
    ///
    /// async fn ask(spots: &SpotManager) {
    ///     // `Hall` does not implement `Handles<Ping>`.
    ///     let _ = spots.spot::<Hall>("h-1").request(&Ping).await;
    /// }
    /// ```
    SpotHandle,
    SpotManager,
    Spot,
    "Spot"
);

impl ActorManager {
    /// The Actor `id` typed by its state type `A`: its `request` and `send` take only what
    /// `A` handles (a wrong message is a compile error). It names the id only; the Actor is
    /// created as usual (`get_or_create`), and a request to an id that is not an `A`
    /// answers as an untyped request would (`NoHandler`, `NotFound`).
    pub fn actor<A: Actor>(&self, id: impl Into<String>) -> ActorHandle<A> {
        ActorHandle::new(self, id.into())
    }
}

impl SpotManager {
    /// The Spot `id` typed by its state type `S`: its `request` and `send` take only what `S`
    /// handles (a wrong message is a compile error). It names the id only; the Spot is
    /// created as usual (`create`, `get_or_create`), and a request to an id that is not an
    /// `S` answers as an untyped request would (`NoHandler`, `NotFound`).
    pub fn spot<S: Spot>(&self, id: impl Into<String>) -> SpotHandle<S> {
        SpotHandle::new(self, id.into())
    }
}
