//! One tick as a job of the activation, holding a host-wide Application Job Queue permit until
//! it starts (06 §3): under the shared turn, skipped when its timer was
//! cancelled since it was queued, refused past the admission deadline (`TimerStart`, spec
//! 21 §5), else the type's timer handler.

use std::sync::Arc;

use super::context::{TimerContext, Timers};
use super::limits::TimerCounters;
use super::table::{Tick, TimerTable};
use crate::objects::activation::Job;
use crate::objects::door::Door;
use crate::objects::live::Turn;
use crate::objects::registration::TimerFn;

/// The job that runs `tick` of `table` on the state.
pub(crate) fn tick_job<T: Send + 'static>(
    permit: crate::mesh::JobPermit,
    table: Arc<TimerTable>,
    door: Door,
    turn: Option<Turn>,
    on_timer: TimerFn<T>,
    tick: Tick,
) -> Job<T> {
    Box::new(move |state: &mut T| {
        Box::pin(async move {
            let _turn = match &turn {
                Some(t) => Some(t.lock().await),
                None => None,
            };
            // The tick starts now: its Application Job Queue permit returns (06 §3).
            let mut permit = permit;
            permit.release();
            // Cancelled (or replaced) since it was queued: the tick does not run.
            if !table.begin_tick(&tick.name, tick.id) {
                return;
            }
            // The tick starts only while the host admits new work (spec 21 §5).
            if door.admit_timer().is_err() {
                TimerCounters::bump(&table.counters().refused);
                tracing::info!(object = %table.object, timer = %tick.name,
                    "timer tick not started: past the admission deadline");
                return;
            }
            let ctx = TimerContext {
                id: table.object.to_string(),
                kind: tick.kind,
                timers: Timers::of(&table),
            };
            if let Err(e) = on_timer(state, ctx, &tick.name).await {
                tracing::warn!(object = %table.object, timer = %tick.name, error = %e,
                    "timer handler failed");
            }
            TimerCounters::bump(&table.counters().ran);
        })
    })
}
