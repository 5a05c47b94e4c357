//! The background renew loop of the owner lease (spec 21 §5) and the verification of this
//! host's acknowledged writes after each renew (`written.rs`, `docs/store-epoch.md`).
//!
//! Every renew interval — or at once when a Store data loss is noticed anywhere (a counter
//! read, the lease row, a write verification: [`StoreEpoch::notice_loss`] closes admission
//! and wakes the loop) — one renew bounded by the renew timeout; after `Lost`, a takeover
//! under a new generation. After each successful renew the writes acknowledged before it was
//! sent are read back by a task of their own, so a slow verification never delays a renew; a
//! lost write is noticed as data loss. Both stop when the loop is dropped.

use std::sync::Arc;
use std::time::Duration;

use zlink_store_spi::DynLocationStore;

use super::epoch::StoreEpoch;
use super::health::RenewState;
use super::lease::{OwnerLease, RenewOutcome};
use super::written::{Verdict, WrittenBook};

/// One verification round of the writes acknowledged before `before`: a lost write is noticed
/// as data loss (admission closes now, the renew loop is woken).
pub(crate) async fn verify_round(
    lease: &OwnerLease,
    written: &Arc<WrittenBook>,
    epoch: &StoreEpoch,
    store: &Arc<dyn DynLocationStore>,
    before: u64,
) -> Verdict {
    let verdict = written.verify(store, before).await;
    match &verdict {
        Verdict::Lost { key, why } => {
            tracing::warn!(%key, "Store data loss: {why}; the owner lease is treated as lost");
            epoch.notice_loss();
        }
        Verdict::Held { kept: 0, .. } => lease.verified_before(before),
        Verdict::Held { .. } | Verdict::Stale => {}
    }
    verdict
}

/// The background renew loop (see the module docs).
#[derive(Debug)]
pub(crate) struct RenewLoop {
    task: tokio::task::JoinHandle<()>,
    verifier: Option<tokio::task::JoinHandle<()>>,
}

/// What the renew loop runs with.
pub(crate) struct LoopParts {
    pub(crate) lease: Arc<OwnerLease>,
    pub(crate) health: Arc<RenewState>,
    pub(crate) epoch: Arc<StoreEpoch>,
    pub(crate) written: Arc<WrittenBook>,
    pub(crate) store: Arc<dyn DynLocationStore>,
    pub(crate) interval: Duration,
    pub(crate) timeout: Duration,
}

impl RenewLoop {
    pub(crate) fn spawn(parts: LoopParts) -> Self {
        let LoopParts {
            lease,
            health,
            epoch,
            written,
            store,
            interval,
            timeout,
        } = parts;
        let (due, mut due_rx) = tokio::sync::watch::channel(None::<u64>);
        let verifier = written.enabled().then(|| {
            let (lease, epoch) = (lease.clone(), epoch.clone());
            tokio::spawn(async move {
                while due_rx.changed().await.is_ok() {
                    let Some(before) = *due_rx.borrow_and_update() else {
                        continue;
                    };
                    verify_round(&lease, &written, &epoch, &store, before).await;
                }
            })
        });
        let task = tokio::spawn(async move {
            let mut ticker = tokio::time::interval(interval);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            ticker.tick().await;
            loop {
                tokio::select! {
                    _ = ticker.tick() => {}
                    _ = epoch.loss_noticed() => {}
                }
                match tokio::time::timeout(timeout, lease.renew()).await {
                    Ok(Ok(RenewOutcome::Renewed { .. })) => {
                        health.renewed();
                        if let Some(before) = lease.take_verification() {
                            due.send_replace(Some(before));
                        }
                    }
                    // The host released its lease (shutdown): the loop ends.
                    Ok(Ok(RenewOutcome::Released)) => {
                        health.released();
                        break;
                    }
                    Ok(Ok(RenewOutcome::Lost)) => {
                        match tokio::time::timeout(timeout, lease.take_over()).await {
                            Ok(Ok(None)) => break,
                            Ok(Ok(Some(run))) => {
                                health.taken_over();
                                tracing::warn!(
                                    owner = %run.owner_id,
                                    generation = %run.lease_generation,
                                    "owner lease taken over under a new generation"
                                );
                            }
                            Ok(Err(e)) => {
                                health.takeover_failed();
                                tracing::warn!(error = %e, "owner lease takeover failed")
                            }
                            Err(_) => {
                                health.takeover_failed();
                                tracing::warn!("owner lease takeover timed out")
                            }
                        }
                    }
                    Ok(Err(e)) => {
                        health.failing();
                        tracing::warn!(error = %e, "owner lease renew failed");
                    }
                    Err(_) => {
                        health.failing();
                        tracing::warn!("owner lease renew timed out");
                    }
                }
            }
        });
        RenewLoop { task, verifier }
    }
}

impl Drop for RenewLoop {
    fn drop(&mut self) {
        self.task.abort();
        if let Some(v) = &self.verifier {
            v.abort();
        }
    }
}
