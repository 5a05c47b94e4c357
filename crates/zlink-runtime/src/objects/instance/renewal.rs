//! Keeps a stored cold-activation envelope alive while it is in use (spec 23: "default
//! retention 24 h per chunk and per index; renew when 12 h remain").
//!
//! An envelope is stored with the node's `coldActivationRetention` before its Reserve, and is in
//! use until the first message's end of use deletes it. A first message that runs longer than
//! the retention (a slow factory or handler, a restore after a crash) must not find its envelope
//! expired under it: a [`Renewal`] renews it by the same retention whenever the time left, by the
//! provider clock, falls to the renew margin — 12 h, or half the retention when that is shorter
//! (a configured retention under 24 h would otherwise be renewed without pause). A failed renew
//! is tried again a little later, within the margin; a renew that finds the envelope gone stops
//! (the loss is the restore's to report: it reads the envelope and answers DataLost). Dropping
//! the `Renewal` ends it.

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::Instant;
use zlink_store_spi::{
    BlobRef, DynRelocationStore, RelocationStore, RenewResult, Retention, StoreTime,
};

/// The time left before expiry at which a payload is renewed, by the spec's default retention.
pub(crate) const RENEW_WHEN_LEFT: Duration = Duration::from_secs(12 * 60 * 60);

/// The time left at which a payload kept for `retention` is renewed: 12 h, or half the
/// retention when that is shorter.
pub(crate) fn renew_margin(retention: Retention) -> Duration {
    RENEW_WHEN_LEFT.min(Duration::from_millis(retention.as_millis() / 2))
}

/// How long after a failed renew it is tried again: an eighth of the margin, between 100 ms
/// and one minute.
fn retry_after(margin: Duration) -> Duration {
    (margin / 8).clamp(Duration::from_millis(100), Duration::from_secs(60))
}

/// The time left between the provider clock `now` and `expires_at`.
pub(crate) fn time_left(expires_at: StoreTime, now: StoreTime) -> Duration {
    Duration::from_millis(expires_at.as_millis().saturating_sub(now.as_millis()))
}

/// Renews one stored payload while held; dropping it stops the renewals.
#[derive(Debug)]
pub(crate) struct Renewal {
    task: JoinHandle<()>,
}

impl Drop for Renewal {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Renewal {
    /// Starts renewing `reference`, stored for `retention`, which has `left` before it expires
    /// by the provider clock.
    pub(crate) fn start(
        store: Arc<dyn DynRelocationStore>,
        reference: BlobRef,
        retention: Retention,
        left: Duration,
    ) -> Self {
        let task = tokio::spawn(renew_while_held(store, reference, retention, left));
        Renewal { task }
    }
}

async fn renew_while_held(
    store: Arc<dyn DynRelocationStore>,
    reference: BlobRef,
    retention: Retention,
    left: Duration,
) {
    let margin = renew_margin(retention);
    let mut due = Instant::now() + left.saturating_sub(margin);
    loop {
        tokio::time::sleep_until(due).await;
        match store.renew(&reference, retention).await {
            Ok(RenewResult::Renewed {
                expires_at,
                store_now,
            }) => {
                let left = time_left(expires_at, store_now);
                tracing::debug!(
                    reference = reference.as_str(),
                    left_ms = left.as_millis() as u64,
                    "cold-activation envelope renewed"
                );
                due = Instant::now() + left.saturating_sub(margin);
            }
            Ok(RenewResult::Missing { .. }) => {
                tracing::error!(
                    reference = reference.as_str(),
                    "the cold-activation envelope expired or was removed while in use"
                );
                return;
            }
            Err(error) => {
                tracing::warn!(reference = reference.as_str(), %error, "renewing the cold-activation envelope failed; trying again");
                due = Instant::now() + retry_after(margin);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zlink_store_spi::memory::{ManualClock, MemoryRelocationStore};
    use zlink_store_spi::{BlobReadResult, Bytes};

    fn retention(ms: u64) -> Retention {
        Retention::new(Duration::from_millis(ms)).expect("a valid retention")
    }

    #[test]
    fn the_renew_margin_is_twelve_hours_at_the_default_retention_and_half_a_shorter_one() {
        let day = retention(24 * 60 * 60 * 1000);
        assert_eq!(renew_margin(day), RENEW_WHEN_LEFT);
        let week = retention(7 * 24 * 60 * 60 * 1000);
        assert_eq!(renew_margin(week), RENEW_WHEN_LEFT);
        assert_eq!(renew_margin(retention(2_000)), Duration::from_secs(1));
    }

    async fn expiry_of(store: &MemoryRelocationStore, reference: &BlobRef) -> Option<u64> {
        match store
            .read(reference)
            .await
            .expect("the memory store answers")
        {
            BlobReadResult::Found { expires_at, .. } => Some(expires_at.as_millis()),
            BlobReadResult::Missing { .. } => None,
        }
    }

    /// Moves the provider clock and tokio's paused clock together, in small steps so the
    /// renewal task runs at its due times.
    async fn advance(clock: &ManualClock, by: Duration) {
        let step = Duration::from_millis(50);
        let mut gone = Duration::ZERO;
        while gone < by {
            clock.advance(step);
            tokio::time::advance(step).await;
            tokio::task::yield_now().await;
            gone += step;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_envelope_in_use_outlives_its_retention_and_expires_once_released() {
        let clock = ManualClock::new(StoreTime::from_millis(1_000_000));
        let store = MemoryRelocationStore::with_clock(Arc::new(clock.clone()));
        let reference = BlobRef::new("cold-activation-v1/test").expect("a valid reference");
        let kept = retention(2_000);
        let put = store
            .put(&reference, &Bytes::from_static(b"first message"), kept)
            .await
            .expect("the memory store answers");
        let zlink_store_spi::PutResult::Stored {
            expires_at,
            store_now,
        } = put
        else {
            panic!("a new blob is stored: {put:?}");
        };
        let shared: Arc<dyn DynRelocationStore> = Arc::new(store.clone());
        let renewal = Renewal::start(
            shared,
            reference.clone(),
            kept,
            time_left(expires_at, store_now),
        );
        // Five retentions later the envelope is still there, its expiry moved forward.
        advance(&clock, Duration::from_millis(10_000)).await;
        let later = expiry_of(&store, &reference).await.expect("still stored");
        assert!(later > expires_at.as_millis() + 8_000, "renewed: {later}");
        // Released: nothing renews it any more and it expires with its retention.
        drop(renewal);
        advance(&clock, Duration::from_millis(2_100)).await;
        assert_eq!(expiry_of(&store, &reference).await, None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_renewal_that_finds_the_envelope_gone_stops() {
        let clock = ManualClock::new(StoreTime::from_millis(1_000_000));
        let store = MemoryRelocationStore::with_clock(Arc::new(clock.clone()));
        let reference = BlobRef::new("cold-activation-v1/gone").expect("a valid reference");
        let shared: Arc<dyn DynRelocationStore> = Arc::new(store.clone());
        let renewal = Renewal::start(shared, reference, retention(2_000), Duration::ZERO);
        advance(&clock, Duration::from_millis(200)).await;
        assert!(renewal.task.is_finished());
    }
}
