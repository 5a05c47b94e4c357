//! Transfer settings: defaults and every bound, at it and one past it.

use super::super::{
    BudgetScope, ChunkLimit, DEFAULT_CHUNK_LIMIT, ENVELOPE_ALLOWANCE, MAX_CHUNK_LIMIT,
    MIN_CHUNK_LIMIT, SettingsError, TRANSPORT_FRAME_LIMIT, TransferErrorKind, TransferSettings,
};

#[test]
fn defaults_are_the_spec_defaults() {
    let s = TransferSettings::default();
    assert_eq!(s.chunk_limit().get(), 256 * 1024);
    assert_eq!(DEFAULT_CHUNK_LIMIT, 256 * 1024);
    assert_eq!(s.peer_in_flight_budget(), 16 * 1024 * 1024);
    assert_eq!(s.node_in_flight_budget(), 0);
    assert_eq!(s.payload_memory_cap(), 256 * 1024 * 1024);
    assert_eq!(ChunkLimit::default(), s.chunk_limit());
    let peer = s.new_peer_budget();
    assert_eq!(peer.scope(), BudgetScope::PeerConnection);
    assert_eq!(peer.limit().map(|l| l.get()), Some(16 * 1024 * 1024));
    let node = s.new_node_budget();
    assert_eq!(node.scope(), BudgetScope::Node);
    assert_eq!(node.limit(), None);
    assert_eq!(s.new_payload_memory().cap(), 256 * 1024 * 1024);
}

#[test]
fn transfer_frame_limit_matches_the_transport() {
    assert_eq!(TRANSPORT_FRAME_LIMIT, zlink_transport::MAX_FRAME_LEN);
    assert_eq!(MAX_CHUNK_LIMIT, TRANSPORT_FRAME_LIMIT - ENVELOPE_ALLOWANCE);
    assert_eq!(MAX_CHUNK_LIMIT, 16 * 1024 * 1024);
    // The largest envelope header the transport can build stays inside the allowance:
    // kind, flags, operation id, reply route, source generation, four length-prefixed names
    // of at most 255 bytes, and the metadata length and field.
    let largest_header = 1
        + 1
        + 16
        + 8
        + 8
        + 4 * (1 + zlink_transport::MAX_NAME_LEN)
        + 2
        + zlink_transport::MAX_METADATA_LEN;
    assert!(largest_header < ENVELOPE_ALLOWANCE);
}

#[test]
fn chunk_limit_at_the_frame_bound_is_accepted() {
    let s = TransferSettings::default()
        .with_chunk_limit(MAX_CHUNK_LIMIT)
        .unwrap();
    assert_eq!(s.chunk_limit().get(), MAX_CHUNK_LIMIT);
    assert_eq!(s.chunk_limit().data_len(), MAX_CHUNK_LIMIT - 46);
}

#[test]
fn chunk_limit_above_frame_limit_is_a_settings_error() {
    let before = TransferSettings::default();
    for bytes in [
        MAX_CHUNK_LIMIT + 1,
        TRANSPORT_FRAME_LIMIT,
        TRANSPORT_FRAME_LIMIT + 1,
    ] {
        let err = before.with_chunk_limit(bytes).unwrap_err();
        assert_eq!(
            err,
            SettingsError::ChunkLimit {
                actual: bytes,
                min: MIN_CHUNK_LIMIT,
                max: MAX_CHUNK_LIMIT,
            }
        );
        assert_eq!(err.kind(), TransferErrorKind::InvalidArgument);
        assert!(TransferSettings::new(bytes, 0, 0, 1).is_err());
    }
    assert_eq!(before, TransferSettings::default());
}

#[test]
fn chunk_limit_must_carry_at_least_one_data_byte() {
    assert_eq!(MIN_CHUNK_LIMIT, 47);
    assert_eq!(ChunkLimit::new(MIN_CHUNK_LIMIT).unwrap().data_len(), 1);
    for bytes in [0, MIN_CHUNK_LIMIT - 1] {
        assert!(matches!(
            ChunkLimit::new(bytes),
            Err(SettingsError::ChunkLimit { actual, .. }) if actual == bytes
        ));
    }
}

#[test]
fn zero_in_flight_budgets_are_not_applied() {
    let s = TransferSettings::new(DEFAULT_CHUNK_LIMIT, 0, 0, 1).unwrap();
    assert_eq!(s.new_peer_budget().limit(), None);
    assert_eq!(s.new_node_budget().limit(), None);
    let s = TransferSettings::new(DEFAULT_CHUNK_LIMIT, 1, u64::MAX, 1).unwrap();
    assert_eq!(s.new_peer_budget().limit().map(|l| l.get()), Some(1));
    assert_eq!(s.new_node_budget().limit().map(|l| l.get()), Some(u64::MAX));
}

#[test]
fn payload_memory_cap_of_zero_is_a_settings_error() {
    assert_eq!(
        TransferSettings::default().with_payload_memory_cap(0),
        Err(SettingsError::ZeroPayloadMemoryCap)
    );
    let s = TransferSettings::default()
        .with_payload_memory_cap(1)
        .unwrap();
    assert_eq!(s.payload_memory_cap(), 1);
}
