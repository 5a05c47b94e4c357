//! The location runtime suite: every behaviour test is one `async fn` over a [`Harness`], run
//! on the in-memory store (`memory::name`), on the live Redis single node (`redis::name`,
//! `ZLINK_TEST_REDIS_URL`) and on the live 3-master Redis Cluster (`cluster::name`,
//! `ZLINK_TEST_REDIS_CLUSTER`). A missing variable skips loudly under a plain `cargo test` and
//! fails when `CI` or `ZLINK_REQUIRE_REDIS` is set.

mod authority;
mod bad_row;
mod capacity_model;
mod corrupt;
mod descriptors;
mod discovery_polls;
mod engine;
mod epoch;
mod lease;
mod per_actor;
mod prelude;
mod private_redis;
mod query;
mod recover;
mod relocation;
mod rollback;
mod run_index;
mod spot_wide;
pub(crate) mod support;
mod sweep;
mod sweep_scale;

use zlink_testkit::on_every_store;

on_every_store!(
    // Corrupt or foreign data costs only its key (sweeps, capacity, discovery, lists).
    corrupt::sweeps_skip_and_count_undecodable_records,
    corrupt::a_wrong_typed_key_costs_only_that_key_in_a_sweep,
    corrupt::object_capacity_survives_a_foreign_key,
    corrupt::discovery_and_lists_leave_out_only_the_unreadable_rows,
    bad_row::self_sweep_skips_and_counts_a_row_whose_newest_record_is_unreadable,
    bad_row::read_many_answers_each_object_and_an_unreadable_row_costs_only_itself,
    // Spec 21 §12 "Generation And Owner Lease".
    lease::generations_never_swap,
    lease::generation_exhausted_changes_nothing_and_repeats,
    lease::lease_timing_violation_fails_startup,
    lease::expired_admission_deadline_blocks_all_new_work,
    // Spec 21 §12 "Descriptor And Location Lookup".
    descriptors::oversized_descriptor_fails_startup_without_publishing,
    authority::missing_read_creates_no_generation_and_records_never_expire,
    authority::lookup_by_global_id_ignores_mesh_name,
    descriptors::discovery_pages_are_bounded_and_same_point_in_time,
    // Runtime behaviour (spec 21 §3–§6, §8, §10, §11).
    authority::concurrent_reserves_of_one_id_have_exactly_one_winner,
    lease::lease_stall_refuses_new_work_after_deadline_before_ttl,
    lease::acquire_issues_a_new_generation_renew_and_release_keep_it,
    lease::renew_loop_keeps_the_lease_and_refreshes_the_deadline,
    lease::takeover_of_an_expired_lease_issues_a_new_generation,
    // A Store that lost its data (spec 21 §3, §5, §10; docs/store-epoch.md).
    epoch::a_store_that_lost_its_data_is_a_lost_lease_and_generations_never_go_back,
    epoch::a_counter_below_a_held_generation_is_data_loss,
    lease::lost_renew_reply_is_recovered_without_a_new_generation,
    lease::a_release_during_a_renew_in_flight_ends_the_lease_without_a_takeover,
    descriptors::renew_at_unchanged_revision_is_stale_and_never_overwrites,
    descriptors::revision_overflow_enters_error_state_and_stops_publishing,
    descriptors::descriptor_key_of_a_live_host_is_not_taken_over,
    descriptors::discovery_lists_only_hosts_with_a_valid_lease,
    descriptors::discovery_uses_pages_only_when_change_number_matches,
    descriptors::store_failure_grace_keeps_the_list_and_never_extends_the_deadline,
    // What a discovery poll costs (issue 38).
    discovery_polls::an_idle_poll_reads_only_the_change_number,
    discovery_polls::a_peer_whose_lease_expired_is_dropped_without_a_change_number_move,
    discovery_polls::a_changed_mesh_reads_every_lease_in_one_batched_read,
    discovery_polls::the_first_poll_after_a_store_failure_reads_the_whole_list,
    authority::reserved_record_refuses_preserve_new_owner_and_delete,
    authority::commit_abort_and_delete_move_capacity_with_the_record,
    authority::reserve_past_the_limit_is_capacity_exceeded_and_changes_nothing,
    relocation::new_owner_keeps_object_generation_and_moves_capacity,
    relocation::new_owner_joining_moves_owner_capacity_and_membership_in_one_change,
    relocation::secure_target_is_idempotent_and_checks_the_target_lease,
    authority::preserve_and_delete_need_a_valid_owner_lease,
    authority::placement_chooses_only_eligible_nodes,
    authority::weight_zero_keeps_existing_objects_and_reservations,
    sweep::recovery_sweep_reclaims_only_a_dead_run_and_never_descriptors,
    run_index::the_run_index_follows_every_owner_change_and_the_sweep_empties_it,
    run_index::a_recovery_sweep_reads_only_the_dead_runs_index_and_removes_stale_entries,
    run_index::a_run_without_an_index_marker_is_swept_from_every_authority_row,
    sweep::recovery_sweep_judges_the_lease_row_read_directly,
    sweep::recovery_sweep_of_this_hosts_earlier_run_keeps_the_current_one,
    sweep::recovery_sweep_releases_reservations_of_the_dead_run,
    sweep::self_sweep_runs_under_this_runs_lease_and_admission,
    sweep::recovery_sweep_removes_the_dead_runs_emptied_allocation_row,
    sweep::recovery_sweep_keeps_a_row_that_still_counts_a_slot,
    sweep::recovery_sweep_rebuilds_an_allocation_row_short_of_its_records,
    sweep::self_sweep_removes_this_runs_empty_allocation_rows,
    recover::recover_object_removes_a_dead_runs_record_only_once_its_lease_is_gone,
    recover::recover_object_of_this_hosts_earlier_run_applies_and_of_the_current_run_is_refused,
    recover::concurrent_recoveries_make_exactly_one_new_incarnation,
    recover::recover_object_keeps_a_record_a_live_target_may_still_move,
    recover::owner_runs_lists_each_run_once_in_bounded_pages,
    relocation::reservation_made_before_a_regular_preserve_cannot_move_the_object,
    relocation::reservation_made_before_another_move_cannot_move_the_object,
    relocation::non_owner_cannot_secure_a_target,
    relocation::carrying_preserve_keeps_the_reservation_and_stales_older_copies,
    relocation::a_lost_new_owner_reply_is_settled_by_reading_the_record,
    relocation::a_lost_secure_reply_is_found_by_its_reservation_id_and_released,
    relocation::a_target_finds_the_reservations_an_ended_source_secured_on_it,
    spot_wide::spot_wide_relocation_moves_the_spot_its_members_capacity_and_root,
    spot_wide::spot_wide_relocation_short_of_capacity_or_a_type_stores_nothing,
    per_actor::per_actor_moves_keep_the_move_record_counts_summing_to_the_members,
    engine::lost_write_reply_is_reconstructed_from_the_store,
    engine::concurrent_operations_coalesce_into_shared_batches,
    engine::unknown_outcome_recovery_does_not_stall_other_batches,
    authority::capacity_counters_equal_allocations_after_random_operations,
    // Operational location queries (spec 21 §7.4).
    query::lookup_of_a_missing_id_is_none_and_creates_nothing,
    query::a_reader_looks_up_and_lists_without_writing_the_store,
    query::lookup_shows_creating_ready_and_unavailable_once_the_lease_is_gone,
    query::list_pages_return_each_id_exactly_once_per_cycle,
    query::page_size_out_of_range_is_refused_before_any_store_request,
    query::store_failure_mid_cycle_fails_the_page_with_no_entries,
);
