//! Spec 22 §4 on Redis: the conditional batch is one script — all conditions, then all
//! mutations with one new version — whose Conflict changes nothing, not even the sequence;
//! its bounds hold at the limit and fail one past it before any I/O.
#![allow(clippy::unwrap_used)]

mod common;

use bytes::Bytes;
use common::{fresh_prefix, key, record_key, seq_key, targets};
use fred::types::Value;
use zlink_store_spi::{
    Argument, ArgumentError, Condition, LocationStore, Mutation, ReadResult, Retention, StoreError,
    StoreKey, UnreadableKind, WriteRequest, WriteResult,
};

fn versions(r: WriteResult) -> Vec<zlink_store_spi::StoreVersion> {
    match r {
        WriteResult::Applied { put_versions, .. } => put_versions,
        WriteResult::Conflict { .. } => panic!("unexpected Conflict"),
    }
}

/// Spec 22 §4: "If even one condition is false, it returns Conflict, and mutation and version
/// increments are zero" — every Redis key of the store is byte-identical afterwards, the
/// sequence included.
#[tokio::test]
async fn conflict_changes_nothing_not_even_the_sequence() {
    for t in targets().await {
        let prefix = fresh_prefix("conflict");
        let store = t.store(&prefix).await;
        let (a, b, c) = (key("a"), key("b"), key("c"));
        let v = versions(
            store
                .write(
                    &WriteRequest::new(
                        vec![],
                        vec![
                            Mutation::put(a.clone(), "a1"),
                            Mutation::put(b.clone(), "b1"),
                        ],
                    )
                    .unwrap(),
                )
                .await
                .unwrap(),
        );
        let before = t.raw.state(&prefix).await;
        assert!(before.contains_key(&seq_key(&prefix)));
        for conditions in [
            vec![
                Condition::Version(a.clone(), v[0].clone()),
                Condition::Missing(b.clone()),
            ],
            vec![
                Condition::Missing(c.clone()),
                Condition::Version(
                    b.clone(),
                    zlink_store_spi::StoreVersion::new("999").unwrap(),
                ),
            ],
            vec![Condition::Version(c.clone(), v[0].clone())],
        ] {
            let req = WriteRequest::new(
                conditions,
                vec![
                    Mutation::put(a.clone(), "a2"),
                    Mutation::Delete(b.clone()),
                    Mutation::put(c.clone(), "c1"),
                ],
            )
            .unwrap();
            let r = store.write(&req).await.unwrap();
            assert!(
                matches!(r, WriteResult::Conflict { .. }),
                "{}: {r:?}",
                t.name
            );
            assert_eq!(
                t.raw.state(&prefix).await,
                before,
                "{}: a Conflict changed Redis",
                t.name
            );
        }
        t.raw.purge(&prefix).await;
    }
}

/// Spec 22 §10: "Up to 2,048 unique keys and a 4 MiB encoded request apply as one atomic
/// commit" — one batch at both limits at once commits with one version for every put.
#[tokio::test]
async fn batch_at_2048_keys_and_4_mib_commits_as_one() {
    for t in targets().await {
        let prefix = fresh_prefix("batch-limit");
        let store = t.store(&prefix).await;
        let keys: Vec<StoreKey> = (0..WriteRequest::MAX_UNIQUE_KEYS)
            .map(|i| key(&format!("k{i:05}")))
            .collect();
        let key_bytes: usize = keys.iter().map(StoreKey::len).sum();
        let budget = WriteRequest::MAX_ENCODED_LEN - key_bytes;
        let each = budget / keys.len();
        let extra = budget - each * keys.len();
        let mutations: Vec<Mutation> = keys
            .iter()
            .enumerate()
            .map(|(i, k)| {
                let n = each + usize::from(i < extra);
                Mutation::put(k.clone(), Bytes::from(vec![b'a' + (i % 26) as u8; n]))
            })
            .collect();
        let req = WriteRequest::new(vec![], mutations).unwrap();
        assert_eq!(req.unique_keys(), 2048);
        assert_eq!(req.encoded_len(), 4 * 1024 * 1024);
        let v = versions(store.write(&req).await.unwrap());
        assert_eq!(v.len(), 2048);
        assert!(v.iter().all(|x| *x == v[0]), "one commit, one version");
        for (i, k) in keys.iter().enumerate().step_by(131) {
            match store.read(k).await.unwrap() {
                ReadResult::Found { bytes, version, .. } => {
                    assert_eq!(version, v[0]);
                    assert_eq!(bytes.len(), each + usize::from(i < extra));
                    assert!(bytes.iter().all(|&b| b == b'a' + (i % 26) as u8));
                }
                other => panic!("{}: {k} {other:?}", t.name),
            }
        }
        // 2,048 keys also as 1,024 conditions plus 1,024 other keys' mutations.
        let fresh: Vec<StoreKey> = (0..1024).map(|i| key(&format!("n{i:05}"))).collect();
        let req = WriteRequest::new(
            keys[..1024]
                .iter()
                .map(|k| Condition::Version(k.clone(), v[0].clone()))
                .collect(),
            fresh
                .iter()
                .map(|k| Mutation::put(k.clone(), "x"))
                .collect(),
        )
        .unwrap();
        assert_eq!(req.unique_keys(), 2048);
        assert!(store.write(&req).await.unwrap().is_applied(), "{}", t.name);
        t.raw.purge(&prefix).await;
    }
}

/// One past each bound — 2,049 unique keys, 4 MiB + 1 encoded, a 1 MiB + 1 value — is a typed
/// argument error before any I/O: the store's namespace stays empty.
#[tokio::test]
async fn batch_one_past_the_limits_is_rejected_before_any_io() {
    for t in targets().await {
        let prefix = fresh_prefix("batch-past");
        let store = t.store(&prefix).await;
        let keys: Vec<StoreKey> = (0..=WriteRequest::MAX_UNIQUE_KEYS)
            .map(|i| key(&format!("k{i:05}")))
            .collect();
        let too_many = WriteRequest::new(
            vec![],
            keys.iter().map(|k| Mutation::put(k.clone(), "v")).collect(),
        );
        assert!(matches!(
            too_many,
            Err(ArgumentError::Length {
                what: Argument::Batch,
                actual: 2049,
                ..
            })
        ));
        // Four one-byte keys and values summing to 4 MiB - 4 + 1: one byte past the bound.
        let mut four_and_a_bit: Vec<Mutation> = (0..4)
            .map(|i| Mutation::put(key(&format!("{i}")), Bytes::from(vec![0u8; 1024 * 1024])))
            .collect();
        four_and_a_bit[3] = Mutation::put(key("3"), Bytes::from(vec![0u8; 1024 * 1024 - 4 + 1]));
        let r = WriteRequest::new(vec![], four_and_a_bit);
        assert!(
            matches!(r, Err(ArgumentError::Length { what: Argument::Batch, actual, .. }) if actual == WriteRequest::MAX_ENCODED_LEN + 1),
            "{r:?}"
        );
        let big_value = WriteRequest::new(
            vec![],
            vec![Mutation::put(
                key("v"),
                Bytes::from(vec![0u8; 1024 * 1024 + 1]),
            )],
        );
        assert!(matches!(
            big_value,
            Err(ArgumentError::Length {
                what: Argument::Value,
                ..
            })
        ));
        let e = StoreError::from(big_value.unwrap_err());
        assert_eq!(e.kind(), zlink_store_spi::StoreErrorKind::InvalidArgument);
        // Nothing reached Redis: not even the sequence exists.
        assert!(store.read(&key("v")).await.unwrap().is_missing());
        assert!(t.raw.keys_under(&prefix).await.is_empty(), "{}", t.name);
    }
}

/// A record key holding another Redis type fails the batch with the typed error naming that key
/// before any command writes: the other mutations are not applied and no sequence is issued.
#[tokio::test]
async fn foreign_type_under_a_record_key_aborts_before_any_write() {
    for t in targets().await {
        let prefix = fresh_prefix("wrongtype");
        let store = t.store(&prefix).await;
        let (good, bad) = (key("good"), key("bad"));
        store
            .write(&WriteRequest::new(vec![], vec![Mutation::put(key("seed"), "s")]).unwrap())
            .await
            .unwrap();
        t.raw
            .cmd(
                "SET",
                vec![
                    record_key(&prefix, bad.as_bytes()).as_str().into(),
                    "not a record".into(),
                ],
            )
            .await;
        let before = t.raw.state(&prefix).await;
        for muts in [
            vec![
                Mutation::put(good.clone(), "g"),
                Mutation::put(bad.clone(), "b"),
            ],
            vec![
                Mutation::put(good.clone(), "g"),
                Mutation::Delete(bad.clone()),
            ],
        ] {
            let r = store.write(&WriteRequest::new(vec![], muts).unwrap()).await;
            assert!(
                matches!(
                    &r,
                    Err(StoreError::Unreadable(u))
                        if u.key == bad && u.kind == UnreadableKind::ForeignType
                ),
                "{}: {r:?}",
                t.name
            );
            assert_eq!(
                t.raw.state(&prefix).await,
                before,
                "{}: partially applied",
                t.name
            );
        }
        t.raw.purge(&prefix).await;
    }
}

/// A durable value stays until deleted (no Redis TTL); an expiring record carries a Redis TTL
/// so Redis reclaims it after its expiry; a delete with no live snapshot removes the record at
/// once.
#[tokio::test]
async fn record_lifetimes_follow_expiry_and_deletion() {
    for t in targets().await {
        let prefix = fresh_prefix("lifetimes");
        let store = t.store(&prefix).await;
        let (durable, expiring) = (key("durable"), key("expiring"));
        let retention = Retention::from_millis(10_000).unwrap();
        store
            .write(
                &WriteRequest::new(
                    vec![],
                    vec![
                        Mutation::put(durable.clone(), "d"),
                        Mutation::put_expiring(expiring.clone(), "e", retention),
                    ],
                )
                .unwrap(),
            )
            .await
            .unwrap();
        let pttl = |k: &StoreKey| {
            let rk = record_key(&prefix, k.as_bytes());
            let raw = t.raw.clone();
            async move { raw.int("PTTL", vec![Value::from(rk)]).await }
        };
        assert_eq!(pttl(&durable).await, -1, "durable value has no Redis TTL");
        let ttl = pttl(&expiring).await;
        assert!(ttl > 10_000 && ttl <= 70_000, "expiring record TTL {ttl}");
        // Overwriting with a durable value removes the TTL again.
        store
            .write(
                &WriteRequest::new(vec![], vec![Mutation::put(expiring.clone(), "now durable")])
                    .unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(pttl(&expiring).await, -1);
        // Deleting with no live snapshot leaves no record.
        store
            .write(
                &WriteRequest::new(
                    vec![],
                    vec![
                        Mutation::Delete(durable.clone()),
                        Mutation::Delete(expiring.clone()),
                    ],
                )
                .unwrap(),
            )
            .await
            .unwrap();
        let left: Vec<String> = t
            .raw
            .keys_under(&prefix)
            .await
            .into_iter()
            .filter(|k| k.contains(":opaque:"))
            .collect();
        assert!(left.is_empty(), "{}: {left:?}", t.name);
        t.raw.purge(&prefix).await;
    }
}

/// A batch of conditions only is `Applied` with no version when they hold, `Conflict` when one
/// does not, and writes nothing either way.
#[tokio::test]
async fn conditions_only_batch_writes_nothing() {
    for t in targets().await {
        let prefix = fresh_prefix("conditions-only");
        let store = t.store(&prefix).await;
        let (a, b) = (key("a"), key("b"));
        let v = versions(
            store
                .write(&WriteRequest::new(vec![], vec![Mutation::put(a.clone(), "a")]).unwrap())
                .await
                .unwrap(),
        );
        let before = t.raw.state(&prefix).await;
        let holds = WriteRequest::new(
            vec![
                Condition::Version(a.clone(), v[0].clone()),
                Condition::Missing(b.clone()),
            ],
            vec![],
        )
        .unwrap();
        match store.write(&holds).await.unwrap() {
            WriteResult::Applied { put_versions, .. } => assert!(put_versions.is_empty()),
            other => panic!("{}: {other:?}", t.name),
        }
        let fails = WriteRequest::new(vec![Condition::Missing(a.clone())], vec![]).unwrap();
        assert!(!store.write(&fails).await.unwrap().is_applied());
        assert_eq!(t.raw.state(&prefix).await, before, "{}", t.name);
        t.raw.purge(&prefix).await;
    }
}
