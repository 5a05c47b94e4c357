//! The writer of one completion log: stores each result (a blob), records it in the
//! Location Store and delivers it to its requester, in batches (module doc of `completion`).

use super::delivery::deliver_one;
use super::*;
use crate::relocation::MovesOf;

/// The writer of one log: stores, records and delivers the results as they come, in batches
/// (results completing while a batch is written go into the next one), then records
/// `completed` (module doc).
pub(super) async fn write_and_deliver(host: Arc<ObjectHost>, node: Arc<NodeInner>, log: Arc<Log>) {
    let Some(store) = host.instances.relocation_store() else {
        tracing::error!(
            relocation = log.relocation,
            "no Relocation Store: completion results cannot be stored"
        );
        return;
    };
    let layer = BlobLayer::new(store);
    let mut w = Writer {
        host: &host,
        node: &node,
        log: &log,
        layer,
        stored: 0,
        sequence: 0,
        previous: None,
        recording: true,
    };
    let lost = w.run().await;
    let (entries, confirmations) = {
        let mut s = log.state.lock();
        s.writing = false;
        // A log that ended early (`ended`, set when it ended) answers every later result with
        // its typed error, never directly (module doc).
        (s.entries.clone(), s.confirmations.clone())
    };
    host.relocations()
        .completions
        .logs
        .lock()
        .remove(&(log.relocation, log.key.clone()));
    if !lost {
        w.finish(entries.len()).await;
    }
    host.relocations()
        .completions
        .probe
        .log_ended(log.relocation, entries, confirmations);
}

/// How a record write of the progress ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Recorded {
    /// It applied.
    Applied,
    /// The record moved on (another owner or move's progress, or gone): this move is stale
    /// (21 §10); nothing more is recorded.
    MovedOn,
    /// The Store did not take it by the bound (whether the last CAS applied is unknown).
    Unconfirmed,
}

/// Why a batch's payload was not stored and verified.
enum Unstored {
    /// It was stored but is missing or does not verify when read back (`DataLost`).
    Lost(&'static str),
    /// The Relocation Store did not take it or give it back before the move's bound.
    Bound,
}

pub(super) struct Writer<'a> {
    host: &'a Arc<ObjectHost>,
    node: &'a Arc<NodeInner>,
    log: &'a Arc<Log>,
    layer: BlobLayer<dyn DynRelocationStore>,
    /// Entries already in a stored payload (and delivered).
    stored: usize,
    sequence: u64,
    /// The payload the record points at now.
    previous: Option<BlobRef>,
    /// The record still names this move's progress.
    recording: bool,
}

impl Writer<'_> {
    /// Batches until every accepted request has its result delivered; true when the log
    /// ended early: a stored payload was lost (DataLost recorded), the results could not be
    /// stored and recorded before the move's bound (answered `DeadlineExceeded`), or the record
    /// moved on (answered `DataLost`).
    async fn run(&mut self) -> bool {
        loop {
            let (all, accepted) = {
                let s = self.log.state.lock();
                (s.entries.clone(), s.accepted)
            };
            if all.len() == self.stored {
                if all.len() as u64 >= u64::from(accepted) {
                    return false;
                }
                // More results are to come: wait for the next one (a handler still runs).
                self.log.wake.notified().await;
                continue;
            }
            let n = all.len();
            let until = self.bound();
            let payload = encode_entries(self.log.relocation, &all);
            self.sequence += 1;
            let reference = match BlobRef::new(format!(
                "zlink-completion/{:032x}/{}",
                self.log.relocation, self.sequence
            )) {
                Ok(r) => r,
                Err(e) => {
                    tracing::error!(error = %e, "completion payload reference refused");
                    return false;
                }
            };
            let fresh: Vec<usize> = (self.stored..n).collect();
            // 21 §10: stored first and re-verified; only then the CAS; only then delivered.
            let (unit, stored) = match self.store_verified(&reference, &payload, n, until).await {
                Ok(verified) => verified,
                Err(Unstored::Lost(why)) => {
                    self.data_lost(&fresh, &all, why).await;
                    return true;
                }
                Err(Unstored::Bound) => {
                    self.end_early(&fresh, &all, Confirmation::DeadlineExceeded)
                        .await;
                    return true;
                }
            };
            let pending = self.pending_after(n);
            let mark = json!({
                "stage": "completing",
                "id": self.log.relocation.to_string(),
                "accepted": accepted,
                "completed": n,
                "pending": pending,
                "payload": reference.as_str(),
                "crc32c": format!("{:08x}", unit.crc32c),
                "sha256": hex(&unit.sha256),
            });
            match self.record(mark, until).await {
                Recorded::Applied => {}
                Recorded::MovedOn => {
                    // 21 §10: "A different valid owner or generation ends the stale relocation
                    // immediately": the results are not delivered without their record.
                    tracing::warn!(
                        relocation = self.log.relocation,
                        results = fresh.len(),
                        "the record moved on: the stale relocation's unrecorded results end DataLost"
                    );
                    self.end_early(&fresh, &all, Confirmation::Stale).await;
                    return true;
                }
                Recorded::Unconfirmed => {
                    // Whether the last CAS applied is unknown: the payload is left to its
                    // retention (21 §10), never delivered.
                    self.end_early(&fresh, &all, Confirmation::DeadlineExceeded)
                        .await;
                    return true;
                }
            }
            let completions = &self.host.relocations().completions;
            completions
                .recorded
                .fetch_add(fresh.len() as u64, Ordering::Relaxed);
            if let Some(old) = self.previous.replace(reference.clone()) {
                // The record no longer points at it: its use ended.
                self.delete(&old).await;
            }
            self.deliver(&fresh, &stored).await;
            self.stored = n;
        }
    }

    /// The bound of storing and recording the next batch (module doc): the Restore
    /// operation's absolute deadline, or `storeFailureGrace` from now when it carried none.
    fn bound(&self) -> tokio::time::Instant {
        self.log.deadline.unwrap_or_else(|| {
            tokio::time::Instant::now() + self.host.location.options().store_failure_grace
        })
    }

    /// Deliveries still pending once the first `n` entries are stored (none of the fresh ones
    /// confirmed yet).
    fn pending_after(&self, n: usize) -> usize {
        let s = self.log.state.lock();
        n - s.confirmations[..n].iter().filter(|c| c.is_some()).count()
    }

    /// Stores `payload` (the blob layer reads every chunk back before it writes the index)
    /// and reads the whole of it back, verified, trying again on a store failure or an
    /// indeterminate answer (the same reference, 21 §10) until `until`: its stored unit and
    /// the `n` results as read back.
    async fn store_verified(
        &self,
        reference: &BlobRef,
        payload: &Bytes,
        n: usize,
        until: tokio::time::Instant,
    ) -> Result<(zlink_relocation::blob::StoredUnit, Vec<Entry>), Unstored> {
        let mut pause = Duration::from_millis(20);
        let mut unit = None;
        loop {
            let failed = match &unit {
                None => match self.layer.store(reference, payload).await {
                    Ok(u) => {
                        unit = Some(u);
                        continue;
                    }
                    Err(e) => e,
                },
                Some(u) => match self.layer.restore(reference).await {
                    Ok(restored) => {
                        return match decode_entries(&restored.to_bytes()) {
                            Some((_, stored)) if stored.len() == n => Ok((u.clone(), stored)),
                            _ => Err(Unstored::Lost("the payload does not decode")),
                        };
                    }
                    Err(e) if e.is_data_lost() => {
                        tracing::error!(error = %e, "completion payload lost once stored");
                        return Err(Unstored::Lost("the payload is missing or corrupt"));
                    }
                    Err(e) => e,
                },
            };
            if tokio::time::Instant::now() + pause >= until {
                tracing::error!(
                    error = %failed,
                    relocation = self.log.relocation,
                    "completion results not stored and verified by the move's bound: not delivered"
                );
                return Err(Unstored::Bound);
            }
            tracing::debug!(error = %failed, stored = unit.is_some(), "completion payload not stored or read back: trying again");
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(MAX_BACKOFF);
        }
    }

    async fn delete(&self, reference: &BlobRef) {
        if let Err(e) = self.layer.delete(reference).await {
            tracing::debug!(error = %e, "completion payload not deleted (it expires)");
        }
    }

    /// One Preserve of the object's record setting its relocation progress to `mark`, on
    /// the record as read now, while this node owns it and its progress names this move,
    /// tried again on a store failure until `until` (see [`Recorded`]): once the record moved
    /// on, this move is stale and nothing more is recorded (21 §10).
    async fn record(&mut self, mark: serde_json::Value, until: tokio::time::Instant) -> Recorded {
        if !self.recording {
            return Recorded::MovedOn;
        }
        self.wait_settled().await;
        let authority = self.host.location.authority();
        let id = self.log.relocation.to_string();
        loop {
            let handle = match authority.read(self.log.kind, &self.log.key.1).await {
                Ok(AuthorityRead::Found { handle, .. }) => handle,
                Ok(AuthorityRead::Missing { .. }) => {
                    self.recording = false;
                    return Recorded::MovedOn;
                }
                Err(e) if tokio::time::Instant::now() < until => {
                    tracing::debug!(error = %e, "completion record read failed: trying again");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
                Err(e) => {
                    tracing::error!(error = %e, relocation = self.log.relocation, "completion progress not recorded by the move's bound");
                    return Recorded::Unconfirmed;
                }
            };
            let ours = handle.node().routing_id == self.host.rid && free_for(handle.payload(), &id);
            let Some(payload) = ours
                .then(|| stage::with_mark(&handle, mark.clone()))
                .flatten()
            else {
                tracing::info!(
                    relocation = self.log.relocation,
                    "the record moved on: completion progress no longer recorded"
                );
                self.recording = false;
                return Recorded::MovedOn;
            };
            match authority.preserve(&handle, payload).await {
                Ok(Outcome::Applied(_)) => return Recorded::Applied,
                Ok(Outcome::Conflict(_)) => continue,
                Err(e) if tokio::time::Instant::now() < until => {
                    // Indeterminate: the record is read again (21 §10), the same mark written.
                    tracing::debug!(error = %e, "completion record write failed: trying again");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => {
                    tracing::error!(error = %e, relocation = self.log.relocation, "completion progress not recorded by the move's bound");
                    return Recorded::Unconfirmed;
                }
            }
        }
    }

    /// Waits (at most `storeFailureGrace`) until the move's records name this node.
    async fn wait_settled(&self) {
        let grace = self.host.location.options().store_failure_grace;
        let until = tokio::time::Instant::now() + grace;
        loop {
            let notified = self.log.settle.notified();
            if self.log.state.lock().settled {
                return;
            }
            if tokio::time::timeout_at(until, notified).await.is_err() {
                tracing::warn!(
                    relocation = self.log.relocation,
                    "the move's records did not settle: completion progress recorded anyway"
                );
                return;
            }
        }
    }

    /// Delivers the entries `fresh` (indices) as `source` holds them, concurrently, and
    /// records how each was confirmed.
    async fn deliver(&self, fresh: &[usize], source: &[Entry]) {
        let mut all = tokio::task::JoinSet::new();
        for &i in fresh {
            let Some(entry) = source.get(i).cloned() else {
                continue;
            };
            let (host, node, relocation) = (
                Arc::clone(self.host),
                Arc::clone(self.node),
                self.log.relocation,
            );
            all.spawn(async move { (i, deliver_one(&host, &node, relocation, &entry).await) });
        }
        while let Some(done) = all.join_next().await {
            if let Ok((i, c)) = done {
                self.confirm(i, c);
            }
        }
    }

    fn confirm(&self, i: usize, c: Confirmation) {
        if let Some(slot) = self.log.state.lock().confirmations.get_mut(i) {
            *slot = Some(c);
        }
        self.host.relocations().completions.count(c);
    }

    /// The stored payload is lost: records `dataLost`, answers each requester of the fresh
    /// results `DataLost` (their results are not delivered from memory: the stored payload
    /// is the official one), and so every result the log takes from now on (module doc).
    async fn data_lost(&mut self, fresh: &[usize], all: &[Entry], why: &str) {
        tracing::error!(
            relocation = self.log.relocation,
            why,
            "DataLost: stored completion results are missing or corrupt"
        );
        // The log ends here: results that entered it after this batch was taken end `DataLost`
        // too (no writer is left to take them), and later ones see `ended` and are answered
        // so as they finish — never delivered without a stored record.
        let (fresh, all) = self.ended(fresh, all, Confirmation::DataLost);
        let (accepted, n) = {
            let s = self.log.state.lock();
            (s.accepted, s.entries.len())
        };
        let until = self.bound();
        self.record(
            json!({
                "stage": "dataLost",
                "id": self.log.relocation.to_string(),
                "accepted": accepted,
                "completed": n,
            }),
            until,
        )
        .await;
        let completions = &self.host.relocations().completions;
        completions.probe.data_lost(self.log.relocation).await;
        self.answer_error(&fresh, &all, Confirmation::DataLost)
            .await;
    }

    /// The log ends early as `ending` (`DeadlineExceeded`: the fresh results could not be
    /// stored, verified and recorded before the move's bound; `Stale`: the record moved on):
    /// each requester of the fresh results is answered the ending's error once, never the
    /// unrecorded result, and results finishing later are answered so too (module doc).
    async fn end_early(&mut self, fresh: &[usize], all: &[Entry], ending: Confirmation) {
        let (fresh, all) = self.ended(fresh, all, ending);
        self.answer_error(&fresh, &all, ending).await;
    }

    /// Marks the log ended as `ending` and returns the results to answer so: the fresh ones
    /// (indices into `all`) and those that entered the log after `all` was taken (no writer
    /// is left to take them); later ones see `ended` and are answered as they finish.
    fn ended(
        &self,
        fresh: &[usize],
        all: &[Entry],
        ending: Confirmation,
    ) -> (Vec<usize>, Vec<Entry>) {
        let mut s = self.log.state.lock();
        s.ended = Some(ending);
        let later = all.len()..s.entries.len();
        let fresh: Vec<usize> = fresh.iter().copied().chain(later).collect();
        (fresh, s.entries.clone())
    }

    /// Answers each requester of the results `fresh` (indices into `all`) with the error of
    /// the log's ending `confirmation` instead of its result, and counts each so.
    async fn answer_error(&self, fresh: &[usize], all: &[Entry], confirmation: Confirmation) {
        let error = Bytes::from(ErrorReply::from_error(&ended_error(confirmation)).encode());
        let answers: Vec<Entry> = fresh
            .iter()
            .filter_map(|&i| all.get(i))
            .map(|e| Entry {
                reply: Reply::new(
                    ReplyStatus::Error,
                    e.reply.operation_id(),
                    e.reply.reply_route(),
                    error.clone(),
                ),
                ..e.clone()
            })
            .collect();
        let mut sends = tokio::task::JoinSet::new();
        for (&i, entry) in fresh.iter().zip(answers) {
            let (host, node, relocation) = (
                Arc::clone(self.host),
                Arc::clone(self.node),
                self.log.relocation,
            );
            sends.spawn(async move {
                deliver_one(&host, &node, relocation, &entry).await;
                i
            });
        }
        while let Some(done) = sends.join_next().await {
            if let Ok(i) = done {
                self.confirm(i, confirmation);
            }
        }
    }

    /// Every result delivered: records `completed` when accepted = completed and nothing is
    /// pending, then deletes the payload.
    async fn finish(&mut self, n: usize) {
        let (accepted, pending) = {
            let s = self.log.state.lock();
            (
                s.accepted,
                s.confirmations.iter().filter(|c| c.is_none()).count(),
            )
        };
        if u64::from(accepted) != n as u64 || pending != 0 {
            tracing::error!(
                relocation = self.log.relocation,
                accepted,
                completed = n,
                pending,
                "completion results do not add up: Completed not recorded"
            );
            return;
        }
        let until = self.bound();
        let recorded = self
            .record(
                json!({
                    "stage": "completed",
                    "id": self.log.relocation.to_string(),
                    "accepted": accepted,
                    "completed": n,
                }),
                until,
            )
            .await;
        if recorded == Recorded::Unconfirmed {
            // The record may still point at the payload: it stays for its retention.
            return;
        }
        if let Some(old) = self.previous.take() {
            self.delete(&old).await;
        }
    }
}

/// Whether a record whose payload is `payload` may take the completion progress of the move
/// `id`: its progress names this move, or it names none in progress (no mark — a `SpotWide`
/// member's record —, or a finished one of an earlier move). Another move's stage in
/// progress is never overwritten.
pub(super) fn free_for(payload: &[u8], id: &str) -> bool {
    match stage::mark_of(payload) {
        None => true,
        Some(m) => {
            m.get("id").and_then(|v| v.as_str()) == Some(id)
                || matches!(
                    m.get("stage").and_then(|v| v.as_str()),
                    Some("completed" | "dataLost")
                )
        }
    }
}
