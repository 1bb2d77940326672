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
    target/bench-venv/bin/python bindings/python/bench.py --callgrind 200   # busy machine

The Rust figure is the same call in Rust, in the same process and the same release build:
`countersign._native.testing.rust_verify_seconds` runs `verify_evidence_with` on the same fixture
with the criterion benchmark's non-recording replay state. Contenders are timed in interleaved
rounds so they see the same machine load; the figures are medians over rounds. `--rust` also runs
the criterion benchmark (`cargo bench -p countersign --features ring --bench verify --
ES256/verify_evidence/ring`). Threads: verifications per second with 1 and 2 threads, beside the
same for the pure-Rust loop (GIL released throughout) as the control for what the machine allows.

Beside the full calls, the signature alone: ring's verify on the fixture's signed bytes
(`rust_raw_verify_seconds`) and OpenSSL's through `cryptography`, the floor under each side.
`--callgrind N` counts instructions per call instead of timing (valgrind; immune to load).
"""

import argparse
import importlib.util
import os
import pathlib
import re
import statistics
import subprocess
import sys
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


def openssl_raw_call():
    """OpenSSL's ES256 verify alone, through `cryptography` (what py_webauthn calls in the end),
    on a message of the assertion's shape: 37 bytes of authenticatorData || SHA-256(clientData)."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    public = key.public_key()
    signed = os.urandom(69)
    sig = key.sign(signed, ec.ECDSA(hashes.SHA256()))
    algorithm = ec.ECDSA(hashes.SHA256())

    def once():
        public.verify(sig, signed, algorithm)

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


CONTENDERS = ("countersign", "countersign_text", "rust", "rust_raw", "py_webauthn", "openssl_raw")


def run_contender(name, n):
    """Set every contender up (so every run pays the same setup), then run one of them n times."""
    parsed, from_text = countersign_calls()
    calls = {
        "countersign": parsed,
        "countersign_text": from_text,
        "py_webauthn": py_webauthn_call(),
        "openssl_raw": openssl_raw_call(),
    }
    if name == "rust":
        testing.rust_verify_seconds(n)
    elif name == "rust_raw":
        testing.rust_raw_verify_seconds(n)
    else:
        fn = calls[name]
        for _ in range(n):
            fn()


def callgrind(n):
    """Instructions per call of every contender, counted by callgrind: immune to the machine's
    load, unlike the wall clock. Each contender runs twice, 0 and n calls; the difference / n is
    its cost per call (setup, imports and the interpreter's start cancel out)."""
    def refs(name, calls):
        out = subprocess.run(
            ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
             __file__, "--count", name, str(calls)],
            capture_output=True, text=True, check=True,
        ).stderr
        m = re.search(r"refs:\s+([\d,]+)", out)
        if not m:
            raise SystemExit(f"no instruction count in:\n{out}")
        return int(m.group(1).replace(",", ""))

    # Setup is the same for every contender, except that the Rust loops build their own fixture:
    # one baseline for each kind. The runs are independent: two at a time.
    from concurrent.futures import ThreadPoolExecutor

    jobs = [("countersign", 0), ("rust", 0)] + [(name, n) for name in CONTENDERS]
    with ThreadPoolExecutor(max_workers=2) as pool:
        counted = dict(zip(jobs, pool.map(lambda j: refs(*j), jobs)))
    base = {name: counted[("rust", 0)] if name.startswith("rust") else counted[("countersign", 0)]
            for name in CONTENDERS}
    per = {name: (counted[(name, n)] - base[name]) / n for name in CONTENDERS}
    for name in CONTENDERS:
        print(f"{name:18} {per[name]:12,.0f} instructions per call")
    print(f"py_webauthn / countersign          = {per['py_webauthn'] / per['countersign']:.2f}")
    print(f"countersign / Rust call            = {per['countersign'] / per['rust']:.2f}")
    print(f"signature share of the Python call = {per['rust_raw'] / per['countersign']:.0%}")
    print(f"ceiling (py_webauthn / raw verify) = {per['py_webauthn'] / per['rust_raw']:.2f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", nargs=2, metavar=("CONTENDER", "N"),
                    help="run one contender N times and exit (what --callgrind measures)")
    ap.add_argument("--callgrind", type=int, metavar="N",
                    help="count instructions per call of every contender with valgrind, N calls")
    ap.add_argument("--rust", action="store_true", help="also run the Rust criterion benchmark")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--batch", type=int, default=300)
    args = ap.parse_args()
    if args.count:
        run_contender(args.count[0], int(args.count[1]))
        return
    if args.callgrind:
        callgrind(args.callgrind)
        return
    print(f"countersign backend: {countersign.BACKEND}; {os.cpu_count()} CPUs; "
          f"load average {os.getloadavg()[0]:.2f}")
    criterion = rust_median_us() if args.rust else None
    parsed, from_text = countersign_calls()
    webauthn = py_webauthn_call()
    openssl = openssl_raw_call()

    def rust(n):
        return testing.rust_verify_seconds(n) * 1e6

    def rust_raw(n):
        return testing.rust_raw_verify_seconds(n) * 1e6

    def timed(fn, n):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        return (time.perf_counter() - start) / n * 1e6

    # Interleaved rounds: every contender sees the same load; medians over rounds.
    rows = {"py": [], "text": [], "rust": [], "webauthn": [], "ratio": [], "raw": [],
            "openssl": []}
    for _ in range(args.rounds):
        r = rust(args.batch)
        p = timed(parsed, args.batch)
        rows["rust"].append(r)
        rows["py"].append(p)
        rows["ratio"].append(p / r)
        rows["text"].append(timed(from_text, args.batch))
        rows["webauthn"].append(timed(webauthn, args.batch))
        rows["raw"].append(rust_raw(args.batch))
        rows["openssl"].append(timed(openssl, args.batch))
    med = {k: statistics.median(v) for k, v in rows.items()}
    print(f"countersign.verify_evidence (parsed result)   {med['py']:8.1f} us")
    print(f"countersign.verify_evidence (result as text)  {med['text']:8.1f} us")
    print(f"Rust verify_evidence_with, same fixture       {med['rust']:8.1f} us   "
          f"-> Python call / Rust call = {med['ratio']:.2f} (median of per-round ratios)")
    print(f"py_webauthn verify_authentication_response    {med['webauthn']:8.1f} us   "
          f"-> countersign is {med['webauthn'] / med['py']:.2f}x faster")
    # The floor: the signature alone, on each side. No amount of work around the signature can
    # take countersign below its backend's verify, so py_webauthn / raw verify bounds the ratio.
    print(f"  of which the signature alone ({countersign.BACKEND}, raw verify)  {med['raw']:8.1f} us   "
          f"-> {med['raw'] / med['py']:.0%} of the Python call; ceiling "
          f"{med['webauthn'] / med['raw']:.2f}x if everything else cost nothing")
    print(f"OpenSSL ES256 verify alone (cryptography)    {med['openssl']:8.1f} us   "
          f"-> py_webauthn spends {med['webauthn'] - med['openssl']:.1f} us around it")
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
