//! The lease check of a discovery list: every listed host's owner lease row read once, all in
//! batched reads of at most `MAX_READ_MANY_KEYS` rows (one Store call for a mesh of up to
//! 1,000 hosts), and only the nodes whose row holds exactly their run kept.

use std::time::Duration;

use zlink_codec::records::MeshNodeRecord;
use zlink_store_spi::entropy::HashMap;
use zlink_store_spi::{LocationStore, MAX_READ_MANY_KEYS, ReadResult, StoreKey, StoreVersion};

use super::{DiscoveredNode, Discovery};
use crate::error::{ContractViolation, LocationError};
use crate::identity::HostRun;
use crate::lease::{LeaseSeen, lease_key};

/// A descriptor whose host's lease is still to be checked.
#[derive(Debug)]
pub(super) struct Unchecked {
    pub(super) record: MeshNodeRecord,
    pub(super) version: StoreVersion,
    pub(super) run: HostRun,
}

impl From<DiscoveredNode> for Unchecked {
    fn from(n: DiscoveredNode) -> Self {
        Unchecked {
            record: n.record,
            version: n.version,
            run: n.run,
        }
    }
}

impl Discovery {
    /// Reads the lease rows of `nodes`' hosts (each row once) and keeps, in order, the nodes
    /// whose row holds exactly their run, with the lease end that read shows; also returns
    /// how many were left out.
    pub(super) async fn leased(
        &self,
        nodes: Vec<Unchecked>,
    ) -> Result<(Vec<DiscoveredNode>, usize), LocationError> {
        // One key per host; `row[i]` is node i's key.
        let mut keys: Vec<StoreKey> = Vec::new();
        let mut slot: HashMap<StoreKey, usize> = HashMap::default();
        let mut row = Vec::with_capacity(nodes.len());
        for n in &nodes {
            let key = lease_key(&n.run.owner_id)?;
            let i = *slot.entry(key).or_insert_with_key(|k| {
                keys.push(k.clone());
                keys.len() - 1
            });
            row.push(i);
        }
        // Each row as read, with the monotonic time taken before its batch was sent.
        let mut reads: Vec<(Duration, ReadResult)> = Vec::with_capacity(keys.len());
        for chunk in keys.chunks(MAX_READ_MANY_KEYS) {
            let t0 = self.clock.now();
            let answers = self.store.read_many(chunk).await?;
            if answers.len() != chunk.len() {
                return Err(LocationError::StoreContract(
                    ContractViolation::ReadManyCount,
                ));
            }
            reads.extend(answers.into_iter().map(|r| (t0, r)));
        }
        let seen: Vec<LeaseSeen> = reads.iter().map(|(_, r)| LeaseSeen::from_read(r)).collect();
        let mut kept = Vec::with_capacity(nodes.len());
        let mut excluded = 0;
        for (n, i) in nodes.into_iter().zip(row) {
            if !seen[i].held_by(&n.run) {
                excluded += 1;
                continue;
            }
            let (lease_until, lease_expires_at) = match &reads[i] {
                (
                    t0,
                    ReadResult::Found {
                        expires_at: Some(expires_at),
                        store_now,
                        ..
                    },
                ) => (
                    Some(*t0 + Duration::from_millis(store_now.millis_until(*expires_at))),
                    Some(*expires_at),
                ),
                _ => (None, None),
            };
            kept.push(DiscoveredNode {
                record: n.record,
                version: n.version,
                run: n.run,
                lease_until,
                lease_expires_at,
            });
        }
        Ok((kept, excluded))
    }
}
