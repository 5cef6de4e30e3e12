//! Server tests: the real app on 127.0.0.1:0 with a fresh data directory per test, driven over
//! HTTP and by scripted WebSocket participants. One binary, one module per feature.

mod client;
mod cluster;
mod helpers;

mod access_matrix;
mod accounts;
mod chat;
mod console;
mod crash;
mod database;
mod endings;
mod evaluation;
mod evaluation_from_store;
mod full_disk;
mod goals;
mod hostile;
mod human;
mod instances;
mod launch;
mod lobby;
mod metrics;
mod mturk;
mod new_room_lease;
mod observe;
mod pairing;
mod participant_text;
mod payments;
mod pg_restart;
mod prolific_return;
mod questions;
mod reconnect;
mod relay;
mod replay;
mod researcher;
mod restart;
mod review;
mod review_platforms;
mod scenario;
mod security;
mod self_dialog;
mod shared_lobby;
mod simulated_user;
mod survey;
mod test_sessions;
mod turn_acts;
