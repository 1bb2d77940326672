#!/usr/bin/env bash
# The Python package (bindings/python). It is its own Cargo workspace (see its README), so the
# repository's fmt/clippy/test commands do not reach it: this step formats, lints, builds and
# tests it, and checks that `pip install ./bindings/python` builds from source in a fresh venv.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"

echo "--- the service binary the integration tests run, and the conformance runner"
cargo build -q -p countersign-cli -p countersign-conformance

echo "--- format and clippy (the binding's own workspace, test module included)"
(cd bindings/python && cargo fmt --check && cargo clippy -q --all-targets --features testing -- -D warnings)

echo "--- build the package with the test-only software authenticator, run pytest"
venv=$root/target/python-venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check 'maturin>=1.7,<2' 'pytest>=7'
(cd bindings/python && VIRTUAL_ENV=$venv PATH="$venv/bin:$PATH" maturin develop -q --features testing)
COUNTERSIGN_BIN="$CARGO_TARGET_DIR/debug/countersign" "$venv/bin/python" -m pytest -q bindings/python/tests

echo "--- the conformance runner, with the package as its harness"
"$CARGO_TARGET_DIR/debug/countersign-conformance" run \
    --impl "$venv/bin/python bindings/python/harness.py" --junit "$CARGO_TARGET_DIR/conformance-python.xml"

echo "--- pip install ./bindings/python in a fresh virtualenv (from source, nothing else)"
fresh=$root/target/python-fresh-venv
rm -rf "$fresh"
python3 -m venv "$fresh"
"$fresh/bin/pip" install -q --disable-pip-version-check ./bindings/python
"$fresh/bin/python" - <<'PY'
import pathlib, countersign
case = pathlib.Path("fixtures/worked-example/approve-account-a.case.json").read_bytes()
v = countersign.verify_case(case)
assert v.allowed and v.assurance_level == "AAL2", v
if hasattr(countersign._native, "testing"):
    raise SystemExit("the release build must not contain the test-only software authenticator")
print("fresh install:", v)
PY
