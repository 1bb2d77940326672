"""Processes the tests start: server-everything over Streamable HTTP, the TypeScript client."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
from typing import Any, Iterator, Optional

from conftest import EVERYTHING_SERVER, TS_CLIENT


# What server-everything's `trigger-url-elicitation` (errorPath) puts in its -32042, whatever the
# arguments (the elicitationId is random per call).
UPSTREAM_ELICITATION = {
    "mode": "url",
    "url": "https://modelcontextprotocol.io",
    "message": "Open this link to satisfy the prerequisite, then retry the request.",
}


def free_port() -> int:
    """A port the kernel just handed out on 127.0.0.1 (for servers that cannot bind port 0)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, deadline_s: float = 30) -> None:
    """Until something answers HTTP at `url` (any status). The deadline only bounds a hang."""
    end = time.monotonic() + deadline_s
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


@contextlib.contextmanager
def everything_http(node: str) -> Iterator[str]:
    """`server-everything streamableHttp` on 127.0.0.1; yields its MCP endpoint URL."""
    port = free_port()
    proc = subprocess.Popen(
        [node, str(EVERYTHING_SERVER), "streamableHttp"],
        env={**os.environ, "PORT": str(port)},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/mcp")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        proc.wait()


def ts_client(node: str, url: str, scenario: str, args: Optional[dict] = None,
              bearer: Optional[str] = None, timeout: float = 120) -> dict[str, Any]:
    """Run one scenario of peers/ts_client.mjs; its one JSON line."""
    env = dict(os.environ)
    if bearer:
        env["MCP_BEARER"] = bearer
    out = subprocess.run(
        [node, str(TS_CLIENT), url, scenario, json.dumps(args or {})],
        capture_output=True, text=True, timeout=timeout, env=env,
    )
    assert out.returncode == 0, f"ts_client {scenario}: {out.stderr}"
    line = out.stdout.strip().splitlines()[-1]
    return json.loads(line)
