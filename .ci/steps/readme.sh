#!/usr/bin/env bash
# README.md runs as written: every ```sh block in order, on a port the system picks (not 8080), in
# a scratch directory, each command held to what its comment says (exit code, words in its output,
# files it writes). The test is crates/countersign-cli/tests/it/readme.rs, part of the workspace's
# tests too; this step runs it alone with each command shown, reusing the workspace's debug build.
#
# A block the test must not run carries, on the line before its fence, the marker
#   <!-- readme-test: skip (the reason) -->
# A new command in a run block needs its expectation in EXPECTED in that file (the test fails
# until it has one).
set -euo pipefail
cd "$(dirname "$0")/../.."
# --workspace, as the test step builds it: with `-p countersign-cli` alone Cargo would resolve
# features for that package only and rebuild dependencies.
cargo test --workspace --test it readme:: -- --nocapture
