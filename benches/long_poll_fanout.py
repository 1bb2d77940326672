#!/usr/bin/env python3
"""Does a settlement disturb long polls on other approvals? (issue 10, section 3)

Starts `countersign serve` (the binary given), creates N+1 pending approvals, holds N idle
`?wait=30` long polls on N of them, then times withdrawals of other, unrelated approvals: with
per-approval wake-ups their latency does not depend on N. Prints the median and p90 of the
withdrawal latency without polls and with N polls. Standard library only.

    python3 benches/long_poll_fanout.py target/release/countersign [N] [WITHDRAWALS]

Set FANOUT_NO_LIMITS=1 for a binary that predates the `[limits]` configuration table.
"""
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


async def request(host, port, method, path, body=None):
    reader, writer = await asyncio.open_connection(host, port)
    data = b"" if body is None else json.dumps(body).encode()
    head = f"{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n"
    if body is not None:
        head += f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n"
    writer.write(head.encode() + b"\r\n" + data)
    await writer.drain()
    raw = await reader.read()
    writer.close()
    status = int(raw.split(b" ", 2)[1])
    return status, raw.split(b"\r\n\r\n", 1)[1]


async def create(host, port, n):
    body = {"agent_id": "bench", "tool_name": "t", "params": {"n": str(n)}}
    status, text = await request(host, port, "POST", "/v1/approvals", body)
    assert status == 200, text
    return json.loads(text)["approval_id"]


async def withdrawals(host, port, ids):
    out = []
    for i in ids:
        t = time.perf_counter()
        status, text = await request(host, port, "POST", f"/v1/approvals/{i}/withdraw", {})
        out.append((time.perf_counter() - t) * 1000)
        assert status == 200, text
    return out


def summary(ms):
    ms = sorted(ms)
    return f"median {statistics.median(ms):.1f} ms, p90 {ms[int(len(ms) * 0.9)]:.1f} ms"


async def main():
    binary = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 1500
    w = int(sys.argv[3]) if len(sys.argv) > 3 else 50
    data = tempfile.mkdtemp(prefix="countersign-fanout-")
    # One enrolled approver (the worked example's alice), so requests stay PENDING.
    here = os.path.dirname(os.path.abspath(__file__))
    case = os.path.join(here, "..", "fixtures", "worked-example", "approve-account-a.case.json")
    registry = os.path.join(data, "registry.json")
    with open(case) as src, open(registry, "w") as f:
        json.dump(json.load(src)["registry"], f)
    config = os.path.join(data, "config.toml")
    with open(config, "w") as f:
        f.write(f'registry = "{registry}"\n')
        if not os.environ.get("FANOUT_NO_LIMITS"):
            # A poll cap above N, so every poll waits (the service default is 1024).
            f.write("[limits]\nlong_poll_waiters = 100000\n")
    args = [binary, "serve", "--listen", "127.0.0.1:0", "--data-dir", data, "--config", config]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    first = proc.stdout.readline().strip()
    host, port = first.rsplit("http://", 1)[1].split(":")
    port = int(port)
    try:
        ids = [await create(host, port, i) for i in range(n + 2 * w)]
        baseline = await withdrawals(host, port, ids[n:n + w])
        polls = [
            asyncio.create_task(request(host, port, "GET", f"/v1/approvals/{i}?wait=30"))
            for i in ids[:n]
        ]
        await asyncio.sleep(3)  # let every poll register
        loaded = await withdrawals(host, port, ids[n + w:n + 2 * w])
        for p in polls:
            p.cancel()
        print(f"{binary}: {n} idle polls")
        print(f"  withdrawal, no polls:   {summary(baseline)}")
        print(f"  withdrawal, {n} polls: {summary(loaded)}")
    finally:
        proc.terminate()
        proc.wait()


asyncio.run(main())
