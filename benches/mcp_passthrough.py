"""Added latency and throughput of `countersign mcp stdio` and `countersign mcp http` for calls
that pass through (not held).

The same echo server (tests/mcp/peers/raw_echo_server.py: `echo`, allowed by the interposer's
configuration; no SDK, so its own cost stays small) is called over stdio twice: directly, and
through `countersign mcp stdio`. Two clients:

- `raw`: newline-delimited JSON-RPC frames written and read on the pipes by this script, the
  sharpest view of what the relay adds;
- `sdk`: the real Python MCP client (`mcp` 2.3.0), what an agent host built on it sees.

For each client and path it reports

- latency: N sequential `tools/call`s, p50 / p99 / mean in microseconds, after a warm-up;
- throughput: calls per second with C calls in flight at once (the client pipelines them on the
  one stdio connection), over a fixed count of calls.

With `--transport http` the same measurement runs over Streamable HTTP: the echo server is
tests/mcp/peers/raw_echo_http_server.py (POST /mcp, `application/json` answers, keep-alive), called
directly and through `countersign mcp http` (an `[[agents]]` bearer credential, `echo` allowed).
The client (`raw` only) keeps one HTTP/1.1 connection per thread: one for the latency run, C
threads with a connection and a session each for the throughput run.

Added latency = interposer minus direct at the same percentile; throughput ratio = interposer /
direct. The runs alternate (direct, interposer, direct, ...) R times and the medians are reported,
so a noisy neighbour on a shared machine hits both paths alike.

A pass-through call needs no approval, so the service is never contacted on this path; a
`countersign serve` is still started because the interposer's command line requires one (its
gateway token and registry).

Run from the repository root, with the venv that .ci/steps/mcp.sh builds:

    target/mcp-venv/bin/python benches/mcp_passthrough.py [--calls 2000] [--inflight 16] [--rounds 3] \
        [--transport stdio|http] [--http-threads N] [--no-audit]

It needs `target/release/countersign` (`cargo build --release -p countersign-cli`) or
COUNTERSIGN_BIN. It is a benchmark, not a test: it asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import sys
import tempfile
import time
from typing import Optional

import anyio

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "mcp"))
sys.path.insert(0, str(REPO / "bindings" / "python" / "tests"))

from countersign._native import testing  # noqa: E402
from peers.clients import stdio_session  # noqa: E402
from peers.interposer import StdioInterposer  # noqa: E402
from support import Service  # noqa: E402

ECHO_SERVER = REPO / "tests" / "mcp" / "peers" / "raw_echo_server.py"
ECHO_HTTP_SERVER = REPO / "tests" / "mcp" / "peers" / "raw_echo_http_server.py"
PAYLOAD = {"text": "x" * 64}


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


def measure_raw(command: str, args: list[str], env: dict[str, str], calls: int, inflight: int):
    import subprocess

    proc = subprocess.Popen([command, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env={**os.environ, **env}, bufsize=0)
    reader = proc.stdout
    ids = iter(range(1, 10**9))

    def send(method: str, params: dict, notify: bool = False) -> None:
        msg = {"jsonrpc": "2.0", "method": method, "params": params}
        if not notify:
            msg["id"] = next(ids)
        proc.stdin.write((json.dumps(msg) + "\n").encode())

    def receive() -> dict:
        return json.loads(reader.readline())

    send("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                        "clientInfo": {"name": "bench", "version": "1"}})
    receive()
    send("notifications/initialized", {}, notify=True)
    send("tools/list", {})
    receive()
    call = {"name": "echo", "arguments": PAYLOAD}
    for _ in range(200):
        send("tools/call", call)
        receive()
    latencies = []
    for _ in range(calls):
        t0 = time.perf_counter_ns()
        send("tools/call", call)
        answer = receive()
        latencies.append((time.perf_counter_ns() - t0) / 1000)
        assert answer["result"]["content"][0]["text"] == PAYLOAD["text"], answer
    t0 = time.perf_counter()
    for _ in range(inflight):
        send("tools/call", call)
    for sent in range(inflight, calls + inflight):
        receive()
        if sent < calls:
            send("tools/call", call)
    throughput = calls / (time.perf_counter() - t0)
    proc.stdin.close()
    proc.wait()
    return latencies, throughput


def measure_http(url: str, bearer: Optional[str], calls: int, inflight: int):
    """Sequential latency on one connection, then throughput with `inflight` threads, each with its
    own connection and session."""
    import http.client
    import threading
    import urllib.parse

    parsed = urllib.parse.urlsplit(url)

    class Conn:
        def __init__(self) -> None:
            self.c = http.client.HTTPConnection(parsed.hostname, parsed.port)
            self.session: Optional[str] = None
            self.ids = iter(range(1, 10**9))

        def post(self, method: str, params: dict, notify: bool = False) -> Optional[dict]:
            msg = {"jsonrpc": "2.0", "method": method, "params": params}
            if not notify:
                msg["id"] = next(self.ids)
            headers = {"Content-Type": "application/json",
                       "Accept": "application/json, text/event-stream",
                       "MCP-Protocol-Version": "2025-11-25"}
            if bearer:
                headers["Authorization"] = f"Bearer {bearer}"
            if self.session:
                headers["Mcp-Session-Id"] = self.session
            self.c.request("POST", parsed.path, json.dumps(msg), headers)
            r = self.c.getresponse()
            body = r.read()
            if method == "initialize":
                self.session = r.getheader("Mcp-Session-Id")
            assert r.status in (200, 202), (r.status, body)
            return json.loads(body) if body else None

        def open(self) -> None:
            self.post("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                     "clientInfo": {"name": "bench", "version": "1"}})
            self.post("notifications/initialized", {}, notify=True)
            self.post("tools/list", {})

    call = {"name": "echo", "arguments": PAYLOAD}
    conn = Conn()
    conn.open()
    for _ in range(200):
        conn.post("tools/call", call)
    latencies = []
    for _ in range(calls):
        t0 = time.perf_counter_ns()
        answer = conn.post("tools/call", call)
        latencies.append((time.perf_counter_ns() - t0) / 1000)
        assert answer["result"]["content"][0]["text"] == PAYLOAD["text"], answer
    conns = [Conn() for _ in range(inflight)]
    for c in conns:
        c.open()
    share = calls // inflight
    start = threading.Barrier(inflight + 1)

    def worker(c: Conn) -> None:
        start.wait()
        for _ in range(share):
            c.post("tools/call", call)

    threads = [threading.Thread(target=worker, args=(c,)) for c in conns]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    throughput = share * inflight / (time.perf_counter() - t0)
    return latencies, throughput


async def measure_sdk(command: str, args: list[str], env: dict[str, str], calls: int, inflight: int):
    async with stdio_session(command, args, env, errlog=open(os.devnull, "w")) as s:
        await s.list_tools()  # the interposer learns the annotations here, as a real host's would
        for _ in range(200):  # warm-up
            await s.call_tool("echo", PAYLOAD)
        latencies = []
        for _ in range(calls):
            t0 = time.perf_counter_ns()
            r = await s.call_tool("echo", PAYLOAD)
            latencies.append((time.perf_counter_ns() - t0) / 1000)
            assert not r.is_error
        remaining = calls

        async def worker():
            nonlocal remaining
            while remaining > 0:
                remaining -= 1
                await s.call_tool("echo", PAYLOAD)

        t0 = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for _ in range(inflight):
                tg.start_soon(worker)
        throughput = calls / (time.perf_counter() - t0)
    return latencies, throughput


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000, help="calls per latency and per throughput run")
    parser.add_argument("--inflight", type=int, default=16, help="calls in flight in the throughput run")
    parser.add_argument("--rounds", type=int, default=3, help="alternating direct/interposer rounds")
    parser.add_argument("--client", choices=["raw", "sdk"], default="raw")
    parser.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    parser.add_argument("--http-threads", type=int, default=1,
                        help="the interposer's `http_threads` (HTTP mode's worker threads)")
    parser.add_argument("--no-audit", action="store_true",
                        help="run the interposer without its audit log (default: with it, as deployed)")
    opts = parser.parse_args()

    binary = os.environ.get("COUNTERSIGN_BIN") or str(REPO / "target" / "release" / "countersign")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        (tmp / "service").mkdir()
        service = Service(binary, tmp / "service", {"alice@example.com": testing.SoftAuthenticator("alice-es256")})
        service.token_file = tmp / "service" / "gateway-token"
        service.token_file.write_text(service.token + "\n")
        try:
            if opts.transport == "http":
                results = run_http(binary, service, tmp, opts)
            else:
                results = run_stdio(binary, service, tmp, opts)
        finally:
            service.stop()
    report(results, opts, binary)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far (Linux `/proc/PID/stat`)."""
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_http(binary: str, service, tmp: pathlib.Path, opts) -> dict[str, list]:
    import socket
    import subprocess
    import urllib.error
    import urllib.request

    # (peers.servers has these too, but importing it would pick the bindings' conftest.)
    def free_port() -> int:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            return sock.getsockname()[1]

    def wait_http(url: str) -> None:
        end = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(url, timeout=2)
                return
            except urllib.error.HTTPError:
                return
            except OSError:
                if time.monotonic() > end:
                    raise
                time.sleep(0.05)

    token = "bench-agent-bearer-credential"
    port = free_port()
    echo = subprocess.Popen([sys.executable, str(ECHO_HTTP_SERVER), str(port)])
    config = tmp / "mcp-http.toml"
    audit = "" if opts.no_audit else (
        f'audit_log = "{tmp / "mcp-audit.jsonl"}"\naudit_key = "{tmp / "mcp-audit.key"}"\n')
    config.write_text(
        f'rp_id = "{testing.RP_ID}"\norigins = ["{testing.ORIGIN}"]\n'
        f'registry = "{service.dir / "registry.json"}"\nallow = ["echo"]\nhold = ["delete_thing"]\n'
        f'http_threads = {opts.http_threads}\n{audit}\n[[agents]]\nid = "bench"\ntoken = "{token}"\n')
    ip_port = free_port()
    ip = subprocess.Popen([
        binary, "mcp", "http", "--listen", f"127.0.0.1:{ip_port}",
        "--upstream", f"http://127.0.0.1:{port}/mcp", "--service", service.base,
        "--gateway-token-file", str(service.token_file), "--server-id", "echo",
        "--config", str(config)], stderr=subprocess.DEVNULL)
    try:
        wait_http(f"http://127.0.0.1:{port}/mcp")
        wait_http(f"http://127.0.0.1:{ip_port}/mcp")
        paths = {"direct": (f"http://127.0.0.1:{port}/mcp", None),
                 "interposer": (f"http://127.0.0.1:{ip_port}/mcp", token)}
        results: dict[str, list] = {"direct": [], "interposer": []}
        cpu: dict[str, list] = {"interposer_us_per_call": [], "echo_server_us_per_call": []}
        for _ in range(opts.rounds):
            for name, (url, bearer) in paths.items():
                before = (cpu_seconds(ip.pid), cpu_seconds(echo.pid))
                results[name].append(measure_http(url, bearer, opts.calls, opts.inflight))
                if name == "interposer":
                    # Both phases (sequential and in flight) and the warm-up: 2 * calls + 200.
                    n = 2 * opts.calls + 200
                    cpu["interposer_us_per_call"].append((cpu_seconds(ip.pid) - before[0]) / n * 1e6)
                    cpu["echo_server_us_per_call"].append((cpu_seconds(echo.pid) - before[1]) / n * 1e6)
        results["cpu"] = cpu
        return results
    finally:
        ip.kill()
        echo.kill()
        ip.wait()
        echo.wait()


def run_stdio(binary: str, service, tmp: pathlib.Path, opts) -> dict[str, list]:
    env: dict[str, str] = {}
    upstream = [sys.executable, str(ECHO_SERVER)]
    ip = StdioInterposer(binary, service, tmp / "interposer", upstream,
                         settings={"allow": ["echo"], "hold": ["delete_thing"]})
    if opts.no_audit:
        ip.write_config(audit_log=None, audit_key=None)
    paths = {"direct": (upstream[0], upstream[1:]), "interposer": ip.command()}
    results: dict[str, list] = {"direct": [], "interposer": []}
    for _ in range(opts.rounds):
        for name, (command, args) in paths.items():
            if opts.client == "raw":
                results[name].append(measure_raw(command, args, env, opts.calls, opts.inflight))
            else:
                results[name].append(
                    anyio.run(measure_sdk, command, args, env, opts.calls, opts.inflight))
    return results


def report(results: dict[str, list], opts, binary: str) -> None:
    summary = {}
    cpu = results.pop("cpu", None)
    for name, runs in results.items():
        summary[name] = {
            "p50_us": statistics.median(percentile(lat, 50) for lat, _ in runs),
            "p99_us": statistics.median(percentile(lat, 99) for lat, _ in runs),
            "mean_us": statistics.median(statistics.fmean(lat) for lat, _ in runs),
            "calls_per_s": statistics.median(tp for _, tp in runs),
        }
    d, i = summary["direct"], summary["interposer"]
    summary["added"] = {
        "p50_us": i["p50_us"] - d["p50_us"],
        "p99_us": i["p99_us"] - d["p99_us"],
        "throughput_ratio": i["calls_per_s"] / d["calls_per_s"],
    }
    if cpu:
        # CPU time per pass-through call, whatever else shares the machine: the steadier figure.
        summary["cpu"] = {k: round(statistics.median(v), 1) for k, v in cpu.items()}
    summary["setup"] = {"calls": opts.calls, "inflight": opts.inflight, "rounds": opts.rounds,
                        "binary": binary, "transport": opts.transport, "client": opts.client,
                        "audit_log": not opts.no_audit, "http_threads": opts.http_threads,
                        "load_average": os.getloadavg()}
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
