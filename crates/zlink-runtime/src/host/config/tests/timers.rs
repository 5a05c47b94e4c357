//! Startup validation of the timer bounds: each at its bound and past it.

use std::time::Duration;

use super::*;
use crate::host::config::StartupErrorKind;
use crate::objects::{
    DEFAULT_MAX_TIMERS_PER_OBJECT, DEFAULT_MIN_TIMER_PERIOD, MAX_MAX_TIMERS_PER_OBJECT,
    MAX_MIN_TIMER_PERIOD, MIN_MIN_TIMER_PERIOD, TimerLimits,
};

fn with(max: usize, min: Duration) -> Result<ZLinkPlan<u32>, StartupError> {
    start_node(|n| n.timer_limits(TimerLimits::new(max, min)))
}

#[test]
fn the_default_timer_limits_are_in_the_plan() {
    let plan = start_node(|n| n).unwrap();
    assert_eq!(
        plan.nodes()[0].timer_limits(),
        TimerLimits::new(DEFAULT_MAX_TIMERS_PER_OBJECT, DEFAULT_MIN_TIMER_PERIOD)
    );
}

#[test]
fn max_timers_per_object_is_accepted_at_its_bounds_and_refused_past_them() {
    for max in [1, MAX_MAX_TIMERS_PER_OBJECT] {
        let plan = with(max, DEFAULT_MIN_TIMER_PERIOD).unwrap();
        assert_eq!(plan.nodes()[0].timer_limits().max_timers_per_object, max);
    }
    for max in [0, MAX_MAX_TIMERS_PER_OBJECT + 1] {
        let err = with(max, DEFAULT_MIN_TIMER_PERIOD).unwrap_err();
        assert!(
            matches!(err, StartupError::MaxTimersOutOfRange { value, .. } if value == max),
            "{err:?}"
        );
        assert_eq!(err.kind(), StartupErrorKind::OutOfRange);
    }
}

#[test]
fn min_timer_period_is_accepted_at_its_bounds_and_refused_past_them() {
    for min in [MIN_MIN_TIMER_PERIOD, MAX_MIN_TIMER_PERIOD] {
        let plan = with(DEFAULT_MAX_TIMERS_PER_OBJECT, min).unwrap();
        assert_eq!(plan.nodes()[0].timer_limits().min_timer_period, min);
    }
    for min in [
        MIN_MIN_TIMER_PERIOD - Duration::from_nanos(1),
        MAX_MIN_TIMER_PERIOD + Duration::from_nanos(1),
    ] {
        let err = with(DEFAULT_MAX_TIMERS_PER_OBJECT, min).unwrap_err();
        assert!(
            matches!(err, StartupError::MinTimerPeriodOutOfRange { value, .. } if value == min),
            "{err:?}"
        );
        assert_eq!(err.kind(), StartupErrorKind::OutOfRange);
    }
}
