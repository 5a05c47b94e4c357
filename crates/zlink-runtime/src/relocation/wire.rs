//! The command-plane messages of a live relocation (our commands for spec 21 §1.3 steps 4–6):
//! the Restore declaration (one-way, then its chunks one-way, in order on the same peer
//! connection), the prepare request answered relay-ready, and the cutover request answered
//! when the target's NewOwner committed.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::location::ReservationWire;
use crate::mesh::messaging::{ErrorKind, ZLinkError};

/// The Restore declaration (one-way): what moves and the transfer header.
pub(crate) const RESTORE: &str = "zlink.relocation.restore";
/// One payload chunk (one-way; the body is the chunk's own byte layout).
pub(crate) const CHUNK: &str = "zlink.relocation.chunk";
/// Prepare (request): assemble, verify, build the instance, queue early messages; the reply
/// is relay-ready.
pub(crate) const PREPARE: &str = "zlink.relocation.prepare";
/// Cutover (request): run NewOwner and open dispatch; the reply says it committed.
pub(crate) const CUTOVER: &str = "zlink.relocation.cutover";

/// How the target builds the instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) enum Rebuild {
    /// RecreateOnRelocation: the factory, no payload.
    Recreate,
    /// PreserveStateWith: the factory, then the adapter restores the payload.
    Preserve,
}

/// The body of [`RESTORE`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RestoreCommand {
    /// The transfer header (`RestoreHeader::encode`).
    pub(crate) header: Vec<u8>,
    pub(crate) id: String,
    pub(crate) stable_type: String,
    /// The ObjectGeneration, decimal.
    pub(crate) generation: String,
    pub(crate) rebuild: Rebuild,
    pub(crate) reservation: ReservationWire,
}

/// The body of [`PREPARE`] and [`CUTOVER`]: the move they are for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct MoveRef {
    /// The RelocationId, decimal.
    pub(crate) relocation: String,
}

impl MoveRef {
    pub(crate) fn of(relocation: u128) -> Self {
        Self {
            relocation: relocation.to_string(),
        }
    }

    pub(crate) fn id(&self) -> Result<u128, ZLinkError> {
        self.relocation
            .parse()
            .map_err(|_| protocol("relocationId is not a decimal u128"))
    }
}

pub(crate) fn protocol(what: &str) -> ZLinkError {
    ZLinkError::application(ErrorKind::ProtocolError, what)
}

/// Encodes a JSON body.
pub(crate) fn encode<T: Serialize>(body: &T) -> Result<Bytes, ZLinkError> {
    serde_json::to_vec(body)
        .map(Bytes::from)
        .map_err(|e| ZLinkError::application(ErrorKind::InternalFailure, &e.to_string()))
}

/// Decodes a JSON body.
pub(crate) fn decode<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, ZLinkError> {
    serde_json::from_slice(bytes).map_err(|e| protocol(&e.to_string()))
}
