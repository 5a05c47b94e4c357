#![doc = include_str!("../README.md")]

pub mod blob;
pub mod transfer;

pub use blob::{
    BlobArgumentError, BlobError, BlobLayer, BlobLayerConfig, DataLost, DeletedUnit, RenewedUnit,
    RestoredUnit, StoredUnit, TransferBudget,
};
pub use transfer::{
    Assembly, ChunkLimit, InFlightBudget, PayloadChunk, PayloadMemory, RestoreHeader, SourceFence,
    TransferBinding, TransferSettings, chunk_payload,
};
