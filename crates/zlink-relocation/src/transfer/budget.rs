//! The in-flight payload budgets of the sender (06 §3): per peer connection
//! (`RelocationInFlightPayloadBudget`) and per source node
//! (`RelocationNodeInFlightPayloadBudget`).

use std::fmt;
use std::num::NonZeroU64;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::error::BudgetError;

/// Which budget an [`InFlightBudget`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BudgetScope {
    /// One peer connection (`RelocationInFlightPayloadBudget`).
    PeerConnection,
    /// The whole source node (`RelocationNodeInFlightPayloadBudget`).
    Node,
}

struct Inner {
    scope: BudgetScope,
    limit: u64,
    in_flight: AtomicU64,
}

impl Inner {
    /// Adds `charge` if it fits: always when the budget is not applied; otherwise when it fits
    /// beside what is in flight, or when nothing is in flight at all (a chunk whose charge
    /// alone exceeds the budget is still sent, by itself, so a budget smaller than one chunk
    /// slows the transfer down but never stalls it).
    fn try_add(&self, charge: u64) -> Result<(), BudgetError> {
        let mut current = self.in_flight.load(Ordering::Acquire);
        loop {
            let next = current.checked_add(charge);
            let fits = match next {
                None => false,
                Some(n) => self.limit == 0 || n <= self.limit || current == 0,
            };
            let Some(next) = next.filter(|_| fits) else {
                return Err(BudgetError::Exhausted {
                    scope: self.scope,
                    charge,
                    in_flight: current,
                    limit: self.limit,
                });
            };
            match self.in_flight.compare_exchange_weak(
                current,
                next,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Ok(()),
                Err(seen) => current = seen,
            }
        }
    }

    fn release(&self, charge: u64) {
        self.in_flight.fetch_sub(charge, Ordering::AcqRel);
    }
}

/// One in-flight budget: the sum of the accounted charge of the relocation chunks a source is
/// transmitting and that are not yet acknowledged. `0` means the budget is not applied (the sum
/// is still tracked). Cheap to clone; clones share the account.
///
/// The charge a sender reserves is what Core accounts for the chunk — its encoded length plus
/// Core's per-frame metadata charge (06 §3) — computed by the caller. A reservation never takes
/// the sum past the limit, with one exception: when nothing is in flight, a chunk whose charge
/// alone exceeds the limit is admitted by itself (otherwise it could never be sent).
#[derive(Clone)]
pub struct InFlightBudget {
    inner: Arc<Inner>,
}

impl fmt::Debug for InFlightBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InFlightBudget")
            .field("scope", &self.inner.scope)
            .field("limit", &self.inner.limit)
            .field("in_flight", &self.in_flight())
            .finish()
    }
}

impl InFlightBudget {
    /// A budget of `limit` bytes; `0` = not applied.
    pub fn new(scope: BudgetScope, limit: u64) -> Self {
        InFlightBudget {
            inner: Arc::new(Inner {
                scope,
                limit,
                in_flight: AtomicU64::new(0),
            }),
        }
    }

    /// Which budget this is.
    pub fn scope(&self) -> BudgetScope {
        self.inner.scope
    }

    /// The limit, or `None` when the budget is not applied.
    pub fn limit(&self) -> Option<NonZeroU64> {
        NonZeroU64::new(self.inner.limit)
    }

    /// The charge in flight now.
    pub fn in_flight(&self) -> u64 {
        self.inner.in_flight.load(Ordering::Acquire)
    }

    /// Reserves `charge` bytes before a chunk is sent; the permit gives them back when it is
    /// dropped (on the chunk's acknowledgement). Refused with [`BudgetError::Exhausted`]
    /// (nothing reserved) when it does not fit: retry after a release.
    pub fn try_reserve(&self, charge: u64) -> Result<InFlightPermit, BudgetError> {
        if charge == 0 {
            return Err(BudgetError::ZeroCharge);
        }
        self.inner.try_add(charge)?;
        Ok(InFlightPermit {
            charge,
            held: [Some(self.inner.clone()), None],
        })
    }

    /// Reserves `charge` against a peer-connection budget and the node budget together: both
    /// or neither (06 §3: when the node budget is applied a chunk must satisfy both).
    pub fn try_reserve_pair(
        peer: &InFlightBudget,
        node: &InFlightBudget,
        charge: u64,
    ) -> Result<InFlightPermit, BudgetError> {
        if charge == 0 {
            return Err(BudgetError::ZeroCharge);
        }
        peer.inner.try_add(charge)?;
        if let Err(e) = node.inner.try_add(charge) {
            peer.inner.release(charge);
            return Err(e);
        }
        Ok(InFlightPermit {
            charge,
            held: [Some(peer.inner.clone()), Some(node.inner.clone())],
        })
    }
}

/// A reservation of one chunk's charge against one or two budgets; dropping it (or
/// [`release`](Self::release)) gives the charge back to each.
pub struct InFlightPermit {
    charge: u64,
    held: [Option<Arc<Inner>>; 2],
}

impl fmt::Debug for InFlightPermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InFlightPermit")
            .field("charge", &self.charge)
            .field("budgets", &self.held.iter().flatten().count())
            .finish()
    }
}

impl InFlightPermit {
    /// The reserved charge.
    pub fn charge(&self) -> u64 {
        self.charge
    }

    /// Gives the charge back (the chunk was acknowledged); the same as dropping the permit.
    pub fn release(self) {}
}

impl Drop for InFlightPermit {
    fn drop(&mut self) {
        for inner in self.held.iter_mut().filter_map(Option::take) {
            inner.release(self.charge);
        }
    }
}
