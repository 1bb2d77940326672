#!/usr/bin/env bash
# Conformance suite: vectors current, our library in process on every backend, the CLI through the
# harness protocol, and the independent py_webauthn adapter in its own virtualenv.
set -euo pipefail
cd "$(dirname "$0")/../.."

cargo build -q -p countersign-cli -p countersign-conformance
runner=target/debug/countersign-conformance

echo "--- vectors and worked example are what the generator produces; flag registry closed"
"$runner" check

echo "--- in process, every signature backend"
"$runner" run --junit target/conformance-in-process.xml

echo "--- countersign harness (the CLI, through the JSON-lines protocol)"
"$runner" run --impl 'target/debug/countersign harness' --junit target/conformance-harness.xml

echo "--- py_webauthn adapter (independent verifier)"
venv=target/py_webauthn-venv
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
"$venv/bin/pip" install -q --disable-pip-version-check -r conformance/adapters/py_webauthn/requirements.txt
"$venv/bin/python" -m unittest discover -s conformance/adapters/py_webauthn -p 'test_*.py'
adapter="$venv/bin/python conformance/adapters/py_webauthn/harness.py"
"$runner" run --impl "$adapter" --junit target/conformance-py_webauthn.xml

external=../shared/vectors/webauthn-external.json
if [ -f "$external" ]; then
    echo "--- third-party assertions through py_webauthn"
    $adapter --external "$external"
else
    echo "--- $external absent: skipping the third-party assertions"
fi
