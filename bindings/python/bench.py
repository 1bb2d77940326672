#!/usr/bin/env python3
"""countersign.verify_evidence from Python, beside py_webauthn and the Rust core, in one run.

One ES256 approval of a tool call against a 10,000-credential registry: the Rust benchmark's
hot-path fixture (`countersign_testkit::hot_path`), so the Python call and the Rust call verify the
same bytes. py_webauthn's `verify_authentication_response` runs on an assertion of the same shape
(benches/py_webauthn_verify.py): 64-byte challenge, Chrome-shaped clientDataJSON, UP|UV.

    # a release build with the fixture module, py_webauthn beside it
    python3 -m venv target/bench-venv
    target/bench-venv/bin/pip install maturin webauthn==3.0.1 cryptography
    (cd bindings/python && VIRTUAL_ENV=$PWD/../../target/bench-venv \
        ../../target/bench-venv/bin/maturin develop --release --features testing)
    target/bench-venv/bin/python bindings/python/bench.py [--rust]

The Rust figure is the same call in Rust, in the same process and the same release build:
`countersign._native.testing.rust_verify_seconds` runs `verify_evidence_with` on the same fixture
with the criterion benchmark's non-recording replay state. Contenders are timed in interleaved
rounds so they see the same machine load; the figures are medians over rounds. `--rust` also runs
the criterion benchmark (`cargo bench -p countersign --features ring --bench verify --
ES256/verify_evidence/ring`). Threads: verifications per second with 1 and 2 threads, beside the
same for the pure-Rust loop (GIL released throughout) as the control for what the machine allows.
"""

import argparse
import importlib.util
import os
import pathlib
import re
import statistics
import subprocess
import threading
import time
import timeit

import countersign
from countersign._native import testing

REPO = pathlib.Path(__file__).resolve().parents[2]


def median_us(fn, number, repeat=7):
    times = timeit.repeat(fn, number=number, repeat=repeat)
    return statistics.median(times) / number * 1e6


def countersign_calls():
    fx = testing.hot_path()
    action = countersign.Action(fx["profile"], fx["fields"])
    result = countersign.ApprovalResult.from_json(fx["result"])
    registry = countersign.Registry.from_json(fx["registry"])
    policy = countersign.Policy.from_json(fx["policy"])
    now = fx["now"]
    memory = countersign.ReplayState.memory

    def parsed():
        # A fresh state per call, like the Rust benchmark's `Forgetful`: the same evidence
        # verifies again and again, and the state's lookups and commit still run.
        v = countersign.verify_evidence(action, result, registry, policy, memory(), now)
        assert v.allowed

    text = fx["result"]

    def from_text():
        v = countersign.verify_evidence(action, text, registry, policy, memory(), now)
        assert v.allowed

    parsed()
    from_text()
    return parsed, from_text


def py_webauthn_call():
    spec = importlib.util.spec_from_file_location(
        "py_webauthn_verify", REPO / "benches" / "py_webauthn_verify.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    from cryptography.hazmat.primitives.asymmetric import ec
    from webauthn import verify_authentication_response

    key = ec.generate_private_key(ec.SECP256R1())
    rp_id, origin = "example.org", "https://example.org"
    challenge = os.urandom(64)
    credential = mod.assertion(key, rp_id, origin, challenge)
    public = mod.cose_key(key.public_key())

    def once():
        verify_authentication_response(
            credential=credential,
            expected_challenge=challenge,
            expected_rp_id=rp_id,
            expected_origin=origin,
            credential_public_key=public,
            credential_current_sign_count=0,
            require_user_verification=True,
        )

    once()
    return once


def rust_median_us():
    out = subprocess.run(
        ["cargo", "bench", "-q", "-p", "countersign", "--features", "ring", "--bench", "verify",
         "--", "ES256/verify_evidence/ring", "--noplot"],
        cwd=REPO, capture_output=True, text=True, check=True,
    ).stdout
    m = re.search(r"time:\s+\[\S+ \S+ (\S+) (\S+) \S+ \S+\]", out)
    if not m:
        raise SystemExit(f"no criterion figure in:\n{out}")
    value, unit = float(m.group(1)), m.group(2)
    return value * {"ns": 1e-3, "µs": 1.0, "us": 1.0, "ms": 1e3}[unit]


def throughput(fn, threads, total):
    """Verifications per second with `threads` threads sharing `total` calls of `fn(n)`."""
    per = total // threads
    pool = [threading.Thread(target=fn, args=(per,)) for _ in range(threads)]
    start = time.perf_counter()
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return per * threads / (time.perf_counter() - start)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rust", action="store_true", help="also run the Rust criterion benchmark")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--batch", type=int, default=300)
    args = ap.parse_args()
    print(f"countersign backend: {countersign.BACKEND}; {os.cpu_count()} CPUs; "
          f"load average {os.getloadavg()[0]:.2f}")
    criterion = rust_median_us() if args.rust else None
    parsed, from_text = countersign_calls()
    webauthn = py_webauthn_call()

    def rust(n):
        return testing.rust_verify_seconds(n) * 1e6

    def timed(fn, n):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        return (time.perf_counter() - start) / n * 1e6

    # Interleaved rounds: every contender sees the same load; medians over rounds.
    rows = {"py": [], "text": [], "rust": [], "webauthn": [], "ratio": []}
    for _ in range(args.rounds):
        r = rust(args.batch)
        p = timed(parsed, args.batch)
        rows["rust"].append(r)
        rows["py"].append(p)
        rows["ratio"].append(p / r)
        rows["text"].append(timed(from_text, args.batch))
        rows["webauthn"].append(timed(webauthn, args.batch))
    med = {k: statistics.median(v) for k, v in rows.items()}
    print(f"countersign.verify_evidence (parsed result)   {med['py']:8.1f} us")
    print(f"countersign.verify_evidence (result as text)  {med['text']:8.1f} us")
    print(f"Rust verify_evidence_with, same fixture       {med['rust']:8.1f} us   "
          f"-> Python call / Rust call = {med['ratio']:.2f} (median of per-round ratios)")
    print(f"py_webauthn verify_authentication_response    {med['webauthn']:8.1f} us   "
          f"-> countersign is {med['webauthn'] / med['py']:.2f}x faster")
    if criterion is not None:
        print(f"Rust criterion median (cargo bench)           {criterion:8.1f} us")

    def py_loop(n):
        for _ in range(n):
            parsed()

    def rust_loop(n):
        testing.rust_verify_seconds(n)

    total = 20 * args.batch
    for name, fn in (("Python verify_evidence", py_loop), ("Rust loop (control)", rust_loop)):
        one, two = throughput(fn, 1, total), throughput(fn, 2, total)
        print(f"threads, {name}: 1 -> {one:,.0f}/s, 2 -> {two:,.0f}/s ({two / one:.2f}x)")
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
