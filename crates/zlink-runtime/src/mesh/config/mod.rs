//! The root builder and MeshNode builder configuration with startup validation (spec 06 §2,
//! §4, §5, §9, §12, §13, §22, §23).
//!
//! [`ZLink::builder`] collects stores, location options, codecs, deployment and network
//! identity, hosted services and RouteMesh registrations ([`MeshNodeBuilder`]). Nothing is
//! checked while building: [`ZLink::start_plan`] validates everything once, before any socket
//! binds or Store request, and returns the immutable [`ZLinkPlan`] or the first
//! [`StartupError`]. A root starts once; a second `start_plan` is
//! [`StartupError::RootAlreadyStarted`].
//!
//! ```
//! use zlink_runtime::mesh::config::{Topology, ZLink};
//! use zlink_codec::{ChannelName, MeshName};
//!
//! let root = ZLink::builder()
//!     .route_mesh(MeshName::new("game").unwrap(), |node| {
//!         node.topology(Topology::Manual)
//!             .routing_id_prefix("lobby")
//!             .channel_server(ChannelName::new("chat").unwrap())
//!             .manual_peer("10.0.0.7:7000")
//!     })
//!     .build();
//! let plan = root.start_plan().unwrap();
//! assert!(plan.nodes()[0].new_routing_id().to_string().len() > 0);
//! // The same root never starts twice.
//! assert!(root.start_plan().is_err());
//! ```
//!
//! Hosted services (spec 06 §22) start one at a time in registration order through
//! [`start_hosted_services`] and stop in reverse through [`RunningHostedServices::stop`].
//!
//! # Verification map
//!
//! Each rule is one test in `tests/`:
//!
//! | rule (spec 06) | test |
//! |---|---|
//! | same root started twice (§2) | `same_root_started_twice_fails_startup` |
//! | same MeshName twice (§2) | `same_mesh_name_twice_fails_startup` |
//! | same ChannelName on two RouteMeshes, any role (§2) | `same_channel_on_two_meshes_fails_startup_for_every_role_pair` |
//! | duplicate Client/Server role for one ChannelName on one node (§4) | `duplicate_channel_role_on_one_node_fails_startup` |
//! | Channel handler needs a Server membership (§23) | `channel_handler_without_server_membership_fails_startup`, `channel_handler_on_client_route_fails_startup` |
//! | duplicate handler keys (§9) | `duplicate_handler_key_fails_startup`, `same_packet_under_other_owner_or_kind_is_allowed` |
//! | invalid packet name (empty, over 255 bytes, control characters) | `empty_packet_name_fails_startup` |
//! | Object Client with a Node direct handler (§4) | `object_client_with_node_direct_handler_fails_startup` |
//! | Object Client/Server without Location Store (§13) | `object_role_without_location_store_fails_startup` |
//! | automatic topology without Location Store (§23) | `automatic_topology_without_location_store_fails_startup` |
//! | routing-id prefix charset and 1..=64 length (§23) | `routing_id_prefix_length_bounds`, `routing_id_prefix_rejects_characters_outside_the_set` |
//! | fixed RID only with role None and manual topology (§23) | `fixed_routing_id_needs_role_none`, `fixed_routing_id_needs_manual_topology`, `fixed_routing_id_length_bounds` |
//! | RID `<prefix>-<uuid v4>`, new per lifecycle (§4) | `automatic_routing_id_is_prefix_and_fresh_uuid` |
//! | manual peer endpoint `host:port`, port 1..=65535 (§5) | `manual_peer_port_bounds`, `manual_peer_endpoint_format` |
//! | manual peer expected RID 1..=255 bytes (§5) | `manual_peer_expected_rid_length_bounds` |
//! | prefix accepted exactly within charset and length (proptest) | `routing_id_prefix_accepted_exactly_within_charset_and_length` |
//! | manual peer endpoints round-trip for every port (proptest) | `manual_peer_endpoint_round_trips` |
//! | manual peer registered twice | `duplicate_manual_peer_fails_startup` |
//! | Channel Server weight 0..=10000, default 100 (§4) | `channel_weight_bounds` |
//! | placement weight 0..=10000, default 100 (§4) | `placement_weight_bounds` |
//! | capacity limits 0..=2^31-1, negative fails (§4) | `capacity_limit_bounds`, `spot_type_limit_needs_a_spot_kind_once` |
//! | activation concurrency positive, default 128 (§4) | `activation_concurrency_bounds` |
//! | placement settings only on an Object Server (§23) | `placement_settings_on_non_server_fail_startup` |
//! | route cache / Message Follow combination (§4) | `route_cache_and_follow_gap_bounds`, `node_override_breaking_the_gap_fails_startup` |
//! | application version 0..=2^63-1 (§23) | `application_version_bounds` |
//! | maintenance wave 1..=255 bytes, no NUL (§23) | `maintenance_wave_bounds` |
//! | bind/advertised host valid; advertised never unspecified (§23) | `invalid_hosts_fail_startup`, `unspecified_advertised_host_fails_startup` |
//! | Location Store / Relocation Store registered twice (§13) | `location_store_registered_twice_fails_startup`, `relocation_store_registered_twice_fails_startup` |
//! | invalid codec registration (§12) | `invalid_codec_content_type_fails_startup` |
//! | mailbox bounds: jobs 1..=2^31-1, bytes 1..=2^62 (§11) | `mailbox_limit_bounds` |
//! | object types: only on an Object Server (§4) | `object_type_on_a_non_server_fails_startup` |
//! | the same stable type twice fails startup, whatever the kinds; case-sensitive (§4, §25) | `same_stable_type_twice_fails_startup_whatever_the_kinds` |
//! | stable type 1..=255 UTF-8 bytes | `stable_type_length_bounds` |
//! | a factory is required | `object_type_without_a_factory_fails_startup` |
//! | exactly one relocation policy per factory (§25) | `factory_choosing_no_relocation_policy_fails_startup`, `factory_choosing_two_relocation_policies_fails_startup` |
//! | an Instance Spot type, RecreateOnRelocation or PreserveStateWith needs exactly one Relocation Store (§23, §25) | `instance_spot_or_state_policy_without_a_relocation_store_fails_startup` |
//! | execution/readiness modes only where they apply (§17; 28 §5) | `spot_modes_where_they_do_not_apply_fail_startup` |
//! | registered types become the plan with their one policy and modes | `object_types_become_the_plan_with_their_one_policy_and_modes` |
//! | a valid configuration becomes the plan | `valid_configuration_becomes_the_plan` |
//! | hosted services: start in order, stop in reverse, failed start stops what started (§22) | `hosted_services_start_in_order_and_stop_in_reverse`, `failed_hosted_start_stops_started_services_in_reverse`, `hosted_stop_failures_are_recorded_and_shutdown_continues` |
//!
//! Channel Server weight on a Client route is impossible by construction:
//! [`MeshNodeBuilder::channel_client`] takes no weight. So are a state adapter of the wrong
//! kind (an Actor type takes only an `ActorStateAdapter` of its own state, a Spot type only a
//! `SpotStateAdapter`) and actor handlers on an Instance Spot (its configure step has none).

mod error;
mod hosted;
mod node;
mod plan;
mod relocation_options;
mod root;
mod validate;

#[cfg(test)]
mod tests;

pub use error::{HostField, StartupError, StartupErrorKind, StoreKind, StoreRequirement};
pub use hosted::{
    HostedError, HostedFailure, HostedFuture, HostedService, HostedStage, HostedStartError,
    RunningHostedServices, start_hosted_services,
};
pub use node::{
    DEFAULT_ACTIVATION_CONCURRENCY, DEFAULT_ROUTING_ID_PREFIX, MeshNodeBuilder, Topology,
};
pub use plan::{ManualPeer, MeshNodePlan, ObjectTypePlan, PeerEndpoint, RoutingIdPlan, ZLinkPlan};
pub use relocation_options::{RelocationConfigError, RelocationOptions};
pub use root::{DEFAULT_BIND_HOST, ZLink, ZLinkBuilder};
pub use validate::{MAX_MAINTENANCE_WAVE_LEN, MAX_ROUTING_ID_PREFIX_LEN};

pub(crate) use validate::parse_endpoint as parse_peer_endpoint;
