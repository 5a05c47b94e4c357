//! The relocation transfer settings of the root Location options (06 §3) and the payload
//! memory cap (28 §5), validated.

use super::budget::{BudgetScope, InFlightBudget};
use super::error::SettingsError;
use super::memory::PayloadMemory;
use super::wire::CHUNK_HEADER_LEN;

const KIB: usize = 1024;
const MIB: usize = 1024 * 1024;

/// The transport's frame limit: the largest frame body, 16 MiB + 64 KiB. A copy of
/// `zlink_transport::MAX_FRAME_LEN` (fixed, not negotiated; a test pins the two equal).
pub const TRANSPORT_FRAME_LIMIT: usize = 16 * MIB + 64 * KIB;

/// The part of a frame kept for the transport envelope around a chunk: 64 KiB. The largest
/// envelope header (ids, generation, routing id, address, packet name, content type and up to
/// 8 KiB of metadata) is under 10 KiB; the transport sizes its frame limit so that a 16 MiB
/// payload plus any envelope fits.
pub const ENVELOPE_ALLOWANCE: usize = 64 * KIB;

/// The largest chunk limit: [`TRANSPORT_FRAME_LIMIT`] − [`ENVELOPE_ALLOWANCE`] = 16 MiB.
pub const MAX_CHUNK_LIMIT: usize = TRANSPORT_FRAME_LIMIT - ENVELOPE_ALLOWANCE;

/// The smallest chunk limit: the 46-byte chunk header plus one data byte.
pub const MIN_CHUNK_LIMIT: usize = CHUNK_HEADER_LEN + 1;

/// `RelocationPayloadChunkLimit` default: 256 KiB.
pub const DEFAULT_CHUNK_LIMIT: usize = 256 * KIB;

/// `RelocationInFlightPayloadBudget` default: 16 MiB per peer connection.
pub const DEFAULT_PEER_IN_FLIGHT_BUDGET: u64 = 16 * MIB as u64;

/// `RelocationNodeInFlightPayloadBudget` default: 0, not applied.
pub const DEFAULT_NODE_IN_FLIGHT_BUDGET: u64 = 0;

/// `MaxRelocationPayloadInFlightBytes` default: 256 MiB of encoded payload per process.
pub const DEFAULT_PAYLOAD_MEMORY_CAP: u64 = 256 * MIB as u64;

/// `RelocationPayloadChunkLimit`: the cap on one **encoded** chunk (header and data), as 06 §3
/// words it, in `MIN_CHUNK_LIMIT..=MAX_CHUNK_LIMIT`. A chunk then carries at most
/// [`data_len`](Self::data_len) payload bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ChunkLimit(usize);

impl ChunkLimit {
    /// A limit of `bytes`; above 16 MiB (the transport frame limit minus the envelope
    /// allowance) or below 47 bytes is [`SettingsError::ChunkLimit`].
    pub fn new(bytes: usize) -> Result<Self, SettingsError> {
        if (MIN_CHUNK_LIMIT..=MAX_CHUNK_LIMIT).contains(&bytes) {
            Ok(ChunkLimit(bytes))
        } else {
            Err(SettingsError::ChunkLimit {
                actual: bytes,
                min: MIN_CHUNK_LIMIT,
                max: MAX_CHUNK_LIMIT,
            })
        }
    }

    /// The limit on one encoded chunk.
    pub fn get(&self) -> usize {
        self.0
    }

    /// The most payload bytes one chunk carries under this limit (limit − 46).
    pub fn data_len(&self) -> usize {
        self.0 - CHUNK_HEADER_LEN
    }
}

impl Default for ChunkLimit {
    fn default() -> Self {
        ChunkLimit(DEFAULT_CHUNK_LIMIT)
    }
}

/// The direct-transfer settings, validated. Startup-only: the runtime does not tune them by
/// observing round-trip time or load (06 §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TransferSettings {
    chunk_limit: ChunkLimit,
    peer_in_flight_budget: u64,
    node_in_flight_budget: u64,
    payload_memory_cap: u64,
}

impl Default for TransferSettings {
    fn default() -> Self {
        TransferSettings {
            chunk_limit: ChunkLimit::default(),
            peer_in_flight_budget: DEFAULT_PEER_IN_FLIGHT_BUDGET,
            node_in_flight_budget: DEFAULT_NODE_IN_FLIGHT_BUDGET,
            payload_memory_cap: DEFAULT_PAYLOAD_MEMORY_CAP,
        }
    }
}

impl TransferSettings {
    /// All four settings at once: chunk limit (see [`ChunkLimit::new`]), per-connection and
    /// per-node in-flight budgets (any value; `0` = not applied) and the payload memory cap
    /// (positive).
    pub fn new(
        chunk_limit: usize,
        peer_in_flight_budget: u64,
        node_in_flight_budget: u64,
        payload_memory_cap: u64,
    ) -> Result<Self, SettingsError> {
        TransferSettings::default()
            .with_chunk_limit(chunk_limit)?
            .with_peer_in_flight_budget(peer_in_flight_budget)
            .with_node_in_flight_budget(node_in_flight_budget)
            .with_payload_memory_cap(payload_memory_cap)
    }

    /// Sets `RelocationPayloadChunkLimit`; out of range is an error and nothing changes.
    pub fn with_chunk_limit(mut self, bytes: usize) -> Result<Self, SettingsError> {
        self.chunk_limit = ChunkLimit::new(bytes)?;
        Ok(self)
    }

    /// Sets `RelocationInFlightPayloadBudget` (per peer connection; `0` = not applied).
    pub fn with_peer_in_flight_budget(mut self, bytes: u64) -> Self {
        self.peer_in_flight_budget = bytes;
        self
    }

    /// Sets `RelocationNodeInFlightPayloadBudget` (whole source node; `0` = not applied).
    pub fn with_node_in_flight_budget(mut self, bytes: u64) -> Self {
        self.node_in_flight_budget = bytes;
        self
    }

    /// Sets `MaxRelocationPayloadInFlightBytes`; zero is an error and nothing changes.
    pub fn with_payload_memory_cap(mut self, bytes: u64) -> Result<Self, SettingsError> {
        if bytes == 0 {
            return Err(SettingsError::ZeroPayloadMemoryCap);
        }
        self.payload_memory_cap = bytes;
        Ok(self)
    }

    /// The chunk limit.
    pub fn chunk_limit(&self) -> ChunkLimit {
        self.chunk_limit
    }

    /// The per-connection in-flight budget (`0` = not applied).
    pub fn peer_in_flight_budget(&self) -> u64 {
        self.peer_in_flight_budget
    }

    /// The per-node in-flight budget (`0` = not applied).
    pub fn node_in_flight_budget(&self) -> u64 {
        self.node_in_flight_budget
    }

    /// The payload memory cap.
    pub fn payload_memory_cap(&self) -> u64 {
        self.payload_memory_cap
    }

    /// A fresh budget for one peer connection.
    pub fn new_peer_budget(&self) -> InFlightBudget {
        InFlightBudget::new(BudgetScope::PeerConnection, self.peer_in_flight_budget)
    }

    /// The node budget (create one per node and share it across its connections).
    pub fn new_node_budget(&self) -> InFlightBudget {
        InFlightBudget::new(BudgetScope::Node, self.node_in_flight_budget)
    }

    /// The process's payload memory accounting (create one per process).
    pub fn new_payload_memory(&self) -> PayloadMemory {
        PayloadMemory::with_cap(self.payload_memory_cap)
    }
}
