#!/usr/bin/env bash
# Runs every test of wozkit on a fresh machine: installs what is missing (Chromium, ChromeDriver,
# Firefox ESR, PostgreSQL, Python 3, nginx, OpenSSL) from Debian's packages and geckodriver from
# crates.io, starts a throwaway PostgreSQL server, then runs formatting,
# lints, the unit/property/integration tests on both stores, the end-to-end browser test, and the
# study checks (validate + 10,000 simulated sessions of each built-in study).
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v chromedriver >/dev/null 2>&1 || need+=(chromium-driver)
# The browser tests that run in Firefox too (crates/wozkit-server/tests/e2e/session.rs, keyboard.rs,
# database.rs, desk.rs, eval.rs, goals.rs, arena.rs, self_dialog.rs).
command -v firefox-esr >/dev/null 2>&1 || command -v firefox >/dev/null 2>&1 || need+=(firefox-esr)
# The example dialogue system (examples/python_bot) and the study checks run Python 3.
command -v python3 >/dev/null 2>&1 || need+=(python3)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || need+=(nginx-light)
# The test behind nginx with TLS (crates/wozkit-server/tests/e2e/launch.rs) makes its certificate.
command -v openssl >/dev/null 2>&1 || need+=(openssl)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

# Firefox's WebDriver is not packaged by Debian: geckodriver from crates.io, built once into
# cargo's bin folder (the browser tests look there too).
if ! command -v geckodriver >/dev/null 2>&1 && [ ! -x "${CARGO_HOME:-$HOME/.cargo}/bin/geckodriver" ]; then
  echo "installing: geckodriver (cargo install)"
  cargo install --locked geckodriver@0.37.1
fi

if [ -x .ci/start-postgres.sh ]; then
  pg_env=$(.ci/start-postgres.sh)
  eval "export $pg_env"
  # A server was started: every PostgreSQL test must run on it, and fails (not skips) without it.
  export WOZKIT_TEST_PG_REQUIRED=1
  echo "PostgreSQL for tests: ${WOZKIT_TEST_PG_URL:-not started}"
fi

# The full-corpus tests (round trips on whole dataset files, published figures) read
# ../shared/corpora when it is beside the checkout, as in CI; there they must run, not skip. On a
# clone alone they are skipped, each with a line saying so, and the excerpts in
# crates/wozkit-data/tests/fixtures/ are tested instead.
if [ -d ../shared/corpora ]; then
  export WOZKIT_CORPORA="$(cd ../shared/corpora && pwd)" WOZKIT_REQUIRE_CORPORA=1
  echo "full-corpus tests: on ($WOZKIT_CORPORA)"
else
  echo "full-corpus tests: SKIPPED (no ../shared/corpora beside the checkout; fixtures only)"
fi

# A clean clone builds every test binary from scratch, where incremental compilation only costs
# disk (several GB) and time; CARGO_INCREMENTAL=1 in the environment keeps it.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
# The build needs about 6 GB: 3 GB for the tests (about 25 test binaries: each crate's
# integration tests are one binary, see crates/*/tests/suite/main.rs) and 2.5 GB for the
# release binary. A full disk shows up as a linker crash ("Bus error") or "No space left on
# device", so say how much there is before starting.
build_dir="${CARGO_TARGET_DIR:-target}"
mkdir -p "$build_dir"
free_gb=$(df -Pk "$build_dir" | awk 'NR==2 { printf "%d", $4 / 1048576 }')
echo "disk: ${free_gb} GB free where the build goes ($build_dir)"
if [ "$free_gb" -lt 8 ]; then
  echo "warning: under 8 GB free; the build may fail with a linker error when the disk fills" >&2
fi

cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
cargo test --workspace
cargo build --release -p wozkit
# The binary as cargo built it (CARGO_TARGET_DIR may put it elsewhere); a failure to list the
# studies stops the script here instead of looping over nothing.
target="${CARGO_TARGET_DIR:-target}"
wozkit="$target/release/wozkit"
studies=$("$wozkit" studies)
[ -n "$studies" ] || { echo "wozkit studies listed nothing" >&2; exit 1; }
for study in $(echo "$studies" | awk '{print $1}'); do
  "$wozkit" validate "$study"
done
# Only studies with a dialogue room have dialogue states to simulate; evaluation studies are
# exercised by the crowd test (`crates/wozkit/tests/suite/crowd.rs`).
for study in $(echo "$studies" | awk '$2 == "dialogue" {print $1}'); do
  "$wozkit" simulate "$study" --sessions 10000 --seed 7 --json > "$target/sim-$study.json"
  python3 - "$target/sim-$study.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"{r['study']}: {r['sessions']} sessions, goal {r['goal_reached']}, states {r['states_covered']}/{r['states_total']}, transitions {r['transitions_covered']}/{r['transitions_total']}, dead ends {r['dead_ends']}")
assert r['states_covered'] == r['states_total'], f"states never reached: {r['uncovered_states']}"
assert not r['dead_ends'], f"dead ends: {r['dead_ends']}"
PY
done
echo "all tests passed"
