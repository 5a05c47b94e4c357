//! Startup validation of a node's timer bounds (`MeshNodeBuilder::timer_limits`).

use zlink_codec::MeshName;

use super::StartupError;
use crate::objects::{
    MAX_MAX_TIMERS_PER_OBJECT, MAX_MIN_TIMER_PERIOD, MIN_MIN_TIMER_PERIOD, TimerLimits,
};

/// `limits` when both bounds are in range, else the typed startup error of the first that is
/// not.
pub(super) fn validate(mesh: &MeshName, limits: TimerLimits) -> Result<TimerLimits, StartupError> {
    let max = limits.max_timers_per_object;
    if !(1..=MAX_MAX_TIMERS_PER_OBJECT).contains(&max) {
        return Err(StartupError::MaxTimersOutOfRange {
            mesh: mesh.clone(),
            value: max,
            max: MAX_MAX_TIMERS_PER_OBJECT,
        });
    }
    let min = limits.min_timer_period;
    if !(MIN_MIN_TIMER_PERIOD..=MAX_MIN_TIMER_PERIOD).contains(&min) {
        return Err(StartupError::MinTimerPeriodOutOfRange {
            mesh: mesh.clone(),
            value: min,
            min: MIN_MIN_TIMER_PERIOD,
            max: MAX_MIN_TIMER_PERIOD,
        });
    }
    Ok(limits)
}
