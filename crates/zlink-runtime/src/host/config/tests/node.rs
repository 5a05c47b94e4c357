//! MeshNode rules: memberships, handlers, routing ids, manual peers and placement settings.

use zlink_codec::records::{MAX_SLOTS, ObjectKind, ObjectRole};
use zlink_codec::{RoutingId, StableType};

use super::*;
use crate::host::config::{
    EndpointError, HostProblem, MeshNodePlan, RoutingIdPlan, StartupErrorKind, Topology,
};
use crate::messaging::{HandlerKey, PacketName, RouteKind};

fn node_of(plan: ZLinkPlan<u32>) -> MeshNodePlan<u32> {
    plan.nodes.into_iter().next().unwrap()
}

#[test]
fn duplicate_channel_role_on_one_node_fails_startup() {
    for (first, second) in chat_role_pairs() {
        let err = start_node(|n| second(first(n))).unwrap_err();
        assert!(
            matches!(&err, StartupError::DuplicateChannelRole { mesh: m, channel }
                if m == &mesh("m") && channel == &ch("chat")),
            "{err}"
        );
    }
}

#[test]
fn channel_handler_without_server_membership_fails_startup() {
    let err = start_node(|n| n.channel_handler(ch("chat"), RouteKind::Send, "Say", 1)).unwrap_err();
    assert!(matches!(&err,
        StartupError::ChannelHandlerWithoutServerMembership { channel, .. } if channel == &ch("chat")));
    assert_eq!(err.kind(), StartupErrorKind::InvalidCombination);
    // A Server membership of another channel does not count either.
    let err = start_node(|n| {
        n.channel_server(ch("other"))
            .channel_handler(ch("chat"), RouteKind::Send, "Say", 1)
    })
    .unwrap_err();
    assert!(matches!(
        err,
        StartupError::ChannelHandlerWithoutServerMembership { .. }
    ));
    // Calling-only and Node direct nodes need no membership.
    assert!(
        start_node(|n| n
            .channel_client(ch("chat"))
            .node_handler(RouteKind::Send, "P", 1))
        .is_ok()
    );
}

#[test]
fn channel_handler_on_client_route_fails_startup() {
    let err = start_node(|n| {
        n.channel_client(ch("chat"))
            .channel_handler(ch("chat"), RouteKind::Request, "Say", 1)
    })
    .unwrap_err();
    assert!(matches!(
        err,
        StartupError::ChannelHandlerWithoutServerMembership { .. }
    ));
}

#[test]
fn duplicate_handler_key_fails_startup() {
    let err = start_node(|n| {
        n.node_handler(RouteKind::Send, "Ping", 1)
            .node_handler(RouteKind::Send, "Ping", 2)
    })
    .unwrap_err();
    assert!(matches!(&err, StartupError::DuplicateHandlerKey {
        key: HandlerKey::NodeDirect { packet, route: RouteKind::Send, .. } } if packet.as_str() == "Ping"));
    let err = start_node(|n| {
        n.channel_server(ch("chat"))
            .channel_handler(ch("chat"), RouteKind::Request, "Say", 1)
            .channel_handler(ch("chat"), RouteKind::Request, "Say", 2)
    })
    .unwrap_err();
    assert!(matches!(
        err,
        StartupError::DuplicateHandlerKey {
            key: HandlerKey::Channel { .. }
        }
    ));
}

#[test]
fn same_packet_under_other_owner_or_kind_is_allowed() {
    let plan = start_node(|n| {
        n.channel_server(ch("a"))
            .channel_server(ch("b"))
            .channel_handler(ch("a"), RouteKind::Send, "Say", 1)
            .channel_handler(ch("b"), RouteKind::Send, "Say", 2)
            .channel_handler(ch("a"), RouteKind::Request, "Say", 3)
            .node_handler(RouteKind::Send, "Say", 4)
            .node_handler(RouteKind::Request, "Say", 5)
    })
    .unwrap();
    let mut node = node_of(plan);
    let handlers = node.take_handlers();
    assert_eq!(handlers.len(), 5);
    let key = HandlerKey::Channel {
        channel: ch("b"),
        route: RouteKind::Send,
        packet: PacketName::new("Say").unwrap(),
    };
    assert_eq!(handlers.get(&key), Some(&2));
    assert!(node.handlers().is_empty());
}

#[test]
fn empty_packet_name_fails_startup() {
    let err = start_node(|n| n.node_handler(RouteKind::Send, "", 1)).unwrap_err();
    assert!(matches!(err, StartupError::InvalidPacketName { .. }));
    let err = start_node(|n| n.node_handler(RouteKind::Send, "x".repeat(256), 1)).unwrap_err();
    assert!(matches!(err, StartupError::InvalidPacketName { .. }));
    assert!(start_node(|n| n.node_handler(RouteKind::Send, "x".repeat(255), 1)).is_ok());
}

#[test]
fn object_client_with_node_direct_handler_fails_startup() {
    let err = start_node(|n| {
        n.object_role(ObjectRole::Client)
            .node_handler(RouteKind::Request, "Ping", 1)
    })
    .unwrap_err();
    assert!(matches!(
        err,
        StartupError::NodeDirectHandlerOnObjectClient { .. }
    ));
    // An Object Client may still serve a Channel; None and Server may have Node direct handlers.
    assert!(
        start_node(|n| {
            n.object_role(ObjectRole::Client)
                .channel_server(ch("chat"))
                .channel_handler(ch("chat"), RouteKind::Send, "Say", 1)
        })
        .is_ok()
    );
    for role in [ObjectRole::None, ObjectRole::Server] {
        assert!(start_node(|n| n.object_role(role).node_handler(RouteKind::Send, "P", 1)).is_ok());
    }
}

#[test]
fn routing_id_prefix_length_bounds() {
    for len in [1, 64] {
        let plan = start_node(|n| n.routing_id_prefix("p".repeat(len))).unwrap();
        assert_eq!(
            plan.nodes()[0].routing_id_plan(),
            &RoutingIdPlan::Automatic {
                prefix: "p".repeat(len)
            }
        );
    }
    for len in [0, 65] {
        let err = start_node(|n| n.routing_id_prefix("p".repeat(len))).unwrap_err();
        assert!(
            matches!(err, StartupError::InvalidRoutingIdPrefix { .. }),
            "{len}"
        );
        assert_eq!(err.kind(), StartupErrorKind::InvalidFormat);
    }
}

#[test]
fn routing_id_prefix_rejects_characters_outside_the_set() {
    assert!(start_node(|n| n.routing_id_prefix("Az09._-")).is_ok());
    for bad in ["a b", "a/b", "a:b", "é", "a\0"] {
        let err = start_node(|n| n.routing_id_prefix(bad)).unwrap_err();
        assert!(
            matches!(err, StartupError::InvalidRoutingIdPrefix { .. }),
            "{bad:?}"
        );
    }
}

#[test]
fn automatic_routing_id_is_prefix_and_fresh_uuid() {
    let plan = start_node(|n| n.routing_id_prefix("lobby")).unwrap();
    let node = &plan.nodes()[0];
    let first = node.new_routing_id();
    let second = node.new_routing_id();
    assert_ne!(first, second);
    let text = String::from_utf8(first.as_bytes().to_vec()).unwrap();
    let uuid = text.strip_prefix("lobby-").unwrap();
    let parsed = uuid::Uuid::parse_str(uuid).unwrap();
    assert_eq!(parsed.get_version_num(), 4);
    assert_eq!(uuid, uuid.to_lowercase());
    // The longest prefix still yields a valid routing id.
    let plan = start_node(|n| n.routing_id_prefix("p".repeat(64))).unwrap();
    assert_eq!(
        plan.nodes()[0].new_routing_id().as_bytes().len(),
        64 + 1 + 36
    );
}

fn manual_none(n: MeshNodeBuilder<u32>) -> MeshNodeBuilder<u32> {
    n.topology(Topology::Manual).object_role(ObjectRole::None)
}

#[test]
fn fixed_routing_id_needs_role_none() {
    let plan = start_node(|n| manual_none(n).fixed_routing_id(b"rid-1".to_vec())).unwrap();
    let rid = RoutingId::new(b"rid-1".to_vec()).unwrap();
    assert_eq!(plan.nodes()[0].new_routing_id(), rid);
    for role in [ObjectRole::Client, ObjectRole::Server] {
        let err = start_node(|n| {
            manual_none(n)
                .object_role(role)
                .fixed_routing_id(b"r".to_vec())
        })
        .unwrap_err();
        assert!(
            matches!(err, StartupError::FixedRoutingIdNeedsRoleNone { role: r, .. } if r == role)
        );
    }
}

#[test]
fn fixed_routing_id_needs_manual_topology() {
    let err = start_node(|n| n.fixed_routing_id(b"rid-1".to_vec())).unwrap_err();
    assert!(matches!(
        err,
        StartupError::FixedRoutingIdWithAutomaticTopology { .. }
    ));
}

#[test]
fn fixed_routing_id_length_bounds() {
    for len in [1, 255] {
        assert!(start_node(|n| manual_none(n).fixed_routing_id(vec![b'r'; len])).is_ok());
    }
    for len in [0, 256] {
        let err = start_node(|n| manual_none(n).fixed_routing_id(vec![b'r'; len])).unwrap_err();
        assert!(matches!(err, StartupError::InvalidFixedRoutingId { len: l, .. } if l == len));
    }
}

#[test]
fn manual_peer_port_bounds() {
    for good in ["10.0.0.1:1", "10.0.0.1:65535"] {
        assert!(start_node(|n| n.manual_peer(good)).is_ok(), "{good}");
    }
    for (bad, why) in [
        (
            "10.0.0.1:0",
            EndpointError::PortOutOfRange { port: "0".into() },
        ),
        (
            "10.0.0.1:65536",
            EndpointError::PortOutOfRange {
                port: "65536".into(),
            },
        ),
        (
            "10.0.0.1:-1",
            EndpointError::PortNotDecimal { port: "-1".into() },
        ),
        (
            "10.0.0.1:",
            EndpointError::PortNotDecimal { port: "".into() },
        ),
        (
            "10.0.0.1:+80",
            EndpointError::PortNotDecimal { port: "+80".into() },
        ),
    ] {
        let err = start_node(|n| n.manual_peer(bad)).unwrap_err();
        assert!(
            matches!(&err, StartupError::InvalidPeerEndpoint { endpoint, reason, .. }
                if endpoint == bad && *reason == why),
            "{bad}: {err}"
        );
    }
}

#[test]
fn manual_peer_endpoint_format() {
    let plan =
        start_node(|n| n.manual_peer("[::1]:7000").manual_peer("peer.example:7001")).unwrap();
    let peers = plan.nodes()[0].manual_peers();
    assert_eq!(peers[0].endpoint().host(), "::1");
    assert_eq!(peers[0].endpoint().to_string(), "[::1]:7000");
    assert_eq!(peers[1].endpoint().to_string(), "peer.example:7001");
    assert!(peers[0].expected_routing_id().is_none());
    for (bad, why) in [
        ("", EndpointError::MissingPort),
        ("7000", EndpointError::MissingPort),
        ("::1:7000", EndpointError::UnbracketedIpv6),
        ("[::1]7000", EndpointError::UnclosedIpv6Brackets),
        (
            "[nothost]:7000",
            EndpointError::NotIpv6 {
                addr: "nothost".into(),
            },
        ),
        (
            "bad host:7000",
            EndpointError::Host(HostProblem::LabelCharacters),
        ),
        (":7000", EndpointError::Host(HostProblem::Empty)),
    ] {
        let err = start_node(|n| n.manual_peer(bad)).unwrap_err();
        assert!(
            matches!(&err, StartupError::InvalidPeerEndpoint { reason, .. } if *reason == why),
            "{bad:?}: {err}"
        );
    }
}

#[test]
fn manual_peer_expected_rid_length_bounds() {
    for len in [1, 255] {
        let plan = start_node(|n| n.manual_peer_expecting("h:1", vec![7; len])).unwrap();
        let rid = plan.nodes()[0].manual_peers()[0]
            .expected_routing_id()
            .unwrap();
        assert_eq!(rid.as_bytes().len(), len);
    }
    for len in [0, 256] {
        let err = start_node(|n| n.manual_peer_expecting("h:1", vec![7; len])).unwrap_err();
        assert!(matches!(err, StartupError::InvalidExpectedRoutingId { len: l, .. } if l == len));
    }
}

#[test]
fn duplicate_manual_peer_fails_startup() {
    let err = start_node(|n| {
        n.manual_peer("h:1")
            .manual_peer_expecting("h:1", b"r".to_vec())
    })
    .unwrap_err();
    assert!(matches!(err, StartupError::DuplicateManualPeer { .. }));
    assert!(start_node(|n| n.manual_peer("h:1").manual_peer("h:2")).is_ok());
}

#[test]
fn channel_weight_bounds() {
    for w in [0, 10_000] {
        let plan = start_node(|n| n.channel_server_weighted(ch("c"), w)).unwrap();
        assert_eq!(plan.nodes()[0].channel_servers()[&ch("c")], w as u16);
    }
    for w in [-1, 10_001] {
        let err = start_node(|n| n.channel_server_weighted(ch("c"), w)).unwrap_err();
        assert!(matches!(err, StartupError::ChannelWeightOutOfRange { value, .. } if value == w));
        assert_eq!(err.kind(), StartupErrorKind::OutOfRange);
    }
}

fn server(n: MeshNodeBuilder<u32>) -> MeshNodeBuilder<u32> {
    n.object_role(ObjectRole::Server)
}

#[test]
fn placement_weight_bounds() {
    for w in [0, 10_000] {
        let plan = start_node(|n| server(n).placement_weight(w)).unwrap();
        assert_eq!(i64::from(plan.nodes()[0].placement_weight()), w);
    }
    for w in [-1, 10_001] {
        let err = start_node(|n| server(n).placement_weight(w)).unwrap_err();
        assert!(matches!(err, StartupError::PlacementWeightOutOfRange { value, .. } if value == w));
    }
}

#[test]
fn capacity_limit_bounds() {
    let max = i64::from(MAX_SLOTS);
    let t = || StableType::new("Room").unwrap();
    for v in [0, max] {
        let plan = start_node(|n| {
            server(n)
                .actor_limit(v)
                .spot_limit(v)
                .spot_type_limit(ObjectKind::UserSpot, t(), v)
        })
        .unwrap();
        let limits = plan.nodes()[0].capacity_limits();
        assert_eq!(i64::from(limits.actors), v);
        assert_eq!(i64::from(limits.spots), v);
        assert_eq!(
            i64::from(limits.spot_types[&(ObjectKind::UserSpot, t())]),
            v
        );
    }
    for v in [-1, max + 1] {
        for (option, f) in [
            (
                "actors",
                Box::new(move |n| server(n).actor_limit(v)) as Box<dyn FnOnce(_) -> _>,
            ),
            ("spots", Box::new(move |n| server(n).spot_limit(v))),
            (
                "spotType:instanceSpot:Room",
                Box::new(move |n| server(n).spot_type_limit(ObjectKind::InstanceSpot, t(), v)),
            ),
        ] {
            let err = start_node(f).unwrap_err();
            assert!(
                matches!(&err, StartupError::CapacityLimitOutOfRange { option: o, value, .. }
                    if o == option && *value == v),
                "{err}"
            );
        }
    }
}

#[test]
fn spot_type_limit_needs_a_spot_kind_once() {
    let t = || StableType::new("Room").unwrap();
    let err = start_node(|n| server(n).spot_type_limit(ObjectKind::Actor, t(), 1)).unwrap_err();
    assert!(matches!(
        err,
        StartupError::NotASpotKind {
            kind: ObjectKind::Actor,
            ..
        }
    ));
    let err = start_node(|n| {
        server(n)
            .spot_type_limit(ObjectKind::UserSpot, t(), 1)
            .spot_type_limit(ObjectKind::UserSpot, t(), 2)
    })
    .unwrap_err();
    assert!(matches!(err, StartupError::DuplicateSpotTypeLimit { .. }));
    // The same stable type under the other Spot kind is a different limit.
    assert!(
        start_node(|n| {
            server(n)
                .spot_type_limit(ObjectKind::UserSpot, t(), 1)
                .spot_type_limit(ObjectKind::InstanceSpot, t(), 2)
        })
        .is_ok()
    );
}

#[test]
fn activation_concurrency_bounds() {
    let max = i64::from(MAX_SLOTS);
    for v in [1, max] {
        let plan = start_node(|n| server(n).activation_concurrency(v)).unwrap();
        assert_eq!(i64::from(plan.nodes()[0].activation_concurrency()), v);
    }
    for v in [-1, 0, max + 1] {
        let err = start_node(|n| server(n).activation_concurrency(v)).unwrap_err();
        assert!(
            matches!(err, StartupError::ActivationConcurrencyOutOfRange { value, .. } if value == v)
        );
    }
}

#[test]
fn placement_settings_on_non_server_fail_startup() {
    type Set = fn(MeshNodeBuilder<u32>) -> MeshNodeBuilder<u32>;
    let settings: [(&str, Set); 5] = [
        ("placementWeight", |n| n.placement_weight(100)),
        ("actorLimit", |n| n.actor_limit(0)),
        ("spotLimit", |n| n.spot_limit(0)),
        ("spotTypeLimit", |n| {
            n.spot_type_limit(ObjectKind::UserSpot, StableType::new("R").unwrap(), 0)
        }),
        ("activationConcurrency", |n| n.activation_concurrency(128)),
    ];
    for role in [ObjectRole::None, ObjectRole::Client] {
        for (name, set) in settings {
            let err = start_node(|n| set(n.object_role(role))).unwrap_err();
            assert!(
                matches!(err, StartupError::ServerSettingOnNonServer { setting, role: r, .. }
                    if setting == name && r == role),
                "{name}"
            );
        }
    }
}

proptest::proptest! {
    /// Any prefix is accepted exactly when it is 1..=64 characters of `[A-Za-z0-9._-]`, and an
    /// accepted prefix always issues `<prefix>-<uuid>`.
    #[test]
    fn routing_id_prefix_accepted_exactly_within_charset_and_length(prefix in "[A-Za-z0-9._ /:é-]{0,70}") {
        let valid = (1..=64).contains(&prefix.len())
            && prefix.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
        let result = start_node(|n| n.routing_id_prefix(prefix.clone()));
        proptest::prop_assert_eq!(result.is_ok(), valid);
        if let Ok(plan) = result {
            let rid = plan.nodes()[0].new_routing_id();
            let expected = format!("{prefix}-");
            proptest::prop_assert!(rid.as_bytes().starts_with(expected.as_bytes()));
        }
    }

    /// A manual peer `host:port` round-trips through its displayed form for every port.
    #[test]
    fn manual_peer_endpoint_round_trips(a in 0u8..=255, b in 0u8..=255, port in 1u16..=65535, v6 in proptest::bool::ANY) {
        let text = if v6 { format!("[fe80::{a:x}:{b:x}]:{port}") } else { format!("10.{a}.{b}.1:{port}") };
        let plan = start_node(|n| n.manual_peer(text.clone())).unwrap();
        let endpoint = plan.nodes()[0].manual_peers()[0].endpoint().clone();
        proptest::prop_assert_eq!(endpoint.port(), port);
        proptest::prop_assert_eq!(endpoint.to_string(), text);
    }
}

#[test]
fn mailbox_limit_bounds() {
    let max_jobs = (1i64 << 31) - 1;
    let max_bytes = 1i64 << 62;
    for (jobs, bytes) in [(1, 1), (max_jobs, max_bytes)] {
        let plan = start_node(|n| n.mailbox_limits(jobs, bytes)).unwrap();
        assert_eq!(plan.nodes()[0].mailbox_jobs() as i64, jobs);
        assert_eq!(plan.nodes()[0].mailbox_bytes() as i64, bytes);
    }
    for (jobs, bytes, axis, value) in [
        (0, 1, "jobs", 0),
        (max_jobs + 1, 1, "jobs", max_jobs + 1),
        (1, 0, "bytes", 0),
        (1, max_bytes + 1, "bytes", max_bytes + 1),
    ] {
        let err = start_node(|n| n.mailbox_limits(jobs, bytes)).unwrap_err();
        assert!(
            matches!(err, StartupError::MailboxLimitOutOfRange { axis: a, value: v, .. } if a == axis && v == value),
            "{err:?}"
        );
    }
}
