//! The `counter` Actor type of `--objects`: `Incr`, the sequenced `Step` and its `Totals`, and
//! the relocation policy `--relocation` chooses (with a JSON state adapter for `preserve`).

use serde::{Deserialize, Serialize};
use zlink_runtime::Actor;
use zlink_runtime::BoxError;
use zlink_runtime::Message;
use zlink_runtime::Request;
use zlink_runtime::config::ActorType;
use zlink_runtime::relocate::ActorStateAdapter;

/// The registered Actor type of `--objects`.
pub(crate) const COUNTER: &str = "counter";

/// The relocation policy of the counter type (`--relocation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Policy {
    /// `PreserveStateWith` the JSON adapter: the state moves with the Actor.
    Preserve,
    /// `RecreateOnRelocation`: the target starts from the factory.
    Recreate,
    /// `DisableRelocation`: a host Relocate is blocked (the default).
    Disable,
}

impl Policy {
    /// The `--relocation` values.
    pub(crate) const NAMES: [&'static str; 3] = ["preserve", "recreate", "disable"];

    /// The policy named `name` (one of [`NAMES`](Self::NAMES)).
    pub(crate) fn parse(name: &str) -> Option<Policy> {
        match name {
            "preserve" => Some(Policy::Preserve),
            "recreate" => Some(Policy::Recreate),
            "disable" => Some(Policy::Disable),
            _ => None,
        }
    }
}

/// A counter Actor: `Incr` adds one to `n`; `Step {seq}` is checked against the last step.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub(crate) struct Counter {
    /// What `Incr` counts.
    n: u64,
    /// Steps applied (duplicates and gaps included).
    applied: u64,
    /// The sum of the applied steps' `seq`.
    sum: u64,
    /// The last applied `seq` (0: none yet).
    last: u64,
    /// Steps whose `seq` was not above the last one.
    dups: u64,
    /// Steps whose `seq` skipped past the last one + 1.
    gaps: u64,
    /// The ObjectGeneration the factory built this activation for. It is part of the
    /// captured state: a move keeps the incarnation (and its generation), and the probes of
    /// the restored activation report it.
    generation: u64,
    /// A random number naming this activation (drawn by the factory or the first `Probe`).
    #[serde(skip)]
    nonce: u64,
    /// Counts this activation in [`ALIVE`] while it exists (set by the factory or the first
    /// `Probe`).
    #[serde(skip)]
    alive: Option<std::sync::Arc<Alive>>,
}
impl Actor for Counter {}

/// How many counter activations of each id exist in this process now (`LIVE-IDS`, which
/// `cargo xtask faults` reads to find an id live on two nodes).
static ALIVE: std::sync::Mutex<std::collections::BTreeMap<String, u32>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

/// One counter activation of an id, counted in [`ALIVE`] until it is dropped.
#[derive(Debug)]
pub(crate) struct Alive(String);

impl Alive {
    fn new(id: &str) -> std::sync::Arc<Alive> {
        if let Ok(mut alive) = ALIVE.lock() {
            *alive.entry(id.to_owned()).or_default() += 1;
        }
        std::sync::Arc::new(Alive(id.to_owned()))
    }
}

impl Drop for Alive {
    fn drop(&mut self) {
        if let Ok(mut alive) = ALIVE.lock() {
            if let Some(n) = alive.get_mut(&self.0) {
                *n -= 1;
                if *n == 0 {
                    alive.remove(&self.0);
                }
            }
        }
    }
}

/// `LIVE-IDS <id>:<activations>…`: every id with a counter activation in this process.
pub(crate) fn live_ids() -> String {
    let alive = ALIVE.lock().map(|a| a.clone()).unwrap_or_default();
    let mut line = String::from("LIVE-IDS");
    for (id, n) in alive {
        line.push_str(&format!(" {id}:{n}"));
    }
    line
}

impl Counter {
    /// Applies step `seq`, counting a duplicate or a gap.
    fn step(&mut self, seq: u64) {
        if seq <= self.last {
            self.dups += 1;
        } else if seq > self.last + 1 {
            self.gaps += 1;
        }
        self.last = seq;
        self.applied += 1;
        self.sum += seq;
    }
}

/// Adds one to a counter Actor; replies with the new count.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Incr;
impl Message for Incr {
    const PACKET: &'static str = "Incr";
}
impl Request for Incr {
    type Reply = u64;
}

/// Applies step `seq` (adds it to the sum); replies with `seq`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Step {
    /// The step's sequence number (1, 2, … per Actor).
    pub(crate) seq: u64,
}
impl Message for Step {
    const PACKET: &'static str = "Step";
}
impl Request for Step {
    type Reply = u64;
}

/// The counter's step record: `[applied, sum, dups, gaps]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Totals;
impl Message for Totals {
    const PACKET: &'static str = "Totals";
}
impl Request for Totals {
    type Reply = [u64; 4];
}

/// Adds one to a counter Actor like [`Incr`]; replies with who answered (the fault suite's
/// invariant checker reads every reply).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Probe;
impl Message for Probe {
    const PACKET: &'static str = "Probe";
}
impl Request for Probe {
    type Reply = ProbeReply;
}

/// Which process and activation answered a [`Probe`], and the count after it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ProbeReply {
    /// The answering node's routing id (hex).
    pub(crate) node: String,
    /// The activation's ObjectGeneration.
    pub(crate) generation: u64,
    /// The activation's nonce.
    pub(crate) nonce: u64,
    /// The count after this probe.
    pub(crate) count: u64,
    /// How long after its node's admission deadline (21 §5) the handler started, in
    /// milliseconds, as the node's own lease state said at the handler's first step; 0 when
    /// the deadline was ahead.
    pub(crate) late_ms: u64,
}

/// What the counter's handlers know of the node that runs them, set once the root started.
#[derive(Default)]
pub(crate) struct Serving {
    /// The node's routing id (hex).
    pub(crate) rid: std::sync::OnceLock<String>,
    /// The running host, for its owner lease's state. (The host holds the handler that holds
    /// this clone: the host lives until the process ends, which is what this example wants.)
    pub(crate) host: std::sync::OnceLock<zlink_runtime::ZLinkHost>,
}

impl Serving {
    /// How long ago the node's admission deadline passed, in milliseconds (0: not passed).
    fn late_ms(&self) -> u64 {
        self.host
            .get()
            .and_then(|h| h.location_health())
            .and_then(|h| h.owner_lease.admission_deadline_passed_for)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }
}

/// Captures and restores the whole counter as JSON.
struct Json;
impl ActorStateAdapter<Counter> for Json {
    fn capture(&self, c: &Counter) -> Result<Vec<u8>, BoxError> {
        Ok(serde_json::to_vec(c)?)
    }
    fn restore(&self, bytes: &[u8]) -> Result<Counter, BoxError> {
        Ok(serde_json::from_slice(bytes)?)
    }
}

/// The counter type's registration under `policy`.
pub(crate) fn counter_type(
    policy: Policy,
    serving: std::sync::Arc<Serving>,
) -> impl FnOnce(ActorType<Counter>) -> ActorType<Counter> {
    move |t| {
        let t = t
            .factory(|ctx| async move {
                Ok(Counter {
                    generation: ctx.generation,
                    nonce: fresh_nonce(),
                    alive: Some(Alive::new(&ctx.id)),
                    ..Counter::default()
                })
            })
            .on_request::<Probe, _>(move |c, _probe, ctx| {
                // The handler's first step: the gate admitted it just before (21 §5).
                let late_ms = serving.late_ms();
                let node = serving.rid.get().cloned().unwrap_or_default();
                if c.alive.is_none() {
                    // Restored by a relocation: counted from its first probe.
                    c.alive = Some(Alive::new(&ctx.id));
                }
                Box::pin(async move {
                    if c.nonce == 0 {
                        c.nonce = fresh_nonce();
                    }
                    c.n += 1;
                    Ok(ProbeReply {
                        node,
                        generation: c.generation,
                        nonce: c.nonce,
                        count: c.n,
                        late_ms,
                    })
                })
            })
            .on_request::<Incr, _>(|c, _incr, _ctx| {
                Box::pin(async move {
                    c.n += 1;
                    Ok(c.n)
                })
            })
            .on_request::<Step, _>(|c, step, _ctx| {
                Box::pin(async move {
                    c.step(step.seq);
                    Ok(step.seq)
                })
            })
            .on_request::<Totals, _>(|c, _totals, _ctx| {
                Box::pin(async move { Ok([c.applied, c.sum, c.dups, c.gaps]) })
            });
        match policy {
            Policy::Preserve => t.preserve_state_with(Json),
            Policy::Recreate => t.recreate_on_relocation(),
            Policy::Disable => t.disable_relocation(),
        }
    }
}

/// A random, non-zero activation nonce.
fn fresh_nonce() -> u64 {
    (uuid::Uuid::new_v4().as_u128() as u64).max(1)
}
