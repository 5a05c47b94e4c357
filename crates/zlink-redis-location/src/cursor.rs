//! Scan cursors (`z1.{snapshot id}.{hex of the last key examined}`) and snapshot nonces.

use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};

use zlink_store_spi::{ScanCursor, ScanPrefix, StoreKey, StoreResult};

use crate::layout::{hex, unhex};
use crate::store::reply_error;

/// The cursor format tag.
const CURSOR_TAG: &str = "z1";

/// A fresh snapshot nonce: random per call and per process.
pub(crate) fn nonce() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{:016x}", RandomState::new().hash_one(n))
}

/// `z1.{snapshot id}.{hex of the last key examined}`.
pub(crate) fn encode_cursor(snapshot: &str, after: &StoreKey) -> StoreResult<ScanCursor> {
    ScanCursor::new(format!("{CURSOR_TAG}.{snapshot}.{}", hex(after.as_bytes())))
        .map_err(|_| reply_error("cursor over its bound"))
}

/// The snapshot id and resume key of a cursor issued for `prefix`; `None` for anything else.
pub(crate) fn decode_cursor(
    cursor: &ScanCursor,
    prefix: &ScanPrefix,
) -> Option<(String, StoreKey)> {
    let rest = cursor
        .as_str()
        .strip_prefix(CURSOR_TAG)?
        .strip_prefix('.')?;
    let (snapshot, key_hex) = rest.rsplit_once('.')?;
    let id_ok = !snapshot.is_empty()
        && snapshot.len() <= 256
        && snapshot
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b) || b == b':');
    if !id_ok {
        return None;
    }
    let key = StoreKey::from_utf8(&unhex(key_hex)?).ok()?;
    prefix.matches(&key).then(|| (snapshot.to_owned(), key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursor_round_trips_and_rejects_garbage() {
        let prefix = ScanPrefix::new("p/").unwrap();
        let key = StoreKey::new("p/\u{e9}\0x").unwrap();
        let c = encode_cursor("12:1700000000000:0123456789abcdef:abcd", &key).unwrap();
        assert_eq!(
            decode_cursor(&c, &prefix),
            Some(("12:1700000000000:0123456789abcdef:abcd".to_owned(), key))
        );
        // Another prefix, or garbage: no snapshot.
        assert_eq!(decode_cursor(&c, &ScanPrefix::new("q/").unwrap()), None);
        for g in [
            "x",
            "z1",
            "z1.",
            "z1..",
            "z1.1:2.zz",
            "z1.A.70",
            "z2.1:2.70",
            "z1.1:2.7",
        ] {
            assert_eq!(
                decode_cursor(&ScanCursor::new(g).unwrap(), &ScanPrefix::all()),
                None,
                "{g}"
            );
        }
    }

    #[test]
    fn largest_cursor_fits_its_bound() {
        let key = StoreKey::new("k".repeat(StoreKey::MAX_LEN)).unwrap();
        let id = format!(
            "{}:{}:{:016x}:{}",
            u64::MAX,
            u64::MAX,
            u64::MAX,
            "f".repeat(40)
        );
        let c = encode_cursor(&id, &key).unwrap();
        assert!(c.len() <= ScanCursor::MAX_LEN);
    }

    #[test]
    fn nonces_differ() {
        assert_ne!(nonce(), nonce());
    }
}
