#!/usr/bin/env bash
# The approver page end to end in a real browser: Debian's Chromium and chromedriver with a
# virtual WebAuthn authenticator. Installs both (a fresh machine has neither), then runs the test,
# which a plain `cargo test` lists as ignored for want of a browser (here a missing one fails it).
# The walk runs twice, in a desktop window and on a 360x740 phone (Chromium mobile emulation).
# Screenshots (phone- for the phone) and the verified CASE files land in
# $CARGO_TARGET_DIR/e2e-artifacts/ (target/ by default).
set -euo pipefail
cd "$(dirname "$0")/../.."

if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends chromium chromium-driver
fi
/usr/bin/chromium --version
/usr/bin/chromedriver --version

cargo test -p countersign-cli --test it browser:: -- --include-ignored --nocapture
ls -1 "${CARGO_TARGET_DIR:-target}/e2e-artifacts/"
