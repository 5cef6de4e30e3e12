//! One test binary for the whole folder: each file is a module. Linking every dependency into
//! one binary instead of one per file keeps a clean build to a fraction of the disk and link time
//! (each binary is 50–150 MB); cargo runs the modules' tests in one process, two at a time on two
//! cores. A new test file goes here as a module, not beside this folder.
//! Browser tests take turns (`browser::run_with`): one set of windows at a time.
//! Every browser test runs in headless Chromium, then in headless Firefox ESR
//! (`browser::run_in_both_browsers`): crowdworkers use both. They need Debian's `chromium`,
//! `chromium-driver` and `firefox-esr`, and geckodriver from crates.io (scripts/test-all.sh
//! installs them), and fail when one is missing unless `WOZKIT_SKIP_E2E=1`.

mod browser;
#[allow(dead_code)] // the browser tests use a part of the API tests' client
#[path = "../api/client.rs"]
mod client;
mod log;
mod proxy;
mod server;
mod sides;
mod worker_site;

mod arena;
mod console;
mod copilot;
mod database;
mod desk;
mod eval;
mod goals;
mod keyboard;
mod launch;
mod phone;
mod self_dialog;
mod session;
