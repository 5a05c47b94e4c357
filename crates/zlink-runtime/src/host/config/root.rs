//! The root builder (spec 06 §2, §12, §13, §22): stores, location options, codecs, deployment
//! and network identity, hosted services and RouteMesh registrations.

use std::fmt;
use std::sync::Arc;

use parking_lot::Mutex;
use zlink_codec::MeshName;
use zlink_codec::payload::{PayloadCodec, RegistryBuilder, Selector};
use zlink_store_spi::{DynLocationStore, DynRelocationStore};

use super::error::StartupError;
use super::hosted::HostedService;
use super::node::MeshNodeBuilder;
use super::plan::ZLinkPlan;
use crate::messaging::{Filter, FilterContext, Next, NodeHandler, ZLinkError};
use crate::messaging::{FnFilter, ScopedFactories};
use zlink_location::LocationOptions;

/// The default bind host of every listener (loopback: nothing is exposed unless asked).
pub const DEFAULT_BIND_HOST: &str = "127.0.0.1";

/// Collects the root configuration (spec 06 §2). Nothing is validated here: every error
/// surfaces from [`ZLink::start_plan`] before any socket binds. `H` is the handler value type
/// of the MeshNode builders.
pub struct ZLinkBuilder<H> {
    pub(crate) location_stores: Vec<Arc<dyn DynLocationStore>>,
    pub(crate) relocation_stores: Vec<Arc<dyn DynRelocationStore>>,
    pub(crate) location_options: LocationOptions,
    pub(crate) relocation_options: super::RelocationOptions,
    pub(crate) codecs: RegistryBuilder,
    pub(crate) application_version: u64,
    pub(crate) maintenance_wave: Option<String>,
    pub(crate) bind_host: String,
    pub(crate) advertised_host: Option<String>,
    pub(crate) hosted_services: Vec<Arc<dyn HostedService>>,
    pub(crate) nodes: Vec<MeshNodeBuilder<H>>,
    pub(crate) filters: Vec<Arc<dyn Filter>>,
    pub(crate) factories: ScopedFactories,
    pub(crate) job_queue: super::job_queue::JobQueueSettings,
}

impl<H> fmt::Debug for ZLinkBuilder<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZLinkBuilder")
            .field("location_stores", &self.location_stores.len())
            .field("relocation_stores", &self.relocation_stores.len())
            .field("location_options", &self.location_options)
            .field("relocation_options", &self.relocation_options)
            .field("application_version", &self.application_version)
            .field("maintenance_wave", &self.maintenance_wave)
            .field("bind_host", &self.bind_host)
            .field("advertised_host", &self.advertised_host)
            .field("hosted_services", &self.hosted_services)
            .field("filters", &self.filters.len())
            .field("job_queue", &self.job_queue)
            .field(
                "meshes",
                &self.nodes.iter().map(|n| n.mesh_name()).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl<H> Default for ZLinkBuilder<H> {
    fn default() -> Self {
        Self::new()
    }
}

impl<H> ZLinkBuilder<H> {
    /// An empty root: no store, default location options, the JSON codec only, application
    /// version 0, no maintenance wave, bind host [`DEFAULT_BIND_HOST`], no RouteMesh.
    pub fn new() -> Self {
        ZLinkBuilder {
            location_stores: Vec::new(),
            relocation_stores: Vec::new(),
            location_options: LocationOptions::default(),
            relocation_options: super::RelocationOptions::default(),
            codecs: RegistryBuilder::default(),
            application_version: 0,
            maintenance_wave: None,
            bind_host: DEFAULT_BIND_HOST.to_owned(),
            advertised_host: None,
            hosted_services: Vec::new(),
            nodes: Vec::new(),
            filters: Vec::new(),
            factories: ScopedFactories::default(),
            job_queue: Default::default(),
        }
    }

    /// Appends a process-level handler filter (spec 06 §10): filters run before every
    /// node-direct and channel handler of every MeshNode of this root, in registration order,
    /// and unwind in reverse.
    pub fn filter<F, Fut>(self, filter: F) -> Self
    where
        F: Fn(FilterContext, Next) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<(), ZLinkError>> + Send + 'static,
    {
        self.filter_object(FnFilter(filter))
    }

    /// Appends a filter object (spec 06 §10).
    pub fn filter_object(mut self, filter: impl Filter) -> Self {
        self.filters.push(Arc::new(filter));
        self
    }

    /// Registers the factory of a scoped dependency: one instance per dispatch, shared by that
    /// dispatch's filters and handler (spec 06 §10). A later registration of the same type
    /// replaces the earlier one.
    pub fn scoped<T: Send + Sync + 'static>(
        mut self,
        make: impl Fn() -> T + Send + Sync + 'static,
    ) -> Self {
        self.factories.insert(make);
        self
    }

    /// Registers the Location Store (exactly once; a second registration fails startup).
    ///
    /// Once the root has started it owns its hold on the store: at the end of its shutdown it
    /// calls the store's `close` if no one else holds it (spec 21 §2) — a store shared with
    /// another root still running, or one the application kept a clone of, stays open.
    pub fn location_store(mut self, store: Arc<dyn DynLocationStore>) -> Self {
        self.location_stores.push(store);
        self
    }

    /// Registers the Relocation Store (at most once; a second registration fails startup).
    /// Disposed of as the Location Store is (see [`location_store`](Self::location_store)).
    pub fn relocation_store(mut self, store: Arc<dyn DynRelocationStore>) -> Self {
        self.relocation_stores.push(store);
        self
    }

    /// Sets the root location options (validated at start, spec 21 §5 / §7.3).
    pub fn location_options(mut self, options: LocationOptions) -> Self {
        self.location_options = options;
        self
    }

    /// Sets the root relocation settings (validated at start, spec 06 §3, 28 §5).
    pub fn relocation_options(mut self, options: super::RelocationOptions) -> Self {
        self.relocation_options = options;
        self
    }

    /// Registers a payload codec for the declared types `selector` accepts (spec 06 §12); a
    /// later registration takes priority.
    pub fn codec(mut self, codec: PayloadCodec, selector: Selector) -> Self {
        self.codecs = self.codecs.register(codec, selector);
        self
    }

    /// Replaces the codec registrations with `registry`'s.
    pub fn codecs(mut self, registry: RegistryBuilder) -> Self {
        self.codecs = registry;
        self
    }

    /// The application deployment sequence number, 0..=2^63-1 (spec 06 §2; default 0).
    pub fn application_version(mut self, version: u64) -> Self {
        self.application_version = version;
        self
    }

    /// The maintenance wave stable id: 1..=255 bytes without NUL (spec 06 §2).
    pub fn maintenance_wave(mut self, wave: impl Into<String>) -> Self {
        self.maintenance_wave = Some(wave.into());
        self
    }

    /// The bind host common to listeners (spec 06 §2).
    pub fn bind_host(mut self, host: impl Into<String>) -> Self {
        self.bind_host = host.into();
        self
    }

    /// The advertised host common to listeners; defaults to the bind host.
    pub fn advertised_host(mut self, host: impl Into<String>) -> Self {
        self.advertised_host = Some(host.into());
        self
    }

    /// The automatic Application Job Queue profile (spec 06 §3; default `Balanced`): the
    /// host-wide cap on application jobs waiting for a handler to start is the effective
    /// processor count × the profile's jobs per processor, unless
    /// [`max_queued_application_jobs`](Self::max_queued_application_jobs) sets it.
    pub fn application_job_queue_profile(
        mut self,
        profile: super::ApplicationJobQueueProfile,
    ) -> Self {
        self.job_queue.profile = profile;
        self
    }

    /// `MaxQueuedApplicationJobs`: the precise host-wide cap, replacing the profile
    /// calculation, 1..=2^31-1 (validated at start; there is no unlimited mode).
    pub fn max_queued_application_jobs(mut self, max: i64) -> Self {
        self.job_queue.max_queued = Some(max);
        self
    }

    /// The Application Job Queue's receive-flow thresholds in percent of the effective
    /// maximum (spec 06 §3; defaults 80 and 60): at `pause` percent in use the MeshNodes stop
    /// reading application frames, at `resume` percent they read again. Pause 1..=100,
    /// resume 0..=99 and below pause (validated at start).
    pub fn application_job_queue_thresholds(mut self, pause: i64, resume: i64) -> Self {
        self.job_queue.pause_percent = pause;
        self.job_queue.resume_percent = resume;
        self
    }

    /// Registers a hosted service; services start in registration order (spec 06 §22).
    pub fn hosted_service(mut self, service: Arc<dyn HostedService>) -> Self {
        self.hosted_services.push(service);
        self
    }

    /// Registers one MeshNode under `mesh`, configured by `configure` (spec 06 §4).
    pub fn route_mesh(
        self,
        mesh: MeshName,
        configure: impl FnOnce(MeshNodeBuilder<H>) -> MeshNodeBuilder<H>,
    ) -> Self {
        self.add_route_mesh(configure(MeshNodeBuilder::new(mesh)))
    }

    /// Registers a MeshNode configured elsewhere (spec 06 §4).
    pub fn add_route_mesh(mut self, node: MeshNodeBuilder<H>) -> Self {
        self.nodes.push(node);
        self
    }

    /// The root value that can be started once.
    pub fn build(self) -> ZLink<H> {
        ZLink {
            pending: Mutex::new(Some(self)),
        }
    }
}

/// The framework root (spec 06 §2): configured once, started once. The second
/// [`start_plan`](Self::start_plan) fails with [`StartupError::RootAlreadyStarted`], whether or
/// not the first succeeded.
pub struct ZLink<H = NodeHandler> {
    pending: Mutex<Option<ZLinkBuilder<H>>>,
}

impl<H> fmt::Debug for ZLink<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZLink")
            .field("started", &self.pending.lock().is_none())
            .finish()
    }
}

impl ZLink<NodeHandler> {
    /// A root builder whose MeshNodes register typed handlers (the `on_*` methods of
    /// [`MeshNodeBuilder`]).
    pub fn builder() -> ZLinkBuilder<NodeHandler> {
        ZLinkBuilder::new()
    }
}

impl<H> ZLink<H> {
    /// A root builder whose MeshNodes register handler values of type `H` (configuration
    /// checks without the messaging layer; only `ZLink<NodeHandler>` starts a host).
    pub fn builder_with_handlers() -> ZLinkBuilder<H> {
        ZLinkBuilder::new()
    }

    /// Consumes the configuration and validates it (spec 06 §23), returning the immutable plan
    /// a host starts from. Called once by start, before any socket binds or Store request;
    /// any later call fails with [`StartupError::RootAlreadyStarted`].
    pub fn start_plan(&self) -> Result<ZLinkPlan<H>, StartupError> {
        let Some(builder) = self.pending.lock().take() else {
            return Err(StartupError::RootAlreadyStarted);
        };
        super::validate::validate(builder)
    }
}
