//! An independent reference encoder of the opaque record member (spec 22 §9), written from
//! the MessagePack specification and the type families the spec pins for Lua cmsgpack. It
//! shares no code with any provider: the Redis provider's real bytes come from Lua.
//!
//! member = fixarray(5) [originalKey: str, rawBytes: str, version: str,
//!                       expiresAtMs: unsigned int, tombstone: bool]
//! full value = 0x01 (format tag) ++ member

/// The opaque record format tag.
pub(crate) const FORMAT_TAG: u8 = 0x01;

/// One opaque record member.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Member<'a> {
    pub(crate) original_key: &'a [u8],
    pub(crate) raw_bytes: &'a [u8],
    pub(crate) version: &'a [u8],
    pub(crate) expires_at_ms: u64,
    pub(crate) tombstone: bool,
}

/// Appends a byte string with the str family (never bin), smallest header for its length.
pub(crate) fn put_str(out: &mut Vec<u8>, s: &[u8]) {
    let n = s.len();
    if n < 32 {
        out.push(0xa0 | n as u8);
    } else if n <= 0xff {
        out.push(0xd9);
        out.push(n as u8);
    } else if n <= 0xffff {
        out.push(0xda);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        // Values are bounded far below 4 GiB (1 MiB store values).
        out.push(0xdb);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
    out.extend_from_slice(s);
}

/// Appends an unsigned integer with the smallest of positive fixint/uint8/16/32/64.
pub(crate) fn put_uint(out: &mut Vec<u8>, v: u64) {
    if v <= 0x7f {
        out.push(v as u8);
    } else if v <= 0xff {
        out.push(0xcc);
        out.push(v as u8);
    } else if v <= 0xffff {
        out.push(0xcd);
        out.extend_from_slice(&(v as u16).to_be_bytes());
    } else if v <= 0xffff_ffff {
        out.push(0xce);
        out.extend_from_slice(&(v as u32).to_be_bytes());
    } else {
        out.push(0xcf);
        out.extend_from_slice(&v.to_be_bytes());
    }
}

impl Member<'_> {
    /// The cmsgpack member bytes.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(
            16 + self.original_key.len() + self.raw_bytes.len() + self.version.len(),
        );
        out.push(0x95); // fixarray, 5 elements
        put_str(&mut out, self.original_key);
        put_str(&mut out, self.raw_bytes);
        put_str(&mut out, self.version);
        put_uint(&mut out, self.expires_at_ms);
        out.push(if self.tombstone { 0xc3 } else { 0xc2 });
        out
    }

    /// The full stored value: format tag then member.
    pub(crate) fn full_value(&self) -> Vec<u8> {
        let mut out = vec![FORMAT_TAG];
        out.extend(self.encode());
        out
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn str_header(n: usize) -> Vec<u8> {
        let mut out = Vec::new();
        put_str(&mut out, &vec![b'x'; n]);
        out.truncate(out.len() - n);
        out
    }

    fn uint(v: u64) -> Vec<u8> {
        let mut out = Vec::new();
        put_uint(&mut out, v);
        out
    }

    #[test]
    fn str_family_thresholds_31_32() {
        assert_eq!(str_header(0), [0xa0]);
        assert_eq!(str_header(31), [0xbf]);
        assert_eq!(str_header(32), [0xd9, 0x20]);
    }

    #[test]
    fn str_family_thresholds_255_256() {
        assert_eq!(str_header(255), [0xd9, 0xff]);
        assert_eq!(str_header(256), [0xda, 0x01, 0x00]);
    }

    #[test]
    fn str_family_thresholds_65535_65536() {
        assert_eq!(str_header(65_535), [0xda, 0xff, 0xff]);
        assert_eq!(str_header(65_536), [0xdb, 0x00, 0x01, 0x00, 0x00]);
    }

    #[test]
    fn expires_at_thresholds_127_128() {
        assert_eq!(uint(0), [0x00]);
        assert_eq!(uint(127), [0x7f]);
        assert_eq!(uint(128), [0xcc, 0x80]);
    }

    #[test]
    fn expires_at_thresholds_255_256() {
        assert_eq!(uint(255), [0xcc, 0xff]);
        assert_eq!(uint(256), [0xcd, 0x01, 0x00]);
    }

    #[test]
    fn expires_at_thresholds_65535_65536() {
        assert_eq!(uint(65_535), [0xcd, 0xff, 0xff]);
        assert_eq!(uint(65_536), [0xce, 0x00, 0x01, 0x00, 0x00]);
    }

    #[test]
    fn expires_at_thresholds_2_pow_32_minus_1_and_2_pow_32() {
        assert_eq!(uint(u64::from(u32::MAX)), [0xce, 0xff, 0xff, 0xff, 0xff]);
        assert_eq!(
            uint(1 << 32),
            [0xcf, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00]
        );
    }

    #[test]
    fn member_layout_is_fixarray_of_str_str_str_uint_bool() {
        let m = Member {
            original_key: b"k",
            raw_bytes: b"",
            version: b"1",
            expires_at_ms: 0,
            tombstone: true,
        };
        assert_eq!(m.encode(), [0x95, 0xa1, b'k', 0xa0, 0xa1, b'1', 0x00, 0xc3]);
        assert_eq!(m.full_value()[0], 0x01);
        assert_eq!(&m.full_value()[1..], m.encode());
    }

    /// The boundary members, encoded by this reference encoder and by Redis's own Lua
    /// cmsgpack, must be identical. Needs a live Redis: skipped loudly without one.
    #[test]
    fn boundary_members_match_redis_lua_cmsgpack() {
        let Some(url) = zlink_store_conformance::live::env_or_skip(
            "ZLINK_TEST_REDIS_URL",
            "boundary_members_match_redis_lua_cmsgpack",
        ) else {
            return;
        };
        use fred::prelude::*;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let client = Builder::from_config(Config::from_url(&url).unwrap())
                .build()
                .unwrap();
            client.init().await.unwrap();
            const SCRIPT: &str = "return cmsgpack.pack({ARGV[1], ARGV[2], ARGV[3], \
                                  tonumber(ARGV[4]), ARGV[5] == '1'})";
            let lens = [0usize, 31, 32, 255, 256, 65_535, 65_536];
            let expiries = [
                0u64,
                127,
                128,
                255,
                256,
                65_535,
                65_536,
                u64::from(u32::MAX),
                1 << 32,
                1_700_000_000_000,
            ];
            for (i, len) in lens.iter().enumerate() {
                for (j, exp) in expiries.iter().enumerate() {
                    // Every str member crosses the threshold in turn; bytes include NUL and 0xff.
                    let key: Vec<u8> = (0..*len).map(|k| (k % 256) as u8).collect();
                    let raw = vec![0xffu8; lens[(i + j) % lens.len()]];
                    let version = vec![b'9'; lens[(i + 2 * j) % lens.len()].min(4096)];
                    let tombstone = (i + j) % 2 == 0;
                    let m = Member {
                        original_key: &key,
                        raw_bytes: &raw,
                        version: &version,
                        expires_at_ms: *exp,
                        tombstone,
                    };
                    let args: Vec<Value> = vec![
                        Value::Bytes(key.clone().into()),
                        Value::Bytes(raw.clone().into()),
                        Value::Bytes(version.clone().into()),
                        Value::String(exp.to_string().into()),
                        Value::String(if tombstone { "1" } else { "0" }.into()),
                    ];
                    let lua: Vec<u8> = client
                        .eval(SCRIPT, Vec::<String>::new(), args)
                        .await
                        .unwrap();
                    assert_eq!(lua, m.encode(), "len {len}, expiresAtMs {exp}");
                }
            }
            client.quit().await.unwrap();
        });
    }
}
