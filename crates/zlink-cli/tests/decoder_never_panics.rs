//! Random bytes through every decoder of the audit: a finding or a decode, never a panic.

use proptest::prelude::*;
use zlink_cli::audit::{RawKey, RawValue, audit};
use zlink_cli::family::{Family, classify};
use zlink_cli::member::{decode_member, encode_member};
use zlink_cli::value::check_value;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn random_members_never_panic_the_member_decoder(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = decode_member(&bytes);
        let mut tagged = vec![0x01, 0x95];
        tagged.extend_from_slice(&bytes);
        let _ = decode_member(&tagged);
    }

    #[test]
    fn random_values_never_panic_any_family_check(
        family in proptest::sample::select(Family::ALL.to_vec()),
        bytes in proptest::collection::vec(any::<u8>(), 0..300),
    ) {
        let _ = check_value(family, b"authority\0actor\0x", &bytes);
    }

    #[test]
    fn random_keys_never_panic_the_classifier(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        let _ = classify(&bytes);
    }

    #[test]
    fn random_records_and_helpers_never_panic_the_audit(
        key in proptest::collection::vec(any::<u8>(), 0..40),
        value in proptest::collection::vec(any::<u8>(), 0..120),
        raw in proptest::collection::vec(any::<u8>(), 0..120),
        score in any::<f64>(),
        version in any::<u64>(),
    ) {
        let keys = vec![
            RawKey { name: b"p:{zlink-location-v3}:seq".to_vec(), value: RawValue::String(raw.clone()), pttl_ms: -1 },
            RawKey { name: b"p:{zlink-location-v3}:index".to_vec(), value: RawValue::ZSet(vec![(raw.clone(), score)]), pttl_ms: -1 },
            RawKey { name: b"p:{zlink-location-v3}:snapshots".to_vec(), value: RawValue::ZSet(vec![(raw.clone(), score)]), pttl_ms: -1 },
            RawKey { name: b"p:{zlink-location-v3}:opaque:00".to_vec(), value: RawValue::ZSet(vec![(raw, score)]), pttl_ms: -1 },
            RawKey {
                name: [b"p:{zlink-location-v3}:opaque:".as_slice(), &key].concat(),
                value: RawValue::ZSet(vec![(encode_member(&key, &value, version, version, false), version as f64)]),
                pttl_ms: 1,
            },
        ];
        let report = audit("p", &keys);
        prop_assert!(!report.is_clean());
    }
}
