//! A read-only view of the Location Store for operational tools (spec 21 §7.4): lookup by id,
//! the paged list and the nodes' capacity rows, without an owner lease. Starting one writes
//! nothing; its admission gate never opens, so no authority write can pass through it.

use std::sync::Arc;

use zlink_store_spi::DynLocationStore;

use super::admission::AdmissionGate;
use super::authority::AuthorityClient;
use super::capacity::{CapacityRow, NodeUsage};
use super::clock::{SharedClock, SystemMonotonic};
use super::engine::{Engine, EngineConfig};
use super::epoch::StoreEpoch;
use super::error::LocationError;
use super::identity::{NodeKey, ObjectId};
use super::lease::LeaseBook;
use super::options::LocationOptions;
use super::query::{ListFilter, LocationEntry, LookupKind, Page, PageToken, Query};

/// Lookup and list over a Location Store, holding no owner lease and writing nothing: what an
/// operator tool uses instead of a [`LocationRuntime`](crate::LocationRuntime).
#[derive(Debug)]
pub struct LocationReader {
    store: Arc<dyn DynLocationStore>,
    authority: AuthorityClient,
}

impl LocationReader {
    /// A reader over `store`; `options` are validated (their lease timing decides nothing
    /// here, but an invalid set is still an error).
    pub fn new(
        store: Arc<dyn DynLocationStore>,
        options: &LocationOptions,
    ) -> Result<Self, LocationError> {
        options.validate()?;
        let clock: SharedClock = Arc::new(SystemMonotonic::new());
        let gate = Arc::new(AdmissionGate::new(
            clock,
            options.owner_lease_fencing_margin,
        ));
        let book = Arc::new(LeaseBook::default());
        let epoch = Arc::new(StoreEpoch::default());
        let engine = Engine::start(
            store.clone(),
            gate.clone(),
            book,
            epoch.clone(),
            EngineConfig::default(),
        )?;
        let authority = AuthorityClient::new(store.clone(), gate, engine, epoch);
        Ok(Self { store, authority })
    }

    /// The location of one ActorId or SpotId (see
    /// [`LocationRuntime::lookup`](crate::LocationRuntime::lookup)); `None` for a missing
    /// record.
    pub async fn lookup(
        &self,
        kind: LookupKind,
        id: &ObjectId,
    ) -> Result<Option<LocationEntry>, LocationError> {
        self.query().lookup(kind, id).await
    }

    /// One page of the location list of `filter` (see
    /// [`LocationRuntime::list`](crate::LocationRuntime::list) for the bounds and the cycle).
    pub async fn list(
        &self,
        filter: ListFilter,
        page_size: u32,
        token: Option<&PageToken>,
    ) -> Result<Page, LocationError> {
        self.query().list(&filter, page_size, token).await
    }

    /// A node's allocation row: the slots secured on it, in use or reserved (zero when
    /// absent). See [`AuthorityClient::node_capacity`].
    pub async fn node_capacity(&self, node: &NodeKey) -> Result<CapacityRow, LocationError> {
        self.authority.node_capacity(node).await
    }

    /// A node's slots split into in use and reserved, derived from one snapshot of the
    /// authority rows and the relocation reservations. See [`AuthorityClient::node_usage`].
    pub async fn node_usage(&self, node: &NodeKey) -> Result<NodeUsage, LocationError> {
        self.authority.node_usage(node).await
    }

    fn query(&self) -> Query<'_> {
        Query {
            store: &self.store,
            authority: &self.authority,
        }
    }
}
