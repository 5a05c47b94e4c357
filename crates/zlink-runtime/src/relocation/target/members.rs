//! After a `SpotWide` aggregate NewOwner: every member's record follows the Spot's new owner
//! (21 §8.2; issue 20 item 5). The aggregate CAS moved the Spot and, through it, every member
//! (members resolve their owner through the Spot's record) and returned every member's
//! capacity on the source, but left the member records naming the source run: until a
//! member's record follows, the allocation rows and the records disagree, and the source's
//! sweeps see a row of theirs. Each follow write is therefore tried again — on a Store failure
//! or a record that changed meanwhile, after a fresh read — until it applies or
//! `storeFailureGrace` has passed; at most 64 members at once. A member whose follow never
//! applied still resolves through the Spot's record, and the sweeps leave it alone
//! (`zlink_location`'s member resolver, `objects::membership::spot_wide_spot`).
//!
//! The follows are bookkeeping, not part of the move's interruption: they run in a task of
//! their own ([`Following`]) started once the group's queues opened, so the cutover is
//! answered (and the source's Relocate returns) without waiting for 10,000 record writes
//! (issue 22). Shutdown waits for them until its deadline, before its self-sweep.

use std::future::Future;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use parking_lot::Mutex;
use tokio::task::JoinSet;
use tokio::time::Instant;
use zlink_codec::ObjectId;
use zlink_codec::keys::AuthorityKind;
use zlink_codec::records::ObjectKind;
use zlink_location::{AuthorityHandle, AuthorityRead, Conflict, LocationError, Outcome};

use super::Hidden;
use crate::objects::host::ObjectHost;

/// Members whose follow writes run at once.
const AT_ONCE: usize = 64;

/// The pause between two attempts at one member's follow write.
const FOLLOW_PAUSE: Duration = Duration::from_millis(50);

/// The member follows running on this node, as a target: one task per committed `SpotWide`
/// move whose members' records are still being rewritten (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct Following {
    tasks: Mutex<JoinSet<()>>,
}

impl Following {
    /// Runs `follows` in a task of its own.
    pub(super) fn spawn(&self, follows: impl Future<Output = ()> + Send + 'static) {
        let mut tasks = self.tasks.lock();
        // Reap the follows that ended, so the set holds only running ones.
        while tasks.try_join_next().is_some() {}
        tasks.spawn(follows);
    }

    /// Waits until no follow runs here; the ones still running at `until` are stopped (their
    /// members keep resolving through the Spot's record). Returns whether every follow ended
    /// by itself.
    pub(crate) async fn finish(&self, until: Instant) -> bool {
        loop {
            let mut running = std::mem::take(&mut *self.tasks.lock());
            if running.is_empty() {
                return true;
            }
            let ended = tokio::time::timeout_at(until, async {
                while running.join_next().await.is_some() {}
            })
            .await;
            if ended.is_err() {
                running.abort_all();
                self.tasks.lock().abort_all();
                return false;
            }
        }
    }
}

/// How one member's follow ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Followed {
    /// Its record names the Spot's owner.
    Yes,
    /// Its record is gone or another incarnation's: not this move's to rewrite.
    NotOurs,
    /// Not applied before the deadline (the Store kept failing), or refused.
    No,
}

/// Every member of `members` (id, ObjectGeneration) follows the Spot's new owner `spot` (see
/// the module docs).
pub(super) async fn follow_owner(host: &ObjectHost, spot: &AuthorityHandle, members: &[Member]) {
    let until = Instant::now() + host.location.options().store_failure_grace;
    let mut running = FuturesUnordered::new();
    let mut failed = 0usize;
    let mut count = |done: Followed| {
        if !matches!(done, Followed::Yes | Followed::NotOurs) {
            failed += 1;
        }
    };
    for (id, generation) in members {
        if running.len() >= AT_ONCE {
            if let Some(done) = running.next().await {
                count(done);
            }
        }
        running.push(follow_one(host, spot, id, *generation, until));
    }
    while let Some(done) = running.next().await {
        count(done);
    }
    if failed > 0 {
        tracing::warn!(
            failed,
            spot = %spot.id().as_str(),
            "SpotWide members whose record did not follow the Spot's owner by the deadline (they resolve through the Spot's record)"
        );
    }
}

/// The members of `group` whose records follow: each member Actor's id and ObjectGeneration.
pub(super) fn members_of(group: &[Hidden]) -> Vec<Member> {
    group
        .iter()
        .filter(|b| b.key.0 == AuthorityKind::Actor)
        .map(|b| (b.key.1.clone(), b.generation))
        .collect()
}

/// A member Actor whose record follows: its id and ObjectGeneration.
pub(super) type Member = (ObjectId, u64);

/// The member `id` (incarnation `generation`) follows `spot`, tried again until `until`.
async fn follow_one(
    host: &ObjectHost,
    spot: &AuthorityHandle,
    id: &ObjectId,
    generation: u64,
    until: Instant,
) -> Followed {
    let authority = host.location.authority();
    let mut attempt = 0u32;
    loop {
        attempt += 1;
        let tried = match authority.read(ObjectKind::Actor, id).await {
            Ok(AuthorityRead::Found { handle, .. })
                if handle.object_generation().get() == generation =>
            {
                authority.follow_spot_owner(&handle, spot).await
            }
            Ok(_) => return Followed::NotOurs,
            Err(e) => Err(e),
        };
        let again = match tried {
            Ok(Outcome::Applied(_)) => return Followed::Yes,
            // The record changed since it was read: read again.
            Ok(Outcome::Conflict(c @ Conflict::Record { .. })) => format!("{c:?}"),
            Ok(Outcome::Conflict(c)) => {
                tracing::warn!(member = %id.as_str(), conflict = ?c, "SpotWide member follow refused");
                return Followed::No;
            }
            Err(e @ (LocationError::Store(_) | LocationError::Contended)) => e.to_string(),
            Err(e) => {
                tracing::warn!(member = %id.as_str(), error = %e, "SpotWide member follow refused");
                return Followed::No;
            }
        };
        if Instant::now() + FOLLOW_PAUSE >= until {
            tracing::warn!(member = %id.as_str(), attempt, why = %again, "SpotWide member follow not applied by the deadline");
            return Followed::No;
        }
        tracing::debug!(member = %id.as_str(), attempt, why = %again, "SpotWide member follow not applied: trying again");
        tokio::time::sleep(FOLLOW_PAUSE).await;
    }
}
