//! The location runtime suite: every behaviour test is one `async fn` over a [`Harness`], run
//! once on the in-memory store (`memory::name`) and once on the live Redis provider
//! (`redis::name`, skipped loudly without `ZLINK_TEST_REDIS_URL`).

mod capacity_model;
mod suite;
mod support;

pub(crate) use support::Harness;

macro_rules! on_every_store {
    ($($name:ident),* $(,)?) => {
        mod memory {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let h = super::Harness::memory();
                    super::suite::$name(&h).await;
                }
            )*
        }
        mod redis {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let Some(h) = super::Harness::redis(stringify!($name)).await else {
                        return;
                    };
                    super::suite::$name(&h).await;
                }
            )*
        }
    };
}

on_every_store!(
    // Spec 21 §12 "Generation And Owner Lease".
    generations_never_swap,
    generation_exhausted_changes_nothing_and_repeats,
    lease_timing_violation_fails_startup,
    expired_admission_deadline_blocks_all_new_work,
    // Spec 21 §12 "Descriptor And Location Lookup".
    oversized_descriptor_fails_startup_without_publishing,
    missing_read_creates_no_generation_and_records_never_expire,
    lookup_by_global_id_ignores_mesh_name,
    discovery_pages_are_bounded_and_same_point_in_time,
    // Issue 6.
    concurrent_reserves_of_one_id_have_exactly_one_winner,
    lease_stall_refuses_new_work_after_deadline_before_ttl,
    acquire_issues_a_new_generation_renew_and_release_keep_it,
    renew_loop_keeps_the_lease_and_refreshes_the_deadline,
    takeover_of_an_expired_lease_issues_a_new_generation,
    lost_renew_reply_is_recovered_without_a_new_generation,
    renew_at_unchanged_revision_is_stale_and_never_overwrites,
    revision_overflow_enters_error_state_and_stops_publishing,
    descriptor_key_of_a_live_host_is_not_taken_over,
    discovery_lists_only_hosts_with_a_valid_lease,
    discovery_uses_pages_only_when_change_number_matches,
    store_failure_grace_keeps_the_list_and_never_extends_the_deadline,
    reserved_record_refuses_preserve_new_owner_and_delete,
    commit_abort_and_delete_move_capacity_with_the_record,
    reserve_past_the_limit_is_capacity_exceeded_and_changes_nothing,
    new_owner_keeps_object_generation_and_moves_capacity,
    secure_target_is_idempotent_and_checks_the_target_lease,
    preserve_and_delete_need_a_valid_owner_lease,
    placement_chooses_only_eligible_nodes,
    weight_zero_keeps_existing_objects_and_reservations,
    remove_all_by_owner_reclaims_only_that_run_and_never_descriptors,
    lost_write_reply_is_reconstructed_from_the_store,
    concurrent_operations_coalesce_into_shared_batches,
    capacity_counters_equal_allocations_after_random_operations,
);
