//! The aggregate member Actor the SpotWide and PerActor suites share: it keeps per-stream
//! sequence numbers (its state moves with [`MemberAdapter`]) and answers [`Step`] and
//! [`Totals`].

use serde::{Deserialize, Serialize};

use super::{Step, Totals};
use crate::messaging::BoxError;
use crate::objects::{Actor, ActorStateAdapter, ActorType};

/// A member keeping per-stream sequence numbers.
#[derive(Default, Serialize, Deserialize)]
pub(super) struct Member {
    pub(super) applied: u64,
    pub(super) total: u64,
    pub(super) out_of_order: u64,
    last: std::collections::BTreeMap<u32, u64>,
}
impl Actor for Member {}

/// The member adapter; on a node that `refuses`, every restore fails.
pub(super) struct MemberAdapter {
    pub(super) refuses: bool,
}
impl ActorStateAdapter<Member> for MemberAdapter {
    fn capture(&self, m: &Member) -> Result<Vec<u8>, BoxError> {
        Ok(serde_json::to_vec(m)?)
    }
    fn restore(&self, bytes: &[u8]) -> Result<Member, BoxError> {
        if self.refuses {
            return Err("restore refused by the test".into());
        }
        Ok(serde_json::from_slice(bytes)?)
    }
}

/// The `member` type: created empty, moved by a [`MemberAdapter`] that `refuses` or not,
/// applying [`Step`]s (counting one that does not follow its stream's last) and answering
/// [`Totals`] as (total, applied, out-of-order).
pub(super) fn member_type(t: ActorType<Member>, refuses: bool) -> ActorType<Member> {
    t.factory(|_ctx| async { Ok(Member::default()) })
        .preserve_state_with(MemberAdapter { refuses })
        .on_request::<Step, _>(|m, step, _ctx| {
            let last = m.last.entry(step.stream).or_insert(0);
            if step.seq != *last + 1 {
                m.out_of_order += 1;
            }
            *last = step.seq;
            m.total += step.seq;
            m.applied += 1;
            let seq = step.seq;
            Box::pin(async move { Ok(seq) })
        })
        .on_request::<Totals, _>(|m, _t, _ctx| {
            let t = (m.total, m.applied, m.out_of_order);
            Box::pin(async move { Ok(t) })
        })
}
