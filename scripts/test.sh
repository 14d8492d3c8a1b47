#!/usr/bin/env bash
# The whole test suite: what `make test` and CI run.
#
#   1. host packages the tests need (installed with apt-get when running as root; otherwise listed);
#   2. formatting and lints (rustfmt, clippy with -D warnings);
#   3. cargo test for the whole workspace, with the standard tools required (numactl, hwloc);
#   4. the emulated multi-node guests (numa-vm test): placement, pinning and topology on real multi-node kernels.
#
# Environment: NUMADB_SKIP_GUESTS=1 skips step 4 (for a quick local run); CARGO_TEST_ARGS are passed to cargo test;
# CARGO_INCREMENTAL=1 turns incremental compilation back on.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n== %s\n' "$*"; }

# A whole-suite build (CI, a fresh clone) gains little from incremental caches, and they are about as large as the
# build itself: with them a clean `make test` needed ~8.5 GB of disk, and a CI run once failed on a full disk.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

step "host packages"
scripts/install-deps.sh

step "formatting (cargo fmt --check)"
cargo fmt --all -- --check

step "lints (cargo clippy -D warnings)"
cargo clippy --workspace --all-targets --all-features --locked -- -D warnings

step "tests (cargo test)"
export NUMADB_PYTHON="$PWD/.venv/bin/python"
NUMADB_REQUIRE_TOOLS=1 cargo test --workspace --locked ${CARGO_TEST_ARGS:-}

if [ "${NUMADB_SKIP_GUESTS:-0}" = 1 ]; then
  step "emulated multi-node guests: skipped (NUMADB_SKIP_GUESTS=1)"
else
  step "emulated multi-node guests (numa-vm test)"
  # The harness as `cargo test --workspace` just built it (it has an integration test for that reason): `cargo run
  # -p numa-vm` would unify features for that package alone and compile its dependencies once more.
  "${CARGO_TARGET_DIR:-target}/debug/numa-vm" test
fi

step "all tests passed"
