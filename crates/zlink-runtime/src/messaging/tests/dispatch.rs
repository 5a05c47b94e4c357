//! Handler registration and dispatch (spec 06 §9, §20).

use super::*;

#[test]
fn registering_the_same_dispatch_key_twice_fails_startup() {
    let err = Dispatcher::builder(Registry::json_only())
        .node_request::<Ping, _, _>(mesh(), |p, _| async move { Ok(Pong { n: p.n }) })
        .node_request::<Ping, _, _>(mesh(), |p, _| async move { Ok(Pong { n: p.n }) })
        .build()
        .unwrap_err();
    assert!(matches!(err, ZLinkError::DuplicateHandler { .. }), "{err}");
    assert_eq!(err.kind(), ErrorKind::AlreadyExists);

    let err = Dispatcher::builder(Registry::json_only())
        .channel_send::<Note, _, _>(channel("chat"), |_, _| async { Ok(()) })
        .channel_send::<Note, _, _>(channel("chat"), |_, _| async { Ok(()) })
        .build()
        .unwrap_err();
    assert!(matches!(err, ZLinkError::DuplicateHandler { .. }));
}

#[test]
fn same_packet_name_under_different_owners_or_kinds_is_allowed() {
    #[derive(serde::Serialize, serde::Deserialize)]
    struct PingSend;
    impl Message for PingSend {
        const PACKET: &'static str = "Ping";
    }
    Dispatcher::builder(Registry::json_only())
        .node_request::<Ping, _, _>(mesh(), |p, _| async move { Ok(Pong { n: p.n }) })
        .node_send::<PingSend, _, _>(mesh(), |_, _| async { Ok(()) })
        .node_request::<Ping, _, _>(MeshName::new("other").unwrap(), |p, _| async move {
            Ok(Pong { n: p.n })
        })
        .channel_request::<Ping, _, _>(channel("a"), |p, _| async move { Ok(Pong { n: p.n }) })
        .channel_request::<Ping, _, _>(channel("b"), |p, _| async move { Ok(Pong { n: p.n }) })
        .build()
        .unwrap();
}

#[test]
fn invalid_packet_name_fails_startup() {
    #[derive(serde::Serialize, serde::Deserialize)]
    struct Nameless;
    impl Message for Nameless {
        const PACKET: &'static str = "";
    }
    let err = Dispatcher::builder(Registry::json_only())
        .node_send::<Nameless, _, _>(mesh(), |_, _| async { Ok(()) })
        .build()
        .unwrap_err();
    assert!(matches!(err, ZLinkError::InvalidPacketName { .. }));
}

#[tokio::test]
async fn node_direct_request_replies_with_the_typed_reply() {
    let runs = Counter::default();
    let d = counting_ping(&runs).build().unwrap();
    let out = dispatch(&d, request(node_target(), "Ping", &Ping { n: 41 })).await;
    assert_eq!(reply::<Ping>(&d, out), Pong { n: 42 });
    assert_eq!(runs.get(), 1);
}

#[tokio::test]
async fn unknown_key_is_not_found_and_runs_no_handler_or_filter() {
    let runs = Counter::default();
    let filtered = Counter::default();
    let f = filtered.clone();
    let d = counting_ping(&runs)
        .filter(move |_, next| {
            f.bump();
            async move { next.run().await }
        })
        .build()
        .unwrap();
    // Unknown packet, unknown mesh, wrong route kind, other owner namespace.
    let other_mesh = InboundTarget::NodeDirect {
        mesh: MeshName::new("other").unwrap(),
        source: RoutingId::new(*b"s").unwrap(),
        target: RoutingId::new(*b"t").unwrap(),
    };
    for frame in [
        request(node_target(), "Pong", &Ping { n: 1 }),
        request(other_mesh, "Ping", &Ping { n: 1 }),
        request(channel_target("game"), "Ping", &Ping { n: 1 }),
    ] {
        let err = error_reply(dispatch(&d, frame).await);
        assert_eq!(err.kind(), ErrorKind::NotFound);
    }
    match dispatch(&d, send(node_target(), "Ping", &Ping { n: 1 })).await {
        DispatchOutcome::NoReply(SendEnd::Failed(e)) => assert_eq!(e.kind(), ErrorKind::NotFound),
        other => panic!("{other:?}"),
    }
    assert_eq!(runs.get(), 0);
    assert_eq!(filtered.get(), 0);
}

#[tokio::test]
async fn node_direct_send_runs_the_handler_and_returns_nothing() {
    let seen = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let s = Arc::clone(&seen);
    let d = Dispatcher::builder(Registry::json_only())
        .node_send::<Note, _, _>(mesh(), move |note, ctx| {
            let s = Arc::clone(&s);
            async move {
                assert_eq!(ctx.route_kind(), RouteKind::Send);
                assert!(ctx.correlation().is_none());
                s.lock().push(note.text);
                Ok(())
            }
        })
        .build()
        .unwrap();
    let out = dispatch(&d, send(node_target(), "Note", &Note { text: "hi".into() })).await;
    assert!(matches!(out, DispatchOutcome::NoReply(SendEnd::Handled)));
    assert_eq!(*seen.lock(), vec!["hi".to_owned()]);
}

#[tokio::test]
async fn node_handler_context_carries_mesh_rids_packet_metadata_and_correlation() {
    let d = Dispatcher::builder(Registry::json_only())
        .node_request::<Ping, _, _>(mesh(), |p, ctx| async move {
            assert_eq!(ctx.mesh_name().as_str(), "game");
            assert_eq!(ctx.source_rid().as_bytes(), b"src");
            assert_eq!(ctx.target_rid().as_bytes(), b"dst");
            assert_eq!(ctx.packet().as_str(), "Ping");
            assert_eq!(ctx.route_kind(), RouteKind::Request);
            assert_eq!(ctx.metadata().get("trace"), Some("t-1"));
            assert_eq!(ctx.correlation(), Some(&correlation()));
            Ok(Pong { n: p.n })
        })
        .build()
        .unwrap();
    let mut frame = request(node_target(), "Ping", &Ping { n: 1 });
    frame.metadata = Metadata::builder()
        .set("trace", "t-1")
        .build()
        .unwrap()
        .to_bytes()
        .into();
    assert_eq!(reply::<Ping>(&d, dispatch(&d, frame).await), Pong { n: 1 });
}

#[tokio::test]
async fn channel_handlers_are_selected_by_channel_name() {
    let d = Dispatcher::builder(Registry::json_only())
        .channel_request::<Ping, _, _>(channel("a"), |p, ctx| async move {
            assert_eq!(ctx.channel_name().as_str(), "a");
            Ok(Pong { n: p.n + 100 })
        })
        .channel_request::<Ping, _, _>(channel("b"), |p, ctx| async move {
            assert_eq!(ctx.channel_name().as_str(), "b");
            Ok(Pong { n: p.n + 200 })
        })
        .build()
        .unwrap();
    let a = dispatch(&d, request(channel_target("a"), "Ping", &Ping { n: 1 })).await;
    assert_eq!(reply::<Ping>(&d, a), Pong { n: 101 });
    let b = dispatch(&d, request(channel_target("b"), "Ping", &Ping { n: 1 })).await;
    assert_eq!(reply::<Ping>(&d, b), Pong { n: 201 });
}

#[tokio::test]
async fn malformed_packet_name_or_metadata_is_a_protocol_error_without_running_the_handler() {
    let runs = Counter::default();
    let d = counting_ping(&runs).build().unwrap();
    let mut bad_packet = request(node_target(), "Ping", &Ping { n: 1 });
    bad_packet.packet = Bytes::from_static(b"\xffPing");
    let mut long_packet = request(node_target(), "Ping", &Ping { n: 1 });
    long_packet.packet = Bytes::from("p".repeat(256));
    let mut bad_metadata = request(node_target(), "Ping", &Ping { n: 1 });
    bad_metadata.metadata = Bytes::from_static(&[0, 9, b'k']);
    for frame in [bad_packet, long_packet, bad_metadata] {
        assert_eq!(
            error_reply(dispatch(&d, frame).await).kind(),
            ErrorKind::ProtocolError
        );
    }
    assert_eq!(runs.get(), 0);
}

#[tokio::test]
async fn failed_handler_answers_internal_failure_without_its_cause() {
    let d = Dispatcher::builder(Registry::json_only())
        .node_request::<Ping, _, _>(mesh(), |_, ctx| async move {
            Err::<Pong, _>(ZLinkError::handler_failed(
                ctx.packet().as_str(),
                "connection string user:secret",
            ))
        })
        .build()
        .unwrap();
    let err = error_reply(dispatch(&d, request(node_target(), "Ping", &Ping { n: 1 })).await);
    assert_eq!(err.kind(), ErrorKind::InternalFailure);
    assert!(!err.message().as_str().contains("secret"));
}

#[tokio::test]
async fn handler_chosen_error_kind_reaches_the_caller() {
    let d = Dispatcher::builder(Registry::json_only())
        .channel_request::<Ping, _, _>(channel("a"), |_, _| async {
            Err::<Pong, _>(ZLinkError::application(ErrorKind::CapacityExceeded, "full"))
        })
        .build()
        .unwrap();
    let err = error_reply(dispatch(&d, request(channel_target("a"), "Ping", &Ping { n: 1 })).await);
    assert_eq!(err.kind(), ErrorKind::CapacityExceeded);
    // The caller completes with the peer's kind.
    let remote = decode_reply::<Ping>(d.codecs(), InboundReply::Error(&err.encode())).unwrap_err();
    assert!(matches!(
        remote,
        ZLinkError::Remote {
            kind: ErrorKind::CapacityExceeded,
            ..
        }
    ));
}

#[tokio::test]
async fn local_call_errors_are_not_sent_as_remote_kinds() {
    let d = Dispatcher::builder(Registry::json_only())
        .node_request::<Ping, _, _>(mesh(), |_, ctx| async move {
            // A scoped dependency nobody configured: a local NotConfigured error.
            ctx.scope().dependency::<String>()?;
            Ok(Pong { n: 0 })
        })
        .build()
        .unwrap();
    let err = error_reply(dispatch(&d, request(node_target(), "Ping", &Ping { n: 1 })).await);
    assert_eq!(err.kind(), ErrorKind::InternalFailure);
}

#[tokio::test]
async fn failed_send_handler_returns_nothing_to_the_sender() {
    let d = Dispatcher::builder(Registry::json_only())
        .channel_send::<Note, _, _>(channel("a"), |_, ctx| async move {
            Err(ZLinkError::handler_failed(ctx.packet().as_str(), "boom"))
        })
        .build()
        .unwrap();
    let out = dispatch(
        &d,
        send(channel_target("a"), "Note", &Note { text: "x".into() }),
    )
    .await;
    match out {
        DispatchOutcome::NoReply(SendEnd::Failed(e)) => {
            assert_eq!(e.kind(), ErrorKind::InternalFailure)
        }
        other => panic!("{other:?}"),
    }
}
