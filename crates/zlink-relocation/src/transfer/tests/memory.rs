//! Payload memory: the process cap, up-front claims shrunk after capture, the alone run.

use super::super::{
    MAX_ADAPTER_STATE_LEN, PayloadClaim, PayloadMemory, PayloadMemoryError, PayloadUnit,
    SettingsError, TransferErrorKind, check_adapter_output,
};

const MIB: u64 = 1024 * 1024;

fn memory() -> PayloadMemory {
    PayloadMemory::new(256 * MIB).unwrap()
}

#[test]
fn up_front_claim_is_64_mib_per_preserved_object_plus_framework_bytes() {
    let claim = PayloadClaim::before_capture(PayloadUnit::SpotWideAggregate, 3, 1_000).unwrap();
    assert_eq!(claim.bytes(), 3 * 64 * MIB + 1_000);
    assert_eq!(claim.unit(), PayloadUnit::SpotWideAggregate);
    let recreate = PayloadClaim::before_capture(PayloadUnit::Single, 0, 4_096).unwrap();
    assert_eq!(recreate.bytes(), 4_096);
    let err = PayloadClaim::before_capture(PayloadUnit::SpotWideAggregate, u32::MAX, u64::MAX)
        .unwrap_err();
    assert_eq!(err, PayloadMemoryError::ClaimOverflow);
}

#[test]
fn claims_up_to_the_cap_pass_and_one_byte_more_is_exhausted() {
    let memory = memory();
    let a = memory
        .try_reserve(PayloadClaim::exact(PayloadUnit::Single, 200 * MIB))
        .unwrap();
    let b = memory
        .try_reserve(PayloadClaim::exact(PayloadUnit::Single, 56 * MIB))
        .unwrap();
    assert_eq!(memory.used(), 256 * MIB);
    let err = memory
        .try_reserve(PayloadClaim::exact(PayloadUnit::Single, 1))
        .unwrap_err();
    assert_eq!(
        err,
        PayloadMemoryError::Exhausted {
            need: 1,
            used: 256 * MIB,
            cap: 256 * MIB
        }
    );
    assert_eq!(err.kind(), TransferErrorKind::Unavailable);
    assert_eq!((memory.used(), memory.permits()), (256 * MIB, 2));
    drop((a, b));
    assert_eq!((memory.used(), memory.permits()), (0, 0));
}

#[test]
fn single_unit_must_fit_the_cap() {
    let memory = memory();
    let at = memory
        .try_reserve(PayloadClaim::exact(PayloadUnit::Single, 256 * MIB))
        .unwrap();
    drop(at);
    let err = memory
        .try_reserve(PayloadClaim::exact(PayloadUnit::Single, 256 * MIB + 1))
        .unwrap_err();
    assert_eq!(
        err,
        PayloadMemoryError::SingleUnitTooLarge {
            need: 256 * MIB + 1,
            cap: 256 * MIB
        }
    );
    assert_eq!(err.kind(), TransferErrorKind::TooLarge);
    assert_eq!(memory.used(), 0);
}

#[test]
fn spotwide_aggregate_over_256_mib_runs_alone() {
    let memory = memory();
    let oversized = PayloadClaim::before_capture(PayloadUnit::SpotWideAggregate, 5, 0).unwrap();
    assert_eq!(oversized.bytes(), 320 * MIB);
    let other = memory
        .try_reserve(PayloadClaim::exact(PayloadUnit::Single, 1))
        .unwrap();
    // Starts only when no other payload move holds memory.
    assert!(matches!(
        memory.try_reserve(oversized),
        Err(PayloadMemoryError::Exhausted { need, .. }) if need == 320 * MIB
    ));
    drop(other);
    let mut alone = memory.try_reserve(oversized).unwrap();
    assert!(alone.is_alone());
    assert!(memory.is_held_alone());
    assert_eq!(memory.used(), 320 * MIB);
    let small = PayloadClaim::exact(PayloadUnit::Single, 1);
    assert_eq!(
        memory.try_reserve(small).unwrap_err(),
        PayloadMemoryError::HeldAlone
    );
    // Even after it shrank far below the cap, nothing else starts until it frees its memory.
    alone.shrink_to(10 * MIB).unwrap();
    assert_eq!(memory.used(), 10 * MIB);
    assert_eq!(
        memory.try_reserve(small).unwrap_err(),
        PayloadMemoryError::HeldAlone
    );
    drop(alone);
    assert!(!memory.is_held_alone());
    assert!(memory.try_reserve(small).is_ok());
}

#[test]
fn spotwide_aggregate_within_the_cap_shares_the_memory() {
    let memory = memory();
    let claim = PayloadClaim::before_capture(PayloadUnit::SpotWideAggregate, 4, 0).unwrap();
    assert_eq!(claim.bytes(), 256 * MIB);
    let permit = memory.try_reserve(claim).unwrap();
    assert!(!permit.is_alone());
    assert!(matches!(
        memory.try_reserve(PayloadClaim::exact(PayloadUnit::Single, 1)),
        Err(PayloadMemoryError::Exhausted { .. })
    ));
    drop(permit);
    let a = memory
        .try_reserve(PayloadClaim::exact(
            PayloadUnit::SpotWideAggregate,
            100 * MIB,
        ))
        .unwrap();
    let b = memory
        .try_reserve(PayloadClaim::exact(PayloadUnit::Single, 100 * MIB))
        .unwrap();
    assert_eq!(memory.used(), 200 * MIB);
    drop((a, b));
}

#[test]
fn permit_shrinks_after_capture_and_never_grows() {
    let memory = memory();
    let mut permit = memory
        .try_reserve(PayloadClaim::before_capture(PayloadUnit::Single, 1, 1_000).unwrap())
        .unwrap();
    assert_eq!(permit.bytes(), 64 * MIB + 1_000);
    permit.shrink_to(5_000).unwrap();
    assert_eq!((permit.bytes(), memory.used()), (5_000, 5_000));
    permit.shrink_to(5_000).unwrap();
    let err = permit.shrink_to(5_001).unwrap_err();
    assert_eq!(
        err,
        PayloadMemoryError::WouldGrow {
            current: 5_000,
            requested: 5_001
        }
    );
    assert_eq!(err.kind(), TransferErrorKind::InvalidArgument);
    assert_eq!((permit.bytes(), memory.used()), (5_000, 5_000));
    drop(permit);
    assert_eq!(memory.used(), 0);
}

#[test]
fn adapter_output_of_64_mib_passes_and_one_byte_more_is_state_incompatible() {
    assert_eq!(MAX_ADAPTER_STATE_LEN, 64 * MIB);
    assert!(check_adapter_output(64 * MIB).is_ok());
    let err = check_adapter_output(64 * MIB + 1).unwrap_err();
    assert_eq!(
        err,
        PayloadMemoryError::AdapterOutputTooLarge {
            actual: 64 * MIB + 1,
            max: 64 * MIB
        }
    );
    assert_eq!(err.kind(), TransferErrorKind::StateIncompatible);
}

#[test]
fn payload_memory_cap_must_be_positive() {
    assert_eq!(
        PayloadMemory::new(0).unwrap_err(),
        SettingsError::ZeroPayloadMemoryCap
    );
    let one = PayloadMemory::new(1).unwrap();
    let permit = one
        .try_reserve(PayloadClaim::exact(PayloadUnit::Single, 1))
        .unwrap();
    assert_eq!(one.used(), 1);
    drop(permit);
}
