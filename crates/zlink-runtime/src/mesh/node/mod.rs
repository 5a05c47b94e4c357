//! Running MeshNodes (spec 06 §2, §4–§11, §20, §22–§24; 21 §4, §9.3, §10; 28 §3, §9, §10).
//!
//! [`ZLink::start`](crate::mesh::config::ZLink::start) validates the configuration, acquires
//! the owner lease (with a Location Store), binds each MeshNode's listener over
//! `zlink-transport`, publishes its descriptor, starts the hosted services and moves the host
//! to `Serving`; it returns a [`ZLinkHost`].
//!
//! - **Peers.** Automatic topology turns the live descriptors of the MeshName into connection
//!   intents (the smaller RID dials; the handshake checks RID, lifecycle generation and
//!   ChannelName set); a node whose lease expired is dropped. Manual peers (endpoint, or
//!   endpoint and expected RID) can be added, released and listed at runtime.
//! - **Messaging.** [`MeshNode::send`] / [`MeshNode::request`] address a RID on the node's
//!   MeshName; [`ZLinkHost::channel_send`] / [`ZLinkHost::channel_request`] look the
//!   ChannelName up in the process-local route index and pick one Ready Server member by
//!   weight (64-bit sum, weight 0 excluded). A request ends exactly once: reply, error reply,
//!   reply timeout (`DeadlineExceeded`), connection lost (`Unavailable`, never resent) or
//!   shutdown; dropping its future cancels it and a late reply is discarded.
//! - **Inbound.** Application frames take an application-mailbox slot (count and bytes,
//!   reserved together; a full mailbox holds the sender back through transport credit), then
//!   run through the process-level filters and the handler. Replies travel on the transport's
//!   reply lane and complete on their own loop, so a full mailbox never delays a reply.
//!   Node-direct and channel handlers run concurrently; no order between them is promised.
//! - **Command plane.** Framework commands are control frames in a namespace of their own:
//!   never matched against handler keys, never filtered, never mailbox jobs.
//! - **Relocate** moves every stateful object to other nodes and leaves the host `Relocated`
//!   (spec 28 §2–§8; see [`ZLinkHost::relocate`] and the `relocate` module); observers see
//!   every state change and terminal result in order ([`ZLinkHost::observe`]).
//! - **Shutdown** follows spec 28 §9 (see [`ZLinkHost::shutdown_within`]).
//!
//! # Verification map
//!
//! Behaviour tests live in `tests/` (several roots in one process over loopback; the ones
//! marked * run on the in-memory store, the live Redis single node and the live Redis
//! Cluster) and in `crates/zlink-runtime/tests/mesh_process.rs` (real OS processes).
//!
//! | behaviour (spec) | test |
//! |---|---|
//! | nodes find each other through descriptors and exchange requests (21 §4, 06 §6) | `nodes_discover_each_other_and_exchange_requests`* |
//! | 3 OS processes find each other only through Redis and exchange requests | `three_processes_find_each_other_through_redis_and_exchange_requests` |
//! | a killed node's in-flight request ends once (Unavailable/DeadlineExceeded), never replayed | `killed_node_ends_an_in_flight_request_exactly_once_without_replay`, `request_in_flight_on_a_stopped_member_ends_once_and_is_not_replayed` |
//! | a stalled (SIGSTOP) node times out, then serves again | `stalled_node_times_out_then_recovers` |
//! | 400 requests over 2 equal members split 140..=260 each (06 §4) | `equal_weights_split_channel_requests_evenly`* |
//! | 800 requests at 300:100 give the heavier 520..=680 | `channel_requests_follow_the_weight_ratio`* |
//! | weight 0 excluded from selection; weight changes at runtime; bounds 0..=10000 | `weight_zero_member_is_never_selected`, `set_channel_weight_changes_selection_at_runtime`*, `out_of_range_weights_are_refused_and_change_nothing` |
//! | ChannelName not in the route index → NotFound; no eligible member → Unavailable (06 §6) | `channel_not_in_the_route_index_is_not_found`, `channel_without_an_eligible_member_is_unavailable` |
//! | unknown RID → NotFound, no handler runs; known peer not ready → Unavailable (06 §20) | `unknown_rid_is_not_found_and_runs_no_handler`, `known_peer_without_a_connection_is_unavailable` |
//! | payloads of 1 B, 4 KiB, 256 KiB, 1 MiB round-trip (length and CRC-32C) | `payloads_from_one_byte_to_one_mib_round_trip` |
//! | every application mailbox full: a reply to a started request still arrives (06 §25) | `replies_arrive_while_the_mailbox_is_full` |
//! | reply timeout ends the request once; a late reply is discarded (06 §7, §20) | `reply_timeout_ends_the_request_once_and_the_late_reply_is_discarded` |
//! | cancellation by dropping the future | `dropping_a_request_future_removes_it_from_pending` |
//! | filters run over the network in order, unwind in reverse; no `next` → Rejected (06 §10) | `filters_wrap_remote_requests_in_order_and_unwind_in_reverse`*, `filter_that_skips_next_rejects_remote_requests_and_no_handler_runs` |
//! | metadata reaches the remote handler (06 §7) | `metadata_reaches_the_remote_handler`* |
//! | a request to its own RID runs the same handler | `request_to_its_own_rid_runs_the_same_handler` |
//! | the command plane is never matched by handler keys nor filtered | `command_plane_is_neither_matched_by_handler_keys_nor_filtered` |
//! | manual peers: endpoint-only and expected-RID intents, no store (06 §5, §13) | `manual_topology_without_a_store_connects_by_endpoint_and_by_expected_rid`, `manual_peer_with_a_wrong_expected_rid_never_becomes_ready` |
//! | manual peers added, listed, released at runtime (06 §5) | `manual_peers_are_added_listed_and_released_at_runtime` |
//! | two Object Clients without Server membership don't connect; membership at weight 0 does (06 §4) | `object_clients_without_server_membership_never_connect`*, `object_clients_connect_when_one_has_a_weight_zero_server_membership`* |
//! | a peer whose lease expired is dropped, whichever side dials (21 §10) | `peer_whose_lease_expired_is_dropped`*, `peer_whose_lease_expired_is_dropped_even_when_it_dials`* |
//! | an automatic node admits a manual peer its list does not name (06 §5) | `automatic_node_admits_a_manual_peer_its_list_does_not_name` |
//! | StoreFailureGrace keeps the current peers (21 §10) | `store_failure_grace_keeps_current_peers`* |
//! | status snapshot (06 §24) | `status_snapshot_reports_the_node_and_its_peers`* |
//! | a restarted fixed RID presents a larger lifecycle generation and is accepted | `restarted_fixed_rid_presents_a_larger_generation_and_is_accepted_again` |
//! | shutdown: Draining, ShuttingDown for new calls, out of selection, descriptor and lease gone, Stopped (28 §9, §10) | `shutdown_removes_descriptor_and_lease_and_peers_stop_selecting_the_draining_node`* |
//! | shutdown finishes accepted work; past the deadline ForceStopped/DeadlineExceeded; concurrent calls share one report (28 §3, §12) | `shutdown_waits_for_accepted_work_to_finish`, `shutdown_past_its_deadline_is_force_stopped_and_concurrent_calls_share_the_report` |
//! | corrupt or foreign data under the prefix (a wrong-typed key, a garbage record) costs only its key: `object_capacity` counts the rest, shutdown completes `Stopped` with its sweep counting both | `shutdown_completes_with_a_foreign_key_under_the_prefix`* |
//! | hosted services start in order before Serving, stop in reverse; a failed start leaves nothing (06 §22) | `hosted_services_start_in_order_before_serving_and_stop_in_reverse`, `hosted_service_start_failure_stops_started_services_and_leaves_no_rows`* |
//! | configuration errors fail before any socket binds or Store request (06 §23) | `configuration_errors_fail_before_any_bind_or_store_request` |
//! | a forwarded request keeps OperationId, reply route and source; the handler answers the source (21 §7.3, §9.3) | `forwarded_request_is_answered_to_its_source_under_its_own_ids` |
//!
//! Actors on Object Servers (spec 21 §7; `tests/actors.rs`): `actors_are_placed_created_once_and_messaged_by_id`*
//! (placement spread, one factory per id, the existing ref on a second get_or_create, find,
//! state kept across calls from any node, NotFound / AlreadyExists / TypeMismatch /
//! CapacityExceeded), `concurrent_get_or_create_of_one_id_runs_one_factory`* (64 racing callers
//! on 3 nodes → one factory run, one ref), `failing_factory_ends_the_creation_and_returns_its_capacity`,
//! `actor_manager_needs_an_object_role`, `actors_of_a_dead_owner_are_recreated_with_a_higher_generation`*
//! (an owner whose lease runs out leaves the list; survivors reclaim its rows with the
//! recovery-sweep — delete only — and get_or_create makes a new incarnation with a higher
//! ObjectGeneration on a live node), `an_earlier_run_of_this_host_is_reclaimed_after_a_lease_takeover`*
//! (a host whose lease ran out and was taken over under a new generation republishes its
//! descriptors, closes the earlier run's activations and reclaims that run's rows and
//! capacity itself), `store_loss::after_store_data_loss_nodes_rejoin_and_actors_are_recreated_with_higher_generations`*
//! (every key of the Store deleted under three live roots: each re-acquires above its earlier
//! LeaseGeneration, closes that run's activations, is seen as a peer and listed again, and
//! every Actor is recreated with a higher ObjectGeneration, live on one node;
//! `docs/store-epoch.md`), `destroy_ends_only_the_named_incarnation`* (local and
//! remote owner; missing → false; a stale ref → InvalidOperation and the new incarnation
//! lives on).
//!
//! Dead runs nobody saw leave the list (`tests/recovery.rs`, `objects/recovery.rs`; beyond
//! spec 21, delete only): `get_or_create_recovers_a_record_whose_owner_lease_is_gone_though_nobody_saw_it_leave`*
//! (a root dies unobserved; a fresh root's message by id is `NotFound` and get_or_create makes
//! new incarnations with a higher ObjectGeneration, the old capacity released — at access, the
//! periodic sweep off), `a_periodic_sweep_reclaims_dead_runs_nobody_observed`* (whole-mesh
//! restart: within a bounded wait the old runs' rows are gone and the allocation rows count
//! exactly the live activations), `a_stalled_owner_whose_lease_is_held_is_never_recovered`*
//! (an owner holding its lease but serving nothing reachable: get_or_create returns its ref
//! and periodic rounds leave its record untouched).
//!
//! Spec 21 §12 "Creation" and the 21 §7 / 06 §17 result table (`tests/creation.rs`,
//! `tests/spots.rs`, `tests/membership.rs`; * = memory, live Redis and live cluster):
//!
//! | item | test |
//! |---|---|
//! | concurrent requests for one id: one Creating, one factory run | `concurrent_get_or_create_of_one_id_runs_one_factory`*, `concurrent_get_or_create_of_one_user_spot_runs_one_factory`* |
//! | Ready + capacity + Created terminal together; deletion + returned space + Rejected / Failed terminal together | `the_creation_request_reaches_the_factory_and_the_approving_reply_returns`*, `a_declined_creation_is_rejected_stores_its_terminal_and_returns_the_capacity`*, `a_failing_callback_is_failed_and_returns_the_capacity`* |
//! | the same request re-reads its stored result until 5 minutes past the original deadline (Store time) | `the_terminal_is_kept_until_five_minutes_past_the_original_deadline`*, `the_create_command_verifies_every_fence_and_answers_the_stored_result_again`* |
//! | commands 47/49 and 48 verify run generations, OperationId, record, StoreVersion, generations; one result | `the_create_command_verifies_every_fence_and_answers_the_stored_result_again`*, `a_close_whose_fence_no_longer_holds_changes_nothing` |
//! | the creation request inline in the Creating record, its 1 MiB record bound before any Store write | `a_request_at_the_record_bound_fits_and_one_byte_more_changes_nothing`* |
//! | deadline → DeadlineExceeded, no Reserved row left; a late factory commits nothing | `a_target_that_never_answers_ends_deadline_exceeded_without_a_reserved_row`* |
//! | every creation ends (21 §7, §10; `tests/creation_ends.rs`): a Store error on the Ready commit is confirmed by reading again, then the reservation is aborted with a typed Failed terminal and its capacity returned | `a_store_error_after_reserve_aborts_the_creation_and_records_its_terminal`* |
//! | an abort the Store does not confirm is retried until the deadline + cleanup window; the Rejected terminal and the returned capacity follow | `a_failing_abort_is_retried_until_the_creation_ends`* |
//! | a `Reserved` row whose creating run's lease is gone is cancelled (guarded by that lease row) by the next node that meets it, which then creates the object; capacity adds up | `a_reserved_row_of_a_dead_creating_run_is_cancelled_by_the_next_node_that_meets_it`* |
//! | a `Reserved` row of a live run is never cancelled within its deadline + cleanup window (`RunStillLive`); past it (the source died after Reserve) the next node that meets it cancels it and creates; no creation deadline row is left | `a_reserved_row_past_its_deadline_and_cleanup_window_is_cancelled_by_the_next_node_that_meets_it`* |
//! | Ready same type → AlreadyExists / existing; other type or kind → TypeMismatch; no eligible node → CapacityExceeded; declined → Rejected | `actors_are_placed_created_once_and_messaged_by_id`*, `user_spots_are_created_found_messaged_and_closed`* |
//! | User Spot Create issues a UUID v4 SpotId; the reserved Entry Spot form is refused; Close ends one incarnation | `user_spots_are_created_found_messaged_and_closed`* |
//! | an option set twice / a zero deadline → InvalidOperation before any Store request | `an_option_set_twice_is_invalid_and_writes_nothing` |
//! | the route cache drops an entry when a read shows another StoreVersion / generation | `a_read_showing_another_incarnation_drops_the_cached_route`* |
//! | membership: Entry Spot of the placing node, creation into a User Spot, same-node join, one SpotWide turn | `an_actor_joins_the_entry_spot_of_the_node_that_placed_it`*, `an_actor_created_into_a_spot_wide_spot_lands_on_its_node_and_shares_its_turn`*, `a_same_node_join_keeps_the_activation_and_a_cross_node_join_is_refused`* |
//! | the activation concurrency permit bounds factories + initialization running at once (06 §4) | `activation_concurrency_bounds_the_factories_running_at_once` |
//! | an Entry Spot id that exists ends startup with AlreadyExists | `an_entry_spot_id_that_exists_ends_startup_with_already_exists` |
//! | operational lookup and paged list through the host (21 §7.4) | `operators_locate_and_list_objects_through_the_host`* |
//! | an Object Server's descriptor lists its types and Entry Spot id (21 §4) | `object_server_descriptor_lists_its_types_and_entry_spot`* |
//! | the descriptor projects active/reserved usage per category and the activation permits in use, refreshed within a polling interval (21 §4) | `the_descriptor_projects_the_nodes_usage`* |
//! | live move of an Entry Spot member Actor with its captured state; a new AuthorityOwnerGeneration and StoreVersion (21 §1.3, §8; 06 §17 PreserveStateWith) | `preserved_actor_moves_with_its_state_and_keeps_serving`* |
//! | RecreateOnRelocation: the target factory runs for the same id, no payload (06 §17) | `recreated_actor_moves_and_restarts_from_its_factory`* |
//! | DisableRelocation / a target not offering the type: refused before capture, the Actor stays and serves (06 §17) | `disabled_actor_is_rejected_before_capture_and_keeps_serving`*, `a_target_that_does_not_offer_the_type_is_refused_and_the_actor_stays`* |
//! | messages during a move (held, relayed, queued, followed) run exactly once and in order (21 §1.3, §9.2) | `messages_sent_during_a_move_run_once_in_order`* |
//! | Message Follow forwards a stale caller's message to the new owner; without it the caller re-reads (21 §7.3) | `a_stale_caller_is_followed_to_the_new_owner`*, `without_message_follow_a_stale_caller_rereads_and_reaches_the_new_owner`* |
//! | Message Follow by the record kept when the move completed (new owner node, its NewOwner AuthorityOwnerGeneration, ObjectGeneration; no store re-read): a stale caller reaches the owner through two previous owners and is answered once (21 §7.3; `tests/relocation/follow.rs`) | `a_stale_caller_is_followed_through_two_previous_owners_and_answered_once`* |
//! | at most 8 forwards: the 8th is delivered, a 9th refused `Unavailable` (a one-way dropped and counted) (21 §7.3, §12; 28 §13) | `a_message_forwarded_eight_times_is_delivered_and_a_ninth_forward_is_refused`*; unit: `relocation::follow::tests::the_eighth_forward_goes_and_the_ninth_is_refused_unavailable` |
//! | each hop's AuthorityOwnerGeneration greater than the last one carried, else `InvalidOperation`; a cycle `Unavailable`; a previous incarnation's message `InvalidOperation`, not forwarded (21 §7.3; 28 §7) | `a_followed_message_whose_generation_does_not_increase_is_refused`*, `a_followed_message_for_a_previous_incarnation_is_refused`*; unit: `relocation::follow::tests` |
//! | past the follow window a stale caller gets `Unavailable` and nothing is resent (06 §4; 21 §7.3) | `past_the_follow_window_a_stale_caller_gets_unavailable_and_nothing_is_resent`* |
//! | a one-way a move could not run is never dropped silently: one relayed to a move whose NewOwner did not commit, one past a full hold, one refused when held work is handed over (door, handler, closing) is counted in `HostStatus::dropped_one_way` and logged at `warn` with the object and reason; held work (the source's hold at a cancel, the target's temporary queue the cutover accepted) enters the mailbox past its bound, never refused for a full one (21 §9.2, §9.4; `tests/relocation/drops.rs`) | `a_one_way_message_relayed_to_a_move_that_did_not_commit_is_counted`*, `every_one_way_the_cutover_accepted_runs_and_none_is_counted`*; unit: `objects::activation::tests::a_held_job_enters_a_full_mailbox_past_its_bound_and_runs_in_order`, `relocation::tests::a_sealed_actor_holds_up_to_1024_messages_and_refuses_the_next` |
//! | a failure before the cutover releases the target and the source serves again in order (21 §9.4) | `a_failed_restore_cancels_and_the_source_serves_again`* |
//! | the move's stage records Preparing, Captured, Prepared are reservation-carrying Preserves written in order, one RelocationId; NewOwner is conditioned on the Prepared record's version (21 §6.1, §9.1) | `stage_records_are_written_in_order_and_the_owner_change_follows_the_last`* |
//! | an ordinary Preserve during a move makes the next reservation-conditioned write conflict (the Prepared record, or NewOwner): cancelled, record not moved, the source serves again (21 §6.1, §9.1 failure table, §9.4) | `a_preserve_after_captured_fails_the_prepared_record_and_the_source_serves_again`*, `a_preserve_after_prepared_fails_the_owner_change_and_the_source_serves_again`* |
//! | a stage record whose store reply is lost (and not settled by the engine) is settled by reading the record's stage mark and the reservation row, never guessed: the move goes on with the versions read, no reservation row remains and the allocation rows count the records; a cancellation releases the reservation under the row version it reads (21 §10) | `a_stage_record_whose_reply_is_lost_is_settled_by_reading_and_leaks_no_reservation`*, `a_move_cancelled_after_a_lost_stage_reply_releases_the_reservation_it_reads`* |
//! | the target's NewOwner whose reply is lost (and not settled by the engine) is settled by reading the record and tried again with the same key, version and reservation until `storeFailureGrace`; before this the target dropped its prepared instance while the record named it (the Actor was lost) (21 §10) | `a_lost_owner_change_reply_on_the_target_is_settled_by_reading_and_the_move_completes`* |
//! | the target's NewOwner that keeps failing until `storeFailureGrace` has passed removes the prepared object and queue; the owner never changes, the reservation is released, the Actor serves on the source (21 §10, §12 "Store Failure") | `an_owner_change_that_fails_past_the_grace_removes_the_prepared_target`* |
//! | unit gate: outbound-unit, `Capture` and payload-memory permits taken all at once before the seal (inbound-unit, `Restore` and declared-length memory on the target before assembling); random acquire/release sequences never exceed a cap nor leave a partial hold (28 §5, §12 item 4) | `permits_are_taken_all_at_once_and_no_cap_is_ever_exceeded` (proptest), `a_waiting_unit_is_admitted_once_a_holder_ends`, `at_the_capture_cap_a_further_unit_waits_until_a_capture_ends` |
//! | `MaxActiveOutboundRelocations` N admits N units at once; unit N+1 waits (records and seals nothing, keeps serving) until one ends, then moves (28 §5) | `at_the_outbound_cap_every_unit_moves_at_once`*, `past_the_outbound_cap_a_further_unit_waits_until_one_ends`* |
//! | `MaxActiveInboundRelocations`: the target admits a unit before its seal; past the cap the unit waits there (not sealed, keeps serving) until one ends, then moves (28 §5) | `past_the_inbound_cap_a_further_unit_waits_before_its_seal_until_one_ends`* |
//! | payload memory: 64 MiB + framing reserved up front per PreserveStateWith object, shrunk after Capture, never grown; a unit needing exactly the cap moves, one byte over → CapacityExceeded before capture, record untouched (28 §5) | `a_preserved_unit_needing_exactly_the_payload_cap_moves`*, `a_preserved_unit_over_the_payload_cap_is_refused_before_capture_and_keeps_serving`*, `a_unit_over_the_payload_cap_is_refused_and_one_at_the_cap_is_admitted`, `the_default_cap_admits_three_preserved_units_up_front_and_a_shrink_makes_room` |
//! | chunk sends wait for the per-connection and node in-flight budgets (charge returned on the target's acknowledgement); a budget below the payload still completes the move; below one chunk it sends one at a time; 0 = not applied (06 §3) | `chunk_sends_respect_small_in_flight_budgets_and_the_move_completes`*, `a_budget_below_one_chunk_sends_one_chunk_at_a_time`, `budgets_of_zero_are_not_applied` |
//! | `SpotWide` aggregate gate: one outbound, one `Capture` permit and the aggregate claim (64 MiB per PreserveStateWith participant + inventory and framing) taken at once; a claim over the cap waits until no other payload memory is held, then runs alone, blocking every other payload move until it frees its memory even after it shrank; a small aggregate moves beside single units; claims never pass the cap except one aggregate alone (28 §5, §12 item 4; `tests/relocation/aggregate_gate.rs`) | `a_spot_wide_aggregate_over_the_payload_cap_waits_for_held_memory_then_moves_alone`*, `a_small_spot_wide_aggregate_moves_while_a_single_unit_holds_memory`*, `an_aggregate_over_the_cap_runs_alone_and_blocks_single_units_even_after_it_shrank`, `an_aggregate_at_the_cap_shares_the_memory_and_one_byte_over_runs_alone`, `a_single_unit_waiting_behind_an_alone_aggregate_is_admitted_once_it_ends`, `a_small_aggregate_and_single_units_hold_memory_together_within_the_cap`, `an_aggregate_claim_counts_64_mib_per_preserved_participant_plus_its_framing`, `payload_claims_never_exceed_the_cap_except_one_aggregate_alone` (proptest) |
//! | interruption (seal → NewOwner applied and dispatch open) recorded once per completed move, never for a failed one; over the 1 s target only a warning (28 §5, §11) | `the_interruption_summary_counts_one_entry_per_completed_move`*, `relocation::interruption::tests` |
//! | Instance Spot unit (28 §5, §6; `tests/relocation/instance.rs`): PreserveStateWith moves it with its state — same SpotId and ObjectGeneration, a higher AuthorityOwnerGeneration, the target factory then the adapter's restore; the source activation closed | `a_preserved_instance_spot_moves_with_its_state_and_generation`* |
//! | Instance Spot RecreateOnRelocation: the target factory's fresh state, nothing captured | `a_recreated_instance_spot_restarts_from_its_factory`* |
//! | Instance Spot DisableRelocation: refused before capture, record unchanged, still serving | `a_disabled_instance_spot_is_refused_before_capture_and_keeps_serving`* |
//! | Instance Spot direct requests and one-ways during a move (held, relayed, queued, followed) run once and in order per caller (28 §6, §7) | `messages_sent_to_a_moving_instance_spot_run_once_in_order`* |
//! | a stale caller of a moved Instance Spot (cached `spot` route) is followed to the new owner | `a_stale_caller_of_a_moved_instance_spot_is_followed`* |
//! | only an Instance Spot live on its owner moves: not from another node, never cold-activated by a move; one whose first message still runs (recovery root recorded) is `Unavailable`, unchanged, and moves once it completed (28 §6) | `a_preserved_instance_spot_moves_with_its_state_and_generation`*, `a_recreated_instance_spot_restarts_from_its_factory`*, `an_instance_spot_whose_first_message_still_runs_does_not_move_until_it_completed`* |
//! | Instance Spot Close vs relocation ordered on the owner (28 §7): a Close first → no move, the Close completes; a move first → the Close gets a moving result and changes nothing (also in the old owner's follow window) | `a_close_claimed_first_keeps_the_instance_spot_from_moving`*, `a_close_after_the_move_began_gets_a_moving_result`*, `objects::instance::ending::tests` |
//! | `SpotWide` User Spot aggregate move (`tests/relocation/spot_wide.rs`): the Spot and every member at the seal move as one unit with their state (SpotStateAdapter, ActorStateAdapter), one reservation, one aggregate NewOwner CAS on the Spot's record; every member resolves to the target and shares the Spot's turn there (21 §8, §8.2; 28 §6) | `a_spot_wide_relocation_moves_the_spot_and_every_member_with_their_state`*; location core: `spot_wide_relocation_moves_the_spot_its_members_capacity_and_root`* |
//! | the target list is paged (≤ 1,024 entries, ≤ 1 MiB per page) and verified against the recorded target-list checksum; 2,500 members (≥ 3 pages) move, the inventory root (total 2,501) written by the CAS (21 §9.1; 28 §6) | `a_spot_wide_relocation_of_2500_members_pages_the_inventory_and_moves_them_all`*; unit: `relocation::aggregate::tests` |
//! | one member with `DisableRelocation` aborts the whole move before anything is stored; a target short of capacity for the Spot and every member → `CapacityExceeded`, everything stays and serves (21 §8.2; 28 §6) | `a_member_with_disable_relocation_aborts_the_whole_spot_wide_relocation`*, `a_spot_wide_relocation_short_of_target_capacity_is_capacity_exceeded_and_everything_stays`*; location core: `spot_wide_relocation_short_of_capacity_or_a_type_stores_nothing`* |
//! | messages to members during a `SpotWide` move run once and in order (held, relayed before the cutover or followed after it) (21 §9.2) | `messages_to_members_during_a_spot_wide_relocation_run_once_and_in_order`* |
//! | a member request held at the aggregate's seal is relayed to the target, runs once after the owner change and is a completion record there (the member's record ends `completed`) (21 §1.3, §9.3) | `a_member_request_held_at_the_seal_is_relayed_and_completed_on_the_target`* |
//! | the aggregate NewOwner applies but its reply is lost and the engine cannot settle it: the target settles it by reading the Spot's record and every participant serves from it with its state (21 §10, §12 "Store Failure") | `a_lost_spot_wide_owner_change_reply_is_settled_by_reading_and_the_spot_moves`* |
//! | a `SpotWide` move that fails before relay-ready (a member's restore refused on the target) is cancelled: the target's group is discarded unrun, its capacity released, the owner untouched, and every held queue runs on the source in order, each message once (21 §9.4; 28 §6) | `a_spot_wide_relocation_cancelled_before_relay_ready_serves_every_held_message_on_the_source`* |
//! | a `SpotWide` Spot sealed for a move takes no new member (a creation into it, or a same-node join, is `Unavailable`): the moved set is the set at the seal (21 §8) | `a_member_created_into_a_spot_wide_spot_during_its_relocation_is_refused`* |
//!
//! Instance Spots by cold activation (spec 06 §15–§16, §18; 21 §7.1, §10, §12 "Creation";
//! `tests/instances/` (restart rows in `restarts.rs`), over a Relocation Store of the same kind — memory on the store's
//! clock, or the Redis provider on the same live Redis):
//!
//! | behaviour (spec) | test |
//! |---|---|
//! | a first message with Instance intent creates the Spot, which answers it; a send creates one too; Instance intent on a Ready Spot delivers once to its owner; existing-only calls stay NotFound on Missing (06 §16, §18) | `first_message_creates_the_instance_spot_and_is_answered_by_it`* |
//! | the envelope is stored and read back before the record points at it; after the first handler the root is removed (Preserve), then the envelope deleted — never while a record points at it (21 §7.1, §10) | `first_message_creates_the_instance_spot_and_is_answered_by_it`*, `racing_first_messages_run_one_factory_and_every_message_is_answered_once`* |
//! | stable type omitted: 0 served types → NotFound, 1 → chosen, 2 → InvalidOperation; an existing record decides the type (06 §15, 21 §7.1) | `omitted_stable_type_is_chosen_only_when_exactly_one_instance_type_is_served`* |
//! | a User Spot or another Instance type under the id → TypeMismatch, nothing stored (21 §7.1) | `instance_intent_on_a_user_spot_or_another_type_is_a_type_mismatch`* |
//! | an option set twice, a zero deadline, the reserved Entry Spot form → InvalidOperation before any Store request (06 §15) | `an_option_set_twice_or_a_reserved_id_fails_before_anything_is_stored` |
//! | 64 racing first messages for one id from 3 nodes: one factory run, every message answered exactly once; the source creates no reservation (21 §12) | `racing_first_messages_run_one_factory_and_every_message_is_answered_once`* |
//! | restart row 1: stored, never reserved → gone after `coldActivationRetention`, nobody deletes it | `envelope_no_record_points_to_is_gone_after_its_retention`* |
//! | restart row 2: Creating, owner gone before Ready → the survivors' recovery cancels the record; a new incarnation follows; the late factory result changes nothing | `creation_whose_owner_died_before_ready_is_cancelled`* |
//! | restart row 3: Ready, first message not completed, owner gone → a survivor takes the record over (conditioned on the dead lease), runs the stored first message first, removes the root, deletes the envelope | `ready_spot_of_a_dead_owner_is_restored_from_its_stored_first_message`* |
//!
//! Host Relocate (spec 28 §12; `tests/relocation/host.rs` unless named, every test on the
//! three stores):
//!
//! | behaviour (28 §12 item) | test |
//! |---|---|
//! | 1: `PlannedMaintenance` picks only the same version; infrastructure kept; the terminal result observed after `Relocating`, `Relocated`; a repeat returns the first result; nothing new placed on the relocated host | `planned_maintenance_moves_every_actor_to_a_same_version_node`* |
//! | 1: `RollingUpdate` picks only the requested exact version (lower, equal and higher excluded); an invalid version is an argument error that changes nothing | `rolling_update_moves_only_to_the_requested_exact_version`* |
//! | 1: the same maintenance wave is excluded | `a_node_of_the_same_maintenance_wave_is_no_target`* |
//! | 1: without a target the operation waits to its deadline, then `Blocked/TargetUnavailable`, still `Serving`; after `Blocked` nothing is kept | `without_an_eligible_target_the_relocate_is_blocked_and_the_host_serves_on`* |
//! | 1: a registered manual peer blocks (`ManualTopologyUnsupported`), admission untouched | `a_registered_manual_peer_blocks_the_relocate`* |
//! | 1 (28 §4 filter step 4): each unit takes its bundle from its target's remaining room, earlier units of the same Relocate counted; a target without room left is never chosen (the next one with room is), a unit no target has room for is never started; a move named to a target without room is `CapacityExceeded` (never `InternalFailure`), nothing changes (`tests/relocation/targets.rs`) | `host_relocate_counts_capacity_taken_by_earlier_units`*, `a_target_without_room_is_not_chosen_and_the_kind_is_capacity_exceeded`*; `relocate::targets::tests` |
//! | 1 (28 §4 "No target yet", §8): a unit no target has room for waits for one until the deadline and moves to one that becomes eligible meanwhile (`Relocated`); with none by the deadline → `Blocked/TargetUnavailable`, the moved units stay on their targets, the rest serve on from the source, the host `Serving` (`tests/relocation/targets.rs`) | `host_relocate_waits_for_an_eligible_target_until_the_deadline`*, `host_relocate_counts_capacity_taken_by_earlier_units`* |
//! | 28 §10, 21 §4: a host that takes no new objects (here `Relocated`, its own list still showing it `serving`) never places a new Instance Spot or Actor on itself; the first call goes to an eligible node (`tests/relocation/targets.rs`) | `a_host_not_taking_new_objects_never_places_on_itself`* |
//! | 2, 8: a blocked preflight (`RelocationDisabled`) keeps `Serving` and changes nothing | `a_disabled_type_blocks_the_relocate_before_anything_changes`* |
//! | 2: a host with no stateful object is `Relocated` without a target search | `an_empty_host_is_relocated_without_a_target_search`* |
//! | 2, 9: `Shutdown` after `Relocated` is a separate step; the moved Actors keep serving from their targets; no authority row left to sweep | `shutdown_after_relocated_leaves_the_moved_actors_serving`* |
//! | 3: same options share one operation (a later deadline ignored), other options `OperationInProgress`, a waiter that gives up ends only its wait | `same_options_share_one_operation_and_other_options_are_operation_in_progress`* |
//! | 3: shutdown during a relocation → `ShutdownRequested`; a Relocate after it the same | `shutdown_during_a_relocate_ends_it_with_shutdown_requested`* |
//! | 7: after the deadline no unit starts; started units end safely (moved or serving on the source), `Blocked/DeadlineExceeded` | `after_the_deadline_no_unit_starts_and_started_units_end_safely`* |
//! | 8: a `Relocating` descriptor write that is not confirmed rolls back to `Serving`, `Blocked/StoreUnavailable`, nothing moved, the stored descriptor still `serving` | `an_unconfirmed_relocating_descriptor_rolls_back_to_serving_with_store_unavailable`* |
//! | 8: ... and whose rollback to `Serving` is not confirmed either → no new work, bounded teardown, the host `ForceStopped/TeardownFailed` (its termination result, announced once), the Relocate `Blocked/StoreUnavailable` (`tests/relocation/rollback.rs`) | `an_unconfirmed_descriptor_rollback_force_stops_the_host_with_teardown_failed`* |
//! | 9: a shutdown during the moves waits for the started units, starts no other, abandons nothing; moved Actors serve from the target | `shutdown_during_the_moves_finishes_the_started_units_and_starts_no_other`* |
//! | 28 §10: a `Relocated` host refuses node-direct requests (`Unavailable`), still calls out, and keeps its connections | `a_relocated_host_refuses_node_direct_requests_and_keeps_its_connections`* |
//! | 2, 5: a host holding Actors and Instance Spots moves both (each Instance Spot to a node offering its type, with the Spot's bundle) and is `Relocated`; a `DisableRelocation` Instance Spot blocks the preflight (`RelocationDisabled`) (`tests/relocation/instance.rs`) | `host_relocate_moves_actors_and_instance_spots`*, `a_disabled_instance_spot_blocks_the_host_relocate_before_anything_changes`* |
//! | 5: a live `SpotWide` User Spot is one unit covering its members (not units of their own); the host ends `Relocated` and then shuts down cleanly (its self-sweep finds no member row), every member serving from the target (`tests/relocation/spot_wide.rs`) | `the_host_relocate_moves_a_host_holding_a_spot_wide_spot_as_one_unit`* |
//! | 5, 6: a live `PerActor` User Spot is one Spot authority transition (empty shell, no Spot adapter call) plus one unit per member; `Relocated`, the Spot and every member owned by the target with their state; after the transition ToSpot/Create/Join are served by the target while members still serve from the source, ToActor reaches each Actor's current owner; the move record's source/target counts sum to the membership at every member CAS; a target that cannot build the shell leaves owner, generations and move record untouched and the source Spot serving; a `DisableRelocation` member → `RelocationDisabled`; a target not offering a member's type is no target (`TargetUnavailable`); ToSpot requests held at the seal are served once by the target; a resent Restore reuses the prepared shell (`tests/relocation/per_actor.rs`) | `per_actor_spot_and_members_move_with_host_relocate`*, `after_spot_transition_create_and_join_go_to_the_target`*, `to_actor_reaches_each_actors_current_owner`*, `per_actor_move_record_counts_sum_to_membership`*, `a_spot_transition_refused_by_the_target_leaves_the_store_untouched_and_the_spot_serving`*, `a_per_actor_member_with_disable_relocation_blocks_the_host_relocate`*, `a_target_without_a_member_type_is_no_target_for_a_per_actor_spot`*, `spot_messages_during_the_transition_are_served_once_by_the_target`*, `a_resent_spot_restore_never_runs_twice`*; location core: `per_actor_moves_keep_the_move_record_counts_summing_to_the_members`* |
//! | 3 (wire values), 2 (argument errors) | `relocate::types::tests` |
//!
//! Spot lifecycle callbacks around relocation and shutdown (spec 28 §5, §6, §9, §12 items 5
//! and 9; `tests/relocation/callbacks/`, every test on the three stores):
//!
//! | behaviour | test |
//! |---|---|
//! | §6 step 10: `OnClosing(RelocationOut)` once on the source User Spot (`SpotWide`) and Instance Spot, the record already naming the target; no member callback | `on_closing_relocation_out_runs_on_the_source_after_the_location_change`* |
//! | §6 "Callbacks not called": an Entry Spot member move closes no Spot; the Entry Spot closes only with `HostShutdown` | `entry_spot_never_gets_a_closing_callback`* |
//! | §5 `ApplicationSignaled`: the move waits at its seal for the signalled boundary, other turn boundaries do not move it; the consumed boundary runs no `Continued` | `application_signaled_spot_moves_only_at_its_signal`* |
//! | §5, §6 step 7, §12 item 5: `OnRelocationReadyCompleted(Relocated)` is the first application turn on the target; work waiting in the target's temporary queue, relayed and direct work run after it | `ready_completed_is_the_first_turn_on_the_target`* |
//! | §5: a boundary no move was ready for → `Continued` as the next turn; a move cancelled before its commit → queue served on the source, then `Continued` | `continued_runs_when_no_relocation_was_ready`* |
//! | §5: a Spot that never signals → its unit does not move, the host ends `Blocked/DeadlineExceeded` and the Spot serves on | `a_spot_that_never_signals_blocks_the_relocate_with_deadline_exceeded`* |
//! | §9 step 4: every Entry, User and Instance Spot gets one `HostShutdown` closing; no member Actor | `host_shutdown_closing_callback_runs_for_every_spot`* |
//! | §9, §12 item 9: a failing closing callback → `ForceStopped/TeardownFailed`; one past the deadline → `ForceStopped/DeadlineExceeded` | `a_failing_closing_callback_is_teardown_failed`*, `a_closing_callback_past_the_deadline_is_deadline_exceeded`* |
//!
//! Completion records (spec 21 §9.3; §12 "Location Cache And Completion Results";
//! `tests/relocation/completion.rs`, every test on the three stores, the Relocation Store on
//! memory or the same live Redis / Cluster):
//!
//! | behaviour | test |
//! |---|---|
//! | a request held at the seal and relayed finishes on the target: its result is stored and read back before the record points at it (`completing`), delivered once (`TerminalReceived`), `completed` recorded with accepted = completed, the payload deleted only after the record stopped pointing at it, nothing left | `a_request_finishing_after_the_owner_changed_is_stored_recorded_delivered_once_and_completed`* |
//! | a result delivered again is `AlreadyTerminal`; the request ran once | `a_completion_delivered_again_is_already_terminal_and_answers_once`* |
//! | a stored payload permanently missing → `dataLost` recorded, the requester answered `DataLost`, the owner stays the target | `a_lost_completion_payload_is_data_lost_and_the_owner_stays_the_target`* |
//! | a requester that stopped (its lease released) before its result existed → `SourceLeaseExpired`, then `completed` | `a_requester_whose_lease_ended_is_confirmed_source_lease_expired`* |
//! | the payload encoding round-trips every result in order; a damaged one does not decode | `relocation::completion::payload::tests` |
//!
//! Unit tests next to the code: `lifecycle::tests` (admission per state), `mailbox::tests`
//! (both axes reserved together; proptest), `peers::tests` (weighted choice, 64-bit sum;
//! proptest), `discover::tests` (the connection rule), `objects::instance::envelope::tests`
//! (the activation envelope, the recovery root and the reply: round trips, damage refused).

mod control;
mod core;
mod discover;
mod forward;
mod handle;
mod host;
mod inbound;
mod lifecycle;
mod mailbox;
mod observe;
mod peers;
mod pending;
mod relocate;
mod start;
mod status;
mod takeover;

#[cfg(test)]
mod tests;

pub(crate) use self::core::{Address, NodeInner, ObjectSink, ReplyBody, SPOT_ADDRESS};
pub use self::core::{CallOptions, DEFAULT_REPLY_TIMEOUT, DEFAULT_SEND_TIMEOUT};
pub use crate::relocation::{CompletionCounts, InterruptionSummary};
pub use handle::MeshNode;
pub use host::{DEFAULT_SHUTDOWN_DEADLINE, ZLinkHost};
pub(crate) use inbound::{answer as answer_request, reply_for};
pub use mailbox::{DEFAULT_MAILBOX_BYTES, DEFAULT_MAILBOX_JOBS, JOB_OVERHEAD_BYTES};
pub(crate) use mailbox::{Mailbox, MailboxPermit, job_cost};
pub use observe::{HostEvent, HostObserver};
pub use relocate::{
    DEFAULT_RELOCATE_DEADLINE, RelocateError, RelocateErrorKind, RelocateOptions, RelocationMode,
    RelocationOutcome, RelocationReason, RelocationResult,
};
pub use start::{StartError, StartErrorKind};
pub use status::{
    HostStatus, ManualPeerStatus, NodeStatus, PeerStatus, ShutdownOutcome, ShutdownReason,
    ShutdownReport,
};
pub use zlink_codec::records::HostState;
