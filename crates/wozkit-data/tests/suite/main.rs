//! One test binary for the whole folder: each file is a module. Linking every dependency into
//! one binary instead of one per file keeps a clean build to a fraction of the disk and link time
//! (each binary is 50–150 MB); cargo runs the modules' tests in one process, two at a time on two
//! cores. A new test file goes here as a module, not beside this folder.

#[path = "../common/mod.rs"]
mod common;

mod acts;
mod agreement;
mod arena;
mod dataset_mappings;
mod errors;
mod foreign;
mod goal_exports;
mod judgments;
mod live_exports;
mod live_splits;
mod model_judges;
mod report_goal_scores;
mod report_reverse;
mod report_scenario;
mod roundtrip;
mod scenario_exports;
mod self_dialogs;
mod stats_golden;
mod store_report;
mod store_roundtrip;
mod test_sessions;
