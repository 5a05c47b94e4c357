//! The lease rows the runtime has seen (its own, and the ones authority batches condition on).

use parking_lot::Mutex;
use zlink_codec::records::OwnerLeaseRecord;
use zlink_store_spi::entropy::HashMap;
use zlink_store_spi::{ReadResult, StoreKey, StoreVersion};

use super::super::generation::OwnerLeaseGeneration;
use super::super::identity::HostRun;

/// What the runtime last saw of one owner lease row: who holds it and under which version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseSeen {
    /// The holder, `None` if the row was missing (or expired).
    pub holder: Option<HostRun>,
    /// The row's version (with `holder`).
    pub version: Option<StoreVersion>,
}

impl LeaseSeen {
    /// From an exact read of a lease row; an undecodable row counts as held by nobody valid.
    pub fn from_read(read: &ReadResult) -> Self {
        match read {
            ReadResult::Missing { .. } => LeaseSeen {
                holder: None,
                version: None,
            },
            ReadResult::Found { bytes, version, .. } => {
                let holder = OwnerLeaseRecord::decode(bytes).ok().and_then(|r| {
                    OwnerLeaseGeneration::new(r.lease_generation.get()).map(|g| HostRun {
                        owner_id: r.owner_id,
                        lease_generation: g,
                    })
                });
                LeaseSeen {
                    holder,
                    version: Some(version.clone()),
                }
            }
        }
    }

    /// Whether the row is held by exactly `run`.
    pub fn held_by(&self, run: &HostRun) -> bool {
        self.holder.as_ref() == Some(run) && self.version.is_some()
    }
}

/// The lease rows the runtime has seen, shared by the lease manager (which updates its own row
/// after every renew) and the authority batches (which condition on lease versions).
#[derive(Debug, Default)]
pub struct LeaseBook {
    rows: Mutex<HashMap<StoreKey, LeaseSeen>>,
}

impl LeaseBook {
    /// Whether the row was last seen held by exactly `run` (no copy made).
    pub fn held_by(&self, key: &StoreKey, run: &HostRun) -> bool {
        self.rows.lock().get(key).is_some_and(|s| s.held_by(run))
    }

    /// Whether anything is known of the row.
    pub fn knows(&self, key: &StoreKey) -> bool {
        self.rows.lock().contains_key(key)
    }

    /// The version the row was last seen with.
    pub fn version(&self, key: &StoreKey) -> Option<StoreVersion> {
        self.rows.lock().get(key).and_then(|s| s.version.clone())
    }

    pub fn set(&self, key: StoreKey, seen: LeaseSeen) {
        self.rows.lock().insert(key, seen);
    }

    pub fn forget(&self, key: &StoreKey) {
        self.rows.lock().remove(key);
    }
}
