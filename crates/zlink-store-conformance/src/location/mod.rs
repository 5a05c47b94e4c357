//! Location Store checks: one per SPI verification item of spec 22 §10, plus the contract
//! details those items rest on.

use zlink_store_spi::{BoxFuture, DynLocationStore, Retention};

use crate::{CheckResult, LocationCapabilities};

mod failure;
mod read_many;
mod read_write;
mod scan;

pub use failure::*;
pub use read_many::*;
pub use read_write::*;
pub use scan::*;

type Check =
    for<'a> fn(&'a dyn DynLocationStore, &'a LocationCapabilities) -> BoxFuture<'a, CheckResult>;

macro_rules! checks {
    ($($name:ident),* $(,)?) => {
        /// Every Location Store check by name, in the order the harness runs them.
        pub(crate) fn all_checks() -> Vec<(&'static str, Check)> {
            vec![$((stringify!($name), (|s, c| Box::pin($name(s, c))) as Check)),*]
        }
    };
}

checks!(
    exact_read_returns_one_observation,
    read_many_answers_as_exact_reads,
    expired_value_is_missing_and_durable_value_stays,
    conflict_applies_no_mutation,
    version_condition_requires_current_version,
    largest_batch_applies_as_one_commit,
    readers_never_observe_half_a_batch,
    concurrent_cas_increments_are_exact,
    keys_compare_byte_for_byte,
    scan_pages_read_one_snapshot,
    scan_lists_prefix_in_key_byte_order,
    invalid_or_foreign_cursor_is_expired,
    cursor_is_opaque_and_pages_are_bounded,
    lost_write_result_is_reconstructed_by_exact_read,
    dropped_before_poll_commits_nothing,
    out_of_bound_batch_is_rejected_and_changes_nothing,
);

pub(crate) fn ms(n: u64) -> Retention {
    Retention::from_millis(n).unwrap_or(Retention::MAX)
}
