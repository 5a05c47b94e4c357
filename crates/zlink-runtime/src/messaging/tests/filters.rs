//! Handler filters (spec 06 §10).

use parking_lot::Mutex;

use super::*;

type Log = Arc<Mutex<Vec<String>>>;

/// What a filter saw: dispatch kind, MeshName, ChannelName.
type Seen = (DispatchKind, Option<String>, Option<String>);

/// A filter that logs `name>` before next and `<name` after.
fn logging(
    log: &Log,
    name: &'static str,
) -> impl Fn(FilterContext, Next) -> BoxFuture<'static, Result<(), ZLinkError>> + Send + Sync + use<>
{
    let log = Arc::clone(log);
    move |_, next| {
        let log = Arc::clone(&log);
        Box::pin(async move {
            log.lock().push(format!("{name}>"));
            let r = next.run().await;
            log.lock().push(format!("<{name}"));
            r
        })
    }
}

/// Every dispatch kind this dispatcher serves, as frames, plus a dispatcher with one handler
/// for each that logs `handler`.
fn all_kinds(log: &Log) -> (DispatcherBuilder, Vec<InboundFrame>) {
    let (a, b, c, e) = (
        Arc::clone(log),
        Arc::clone(log),
        Arc::clone(log),
        Arc::clone(log),
    );
    let builder = Dispatcher::builder(Registry::json_only())
        .node_request::<Ping, _, _>(mesh(), move |p, _| {
            a.lock().push("handler".into());
            async move { Ok(Pong { n: p.n }) }
        })
        .node_send::<Note, _, _>(mesh(), move |_, _| {
            b.lock().push("handler".into());
            async { Ok(()) }
        })
        .channel_request::<Ping, _, _>(channel("c"), move |p, _| {
            c.lock().push("handler".into());
            async move { Ok(Pong { n: p.n }) }
        })
        .channel_send::<Note, _, _>(channel("c"), move |_, _| {
            e.lock().push("handler".into());
            async { Ok(()) }
        });
    let note = Note { text: "n".into() };
    let frames = vec![
        request(node_target(), "Ping", &Ping { n: 1 }),
        send(node_target(), "Note", &note),
        request(channel_target("c"), "Ping", &Ping { n: 1 }),
        send(channel_target("c"), "Note", &note),
    ];
    (builder, frames)
}

#[tokio::test]
async fn filters_apply_to_node_direct_and_channel_send_and_request() {
    let log: Log = Arc::default();
    let kinds: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let k = Arc::clone(&kinds);
    let (builder, frames) = all_kinds(&log);
    let d = builder
        .filter(move |ctx, next| {
            k.lock().push((
                ctx.dispatch_kind(),
                ctx.mesh_name().map(|m| m.to_string()),
                ctx.channel_name().map(|c| c.to_string()),
            ));
            async move { next.run().await }
        })
        .build()
        .unwrap();
    for frame in frames {
        dispatch(&d, frame).await;
    }
    let game = Some("game".to_owned());
    let c = Some("c".to_owned());
    assert_eq!(
        *kinds.lock(),
        vec![
            (DispatchKind::NodeDirectRequest, game.clone(), None),
            (DispatchKind::NodeDirectSend, game.clone(), None),
            (DispatchKind::ChannelRequest, game.clone(), c.clone()),
            (DispatchKind::ChannelSend, game, c),
        ]
    );
    assert_eq!(log.lock().len(), 4, "every handler ran once");
}

#[tokio::test]
async fn client_server_channel_filter_context_has_no_mesh_name() {
    let seen: Arc<Mutex<Option<Option<String>>>> = Arc::default();
    let s = Arc::clone(&seen);
    let d = Dispatcher::builder(Registry::json_only())
        .channel_send::<Note, _, _>(channel("cs"), |_, _| async { Ok(()) })
        .filter(move |ctx, next| {
            *s.lock() = Some(ctx.mesh_name().map(|m| m.to_string()));
            async move { next.run().await }
        })
        .build()
        .unwrap();
    let target = InboundTarget::Channel {
        channel: channel("cs"),
        mesh: None,
    };
    dispatch(&d, send(target, "Note", &Note { text: "x".into() })).await;
    assert_eq!(*seen.lock(), Some(None));
}

#[tokio::test]
async fn filters_run_in_registration_order_and_unwind_in_reverse() {
    let log: Log = Arc::default();
    let l = Arc::clone(&log);
    let d = Dispatcher::builder(Registry::json_only())
        .node_request::<Ping, _, _>(mesh(), move |p, _| {
            l.lock().push("handler".into());
            async move { Ok(Pong { n: p.n }) }
        })
        .filter(logging(&log, "a"))
        .filter(logging(&log, "b"))
        .filter(logging(&log, "c"))
        .build()
        .unwrap();
    let out = dispatch(&d, request(node_target(), "Ping", &Ping { n: 5 })).await;
    assert_eq!(reply::<Ping>(&d, out), Pong { n: 5 });
    assert_eq!(*log.lock(), ["a>", "b>", "c>", "handler", "<c", "<b", "<a"]);
}

#[tokio::test]
async fn filter_without_next_skips_the_handler_and_rejects_the_request() {
    let log: Log = Arc::default();
    let (builder, frames) = all_kinds(&log);
    let after = Counter::default();
    let a = after.clone();
    let d = builder
        .filter(|_, _next| async { Ok(()) })
        .filter(move |_, next| {
            a.bump();
            async move { next.run().await }
        })
        .build()
        .unwrap();
    let [node_req, node_send, chan_req, chan_send]: [InboundFrame; 4] = frames.try_into().unwrap();
    for req in [node_req, chan_req] {
        let err = error_reply(dispatch(&d, req).await);
        assert_eq!(err.kind(), ErrorKind::Rejected);
    }
    for s in [node_send, chan_send] {
        let out = dispatch(&d, s).await;
        assert!(
            matches!(out, DispatchOutcome::NoReply(SendEnd::EndedByFilter)),
            "{out:?}"
        );
    }
    assert!(log.lock().is_empty(), "no handler ran");
    assert_eq!(after.get(), 0, "no later filter ran");
}

#[tokio::test]
async fn second_next_call_is_an_application_error_and_does_not_rerun_the_handler() {
    let runs = Counter::default();
    let second: Arc<Mutex<Option<ZLinkError>>> = Arc::default();
    let s = Arc::clone(&second);
    let d = counting_ping(&runs)
        .filter(move |_, next| {
            let s = Arc::clone(&s);
            async move {
                next.run().await?;
                let again = next.run().await;
                *s.lock() = again.err();
                Ok(())
            }
        })
        .build()
        .unwrap();
    let out = dispatch(&d, request(node_target(), "Ping", &Ping { n: 1 })).await;
    assert_eq!(runs.get(), 1, "the handler ran exactly once");
    let err = second
        .lock()
        .take()
        .expect("the second call returned an error");
    assert!(matches!(err, ZLinkError::NextCalledTwice));
    assert_eq!(err.kind(), ErrorKind::InvalidOperation);
    // The filter swallowed the error: the one handler result stands.
    assert_eq!(reply::<Ping>(&d, out), Pong { n: 2 });
}

#[tokio::test]
async fn propagated_second_next_error_fails_the_request_without_a_second_run() {
    let runs = Counter::default();
    let d = counting_ping(&runs)
        .filter(|_, next| async move {
            next.run().await?;
            next.run().await
        })
        .build()
        .unwrap();
    let err = error_reply(dispatch(&d, request(node_target(), "Ping", &Ping { n: 1 })).await);
    assert_eq!(runs.get(), 1);
    assert_eq!(err.kind(), ErrorKind::InternalFailure);
}

#[tokio::test]
async fn filter_cannot_turn_a_failed_handler_into_a_reply() {
    let d = Dispatcher::builder(Registry::json_only())
        .node_request::<Ping, _, _>(mesh(), |_, _| async {
            Err::<Pong, _>(ZLinkError::application(ErrorKind::DataLost, "gone"))
        })
        .filter(|_, next| async move {
            let _ignored = next.run().await;
            Ok(())
        })
        .build()
        .unwrap();
    let err = error_reply(dispatch(&d, request(node_target(), "Ping", &Ping { n: 1 })).await);
    assert_eq!(err.kind(), ErrorKind::DataLost);
}

#[tokio::test]
async fn filter_sees_the_handler_error_from_next() {
    let seen: Arc<Mutex<Option<ErrorKind>>> = Arc::default();
    let s = Arc::clone(&seen);
    let d = Dispatcher::builder(Registry::json_only())
        .node_send::<Note, _, _>(mesh(), |_, _| async {
            Err(ZLinkError::application(ErrorKind::Unavailable, "later"))
        })
        .filter(move |_, next| {
            let s = Arc::clone(&s);
            async move {
                let r = next.run().await;
                *s.lock() = r.as_ref().err().map(ZLinkError::kind);
                r
            }
        })
        .build()
        .unwrap();
    dispatch(&d, send(node_target(), "Note", &Note { text: "x".into() })).await;
    assert_eq!(*seen.lock(), Some(ErrorKind::Unavailable));
}

#[tokio::test]
async fn cancellation_given_to_the_filter_reaches_the_handler() {
    let d = Dispatcher::builder(Registry::json_only())
        .node_request::<Ping, _, _>(mesh(), |_, ctx| async move {
            // Completes only because the dispatch's signal is cancelled.
            ctx.cancellation().cancelled().await;
            Err::<Pong, _>(ZLinkError::application(
                ErrorKind::ShuttingDown,
                "cancelled",
            ))
        })
        .filter(|ctx, next| async move {
            assert!(!ctx.cancellation().is_cancelled());
            ctx.cancellation().cancel();
            next.run().await
        })
        .build()
        .unwrap();
    let err = error_reply(dispatch(&d, request(node_target(), "Ping", &Ping { n: 1 })).await);
    assert_eq!(err.kind(), ErrorKind::ShuttingDown);
}

#[tokio::test]
async fn external_cancellation_is_seen_by_filter_and_handler_alike() {
    let d = Dispatcher::builder(Registry::json_only())
        .node_send::<Note, _, _>(mesh(), |_, ctx| async move {
            ctx.cancellation().cancelled().await;
            Ok(())
        })
        .filter(|ctx, next| async move {
            let r = next.run().await;
            assert!(ctx.cancellation().is_cancelled());
            r
        })
        .build()
        .unwrap();
    let cancel = Cancellation::new();
    let task = {
        let d = d.clone();
        let cancel = cancel.clone();
        tokio::spawn(async move {
            d.dispatch(
                send(node_target(), "Note", &Note { text: "x".into() }),
                cancel,
            )
            .await
        })
    };
    tokio::task::yield_now().await;
    cancel.cancel();
    let out = task.await.unwrap();
    assert!(matches!(out, DispatchOutcome::NoReply(SendEnd::Handled)));
}

/// Filter and handler instances (their futures), plus one scoped dependency, each tracked.
struct Lifetimes {
    created: Counter,
    dropped: Counter,
    scoped_created: Counter,
    scoped_dropped: Counter,
}

/// A dispatcher whose filter and handler each hold a `Tracked` for their whole run and use the
/// same scoped dependency; `mode` picks how the dispatch ends.
fn tracked_dispatcher(mode: &'static str, t: &Lifetimes) -> Dispatcher {
    let (fc, fd, hc, hd) = (
        t.created.clone(),
        t.dropped.clone(),
        t.created.clone(),
        t.dropped.clone(),
    );
    let (sc, sd) = (t.scoped_created.clone(), t.scoped_dropped.clone());
    Dispatcher::builder(Registry::json_only())
        .scoped(move || Tracked::new(&sc, &sd))
        .node_request::<Ping, _, _>(mesh(), move |p, ctx| {
            let guard = Tracked::new(&hc, &hd);
            async move {
                let _guard = guard;
                let _dep = ctx.scope().dependency::<Tracked>()?;
                match mode {
                    "error" => Err(ZLinkError::application(ErrorKind::DataLost, "x")),
                    "pending" => std::future::pending().await,
                    _ => Ok(Pong { n: p.n }),
                }
            }
        })
        .filter(move |ctx, next| {
            let guard = Tracked::new(&fc, &fd);
            async move {
                let _guard = guard;
                let _dep = ctx.scope().dependency::<Tracked>()?;
                if mode == "no-next" {
                    return Ok(());
                }
                next.run().await
            }
        })
        .build()
        .unwrap()
}

#[tokio::test]
async fn instances_and_scope_are_cleaned_up_exactly_once_however_the_dispatch_ends() {
    for mode in ["ok", "no-next", "error", "pending"] {
        let t = Lifetimes {
            created: Counter::default(),
            dropped: Counter::default(),
            scoped_created: Counter::default(),
            scoped_dropped: Counter::default(),
        };
        let d = tracked_dispatcher(mode, &t);
        let frame = request(node_target(), "Ping", &Ping { n: 1 });
        if mode == "pending" {
            // The dispatch is cancelled by dropping it mid-handler.
            let r = tokio::time::timeout(std::time::Duration::from_millis(20), dispatch(&d, frame))
                .await;
            assert!(r.is_err(), "the handler never completes");
        } else {
            dispatch(&d, frame).await;
        }
        let instances = if mode == "no-next" { 1 } else { 2 };
        assert_eq!(
            t.created.get(),
            instances,
            "{mode}: instances created once each"
        );
        assert_eq!(
            t.dropped.get(),
            instances,
            "{mode}: instances dropped once each"
        );
        assert_eq!(
            t.scoped_created.get(),
            1,
            "{mode}: one scoped instance per dispatch"
        );
        assert_eq!(t.scoped_dropped.get(), 1, "{mode}: scope cleaned up once");
    }
}

#[tokio::test]
async fn every_dispatch_gets_a_new_scope() {
    let t = Lifetimes {
        created: Counter::default(),
        dropped: Counter::default(),
        scoped_created: Counter::default(),
        scoped_dropped: Counter::default(),
    };
    let d = tracked_dispatcher("ok", &t);
    for _ in 0..3 {
        dispatch(&d, request(node_target(), "Ping", &Ping { n: 1 })).await;
    }
    assert_eq!(t.scoped_created.get(), 3);
    assert_eq!(t.scoped_dropped.get(), 3);
    assert_eq!(t.created.get(), 6);
    assert_eq!(t.dropped.get(), 6);
}

#[tokio::test]
async fn filter_object_runs_like_a_closure_filter() {
    struct Deny;
    impl Filter for Deny {
        fn call(
            &self,
            ctx: FilterContext,
            next: Next,
        ) -> BoxFuture<'static, Result<(), ZLinkError>> {
            Box::pin(async move {
                if ctx.metadata().get("allow") == Some("yes") {
                    next.run().await
                } else {
                    Ok(())
                }
            })
        }
    }
    let runs = Counter::default();
    let d = counting_ping(&runs).filter_object(Deny).build().unwrap();
    let denied = dispatch(&d, request(node_target(), "Ping", &Ping { n: 1 })).await;
    assert_eq!(error_reply(denied).kind(), ErrorKind::Rejected);
    let mut allowed = request(node_target(), "Ping", &Ping { n: 1 });
    allowed.metadata = Metadata::builder()
        .set("allow", "yes")
        .build()
        .unwrap()
        .to_bytes()
        .into();
    assert_eq!(
        reply::<Ping>(&d, dispatch(&d, allowed).await),
        Pong { n: 2 }
    );
    assert_eq!(runs.get(), 1);
}

#[tokio::test]
async fn second_next_call_does_not_rerun_later_filters_either() {
    let runs = Counter::default();
    let inner = Counter::default();
    let i = inner.clone();
    let d = counting_ping(&runs)
        .filter(|_, next| async move {
            next.run().await?;
            let again = next.run().await;
            assert!(matches!(again, Err(ZLinkError::NextCalledTwice)));
            Ok(())
        })
        .filter(move |_, next| {
            i.bump();
            async move { next.run().await }
        })
        .build()
        .unwrap();
    let out = dispatch(&d, request(node_target(), "Ping", &Ping { n: 1 })).await;
    assert_eq!(reply::<Ping>(&d, out), Pong { n: 2 });
    assert_eq!(inner.get(), 1);
    assert_eq!(runs.get(), 1);
}

proptest::proptest! {
    /// For any chain where each filter either calls `next` or stops: filters run in order up to
    /// the first that stops, unwind in reverse, and the handler runs iff every filter called
    /// `next`; a request then replies, otherwise it is Rejected.
    #[test]
    fn filter_chain_order_holds_for_any_chain(calls_next in proptest::collection::vec(proptest::bool::ANY, 0..8)) {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let log: Log = Arc::default();
        let l = Arc::clone(&log);
        let mut builder = Dispatcher::builder(Registry::json_only())
            .node_request::<Ping, _, _>(mesh(), move |p, _| {
                l.lock().push("handler".into());
                async move { Ok(Pong { n: p.n }) }
            });
        for (i, &go) in calls_next.iter().enumerate() {
            let log = Arc::clone(&log);
            builder = builder.filter(move |_, next| {
                let log = Arc::clone(&log);
                async move {
                    log.lock().push(format!("{i}>"));
                    let r = if go { next.run().await } else { Ok(()) };
                    log.lock().push(format!("<{i}"));
                    r
                }
            });
        }
        let d = builder.build().unwrap();
        let out = rt.block_on(dispatch(&d, request(node_target(), "Ping", &Ping { n: 1 })));

        let reached = calls_next.iter().position(|go| !go).map_or(calls_next.len(), |i| i + 1);
        let all_go = calls_next.iter().all(|go| *go);
        let mut expected: Vec<String> = (0..reached).map(|i| format!("{i}>")).collect();
        if all_go {
            expected.push("handler".into());
        }
        expected.extend((0..reached).rev().map(|i| format!("<{i}")));
        proptest::prop_assert_eq!(&*log.lock(), &expected);
        match out {
            DispatchOutcome::Reply { .. } => proptest::prop_assert!(all_go),
            DispatchOutcome::ErrorReply { error, .. } => {
                proptest::prop_assert!(!all_go);
                proptest::prop_assert_eq!(error.kind(), ErrorKind::Rejected);
            }
            DispatchOutcome::NoReply(_) => proptest::prop_assert!(false, "a request got no reply"),
        }
    }
}
