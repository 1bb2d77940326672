#!/usr/bin/env bash
# The MCP interposer against real MCP peers (tests/mcp): the Python SDK and the TypeScript client
# as agents, server-filesystem, server-everything and a counting server as upstreams, a real
# `countersign serve` and a software-authenticator approver. Peers are pinned:
# tests/mcp/requirements.txt (PyPI) and tests/mcp/package-lock.json (npm ci).
#
# Runs before python.sh (alphabetical), so it builds the Python package itself, in its own venv,
# into the shared target dir: python.sh's build of the same crate then reuses the compiled code.
# Measured 2026-12-03 with a warm cargo target and venv on a heavily loaded 2-core machine: 4 min 27 s
# (npm ci ~20 s, pytest ~2-3 min). Cold, add the package build (minutes on 2 cores) and pip (~30 s).
# The differential test against the real readers (test_differential_readers.py, 3,000 frames in
# front of each of three upstreams, Go's also with a real service) adds ~1.5 min (measured
# 2026-12-05 on the shared 2-core machine, warm: 84 s beside an AFL run, 61 s without the
# real-service pass); it needs Go from Debian (golang-go, 1.19): installed here when missing
# (~30 s once; apt keeps it), its build cache in the target directory.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"

echo "--- the countersign binary the tests launch (service and interposer)"
cargo build -q -p countersign-cli

echo "--- Python: the MCP SDK (pinned) and the package with the test-only software authenticator"
venv=$root/target/mcp-venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check -r tests/mcp/requirements.txt 'maturin>=1.7,<2'
(cd bindings/python && VIRTUAL_ENV=$venv PATH="$venv/bin:$PATH" maturin develop -q --features testing)

echo "--- npm: the TypeScript client and the reference servers (exact versions from the lock file)"
node --version
(cd tests/mcp && npm ci --no-audit --no-fund --loglevel=error)

echo "--- Go (Debian's golang-go): the encoding/json reader of the differential test"
if ! command -v go >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq golang-go >/dev/null
fi
go version
export GOCACHE="$CARGO_TARGET_DIR/go-cache"

echo "--- pytest tests/mcp"
COUNTERSIGN_BIN="$CARGO_TARGET_DIR/debug/countersign" "$venv/bin/python" -m pytest -q -rs tests/mcp

echo "--- countersign demo in front of the reference filesystem server (Node, the pinned peers)"
cargo test -q -p countersign-cli --test it demo:: -- --ignored --skip browser
