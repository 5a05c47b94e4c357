//! [`LocationStore::read_many`](zlink_store_spi::LocationStore::read_many) on Redis: the newest
//! member of every key read by one script call (`lua/read_many.lua`, Redis `TIME` inside it),
//! each key answered exactly as an exact read of it answers.

use bytes::Bytes;
use fred::types::{Key, Value};
use zlink_store_spi::{
    ReadResult, StoreKey, StoreResult, StoreTime, UnreadableKind, check_read_many_len,
};

use super::{
    RedisLocationStore, UNREADABLE_FOREIGN_TYPE, array, bulk, parse_time, reply_error, unreadable,
};
use crate::record::decode_member;

/// The script: every key's newest member, or a per-key status.
pub(super) const READ_MANY_LUA: &str = include_str!("../lua/read_many.lua");

impl RedisLocationStore {
    /// One script call for every key (all carry the store's hashtag, so one Cluster slot).
    pub(super) async fn do_read_many(&self, keys: &[StoreKey]) -> StoreResult<Vec<ReadResult>> {
        check_read_many_len(keys.len())?;
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let layout = &self.inner.layout;
        let record_keys: Vec<Key> = keys
            .iter()
            .map(|k| Key::from(layout.record_key(k)))
            .collect();
        let reply = self
            .eval(&self.inner.read_many, || (record_keys.clone(), Vec::new()))
            .await?;
        let mut parts = array(reply)?.into_iter();
        let now = parse_time(parts.next(), parts.next())?;
        if parts.len() != keys.len() {
            return Err(reply_error("not one read entry per key"));
        }
        keys.iter()
            .zip(parts)
            .map(|(key, entry)| match entry {
                Value::Null => Ok(ReadResult::Missing { store_now: now }),
                Value::Integer(UNREADABLE_FOREIGN_TYPE) => {
                    Err(unreadable(key, UnreadableKind::ForeignType))
                }
                Value::Integer(_) => Err(reply_error("unknown read status")),
                member => member_read(key, &bulk(member)?, now),
            })
            .collect()
    }
}

/// What an exact read of `key` answers when its newest member is `member`, read at `now`: the
/// value while it is alive, `Missing` once it is a tombstone or expired, and `Unreadable`
/// (corrupt) for a member that does not decode or names another key.
pub(super) fn member_read(
    key: &StoreKey,
    member: &Bytes,
    now: StoreTime,
) -> StoreResult<ReadResult> {
    let record = match decode_member(member) {
        Ok(r) if r.key == *key => r,
        Ok(_) => {
            tracing::debug!(%key, "the record names another key");
            return Err(unreadable(key, UnreadableKind::Corrupt));
        }
        Err(e) => {
            tracing::debug!(%key, error = %e, "undecodable record");
            return Err(unreadable(key, UnreadableKind::Corrupt));
        }
    };
    Ok(if record.alive_at(now) {
        ReadResult::Found {
            bytes: record.bytes,
            version: record.version,
            expires_at: record.expires_at,
            store_now: now,
        }
    } else {
        ReadResult::Missing { store_now: now }
    })
}
