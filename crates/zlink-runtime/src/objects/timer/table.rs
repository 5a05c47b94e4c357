//! One activation's timer table: the armed timers, a task per armed timer that submits its
//! ticks, and the suspend / resume / snapshot / restore a move uses (see the module doc).

use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::task::AbortHandle;
use tokio::time::Instant;
use zlink_store_spi::entropy::HashMap;

use super::context::{TimerHandle, TimerKind};
use super::limits::{TimerConfig, TimerCounters};
use super::wire::TimerWire;
use crate::messaging::TimerError;
use crate::objects::activation::SubmitError;

/// The longest timer name, in bytes.
pub(crate) const MAX_TIMER_NAME: usize = 255;

/// One tick to submit to the activation.
pub(crate) struct Tick {
    pub(crate) name: Arc<str>,
    pub(crate) id: u64,
    pub(crate) kind: TimerKind,
}

/// Where a table submits its ticks: the activation that owns it.
pub(crate) trait TickSink: Send + Sync {
    /// Queues `tick` as a job of the activation (bounded mailbox).
    fn submit_tick(&self, tick: Tick) -> Result<(), SubmitError>;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Armed timers keep their due times but nothing ticks (built hidden, or sealed).
    Suspended,
    Running,
    /// Closed: every timer cancelled, nothing starts.
    Closed,
}

struct Entry {
    id: u64,
    kind: TimerKind,
    due: Instant,
    task: Option<AbortHandle>,
    /// A tick of it waits in the mailbox.
    queued: bool,
}

struct State {
    entries: HashMap<Arc<str>, Entry>,
    next_id: u64,
    mode: Mode,
}

/// One activation's timers.
pub(crate) struct TimerTable {
    state: Mutex<State>,
    config: TimerConfig,
    /// The global id of the object (for the tick's context and logs).
    pub(crate) object: Arc<str>,
    sink: OnceLock<Weak<dyn TickSink>>,
}

impl TimerTable {
    /// A suspended, empty table for the object `object`.
    pub(crate) fn new(config: TimerConfig, object: &str) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(State {
                entries: HashMap::default(),
                next_id: 1,
                mode: Mode::Suspended,
            }),
            config,
            object: Arc::from(object),
            sink: OnceLock::new(),
        })
    }

    /// The activation this table submits to (set once, when it starts).
    pub(crate) fn attach(&self, sink: Weak<dyn TickSink>) {
        let _ = self.sink.set(sink);
    }

    pub(crate) fn counters(&self) -> &TimerCounters {
        &self.config.counters
    }

    /// Starts `name` (first due after `first`).
    pub(crate) fn start(
        self: &Arc<Self>,
        name: String,
        kind: TimerKind,
        first: Duration,
    ) -> Result<TimerHandle, TimerError> {
        if name.is_empty() || name.len() > MAX_TIMER_NAME {
            return Err(TimerError::InvalidName { len: name.len() });
        }
        let limits = self.config.limits;
        if let TimerKind::Every(period) = kind {
            if period < limits.min_timer_period {
                return Err(TimerError::PeriodTooShort {
                    period,
                    min: limits.min_timer_period,
                });
            }
        }
        let mut s = self.state.lock();
        if s.mode == Mode::Closed {
            return Err(TimerError::NoActivation);
        }
        if s.entries.contains_key(name.as_str()) {
            return Err(TimerError::AlreadyExists { name });
        }
        if s.entries.len() >= limits.max_timers_per_object {
            return Err(TimerError::TooMany {
                max: limits.max_timers_per_object,
            });
        }
        let id = s.next_id;
        s.next_id += 1;
        let name: Arc<str> = Arc::from(name);
        let due = Instant::now() + first;
        let task = (s.mode == Mode::Running).then(|| self.spawn(&name, id, due));
        s.entries.insert(
            Arc::clone(&name),
            Entry {
                id,
                kind,
                due,
                task,
                queued: false,
            },
        );
        Ok(TimerHandle {
            table: Arc::downgrade(self),
            name,
            id,
            kind,
        })
    }

    /// Cancels `name` (only the timer `id` when given): whether it existed.
    pub(crate) fn cancel(&self, name: &str, id: Option<u64>) -> bool {
        let mut s = self.state.lock();
        match s.entries.get(name) {
            Some(e) if id.is_none_or(|id| id == e.id) => {}
            _ => return false,
        }
        if let Some(e) = s.entries.remove(name) {
            if let Some(t) = e.task {
                t.abort();
            }
        }
        true
    }

    /// The names, sorted.
    pub(crate) fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .state
            .lock()
            .entries
            .keys()
            .map(|n| n.to_string())
            .collect();
        names.sort();
        names
    }

    /// Stops ticking; every timer keeps its due time (a seal).
    pub(crate) fn suspend(&self) {
        let mut s = self.state.lock();
        if s.mode != Mode::Running {
            return;
        }
        s.mode = Mode::Suspended;
        for e in s.entries.values_mut() {
            if let Some(t) = e.task.take() {
                t.abort();
            }
        }
    }

    /// Ticks again from each timer's due time (an overdue one fires at once).
    pub(crate) fn resume(self: &Arc<Self>) {
        let mut s = self.state.lock();
        if s.mode != Mode::Suspended {
            return;
        }
        s.mode = Mode::Running;
        let armed: Vec<(Arc<str>, u64, Instant)> = s
            .entries
            .iter()
            // A one-shot whose tick already waits needs no task.
            .filter(|(_, e)| !(e.queued && e.kind == TimerKind::Once))
            .map(|(n, e)| (Arc::clone(n), e.id, e.due))
            .collect();
        for (name, id, due) in armed {
            let task = self.spawn(&name, id, due);
            if let Some(e) = s.entries.get_mut(&name) {
                e.task = Some(task);
            }
        }
    }

    /// Cancels every timer, once: later calls (and starts) do nothing. Returns how many it
    /// cancelled.
    pub(crate) fn close(&self) -> usize {
        let mut s = self.state.lock();
        if s.mode == Mode::Closed {
            return 0;
        }
        s.mode = Mode::Closed;
        let n = s.entries.len();
        for (_, e) in s.entries.drain() {
            if let Some(t) = e.task {
                t.abort();
            }
        }
        n
    }

    /// Each timer with its next due time relative to now (a move's handoff).
    pub(crate) fn snapshot(&self) -> Vec<TimerWire> {
        let now = Instant::now();
        let s = self.state.lock();
        let mut out: Vec<TimerWire> = s
            .entries
            .iter()
            .map(|(name, e)| TimerWire::of(name, e.kind, e.due.saturating_duration_since(now)))
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// Arms the timers a move carried, due relative to now, replacing any of the same name
    /// (the factory's); the table stays as it is (suspended while hidden).
    pub(crate) fn restore(self: &Arc<Self>, carried: &[TimerWire]) {
        let now = Instant::now();
        let mut s = self.state.lock();
        if s.mode == Mode::Closed {
            return;
        }
        for w in carried {
            let Some(kind) = w.kind() else {
                tracing::warn!(timer = %w.name, "a carried timer of an unknown kind: dropped");
                continue;
            };
            let id = s.next_id;
            s.next_id += 1;
            let name: Arc<str> = Arc::from(w.name.as_str());
            let due = now + Duration::from_millis(w.due_in_ms);
            let task = (s.mode == Mode::Running).then(|| self.spawn(&name, id, due));
            if let Some(old) = s.entries.insert(
                Arc::clone(&name),
                Entry {
                    id,
                    kind,
                    due,
                    task,
                    queued: false,
                },
            ) {
                if let Some(t) = old.task {
                    t.abort();
                }
            }
        }
        if s.entries.len() > self.config.limits.max_timers_per_object {
            tracing::warn!(object = %self.object, timers = s.entries.len(),
                "a moved object holds more timers than this node's max_timers_per_object");
        }
    }

    fn spawn(self: &Arc<Self>, name: &Arc<str>, id: u64, due: Instant) -> AbortHandle {
        let table = Arc::downgrade(self);
        let name = Arc::clone(name);
        tokio::spawn(async move {
            let mut due = due;
            loop {
                tokio::time::sleep_until(due).await;
                let Some(t) = table.upgrade() else { return };
                match t.fire(&name, id) {
                    Some(next) => due = next,
                    None => return,
                }
            }
        })
        .abort_handle()
    }

    /// The timer `id` is due: submits its tick (unless one still waits) and returns when it
    /// is next due (`None`: this task ends).
    fn fire(&self, name: &Arc<str>, id: u64) -> Option<Instant> {
        let mut s = self.state.lock();
        if s.mode != Mode::Running {
            return None;
        }
        let e = s.entries.get_mut(name).filter(|e| e.id == id)?;
        let now = Instant::now();
        let submitted = if e.queued {
            TimerCounters::bump(&self.config.counters.skipped);
            tracing::debug!(object = %self.object, timer = %name, "timer tick skipped: the previous one still waits");
            false
        } else {
            let sink = self.sink.get().and_then(Weak::upgrade)?;
            let tick = Tick {
                name: Arc::clone(name),
                id,
                kind: e.kind,
            };
            match sink.submit_tick(tick) {
                Ok(()) => {
                    e.queued = true;
                    true
                }
                Err(SubmitError::Full) => {
                    TimerCounters::bump(&self.config.counters.skipped);
                    tracing::debug!(object = %self.object, timer = %name, "timer tick skipped: the mailbox or the Application Job Queue is full");
                    false
                }
                Err(_) => return None,
            }
        };
        match e.kind {
            TimerKind::Once if submitted => {
                e.task = None;
                None
            }
            TimerKind::Once => {
                e.due = now + self.config.limits.min_timer_period;
                Some(e.due)
            }
            TimerKind::Every(period) => {
                let mut next = e.due + period;
                if next <= now {
                    let behind = now.duration_since(e.due).as_nanos() / period.as_nanos().max(1);
                    let skip = u32::try_from(behind).unwrap_or(u32::MAX);
                    next = e.due + period.saturating_mul(skip.saturating_add(1));
                }
                // The task lives on while the tick waits: the next fire skips if it still waits.
                e.due = next;
                Some(next)
            }
        }
    }

    /// A queued tick of `name` starts: `false` when its timer was cancelled (or replaced) since
    /// (the tick does not run). A one-shot is gone once its tick starts.
    pub(crate) fn begin_tick(&self, name: &str, id: u64) -> bool {
        let mut s = self.state.lock();
        if s.mode == Mode::Closed {
            return false;
        }
        let Some(e) = s.entries.get_mut(name).filter(|e| e.id == id) else {
            return false;
        };
        e.queued = false;
        if e.kind == TimerKind::Once {
            s.entries.remove(name);
        }
        true
    }
}
