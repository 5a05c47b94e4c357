//! The location runtime of one host: startup validation, the owner lease with its renew loop
//! and admission gate, the authority engine, descriptor publishers and discovery readers.

use std::sync::Arc;
use std::time::Duration;

use zlink_store_spi::DynLocationStore;

use super::admission::{Admission, AdmissionGate, AdmissionOp, AdmissionRefused};
use super::authority::{AuthorityClient, SweepReport};
use super::clock::{MonotonicClock, SharedClock, SystemMonotonic};
use super::descriptor::{DescriptorPublisher, PublishableDescriptor, validate_descriptor};
use super::discovery::Discovery;
use super::engine::{Engine, EngineConfig};
use super::epoch::StoreEpoch;
use super::error::LocationError;
use super::health::{
    HealthProbe, LeaseHealthStatus, RecordingStore, RenewState, StoreHealth, StoreHealthStatus,
};
use super::identity::ObjectId;
use super::identity::{HostRun, MeshName, OwnerId, new_owner_id};
use super::lease::{LeaseBook, LeaseTerm, OwnerLease};
use super::options::LocationOptions;
use super::query::{ListFilter, LocationEntry, LookupKind, Page, PageToken, Query};
use super::renew::{LoopParts, RenewLoop};
use super::written::WrittenBook;

/// Builds and starts a [`LocationRuntime`].
#[derive(Debug)]
pub struct LocationRuntimeBuilder {
    store: Arc<dyn DynLocationStore>,
    options: LocationOptions,
    clock: SharedClock,
    renew_loop: bool,
    engine: EngineConfig,
    members: Option<crate::MemberResolver>,
}

impl LocationRuntimeBuilder {
    /// Sets the location options (validated by [`start`](Self::start)).
    pub fn options(mut self, options: LocationOptions) -> Self {
        self.options = options;
        self
    }

    /// Sets the local monotonic clock (default: the host's).
    pub fn clock(mut self, clock: Arc<dyn MonotonicClock>) -> Self {
        self.clock = clock;
        self
    }

    /// Whether to run the background renew loop (default on; tests that drive the lease by
    /// hand turn it off).
    pub fn renew_loop(mut self, on: bool) -> Self {
        self.renew_loop = on;
        self
    }

    /// Tells the owner sweeps and the at-access recovery which `SpotWide` User Spot a record
    /// resolves its owner through (the record payload is opaque to the location core), so
    /// they never delete a member that moved with its Spot (default: none known).
    pub fn spot_wide_members(mut self, resolver: crate::MemberResolver) -> Self {
        self.members = Some(resolver);
        self
    }

    /// The most authority operations coalesced into one batch (default 128, at least 1).
    pub fn max_batch_operations(mut self, n: usize) -> Self {
        self.engine.max_jobs = n.max(1);
        self
    }

    /// Validates the options (before any Store request), acquires the owner lease (a new
    /// OwnerId and LeaseGeneration), starts the authority engine and the renew loop.
    pub async fn start(self) -> Result<LocationRuntime, LocationError> {
        self.options.validate()?;
        let retention = self.options.lease_retention()?;
        let gate = Arc::new(AdmissionGate::new(
            self.clock.clone(),
            self.options.owner_lease_fencing_margin,
        ));
        let book = Arc::new(LeaseBook::default());
        let epoch = Arc::new(StoreEpoch::with_gate(gate.clone()));
        let store_health = Arc::new(StoreHealth::new(self.clock.clone()));
        let renew_state = Arc::new(RenewState::default());
        let written = Arc::new(WrittenBook::new(
            self.options.verify_acknowledged_writes,
            epoch.clone(),
            self.members.clone(),
        ));
        // Every Store call below is noted for the health queries (`health.rs`), and every
        // acknowledged authority write for its verification after the next renew
        // (`written.rs`).
        let store =
            RecordingStore::wrap_recording(self.store, store_health.clone(), written.clone());
        let engine = Engine::start(
            store.clone(),
            gate.clone(),
            book.clone(),
            epoch.clone(),
            self.engine,
        )?;
        let lease = Arc::new(OwnerLease::new(
            store.clone(),
            gate.clone(),
            book.clone(),
            epoch.clone(),
            written.clone(),
            new_owner_id(),
            retention,
        )?);
        lease.acquire().await?;
        let renew = self.renew_loop.then(|| {
            RenewLoop::spawn(LoopParts {
                lease: lease.clone(),
                health: renew_state.clone(),
                epoch: epoch.clone(),
                written: written.clone(),
                store: store.clone(),
                interval: self.options.owner_lease_renew_interval,
                timeout: self.options.owner_lease_renew_timeout,
            })
        });
        let authority = AuthorityClient::new(store.clone(), gate.clone(), engine, epoch.clone())
            .with_members(self.members);
        let health = HealthProbe {
            store: store_health,
            renew: renew_state,
            gate: gate.clone(),
        };
        Ok(LocationRuntime {
            store,
            health,
            options: self.options,
            clock: self.clock,
            gate,
            book,
            lease,
            authority,
            #[cfg(test)]
            epoch,
            #[cfg(test)]
            written,
            _renew: renew,
        })
    }

    /// Like [`start`](Self::start), but first checks every descriptor this host will publish
    /// (1 MiB, 1,024 list entries, every field bound): if one fails, startup fails before any
    /// Store request and nothing is published.
    pub async fn start_checking<D: PublishableDescriptor>(
        self,
        descriptors: &[D],
    ) -> Result<LocationRuntime, LocationError> {
        self.options.validate()?;
        // The OwnerId is not known yet; a UUID has the same length as the one start() issues.
        let probe = HostRun {
            owner_id: new_owner_id(),
            lease_generation: super::generation::OwnerLeaseGeneration::MIN,
        };
        for d in descriptors {
            validate_descriptor(d, &probe)?;
        }
        self.start().await
    }
}

/// The location runtime of one host.
#[derive(Debug)]
pub struct LocationRuntime {
    store: Arc<dyn DynLocationStore>,
    options: LocationOptions,
    clock: SharedClock,
    gate: Arc<AdmissionGate>,
    book: Arc<LeaseBook>,
    lease: Arc<OwnerLease>,
    authority: AuthorityClient,
    health: HealthProbe,
    #[cfg(test)]
    epoch: Arc<StoreEpoch>,
    #[cfg(test)]
    written: Arc<WrittenBook>,
    _renew: Option<RenewLoop>,
}

impl LocationRuntime {
    /// A builder over `store` with default options and the host's monotonic clock.
    pub fn builder(store: Arc<dyn DynLocationStore>) -> LocationRuntimeBuilder {
        LocationRuntimeBuilder {
            store,
            options: LocationOptions::default(),
            clock: Arc::new(SystemMonotonic::new()),
            renew_loop: true,
            engine: EngineConfig::default(),
            members: None,
        }
    }

    /// The validated options.
    pub fn options(&self) -> &LocationOptions {
        &self.options
    }

    /// The host-wide admission gate (the tests move its clock).
    #[cfg(test)]
    pub(crate) fn gate(&self) -> &Arc<AdmissionGate> {
        &self.gate
    }

    /// Admits one piece of new work (for example starting an object message or a timer).
    pub fn admit(&self, op: AdmissionOp) -> Result<Admission, AdmissionRefused> {
        self.gate.admit(op)
    }

    /// Whether new work is admitted now (a lease is held and the local admission deadline has
    /// not passed): the lock-free check of [`admit`](Self::admit) the object runtime makes at
    /// the start of every message job.
    pub fn is_admitting(&self) -> bool {
        self.gate.is_open()
    }

    /// The time now on this host's monotonic clock (the clock admission deadlines and the
    /// lease ends discovery reads live on).
    pub fn monotonic_now(&self) -> Duration {
        self.clock.now()
    }

    /// The Location Store's health as this host sees it: when its last call was answered and
    /// since when calls keep failing (guide-10 §4 `storeHealthy()`; see `health.rs`).
    pub fn store_health(&self) -> StoreHealthStatus {
        self.health.store()
    }

    /// The owner lease's health: held, renewing (the last renew failed, admission still
    /// open), expired or released, and the time left to the local admission deadline
    /// (guide-10 §4 `ownerLeaseHealthy()`).
    pub fn lease_health(&self) -> LeaseHealthStatus {
        self.health.lease()
    }

    /// A cheap clone-able handle on [`store_health`](Self::store_health) and
    /// [`lease_health`](Self::lease_health), for status code that does not hold the runtime.
    pub fn health_probe(&self) -> HealthProbe {
        self.health.clone()
    }

    /// The owner lease (never handed out: releasing it is `shutdown`'s job; the tests stall it).
    #[cfg(test)]
    pub(crate) fn lease(&self) -> &Arc<OwnerLease> {
        &self.lease
    }

    /// What the renew loop does after a successful renew, for tests that drive the lease by
    /// hand: one verification round of the writes acknowledged before the last renew (`None`
    /// if none is due).
    #[cfg(test)]
    pub(crate) async fn verify_written(&self) -> Option<super::written::Verdict> {
        let before = self.lease.take_verification()?;
        Some(
            super::renew::verify_round(
                &self.lease,
                &self.written,
                &self.epoch,
                &self.store,
                before,
            )
            .await,
        )
    }

    /// How many written authority rows await verification.
    #[cfg(test)]
    pub(crate) fn unverified_writes(&self) -> usize {
        self.written.pending()
    }

    /// This host's OwnerId.
    pub fn owner_id(&self) -> &OwnerId {
        self.lease.owner_id()
    }

    /// The current host run, if the lease is held.
    pub fn host_run(&self) -> Option<HostRun> {
        self.lease.run()
    }

    /// Follows the lease term this host holds: `None` while its lease is lost, then the term
    /// of the takeover (a new acquisition under a new LeaseGeneration, also after the Store
    /// lost its data; the runtime republishes descriptors and reclaims the earlier run's
    /// activations and rows when it changes).
    pub fn watch_terms(&self) -> tokio::sync::watch::Receiver<Option<LeaseTerm>> {
        self.lease.watch_terms()
    }

    /// The authority operations (crate-internal: applications never see records or
    /// versions, spec 21 §2.1).
    pub fn authority(&self) -> &AuthorityClient {
        &self.authority
    }

    /// Looks up the current location of one ActorId or SpotId for operational tools (spec 21
    /// §7.4): `None` when no record exists (nothing is created); a Reserved object is
    /// `Creating`; a committed one `Ready` while its owner's lease is held by the owning run,
    /// else `Unavailable`. A Store failure is the error (kind
    /// [`ErrorKind::Store`](super::ErrorKind::Store)), never an absent object; nothing is
    /// cached.
    pub async fn lookup(
        &self,
        kind: LookupKind,
        id: &ObjectId,
    ) -> Result<Option<LocationEntry>, LocationError> {
        self.query().lookup(kind, id).await
    }

    /// One page of the location list of `filter` for operational tools (spec 21 §7.4):
    /// `page_size` in `1..=1000` (else `InvalidOperation::PageSizeOutOfRange`, before any
    /// Store request), at most 4 MiB encoded (see [`LocationEntry::to_json`] and
    /// [`PageToken::MAX_LEN`]). Pass `None` to start a cycle and each page's `next` to go on;
    /// one cycle reads one snapshot and never returns an id twice. A Store failure fails the
    /// whole page (no partial entries), but corrupt or foreign data costs only its entry (left
    /// out and logged); an expired token is `ScanExpired`. There is no
    /// function returning every entry at once.
    pub async fn list(
        &self,
        filter: ListFilter,
        page_size: u32,
        token: Option<&PageToken>,
    ) -> Result<Page, LocationError> {
        self.query().list(&filter, page_size, token).await
    }

    fn query(&self) -> Query<'_> {
        Query {
            store: &self.store,
            authority: &self.authority,
        }
    }

    /// A publisher for one descriptor of this host; the descriptor is checked against every
    /// bound now (nothing is published by this call).
    pub fn descriptor_publisher<D: PublishableDescriptor>(
        &self,
        descriptor: D,
    ) -> Result<DescriptorPublisher<D>, LocationError> {
        let run = self.lease.run().ok_or(LocationError::LeaseLost)?;
        DescriptorPublisher::new(
            self.store.clone(),
            self.gate.clone(),
            self.book.clone(),
            &run,
            descriptor,
        )
    }

    /// A discovery reader of one mesh.
    pub fn discovery(&self, mesh: &MeshName) -> Result<Discovery, LocationError> {
        Discovery::new(self.store.clone(), self.clock.clone(), &self.options, mesh)
    }

    /// Host shutdown: the self-sweep of this run's authority rows and relocation
    /// reservations (spec 21 §11, through the admission gate and under this run's lease),
    /// then the lease is released. Descriptors are withdrawn by their publishers, never by
    /// the sweep. Past the admission deadline nothing is swept (the error says why) and the
    /// rows are left to a recovery sweep by another host.
    pub async fn shutdown(self) -> Result<SweepReport, LocationError> {
        let report = self.authority.self_sweep().await?;
        self.lease.release().await?;
        self.health.renew.released();
        Ok(report)
    }

    /// The self-sweep alone (spec 28 §9 cleanup step 2: owner records before descriptors).
    pub async fn self_sweep(&self) -> Result<SweepReport, LocationError> {
        self.authority.self_sweep().await
    }

    /// Releases the owner lease (spec 28 §9 cleanup step 3, after the descriptors).
    pub async fn release_lease(&self) -> Result<(), LocationError> {
        self.lease.release().await?;
        self.health.renew.released();
        Ok(())
    }
}
