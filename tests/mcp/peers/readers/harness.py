"""Running corpus frames through `countersign mcp stdio` in front of one real reader, and reading
back what reached the reader and what it executed (test_differential_readers.py).

One run is one interposer and one upstream: the handshake (initialize, initialized, tools/list, so
the interposer knows `read_file` is listed and allowed), then the cases' bytes streamed as the
client, then an allowed `read_file` call marked "end". The run is over once the end call was
executed and nothing more arrived for a second, or the interposer exited (bytes that are not UTF-8
end its session).

The service is either one the interposer cannot reach (a closed port on 127.0.0.1: every held
call is refused when its approval cannot be asked for) or a real `countersign serve` with an
enrolled approver who never answers (every held call gets a pending approval and a ticket). No
approval is ever given here either way: a held call that runs got past the hold unjudged. Between
the interposer and the upstream a `tee` keeps every byte the upstream was sent.
"""

from __future__ import annotations

import json
import os
import pathlib
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field

from .corpus import ALLOWED, HELD, Case

HANDSHAKE_SECONDS = 60
RUN_SECONDS = 300
QUIET_SECONDS = 1.0


@dataclass
class Execution:
    tool: str
    case: str | None  # the marker in its arguments, if one survived


@dataclass
class RunResult:
    received: str  # every byte the upstream was sent (UTF-8, invalid bytes replaced)
    executions: list[Execution]
    finished: bool  # the end call was executed
    interposer_exit: int | None
    answers: list[str] = field(default_factory=list)  # what the client read

    def forwarded(self, case: Case) -> bool:
        return f'"case":"{case.key}"' in self.received

    def held_executions(self) -> list[Execution]:
        return [e for e in self.executions if e.tool == HELD]

    def executed(self, case: Case, tool: str) -> bool:
        return any(e.case == case.key and e.tool == tool for e in self.executions)


def closed_port() -> int:
    """A 127.0.0.1 port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class LiveService:
    """A running `countersign serve` (support.Service) the interposer asks for approvals."""

    base: str
    token_file: pathlib.Path
    registry: pathlib.Path
    rp_id: str
    origin: str


def write_config(
    directory: pathlib.Path, live: LiveService | None
) -> tuple[pathlib.Path, pathlib.Path, str]:
    """The interposer's configuration: `read_file` allowed, `write_file` held, a trusted registry
    file (so nothing is fetched from the service at start), no audit log."""
    directory.mkdir(parents=True, exist_ok=True)
    if live is None:
        registry = directory / "registry.json"
        registry.write_text('{"credentials":[]}')
        token = directory / "gateway-token"
        token.write_text("differential-test-token\n")
        rp_id, origin, service = (
            "localhost",
            "http://localhost",
            f"http://127.0.0.1:{closed_port()}",
        )
    else:
        registry, token, rp_id, origin, service = (
            live.registry,
            live.token_file,
            live.rp_id,
            live.origin,
            live.base,
        )
    config = directory / "mcp.toml"
    config.write_text(
        f"rp_id = {json.dumps(rp_id)}\norigins = [{json.dumps(origin)}]\n"
        f"registry = {json.dumps(str(registry))}\n"
        f'allow = ["{ALLOWED}"]\nhold = ["{HELD}"]\npark_seconds = 1\n'
    )
    return config, token, service


def frame(obj: dict) -> bytes:
    return json.dumps(obj).encode() + b"\n"


HANDSHAKE_INIT = frame(
    {
        "jsonrpc": "2.0",
        "id": "init",
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "differential", "version": "1"},
        },
    }
)
HANDSHAKE_INITIALIZED = frame({"jsonrpc": "2.0", "method": "notifications/initialized"})
HANDSHAKE_LIST = frame({"jsonrpc": "2.0", "id": "list", "method": "tools/list"})
END = frame(
    {
        "jsonrpc": "2.0",
        "id": "end",
        "method": "tools/call",
        "params": {"name": ALLOWED, "arguments": {"case": "end"}},
    }
)


def read_executions(record: pathlib.Path) -> list[Execution]:
    if not record.exists():
        return []
    lines = record.read_text(encoding="utf-8", errors="replace").splitlines()
    return [Execution(e["tool"], e["case"]) for e in map(json.loads, lines)]


def run(
    binary: str,
    upstream: list[str],
    cases: list[Case],
    directory: pathlib.Path,
    live: LiveService | None = None,
) -> RunResult:
    config, token, service = write_config(directory, live)
    record = directory / "executions.jsonl"
    received = directory / "received.bin"
    for f in (record, received):
        f.unlink(missing_ok=True)
    tee = ["/bin/sh", "-c", 'tee -a "$0" | exec "$@"', str(received), *upstream]
    command = [
        binary,
        "mcp",
        "stdio",
        "--service",
        service,
        "--gateway-token-file",
        str(token),
        "--agent-id",
        "agent-differential",
        "--server-id",
        "differential",
        "--config",
        str(config),
        "--",
        *tee,
    ]
    stderr = (directory / "stderr.log").open("wb")
    proc = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        env={**os.environ, "READER_RECORD": str(record), "RUST_LOG": "warn"},
    )
    answers: list[str] = []
    seen = threading.Condition()

    def drain() -> None:
        for line in proc.stdout:
            with seen:
                answers.append(line.decode("utf-8", "replace"))
                seen.notify_all()

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()

    def wait_for_answer(ident: str) -> None:
        needle = f'"id":"{ident}"'
        deadline = time.monotonic() + HANDSHAKE_SECONDS
        with seen:
            while not any(needle in a.replace(" ", "") for a in answers):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"no answer to {ident}; stderr in {directory}/stderr.log")
                seen.wait(0.2)

    try:
        proc.stdin.write(HANDSHAKE_INIT)
        proc.stdin.flush()
        wait_for_answer("init")
        proc.stdin.write(HANDSHAKE_INITIALIZED + HANDSHAKE_LIST)
        proc.stdin.flush()
        wait_for_answer("list")
        try:
            proc.stdin.write(b"".join(c.data for c in cases) + END)
            proc.stdin.flush()
        except BrokenPipeError:
            pass  # the interposer ended the session (bytes that are not UTF-8)
        finished = wait_until_done(proc, record, received)
    finally:
        try:
            proc.stdin.close()
        except BrokenPipeError:
            pass
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        reader.join(timeout=5)
        stderr.close()
    data = received.read_bytes() if received.exists() else b""
    return RunResult(
        data.decode("utf-8", "replace"), read_executions(record), finished, proc.returncode, answers
    )


def wait_until_done(proc: subprocess.Popen, record: pathlib.Path, received: pathlib.Path) -> bool:
    """Until the end call ran and nothing changed for QUIET_SECONDS, or the interposer exited."""
    deadline = time.monotonic() + RUN_SECONDS
    finished = False
    last, still_since = None, time.monotonic()
    while time.monotonic() < deadline:
        exited = proc.poll() is not None
        sizes = tuple(f.stat().st_size if f.exists() else 0 for f in (record, received))
        if not finished:
            finished = any(e.case == "end" for e in read_executions(record))
        if sizes != last:
            last, still_since = sizes, time.monotonic()
        quiet = time.monotonic() - still_since >= QUIET_SECONDS
        if (finished or exited) and quiet:
            return finished
        time.sleep(0.1)
    return finished
