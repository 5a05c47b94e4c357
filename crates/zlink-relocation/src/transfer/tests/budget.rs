//! In-flight budgets: limits, release on acknowledgement, the alone exception, pairs.

use super::super::{BudgetError, BudgetScope, InFlightBudget, TransferErrorKind};

#[test]
fn reservations_up_to_the_budget_pass_and_one_byte_more_is_refused() {
    let budget = InFlightBudget::new(BudgetScope::PeerConnection, 100);
    let a = budget.try_reserve(60).unwrap();
    let b = budget.try_reserve(40).unwrap();
    assert_eq!(budget.in_flight(), 100);
    let err = budget.try_reserve(1).unwrap_err();
    assert_eq!(
        err,
        BudgetError::Exhausted {
            scope: BudgetScope::PeerConnection,
            charge: 1,
            in_flight: 100,
            limit: 100
        }
    );
    assert_eq!(err.kind(), TransferErrorKind::Unavailable);
    assert_eq!(budget.in_flight(), 100);
    drop((a, b));
    assert_eq!(budget.in_flight(), 0);
}

#[test]
fn acknowledgement_releases_the_charge() {
    let budget = InFlightBudget::new(BudgetScope::PeerConnection, 10);
    let permit = budget.try_reserve(10).unwrap();
    assert_eq!(permit.charge(), 10);
    assert!(budget.try_reserve(5).is_err());
    permit.release();
    assert_eq!(budget.in_flight(), 0);
    assert!(budget.try_reserve(5).is_ok());
}

#[test]
fn chunk_larger_than_the_budget_is_sent_alone_when_nothing_is_in_flight() {
    let budget = InFlightBudget::new(BudgetScope::PeerConnection, 10);
    let big = budget.try_reserve(50).unwrap();
    assert_eq!(budget.in_flight(), 50);
    assert!(matches!(
        budget.try_reserve(1),
        Err(BudgetError::Exhausted { in_flight: 50, .. })
    ));
    drop(big);
    let small = budget.try_reserve(5).unwrap();
    assert!(matches!(
        budget.try_reserve(50),
        Err(BudgetError::Exhausted { in_flight: 5, .. })
    ));
    drop(small);
    assert_eq!(budget.in_flight(), 0);
}

#[test]
fn zero_budget_is_not_applied_but_still_counted() {
    let budget = InFlightBudget::new(BudgetScope::Node, 0);
    assert_eq!(budget.limit(), None);
    let a = budget.try_reserve(u64::MAX / 2).unwrap();
    let b = budget.try_reserve(u64::MAX / 2).unwrap();
    assert_eq!(budget.in_flight(), u64::MAX - 1);
    // Only a sum that cannot be represented is refused.
    assert!(budget.try_reserve(2).is_err());
    drop((a, b));
    assert_eq!(budget.in_flight(), 0);
}

#[test]
fn zero_charge_is_an_invalid_argument() {
    let budget = InFlightBudget::new(BudgetScope::PeerConnection, 10);
    let err = budget.try_reserve(0).unwrap_err();
    assert_eq!(err, BudgetError::ZeroCharge);
    assert_eq!(err.kind(), TransferErrorKind::InvalidArgument);
    assert!(matches!(
        InFlightBudget::try_reserve_pair(&budget, &budget.clone(), 0),
        Err(BudgetError::ZeroCharge)
    ));
}

#[test]
fn peer_and_node_budgets_are_reserved_both_or_neither() {
    let node = InFlightBudget::new(BudgetScope::Node, 100);
    let peer_a = InFlightBudget::new(BudgetScope::PeerConnection, 80);
    let peer_b = InFlightBudget::new(BudgetScope::PeerConnection, 80);
    let a = InFlightBudget::try_reserve_pair(&peer_a, &node, 70).unwrap();
    assert_eq!((peer_a.in_flight(), node.in_flight()), (70, 70));
    // peer_b has room, the node does not: nothing is taken from peer_b.
    let err = InFlightBudget::try_reserve_pair(&peer_b, &node, 40).unwrap_err();
    assert!(matches!(
        err,
        BudgetError::Exhausted {
            scope: BudgetScope::Node,
            ..
        }
    ));
    assert_eq!(peer_b.in_flight(), 0);
    // peer_a is full: the node is not touched.
    assert!(matches!(
        InFlightBudget::try_reserve_pair(&peer_a, &node, 20),
        Err(BudgetError::Exhausted {
            scope: BudgetScope::PeerConnection,
            ..
        })
    ));
    assert_eq!(node.in_flight(), 70);
    let b = InFlightBudget::try_reserve_pair(&peer_b, &node, 30).unwrap();
    assert_eq!(node.in_flight(), 100);
    drop(a);
    assert_eq!((peer_a.in_flight(), node.in_flight()), (0, 30));
    drop(b);
    assert_eq!((peer_b.in_flight(), node.in_flight()), (0, 0));
}

#[test]
fn clones_share_one_account() {
    let budget = InFlightBudget::new(BudgetScope::Node, 10);
    let clone = budget.clone();
    let _held = clone.try_reserve(10).unwrap();
    assert_eq!(budget.in_flight(), 10);
    assert!(budget.try_reserve(1).is_err());
}
