//! Root-wide rules: start once, stores, MeshName/ChannelName uniqueness, options, codecs,
//! deployment and network identity.

use std::time::Duration;

use zlink_codec::payload::{PayloadCodec, Selector};
use zlink_codec::records::{MAX_DECIMAL, ObjectRole};

use super::*;
use crate::host::config::{HostField, StartupErrorKind, StoreKind, StoreRequirement, Topology};
use crate::messaging::RouteKind;
use zlink_location::{ConfigError, LocationOptions};

#[test]
fn valid_configuration_becomes_the_plan() {
    let plan = start(
        root()
            .relocation_store(relocation_store())
            .application_version(7)
            .maintenance_wave("wave-a")
            .bind_host("0.0.0.0")
            .advertised_host("node1.example")
            .route_mesh(mesh("game"), |n| {
                n.object_role(ObjectRole::Server)
                    .port(7000)
                    .channel_server_weighted(ch("chat"), 250)
                    .channel_client(ch("billing"))
                    .channel_handler(ch("chat"), RouteKind::Request, "Say", 1)
                    .node_handler(RouteKind::Send, "Ping", 2)
                    .placement_weight(0)
                    .actor_limit(10)
            })
            .route_mesh(mesh("ops"), |n| n.channel_server(ch("admin"))),
    )
    .unwrap();
    assert!(plan.location_store().is_some() && plan.relocation_store().is_some());
    assert_eq!(plan.application_version(), 7);
    assert_eq!(plan.maintenance_wave(), Some("wave-a"));
    let game = plan.node(&mesh("game")).unwrap();
    assert_eq!(game.bind_host(), "0.0.0.0");
    assert_eq!(game.advertised_host(), "node1.example");
    assert_eq!(game.port(), 7000);
    assert_eq!(game.channel_servers().get(&ch("chat")), Some(&250));
    assert!(game.channel_clients().contains(&ch("billing")));
    assert_eq!(game.handlers().len(), 2);
    assert_eq!(game.placement_weight(), 0);
    assert_eq!(game.capacity_limits().actors, 10);
    assert_eq!(game.capacity_limits().spots, 0);
    assert_eq!(game.activation_concurrency(), 128);
    let ops = plan.node(&mesh("ops")).unwrap();
    assert_eq!(ops.channel_servers().get(&ch("admin")), Some(&100));
    assert_eq!(ops.placement_weight(), 100);
    assert_eq!(
        plan.channel_index().get(&ch("billing")),
        Some(&mesh("game"))
    );
    assert_eq!(plan.channel_index().get(&ch("admin")), Some(&mesh("ops")));
    assert_eq!(plan.nodes()[1].topology(), Topology::Automatic);
}

#[test]
fn same_root_started_twice_fails_startup() {
    let zlink = root().build();
    assert!(zlink.start_plan().is_ok());
    let second = zlink.start_plan().unwrap_err();
    assert!(matches!(second, StartupError::RootAlreadyStarted));
    assert_eq!(second.kind(), StartupErrorKind::AlreadyStarted);

    // A root whose first start failed does not start either.
    let failed = root().location_store(location_store()).build();
    assert!(failed.start_plan().is_err());
    assert!(matches!(
        failed.start_plan(),
        Err(StartupError::RootAlreadyStarted)
    ));
}

#[test]
fn same_mesh_name_twice_fails_startup() {
    let err = start(
        root()
            .route_mesh(mesh("game"), |n| n)
            .route_mesh(mesh("game"), |n| n),
    )
    .unwrap_err();
    assert!(matches!(&err, StartupError::DuplicateMeshName { mesh: m } if m == &mesh("game")));
    assert_eq!(err.kind(), StartupErrorKind::Duplicate);
}

#[test]
fn same_channel_on_two_meshes_fails_startup_for_every_role_pair() {
    for (first, second) in chat_role_pairs() {
        let err = start(
            root()
                .route_mesh(mesh("a"), first)
                .route_mesh(mesh("b"), second),
        )
        .unwrap_err();
        assert!(
            matches!(&err, StartupError::ChannelOnTwoMeshes { channel, first, second }
                if channel == &ch("chat") && first == &mesh("a") && second == &mesh("b")),
            "{err}"
        );
    }
}

#[test]
fn location_store_registered_twice_fails_startup() {
    let err = start(root().location_store(location_store())).unwrap_err();
    assert!(matches!(
        err,
        StartupError::StoreRegisteredTwice {
            store: StoreKind::Location,
            count: 2
        }
    ));
}

#[test]
fn relocation_store_registered_twice_fails_startup() {
    assert!(start(root().relocation_store(relocation_store())).is_ok());
    let err = start(
        root()
            .relocation_store(relocation_store())
            .relocation_store(relocation_store()),
    )
    .unwrap_err();
    assert!(matches!(
        err,
        StartupError::StoreRegisteredTwice {
            store: StoreKind::Relocation,
            count: 2
        }
    ));
}

#[test]
fn object_role_without_location_store_fails_startup() {
    for role in [ObjectRole::Client, ObjectRole::Server] {
        let err = start(ZLink::builder_with_handlers().route_mesh(mesh("m"), |n| {
            n.object_role(role).topology(Topology::Manual)
        }))
        .unwrap_err();
        assert!(
            matches!(err, StartupError::LocationStoreRequired {
                requirement: StoreRequirement::ObjectRole(r), ..
            } if r == role),
            "{err}"
        );
        assert_eq!(err.kind(), StartupErrorKind::MissingStore);
    }
    // Role None with manual topology needs no store.
    let none = ZLink::builder().route_mesh(mesh("m"), |n| n.topology(Topology::Manual));
    assert!(none.build().start_plan().is_ok());
}

#[test]
fn automatic_topology_without_location_store_fails_startup() {
    let err = ZLink::builder()
        .route_mesh(mesh("m"), |n| n)
        .build()
        .start_plan()
        .unwrap_err();
    assert!(matches!(
        err,
        StartupError::LocationStoreRequired {
            requirement: StoreRequirement::AutomaticDiscovery,
            ..
        }
    ));
}

#[test]
fn route_cache_and_follow_gap_bounds() {
    let with = |cache: u64, follow: u64| {
        start(
            root().location_options(
                LocationOptions::default()
                    .route_cache_max_age(Duration::from_millis(cache))
                    .message_follow_duration(Duration::from_millis(follow)),
            ),
        )
    };
    // Exactly 5 s below: accepted; 1 ms less room: rejected.
    assert!(with(25_000, 30_000).is_ok());
    let err = with(25_001, 30_000).unwrap_err();
    assert!(matches!(
        err,
        StartupError::LocationOptions {
            mesh: None,
            source: ConfigError::RouteCacheVsFollow { .. }
        }
    ));
    assert_eq!(err.kind(), StartupErrorKind::InvalidOptions);
    // Both 0 turns both features off.
    assert!(with(0, 0).is_ok());
}

#[test]
fn relocation_chunk_limit_above_the_frame_bound_fails_startup() {
    use zlink_relocation::transfer::MAX_CHUNK_LIMIT;
    let with = |limit: usize| {
        start(root().relocation_options(
            crate::objects::RelocationOptions::default().payload_chunk_limit(limit),
        ))
    };
    assert!(with(MAX_CHUNK_LIMIT).is_ok());
    let err = with(MAX_CHUNK_LIMIT + 1).unwrap_err();
    assert!(matches!(
        err,
        StartupError::RelocationOptions {
            source: crate::host::config::RelocationConfigError::Transfer(_)
        }
    ));
    assert_eq!(err.kind(), StartupErrorKind::InvalidOptions);
}

#[test]
fn node_override_breaking_the_gap_fails_startup() {
    assert!(start_node(|n| n.route_cache_max_age(Duration::from_secs(25))).is_ok());
    let err = start_node(|n| n.route_cache_max_age(Duration::from_millis(25_001))).unwrap_err();
    assert!(matches!(
        &err,
        StartupError::LocationOptions { mesh: Some(m), source: ConfigError::RouteCacheVsFollow { .. } }
            if m == &mesh("m")
    ));
    let plan = start_node(|n| n.message_follow_duration(Duration::ZERO)).unwrap();
    assert_eq!(
        plan.nodes()[0].location_options().message_follow_duration,
        Duration::ZERO
    );
}

#[test]
fn invalid_codec_content_type_fails_startup() {
    let ok = root().codec(PayloadCodec::message_pack(), Selector::any());
    assert_eq!(
        start(ok).unwrap().codecs().select::<u32>(),
        "application/msgpack"
    );
    let bad = root().codec(
        PayloadCodec::json().with_content_type("application/json; charset=utf-8"),
        Selector::any(),
    );
    assert!(matches!(start(bad), Err(StartupError::Codec(_))));
}

#[test]
fn application_version_bounds() {
    assert!(start(root().application_version(0)).is_ok());
    assert!(start(root().application_version(MAX_DECIMAL)).is_ok());
    let err = start(root().application_version(MAX_DECIMAL + 1)).unwrap_err();
    assert!(
        matches!(err, StartupError::ApplicationVersionOutOfRange { value } if value == MAX_DECIMAL + 1)
    );
}

#[test]
fn maintenance_wave_bounds() {
    assert!(start(root().maintenance_wave("w")).is_ok());
    assert!(start(root().maintenance_wave("w".repeat(255))).is_ok());
    for bad in [String::new(), "w".repeat(256), "a\0b".to_owned()] {
        let err = start(root().maintenance_wave(bad)).unwrap_err();
        assert!(
            matches!(err, StartupError::InvalidMaintenanceWave { .. }),
            "{err}"
        );
    }
}

#[test]
fn invalid_hosts_fail_startup() {
    for good in ["127.0.0.1", "::1", "node-1.example", "localhost"] {
        assert!(start(root().bind_host(good)).is_ok(), "{good}");
    }
    for bad in [
        "",
        "bad host",
        "-lead.example",
        "a..b",
        "under_score",
        "[::1]",
    ] {
        let err = start(root().bind_host(bad)).unwrap_err();
        assert!(
            matches!(
                &err,
                StartupError::InvalidHost {
                    mesh: None,
                    field: HostField::Bind,
                    ..
                }
            ),
            "{bad}: {err}"
        );
        let err = start_node(|n| n.advertised_host(bad)).unwrap_err();
        assert!(
            matches!(
                &err,
                StartupError::InvalidHost {
                    mesh: Some(_),
                    field: HostField::Advertised,
                    ..
                }
            ),
            "{bad}: {err}"
        );
    }
    assert!(start(root().bind_host(format!("{}.example", "a".repeat(63)))).is_ok());
    assert!(start(root().bind_host(format!("{}.example", "a".repeat(64)))).is_err());
}

#[test]
fn unspecified_advertised_host_fails_startup() {
    // Binding every interface needs an advertised host peers can reach.
    let err = start(root().bind_host("0.0.0.0").route_mesh(mesh("m"), |n| n)).unwrap_err();
    assert!(
        matches!(err, StartupError::UnspecifiedAdvertisedHost { host, .. } if host == "0.0.0.0")
    );
    let err = start_node(|n| n.advertised_host("::")).unwrap_err();
    assert!(matches!(
        err,
        StartupError::UnspecifiedAdvertisedHost { .. }
    ));
    let plan = start(
        root()
            .bind_host("0.0.0.0")
            .route_mesh(mesh("m"), |n| n.advertised_host("10.1.2.3")),
    )
    .unwrap();
    assert_eq!(plan.nodes()[0].bind_host(), "0.0.0.0");
    assert_eq!(plan.nodes()[0].advertised_host(), "10.1.2.3");
}
