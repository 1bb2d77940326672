#!/usr/bin/env bash
# The AuthZEN ARAP door (issue 29 §3): the service's approval.state JWS verified by Python's
# joserfc, a JOSE library Countersign does not use, against the JWK Set the PDP discovers from
# the service's metadata (crates/countersign-server/tests/arap_verify.py).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"

venv=$CARGO_TARGET_DIR/arap-venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check 'joserfc==1.6.5'
ARAP_PYTHON="$venv/bin/python" cargo test -p countersign-server --test it arap:: -- --include-ignored
