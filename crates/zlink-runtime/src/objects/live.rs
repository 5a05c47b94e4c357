//! Live activations (spec 06 §11, §18): a registered Actor or Spot type builds a live
//! activation — the factory's state behind the activation core's bounded mailbox — and a live
//! activation runs one handler at a time on its state. The state type is erased here: the
//! object host and the managers see only [`ErasedType`] and [`LiveObject`].

use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::oneshot;
use zlink_codec::payload::Registry;

use super::activation::{Activation, Bound, Job, SubmitError};
use super::door::{Door, Gate};
use super::lifecycle::{Boundary, Lifecycle, LifecycleCall, Readiness, RelocationReadyOutcome};
use super::registration::{
    AdapterCaptureFn, AdapterContext, CreationContext, CreationDecision, FactoryContext,
    HandlerTable, ObjectCall, ObjectOutput, TimerFn, TypedObject,
};
use super::timer::table::Tick;
use super::timer::tick::tick_job;
use super::timer::{TickSink, TimerTable, Timers};
use crate::messaging::{BoxError, BoxFuture, RouteKind, ZLinkError};

mod build;

/// How building an activation ended.
pub(crate) enum Built {
    /// The factory (and the Spot's creation callback, if any) approved: the activation runs.
    Approved {
        live: Arc<dyn LiveObject>,
        reply: Option<Vec<u8>>,
    },
    /// The creation callback declined; the state was dropped.
    Rejected { reason: String },
    /// The factory or the callback failed; nothing runs.
    Failed { error: String },
    /// The adapter's restore failed on every allowed attempt (a rebuild for a live
    /// relocation; [`RESTORE_ATTEMPTS`]): the state cannot be restored here, nothing runs.
    Incompatible { error: String },
}

/// How many times a rebuild for a live relocation tries the adapter's restore, each time on a
/// new instance from the factory (the failed one is discarded, spec 21 §9.2), before the state
/// is incompatible (28 §8 `StateIncompatible`).
pub(crate) const RESTORE_ATTEMPTS: u32 = 3;

/// Where one object request's result goes: completed once with the handler's output. Dropped
/// unused — the activation closed before the job ran — it completes with `ShuttingDown`, so
/// every request gets exactly one terminal.
pub(crate) struct Completion(Option<Box<dyn FnOnce(ObjectOutput) + Send>>);

impl Completion {
    /// A completion that runs `f` with the output.
    pub(crate) fn new(f: impl FnOnce(ObjectOutput) + Send + 'static) -> Self {
        Self(Some(Box::new(f)))
    }

    /// Delivers the output.
    pub(crate) fn complete(mut self, out: ObjectOutput) {
        if let Some(f) = self.0.take() {
            f(out);
        }
    }

    /// Ends without an output: another node answers the request (it was forwarded as
    /// received, reply route included).
    pub(crate) fn handed_over(mut self) {
        self.0.take();
    }
}

impl Drop for Completion {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            f(Err(ZLinkError::ShuttingDown));
        }
    }
}

impl From<oneshot::Sender<ObjectOutput>> for Completion {
    fn from(tx: oneshot::Sender<ObjectOutput>) -> Self {
        Self::new(move |out| {
            let _ = tx.send(out);
        })
    }
}

/// A turn shared by a `SpotWide` User Spot and its member Actors: one of them runs at a time.
pub(crate) type Turn = Arc<tokio::sync::Mutex<()>>;

/// An Actor or Spot type with its state type erased.
pub(crate) trait ErasedType: Send + Sync {
    /// Runs the factory and, for a Spot with a creation callback, the callback on the new
    /// state; when approved, starts the activation (mailbox of `jobs` jobs and `bytes` bytes;
    /// every turn taken under `turn` when one is given; every message job passing `door`).
    /// Its timers (the factory's) are armed but tick only once the caller makes it live
    /// (`TimerTable::resume`, after the creation commit).
    fn build(
        &self,
        ctx: FactoryContext,
        codecs: Registry,
        mailbox: ((usize, usize), Door),
        turn: Option<Turn>,
    ) -> BoxFuture<'static, Built>;

    /// Builds the target activation of a live relocation (spec 06 §17): `state` is `None` for
    /// RecreateOnRelocation (the factory runs, no creation callback) and the captured bytes
    /// for PreserveStateWith (the factory runs, then the adapter restores the state, which
    /// replaces the factory's). A restore the type cannot do (no adapter) is `Failed`.
    fn rebuild(
        &self,
        ctx: FactoryContext,
        state: Option<bytes::Bytes>,
        codecs: Registry,
        mailbox: ((usize, usize), Door),
    ) -> BoxFuture<'static, Built>;
}

/// A running activation with its state type erased.
pub(crate) trait LiveObject: Send + Sync {
    /// Queues one message; a request's result arrives on `reply`, exactly once. A full mailbox
    /// is `CapacityExceeded` and changes nothing; an unknown packet is `NoHandler`; past the
    /// host's admission deadline (spec 21 §5) it is `Unavailable` — checked here and again
    /// when the job starts, so a job queued before the deadline does not run after it; a
    /// refusal is both returned and given to `reply`.
    fn submit(
        &self,
        route: RouteKind,
        call: ObjectCall,
        cost: usize,
        reply: Option<Completion>,
    ) -> Result<(), ZLinkError>;

    /// [`submit`](Self::submit) for work a relocation held and now hands over (the source's
    /// hold at a cancel, the target's temporary queue at the commit; spec 21 §9.2, §9.4): it
    /// enters the mailbox past its bound, never `CapacityExceeded` (the hold is bounded
    /// itself). The door, the handler and a closing activation still refuse it.
    fn submit_held(
        &self,
        route: RouteKind,
        call: ObjectCall,
        cost: usize,
        reply: Option<Completion>,
    ) -> Result<(), ZLinkError>;

    /// Stops new messages, finishes accepted ones, drops the state once.
    fn close(&self) -> BoxFuture<'static, ()>;

    /// How many jobs are queued or running in the mailbox (the host's count is the door's
    /// gauge; tests read one activation's).
    #[cfg_attr(not(test), allow(dead_code))]
    fn jobs(&self) -> usize;

    /// The turn this activation's handlers run under, if shared.
    fn turn(&self) -> Option<Turn>;

    /// Runs later turns under `turn` (a same-node join of a `SpotWide` Spot).
    fn set_turn(&self, turn: Option<Turn>);

    /// Captures the state with the type's adapter after every job already accepted has run
    /// (a job of its own, queued last): `Ok(None)` when the type has no adapter. The
    /// activation keeps running.
    fn capture(&self) -> BoxFuture<'static, Result<Option<bytes::Bytes>, ZLinkError>>;

    /// Runs one lifecycle callback (spec 28 §5, §6, §9) as a turn of its own after every job
    /// already accepted (under the shared turn when there is one) and completes with its
    /// result; `Ok` at once when the type has no such callback. A refused job (the activation
    /// is closing) is an error.
    fn lifecycle(&self, call: LifecycleCall) -> BoxFuture<'static, Result<(), BoxError>>;

    /// The relocation boundary of an `ApplicationSignaled` `SpotWide` User Spot (`None` for
    /// every other activation).
    fn readiness(&self) -> Option<Arc<Readiness>>;

    /// Waits until every job already accepted has run (a job of its own, queued last) without
    /// calling the adapter: a `PerActor` Spot's authority transition moves no state. The
    /// activation keeps running.
    fn settle(&self) -> BoxFuture<'static, Result<(), ZLinkError>>;

    /// The activation's timers (a move suspends, snapshots, restores and resumes them).
    fn timers(&self) -> Arc<TimerTable>;
}

/// What a live activation runs with besides its state: handlers, codecs, the adapter's
/// capture, the lifecycle callbacks and the timer handler.
type Parts<T> = (
    Arc<HandlerTable<T>>,
    Registry,
    Option<BoundCapture<T>>,
    Lifecycle<T>,
    TimerFn<T>,
);

impl<T: Send + 'static> LiveInstance<T> {
    fn start(
        state: T,
        (mailbox, door): ((usize, usize), Door),
        (handlers, codecs, capture, lifecycle, on_timer): Parts<T>,
        turn: Option<Turn>,
        timers: Arc<TimerTable>,
    ) -> Arc<dyn LiveObject> {
        let task = Activation::spawn_counted(state, mailbox, Some(door.jobs().clone()));
        let activation = task.activation().clone();
        let readiness = lifecycle.signaled.then(|| Arc::new(Readiness::default()));
        Arc::new_cyclic(|me: &std::sync::Weak<LiveInstance<T>>| {
            let sink: std::sync::Weak<dyn TickSink> = me.clone();
            timers.attach(sink);
            LiveInstance {
                activation,
                door,
                handlers,
                codecs,
                turn: Mutex::new(turn),
                capture,
                lifecycle,
                readiness,
                timers: Arc::clone(&timers),
                on_timer,
            }
        })
    }
}

/// The type's adapter capture with the shared parts of the context it is told (the id is the
/// timer table's): the context itself is built only when a capture runs.
pub(crate) struct BoundCapture<T> {
    capture: AdapterCaptureFn<T>,
    stable_type: Arc<str>,
    node: (zlink_codec::MeshName, zlink_codec::RoutingId),
}

struct LiveInstance<T> {
    activation: Activation<T>,
    /// The host's admission door every message job passes (spec 21 §5).
    door: Door,
    handlers: Arc<HandlerTable<T>>,
    codecs: Registry,
    turn: Mutex<Option<Turn>>,
    capture: Option<BoundCapture<T>>,
    lifecycle: Lifecycle<T>,
    /// The relocation boundary (an `ApplicationSignaled` `SpotWide` User Spot only).
    readiness: Option<Arc<Readiness>>,
    /// The activation's timers.
    timers: Arc<TimerTable>,
    on_timer: TimerFn<T>,
}

impl<T: Send + 'static> TickSink for LiveInstance<T> {
    fn submit_tick(&self, tick: Tick) -> Result<(), SubmitError> {
        let cost = crate::mesh::node::job_cost(tick.name.len(), 0);
        // A tick is an application job: it holds a host-wide permit until it starts.
        let permit = self.door.tick_permit().ok_or(SubmitError::Full)?;
        let job = tick_job(
            permit,
            Arc::clone(&self.timers),
            self.door.clone(),
            self.turn.lock().clone(),
            Arc::clone(&self.on_timer),
            tick,
        );
        self.activation.submit(cost, job)
    }
}

impl<T: Send + 'static> LiveInstance<T> {
    /// Queues one message ([`LiveObject::submit`]); `bounded: false` enters the mailbox past
    /// its bound ([`LiveObject::submit_held`]).
    fn submit_job(
        &self,
        route: RouteKind,
        mut call: ObjectCall,
        cost: usize,
        reply: Option<Completion>,
        bounded: bool,
    ) -> Result<(), ZLinkError> {
        if let Err(e) = self.door.check() {
            if let Some(done) = reply {
                done.complete(Err(e.clone()));
            }
            return Err(e);
        }
        let readiness = self.readiness.clone();
        call.context.relocation = super::lifecycle::RelocationReady(readiness.clone());
        call.context.node = self.door.runs_on();
        call.context.timers = Timers::of(&self.timers);
        let ready = self.lifecycle.ready.clone();
        let Some(handler) = self
            .handlers
            .get(route, call.context.packet.as_str())
            .cloned()
        else {
            let e = ZLinkError::NoHandler {
                key: crate::messaging::HandlerKey::Object {
                    route,
                    packet: call.context.packet.clone(),
                },
            };
            if let Some(done) = reply {
                done.complete(Err(e.clone()));
            }
            return Err(e);
        };
        // Room first: a refusal answers the request here, once, with nothing moved.
        // A caller that offered to run the job (`here` module) gets it back when the
        // activation is idle; held work never runs in place (it keeps the queue's order).
        let bound = if !bounded {
            Bound::Past
        } else if super::here::take_offer() {
            Bound::Here
        } else {
            Bound::Kept
        };
        let reserved = match self.activation.reserve(cost, bound) {
            Ok(r) => r,
            Err(e) => {
                let e = match e {
                    SubmitError::Full => ZLinkError::MailboxFull,
                    _ => ZLinkError::ActivationClosing,
                };
                if let Some(done) = reply {
                    done.complete(Err(e.clone()));
                }
                return Err(e);
            }
        };
        let codecs = self.codecs.clone();
        let turn = self.turn.lock().clone();
        // A job run in place without a shared turn starts within this same call, right after
        // the check above: that check is the one at its start.
        let gate = (!reserved.in_place() || turn.is_some()).then(|| self.door.gate());
        let job = unboxed(move |state: &mut T| {
            Box::pin(async move {
                let _turn = match &turn {
                    Some(t) => Some(t.lock().await),
                    None => None,
                };
                // The job starts only while the host admits new work (spec 21 §5).
                if let Err(e) = gate.as_ref().map_or(Ok(()), Gate::check) {
                    match reply {
                        Some(done) => done.complete(Err(e)),
                        None => tracing::debug!(error = %e, "object one-way message refused"),
                    }
                    return;
                }
                // Its Application Job Queue permit returns now, just before the handler's
                // first instruction (spec 06 §3): the wait is over.
                let mut call = call;
                call.job.release();
                let out = handler(state, call, &codecs).await;
                match reply {
                    Some(done) => done.complete(out),
                    None => {
                        if let Err(e) = out {
                            tracing::warn!(error = %e, "object one-way handler failed");
                        }
                    }
                }
                // The end of the turn: a boundary the handler signalled (28 §5) goes to the
                // move waiting at its seal — this turn stays held until it sealed — or, with
                // none waiting, `Continued` runs as the next turn.
                match readiness
                    .as_ref()
                    .map_or(Boundary::None, |r| r.turn_ended())
                {
                    Boundary::None => {}
                    Boundary::Consumed(sealed) => {
                        let _ = sealed.await;
                    }
                    Boundary::Continued => {
                        if let Some(cb) = ready {
                            if let Err(e) = cb(state, RelocationReadyOutcome::Continued).await {
                                tracing::warn!(error = %e, "relocation-ready callback failed");
                            }
                        }
                    }
                }
            })
        });
        // A queue the run loop left meanwhile drops the job: its completion ends the request
        // with `ShuttingDown`.
        match reserved.submit(job) {
            Ok(Some(here)) => {
                super::here::keep(super::here::RunHere::new(here));
                Ok(())
            }
            Ok(None) => Ok(()),
            Err(_) => Err(ZLinkError::ActivationClosing),
        }
    }
}

impl<T: Send + 'static> LiveObject for LiveInstance<T> {
    fn submit(
        &self,
        route: RouteKind,
        call: ObjectCall,
        cost: usize,
        reply: Option<Completion>,
    ) -> Result<(), ZLinkError> {
        self.submit_job(route, call, cost, reply, true)
    }

    fn submit_held(
        &self,
        route: RouteKind,
        call: ObjectCall,
        cost: usize,
        reply: Option<Completion>,
    ) -> Result<(), ZLinkError> {
        self.submit_job(route, call, cost, reply, false)
    }
    fn jobs(&self) -> usize {
        self.activation.usage().0
    }

    fn close(&self) -> BoxFuture<'static, ()> {
        // Every timer is cancelled once, before the accepted jobs finish (a queued tick of a
        // cancelled timer does not run).
        let cancelled = self.timers.close();
        if cancelled > 0 {
            tracing::debug!(object = %self.timers.object, cancelled, "timers cancelled at close");
        }
        let activation = self.activation.clone();
        Box::pin(async move { activation.close().await })
    }

    fn turn(&self) -> Option<Turn> {
        self.turn.lock().clone()
    }

    fn set_turn(&self, turn: Option<Turn>) {
        *self.turn.lock() = turn;
    }

    fn capture(&self) -> BoxFuture<'static, Result<Option<bytes::Bytes>, ZLinkError>> {
        // The adapter's context is built here, for this capture: an activation keeps only
        // shared parts of it.
        let capture = self.capture.as_ref().map(|c| {
            let ctx = AdapterContext {
                id: self.timers.object.to_string(),
                stable_type: c.stable_type.to_string(),
                mesh: c.node.0.clone(),
                routing_id: c.node.1.clone(),
            };
            (Arc::clone(&c.capture), ctx)
        });
        let (tx, rx) = oneshot::channel();
        let job = job(move |state: &mut T| {
            Box::pin(async move {
                let out = match capture {
                    None => Ok(None),
                    Some((c, ctx)) => {
                        c(&ctx, state)
                            .map(Some)
                            .map_err(|e| ZLinkError::AdapterFailed {
                                step: "capture",
                                source: crate::messaging::SharedError::from(e),
                            })
                    }
                };
                let _ = tx.send(out);
            })
        });
        let submitted = self.activation.submit(0, job);
        Box::pin(async move {
            if submitted.is_err() {
                return Err(ZLinkError::ActivationClosing);
            }
            rx.await.unwrap_or(Err(ZLinkError::ShuttingDown))
        })
    }

    fn lifecycle(&self, call: LifecycleCall) -> BoxFuture<'static, Result<(), BoxError>> {
        let (closing, ready) = (self.lifecycle.closing.clone(), self.lifecycle.ready.clone());
        let present = match &call {
            LifecycleCall::Closing(_) => closing.is_some(),
            LifecycleCall::Ready(_) => ready.is_some(),
        };
        if !present {
            return Box::pin(async { Ok(()) });
        }
        let turn = self.turn.lock().clone();
        let (tx, rx) = oneshot::channel();
        let job = job(move |state: &mut T| {
            Box::pin(async move {
                let _turn = match &turn {
                    Some(t) => Some(t.lock().await),
                    None => None,
                };
                let out = match (call, closing, ready) {
                    (LifecycleCall::Closing(ctx), Some(cb), _) => cb(state, ctx).await,
                    (LifecycleCall::Ready(outcome), _, Some(cb)) => cb(state, outcome).await,
                    _ => Ok(()),
                };
                let _ = tx.send(out);
            })
        });
        let submitted = self.activation.submit(0, job);
        Box::pin(async move {
            if submitted.is_err() {
                return Err("the activation refused the lifecycle callback".into());
            }
            match rx.await {
                Ok(out) => out,
                Err(_) => Err("the activation closed before the lifecycle callback ran".into()),
            }
        })
    }

    fn readiness(&self) -> Option<Arc<Readiness>> {
        self.readiness.clone()
    }

    fn timers(&self) -> Arc<TimerTable> {
        Arc::clone(&self.timers)
    }

    fn settle(&self) -> BoxFuture<'static, Result<(), ZLinkError>> {
        let (tx, rx) = oneshot::channel();
        let job = job(move |_state: &mut T| {
            Box::pin(async move {
                let _ = tx.send(());
            })
        });
        let submitted = self.activation.submit(0, job);
        Box::pin(async move {
            if submitted.is_err() {
                return Err(ZLinkError::ActivationClosing);
            }
            rx.await.map_err(|_| ZLinkError::ShuttingDown)
        })
    }
}

/// A job's closure as it is (the bound gives it its higher-ranked signature); boxed only if it
/// is queued.
fn unboxed<T, F>(f: F) -> F
where
    F: for<'a> FnOnce(&'a mut T) -> BoxFuture<'a, ()> + Send + 'static,
{
    f
}

/// A job built from a closure (the bound gives the closure its higher-ranked signature).
fn job<T, F>(f: F) -> Job<T>
where
    F: for<'a> FnOnce(&'a mut T) -> BoxFuture<'a, ()> + Send + 'static,
{
    Box::new(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_completion_delivers_exactly_once_and_shutting_down_when_dropped_unused() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = Arc::clone(&seen);
        Completion::new(move |out| s.lock().push(out.is_ok())).complete(Ok(None));
        let s = Arc::clone(&seen);
        drop(Completion::new(move |out| {
            s.lock().push(matches!(out, Err(ZLinkError::ShuttingDown)))
        }));
        assert_eq!(*seen.lock(), vec![true, true]);
    }

    use crate::objects::registration::{ActorType, Registration};
    use crate::objects::{Actor, ActorStateAdapter};
    use bytes::Bytes;

    /// An Actor whose state is shared bytes.
    struct Blob(Bytes);
    impl Actor for Blob {}

    /// Moves the state without copying; the copying pair fails, so using it is seen.
    struct Shared;
    impl ActorStateAdapter<Blob> for Shared {
        fn capture(&self, _: &Blob) -> Result<Vec<u8>, crate::messaging::BoxError> {
            Err("the copying capture must not be used".into())
        }
        fn restore(&self, _: &[u8]) -> Result<Blob, crate::messaging::BoxError> {
            Err("the copying restore must not be used".into())
        }
        fn capture_bytes(&self, b: &Blob) -> Result<Bytes, crate::messaging::BoxError> {
            Ok(b.0.clone())
        }
        fn restore_bytes(&self, bytes: Bytes) -> Result<Blob, crate::messaging::BoxError> {
            Ok(Blob(bytes))
        }
    }

    /// Copies on both sides (only the required pair is written).
    struct Copying;
    impl ActorStateAdapter<Blob> for Copying {
        fn capture(&self, b: &Blob) -> Result<Vec<u8>, crate::messaging::BoxError> {
            Ok(b.0.to_vec())
        }
        fn restore(&self, bytes: &[u8]) -> Result<Blob, crate::messaging::BoxError> {
            Ok(Blob(Bytes::copy_from_slice(bytes)))
        }
    }

    fn blob_registration(adapter: impl ActorStateAdapter<Blob>) -> Registration {
        let t = ActorType::<Blob>::default()
            .factory(|_ctx| async { Ok(Blob(Bytes::new())) })
            .preserve_state_with(adapter);
        Registration::actor("blob".into(), t)
    }

    /// Rebuilds an activation from `payload` and captures it again.
    async fn rebuilt_and_captured(r: &Registration, payload: Bytes) -> Bytes {
        let ctx = FactoryContext {
            id: "b1".into(),
            stable_type: "blob".into(),
            generation: 1,
            request: None,
            mesh: zlink_codec::MeshName::new("game").expect("mesh"),
            routing_id: zlink_codec::RoutingId::new(vec![1]).expect("rid"),
            timers: Default::default(),
        };
        let built = r
            .erased
            .rebuild(
                ctx,
                Some(payload),
                Registry::default(),
                ((16, 1 << 20), Door::unguarded()),
            )
            .await;
        let Built::Approved { live, .. } = built else {
            panic!("the rebuild did not approve");
        };
        let captured = live.capture().await.expect("captured").expect("state");
        live.close().await;
        captured
    }

    #[tokio::test]
    async fn a_shared_bytes_adapter_moves_the_state_without_a_copy() {
        let payload = Bytes::from(vec![7u8; 4096]);
        let r = blob_registration(Shared);
        let captured = rebuilt_and_captured(&r, payload.clone()).await;
        // The very bytes the target assembled became the state, and the capture handed the
        // state's bytes over as they are.
        assert_eq!(captured.as_ptr(), payload.as_ptr());
        assert_eq!(captured, payload);
    }

    #[tokio::test]
    async fn a_copying_adapter_is_used_through_the_default_methods() {
        let payload = Bytes::from(vec![9u8; 4096]);
        let r = blob_registration(Copying);
        let captured = rebuilt_and_captured(&r, payload.clone()).await;
        assert_eq!(captured, payload);
        assert_ne!(captured.as_ptr(), payload.as_ptr(), "copied on the way");
    }
}
