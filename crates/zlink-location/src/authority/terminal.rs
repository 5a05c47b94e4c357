//! Creation terminal records (spec 21 §7, 06 §17): the stored final result of one
//! Create/GetOrCreate operation, `creation-operation-terminal-v1`, under the key of the
//! source node RID, the source host run generation and the OperationId. It is written in the
//! same batch as the creation's Ready commit or its abort (never alone), only if no result is
//! stored for that operation yet, and expires 5 minutes after the operation's original
//! deadline by the provider's clock. Only the same source (RID + run generation +
//! OperationId) can name the key, so only the same request reads it back.

use std::time::Duration;

use zlink_codec::terminal::CreationTerminal;
use zlink_codec::{Generation, LogicalKey, OperationId, RoutingId};
use zlink_store_spi::{LocationStore, Mutation, ReadResult, Retention, StoreKey};

use super::AuthorityClient;
use crate::engine::Expect;
use crate::error::{InvalidOperation, LocationError, RecordName};
use crate::keys;

/// How long a terminal record is kept past the operation's original deadline.
pub(super) const TERMINAL_RETENTION_PAST_DEADLINE: Duration = Duration::from_secs(5 * 60);

/// Which operation a terminal record belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperationKey {
    /// The source node's RID.
    pub source: RoutingId,
    /// The source host run's generation (its OwnerLeaseGeneration).
    pub source_run: Generation,
    /// The operation id (non-zero, 128-bit).
    pub operation: OperationId,
}

impl OperationKey {
    fn store_key(&self) -> Result<StoreKey, LocationError> {
        Ok(keys::store_key(&LogicalKey::creation_terminal(
            &self.source,
            self.source_run,
            self.operation,
        ))?)
    }
}

/// One terminal record to write with a commit or an abort.
#[derive(Debug, Clone)]
pub struct TerminalWrite {
    key: StoreKey,
    bytes: Vec<u8>,
    retention: Retention,
}

impl TerminalWrite {
    /// The record of `terminal` for `op`, kept until 5 minutes after `remaining` (the time
    /// left before the operation's original deadline, measured by the caller now).
    pub fn new(
        op: &OperationKey,
        terminal: &CreationTerminal,
        remaining: Duration,
    ) -> Result<Self, LocationError> {
        let bytes = terminal
            .encode()
            .map_err(InvalidOperation::RecordOutOfBounds)?;
        let retention = Retention::new(remaining + TERMINAL_RETENTION_PAST_DEADLINE)?;
        Ok(Self {
            key: op.store_key()?,
            bytes,
            retention,
        })
    }

    /// The conditional row: written only if no result is stored for the operation yet.
    pub fn row(self) -> (StoreKey, Expect, Mutation) {
        let put = Mutation::put_expiring(self.key.clone(), self.bytes, self.retention);
        (self.key, Expect::Missing, put)
    }
}

impl AuthorityClient {
    /// The stored final result of `op`, if one is kept (expired → `None`).
    pub async fn read_terminal(
        &self,
        op: &OperationKey,
    ) -> Result<Option<CreationTerminal>, LocationError> {
        match self.store.read(&op.store_key()?).await? {
            ReadResult::Missing { .. } => Ok(None),
            ReadResult::Found { bytes, .. } => Ok(Some(
                CreationTerminal::decode(&bytes)
                    .map_err(LocationError::decode(RecordName::CreationTerminal))?,
            )),
        }
    }
}
