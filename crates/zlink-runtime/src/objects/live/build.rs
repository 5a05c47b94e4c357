//! Building a registered type's activation ([`ErasedType`] for [`TypedObject`]): the factory
//! and, for a Spot, its creation callback; on a relocation target the factory again and the
//! adapter's restore, tried [`RESTORE_ATTEMPTS`] times.

use super::*;

impl<T: Send + 'static> ErasedType for TypedObject<T> {
    fn build(
        &self,
        ctx: FactoryContext,
        codecs: Registry,
        (mailbox, door): ((usize, usize), Door),
        turn: Option<Turn>,
    ) -> BoxFuture<'static, Built> {
        let factory = self.factory.clone();
        let handlers = Arc::clone(&self.handlers);
        let callback = self.callback.clone();
        let capture = self.capture.clone();
        let stable_type = Arc::clone(&self.stable_type);
        let lifecycle = self.lifecycle.clone();
        let on_timer = Arc::clone(&self.on_timer);
        Box::pin(async move {
            let Some(factory) = factory else {
                return Built::Failed {
                    error: "the type has no factory".into(),
                };
            };
            let capture = bind_capture(capture, stable_type, &ctx);
            let timers = TimerTable::new(door.timers().clone(), &ctx.id);
            let mut ctx = ctx;
            ctx.timers = Timers::of(&timers);
            let creation = CreationContext {
                id: ctx.id.clone(),
                stable_type: ctx.stable_type.clone(),
                generation: ctx.generation,
                request: ctx.request.clone(),
            };
            let mut state = match factory(ctx).await {
                Ok(s) => s,
                Err(e) => {
                    return Built::Failed {
                        error: format!("the factory failed: {e}"),
                    };
                }
            };
            let reply = match callback {
                None => None,
                Some(cb) => match cb(&mut state, creation).await {
                    Ok(CreationDecision::Approve { reply }) => reply,
                    Ok(CreationDecision::Reject { reason }) => return Built::Rejected { reason },
                    Err(e) => {
                        return Built::Failed {
                            error: format!("the creation callback failed: {e}"),
                        };
                    }
                },
            };
            let parts = (handlers, codecs, capture, lifecycle, on_timer);
            // Its timers tick once the activation is made live (the creation commit).
            let live = LiveInstance::start(state, (mailbox, door), parts, turn, timers);
            Built::Approved { live, reply }
        })
    }

    fn rebuild(
        &self,
        ctx: FactoryContext,
        bytes: Option<bytes::Bytes>,
        codecs: Registry,
        mailbox: ((usize, usize), Door),
    ) -> BoxFuture<'static, Built> {
        let factory = self.factory.clone();
        let handlers = Arc::clone(&self.handlers);
        let capture = self.capture.clone();
        let restore = self.restore.clone();
        let stable_type = Arc::clone(&self.stable_type);
        let lifecycle = self.lifecycle.clone();
        let on_timer = Arc::clone(&self.on_timer);
        let timer_config = mailbox.1.timers().clone();
        Box::pin(async move {
            let Some(factory) = factory else {
                return Built::Failed {
                    error: "the type has no factory".into(),
                };
            };
            // Each factory run gets a table of its own: a discarded instance's timers go
            // with it.
            let built = |mut ctx: FactoryContext| {
                let factory = Arc::clone(&factory);
                let timers = TimerTable::new(timer_config.clone(), &ctx.id);
                ctx.timers = Timers::of(&timers);
                async move {
                    match factory(ctx).await {
                        Ok(s) => Ok((s, timers)),
                        Err(e) => {
                            timers.close();
                            Err(Built::Failed {
                                error: format!("the factory failed: {e}"),
                            })
                        }
                    }
                }
            };
            let adapter_ctx = AdapterContext::of(&ctx);
            let (mut state, mut timers) = match built(ctx.clone()).await {
                Ok(s) => s,
                Err(failed) => return failed,
            };
            if let Some(bytes) = bytes {
                let Some(restore) = restore else {
                    return Built::Failed {
                        error: "the type has no state adapter to restore with".into(),
                    };
                };
                let mut attempt = 1;
                state = loop {
                    match restore(&adapter_ctx, bytes.clone()) {
                        Ok(s) => break s,
                        Err(e) if attempt >= RESTORE_ATTEMPTS => {
                            return Built::Incompatible {
                                error: format!(
                                    "the adapter's restore failed {attempt} times, last: {e}"
                                ),
                            };
                        }
                        Err(e) => {
                            tracing::warn!(attempt, error = %e, "the adapter's restore failed: \
                                 trying again on a new instance");
                            attempt += 1;
                            // The failed instance is discarded and a new one created (21 §9.2).
                            drop(state);
                            timers.close();
                            (state, timers) = match built(ctx.clone()).await {
                                Ok(s) => s,
                                Err(failed) => return failed,
                            };
                        }
                    }
                };
            }
            let capture = bind_capture(capture, stable_type, &ctx);
            let parts = (handlers, codecs, capture, lifecycle, on_timer);
            // Hidden until the move commits: its timers tick once dispatch opens.
            let live = LiveInstance::start(state, mailbox, parts, None, timers);
            Built::Approved { live, reply: None }
        })
    }
}

/// The registered capture with the shared parts of the activation's context (the node it
/// runs on now: a moved activation is built anew on its target, with the target's context).
fn bind_capture<T: 'static>(
    capture: Option<AdapterCaptureFn<T>>,
    stable_type: Arc<str>,
    ctx: &FactoryContext,
) -> Option<BoundCapture<T>> {
    capture.map(|capture| BoundCapture {
        capture,
        stable_type,
        node: (ctx.mesh.clone(), ctx.routing_id.clone()),
    })
}
