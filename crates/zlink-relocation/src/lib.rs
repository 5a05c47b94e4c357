#![doc = include_str!("../README.md")]

pub mod blob;

pub use blob::{
    BlobArgumentError, BlobError, BlobLayer, BlobLayerConfig, DataLost, DeletedUnit, RenewedUnit,
    RestoredUnit, StoredUnit, TransferBudget,
};
