//! The physical key layout (spec 22 §8–§9) and the scan index encoding.
//!
//! Every key of one store carries the `{zlink-location-v3}` hashtag, so every script touches
//! one Redis Cluster slot:
//!
//! - `{prefix}:{zlink-location-v3}:opaque:{sha256hex(K)}` — the record of logical key `K`, a
//!   ZSET of format-tagged members scored by the commit sequence (the MUST-level contract);
//! - `{prefix}:{zlink-location-v3}:seq` — the commit sequence (`INCR`);
//! - `{prefix}:{zlink-location-v3}:index` — a ZSET (all scores 0) of `hex(K) "." sha256hex(K)`,
//!   whose lexicographic order is the byte order of `K`;
//! - `{prefix}:{zlink-location-v3}:snapshots` — live scan snapshots, scored by their expiry;
//! - `{prefix}:{zlink-location-v3}:snapshot-seq` — numbers snapshots in creation order.

use sha2::{Digest, Sha256};
use zlink_store_spi::StoreKey;

/// The Redis Cluster hashtag every key of the store carries.
pub(crate) const HASHTAG: &str = "{zlink-location-v3}";

/// Lower-case hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = Vec::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(DIGITS[usize::from(b >> 4)]);
        out.push(DIGITS[usize::from(b & 0x0f)]);
    }
    // Only ASCII hex digits were pushed.
    String::from_utf8(out).unwrap_or_default()
}

/// Decodes lower-case hex; `None` for anything else.
pub(crate) fn unhex(s: &str) -> Option<Vec<u8>> {
    fn digit(c: u8) -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        }
    }
    let b = s.as_bytes();
    if b.len() % 2 != 0 {
        return None;
    }
    b.chunks_exact(2)
        .map(|p| Some(digit(p[0])? << 4 | digit(p[1])?))
        .collect()
}

/// `sha256hex(bytes)`, lower case.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// The key names of one store (one key prefix).
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    prefix: String,
    record_prefix: String,
    seq: String,
    index: String,
    snapshots: String,
    snapshot_counter: String,
}

impl Layout {
    /// The layout under a validated prefix.
    pub(crate) fn new(prefix: &str) -> Self {
        let ns = format!("{prefix}:{HASHTAG}:");
        Layout {
            prefix: prefix.to_owned(),
            record_prefix: format!("{ns}opaque:"),
            seq: format!("{ns}seq"),
            index: format!("{ns}index"),
            snapshots: format!("{ns}snapshots"),
            snapshot_counter: format!("{ns}snapshot-seq"),
        }
    }

    /// The key prefix the store was configured with.
    pub(crate) fn prefix(&self) -> &str {
        &self.prefix
    }

    /// `{prefix}:{zlink-location-v3}:opaque:`, to which a record key appends `sha256hex(K)`.
    pub(crate) fn record_prefix(&self) -> &str {
        &self.record_prefix
    }

    /// The record key of logical key `key`.
    pub(crate) fn record_key(&self, key: &StoreKey) -> String {
        self.record_key_of_sha(&sha256_hex(key.as_bytes()))
    }

    /// The record key of the logical key whose `sha256hex` is `sha`.
    pub(crate) fn record_key_of_sha(&self, sha: &str) -> String {
        let mut s = String::with_capacity(self.record_prefix.len() + sha.len());
        s.push_str(&self.record_prefix);
        s.push_str(sha);
        s
    }

    /// The commit-sequence key.
    pub(crate) fn seq_key(&self) -> &str {
        &self.seq
    }

    /// The scan-index key.
    pub(crate) fn index_key(&self) -> &str {
        &self.index
    }

    /// The live-snapshot registry key.
    pub(crate) fn snapshots_key(&self) -> &str {
        &self.snapshots
    }

    /// The snapshot creation counter key.
    pub(crate) fn snapshot_counter_key(&self) -> &str {
        &self.snapshot_counter
    }
}

/// The scan-index member of `key`: `hex(K) "." sha256hex(K)`.
///
/// Hex keeps byte order (two digits per byte, digits sorted as their values) and the `.`
/// separator sorts below every hex digit, so a key sorts before every key it is a prefix of.
/// The trailing hash lets the scan script find the record key without a SHA-256 in Lua.
#[cfg(test)]
pub(crate) fn index_member(key: &StoreKey) -> String {
    index_member_of(key, &sha256_hex(key.as_bytes()))
}

/// [`index_member`] of `key` whose `sha256hex` is `sha`.
pub(crate) fn index_member_of(key: &StoreKey, sha: &str) -> String {
    let mut s = hex(key.as_bytes());
    s.reserve(1 + sha.len());
    s.push('.');
    s.push_str(sha);
    s
}

/// The exclusive lexicographic lower bound that resumes a scan after `key`: `(hex(K) "/"`.
/// Every member of `key` (`hex(K) "." …`) sorts below it, every longer key (`hex(K)` followed
/// by a hex digit) above it.
pub(crate) fn index_resume_after(key: &StoreKey) -> String {
    format!("({}/", hex(key.as_bytes()))
}

/// The inclusive lexicographic lower bound of a scan prefix: `[hex(prefix)`.
pub(crate) fn index_start(prefix_hex: &str) -> String {
    format!("[{prefix_hex}")
}

/// The logical key of an index member, if it is well formed.
pub(crate) fn key_of_index_member(member: &[u8]) -> Option<StoreKey> {
    let text = std::str::from_utf8(member).ok()?;
    let (key_hex, sha) = text.rsplit_once('.')?;
    if sha.len() != 64 {
        return None;
    }
    StoreKey::from_utf8(&unhex(key_hex)?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(s: &str) -> StoreKey {
        StoreKey::new(s).unwrap()
    }

    #[test]
    fn record_key_follows_the_spec_formula() {
        // Golden key-derivation vector (store-record-v1.json, mesh-node-descriptor).
        let layout = Layout::new("app1");
        assert_eq!(
            layout.record_key(&k("mesh-node\u{0}main\u{0}01020304")),
            "app1:{zlink-location-v3}:opaque:aac806d675ecd83db362198ca6460d35232ef282da1058bf60dc4bf30999fd56"
        );
        assert_eq!(layout.seq_key(), "app1:{zlink-location-v3}:seq");
    }

    #[test]
    fn index_members_sort_in_key_byte_order() {
        let mut keys = vec!["b", "a", "a\0", "ab", "\u{e9}", "Z", "a\0b", "", "~"];
        keys.retain(|s| !s.is_empty());
        let mut by_member: Vec<(String, &str)> =
            keys.iter().map(|s| (index_member(&k(s)), *s)).collect();
        by_member.sort();
        let mut by_bytes = keys.clone();
        by_bytes.sort_by(|x, y| x.as_bytes().cmp(y.as_bytes()));
        let got: Vec<&str> = by_member.iter().map(|(_, s)| *s).collect();
        assert_eq!(got, by_bytes);
    }

    #[test]
    fn resume_bound_excludes_the_key_and_includes_longer_keys() {
        let a = k("a");
        let bound = &index_resume_after(&a)[1..];
        assert!(index_member(&a).as_str() < bound);
        assert!(index_member(&k("a\0")).as_str() > bound);
        assert!(index_member(&k("ab")).as_str() > bound);
        assert!(index_member(&k("`")).as_str() < bound);
    }

    #[test]
    fn index_member_round_trips_to_its_key() {
        let key = k("authority\0spot\0room:1");
        assert_eq!(
            key_of_index_member(index_member(&key).as_bytes()),
            Some(key)
        );
        assert_eq!(key_of_index_member(b"zz.00"), None);
    }

    #[test]
    fn hex_round_trips() {
        let bytes: Vec<u8> = (0..=255).collect();
        assert_eq!(unhex(&hex(&bytes)), Some(bytes));
        assert_eq!(unhex("abc"), None);
        assert_eq!(unhex("AB"), None);
    }
}
