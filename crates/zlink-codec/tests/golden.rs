//! The codec against the golden fixture's value and key vectors (the offline runner in
//! xtask checks the same vectors with an independent member encoder).

#![allow(clippy::unwrap_used)]

use serde_json::Value;
use zlink_codec::{
    AuthorityRecord, ClientServerRecord, FanoutPublisherRecord, KeyParts, LogicalKey,
    MeshNodeRecord, OwnerLeaseRecord, hashed_key_part,
};

fn fixture() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/golden/store-record-v1.json"
    );
    serde_json::from_slice(&std::fs::read(path).expect("fixture")).expect("fixture json")
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn unprintable(s: &str) -> String {
    s.replace("\\u0000", "\0")
}

/// Decodes, re-encodes (must be byte-identical), and checks the fixture's `decoded` view
/// decodes to the same typed record; returns the record's logical key when it has one.
fn round_trip(name: &str, bytes: &[u8], decoded: &Value) -> Option<LogicalKey> {
    let decoded_bytes = serde_json::to_vec(decoded).unwrap();
    macro_rules! check {
        ($t:ty) => {{
            let r = <$t>::decode(bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(r.encode().unwrap(), bytes, "{name}: re-encoding differs");
            let from_view = <$t>::decode(&decoded_bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(r, from_view, "{name}: decoded view differs");
            r
        }};
    }
    if name.starts_with("meshNode") {
        Some(check!(MeshNodeRecord).key())
    } else if name.starts_with("clientServer") {
        Some(check!(ClientServerRecord).key())
    } else if name.starts_with("fanoutPublisher") {
        Some(check!(FanoutPublisherRecord).key())
    } else if name.starts_with("ownerLease") {
        Some(check!(OwnerLeaseRecord).key())
    } else if name.starts_with("authority") {
        let r = check!(AuthorityRecord);
        if let Some(p) = &r.pending_creation {
            p.verify_request().unwrap();
        }
        None
    } else {
        panic!("unknown vector {name}")
    }
}

#[test]
fn every_value_vector_round_trips_byte_for_byte() {
    let f = fixture();
    let vectors = f["valueVectors"]["genericOpaqueRecord"].as_array().unwrap();
    assert_eq!(vectors.len(), 7);
    for v in vectors {
        let name = v["name"].as_str().unwrap();
        let original_key = unprintable(v["originalKey"].as_str().unwrap());
        if v["tombstone"].as_bool().unwrap() {
            assert!(v["decoded"].is_null());
            continue;
        }
        let bytes = hex(v["jsonBytesHex"].as_str().unwrap());
        if let Some(key) = round_trip(name, &bytes, &v["decoded"]) {
            assert_eq!(key.as_str(), original_key, "{name}: key from record");
        } else {
            // Authority: the id is not in the record; the key kind follows the allocation.
            let r = AuthorityRecord::decode(&bytes).unwrap();
            let KeyParts::Authority { kind, id } = KeyParts::parse(&original_key).unwrap() else {
                panic!("{name}: not an authority key");
            };
            assert_eq!(kind, r.authority_kind());
            assert_eq!(r.key(&id).as_str(), original_key);
        }
    }
}

#[test]
fn every_key_derivation_vector_matches() {
    let f = fixture();
    let prefix = f["prefixExample"].as_str().unwrap();
    let namespace = f["namespace"].as_str().unwrap();
    for v in f["keyDerivation"].as_array().unwrap() {
        let preimage = unprintable(v["preimagePrintable"].as_str().unwrap());
        assert_eq!(preimage.as_bytes(), hex(v["preimageHex"].as_str().unwrap()));
        let key = KeyParts::parse(&preimage).unwrap().to_key();
        assert_eq!(key.as_str(), preimage);
        assert_eq!(key.sha256_hex(), v["sha256Hex"].as_str().unwrap());
        assert_eq!(hashed_key_part(preimage.as_bytes()), key.sha256_hex());
        assert_eq!(
            format!("{prefix}:{namespace}:{}", key.sha256_hex()),
            v["redisKey"].as_str().unwrap()
        );
    }
}
