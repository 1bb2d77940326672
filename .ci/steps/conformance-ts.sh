#!/usr/bin/env bash
# Conformance for assessors: the TypeScript harness on @simplewebauthn/server, the declared-only
# baseline, every generated file against conformance/schema/, and the side-by-side report.
#
# npm packages come from the committed package-lock.json files (`npm ci`: exact versions and
# integrity hashes). Every harness is run again and must reproduce its committed baseline byte for
# byte, and the committed report must be exactly what `countersign-conformance report` writes from
# those baselines: any drift fails the build, so the published report is always the current one.
set -euo pipefail
cd "$(dirname "$0")/../.."

cargo build -q -p countersign-cli -p countersign-conformance
runner=target/debug/countersign-conformance
out=target/conformance-ts
mkdir -p "$out"
node --version

echo "--- npm ci (pinned by package-lock.json): the TypeScript harness and the schema validator"
units="$PWD/$out/simplewebauthn-units.tap"
(cd conformance/adapters/simplewebauthn && npm ci --no-audit --no-fund --loglevel=error \
    && { npm test --silent >"$units" 2>&1 || { cat "$units"; exit 1; }; })
grep -E '^# (pass|fail)' "$units"
(cd conformance/schema && npm ci --no-audit --no-fund --loglevel=error)

echo "--- schemas: their own tests, then every generated file"
node conformance/schema/selftest.mjs
node conformance/schema/validate.mjs

venv=target/py_webauthn-venv
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
"$venv/bin/pip" install -q --disable-pip-version-check -r conformance/adapters/py_webauthn/requirements.txt

echo "--- every bundled harness's hello line against the protocol schema"
for harness in 'target/debug/countersign harness' \
    "$venv/bin/python conformance/adapters/py_webauthn/harness.py" \
    'node conformance/adapters/simplewebauthn/dist/harness.js' \
    'python3 conformance/adapters/declared_only/harness.py'; do
    node conformance/schema/validate.mjs --hello "$harness"
done

drift=0
# run NAME MUST_PASS [runner options...]: run, keep the output under target/, compare the baseline.
run() {
    local name=$1 must_pass=$2 status=0
    shift 2
    "$runner" run "$@" --baseline "$out/$name.json" --junit "$out/$name.xml" >"$out/$name.txt" || status=$?
    printf '%-24s %s\n' "$name" "$(tail -n1 "$out/$name.txt")"
    if [ "$must_pass" = yes ] && [ "$status" -ne 0 ]; then
        grep '^FAIL' "$out/$name.txt" || true
        echo "$name: vectors failed"
        drift=1
    fi
    if ! cmp -s "$out/$name.json" "conformance/baselines/$name.json"; then
        diff -u "conformance/baselines/$name.json" "$out/$name.json" | head -n 40 || true
        echo "$name: the committed baseline is stale (refresh it: see conformance/README.md)"
        drift=1
    fi
}

echo "--- every harness of the report, against its committed baseline"
run countersign-rustcrypto yes --backend rustcrypto
run countersign-ring yes --backend ring
run countersign-harness yes --impl 'target/debug/countersign harness'
run py_webauthn yes --impl "$venv/bin/python conformance/adapters/py_webauthn/harness.py"
run simplewebauthn yes --impl 'node conformance/adapters/simplewebauthn/dist/harness.js'
# The declared-only baseline fails by design: its baseline is the check.
run declared-only no --impl 'python3 conformance/adapters/declared_only/harness.py'

echo "--- the example harness of conformance/README.md still speaks the protocol"
awk '/^```python$/{f=1;next} /^```$/{f=0} f' conformance/README.md >"$out/example_harness.py"
status=0
"$runner" run --impl "python3 $out/example_harness.py" >"$out/example.txt" || status=$?
tail -n1 "$out/example.txt"
# It fails strict-admission vectors by design (exit 1); exit 2 means the protocol broke.
if [ "$status" -gt 1 ]; then
    echo "the README's example harness no longer runs"
    drift=1
fi

echo "--- the committed report is what the baselines give"
"$runner" report --check || drift=1

exit "$drift"
