//! Rebuilding a node's allocation row from what holds its slots.
//!
//! A node's allocation row (`node-capacity`, runtime-private) moves in the same batch as every
//! record or reservation that secures or returns a slot on it, so it always equals their sum
//! ([`AuthorityClient::node_usage`]). A Store that lost acknowledged writes can break that: a
//! rolled-back Store reissues the versions its lost writes had, and a batch computed from a
//! copy of the row cached before the loss matched again (`docs/store-epoch.md`, "Version
//! reuse"). A row counting fewer slots than its records hold then fails every release past
//! it (`CorruptRecord { NodeCapacity }`), and an owner sweep that hits one would fail for good,
//! leaving the swept run's objects unreachable. The sweep rebuilds such a row and goes once
//! more ([`super::sweep`]).

use zlink_store_spi::{Condition, LocationStore, Mutation, ReadResult, WriteRequest, WriteResult};

use super::super::admission::AdmissionOp;
use super::super::engine::read_counts;
use super::super::error::{InvalidOperation, LocationError, RecordName};
use super::super::identity::NodeKey;
use super::super::keys;
use super::AuthorityClient;

/// Conflicting writes a rebuild tries through before it gives up (`Contended`).
const REBUILD_ATTEMPTS: usize = 3;

impl AuthorityClient {
    /// Sets `node`'s allocation row to the sum of the authority records and relocation
    /// reservations that hold its slots, read from one snapshot taken after the row; the write
    /// is conditioned on the row's version as read first. Every change of a slot on the node
    /// moves the row in its own batch, so a row still at that version means the snapshot
    /// counted what the row should. `true` if the row was rewritten, `false` if it already
    /// held the sum. A row that cannot be decoded is rebuilt the same way. The snapshot is of
    /// every authority and reservation row of the Store (`node_usage`): a repair, run only when
    /// a row was found short, never on the sweep's common path.
    pub(crate) async fn rebuild_node_capacity(
        &self,
        node: &NodeKey,
    ) -> Result<bool, LocationError> {
        let key = keys::node_capacity(node)?;
        for _ in 0..REBUILD_ATTEMPTS {
            // The row as stored (`None`: absent, or bytes that do not decode) and the
            // condition the rewrite goes under.
            let (stored, condition) = match read_counts(self.store.as_ref(), &key).await {
                Ok((row, Some(version))) => (Some(row), Condition::Version(key.clone(), version)),
                Ok((_, None)) => (None, Condition::Missing(key.clone())),
                Err(LocationError::CorruptRecord { .. }) => match self.store.read(&key).await? {
                    ReadResult::Found { version, .. } => {
                        (None, Condition::Version(key.clone(), version))
                    }
                    ReadResult::Missing { .. } => (None, Condition::Missing(key.clone())),
                },
                Err(e) => return Err(e),
            };
            let sum = self.node_usage(node).await?.allocated();
            let holds = match (&stored, &condition) {
                (Some(row), _) => *row == sum,
                (None, Condition::Missing(_)) => sum.is_empty(),
                (None, _) => false,
            };
            if holds {
                return Ok(false);
            }
            tracing::warn!(
                node = %node.routing_id,
                stored = ?stored,
                sum = ?sum,
                "an allocation row disagrees with the records holding its slots; rebuilt from them"
            );
            let mutation = if sum.is_empty() {
                Mutation::Delete(key.clone())
            } else {
                let bytes = sum.encode().map_err(|_| {
                    LocationError::from(InvalidOperation::RowEncoding {
                        record: RecordName::NodeCapacity,
                    })
                })?;
                Mutation::put(key.clone(), bytes)
            };
            let request = WriteRequest::new(vec![condition], vec![mutation])?;
            // A change of the Store like any other: not past this run's admission deadline.
            let _admission = self.gate.admit(AdmissionOp::AuthorityChange)?;
            match self.store.write(&request).await? {
                WriteResult::Applied { .. } => return Ok(true),
                WriteResult::Conflict { .. } => continue,
            }
        }
        Err(LocationError::Contended)
    }
}
