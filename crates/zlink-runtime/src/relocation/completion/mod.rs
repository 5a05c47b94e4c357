//! Completion records (spec 21 §9.3, §9.1 "Completed", §12 "Location Cache And Completion
//! Results"; 23 "Publication order"): requests accepted at the source that finish after the
//! owner changed.
//!
//! A request another node sent to the moving object — one object, or a participant of a
//! `SpotWide` aggregate — and the source held at the seal is relayed to the target
//! (`target/relay.rs`) and runs there after the owner change. Its result is a **completion
//! result** of the move: the target does not answer it on the reply lane but
//!
//! 1. keeps it, in object order (the order the object completed its requests), in the
//!    completion log of the move and object (one per RelocationId and object). The relayed
//!    requests are its *accepted* count (all of them arrive before the cutover on the one
//!    ordered connection);
//! 2. **stores** every result of the log so far as one payload in the Relocation Store
//!    through the [`BlobLayer`] (chunks written and read back, then the index), under a
//!    reference of the move and a sequence number — each result keyed inside by the
//!    RelocationId, its source request information (the requester's node RID and lifecycle
//!    generation, and its host run when the discovery list knows it) and its OperationId,
//!    never inserted twice — and **re-verifies** it: the whole payload (index and chunks) is
//!    read back and checked, and the results delivered are the ones read back;
//! 3. only then (21 §10: "stored first and re-verified. Only afterward does the Location
//!    Store CAS to point at that reference") — once the object's record names this node: at
//!    the owner change, or for a
//!    `SpotWide` member once its record followed the Spot's owner — runs **one Location Store
//!    CAS** (a Preserve of the object's record by its new owner) that sets the record's
//!    relocation progress: `completing` with the payload
//!    reference, its CRC-32C and SHA-256, the accepted, completed and delivery-pending counts;
//!    the payload that record pointed at before is deleted only after this CAS ended its use;
//! 4. **delivers** the new results *from the stored payload* (as read back in step 2) to each
//!    requester as the command `zlink.relocation.completion`, on the current route, until the
//!    requester confirms: `TerminalReceived` (its waiter took this first result) or
//!    `AlreadyTerminal` (the request had already ended: answered, timed out or cancelled) — or
//!    the Location Store confirms that the requester's owner lease ended
//!    (`SourceLeaseExpired`). A connection that closes or comes back is no confirmation: the
//!    delivery is tried again;
//! 5. once accepted = completed and nothing is pending, records **`completed`** (the progress
//!    cleared to the RelocationId and the counts: owner, generations, membership and capacity
//!    untouched) and then deletes the payload. Fewer results than accepted, or pending
//!    deliveries, never record `completed`.
//!
//! A stored payload that is permanently missing or does not verify when it is read back for
//! delivery is **`DataLost`**: the record says `dataLost`, each requester of the lost results
//! is answered `DataLost` (its request ends once), the log ends without `completed`, and the
//! owner never reverts to the source. Results that finish after the log ended so (or while
//! its lost batch is being answered) have no stored record either: their requests end
//! `DataLost` too, once, never delivered unrecorded (21 §10: the stored payload is the
//! official one; nothing is guessed from memory).
//!
//! **No result is delivered without its record.** While the Relocation Store cannot take the
//! payload or give it back (a failure or an indeterminate answer: the same reference is
//! written or read again, 21 §10), or the Location Store cannot take the CAS, the results
//! wait: nothing is delivered. This is tried again until the move's bound: the Restore
//! operation's absolute deadline, which 21 §10 makes the retry deadline of relocation CASes
//! ("A stored payload's retention period isn't used as a separate criterion"; the Store
//! failure grace "doesn't extend the ... relocation deadline"); for a Restore that carried
//! no deadline, `storeFailureGrace` from the batch's first attempt (as the owner change
//! itself, `target/commit.rs`). Once the bound passed, each waiting requester is answered
//! **`DeadlineExceeded`** once ([`ZLinkError::DeadlinePassed`]): 21 §9.3 ends a move whose
//! Relocate deadline passed as `ForceStopped`, whose reason is `DeadlineExceeded` (28 §2), and
//! the result is not `DataLost` (nothing stored was lost; it was never stored) nor
//! `Unavailable` (which says "try again", while the request has already run). The log then
//! ends without `completed` (21 §9.3: the counts do not add up, a recovery error), its
//! requests counted in [`CompletionCounts::deadline_exceeded`]; results that finish later are
//! answered `DeadlineExceeded` too, never delivered unrecorded.
//!
//! Kept explicit: a relayed request whose requester is the target itself completes there at
//! once (`answering_here`: its waiter is local, nothing to deliver); one-way sends have no
//! result to deliver and are not counted; requests the source node itself sent follow after
//! the cutover as its own requests and are answered normally. A log whose move did not commit
//! (the prepared target removed) answers its requests directly. A record CAS that conflicts
//! is tried again on the record as read now while this node owns the object and its progress
//! names this move; once the record names another owner or another move's progress (or it is
//! gone), the relocation is stale and ends at once (21 §10 "A different valid owner or
//! generation ends the stale relocation immediately"): the results it could not record are
//! not delivered — each of their requests, and of the results that finish later, ends once
//! with `DataLost` (`CompletionLost`: the request ran and its result is gone; not
//! `Unavailable`, which would invite running it again), counted in [`CompletionCounts::stale`] — and the
//! log ends without `completed`; the other move's progress is never overwritten.
//! Payloads of a host that stops mid-delivery stay in the
//! Relocation Store for their retention (24 h by default) and are not resumed by another
//! process (21 §9.1).

mod delivery;
mod payload;
mod writer;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use parking_lot::Mutex;
use serde_json::json;
use tokio::sync::Notify;
use zlink_codec::RoutingId;
use zlink_codec::records::ObjectKind;
use zlink_relocation::blob::BlobLayer;
use zlink_store_spi::entropy::HashMap;
use zlink_store_spi::{BlobRef, DynRelocationStore};
use zlink_transport::{Envelope, Reply, ReplyStatus};

use super::stage;
use crate::mesh::node::{NodeInner, ReplyBody, reply_for};
use crate::messaging::{ErrorReply, ZLinkError};
use crate::objects::host::{ObjectHost, ObjectKey};
use crate::objects::live::Completion;
use crate::relocation::MovesOf;
use payload::{decode_entries, encode_entries, hex};
use zlink_location::{AuthorityRead, HostRun, Outcome};

/// The command a target delivers one completion result with; the requester answers
/// [`RECEIVED`] or [`ALREADY`].
pub(crate) const COMPLETION: &str = "zlink.relocation.completion";
/// The requester's answer: its waiter took this first result (`TerminalReceived`).
const RECEIVED: &[u8] = b"received";
/// The requester's answer: the request had already ended (`AlreadyTerminal`).
const ALREADY: &[u8] = b"already";

/// How long one delivery attempt waits for the requester's answer.
const DELIVERY_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest pause between delivery attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(1);
/// The operation a result not stored and recorded by its move's bound names
/// ([`ZLinkError::DeadlinePassed`]).
const NOT_RECORDED: &str = "recording of the relocated request's result";
/// How long results are delivered before the log gives up (the payload's retention: 21 §9.3
/// keeps payload and reply bytes 24 h).
const DELIVERY_WINDOW: Duration = Duration::from_secs(24 * 60 * 60);

/// How one completion result's delivery was confirmed (spec 21 §9.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Confirmation {
    /// The requester took this first result.
    TerminalReceived,
    /// The requester had already ended the request.
    AlreadyTerminal,
    /// The Location Store confirmed that the requester's owner lease ended.
    SourceLeaseExpired,
    /// The stored result was lost (the requester was answered `DataLost`).
    DataLost,
    /// The result could not be stored, verified and recorded before the move's bound (the
    /// requester was answered `DeadlineExceeded`; module doc).
    DeadlineExceeded,
    /// The object's record moved on (another owner, generation or move) before the result was
    /// recorded: the relocation is stale (the requester was answered `DataLost` /
    /// `CompletionLost`; module doc).
    Stale,
}

/// The error a request of a log that ended early as `ended` is answered with (module doc).
fn ended_error(ended: Confirmation) -> ZLinkError {
    match ended {
        Confirmation::DataLost | Confirmation::Stale => ZLinkError::CompletionLost,
        _ => ZLinkError::DeadlinePassed {
            operation: NOT_RECORDED,
        },
    }
}

/// What this host did with completion results of requests relayed to objects that moved to
/// it (spec 21 §9.3): how many it recorded and how each delivery was confirmed
/// (`HostStatus::completions`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CompletionCounts {
    /// Results stored and recorded (each once, in its move's completion log).
    pub recorded: u64,
    /// Deliveries the requester confirmed as the first result it received.
    pub terminal_received: u64,
    /// Deliveries the requester answered as already ended.
    pub already_terminal: u64,
    /// Deliveries ended because the Location Store showed the requester's lease ended.
    pub source_lease_expired: u64,
    /// Results whose stored payload was lost (the requester was answered `DataLost`).
    pub data_lost: u64,
    /// Results not stored, verified and recorded before their move's bound (the requester
    /// was answered `DeadlineExceeded`; never delivered without the record).
    pub deadline_exceeded: u64,
    /// Results whose record moved on (another owner, generation or move) before they were
    /// recorded: the relocation was stale (the requester was answered `DataLost`; never
    /// delivered without the record).
    pub stale: u64,
}

impl std::ops::Add for CompletionCounts {
    type Output = Self;

    /// The sum of two hosts' or nodes' counts.
    fn add(self, other: Self) -> Self {
        Self {
            recorded: self.recorded + other.recorded,
            terminal_received: self.terminal_received + other.terminal_received,
            already_terminal: self.already_terminal + other.already_terminal,
            source_lease_expired: self.source_lease_expired + other.source_lease_expired,
            data_lost: self.data_lost + other.data_lost,
            deadline_exceeded: self.deadline_exceeded + other.deadline_exceeded,
            stale: self.stale + other.stale,
        }
    }
}

/// The completion logs of this node as a relocation target, by RelocationId, and how their
/// deliveries ended.
#[derive(Default)]
pub(crate) struct Completions {
    logs: Mutex<HashMap<(u128, ObjectKey), Arc<Log>>>,
    confirmed: [AtomicU64; 6],
    recorded: AtomicU64,
    /// The observation and fail points tests and the simulation install (disarmed: one
    /// relaxed load per point).
    pub(crate) probe: CompletionProbe,
}

/// A callback run with the RelocationId after a relayed request was accepted.
pub(crate) type AcceptHook = Arc<dyn Fn(u128) + Send + Sync>;

/// A callback run (and waited for) with the RelocationId once a lost log recorded `dataLost`.
pub(crate) type LostHook =
    Arc<dyn Fn(u128) -> crate::messaging::BoxFuture<'static, ()> + Send + Sync>;

/// What the completion logs let a test or the simulation see and pause. Disarmed (the
/// default), nothing is kept and nothing runs.
#[derive(Default)]
pub(crate) struct CompletionProbe {
    /// Whether anything was installed (the disarmed fast path).
    armed: AtomicBool,
    /// The last progress each ended log recorded, kept once [`Self::keep_ended`] was asked.
    ended: Mutex<HashMap<u128, Vec<(Entry, Confirmation)>>>,
    /// Runs with the RelocationId once a lost log recorded `dataLost`, before it answers its
    /// requests (a result can finish right there).
    lost: Mutex<Option<LostHook>>,
    /// Runs with the RelocationId once a relayed request was accepted into its log and the
    /// log map is free again (a `committed` can land right there).
    accept: Mutex<Option<AcceptHook>>,
}

/// What installs and reads (tests today).
#[cfg_attr(
    not(test),
    expect(
        dead_code,
        reason = "installed and read by the completion tests only so far"
    )
)]
impl CompletionProbe {
    /// Keeps, from now on, the last progress of every log that ends.
    pub(crate) fn keep_ended(&self) {
        self.armed.store(true, Ordering::SeqCst);
    }

    /// Installs (or removes) the hook run after a relayed request was accepted.
    pub(crate) fn on_accept(&self, hook: Option<AcceptHook>) {
        *self.accept.lock() = hook;
        self.armed.store(true, Ordering::SeqCst);
    }

    /// Installs (or removes) the hook run once a lost log recorded `dataLost`.
    pub(crate) fn on_data_lost(&self, hook: Option<LostHook>) {
        *self.lost.lock() = hook;
        self.armed.store(true, Ordering::SeqCst);
    }

    /// The progress the ended log `relocation` recorded (empty when none was kept).
    pub(crate) fn ended(&self, relocation: u128) -> Vec<(Entry, Confirmation)> {
        self.ended
            .lock()
            .get(&relocation)
            .cloned()
            .unwrap_or_default()
    }

    /// Whether any log ended since [`Self::keep_ended`].
    pub(crate) fn any_ended(&self) -> bool {
        !self.ended.lock().is_empty()
    }
}

/// The points the completion logs run through.
impl CompletionProbe {
    /// Point: the log `relocation` ended with `entries`, each confirmed as `confirmations`
    /// says (`None`: not confirmed).
    pub(crate) fn log_ended(
        &self,
        relocation: u128,
        entries: Vec<Entry>,
        confirmations: Vec<Option<Confirmation>>,
    ) {
        if !self.armed.load(Ordering::Relaxed) {
            return;
        }
        self.ended.lock().entry(relocation).or_default().extend(
            entries
                .into_iter()
                .zip(confirmations)
                .filter_map(|(e, c)| c.map(|c| (e, c))),
        );
    }

    /// Point: the log `relocation` recorded `dataLost` and answers its requests next.
    pub(crate) async fn data_lost(&self, relocation: u128) {
        if !self.armed.load(Ordering::Relaxed) {
            return;
        }
        let hook = self.lost.lock().clone();
        if let Some(hook) = hook {
            hook(relocation).await;
        }
    }

    /// Point: a relayed request was accepted into the log `relocation`.
    pub(crate) fn accepted(&self, relocation: u128) {
        if !self.armed.load(Ordering::Relaxed) {
            return;
        }
        let hook = self.accept.lock().clone();
        if let Some(hook) = hook {
            hook(relocation);
        }
    }
}

/// One completion result.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    requester: RoutingId,
    requester_generation: u64,
    requester_run: Option<HostRun>,
    reply: Reply,
}

/// One move's completion log.
struct Log {
    relocation: u128,
    key: ObjectKey,
    kind: ObjectKind,
    /// The Restore operation's absolute deadline, when the Restore carried one: the bound of
    /// storing and recording results (module doc).
    deadline: Option<tokio::time::Instant>,
    state: Mutex<LogState>,
    wake: Notify,
    /// Notified once the records of the move's objects name this node (see
    /// [`Completions::settled`]).
    settle: Notify,
}

#[derive(Default)]
struct LogState {
    /// The owner change applied here: results are recorded, not answered directly.
    committed: bool,
    /// The move did not commit: results are answered directly.
    abandoned: bool,
    /// Relayed requests accepted for this move.
    accepted: u32,
    /// Completion results in object order.
    entries: Vec<Entry>,
    /// How each delivered entry was confirmed (`None`: not yet).
    confirmations: Vec<Option<Confirmation>>,
    /// A writer task runs.
    writing: bool,
    /// How the log ended early, if it did — a stored payload was lost (`DataLost`, recorded),
    /// results could not be stored and recorded before the move's bound (`DeadlineExceeded`),
    /// or the record moved on (`Stale`): every later result's request ends so, never
    /// delivered without a stored record (module doc).
    ended: Option<Confirmation>,
    /// The records of the move's objects name this node (a `SpotWide` member's record is
    /// rewritten after the aggregate CAS): the progress may be recorded.
    settled: bool,
}

impl Completions {
    /// Counts one relayed request `request` (from node `from`, the source) for `relocation`
    /// of the object `key` as accepted, and returns its completion: recorded and delivered
    /// once the move committed, answered directly otherwise. `deadline`: the Restore
    /// operation's absolute deadline, if it carried one.
    pub(crate) fn accept(
        &self,
        host: &Arc<ObjectHost>,
        node: &Arc<NodeInner>,
        (relocation, key, kind): (u128, &ObjectKey, ObjectKind),
        deadline: Option<tokio::time::Instant>,
        from: RoutingId,
        request: Envelope,
    ) -> Completion {
        // Counted under the map lock: a `committed` landing right after it keeps the log (it
        // drops logs that accepted nothing). Counted after it, the log could be dropped from
        // the map in between, marked committed: its results were then recorded only once
        // `storeFailureGrace` passed (never settled), past most callers' timeouts.
        let log = {
            let mut logs = self.logs.lock();
            let log = Arc::clone(logs.entry((relocation, key.clone())).or_insert_with(|| {
                Arc::new(Log {
                    relocation,
                    key: key.clone(),
                    kind,
                    deadline,
                    state: Mutex::default(),
                    wake: Notify::new(),
                    settle: Notify::new(),
                })
            }));
            log.state.lock().accepted += 1;
            log
        };
        self.probe.accepted(relocation);
        let requester_run = host.instances.run_of(request.source_rid());
        let (host, node) = (Arc::clone(host), Arc::clone(node));
        Completion::new(move |out| {
            let out = out
                .and_then(|o| o.ok_or_else(|| ZLinkError::NoReply))
                .and_then(|r| r.into_encoded(node.codecs()));
            let direct = {
                let mut s = log.state.lock();
                let direct = s.ended.is_none() && (s.abandoned || !s.committed);
                if direct {
                    // Not a result of the move: no longer counted as accepted by it.
                    s.accepted = s.accepted.saturating_sub(1);
                }
                direct
            };
            if direct {
                crate::mesh::node::answer_request(&node, &from, &request, out);
                return;
            }
            let Some(reply) = reply_for(&request, out) else {
                return;
            };
            let entry = Entry {
                requester: request.source_rid().clone(),
                requester_generation: request.source_generation().get(),
                requester_run,
                reply,
            };
            let spawn = {
                let mut s = log.state.lock();
                if let Some(ended) = s.ended {
                    Err(ended)
                } else {
                    s.entries.push(entry);
                    s.confirmations.push(None);
                    Ok(!std::mem::replace(&mut s.writing, true))
                }
            };
            let spawn = match spawn {
                Ok(spawn) => spawn,
                Err(ended) => {
                    // The log ended early (module doc): this result cannot be recorded either,
                    // and is never delivered unrecorded: its request ends once, with the
                    // log's error.
                    let out = Err(ended_error(ended));
                    crate::mesh::node::answer_request(&node, &from, &request, out);
                    host.relocations().completions.count(ended);
                    return;
                }
            };
            if spawn {
                tokio::spawn(write_and_deliver(host, node, log));
            } else {
                log.wake.notify_one();
            }
        })
    }

    /// The owner change of `relocation` applied on this node: the results of its objects are
    /// recorded (a log that accepted nothing is dropped).
    pub(crate) fn committed(&self, relocation: u128) {
        self.logs.lock().retain(|(r, _), log| {
            if *r != relocation {
                return true;
            }
            let mut s = log.state.lock();
            s.committed = true;
            s.accepted > 0 || !s.entries.is_empty()
        });
    }

    /// The records of `relocation`'s objects name this node now (at the owner change for one
    /// object; once every member record followed the Spot's owner for a `SpotWide` aggregate):
    /// its logs may record their progress.
    pub(crate) fn settled(&self, relocation: u128) {
        for ((r, _), log) in self.logs.lock().iter() {
            if *r == relocation {
                log.state.lock().settled = true;
                log.settle.notify_waiters();
            }
        }
    }

    /// Tests: whether the log of `relocation` and `key` is kept, and its accepted count.
    #[cfg(test)]
    pub(crate) fn accepted(&self, relocation: u128, key: &ObjectKey) -> Option<u32> {
        let logs = self.logs.lock();
        logs.get(&(relocation, key.clone()))
            .map(|log| log.state.lock().accepted)
    }

    /// `relocation` did not commit here: the requests of its objects are answered directly.
    pub(crate) fn abandoned(&self, relocation: u128) {
        self.logs.lock().retain(|(r, _), log| {
            if *r == relocation {
                log.state.lock().abandoned = true;
            }
            *r != relocation
        });
    }

    /// How many deliveries ended each way: (TerminalReceived, AlreadyTerminal,
    /// SourceLeaseExpired, DataLost, DeadlineExceeded, Stale).
    pub(crate) fn confirmations(&self) -> [u64; 6] {
        let c = &self.confirmed;
        [0, 1, 2, 3, 4, 5].map(|i| c[i].load(Ordering::Relaxed))
    }

    /// This node's counts so far.
    pub(crate) fn counts(&self) -> CompletionCounts {
        let [
            terminal_received,
            already_terminal,
            source_lease_expired,
            data_lost,
            deadline_exceeded,
            stale,
        ] = self.confirmations();
        CompletionCounts {
            recorded: self.recorded.load(Ordering::Relaxed),
            terminal_received,
            already_terminal,
            source_lease_expired,
            data_lost,
            deadline_exceeded,
            stale,
        }
    }

    fn count(&self, c: Confirmation) {
        let i = match c {
            Confirmation::TerminalReceived => 0,
            Confirmation::AlreadyTerminal => 1,
            Confirmation::SourceLeaseExpired => 2,
            Confirmation::DataLost => 3,
            Confirmation::DeadlineExceeded => 4,
            Confirmation::Stale => 5,
        };
        self.confirmed[i].fetch_add(1, Ordering::Relaxed);
    }
}

pub(crate) use delivery::delivered;
#[cfg(test)]
pub(crate) use delivery::redeliver;
use writer::write_and_deliver;
