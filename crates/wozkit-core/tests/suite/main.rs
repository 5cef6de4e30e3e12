//! One test binary for the whole folder: each file is a module. Linking every dependency into
//! one binary instead of one per file keeps a clean build to a fraction of the disk and link time
//! (each binary is 50–150 MB); cargo runs the modules' tests in one process, two at a time on two
//! cores. A new test file goes here as a module, not beside this folder.

#[path = "../common/mod.rs"]
mod common;

mod action_guards;
mod builtin_eval;
mod copilot;
mod database;
mod database_studies;
mod dataset_mappings;
mod default_words;
mod engine;
mod from_store;
mod goal_score;
mod goals;
mod human;
mod judges;
mod live_eval;
mod loader;
mod prolific_codes;
mod props;
mod questions;
mod scenario;
mod self_dialog;
mod simulated_users;
mod turn_acts;
