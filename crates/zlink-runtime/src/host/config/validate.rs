//! Startup validation (spec 06 §23): turns a root builder into a [`ZLinkPlan`] or the first
//! [`StartupError`]. Root-wide rules run first (stores, options, codecs, identity), then each
//! MeshNode in registration order, then the cross-mesh ChannelName rule.

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};

use zlink_codec::records::{MAX_DECIMAL, MAX_SLOTS, ObjectRole};
use zlink_codec::{ChannelName, MeshName, RoutingId};

use super::error::{HostField, StartupError, StoreKind, StoreRequirement};
use super::node::{
    ChannelRole, DEFAULT_ACTIVATION_CONCURRENCY, HandlerSpec, MeshNodeBuilder, PlacementSettings,
    RoutingIdChoice,
};
use super::plan::{MeshNodePlan, RoutingIdPlan, ZLinkPlan};
use super::root::ZLinkBuilder;
use crate::mesh::peer::{ManualPeer, Topology, host_problem, parse_endpoint};
use crate::messaging::{HandlerKey, PacketName};
use std::net::IpAddr;
use zlink_location::{CapacityLimits, DEFAULT_WEIGHT, LocationOptions, MAX_WEIGHT};

/// The longest automatic routing-id prefix (spec 06 §23).
pub const MAX_ROUTING_ID_PREFIX_LEN: usize = 64;

/// The longest maintenance wave stable id, in bytes.
pub const MAX_MAINTENANCE_WAVE_LEN: usize = 255;

/// Validates the whole root configuration.
pub(crate) fn validate<H>(root: ZLinkBuilder<H>) -> Result<ZLinkPlan<H>, StartupError> {
    let location_store = at_most_once(root.location_stores, StoreKind::Location)?;
    let relocation_store = at_most_once(root.relocation_stores, StoreKind::Relocation)?;
    root.location_options
        .validate()
        .map_err(|source| StartupError::LocationOptions { mesh: None, source })?;
    root.relocation_options
        .validate()
        .map_err(|source| StartupError::RelocationOptions { source })?;
    let job_queue =
        super::job_queue::validate(root.job_queue, super::job_queue::effective_processors())?;
    let codecs = root.codecs.build().map_err(StartupError::Codec)?;
    if root.application_version > MAX_DECIMAL {
        return Err(StartupError::ApplicationVersionOutOfRange {
            value: root.application_version,
        });
    }
    if let Some(wave) = &root.maintenance_wave {
        check_wave(wave)?;
    }
    check_host(None, HostField::Bind, &root.bind_host)?;
    if let Some(host) = &root.advertised_host {
        check_host(None, HostField::Advertised, host)?;
    }

    let root_identity = RootIdentity {
        has_location_store: location_store.is_some(),
        bind_host: &root.bind_host,
        advertised_host: root.advertised_host.as_deref(),
        location_options: &root.location_options,
        relocation_options: &root.relocation_options,
    };
    let mut meshes = BTreeSet::new();
    let mut channel_index: BTreeMap<ChannelName, MeshName> = BTreeMap::new();
    let mut nodes = Vec::with_capacity(root.nodes.len());
    for node in root.nodes {
        if !meshes.insert(node.mesh.clone()) {
            return Err(StartupError::DuplicateMeshName { mesh: node.mesh });
        }
        let plan = validate_node(&root_identity, node)?;
        let channels = plan
            .channel_servers
            .keys()
            .chain(plan.channel_clients.iter());
        for channel in channels {
            match channel_index.entry(channel.clone()) {
                Entry::Vacant(v) => {
                    v.insert(plan.mesh.clone());
                }
                Entry::Occupied(o) => {
                    return Err(StartupError::ChannelOnTwoMeshes {
                        channel: channel.clone(),
                        first: o.get().clone(),
                        second: plan.mesh.clone(),
                    });
                }
            }
        }
        nodes.push(plan);
    }
    if relocation_store.is_none() {
        check_relocation_store_needs(&nodes)?;
    }
    Ok(ZLinkPlan {
        location_store,
        relocation_store,
        location_options: root.location_options,
        codecs,
        application_version: root.application_version,
        maintenance_wave: root.maintenance_wave,
        hosted_services: root.hosted_services,
        nodes,
        channel_index,
        filters: root.filters,
        factories: root.factories,
        job_queue,
    })
}

/// What a MeshNode inherits from the root.
struct RootIdentity<'a> {
    has_location_store: bool,
    bind_host: &'a str,
    advertised_host: Option<&'a str>,
    location_options: &'a LocationOptions,
    relocation_options: &'a super::RelocationOptions,
}

fn at_most_once<T>(mut stores: Vec<T>, store: StoreKind) -> Result<Option<T>, StartupError> {
    if stores.len() > 1 {
        return Err(StartupError::StoreRegisteredTwice {
            store,
            count: stores.len(),
        });
    }
    Ok(stores.pop())
}

fn check_wave(wave: &str) -> Result<(), StartupError> {
    let reason = if wave.is_empty() {
        "empty"
    } else if wave.len() > MAX_MAINTENANCE_WAVE_LEN {
        "longer than 255 bytes"
    } else if wave.contains('\0') {
        "contains a NUL byte"
    } else {
        return Ok(());
    };
    Err(StartupError::InvalidMaintenanceWave {
        wave: wave.to_owned(),
        reason,
    })
}

fn check_host(mesh: Option<&MeshName>, field: HostField, host: &str) -> Result<(), StartupError> {
    match host_problem(host) {
        None => Ok(()),
        Some(reason) => Err(StartupError::InvalidHost {
            mesh: mesh.cloned(),
            field,
            host: host.to_owned(),
            reason,
        }),
    }
}

fn check_prefix(prefix: &str) -> Option<&'static str> {
    if prefix.is_empty() {
        Some("empty")
    } else if prefix.len() > MAX_ROUTING_ID_PREFIX_LEN {
        Some("longer than 64 characters")
    } else if !prefix
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        Some("a character outside [A-Za-z0-9._-]")
    } else {
        None
    }
}

fn validate_node<H>(
    root: &RootIdentity<'_>,
    node: MeshNodeBuilder<H>,
) -> Result<MeshNodePlan<H>, StartupError> {
    let mesh = node.mesh;
    let role = node.object_role;

    // Routing id and topology.
    let routing_id = match node.routing_id {
        RoutingIdChoice::Prefix(prefix) => match check_prefix(&prefix) {
            None => RoutingIdPlan::Automatic { prefix },
            Some(reason) => {
                return Err(StartupError::InvalidRoutingIdPrefix {
                    mesh,
                    prefix,
                    reason,
                });
            }
        },
        RoutingIdChoice::Fixed(bytes) => {
            let len = bytes.len();
            let rid = RoutingId::new(bytes).map_err(|_| StartupError::InvalidFixedRoutingId {
                mesh: mesh.clone(),
                len,
            })?;
            if role != ObjectRole::None {
                return Err(StartupError::FixedRoutingIdNeedsRoleNone { mesh, role });
            }
            if node.topology != Topology::Manual {
                return Err(StartupError::FixedRoutingIdWithAutomaticTopology { mesh });
            }
            RoutingIdPlan::Fixed(rid)
        }
    };

    // Store requirements.
    if !root.has_location_store {
        let requirement = if role != ObjectRole::None {
            Some(StoreRequirement::ObjectRole(role))
        } else if node.topology == Topology::Automatic {
            Some(StoreRequirement::AutomaticDiscovery)
        } else {
            None
        };
        if let Some(requirement) = requirement {
            return Err(StartupError::LocationStoreRequired { mesh, requirement });
        }
    }

    // Network identity.
    if let Some(host) = &node.bind_host {
        check_host(Some(&mesh), HostField::Bind, host)?;
    }
    if let Some(host) = &node.advertised_host {
        check_host(Some(&mesh), HostField::Advertised, host)?;
    }
    let bind_host = node.bind_host.unwrap_or_else(|| root.bind_host.to_owned());
    let advertised_host = node
        .advertised_host
        .or_else(|| root.advertised_host.map(str::to_owned))
        .unwrap_or_else(|| bind_host.clone());
    if advertised_host
        .parse::<IpAddr>()
        .is_ok_and(|ip| ip.is_unspecified())
    {
        return Err(StartupError::UnspecifiedAdvertisedHost {
            mesh,
            host: advertised_host,
        });
    }

    // Channel memberships.
    let mut channel_servers = BTreeMap::new();
    let mut channel_clients = BTreeSet::new();
    for (channel, channel_role) in node.channels {
        if channel_servers.contains_key(&channel) || channel_clients.contains(&channel) {
            return Err(StartupError::DuplicateChannelRole { mesh, channel });
        }
        match channel_role {
            ChannelRole::Client => {
                channel_clients.insert(channel);
            }
            ChannelRole::Server { weight } => {
                let Some(w) = weight_in_range(weight) else {
                    return Err(StartupError::ChannelWeightOutOfRange {
                        mesh,
                        channel,
                        value: weight,
                    });
                };
                channel_servers.insert(channel, w);
            }
        }
    }

    // Manual peers.
    let mut manual_peers: Vec<ManualPeer> = Vec::with_capacity(node.manual_peers.len());
    for intent in node.manual_peers {
        let endpoint = parse_endpoint(&intent.endpoint).map_err(|reason| {
            StartupError::InvalidPeerEndpoint {
                mesh: mesh.clone(),
                endpoint: intent.endpoint.clone(),
                reason,
            }
        })?;
        let expected_rid = match intent.expected_rid {
            None => None,
            Some(bytes) => {
                let len = bytes.len();
                Some(
                    RoutingId::new(bytes).map_err(|_| StartupError::InvalidExpectedRoutingId {
                        mesh: mesh.clone(),
                        endpoint: intent.endpoint.clone(),
                        len,
                    })?,
                )
            }
        };
        if manual_peers.iter().any(|p| p.endpoint == endpoint) {
            return Err(StartupError::DuplicateManualPeer {
                mesh,
                endpoint: intent.endpoint,
            });
        }
        manual_peers.push(ManualPeer {
            endpoint,
            expected_rid,
        });
    }

    // Handlers.
    let mut handlers = BTreeMap::new();
    for (spec, handler) in node.handlers {
        let key = handler_key(&mesh, spec)?;
        match &key {
            HandlerKey::NodeDirect { .. } if role == ObjectRole::Client => {
                return Err(StartupError::NodeDirectHandlerOnObjectClient { mesh, key });
            }
            HandlerKey::Channel { channel, .. } if !channel_servers.contains_key(channel) => {
                return Err(StartupError::ChannelHandlerWithoutServerMembership {
                    mesh,
                    channel: channel.clone(),
                });
            }
            _ => {}
        }
        match handlers.entry(key) {
            Entry::Vacant(v) => {
                v.insert(handler);
            }
            Entry::Occupied(o) => {
                return Err(StartupError::DuplicateHandlerKey {
                    key: o.key().clone(),
                });
            }
        }
    }

    let (placement_weight, capacity_limits, activation_concurrency) =
        validate_placement(&mesh, role, &node.placement)?;

    // Location options with this node's overrides.
    let mut location_options = root.location_options.clone();
    if let Some(age) = node.route_cache_max_age {
        location_options.route_cache_max_age = age;
    }
    if let Some(d) = node.message_follow_duration {
        location_options.message_follow_duration = d;
    }
    location_options
        .validate()
        .map_err(|source| StartupError::LocationOptions {
            mesh: Some(mesh.clone()),
            source,
        })?;

    let (jobs, bytes) = node.mailbox;
    const MAX_JOBS: i64 = (1 << 31) - 1;
    const MAX_BYTES: i64 = 1 << 62;
    if !(1..=MAX_JOBS).contains(&jobs) {
        return Err(StartupError::MailboxLimitOutOfRange {
            mesh,
            axis: "jobs",
            value: jobs,
            max: MAX_JOBS,
        });
    }
    if !(1..=MAX_BYTES).contains(&bytes) {
        return Err(StartupError::MailboxLimitOutOfRange {
            mesh,
            axis: "bytes",
            value: bytes,
            max: MAX_BYTES,
        });
    }

    let object_types = validate_object_types(&mesh, role, node.object_types)?;
    let mut entry_callbacks = node.entry_callbacks;
    if !entry_callbacks.is_empty() && role != ObjectRole::Server {
        return Err(StartupError::EntryCallbackOnNonServer { mesh, role });
    }
    if entry_callbacks.len() > 1 {
        return Err(StartupError::EntryCallbackTwice { mesh });
    }
    let entry_callback = entry_callbacks.pop();
    let timer_limits = super::timer_limits::validate(&mesh, node.timer_limits)?;

    Ok(MeshNodePlan {
        mesh,
        routing_id,
        topology: node.topology,
        bind_host,
        advertised_host,
        port: node.port,
        channel_servers,
        channel_clients,
        manual_peers,
        handlers,
        object_role: role,
        placement_weight,
        capacity_limits,
        activation_concurrency,
        location_options,
        relocation_options: root.relocation_options.clone(),
        mailbox_jobs: jobs as usize,
        mailbox_bytes: bytes as usize,
        timer_limits,
        object_types,
        entry_callback,
        entry_closing: node.entry_closing,
        tls: node.tls,
        transport: node.transport,
    })
}

fn weight_in_range(value: i64) -> Option<u16> {
    u16::try_from(value).ok().filter(|w| *w <= MAX_WEIGHT)
}

fn limit_in_range(value: i64) -> Option<u32> {
    u32::try_from(value).ok().filter(|v| *v <= MAX_SLOTS)
}

/// Placement weight, capacity limits and activation concurrency: Object Server settings.
fn validate_placement(
    mesh: &MeshName,
    role: ObjectRole,
    node: &PlacementSettings,
) -> Result<(u16, CapacityLimits, u32), StartupError> {
    if role != ObjectRole::Server {
        let set = [
            ("placementWeight", node.placement_weight.is_some()),
            ("actorLimit", node.actor_limit.is_some()),
            ("spotLimit", node.spot_limit.is_some()),
            ("spotTypeLimit", !node.spot_type_limits.is_empty()),
            (
                "activationConcurrency",
                node.activation_concurrency.is_some(),
            ),
        ];
        if let Some((setting, _)) = set.into_iter().find(|(_, is_set)| *is_set) {
            return Err(StartupError::ServerSettingOnNonServer {
                mesh: mesh.clone(),
                setting,
                role,
            });
        }
    }
    let weight = node.placement_weight.unwrap_or(i64::from(DEFAULT_WEIGHT));
    let placement_weight =
        weight_in_range(weight).ok_or_else(|| StartupError::PlacementWeightOutOfRange {
            mesh: mesh.clone(),
            value: weight,
        })?;

    let limit = |option: String, value: i64| {
        limit_in_range(value).ok_or_else(|| StartupError::CapacityLimitOutOfRange {
            mesh: mesh.clone(),
            option,
            value,
        })
    };
    let mut limits = CapacityLimits::unlimited();
    limits.actors = limit("actors".to_owned(), node.actor_limit.unwrap_or(0))?;
    limits.spots = limit("spots".to_owned(), node.spot_limit.unwrap_or(0))?;
    for (kind, stable_type, value) in &node.spot_type_limits {
        if !kind.is_spot() {
            return Err(StartupError::NotASpotKind {
                mesh: mesh.clone(),
                kind: *kind,
            });
        }
        let checked = limit(format!("spotType:{kind}:{stable_type}"), *value)?;
        if limits
            .spot_types
            .insert((*kind, stable_type.clone()), checked)
            .is_some()
        {
            return Err(StartupError::DuplicateSpotTypeLimit {
                mesh: mesh.clone(),
                kind: *kind,
                stable_type: stable_type.clone(),
            });
        }
    }

    let permits = node
        .activation_concurrency
        .unwrap_or(i64::from(DEFAULT_ACTIVATION_CONCURRENCY));
    let activation_concurrency = limit_in_range(permits).filter(|p| *p > 0).ok_or_else(|| {
        StartupError::ActivationConcurrencyOutOfRange {
            mesh: mesh.clone(),
            value: permits,
        }
    })?;
    Ok((placement_weight, limits, activation_concurrency))
}

/// The dispatch key of one handler registration; its packet name must be valid.
fn handler_key(mesh: &MeshName, spec: HandlerSpec) -> Result<HandlerKey, StartupError> {
    let packet_of = |packet: String| {
        PacketName::new(packet.clone()).map_err(|_| StartupError::InvalidPacketName {
            mesh: mesh.clone(),
            packet,
        })
    };
    Ok(match spec {
        HandlerSpec::NodeDirect { route, packet } => HandlerKey::NodeDirect {
            mesh: mesh.clone(),
            route,
            packet: packet_of(packet)?,
        },
        HandlerSpec::Channel {
            channel,
            route,
            packet,
        } => HandlerKey::Channel {
            channel,
            route,
            packet: packet_of(packet)?,
        },
    })
}

/// Checks every object type of one node (spec 06 §4, §15, §17, §23, §25).
fn validate_object_types(
    mesh: &MeshName,
    role: ObjectRole,
    types: Vec<crate::objects::Registration>,
) -> Result<Vec<super::plan::ObjectTypePlan>, StartupError> {
    use crate::objects::SpotExecution;
    use zlink_codec::records::ObjectKind;
    let mut seen = BTreeSet::new();
    let mut out = Vec::with_capacity(types.len());
    for r in types {
        let err_type = || r.stable_type.clone();
        if role != ObjectRole::Server {
            return Err(StartupError::ObjectTypeOnNonServer {
                mesh: mesh.clone(),
                stable_type: err_type(),
                role,
            });
        }
        let stable_type = zlink_codec::StableType::new(r.stable_type.clone()).map_err(|e| {
            StartupError::InvalidStableType {
                mesh: mesh.clone(),
                stable_type: err_type(),
                reason: e.to_string(),
            }
        })?;
        if !seen.insert(r.stable_type.clone()) {
            return Err(StartupError::DuplicateStableType {
                mesh: mesh.clone(),
                stable_type: err_type(),
            });
        }
        if let Some(key) = &r.duplicate_handler {
            return Err(StartupError::DuplicateObjectHandler {
                mesh: mesh.clone(),
                stable_type: err_type(),
                key: key.clone(),
            });
        }
        if !r.has_factory {
            return Err(StartupError::MissingFactory {
                mesh: mesh.clone(),
                stable_type: err_type(),
            });
        }
        let relocation = match r.choices.as_slice() {
            [] => {
                return Err(StartupError::RelocationPolicyNotChosen {
                    mesh: mesh.clone(),
                    stable_type: err_type(),
                });
            }
            [one] => *one,
            [first, second, ..] => {
                return Err(StartupError::RelocationPolicyChosenTwice {
                    mesh: mesh.clone(),
                    stable_type: err_type(),
                    first: *first,
                    second: *second,
                });
            }
        };
        let not_applicable = |setting| StartupError::SpotModeNotApplicable {
            mesh: mesh.clone(),
            stable_type: r.stable_type.clone(),
            kind: r.kind,
            setting,
        };
        let (execution, readiness) = match r.kind {
            ObjectKind::UserSpot => {
                let execution = r.execution.unwrap_or_default();
                let readiness = match (execution, r.readiness) {
                    (SpotExecution::PerActor, Some(_)) => return Err(not_applicable("readiness")),
                    (SpotExecution::PerActor, None) => None,
                    (_, r) => Some(r.unwrap_or_default()),
                };
                (Some(execution), readiness)
            }
            _ => {
                if r.execution.is_some() {
                    return Err(not_applicable("execution"));
                }
                if r.readiness.is_some() {
                    return Err(not_applicable("readiness"));
                }
                (None, None)
            }
        };
        out.push(super::plan::ObjectTypePlan {
            kind: r.kind,
            stable_type,
            relocation,
            execution,
            readiness,
            registration: r,
        });
    }
    Ok(out)
}

/// Without a Relocation Store, no Instance Spot type and no RecreateOnRelocation /
/// PreserveStateWith policy may exist (spec 06 §23, §25).
fn check_relocation_store_needs<H>(nodes: &[MeshNodePlan<H>]) -> Result<(), StartupError> {
    use crate::objects::RelocationChoice;
    for node in nodes {
        for t in &node.object_types {
            let reason = if t.kind == zlink_codec::records::ObjectKind::InstanceSpot {
                "an Instance Spot type stores its activation envelope there"
            } else if t.relocation != RelocationChoice::Disable {
                "RecreateOnRelocation and PreserveStateWith keep relocation payloads there"
            } else {
                continue;
            };
            return Err(StartupError::RelocationStoreRequired {
                mesh: node.mesh.clone(),
                stable_type: t.stable_type.as_str().to_owned(),
                reason,
            });
        }
    }
    Ok(())
}
