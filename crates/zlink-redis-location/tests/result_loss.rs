//! Spec 22 §6 on Redis: after a time-out or a broken connection whether a write committed is
//! unknown; the provider never reports an outcome it did not observe, never resends, and the
//! caller reconstructs the outcome with an exact read and a version compare. The operation
//! timeout bounds waiting for the connection as well as the command.
#![allow(clippy::unwrap_used)]

mod common;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{PAUSE_MS, PausingWriter, fresh_prefix, key, targets};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use zlink_redis_location::{RedisLocationOptions, RedisLocationStore};
use zlink_store_conformance::live;
use zlink_store_spi::{
    Condition, LocationStore, Mutation, ReadResult, StoreErrorKind, StoreKey, StoreVersion,
    WriteRequest, WriteResult,
};

async fn current(store: &RedisLocationStore, k: &StoreKey) -> (Vec<u8>, StoreVersion) {
    match store.read(k).await.expect("read") {
        ReadResult::Found { bytes, version, .. } => (bytes.to_vec(), version),
        ReadResult::Missing { .. } => panic!("{k} missing"),
    }
}

/// A write whose reply is lost (client timeout 150 ms, server writes paused 500 ms by a second
/// connection) fails with `TimedOut`; exact reads then show the old state until the delayed
/// command runs and the new state after; the version compare tells which, and retrying the
/// same conditional write conflicts. A lost write whose condition did not hold is
/// reconstructed as not committed.
#[tokio::test]
async fn lost_write_reply_is_reconstructed_by_exact_read() {
    for t in targets().await {
        let prefix = fresh_prefix("result-loss");
        let store = t.store(&prefix).await;
        let lossy = PausingWriter::new(&t, &prefix).await;
        let (a, b) = (key("a"), key("b"));
        let seeded = store
            .write(
                &WriteRequest::new(
                    vec![],
                    vec![
                        Mutation::put(a.clone(), "a0"),
                        Mutation::put(b.clone(), "b0"),
                    ],
                )
                .unwrap(),
            )
            .await
            .unwrap();
        let WriteResult::Applied {
            put_versions: v0, ..
        } = seeded
        else {
            panic!()
        };
        let cas = WriteRequest::new(
            vec![Condition::Version(a.clone(), v0[0].clone())],
            vec![
                Mutation::put(a.clone(), "a1"),
                Mutation::put(b.clone(), "b1"),
            ],
        )
        .unwrap();
        let sent = Instant::now();
        let err = lossy.write(&cas).await.expect_err("the reply must be lost");
        assert_eq!(err.kind(), StoreErrorKind::TimedOut, "{}: {err:?}", t.name);
        assert!(err.outcome_unknown());
        // Reads are not paused: a read answered while the pause lasts shows the old state.
        let early = current(&store, &a).await;
        if sent.elapsed() < Duration::from_millis(PAUSE_MS - 100) {
            assert_eq!(early, (b"a0".to_vec(), v0[0].clone()), "{}", t.name);
        }
        // Reconstruct: poll exact reads until the delayed command has run.
        let deadline = Instant::now() + Duration::from_secs(5);
        let (bytes, version) = loop {
            let (bytes, version) = current(&store, &a).await;
            if version != v0[0] || Instant::now() > deadline {
                break (bytes, version);
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        };
        assert_ne!(version, v0[0], "{}: the delayed write never ran", t.name);
        assert_eq!(bytes, b"a1");
        // Both keys of the batch carry the one new version: it committed as a whole.
        assert_eq!(current(&store, &b).await, (b"b1".to_vec(), version.clone()));
        assert!(
            !store.write(&cas).await.unwrap().is_applied(),
            "{}: retry applied twice",
            t.name
        );

        // A lost write whose condition fails: the exact read shows it did not commit.
        let stale = WriteRequest::new(
            vec![Condition::Version(a.clone(), v0[0].clone())],
            vec![Mutation::put(a.clone(), "never")],
        )
        .unwrap();
        let err = lossy
            .write(&stale)
            .await
            .expect_err("the reply must be lost");
        assert!(err.outcome_unknown());
        tokio::time::sleep(Duration::from_millis(PAUSE_MS + 100)).await;
        assert_eq!(
            current(&store, &a).await,
            (b"a1".to_vec(), version),
            "{}",
            t.name
        );
        t.raw.purge(&prefix).await;
    }
}

/// Connecting to a server that accepts but never answers fails with `TimedOut` within the
/// operation timeout; connecting to a closed port fails within it too.
#[tokio::test]
async fn connect_times_out_against_a_silent_server() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let held = tokio::spawn(async move {
        let mut sockets = Vec::new();
        while let Ok((s, _)) = listener.accept().await {
            sockets.push(s);
        }
    });
    let options = RedisLocationOptions::from_url(&format!("redis://{addr}"))
        .unwrap()
        .with_operation_timeout(Duration::from_millis(300))
        .unwrap();
    let started = Instant::now();
    let err = RedisLocationStore::connect(options)
        .await
        .expect_err("silent server");
    assert_eq!(err.kind(), StoreErrorKind::TimedOut, "{err:?}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    held.abort();

    // A closed port: refused at once, within the timeout too.
    let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = closed.local_addr().unwrap();
    drop(closed);
    let options = RedisLocationOptions::from_url(&format!("redis://{addr}"))
        .unwrap()
        .with_operation_timeout(Duration::from_millis(300))
        .unwrap();
    let started = Instant::now();
    let err = RedisLocationStore::connect(options)
        .await
        .expect_err("closed port");
    assert!(
        matches!(
            err.kind(),
            StoreErrorKind::Failure | StoreErrorKind::TimedOut
        ),
        "{err:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}

/// A loopback TCP proxy in front of Redis that can be cut (every connection dropped, new ones
/// refused) and restored on the same address.
struct Proxy {
    addr: SocketAddr,
    upstream: SocketAddr,
    tasks: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl Proxy {
    async fn start(upstream: SocketAddr, addr: SocketAddr) -> Proxy {
        let listener = TcpListener::bind(addr).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let tasks: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let registry = tasks.clone();
        let accept = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let conn = tokio::spawn(async move {
                    if let Ok(mut server) = TcpStream::connect(upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
                registry.lock().unwrap().push(conn);
            }
        });
        tasks.lock().unwrap().push(accept);
        Proxy {
            addr,
            upstream,
            tasks,
        }
    }

    fn cut(&self) {
        for t in self.tasks.lock().unwrap().drain(..) {
            t.abort();
        }
    }
}

fn single_node_addr(url: &str) -> Option<SocketAddr> {
    let rest = url.split_once("://")?.1;
    let hostport = rest
        .rsplit_once('@')
        .map_or(rest, |(_, h)| h)
        .split('/')
        .next()?;
    let hostport = if hostport.contains(':') {
        hostport.to_owned()
    } else {
        format!("{hostport}:6379")
    };
    std::net::ToSocketAddrs::to_socket_addrs(&hostport)
        .ok()?
        .next()
}

/// With the connection gone and the server unreachable, every operation fails within the
/// operation timeout (waiting for a connection counts against it) with an outcome-unknown
/// error; writes that timed out before reaching the server are never sent later; once the
/// server is reachable again the same store works again.
#[tokio::test]
async fn operation_timeout_bounds_waiting_for_a_lost_connection() {
    let Some(url) = live::env_or_skip(common::SINGLE_ENV, &live::current_test()) else {
        return;
    };
    let upstream = single_node_addr(&url).expect("ZLINK_TEST_REDIS_URL names a reachable host");
    let proxy = Proxy::start(upstream, "127.0.0.1:0".parse().unwrap()).await;
    let timeout = Duration::from_millis(600);
    let prefix = fresh_prefix("lost-connection");
    let options = RedisLocationOptions::from_url(&format!("redis://{}", proxy.addr))
        .unwrap()
        .with_key_prefix(prefix.clone())
        .unwrap()
        .with_operation_timeout(timeout)
        .unwrap();
    let store = RedisLocationStore::connect(options).await.unwrap();
    let k = key("k");
    let put = WriteRequest::new(vec![], vec![Mutation::put(k.clone(), "v")]).unwrap();
    assert!(store.write(&put).await.unwrap().is_applied());

    proxy.cut();
    let late = WriteRequest::new(vec![], vec![Mutation::put(k.clone(), "late")]).unwrap();
    for _ in 0..2 {
        let started = Instant::now();
        let err = store.write(&late).await.expect_err("unreachable server");
        assert!(err.outcome_unknown(), "{err:?}");
        assert!(
            started.elapsed() < timeout + Duration::from_millis(500),
            "{:?}",
            started.elapsed()
        );
        let started = Instant::now();
        let err = store.read(&k).await.expect_err("unreachable server");
        assert!(
            matches!(
                err.kind(),
                StoreErrorKind::TimedOut | StoreErrorKind::Failure
            ),
            "{err:?}"
        );
        assert!(
            started.elapsed() < timeout + Duration::from_millis(500),
            "{:?}",
            started.elapsed()
        );
    }

    let restored = Proxy::start(proxy.upstream, proxy.addr).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match store.read(&k).await {
            Ok(r) => {
                // A write that timed out while waiting for the connection was dropped, not
                // sent once the connection came back.
                assert_eq!(r.bytes().map(|b| b.as_ref()), Some(&b"v"[..]), "{r:?}");
                break;
            }
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("store did not recover: {e:?}"),
        }
    }
    restored.cut();
    drop(store);
    if let Some(t) = common::single().await {
        t.raw.purge(&prefix).await;
    }
}
