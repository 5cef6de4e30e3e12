//! One test binary for the whole folder: each file is a module. Linking every dependency into
//! one binary instead of one per file keeps a clean build to a fraction of the disk and link time
//! (each binary is 50–150 MB); cargo runs the modules' tests in one process, two at a time on two
//! cores. A new test file goes here as a module, not beside this folder.

#[path = "../common/annotated.rs"]
mod annotated;
#[path = "../common/mod.rs"]
mod common;
#[path = "../common/play.rs"]
mod play;

mod acts_export;
mod backup_while_serving;
mod cli;
mod crash;
mod crosswoz_live;
mod crowd;
mod crowd_arena;
mod data_while_serving;
mod eval_from_store;
mod failover;
mod judge;
mod mapping_export;
mod mturk_pay;
mod pg_data;
mod priors;
mod prolific_create;
mod prolific_pay;
mod report_study;
mod researchers;
mod self_dialog_export;
mod simulate_users;
