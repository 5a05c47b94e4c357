#![doc = include_str!("../README.md")]

pub mod blob;
pub mod inventory;

pub use blob::{
    BlobArgumentError, BlobError, BlobLayer, BlobLayerConfig, DataLost, DeletedUnit, RenewedUnit,
    RestoredUnit, StoredUnit, TransferBudget,
};
pub use inventory::{
    Inventory, InventoryBuilder, InventoryEntry, InventoryError, InventoryErrorKind, InventoryRoot,
    TargetListChecksum, VerifiedInventory, target_list_checksum,
};
