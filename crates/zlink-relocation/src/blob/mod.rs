//! The chunked blob layer over any Relocation Store: envelopes, leading index, stripes,
//! parallel transfer under a byte budget, whole-or-nothing restore.

mod config;
mod error;
mod format;
mod layer;
mod plan;

pub use config::{BlobLayerConfig, TransferBudget};
pub use error::{
    BlobArgumentError, BlobError, BlobErrorKind, DataLost, EnvelopeError, IndexFormatError,
};
pub use format::{
    INDEX_FORMAT_VERSION, MAX_CHUNKS, MAX_INDEX_REF_LEN, MAX_PAYLOAD_LEN, MAX_STRIPES,
};
pub use layer::{BlobLayer, DeletedUnit, RenewedUnit, RestoredUnit, StoredUnit};
pub use plan::{ChunkPlan, StripePlan, UnitPlan};
