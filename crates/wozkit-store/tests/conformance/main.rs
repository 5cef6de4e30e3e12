//! The store conformance suite: every case runs on SQLite and, when `WOZKIT_TEST_PG_URL` is set,
//! on PostgreSQL (see `.ci/start-postgres.sh`), so both backends are held to one behaviour.

#[path = "../harness/mod.rs"]
mod harness;

mod accounts;
mod events;
mod leases;
mod records;
mod rooms;
mod waiting;

use accounts::*;
use events::*;
use leases::*;
use records::*;
use rooms::*;
use waiting::*;

conformance!(
    concurrent_appends_get_gap_free_ordered_seqs,
    append_once_stores_one_of_concurrent_calls,
    append_after_stores_only_onto_the_expected_end,
    events_after_seq,
    failed_batch_writes_nothing,
    unknown_session_is_refused,
    reopen_keeps_everything,
    participants_by_token_and_worker,
    participant_updates,
    participants_listed_in_bulk,
    session_listing_and_ending,
    events_page_walks_every_event,
    meta_values,
    meta_increments_are_atomic,
    meta_swaps_have_one_winner,
    exact_n_with_many_workers,
    two_workers_race_for_the_last_claim,
    late_submits_double_submits_and_their_events,
    worker_rules_order_and_gold,
    counts_open_leases_returns_and_reregistering,
    participant_logs_are_listed_apart,
    preference_order_skips_and_the_rest,
    exact_n_with_a_preference_under_concurrency,
    accounts_names_and_removal,
    logins_expire_and_end,
    failed_logins_per_address_and_name,
    lobby_pairs_first_come_first_served,
    lobby_never_pairs_a_participant_or_worker_with_itself,
    lobby_passes_over_waiters_not_heard_lately,
    lobby_concurrent_joiners_never_share_a_waiter,
    lobby_notices_reach_every_instance,
    lobby_reconnect_keeps_its_place,
    lobby_presence_counts_newcomers_and_live_places_once,
    lobby_switches_the_last_waiter_of_a_lasting_surplus,
    instances_race_for_one_room_and_exactly_one_wins,
    expiry_lets_another_instance_take_a_room_and_renewal_keeps_it,
    orphaned_rooms_are_taken_over_once,
);
