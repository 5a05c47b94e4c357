//! Direct relocation payload transfer (spec 21 §1.3 steps 4–5, §9.1, §9.2, §9.4; 06 §3;
//! 28 §5): the source splits the handoff payload it keeps in memory into chunks and sends them
//! straight to the target over the mesh; the target assembles them and verifies the whole
//! payload before anything is restored. The payload never goes through any Store.
//!
//! This module is pure (no network): it defines the command-plane messages ([`RestoreHeader`],
//! [`PayloadChunk`]) and their byte layouts, the sender-side split ([`chunk_payload`]), the
//! target-side [`Assembly`], the transfer settings ([`TransferSettings`]), the per-connection
//! and per-node in-flight budgets ([`InFlightBudget`]) and the process-wide payload memory
//! accounting ([`PayloadMemory`]). The runtime carries the messages and owns the timing.

mod assembly;
mod binding;
mod budget;
mod error;
mod memory;
mod sender;
mod settings;
mod wire;

#[cfg(test)]
mod tests;

pub use assembly::{Assembly, AssemblyStatus, CancelledAssembly, ChunkOutcome, RestoreOutcome};
pub use binding::{MAX_FENCE_GENERATION, SourceFence, TransferBinding};
pub use budget::{BudgetScope, InFlightBudget, InFlightPermit};
pub use error::{
    AssemblyError, BindingError, BudgetError, ChunkingError, FenceField, FormatError,
    PayloadMemoryError, SettingsError, TransferErrorKind,
};
pub use memory::{
    MAX_ADAPTER_STATE_LEN, PayloadClaim, PayloadMemory, PayloadMemoryPermit, PayloadUnit,
    check_adapter_output,
};
pub use sender::{PayloadChunks, chunk_payload};
pub use settings::{
    ChunkLimit, DEFAULT_CHUNK_LIMIT, DEFAULT_NODE_IN_FLIGHT_BUDGET, DEFAULT_PAYLOAD_MEMORY_CAP,
    DEFAULT_PEER_IN_FLIGHT_BUDGET, ENVELOPE_ALLOWANCE, MAX_CHUNK_LIMIT, MIN_CHUNK_LIMIT,
    TRANSPORT_FRAME_LIMIT, TransferSettings,
};
pub use wire::{
    CHUNK_HEADER_LEN, MAX_CHUNK_DATA_LEN, MAX_RESTORE_PAYLOAD_LEN, PayloadChunk,
    RESTORE_HEADER_LEN, RestoreHeader, RestoreShape, TRANSFER_FORMAT_VERSION,
};
