//! Starting a root (spec 06 §2, §22, §23; 21 §4; 28 §3): validate everything, then the owner
//! lease, then per MeshNode the listener, the `Preparing` descriptor and the receive loops,
//! then the hosted services in order, then `Serving` and discovery. A failure at any step
//! tears down what started, in reverse.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Mutex, RwLock};
use zlink_codec::records::{HostState, MeshNodeDescriptor, ObjectCapability};
use zlink_codec::{Generation, MAX_U63};
use zlink_transport::{Transport, TransportConfig};

use super::observe::HostEvents;
use super::running::{HostInner, ZLinkHost};
use crate::host::config::{
    DEFAULT_ROUTING_ID_PREFIX, MeshNodePlan, RoutingIdPlan, StartupError, Topology, ZLink,
    ZLinkPlan, start_hosted_services,
};
use crate::mesh::node::StateListener;
use crate::mesh::node::control::ControlRegistry;
use crate::mesh::node::core::NodeInner;
use crate::mesh::node::discover::{self, DescriptorFacts, NodeDescriptor};
use crate::mesh::node::handle::{MeshNode, add_manual_intent, refresh_manual_rids};
use crate::mesh::node::inbound;
use crate::mesh::node::lifecycle::Lifecycle;
use crate::mesh::node::mailbox::Mailbox;
use crate::mesh::node::peers::PeerTable;
use crate::mesh::node::pending::Pending;
use crate::messaging::{Dispatcher, NodeHandler};
use zlink_codec::records::ObjectRole;
use zlink_location::{CapacityLimits, LocationError, LocationRuntime};

/// Issues lifecycle generations: the start time in Unix epoch milliseconds, strictly
/// increasing within this process (a fixed RID restarted later presents a larger generation,
/// so peers supersede its old connection).
fn next_generation() -> Generation {
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = zlink_store_spi::entropy::system_time()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(MAX_U63))
        .unwrap_or(1)
        .clamp(1, MAX_U63);
    let mut prev = LAST.load(Ordering::Relaxed);
    loop {
        let next = now.max(prev.saturating_add(1)).min(MAX_U63);
        match LAST.compare_exchange(prev, next, Ordering::AcqRel, Ordering::Relaxed) {
            Ok(_) => return Generation::new(next).unwrap_or(Generation::MIN),
            Err(p) => prev = p,
        }
    }
}

impl ZLink<NodeHandler> {
    /// Validates the configuration (spec 06 §23) and starts the root: the owner lease (with a
    /// Location Store), every MeshNode (listener, descriptor, peers), the hosted services in
    /// registration order, then `Serving`. A root starts once; a second call fails with
    /// [`StartupError::RootAlreadyStarted`].
    pub async fn start(&self) -> Result<ZLinkHost, StartupError> {
        let plan = self.start_plan()?;
        start(plan).await
    }
}

struct Started {
    nodes: Vec<MeshNode>,
    descriptors: Vec<Option<Arc<NodeDescriptor>>>,
    objects: Vec<Option<NodeObjects>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

async fn start(mut plan: ZLinkPlan<NodeHandler>) -> Result<ZLinkHost, StartupError> {
    // Every part of the root holds the stores through the root's one hold (its disposal).
    let stores =
        super::disposal::RootStores::take(plan.location_store.take(), plan.relocation_store.take());
    plan.location_store = stores.location();
    plan.relocation_store = stores.relocation();
    let mut builder = Dispatcher::builder(plan.codecs.clone())
        .filters(std::mem::take(&mut plan.filters))
        .factories(std::mem::take(&mut plan.factories));
    for node in plan.nodes_mut() {
        for (key, handler) in node.take_handlers() {
            builder = builder.handler(key, handler);
        }
    }
    let dispatcher = builder.build().map_err(StartupError::Handlers)?;
    let facts = |n: &MeshNodePlan<NodeHandler>| DescriptorFacts {
        role: n.object_role(),
        placement_weight: n.placement_weight(),
        limits: n.capacity_limits().clone(),
        activation_concurrency: n.activation_concurrency(),
        application_version: plan.application_version,
        maintenance_wave: plan.maintenance_wave.clone(),
        capabilities: capabilities(n.object_types(), n.capacity_limits()),
        security_identity: n.security_identity(),
        entry_spot_id: (n.object_role() == ObjectRole::Server)
            .then(|| {
                let prefix = match n.routing_id_plan() {
                    RoutingIdPlan::Automatic { prefix } => prefix.as_str(),
                    RoutingIdPlan::Fixed(_) => DEFAULT_ROUTING_ID_PREFIX,
                };
                discover::entry_spot_id(prefix)
            })
            .flatten(),
    };

    // Validated (startup) with the root's location options.
    let cold_activation_retention = plan
        .location_options()
        .cold_activation_retention_value()
        .map_err(|e| StartupError::Location(LocationError::Config(e)))?;

    // The owner lease, after checking every descriptor against its bounds.
    let location = match plan.location_store.clone() {
        Some(store) => {
            let probes: Vec<MeshNodeDescriptor> = plan
                .nodes()
                .iter()
                .filter(|n| n.topology() == Topology::Automatic)
                .map(|n| {
                    let probe_endpoint = format!("{}:65535", n.advertised_host());
                    discover::descriptor(
                        (
                            n.mesh_name(),
                            &n.new_routing_id(),
                            Generation::MIN,
                            &probe_endpoint,
                        ),
                        n.channel_servers(),
                        &facts(n),
                        HostState::Preparing,
                    )
                })
                .collect();
            // Every Store call timed and counted (`telemetry/store.rs`).
            let rt = LocationRuntime::builder(crate::telemetry::MeteredStore::wrap(store))
                .options(plan.location_options.clone())
                .spot_wide_members(zlink_location::MemberResolver::new(
                    crate::objects::membership::spot_wide_spot,
                ))
                .start_checking(&probes)
                .await
                .map_err(StartupError::Location)?;
            Some(Arc::new(rt))
        }
        None => None,
    };

    let events = Arc::new(HostEvents::default());
    let life = Lifecycle::new(Arc::clone(&events) as Arc<dyn StateListener>);
    let mut started = Started {
        nodes: Vec::new(),
        descriptors: Vec::new(),
        objects: Vec::new(),
        tasks: Vec::new(),
    };
    // One Application Job Queue for the whole host, shared by every MeshNode (06 §3).
    let jobs = crate::mesh::JobQueue::new(plan.application_job_queue());
    for n in plan.nodes() {
        let shared = (&dispatcher, &life, &jobs);
        match start_node(n, &facts(n), shared, location.as_ref()).await {
            Ok((node, descriptor, objects, tasks)) => {
                if let Some(o) = &objects {
                    o.host.instances.configure(
                        &o.host,
                        plan.relocation_store().cloned(),
                        cold_activation_retention,
                    );
                }
                started.nodes.push(node);
                started.descriptors.push(descriptor);
                started.objects.push(objects);
                started.tasks.extend(tasks);
            }
            Err(e) => {
                abort(started, location).await;
                return Err(e);
            }
        }
    }

    let hosted = match start_hosted_services(plan.hosted_services()).await {
        Ok(h) => h,
        Err(e) => {
            abort(started, location).await;
            return Err(StartupError::Hosted(e));
        }
    };

    life.transition(&[HostState::Preparing], HostState::Serving);
    for i in 0..started.nodes.len() {
        let node = started.nodes[i].clone();
        let Some(d) = started.descriptors[i].clone() else {
            continue;
        };
        let weights = node.inner.weights.read().clone();
        if let Err(e) = d.publish_state(&weights, HostState::Serving).await {
            tracing::warn!(mesh = %node.inner.mesh, error = %e, "Serving descriptor not published");
        }
        if let Some(rt) = &location {
            match rt.discovery(&node.inner.mesh) {
                Ok(discovery) => {
                    let discovery = Arc::new(discovery);
                    if let Some(o) = started.objects[i].as_mut() {
                        o.host.instances.set_discovery(Arc::clone(&discovery));
                        o.discovery = Some(Arc::clone(&discovery));
                        // Handlers reach the managers of their node (`MessageContext::actors`).
                        o.host
                            .door
                            .runs_on()
                            .set_client(&crate::objects::client::ObjectClient {
                                node: node.clone(),
                                objects: Arc::clone(&o.host),
                                discovery: Arc::clone(&discovery),
                            });
                        // Held activations checked against their records, one tick per
                        // renew interval (objects/host/audit.rs).
                        started
                            .tasks
                            .push(tokio::spawn(crate::objects::host::audit::run(
                                Arc::downgrade(&o.host),
                                rt.options().owner_lease_renew_interval,
                            )));
                        // Dead runs nobody saw leave the list (objects/recovery.rs).
                        if let Some(period) = rt.options().dead_run_sweep_period() {
                            started
                                .tasks
                                .push(tokio::spawn(crate::objects::recovery::run(
                                    Arc::downgrade(&o.host),
                                    period,
                                )));
                        }
                    }
                    started.tasks.push(tokio::spawn(discover::run(
                        Arc::clone(&node.inner),
                        discovery,
                        rt.options().polling_interval,
                    )))
                }
                Err(e) => {
                    tracing::warn!(mesh = %node.inner.mesh, error = %e, "discovery not started")
                }
            }
        }
    }

    if let Some(rt) = &location {
        let nodes = started.nodes.iter().map(|n| Arc::clone(&n.inner)).collect();
        started
            .tasks
            .push(tokio::spawn(crate::mesh::node::takeover::follow(
                Arc::clone(rt),
                nodes,
            )));
    }

    // The metrics sampler (mailbox depth, live activations, lease renewals, timer ticks).
    {
        let nodes: Vec<_> = started.nodes.iter().map(|n| Arc::clone(&n.inner)).collect();
        let sampled = super::sampler::Sampled::new(
            &nodes,
            &started.objects,
            location.as_ref().map(|rt| rt.health_probe()),
        );
        started.tasks.push(tokio::spawn(super::sampler::run(
            sampled,
            super::sampler::SAMPLE_PERIOD,
        )));
    }

    let channel_index = plan
        .channel_index()
        .iter()
        .filter_map(|(c, m)| {
            started
                .nodes
                .iter()
                .position(|n| &n.inner.mesh == m)
                .map(|i| (c.clone(), i))
        })
        .collect::<BTreeMap<_, _>>();
    let host = ZLinkHost::new(HostInner {
        life,
        events,
        nodes: started.nodes,
        descriptors: started.descriptors,
        objects: started.objects,
        channel_index,
        health: location.as_ref().map(|rt| rt.health_probe()),
        location: tokio::sync::Mutex::new(location),
        hosted: tokio::sync::Mutex::new(Some(hosted)),
        tasks: Mutex::new(started.tasks),
        report: tokio::sync::OnceCell::new(),
        relocate: Default::default(),
        application_version: plan.application_version,
        maintenance_wave: plan.maintenance_wave.clone(),
        jobs,
        stores,
    });
    // Cross-node joins move through the host's single move entry.
    super::relocate::install_join_moves(host.inner());
    Ok(host)
}

type NodeStart = (
    MeshNode,
    Option<Arc<NodeDescriptor>>,
    Option<NodeObjects>,
    Vec<tokio::task::JoinHandle<()>>,
);

/// The object layer of one Object Client/Server node.
#[derive(Debug, Clone)]
pub(crate) struct NodeObjects {
    pub(crate) host: Arc<crate::objects::host::ObjectHost>,
    /// The node's discovery (automatic topology): placement candidates come from its list.
    pub(crate) discovery: Option<Arc<zlink_location::Discovery>>,
}

async fn start_node(
    n: &MeshNodePlan<NodeHandler>,
    facts: &DescriptorFacts,
    (dispatcher, life, jobs): (&Dispatcher, &Arc<Lifecycle>, &Arc<crate::mesh::JobQueue>),
    location: Option<&Arc<LocationRuntime>>,
) -> Result<NodeStart, StartupError> {
    let mesh = n.mesh_name().clone();
    if let (Some(rt), Some(entry)) = (location, &facts.entry_spot_id) {
        let read = rt
            .authority()
            .read(zlink_codec::records::ObjectKind::UserSpot, entry)
            .await
            .map_err(StartupError::Location)?;
        if matches!(read, zlink_location::AuthorityRead::Found { .. }) {
            return Err(StartupError::EntrySpotExists {
                mesh: mesh.clone(),
                id: entry.clone(),
            });
        }
    }
    let rid = n.new_routing_id();
    let generation = next_generation();
    let listen = if n.bind_host().contains(':') {
        format!("[{}]:{}", n.bind_host(), n.port())
    } else {
        format!("{}:{}", n.bind_host(), n.port())
    };
    let mut config = TransportConfig::new(mesh.clone(), rid.clone(), generation)
        .listen(listen.clone())
        .channels(n.channel_servers().keys().cloned());
    if let Some(tls) = &n.tls {
        config = config.tls(tls.clone());
    }
    if let Some(network) = &n.transport.network {
        config = config.network(network.clone());
    }
    if let Some(seed) = n.transport.seed {
        config = config.seed(seed);
    }
    let (transport, inbound) =
        Transport::start(config)
            .await
            .map_err(|source| StartupError::Bind {
                mesh: mesh.clone(),
                endpoint: listen,
                source,
            })?;
    let port = transport.local_addr().port();
    let endpoint = if n.advertised_host().contains(':') {
        format!("[{}]:{port}", n.advertised_host())
    } else {
        format!("{}:{port}", n.advertised_host())
    };
    let weights = n.channel_servers().clone();

    let descriptor = match (location, n.topology()) {
        (Some(rt), Topology::Automatic) => {
            let first = discover::descriptor(
                (&mesh, &rid, generation, &endpoint),
                &weights,
                facts,
                HostState::Preparing,
            );
            let result = async {
                let publisher = rt.descriptor_publisher(first.clone())?;
                let d = NodeDescriptor::new(publisher, first);
                d.publish_state(&weights, HostState::Preparing).await?;
                Ok::<_, LocationError>(Arc::new(d))
            }
            .await;
            match result {
                Ok(d) => Some(d),
                Err(e) => {
                    transport.shutdown().await;
                    return Err(StartupError::Location(e));
                }
            }
        }
        _ => None,
    };

    let mut control = ControlRegistry::with_builtins();
    let objects = match location {
        Some(rt) if n.object_role() != ObjectRole::None => {
            let types = n
                .object_types()
                .iter()
                .map(|t| {
                    (
                        t.stable_type().clone(),
                        crate::objects::host::HostedType {
                            kind: t.kind(),
                            execution: t.execution(),
                            relocation: t.registration.choices.first().copied(),
                            erased: std::sync::Arc::clone(&t.registration.erased),
                        },
                    )
                })
                .collect();
            let host = Arc::new(
                crate::objects::host::ObjectHost::new(
                    mesh.clone(),
                    rid.clone(),
                    types,
                    dispatcher.codecs().clone(),
                    Arc::clone(rt),
                    n.location_options().route_cache_max_age,
                    (facts.entry_spot_id.clone(), n.entry_callback.clone()),
                )
                .with_interception(Arc::new(crate::relocation::Relocations::default()))
                .with_entry_closing(n.entry_closing.clone())
                .with_relocation_options(n.relocation_options().clone())
                .with_activation_concurrency(n.activation_concurrency())
                .with_limits(n.capacity_limits().clone())
                .with_timer_limits(n.timer_limits())
                .with_job_queue(Arc::clone(jobs))
                .with_host_state(life.subscribe()),
            );
            let for_command = Arc::clone(&host);
            control.register(
                crate::objects::create::CREATE_OBJECT,
                Arc::new(move |_node, env| {
                    Box::pin(crate::objects::create_command(
                        Arc::clone(&for_command),
                        env,
                    ))
                }),
            );
            let for_join = Arc::clone(&host);
            control.register(
                crate::objects::JOIN_SPOT,
                Arc::new(move |_node, env| {
                    Box::pin(crate::objects::join_command(Arc::clone(&for_join), env))
                }),
            );
            let for_end = Arc::clone(&host);
            control.register(
                crate::objects::END_OBJECT,
                Arc::new(move |_node, env| {
                    Box::pin(crate::objects::end_command(Arc::clone(&for_end), env))
                }),
            );
            for (name, command) in crate::relocation::commands() {
                let for_relocation = Arc::clone(&host);
                control.register(
                    name,
                    Arc::new(move |node, env| command(Arc::clone(&for_relocation), node, env)),
                );
            }
            let for_activate = Arc::clone(&host);
            control.register(
                crate::objects::instance::ACTIVATE_SPOT,
                Arc::new(move |node, env| {
                    Box::pin(crate::objects::instance::activate_command(
                        Arc::clone(&for_activate),
                        node,
                        env,
                    ))
                }),
            );
            Some(NodeObjects {
                host,
                discovery: None,
            })
        }
        _ => None,
    };
    let inner = Arc::new(NodeInner {
        mesh: mesh.clone(),
        rid,
        generation,
        endpoint,
        topology: n.topology(),
        role: n.object_role(),
        placement_weight: n.placement_weight(),
        channel_clients: n.channel_clients().clone(),
        weights: RwLock::new(weights),
        transport,
        dispatcher: dispatcher.clone(),
        peers: RwLock::new(PeerTable::default()),
        pending: Arc::new(Pending::default()),
        mailbox: Mailbox::new(n.mailbox_jobs(), n.mailbox_bytes()),
        jobs: Arc::clone(jobs),
        life: Arc::clone(life),
        manual: Mutex::new(Vec::new()),
        control,
        descriptor: descriptor.clone(),
        discovery_wake: tokio::sync::Notify::new(),
        objects: std::sync::OnceLock::new(),
        metrics: crate::telemetry::NodeMetrics::new(),
    });
    let tasks = vec![
        tokio::spawn(inbound::peers_and_replies(
            Arc::clone(&inner),
            inbound.events,
            inbound.replies,
        )),
        tokio::spawn(inbound::control_frames(Arc::clone(&inner), inbound.control)),
        tokio::spawn(inbound::app_frames(Arc::clone(&inner), inbound.app)),
    ];
    for peer in n.manual_peers() {
        if let Err(source) = add_manual_intent(&inner, peer) {
            for t in &tasks {
                t.abort();
            }
            inner.transport.shutdown().await;
            return Err(StartupError::ManualPeer {
                mesh: mesh.clone(),
                source,
            });
        }
        inner.manual.lock().push(peer.clone());
    }
    refresh_manual_rids(&inner);
    if let Some(o) = &objects {
        let sink: Arc<dyn crate::mesh::node::core::ObjectSink> = o.host.clone();
        let _ = inner.objects.set(sink);
    }
    tracing::info!(mesh = %mesh, rid = %inner.rid, endpoint = %inner.endpoint, "MeshNode bound");
    Ok((MeshNode { inner }, descriptor, objects, tasks))
}

/// Tears down a partial start in reverse: this run's rows (a self-sweep: its index marker, and
/// any record placed here meanwhile), nodes (descriptors, transports), then the lease.
async fn abort(started: Started, location: Option<Arc<LocationRuntime>>) {
    for t in &started.tasks {
        t.abort();
    }
    if let Some(rt) = &location {
        if let Err(e) = rt.self_sweep().await {
            tracing::warn!(error = %e, "this run's rows not swept after a failed start");
        }
        if let Some(run) = rt.host_run() {
            for d in started.descriptors.iter().flatten() {
                if let Err(e) = d.withdraw(&run).await {
                    tracing::warn!(error = %e, "descriptor not withdrawn after a failed start");
                }
            }
        }
    }
    for n in &started.nodes {
        n.inner.transport.shutdown().await;
    }
    if let Some(rt) = location {
        if let Err(e) = rt.release_lease().await {
            tracing::warn!(error = %e, "owner lease not released after a failed start");
        }
    }
}

/// The descriptor's placement capabilities of an Object Server's registered types: kind,
/// stable type, policy, whether a state adapter exists, and the per-type limit (0 = none).
fn capabilities(
    types: &[super::config::ObjectTypePlan],
    limits: &CapacityLimits,
) -> Vec<ObjectCapability> {
    types
        .iter()
        .map(|t| ObjectCapability {
            object_kind: t.kind(),
            stable_type: t.stable_type().clone(),
            policy: t.relocation().policy(),
            has_snapshot_adapter: t.relocation() == crate::objects::RelocationChoice::Preserve,
            limit: limits
                .spot_types
                .get(&(t.kind(), t.stable_type().clone()))
                .copied()
                .unwrap_or(0),
        })
        .collect()
}
