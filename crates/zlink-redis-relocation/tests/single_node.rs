//! Live tests of the Redis Relocation Store on a single Redis node (`ZLINK_TEST_REDIS_URL`).

#![allow(clippy::unwrap_used)] // Test code: a failed unwrap is a failed test.

mod common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use fred::prelude::*;
use fred::types::client::ClientPauseKind;
use fred::types::{ClusterHash, CustomCommand};
use zlink_redis_relocation::{RedisRelocationOptions, RedisRelocationStore};
use zlink_store_spi::{
    BLOB_ENVELOPE_LEN, BlobReadResult, BlobRef, FailureKind, MAX_BLOB_LEN, MAX_DATA_CHUNK_LEN,
    PutResult, RelocationStore, RenewResult, Retention, StoreError, StoreErrorKind,
};

use common::*;

const LONG: Duration = Duration::from_secs(10);

fn hours(n: u64) -> Retention {
    Retention::from_millis(n * 3_600_000).unwrap()
}

/// Golden vector `relocationBlob`: the blob lives under
/// `{prefix}:{zlink-relocation-v1}:blob:{reference}` as its raw bytes.
#[tokio::test]
async fn blob_is_stored_as_raw_bytes_under_the_golden_key() {
    let Some(url) = single_url("blob_is_stored_as_raw_bytes_under_the_golden_key") else {
        return;
    };
    let fixture: serde_json::Value = serde_json::from_str(include_str!(
        "../../../fixtures/golden/store-record-v1.json"
    ))
    .unwrap();
    let vector = &fixture["relocationBlob"];
    let example_prefix = fixture["prefixExample"].as_str().unwrap();
    let raw_hex = vector["rawBytesHex"].as_str().unwrap();
    let raw: Vec<u8> = (0..raw_hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&raw_hex[i..i + 2], 16).unwrap())
        .collect();
    let reference = BlobRef::new(vector["reference"].as_str().unwrap()).unwrap();
    // The fixture's key with its example prefix replaced by this run's random prefix.
    let prefix = random_prefix();
    let golden_key = vector["redisKey"].as_str().unwrap();
    let key = format!(
        "{prefix}{}",
        golden_key.strip_prefix(example_prefix).unwrap()
    );

    let store = connect_single(&url, &prefix, LONG).await;
    let raw_client = raw_client(&url).await;
    let put = store
        .put(&reference, &Bytes::from(raw.clone()), hours(1))
        .await
        .unwrap();
    let PutResult::Stored { expires_at, .. } = put else {
        panic!("{put:?}")
    };
    let stored: Option<Bytes> = raw_client.get(&key).await.unwrap();
    assert_eq!(stored.as_deref(), Some(&raw[..]));
    // The Redis expiry is the reported one.
    let pexpiretime: i64 = raw_client
        .custom(
            CustomCommand::new_static("PEXPIRETIME", ClusterHash::FirstKey, false),
            vec![key.clone()],
        )
        .await
        .unwrap();
    assert_eq!(pexpiretime as u64, expires_at.as_millis());
    store.delete(&reference).await.unwrap();
    let gone: Option<Bytes> = raw_client.get(&key).await.unwrap();
    assert!(gone.is_none());
}

/// Spec 23: same reference + same bytes -> AlreadyStored; different bytes -> Conflict; a
/// refused put changes nothing.
#[tokio::test]
async fn same_bytes_already_stored_different_bytes_conflict() {
    let Some(url) = single_url("same_bytes_already_stored_different_bytes_conflict") else {
        return;
    };
    let store = connect_single(&url, &random_prefix(), LONG).await;
    let r = reference("dup");
    let payload = Bytes::from_static(b"\x00\xffsame bytes");
    let first = store.put(&r, &payload, hours(1)).await.unwrap();
    let PutResult::Stored {
        expires_at: first_exp,
        ..
    } = first
    else {
        panic!("{first:?}")
    };
    match store.put(&r, &payload, hours(5)).await.unwrap() {
        // The existing expiry is kept and reported.
        PutResult::AlreadyStored { expires_at, .. } => assert_eq!(expires_at, first_exp),
        other => panic!("{other:?}"),
    }
    for other in [
        Bytes::from_static(b"\x00\xffsame byteS"),
        Bytes::from_static(b"\x00\xffsame bytes+"),
        Bytes::from_static(b"\x00\xffsame byte"),
        Bytes::new(),
    ] {
        let answer = store.put(&r, &other, hours(1)).await.unwrap();
        assert!(matches!(answer, PutResult::Conflict { .. }), "{answer:?}");
    }
    match store.read(&r).await.unwrap() {
        BlobReadResult::Found {
            bytes, expires_at, ..
        } => {
            assert_eq!(bytes, payload);
            assert_eq!(expires_at, first_exp);
        }
        other => panic!("{other:?}"),
    }
    store.delete(&r).await.unwrap();
}

/// Spec 23 bound: a blob of exactly 64 MiB + 23 bytes round-trips; one byte more is an argument
/// error raised before any I/O, and nothing is stored.
#[tokio::test]
async fn largest_blob_round_trips_and_one_byte_more_is_rejected_before_io() {
    let Some(url) = single_url("largest_blob_round_trips_and_one_byte_more_is_rejected_before_io")
    else {
        return;
    };
    assert_eq!(MAX_BLOB_LEN, MAX_DATA_CHUNK_LEN + BLOB_ENVELOPE_LEN);
    let prefix = random_prefix();
    let store = connect_single(&url, &prefix, Duration::from_secs(60)).await;
    let raw_client = raw_client(&url).await;

    let over = reference("over");
    let mut bytes = vec![0u8; MAX_BLOB_LEN + 1];
    for (i, b) in bytes.iter_mut().enumerate() {
        *b = (i % 253) as u8;
    }
    let too_big = Bytes::from(bytes);
    let err = store.put(&over, &too_big, hours(1)).await.unwrap_err();
    assert_eq!(err.kind(), StoreErrorKind::InvalidArgument, "{err}");
    assert!(!err.outcome_unknown());
    let exists: i64 = raw_client.exists(blob_key(&prefix, &over)).await.unwrap();
    assert_eq!(exists, 0, "the rejected blob reached Redis");

    // The largest blob: the same bytes minus the last one (no second copy).
    let largest = too_big.slice(..MAX_BLOB_LEN);
    drop(too_big);
    let r = reference("largest");
    let put = store.put(&r, &largest, hours(1)).await.unwrap();
    assert!(matches!(put, PutResult::Stored { .. }), "{put:?}");
    // Putting it again compares all 64 MiB + 23 bytes.
    let again = store.put(&r, &largest, hours(1)).await.unwrap();
    assert!(
        matches!(again, PutResult::AlreadyStored { .. }),
        "{again:?}"
    );
    match store.read(&r).await.unwrap() {
        BlobReadResult::Found { bytes, .. } => {
            assert_eq!(bytes.len(), MAX_BLOB_LEN);
            assert!(bytes == largest, "largest blob came back different");
        }
        other => panic!("{other:?}"),
    }
    store.delete(&r).await.unwrap();
}

/// Spec 23: "The operation timeout bounds connection acquisition and the command; a write that
/// completes after the timeout is confirmed as AlreadyStored by retrying with the same
/// reference and bytes." Redis is made slow for real with `CLIENT PAUSE WRITE` from a second
/// connection.
#[tokio::test]
async fn put_whose_reply_timed_out_is_confirmed_as_already_stored_by_retry() {
    let Some(url) = single_url("put_whose_reply_timed_out_is_confirmed_as_already_stored_by_retry")
    else {
        return;
    };
    let prefix = random_prefix();
    let hasty = connect_single(&url, &prefix, Duration::from_millis(250)).await;
    let patient = connect_single(&url, &prefix, LONG).await;
    let control = raw_client(&url).await;
    let r = reference("late");
    let payload = Bytes::from(vec![0x5au8; 256 * 1024]);

    control
        .client_pause(700, Some(ClientPauseKind::Write))
        .await
        .unwrap();
    let started = Instant::now();
    let err = hasty.put(&r, &payload, hours(1)).await.unwrap_err();
    let waited = started.elapsed();
    assert_eq!(err.kind(), StoreErrorKind::TimedOut, "{err}");
    assert!(err.outcome_unknown());
    assert!(waited < Duration::from_millis(700), "waited {waited:?}");

    // A write from the control connection returns once the pause is over; by then the delayed
    // put has run.
    let _: () = control
        .set(format!("{prefix}:marker"), "x", None, None, false)
        .await
        .unwrap();
    let _: i64 = control.del(format!("{prefix}:marker")).await.unwrap();
    match patient.put(&r, &payload, hours(1)).await.unwrap() {
        PutResult::AlreadyStored { .. } => {}
        other => panic!("the delayed put had not landed: {other:?}"),
    }
    // And an exact read reconstructs it as well.
    match patient.read(&r).await.unwrap() {
        BlobReadResult::Found { bytes, .. } => assert_eq!(bytes, payload),
        other => panic!("{other:?}"),
    }
    patient.delete(&r).await.unwrap();
}

/// Spec 23: the operation timeout covers connection acquisition: connecting to a server that
/// never answers, and operating while the connection is gone, both end in TimedOut on time.
#[tokio::test]
async fn operation_timeout_covers_connection_acquisition() {
    let Some(url) = single_url("operation_timeout_covers_connection_acquisition") else {
        return;
    };
    let timeout = Duration::from_millis(300);

    // A server that accepts and never answers.
    let (addr, hole) = black_hole().await;
    let options = RedisRelocationOptions::from_url(&format!("redis://{addr}"))
        .and_then(|o| o.with_key_prefix("p"))
        .and_then(|o| o.with_operation_timeout(timeout))
        .unwrap();
    let started = Instant::now();
    let err = RedisRelocationStore::connect(options).await.unwrap_err();
    assert_eq!(err.kind(), StoreErrorKind::TimedOut, "{err}");
    assert!(started.elapsed() < Duration::from_secs(2));
    hole.abort();

    // A live store whose connection disappears: every operation ends in time. (A longer
    // timeout here: other tests load the same Redis while this one connects.)
    let timeout = Duration::from_secs(1);
    let proxy = Proxy::start(host_port(&url)).await;
    let store = connect_single(
        &format!("redis://{}", proxy.addr),
        &random_prefix(),
        timeout,
    )
    .await;
    let r = reference("cut");
    store
        .put(&r, &Bytes::from_static(b"x"), hours(1))
        .await
        .unwrap();
    proxy.cut();
    for _ in 0..3 {
        let started = Instant::now();
        let err = store.read(&r).await.unwrap_err();
        let waited = started.elapsed();
        assert!(
            matches!(
                err.kind(),
                StoreErrorKind::TimedOut | StoreErrorKind::Failure
            ),
            "{err}"
        );
        assert!(
            waited < timeout + Duration::from_millis(500),
            "waited {waited:?}"
        );
    }
    // The blob outlives the lost connection; clean it up directly.
    let direct = connect_single(&url, store.options().key_prefix(), LONG).await;
    direct.delete(&r).await.unwrap();
}

/// A put that could not be sent before its deadline (the connection was down) is dropped: it is
/// not sent once the connection is back, so it cannot land after the caller gave up on it.
#[tokio::test]
async fn put_not_sent_before_its_deadline_is_never_sent_later() {
    let Some(url) = single_url("put_not_sent_before_its_deadline_is_never_sent_later") else {
        return;
    };
    let prefix = random_prefix();
    let proxy = Proxy::start(host_port(&url)).await;
    let addr = proxy.addr.clone();
    let store = connect_single(
        &format!("redis://{addr}"),
        &prefix,
        Duration::from_millis(300),
    )
    .await;
    let direct = connect_single(&url, &prefix, LONG).await;
    proxy.cut();

    let r = reference("queued");
    let err = store
        .put(&r, &Bytes::from_static(b"too late"), hours(1))
        .await
        .unwrap_err();
    // Queued while the client reconnects, then given up at the deadline.
    assert_eq!(err.kind(), StoreErrorKind::TimedOut, "{err}");

    // The connection comes back on the same address; wait until the store works again.
    let proxy = Proxy::start_on(&addr, host_port(&url)).await;
    let probe = reference("probe");
    let started = Instant::now();
    while store.read(&probe).await.is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "never reconnected"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        matches!(
            direct.read(&r).await.unwrap(),
            BlobReadResult::Missing { .. }
        ),
        "the timed-out put was sent after its deadline"
    );
    proxy.cut();
}

/// Spec 23: expiry is judged by the provider clock (Redis `TIME`): StoreNow is Redis time,
/// expires_at is StoreNow + retention, an expired blob is Missing, cannot be renewed, and its
/// reference accepts a new put.
#[tokio::test]
async fn expiry_is_judged_by_the_redis_clock() {
    let Some(url) = single_url("expiry_is_judged_by_the_redis_clock") else {
        return;
    };
    let store = connect_single(&url, &random_prefix(), LONG).await;
    let raw_client = raw_client(&url).await;
    let r = reference("short");
    let payload = Bytes::from_static(b"short-lived");
    let retention = Retention::from_millis(300).unwrap();

    let before = redis_time_ms(&raw_client).await;
    let put = store.put(&r, &payload, retention).await.unwrap();
    let after = redis_time_ms(&raw_client).await;
    let PutResult::Stored {
        expires_at,
        store_now,
    } = put
    else {
        panic!("{put:?}")
    };
    assert!(
        (before..=after).contains(&store_now.as_millis()),
        "StoreNow {store_now} is not the Redis clock ({before}..={after})"
    );
    assert_eq!(expires_at, store_now.plus(retention));
    match store.read(&r).await.unwrap() {
        BlobReadResult::Found {
            expires_at: e,
            store_now: now,
            ..
        } => {
            assert_eq!(e, expires_at);
            assert!(now < e);
        }
        other => panic!("{other:?}"),
    }
    tokio::time::sleep(Duration::from_millis(400)).await;
    match store.read(&r).await.unwrap() {
        BlobReadResult::Missing { store_now } => assert!(store_now >= expires_at),
        other => panic!("expired blob readable: {other:?}"),
    }
    assert!(matches!(
        store.renew(&r, hours(1)).await.unwrap(),
        RenewResult::Missing { .. }
    ));
    let again = store.put(&r, &payload, hours(1)).await.unwrap();
    assert!(matches!(again, PutResult::Stored { .. }), "{again:?}");
    store.delete(&r).await.unwrap();
}

/// Spec 23: renew sets the expiry to the Redis clock plus the retention and never changes the
/// bytes; repeated delete is idempotent and renew cannot revive a deleted blob.
#[tokio::test]
async fn renew_extends_by_the_redis_clock_and_delete_is_idempotent() {
    let Some(url) = single_url("renew_extends_by_the_redis_clock_and_delete_is_idempotent") else {
        return;
    };
    let store = connect_single(&url, &random_prefix(), LONG).await;
    let r = reference("renew");
    let payload = Bytes::from_static(b"renewable");
    store.put(&r, &payload, hours(1)).await.unwrap();
    for n in [2, 7, 3] {
        match store.renew(&r, hours(n)).await.unwrap() {
            RenewResult::Renewed {
                expires_at,
                store_now,
            } => assert_eq!(expires_at, store_now.plus(hours(n))),
            other => panic!("{other:?}"),
        }
        match store.read(&r).await.unwrap() {
            BlobReadResult::Found { bytes, .. } => assert_eq!(bytes, payload),
            other => panic!("{other:?}"),
        }
    }
    for _ in 0..3 {
        store.delete(&r).await.unwrap();
    }
    assert!(matches!(
        store.read(&r).await.unwrap(),
        BlobReadResult::Missing { .. }
    ));
    assert!(matches!(
        store.renew(&r, hours(1)).await.unwrap(),
        RenewResult::Missing { .. }
    ));
    // Deleting a reference that never existed succeeds too.
    store.delete(&reference("never")).await.unwrap();
}

/// A blob key holding a value this provider did not write (no expiry) is a typed format
/// failure whose message carries no Redis text.
#[tokio::test]
async fn foreign_value_under_a_blob_key_is_a_format_failure() {
    let Some(url) = single_url("foreign_value_under_a_blob_key_is_a_format_failure") else {
        return;
    };
    let prefix = random_prefix();
    let store = connect_single(&url, &prefix, LONG).await;
    let raw_client = raw_client(&url).await;
    let r = reference("foreign");
    let key = blob_key(&prefix, &r);
    let _: () = raw_client
        .set(&key, "no expiry", None, None, false)
        .await
        .unwrap();
    for err in [
        store.read(&r).await.unwrap_err(),
        store
            .put(&r, &Bytes::from_static(b"x"), hours(1))
            .await
            .unwrap_err(),
    ] {
        assert!(
            matches!(
                err,
                StoreError::Failure {
                    kind: FailureKind::Format,
                    ..
                }
            ),
            "{err:?}"
        );
        let text = err.to_string();
        assert!(
            !text.contains("zlink-relocation-v1") && !text.contains("PEXPIRE"),
            "{text}"
        );
    }
    let _: i64 = raw_client.del(&key).await.unwrap();
}

/// Scripts are called by SHA-1 and reloaded when Redis has lost them (`SCRIPT FLUSH`, a
/// fail-over): operations keep working.
#[tokio::test]
async fn scripts_are_reloaded_after_the_script_cache_is_flushed() {
    let Some(url) = single_url("scripts_are_reloaded_after_the_script_cache_is_flushed") else {
        return;
    };
    let store = connect_single(&url, &random_prefix(), LONG).await;
    let raw_client = raw_client(&url).await;
    let r = reference("flushed");
    let payload = Bytes::from_static(b"survives a flush");
    let _: () = raw_client.script_flush(false).await.unwrap();
    assert!(matches!(
        store.put(&r, &payload, hours(1)).await.unwrap(),
        PutResult::Stored { .. }
    ));
    let _: () = raw_client.script_flush(false).await.unwrap();
    assert!(matches!(
        store.read(&r).await.unwrap(),
        BlobReadResult::Found { .. }
    ));
    let _: () = raw_client.script_flush(false).await.unwrap();
    assert!(matches!(
        store.renew(&r, hours(1)).await.unwrap(),
        RenewResult::Renewed { .. }
    ));
    let _: () = raw_client.script_flush(false).await.unwrap();
    store.delete(&r).await.unwrap();
}

/// Spec 23: "`read` bytes do not change while held" — also when the blob is deleted and its
/// reference reused while the bytes are held.
#[tokio::test]
async fn read_bytes_stay_unchanged_while_held() {
    let Some(url) = single_url("read_bytes_stay_unchanged_while_held") else {
        return;
    };
    let store = connect_single(&url, &random_prefix(), LONG).await;
    let r = reference("held");
    store
        .put(&r, &Bytes::from_static(b"first"), hours(1))
        .await
        .unwrap();
    let BlobReadResult::Found { bytes: held, .. } = store.read(&r).await.unwrap() else {
        panic!("missing")
    };
    store.delete(&r).await.unwrap();
    store
        .put(&r, &Bytes::from_static(b"second"), hours(1))
        .await
        .unwrap();
    assert_eq!(&held[..], b"first");
    store.delete(&r).await.unwrap();
}

/// Two stores with different prefixes on the same Redis never see each other's blobs.
#[tokio::test]
async fn prefixes_isolate_stores_on_the_same_redis() {
    let Some(url) = single_url("prefixes_isolate_stores_on_the_same_redis") else {
        return;
    };
    let a = connect_single(&url, &random_prefix(), LONG).await;
    let b = connect_single(&url, &random_prefix(), LONG).await;
    let r = reference("shared-name");
    a.put(&r, &Bytes::from_static(b"from a"), hours(1))
        .await
        .unwrap();
    assert!(matches!(
        b.read(&r).await.unwrap(),
        BlobReadResult::Missing { .. }
    ));
    assert!(matches!(
        b.put(&r, &Bytes::from_static(b"from b"), hours(1))
            .await
            .unwrap(),
        PutResult::Stored { .. }
    ));
    a.delete(&r).await.unwrap();
    b.delete(&r).await.unwrap();
}
