//! A request answered on the caller's own node ends with the handler's error itself (its
//! variant, and its typed source where it has one), never the error reply a caller on another
//! node decodes (`ZLinkError::Remote`); both see the same kind (issue 40).

use std::error::Error as _;
use std::mem::discriminant;

use serde::{Deserialize, Serialize};
use zlink_codec::records::ObjectRole;

use super::support::*;
use crate::messaging::{ErrorKind, InvalidCall, Message, Request, ZLinkError};
use crate::objects::{Actor, ActorType, Spot, SpotType};
use zlink_testkit::Harness;

/// An application error type with a typed cause of its own.
#[derive(Debug, thiserror::Error)]
#[error("the ledger is closed")]
struct LedgerClosed {
    #[source]
    source: std::io::Error,
}

/// How the [`Fails`] handler fails.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
enum Failure {
    /// An application error type (with a source) inside `HandlerFailed`.
    App,
    /// An application-chosen kind and message (`Application`).
    Chosen,
    /// A runtime error of kind `NotFound` (`NoRoute`).
    Missing,
    /// A local call error (`InvalidCall`, `InvalidOperation`).
    Invalid,
}

const FAILURES: [Failure; 4] = [
    Failure::App,
    Failure::Chosen,
    Failure::Missing,
    Failure::Invalid,
];

/// A request whose handler fails as its [`Failure`] says.
#[derive(Debug, Serialize, Deserialize)]
struct Fails(Failure);
impl Message for Fails {
    const PACKET: &'static str = "Fails";
}
impl Request for Fails {
    type Reply = ();
}

fn failure(how: Failure) -> ZLinkError {
    match how {
        Failure::App => ZLinkError::handler_failed(
            Fails::PACKET,
            LedgerClosed {
                source: std::io::Error::other("the disk is gone"),
            },
        ),
        Failure::Chosen => ZLinkError::application(ErrorKind::Rejected, "over quota"),
        Failure::Missing => ZLinkError::NoRoute {
            target: crate::messaging::Target::object(
                zlink_codec::keys::AuthorityKind::Actor,
                &zlink_codec::ObjectId::new("ledger-7").expect("id"),
            ),
        },
        Failure::Invalid => ZLinkError::InvalidCall(InvalidCall::ChannelWeight { weight: -1 }),
    }
}

/// The typed cause of a `HandlerFailed`, downcast to `T`: the error's own
/// [`std::error::Error::source`] (the application's error itself, not a wrapper around it).
fn cause_of<T: std::error::Error + 'static>(err: &ZLinkError) -> &T {
    assert!(
        matches!(err, ZLinkError::HandlerFailed { .. }),
        "the handler's own variant: {err:?}"
    );
    err.source()
        .and_then(|s| s.downcast_ref::<T>())
        .unwrap_or_else(|| panic!("the typed error is the source: {err:?}"))
}

/// `err` is `HandlerFailed` whose cause is a [`LedgerClosed`] whose own source is the
/// `io::Error` the handler put there.
fn assert_ledger_closed(err: &ZLinkError) {
    let app = cause_of::<LedgerClosed>(err);
    let io = app
        .source()
        .and_then(|s| s.downcast_ref::<std::io::Error>())
        .expect("its own source is kept");
    assert_eq!(io.to_string(), "the disk is gone");
}

/// `remote` is the error reply a caller on another node decodes, of `kind`: its sanitised
/// text only, never a cause (the application's `LedgerClosed` and its `io::Error` stay on the
/// node that failed).
fn assert_remote(remote: &ZLinkError, kind: ErrorKind) {
    assert!(
        matches!(remote, ZLinkError::Remote { kind: k, .. } if *k == kind),
        "a caller on another node gets the error reply of kind {kind}: {remote:?}"
    );
    let text = remote.to_string();
    assert!(
        !text.contains("ledger is closed") && !text.contains("disk"),
        "no cause crosses the node boundary: {text}"
    );
}

/// `local` is what a caller on the handler's own node gets when the handler failed as `how`
/// says: the handler's error itself — except a local call error of the handler
/// (`InvalidOperation`, `NotConfigured`), which is no result of the caller's call (spec 06
/// §20): `HandlerFailed` (`InternalFailure`) with the handler's error as its source. A caller
/// on another node gets the same kind.
fn assert_same_node(how: Failure, local: &ZLinkError) {
    let expected = failure(how);
    match how {
        Failure::Invalid => {
            assert_eq!(local.kind(), ErrorKind::InternalFailure, "{local:?}");
            assert!(
                matches!(local, ZLinkError::HandlerFailed { packet, .. } if packet == Fails::PACKET),
                "{local:?}"
            );
            let source = cause_of::<ZLinkError>(local);
            assert!(
                matches!(
                    source,
                    ZLinkError::InvalidCall(InvalidCall::ChannelWeight { weight: -1 })
                ),
                "{source:?}"
            );
        }
        _ => {
            assert_eq!(
                discriminant(local),
                discriminant(&expected),
                "{how:?}: the handler's variant on the same node: {local:?}"
            );
            assert_eq!(local.kind(), expected.kind(), "{how:?}");
        }
    }
    if how == Failure::App {
        assert_ledger_closed(local);
    }
}

struct Ledger;
impl Actor for Ledger {}

fn ledger_type(t: ActorType<Ledger>) -> ActorType<Ledger> {
    t.factory(|_ctx| async { Ok(Ledger) })
        .disable_relocation()
        .on_request::<Fails, _>(|_l, req, _ctx| Box::pin(async move { Err(failure(req.0)) }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_same_node_actor_request_gets_the_handlers_error_itself_with_the_remote_kind() {
    let h = Harness::memory();
    let (hs, s) = start(&h, |b| {
        b.object_role(ObjectRole::Server)
            .actor_type::<Ledger>("ledger", ledger_type)
    })
    .await;
    let (hc, c) = start(&h, |b| b.object_role(ObjectRole::Client)).await;
    wait_peers(&c, 1).await;
    wait_discovered(&[&hs]).await;
    let (on_s, on_c) = (hs.actors().expect("manager"), hc.actors().expect("manager"));
    let r = on_s.get_or_create("ledger", "l-1").await.expect("created");
    assert_eq!(&r.node, s.routing_id(), "the only Object Server owns it");

    for how in FAILURES {
        let local = on_s.request("l-1", &Fails(how)).await.expect_err("fails");
        let remote = on_c.request("l-1", &Fails(how)).await.expect_err("fails");
        assert_same_node(how, &local);
        assert_remote(&remote, local.kind());
    }
    let _ = c;
    stop_all(&[&hc, &hs]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_same_node_actor_handlers_application_error_is_the_errors_source_with_its_own_source() {
    let h = Harness::memory();
    let (hs, _s) = start(&h, |b| {
        b.object_role(ObjectRole::Server)
            .actor_type::<Ledger>("ledger", ledger_type)
    })
    .await;
    // Placement needs this server's own descriptor read back first (else `NoRoom`).
    wait_discovered(&[&hs]).await;
    let on_s = hs.actors().expect("manager");
    on_s.get_or_create("ledger", "l-1").await.expect("created");

    let err = on_s
        .request("l-1", &Fails(Failure::App))
        .await
        .expect_err("fails");
    let app = err
        .source()
        .and_then(|s| s.downcast_ref::<LedgerClosed>())
        .unwrap_or_else(|| panic!("the application's error is the source: {err:?}"));
    let io = app
        .source()
        .and_then(|s| s.downcast_ref::<std::io::Error>())
        .expect("one more source is its io::Error");
    assert_eq!(io.to_string(), "the disk is gone");
    stop_all(&[&hs]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_to_its_own_node_gets_the_handlers_error_itself_with_the_remote_kind() {
    let h = Harness::memory();
    let (ha, a) = start(&h, |b| {
        b.on_request::<Fails, _, _>(|req, _ctx| async move { Err(failure(req.0)) })
    })
    .await;
    let (hb, b) = start(&h, |b| b).await;
    wait_peers(&b, 1).await;

    for how in FAILURES {
        let local = a
            .request(a.routing_id(), &Fails(how))
            .await
            .expect_err("fails");
        let remote = b
            .request(a.routing_id(), &Fails(how))
            .await
            .expect_err("fails");
        assert_same_node(how, &local);
        assert_remote(&remote, local.kind());
    }
    stop_all(&[&hb, &ha]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_to_its_own_node_refused_by_a_filter_or_without_a_handler_gets_the_runtimes_error()
 {
    let h = Harness::memory();
    let (ha, a) = start_root(
        &h,
        |r| {
            r.filter(|ctx, next| async move {
                // Only `Echo` is refused: `Who` reaches its handler.
                if ctx.packet().as_str() == Echo::PACKET {
                    Ok(())
                } else {
                    next.run().await
                }
            })
        },
        echo_node,
    )
    .await;
    let (hb, b) = start(&h, |b| b).await;
    wait_peers(&b, 1).await;

    let echo = Echo {
        text: "hi".to_owned(),
    };
    let local = a.request(a.routing_id(), &echo).await.expect_err("refused");
    assert!(matches!(local, ZLinkError::RejectedByFilter), "{local:?}");
    let remote = b.request(a.routing_id(), &echo).await.expect_err("refused");
    assert_remote(&remote, ErrorKind::Rejected);

    let who = a.request(a.routing_id(), &Who).await.expect("passed");
    assert_eq!(who, a.routing_id().to_string());

    // No handler for the packet on that node: no filter or handler ran.
    let none = Fails(Failure::App);
    let local = a
        .request(a.routing_id(), &none)
        .await
        .expect_err("no handler");
    assert!(matches!(local, ZLinkError::NoHandler { .. }), "{local:?}");
    let remote = b
        .request(a.routing_id(), &none)
        .await
        .expect_err("no handler");
    assert_remote(&remote, ErrorKind::NotFound);
    stop_all(&[&hb, &ha]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_channel_request_served_by_its_own_node_gets_the_handlers_error_itself() {
    let h = Harness::memory();
    let ledger = channel("ledger");
    let (ha, _a) = start(&h, |b| {
        b.channel_server(channel("ledger"))
            .on_channel_request::<Fails, _, _>(channel("ledger"), |req, _ctx| async move {
                Err(failure(req.0))
            })
    })
    .await;
    let (hb, b) = start(&h, |b| b.channel_client(channel("ledger"))).await;
    wait_peers(&b, 1).await;

    // The only member is A: A's request is served on A, B's over the mesh.
    let how = Failure::App;
    let local = ha
        .channel_request(&ledger, &Fails(how))
        .await
        .expect_err("fails");
    assert_ledger_closed(&local);
    let remote = hb
        .channel_request(&ledger, &Fails(how))
        .await
        .expect_err("fails");
    assert_remote(&remote, local.kind());
    stop_all(&[&hb, &ha]).await;
}

struct Till;
impl Spot for Till {}

fn till_type(t: SpotType<Till>) -> SpotType<Till> {
    t.factory(|_ctx| async { Ok(Till) })
        .disable_relocation()
        .on_request::<Fails, _>(|_t, req, _ctx| Box::pin(async move { Err(failure(req.0)) }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_spot_handlers_local_call_error_reaches_either_caller_as_internal_failure_like_a_node_direct_one()
 {
    let h = Harness::memory();
    let (hs, s) = start(&h, |b| {
        b.object_role(ObjectRole::Server)
            .user_spot_type::<Till>("till", till_type)
    })
    .await;
    let (hc, c) = start(&h, |b| b.object_role(ObjectRole::Client)).await;
    wait_peers(&c, 1).await;
    wait_discovered(&[&hs]).await;
    let (on_s, on_c) = (hs.spots().expect("manager"), hc.spots().expect("manager"));
    let r = on_s.get_or_create("till", "t-1").await.expect("created");
    assert_eq!(&r.node, s.routing_id(), "the only Object Server owns it");

    for how in FAILURES {
        let local = on_s.request("t-1", &Fails(how)).await.expect_err("fails");
        let remote = on_c.request("t-1", &Fails(how)).await.expect_err("fails");
        assert_same_node(how, &local);
        assert_remote(&remote, local.kind());
    }
    let _ = c;
    stop_all(&[&hc, &hs]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_same_node_instance_spot_request_gets_the_handlers_error_itself_with_the_remote_kind() {
    let h = Harness::memory();
    let relocation: std::sync::Arc<dyn zlink_store_spi::DynRelocationStore> =
        super::instances::relocation_store(&h).await;
    let (hs, s) = start_root(
        &h,
        |r| r.relocation_store(relocation),
        |b| {
            b.object_role(ObjectRole::Server)
                .instance_spot_type::<Till>("till", till_type)
        },
    )
    .await;
    let (hc, c) = start(&h, |b| b.object_role(ObjectRole::Client)).await;
    wait_peers(&c, 1).await;
    wait_discovered(&[&hs]).await;
    let (on_s, on_c) = (hs.spots().expect("manager"), hc.spots().expect("manager"));

    // The first message creates the Instance Spot on the only Object Server (its handler
    // fails that one too); every later one reaches the Ready Spot there.
    for how in FAILURES {
        let local = on_s
            .instance("i-1")
            .request(&Fails(how))
            .await
            .expect_err("fails");
        let remote = on_c
            .instance("i-1")
            .request(&Fails(how))
            .await
            .expect_err("fails");
        assert_same_node(how, &local);
        assert_remote(&remote, local.kind());
    }
    let found = on_s
        .find("i-1")
        .await
        .expect("read")
        .expect("the Spot exists");
    assert_eq!(&found.node, s.routing_id(), "it lives on the Object Server");
    let _ = c;
    stop_all(&[&hc, &hs]).await;
}
