#![doc = include_str!("../README.md")]

pub mod blob;
pub mod inventory;
pub mod transfer;
pub mod unit;

pub use blob::{
    BlobArgumentError, BlobError, BlobErrorKind, BlobLayer, BlobLayerConfig, DataLost, DeletedUnit,
    RenewedUnit, RestoredUnit, StoredUnit, TransferBudget,
};
pub use inventory::{
    Inventory, InventoryBuilder, InventoryEntry, InventoryError, InventoryErrorKind, InventoryRoot,
    TargetListChecksum, VerifiedInventory, target_list_checksum,
};
pub use transfer::{
    Assembly, ChunkLimit, InFlightBudget, PayloadChunk, PayloadMemory, RestoreHeader, SourceFence,
    TransferBinding, TransferSettings, chunk_payload,
};
pub use unit::{
    Effect, Event, MovePlan, Policy, RelocationId, ReservationId, Stage, TargetAttemptGeneration,
    TransitionError, Unit, UnitKind,
};
