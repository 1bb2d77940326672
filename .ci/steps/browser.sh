#!/usr/bin/env bash
# The approver page end to end in a real browser: Debian's Chromium and chromedriver with a
# virtual WebAuthn authenticator. Installs both (a fresh machine has neither), then runs the test
# with COUNTERSIGN_REQUIRE_BROWSER=1 so a missing browser fails instead of skipping.
# Screenshots and the verified CASE files land in $CARGO_TARGET_DIR/e2e-artifacts/ (target/ by default).
set -euo pipefail
cd "$(dirname "$0")/../.."

if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends chromium chromium-driver
fi
/usr/bin/chromium --version
/usr/bin/chromedriver --version

COUNTERSIGN_REQUIRE_BROWSER=1 cargo test -p countersign-cli --test it browser:: -- --nocapture
ls -1 "${CARGO_TARGET_DIR:-target}/e2e-artifacts/"
