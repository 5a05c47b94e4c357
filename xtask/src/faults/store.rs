//! What a fault run reads of its Location Store from outside, holding no lease and writing
//! nothing: each node's capacity row once the fault healed (`zlink_location::LocationReader`),
//! and every key left under the prefix after the clean shutdown (the raw reader of
//! `zlink audit`, `zlink_cli::redis::Raw`). The judgement of both is in [`super::check`].

use std::sync::Arc;
use std::time::Duration;

use zlink_cli::audit::{RawValue, Role, role_of};
use zlink_location::{LocationOptions, LocationReader, MeshName, NodeKey, RoutingId};
use zlink_redis_location::{RedisLocationOptions, RedisLocationStore};
use zlink_store_spi::DynLocationStore;

use super::check::{Left, LeftKey, RowCount};

/// Every Redis command of these reads is bounded by this.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())
}

fn hex_bytes(s: &str) -> Option<Vec<u8>> {
    if s.is_empty() || s.len() % 2 != 0 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The capacity row of each node `rids` (hex routing ids) of mesh `mesh`, and the slots the
/// authority rows and reservations place on it, in the order of `rids`.
pub(crate) fn capacity_rows(
    url: &str,
    prefix: &str,
    mesh: &str,
    rids: &[String],
) -> Result<Vec<RowCount>, String> {
    let mesh = MeshName::new(mesh).map_err(|e| e.to_string())?;
    runtime()?.block_on(async {
        let options = RedisLocationOptions::from_url(url)
            .and_then(|o| o.with_key_prefix(prefix.to_owned()))
            .map_err(|e| e.to_string())?;
        let store: Arc<dyn DynLocationStore> = Arc::new(
            RedisLocationStore::connect(options)
                .await
                .map_err(|e| e.to_string())?,
        );
        let reader =
            LocationReader::new(store, &LocationOptions::default()).map_err(|e| e.to_string())?;
        let mut rows = Vec::with_capacity(rids.len());
        for rid in rids {
            let routing_id = hex_bytes(rid)
                .and_then(|b| RoutingId::new(b).ok())
                .ok_or_else(|| format!("`{rid}` is no routing id"))?;
            let node = NodeKey {
                mesh: mesh.clone(),
                routing_id,
            };
            let row = tokio::time::timeout(READ_TIMEOUT, reader.node_capacity(&node))
                .await
                .map_err(|_| "the capacity row read timed out".to_owned())?
                .map_err(|e| e.to_string())?;
            let usage = tokio::time::timeout(READ_TIMEOUT * 4, reader.node_usage(&node))
                .await
                .map_err(|_| "the capacity usage read timed out".to_owned())?
                .map_err(|e| e.to_string())?;
            rows.push(RowCount {
                actors: row.actors,
                spots: row.spots,
                active_actors: usage.actors.active,
                reserved_actors: usage.actors.reserved,
                active_spots: usage.spots.active,
                reserved_spots: usage.spots.reserved,
            });
        }
        Ok(rows)
    })
}

/// The Actor ids among `ids` whose authority record is in Creating (a reservation whose
/// factory result never committed nor was cleaned up).
pub(crate) fn creating(url: &str, prefix: &str, ids: &[String]) -> Result<Vec<String>, String> {
    use zlink_location::{EntryState, LookupKind, ObjectId};
    runtime()?.block_on(async {
        let options = RedisLocationOptions::from_url(url)
            .and_then(|o| o.with_key_prefix(prefix.to_owned()))
            .map_err(|e| e.to_string())?;
        let store: Arc<dyn DynLocationStore> = Arc::new(
            RedisLocationStore::connect(options)
                .await
                .map_err(|e| e.to_string())?,
        );
        let reader =
            LocationReader::new(store, &LocationOptions::default()).map_err(|e| e.to_string())?;
        let mut stuck = Vec::new();
        for id in ids {
            let object = ObjectId::new(id.clone()).map_err(|e| e.to_string())?;
            let entry =
                tokio::time::timeout(READ_TIMEOUT, reader.lookup(LookupKind::Actor, &object))
                    .await
                    .map_err(|_| "a lookup timed out".to_owned())?
                    .map_err(|e| e.to_string())?;
            if entry.is_some_and(|e| e.state == EntryState::Creating) {
                stuck.push(id.clone());
            }
        }
        Ok(stuck)
    })
}

/// Every key under `{prefix}:`, each with what it is (a helper key, a record's family and
/// expiry, a Relocation Store key, or a key outside the layout).
pub(crate) fn keys_left(
    target: &zlink_cli::redis::Target,
    prefix: &str,
) -> Result<Vec<LeftKey>, String> {
    use zlink_cli::redis::Raw;
    runtime()?.block_on(async {
        let raw = Raw::connect(target, READ_TIMEOUT)
            .await
            .map_err(|e| e.to_string())?;
        let keys = raw.read_prefix(prefix).await.map_err(|e| e.to_string())?;
        raw.quit().await;
        Ok(keys
            .iter()
            .map(|k| {
                let name = zlink_cli::finding::show_bytes(&k.name);
                let left = match role_of(prefix, &k.name) {
                    Role::Seq | Role::Index | Role::Snapshots | Role::SnapshotSeq => Left::Helper,
                    Role::RelocationStore => Left::Relocation {
                        expires: k.pttl_ms >= 0,
                    },
                    Role::Foreign => Left::Foreign,
                    Role::Record(_) => record(&k.value),
                };
                LeftKey { name, left }
            })
            .collect())
    })
}

/// How many keys under `{prefix}:` there are of each kind (`tombstone`, `helper`, a record's
/// family with `durable` or `expiring`, `relocation`, `foreign`): what a benchmark leaves
/// for its purge.
pub(crate) fn keys_left_by_kind(
    target: &zlink_cli::redis::Target,
    prefix: &str,
) -> Result<std::collections::BTreeMap<String, usize>, String> {
    let mut by_kind = std::collections::BTreeMap::new();
    for k in keys_left(target, prefix)? {
        let kind = match k.left {
            Left::Helper => "helper".to_owned(),
            Left::Tombstone => "tombstone".to_owned(),
            Left::Record {
                family,
                expires_at_ms,
                ..
            } => {
                let how = if expires_at_ms > 0 {
                    "expiring"
                } else {
                    "durable"
                };
                format!("{family} ({how})")
            }
            Left::Relocation { expires: true } => "relocation (expiring)".to_owned(),
            Left::Relocation { expires: false } => "relocation (durable)".to_owned(),
            Left::Foreign => "foreign".to_owned(),
        };
        *by_kind.entry(kind).or_insert(0) += 1;
    }
    Ok(by_kind)
}

/// What a record key holds: its newest member's family and expiry, a tombstone, or (a value
/// that does not decode as the provider's record) foreign.
fn record(value: &RawValue) -> Left {
    let RawValue::ZSet(members) = value else {
        return Left::Foreign;
    };
    let Some(newest) = members
        .last()
        .and_then(|(bytes, _)| zlink_cli::member::decode_member(bytes).ok())
    else {
        return Left::Foreign;
    };
    if newest.tombstone {
        return Left::Tombstone;
    }
    match zlink_cli::family::classify(&newest.original_key) {
        Ok(family) => Left::Record {
            family: family.as_str().to_owned(),
            key: zlink_cli::finding::show_bytes(&newest.original_key),
            expires_at_ms: newest.expires_at_ms,
        },
        Err(_) => Left::Foreign,
    }
}
