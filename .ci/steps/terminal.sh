#!/usr/bin/env bash
# `countersign approve` (approving from the terminal with a FIDO2 security key), two ways:
#
# 1. End to end with the software CTAP2 key: the `testing` feature compiles the hidden
#    `--soft-ctap2-key` flag into the debug binary (never into a release build), and the tests in
#    crates/countersign-cli/tests/it/approve.rs drive the real CTAP2 client against it, a real
#    `countersign serve`, and `countersign verify` offline. Clippy runs over the feature's code too.
#    The software key is checked on its own by Yubico's python-fido2 (pinned, in a venv).
# 2. The USB transport (`--features security-key`) compiles and is lint-clean: it needs libudev-dev (hidraw
#    enumeration) and libclang-dev (bindgen in fido-hid-rs), which a fresh machine lacks. Using it
#    with a real key stays a manual check (docs/OPERATIONS.md, "Approving from the terminal").
set -euo pipefail
cd "$(dirname "$0")/../.."

echo "--- the approve flow against the software CTAP2 key"
cargo clippy -q -p countersign-cli -p countersign-softkey --all-targets --features countersign-cli/testing,countersign-softkey/ctap2 -- -D warnings
cargo test -q -p countersign-softkey --features ctap2 --lib ctap2::
cargo test -q -p countersign-cli --features testing --test it approve::

echo "--- the software CTAP2 key itself, checked by an independent client (Yubico's python-fido2)"
cargo build -q -p countersign-softkey --features ctap2 --example ctap2_stdio
venv=${CARGO_TARGET_DIR:-target}/fido2-venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check 'fido2==2.2.1'
"$venv/bin/python" crates/countersign-softkey/tests/ctap2_fido2.py "${CARGO_TARGET_DIR:-target}/debug/examples/ctap2_stdio"

echo "--- the USB security-key transport builds"
if ! pkg-config --exists libudev || ! ldconfig -p | grep -q "libclang[-.0-9]*\.so"; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends libudev-dev libclang-dev
fi
# clippy, not build: it proves the feature compiles (build scripts and bindgen run) and lints it,
# without a second codegen of the whole CLI.
cargo clippy -q -p countersign-cli --features security-key -- -D warnings
