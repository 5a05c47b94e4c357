//! Actor activations (spec 06 §11, §18): a registered Actor type builds a live activation —
//! the factory's state behind the activation core's bounded mailbox — and a live activation
//! runs one handler at a time on its state. The payload type is erased here: the registry of
//! types and the managers see only [`ErasedActorType`] and [`LiveObject`].

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::oneshot;
use zlink_codec::payload::Registry;

use super::activation::{Activation, ActivationTask, Job, SubmitError};
use super::registration::{
    Actor, ActorCall, ActorHandler, ActorOutput, FactoryContext, TypedActor,
};
use crate::mesh::messaging::{BoxFuture, ErrorKind, RouteKind, ZLinkError};

/// An Actor type with its state type erased.
pub(crate) trait ErasedActorType: Send + Sync {
    /// Runs the factory and starts the activation (mailbox of `jobs` jobs and `bytes` bytes).
    fn activate(
        &self,
        ctx: FactoryContext,
        codecs: Registry,
        jobs: usize,
        bytes: usize,
    ) -> BoxFuture<'static, Result<Arc<dyn LiveObject>, ZLinkError>>;
}

/// A running activation with its state type erased.
pub(crate) trait LiveObject: Send + Sync {
    /// Queues one message; a request's result arrives on `reply`. A full mailbox is
    /// `CapacityExceeded` and changes nothing; an unknown packet is `NotFound`.
    fn submit(
        &self,
        route: RouteKind,
        call: ActorCall,
        cost: usize,
        reply: Option<oneshot::Sender<ActorOutput>>,
    ) -> Result<(), ZLinkError>;

    /// Stops new messages, finishes accepted ones, drops the state once.
    fn close(&self) -> BoxFuture<'static, ()>;
}

impl<A: Actor> ErasedActorType for TypedActor<A> {
    fn activate(
        &self,
        ctx: FactoryContext,
        codecs: Registry,
        jobs: usize,
        bytes: usize,
    ) -> BoxFuture<'static, Result<Arc<dyn LiveObject>, ZLinkError>> {
        let factory = self.factory.clone();
        let handlers = Arc::clone(&self.handlers);
        Box::pin(async move {
            let Some(factory) = factory else {
                return Err(ZLinkError::application(
                    ErrorKind::NotConfigured,
                    "the Actor type has no factory",
                ));
            };
            let state = factory(ctx).await?;
            let task = Activation::spawn(state, jobs, bytes);
            let live: Arc<dyn LiveObject> = Arc::new(LiveActor {
                activation: task.activation().clone(),
                task: Mutex::new(Some(task)),
                handlers,
                codecs,
            });
            Ok(live)
        })
    }
}

struct LiveActor<A: Actor> {
    activation: Activation<A>,
    task: Mutex<Option<ActivationTask<A>>>,
    handlers: Arc<HashMap<(RouteKind, String), ActorHandler<A>>>,
    codecs: Registry,
}

impl<A: Actor> LiveObject for LiveActor<A> {
    fn submit(
        &self,
        route: RouteKind,
        call: ActorCall,
        cost: usize,
        reply: Option<oneshot::Sender<ActorOutput>>,
    ) -> Result<(), ZLinkError> {
        let key = (route, call.context.packet.as_str().to_owned());
        let Some(handler) = self.handlers.get(&key).cloned() else {
            return Err(ZLinkError::NoHandler {
                key: format!("actor {route} {:?}", key.1),
            });
        };
        let codecs = self.codecs.clone();
        let job = job(move |actor: &mut A| {
            Box::pin(async move {
                let out = handler(actor, call, &codecs).await;
                match reply {
                    Some(tx) => {
                        let _ = tx.send(out);
                    }
                    None => {
                        if let Err(e) = out {
                            tracing::warn!(error = %e, "actor one-way handler failed");
                        }
                    }
                }
            })
        });
        self.activation.submit(cost, job).map_err(|e| match e {
            SubmitError::Full => {
                ZLinkError::application(ErrorKind::CapacityExceeded, "the actor's mailbox is full")
            }
            _ => ZLinkError::application(ErrorKind::Unavailable, "the activation is closing"),
        })
    }

    fn close(&self) -> BoxFuture<'static, ()> {
        let task = self.task.lock().take();
        Box::pin(async move {
            if let Some(t) = task {
                t.close().await;
            }
        })
    }
}

/// A job built from a closure (the bound gives the closure its higher-ranked signature).
fn job<A, F>(f: F) -> Job<A>
where
    F: for<'a> FnOnce(&'a mut A) -> BoxFuture<'a, ()> + Send + 'static,
{
    Box::new(f)
}
