//! The golden fixture (`fixtures/golden/store-record-v1.json`) passes every check: each stored
//! member decodes field by field and re-encodes to the same bytes, each value conforms, and
//! each key derivation maps to the fixture's Redis key.

#![allow(clippy::unwrap_used)]

use serde_json::Value;
use zlink_cli::decode::{Input, parse_input};
use zlink_cli::family::classify;
use zlink_cli::member::{decode_member, encode_member};
use zlink_cli::value::check_value;

fn fixture() -> Value {
    serde_json::from_str(include_str!(
        "../../../fixtures/golden/store-record-v1.json"
    ))
    .unwrap()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn every_golden_member_and_value_conforms_and_re_encodes_byte_for_byte() {
    let f = fixture();
    let vectors = f["valueVectors"]["genericOpaqueRecord"].as_array().unwrap();
    assert!(vectors.len() >= 7);
    for v in vectors {
        let name = v["name"].as_str().unwrap();
        let bytes = unhex(v["fullValueHex"].as_str().unwrap());
        let m = decode_member(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        // The fixture prints NUL as the six characters `\u0000`.
        let key = v["originalKey"].as_str().unwrap().replace("\\u0000", "\0");
        assert_eq!(m.original_key, key.as_bytes(), "{name}");
        assert_eq!(
            m.version.to_string(),
            v["version"].as_str().unwrap(),
            "{name}"
        );
        assert_eq!(m.tombstone, v["tombstone"].as_bool().unwrap(), "{name}");
        let again = encode_member(
            &m.original_key,
            &m.raw_bytes,
            m.version,
            m.expires_at_ms,
            m.tombstone,
        );
        assert_eq!(again, bytes, "{name}");
        if !m.tombstone {
            assert_eq!(
                m.raw_bytes,
                unhex(v["jsonBytesHex"].as_str().unwrap()),
                "{name}"
            );
            let family = classify(&m.original_key).unwrap_or_else(|e| panic!("{name}: {e}"));
            check_value(family, &m.original_key, &m.raw_bytes)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }
}

#[test]
fn golden_counters_conform_and_key_derivations_map_to_their_redis_keys() {
    let f = fixture();
    for c in f["counterVectors"]["vectors"].as_array().unwrap() {
        let key = c["logicalKey"].as_str().unwrap().as_bytes();
        let stored = c["storedNextValue"].as_str().unwrap().as_bytes();
        let family = classify(key).unwrap();
        check_value(family, key, stored).unwrap();
    }
    let prefix = f["prefixExample"].as_str().unwrap();
    for k in f["keyDerivation"].as_array().unwrap() {
        let preimage = String::from_utf8(unhex(k["preimageHex"].as_str().unwrap())).unwrap();
        let arg = preimage.replace('\0', "\\0");
        let Ok(Input::RedisKey(got)) = parse_input(&arg, prefix) else {
            panic!("{arg:?} is no key input")
        };
        assert_eq!(
            String::from_utf8(got).unwrap(),
            k["redisKey"].as_str().unwrap(),
            "{arg:?}"
        );
        assert!(classify(preimage.as_bytes()).is_ok(), "{arg:?}");
    }
}
