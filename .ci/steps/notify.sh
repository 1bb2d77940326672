#!/usr/bin/env bash
# Notification channels against real receivers and the official payload libraries. The Rust
# tests that need something external are `#[ignore]`d with the reason; here they run
# (`--include-ignored`) and a missing dependency fails them:
# - e-mail: a real SMTP server, Python's aiosmtpd (pinned in tests/notify-payloads/
#   requirements.txt, in its own venv), over STARTTLS and implicit TLS with AUTH;
# - exactly once across two replicas on one PostgreSQL (started as postgres.sh does, if needed);
# - the Slack and Teams bodies the service actually delivered in the test, checked with
#   Microsoft's `adaptivecards` parser and Slack's `@slack/types` under `tsc --strict`
#   (tests/notify-payloads, exact versions from package-lock.json, `npm ci`).
# Cold (venv, npm ci, a warm cargo target): about a minute.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"

echo "--- Python: aiosmtpd (pinned)"
venv=$CARGO_TARGET_DIR/notify-venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check -r tests/notify-payloads/requirements.txt

echo "--- npm: adaptivecards, @slack/types, typescript (exact versions from the lock file)"
(cd tests/notify-payloads && npm ci --no-audit --no-fund --silent)

. .ci/lib/postgres.sh

echo "--- the notification tests, the ignored ones included"
payloads=$CARGO_TARGET_DIR/notify-payloads
rm -rf "$payloads"
COUNTERSIGN_TEST_POSTGRES="$url" \
COUNTERSIGN_AIOSMTPD_PYTHON="$venv/bin/python" \
COUNTERSIGN_NOTIFY_PAYLOADS="$payloads" \
    cargo test -q -p countersign-server --test it notify:: -- --include-ignored

echo "--- the delivered Slack and Teams payloads, checked with the official libraries"
node tests/notify-payloads/validate.mjs "$payloads"
