#![doc = include_str!("../README.md")]
//!
//! # Module layout
//!
//! Modules build upward: vocabulary (`identity`, `generation`, `clock`, `admission`,
//! `options`), then `error`, then `keys`, `counters` and `epoch`, then `lease`, `capacity`,
//! `placement`, `engine`, `authority`, `descriptor`, `discovery`, `query` and `runtime`.
//!
//! # Verification map
//!
//! Every behaviour test is one `async fn` in `tests/<area>.rs`, run on the in-memory store
//! (`tests::memory::<name>`), on the live Redis single node (`…::redis::<name>`) and
//! on the live 3-master Redis Cluster (`…::cluster::<name>`).
//!
//! Spec 21 §12 "Generation And Owner Lease":
//!
//! | spec item | test |
//! |---|---|
//! | ObjectGeneration, AuthorityOwnerGeneration and OwnerLeaseGeneration never swap | `generations_never_swap` |
//! | issuing after 2^63-1 is always GenerationExhausted and changes nothing | `generation_exhausted_changes_nothing_and_repeats` |
//! | §5's time relationship checked at startup; a violation is a startup error | `lease_timing_violation_fails_startup` |
//! | past the last time new work is accepted, descriptor publishing, object messages/timers and relocation changes are blocked together | `expired_admission_deadline_blocks_all_new_work` (the gate and every Store change); object message jobs (from the mesh, local, and queued before the deadline) and factory completion on a running host: `mesh::node::tests::admission::object_messages_past_the_admission_deadline_are_refused_and_never_run`, `…::a_factory_finishing_past_the_admission_deadline_is_not_made_live` (this runtime has no timers) |
//!
//! Spec 21 §12 "Descriptor And Location Lookup":
//!
//! | spec item | test |
//! |---|---|
//! | exceeding the descriptor count or size limit fails startup, no partial set | `oversized_descriptor_fails_startup_without_publishing` |
//! | reading a missing record returns Missing without a generation; records never auto-expire | `missing_read_creates_no_generation_and_records_never_expire` |
//! | lookup by global id is independent of MeshName | `lookup_by_global_id_ignores_mesh_name` |
//! | next-page value ≤ 4,096 bytes, pages ≤ 1,000 entries and 4 MiB, every page from the same point in time | `discovery_pages_are_bounded_and_same_point_in_time` |
//!
//! Spec 21 §12 "Relocation Space And Stages" (the parts the location core owns):
//!
//! | spec item | test |
//! |---|---|
//! | an expired target is rejected without changing the Store | `secure_target_is_idempotent_and_checks_the_target_lease` |
//! | deletion confirms the current owner lease and space in use, and removes record and space together | `preserve_and_delete_need_a_valid_owner_lease`, `commit_abort_and_delete_move_capacity_with_the_record` |
//! | §8.2's owner rules: a previous target attempt can't change the owner | `reservation_made_before_another_move_cannot_move_the_object`, `carrying_preserve_keeps_the_reservation_and_stales_older_copies` |
//!
//! Spec 21 §7.4 "Querying the Current Location from Operational Tools" (`query`, on
//! [`LocationRuntime::lookup`] and [`LocationRuntime::list`]):
//!
//! | spec item | test |
//! |---|---|
//! | lookup by id distinguishes Actor and Spot; a missing record is empty and builds nothing | `lookup_of_a_missing_id_is_none_and_creates_nothing` |
//! | states: Creating (Reserved), Ready, Unavailable once the owner's lease is gone (lease row read directly) | `lookup_shows_creating_ready_and_unavailable_once_the_lease_is_gone` |
//! | paged list by object kind, optional stable type and MeshName; no duplicate id in a cycle | `list_pages_return_each_id_exactly_once_per_cycle`, `tests::query::proptest_pages_concatenate_to_the_set` |
//! | one page holds 1..=1000 entries (0 and 1,001 refused before any Store request); the token is opaque and checked | `page_size_out_of_range_is_refused_before_any_store_request`, `query::tests::page_tokens_round_trip_and_reject_malformed_bytes` |
//! | one encoded page ≤ 4 MiB; the entry that would cross starts the next page | `query::tests::page_budget_takes_an_entry_at_the_bound_and_starts_the_next_page_one_past`, `tests::query::list_page_ends_before_the_entry_that_would_cross_4_mib` (memory), `query::tests::the_largest_entry_fits_max_entry_len_and_a_full_page_can_cross_4_mib` |
//! | a Store failure ends the whole page as an error with no partial entries; a failed lookup is an error, never empty | `store_failure_mid_cycle_fails_the_page_with_no_entries` |
//! | no function returns the whole set at once; nothing is cached | by construction: only `lookup` and `list` exist, neither keeps state |
//!
//! Runtime behaviour (spec 21 §3–§6, §8.1, §10, §11):
//!
//! | requirement | test |
//! |---|---|
//! | 64 concurrent Reserves of one id: one wins, the others see Conflict and the winner's record | `concurrent_reserves_of_one_id_have_exactly_one_winner` |
//! | lease stall with injected clock and latency: refused after the deadline, before the TTL | `lease_stall_refuses_new_work_after_deadline_before_ttl` |
//! | capacity invariant after any sequence, conflicts included (proptest, memory) | `tests::capacity_model::proptest_capacity_invariant` |
//! | the same invariant on every store (seeded sequences) | `capacity_counters_equal_allocations_after_random_operations` |
//! | acquire issues a new generation; renew and release keep it; OwnerId never reused | `acquire_issues_a_new_generation_renew_and_release_keep_it`, `identity::tests::owner_ids_are_never_reused` |
//! | renew loop every renew interval within the renew timeout | `renew_loop_keeps_the_lease_and_refreshes_the_deadline` |
//! | takeover of an expired lease issues a new generation | `takeover_of_an_expired_lease_issues_a_new_generation` |
//! | Store data loss (every key gone) is a lost lease: admission stops; the re-acquire issues a LeaseGeneration above the one held and raises the counters, so recreated objects get ObjectGeneration / AuthorityOwnerGeneration above any held, here or on a host that never saw the old data (`docs/store-epoch.md`) | `a_store_that_lost_its_data_is_a_lost_lease_and_generations_never_go_back` |
//! | a counter at or below a generation this host holds is data loss: issued above it, the next renew reports the lease lost, the re-acquire replaces the surviving row under a higher generation | `a_counter_below_a_held_generation_is_data_loss`, `epoch::tests::*` |
//! | a lost renew reply is reconstructed, not guessed | `lost_renew_reply_is_recovered_without_a_new_generation` |
//! | RENEW at an unchanged Revision is stale and never overwrites | `renew_at_unchanged_revision_is_stale_and_never_overwrites` |
//! | Revision overflow → Error state, publishing stops | `revision_overflow_enters_error_state_and_stops_publishing` |
//! | a live host's descriptor is not taken over; an expired one is | `descriptor_key_of_a_live_host_is_not_taken_over` |
//! | discovery checks each host's lease; unknown recordVersion excluded explicitly | `discovery_lists_only_hosts_with_a_valid_lease` |
//! | pages used only when the change number matches | `discovery_uses_pages_only_when_change_number_matches` |
//! | StoreFailureGrace keeps the list, refuses new targets, never extends the deadline | `store_failure_grace_keeps_the_list_and_never_extends_the_deadline` |
//! | Preserve / NewOwner / Delete on a Reserved record → Conflict, nothing changed | `reserved_record_refuses_preserve_new_owner_and_delete` |
//! | active + reserved against the limit; past it CapacityExceeded, nothing changed | `reserve_past_the_limit_is_capacity_exceeded_and_changes_nothing` |
//! | NewOwner keeps ObjectGeneration, increments AuthorityOwnerGeneration, uses secured capacity | `new_owner_keeps_object_generation_and_moves_capacity` |
//! | a reservation fixes the record version: after a regular Preserve, NewOwner through it is Conflict, nothing changed (§6.1, §8.1) | `reservation_made_before_a_regular_preserve_cannot_move_the_object` |
//! | a reservation made before another move cannot move the object (§8.2) | `reservation_made_before_another_move_cannot_move_the_object` |
//! | only the owner secures a target (§8.1) | `non_owner_cannot_secure_a_target` |
//! | a reservation-carrying Preserve updates the expected version in the same batch (§6.1) | `carrying_preserve_keeps_the_reservation_and_stales_older_copies` |
//! | placement: valid lease, serving, type, weight > 0, room; none → CapacityExceeded | `placement_chooses_only_eligible_nodes`, `placement::tests::*` |
//! | weight 0 never cancels existing objects or reservations | `weight_zero_keeps_existing_objects_and_reservations` |
//! | recovery-sweep: only the dead run's rows, never descriptors, nothing while its lease is held (§3.1, §11) | `recovery_sweep_reclaims_only_a_dead_run_and_never_descriptors` |
//! | recovery-sweep judges the lease row read directly (another LeaseGeneration is dead) | `recovery_sweep_judges_the_lease_row_read_directly` |
//! | a host sweeps its own earlier run (lease taken over under a new generation), never its current one | `recovery_sweep_of_this_hosts_earlier_run_keeps_the_current_one` |
//! | sweeps release the swept run's reservations; a move a live target can finish is kept (§8.1) | `recovery_sweep_releases_reservations_of_the_dead_run` |
//! | self-sweep under this run's lease and admission; nothing after the deadline (§5, §11) | `self_sweep_runs_under_this_runs_lease_and_admission` |
//! | sweeps remove the swept run's allocation rows once empty, conditioned on the version read, in the guarded batches (beyond §11: the rows are runtime-private) | `recovery_sweep_removes_the_dead_runs_emptied_allocation_row`, `self_sweep_removes_this_runs_empty_allocation_rows` |
//! | a swept run's row that still counts a slot (relocating object, live target's reservation) stays; once empty a later sweep removes it | `recovery_sweep_keeps_a_row_that_still_counts_a_slot` |
//! | at-access recovery of one dead run's object (beyond §11: a run nobody saw leave): its record, index and capacity go under the lease-row guard read directly, never while the lease is held, never this host's own | `recover_object_removes_a_dead_runs_record_only_once_its_lease_is_gone` |
//! | ... two survivors recovering one record at once: one batch applies, Reserve makes exactly one new incarnation | `concurrent_recoveries_make_exactly_one_new_incarnation` |
//! | ... a move a live target may still finish keeps the record (§8.1) | `recover_object_keeps_a_record_a_live_target_may_still_move` |
//! | the owner runs of the authority rows, each once, in bounded pages of one snapshot continued by cursor | `owner_runs_lists_each_run_once_in_bounded_pages` |
//! | `deadRunSweepInterval`: 0 (off) or `ownerLeaseTtl..=1 day`, at both bounds and past them | `options::tests::dead_run_sweep_interval_is_off_or_between_the_lease_ttl_and_a_day` |
//! | an unknown write outcome is settled by an exact read of the first-read version | `lost_write_reply_is_reconstructed_from_the_store` |
//! | settling one unknown outcome never stalls batches on other rows | `unknown_outcome_recovery_does_not_stall_other_batches` |
//! | concurrent reservations of one host coalesce into shared batches (block issuance) | `concurrent_operations_coalesce_into_shared_batches` |
//! | corrupt or foreign data costs only its key: sweeps skip and count garbage rows (`undecodable`) and keys the Store cannot read (`unreadable`) | `sweeps_skip_and_count_undecodable_records`, `a_wrong_typed_key_costs_only_that_key_in_a_sweep` |
//! | ... the capacity read counts the readable rows and the skipped ones (`NodeUsage::skipped`); discovery and the location list leave out only the unreadable rows | `object_capacity_survives_a_foreign_key`, `discovery_and_lists_leave_out_only_the_unreadable_rows` |
//!
//! Bounds (at the bound and one past it) are unit tests next to their types:
//! `options::tests` (lease inequality, positivity, route cache gap, TTL),
//! `capacity::tests`
//! (slot counts and limits 0..=2^31-1), `placement::tests` (weights 0..=10000),
//! `generation::tests` and `counters::tests` (issued range 1..=2^63-2), `keys::tests` (key
//! length ≤ 1,024 bytes). The batch formation is unit-tested without a runtime in
//! `engine::batch::tests`.

mod admission;
mod authority;
mod capacity;
mod clock;
mod counters;
mod descriptor;
mod discovery;
mod engine;
mod epoch;
mod error;
mod generation;
mod identity;
mod keys;
mod lease;
mod options;
mod placement;
mod query;
mod runtime;

pub use admission::{Admission, AdmissionOp, AdmissionRefused};
pub use authority::SweepReport;
pub use capacity::{CapacityLimits, MAX_SLOTS, NodeUsage, Usage};
pub use clock::{ManualMonotonic, MonotonicClock, SystemMonotonic};
pub use error::{
    ContractViolation, ErrorKind, InvalidOperation, LocationError, RecordName, SlotKind,
};
pub use generation::{
    AuthorityOwnerGeneration, GenerationKind, ObjectGeneration, OwnerLeaseGeneration,
};
pub use identity::{
    HostRun, MeshName, NodeKey, ObjectId, ObjectKind, OwnerId, RoutingId, StableType,
};
pub use options::{
    ConfigError, DEFAULT_COLD_ACTIVATION_RETENTION, DEFAULT_CREATION_CLEANUP_WINDOW,
    LocationOptions, MAX_DEAD_RUN_SWEEP_INTERVAL, ROUTE_CACHE_FOLLOW_GAP,
};
pub use placement::{DEFAULT_WEIGHT, MAX_WEIGHT};
pub use query::{
    EntryState, ListFilter, LocationEntry, LookupKind, MAX_ENTRY_LEN, MAX_PAGE_SIZE, Page,
    PageToken,
};
pub use runtime::{LocationRuntime, LocationRuntimeBuilder};

pub use authority::{
    Abandoned, AuthorityClient, AuthorityHandle, AuthorityRead, Conflict, CreationMark,
    OperationKey, Outcome, OwnerChangeRead, OwnerRuns, PerActorMoveRecord, ReservationWire,
    ReserveRequest, TargetReservation, TerminalWrite,
};
pub use capacity::{CapacityBundle, CapacityRow, SpotTypeSlots};
pub use descriptor::{DescriptorPublisher, PublishOutcome, PublishableDescriptor};
pub use discovery::{
    DiscoveredNode, Discovery, DiscoveryStatus, DiscoveryView, PageStats, target_of,
};
pub use identity::new_owner_id;
pub use keys::authority as authority_key;
pub use lease::LeaseTerm;
#[cfg(test)]
pub(crate) use lease::RenewOutcome;
pub use placement::{Candidate, PlacementRng, TargetNode, check_weight, choose};

#[cfg(test)]
pub(crate) mod tests;
