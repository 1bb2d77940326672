"""Test helpers: a `countersign serve` process and an approver driving the approver API over HTTP
with the software authenticator (`countersign._native.testing.SoftAuthenticator`)."""

from __future__ import annotations

import json
import pathlib
import subprocess
import threading
import time
import urllib.request
from typing import Any, Dict, Optional, Tuple

from countersign._native import testing

LISTENING = "countersign: listening on "


def http(
    method: str, url: str, body: Optional[Dict[str, Any]] = None, token: Optional[str] = None
) -> Tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


class Service:
    """`countersign serve` on 127.0.0.1:0 with a scratch data directory; `stop()` kills it."""

    def __init__(
        self, binary: str, directory: pathlib.Path, approvers: Dict[str, testing.SoftAuthenticator],
        extra_config: str = "",
    ) -> None:
        self.binary = binary
        self.dir = directory
        self.data = directory / "data"
        self.registry_json = json.dumps(
            {"credentials": [json.loads(a.registry_record(p)) for p, a in approvers.items()]}
        )
        (directory / "registry.json").write_text(self.registry_json)
        self.config = directory / "config.toml"
        self.config.write_text(
            f'rp_id = "{testing.RP_ID}"\norigins = ["{testing.ORIGIN}"]\n'
            f'registry = "{directory / "registry.json"}"\n{extra_config}'
        )
        self.process = subprocess.Popen(
            [binary, "serve", "--listen", "127.0.0.1:0", "--data-dir", str(self.data),
             "--config", str(self.config)],
            stdout=subprocess.PIPE, stderr=None, text=True,
        )
        assert self.process.stdout is not None
        first = self.process.stdout.readline()
        assert first.startswith(LISTENING), f"countersign serve's first line: {first!r}"
        self.base = first[len(LISTENING):].strip()
        # Drain stdout so the service never blocks on a full pipe.
        threading.Thread(target=self.process.stdout.read, daemon=True).start()
        # The service created its data directory; the gateway credential goes into it, and the
        # running service picks it up on its next refresh (every half second).
        self.token = self.gateway_token()
        self.until_gateway_accepted(self.token)

    def gateway_token(self, name: str = "pytest") -> str:
        """A gateway bearer token: `countersign gateway add NAME` prints exactly one line."""
        out = subprocess.run(
            [self.binary, "gateway", "add", name, "--data-dir", str(self.data)],
            capture_output=True, text=True,
        )
        assert out.returncode == 0, f"gateway add: {out.stderr}"
        lines = out.stdout.strip().splitlines()
        assert len(lines) == 1, out.stdout
        return lines[0]

    def until_gateway_accepted(self, token: str) -> None:
        """Poll until an unknown approval id is 404 (a live gateway) rather than 401 for `token`.
        The deadline only bounds a hang; it asserts nothing about speed."""
        deadline = time.monotonic() + 60
        while True:
            status, _ = http("GET", f"{self.base}/v1/approvals/apv_probe", token=token)
            if status == 404:
                return
            assert status == 401, status
            assert time.monotonic() < deadline, "the service never saw the new gateway"
            time.sleep(0.05)

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()


class Approver:
    """An enrolled human with a software authenticator, using the approver API."""

    def __init__(self, base: str, key: testing.SoftAuthenticator) -> None:
        self.base = base
        self.key = key
        self._token: Optional[str] = None

    def login(self) -> str:
        if self._token is None:
            status, c = http("POST", f"{self.base}/v1/approver/login/challenge", {})
            assert status == 200, c
            status, s = http("POST", f"{self.base}/v1/approver/login", self.key.sign(c["challenge"]))
            assert status == 200, s
            self._token = s["token"]
        return self._token

    def decide(self, approval_id: str, decision: str) -> Dict[str, Any]:
        token = self.login()
        status, c = http(
            "POST", f"{self.base}/v1/approver/approvals/{approval_id}/challenge",
            {"decision": decision}, token,
        )
        assert status == 200, c
        status, r = http(
            "POST", f"{self.base}/v1/approver/approvals/{approval_id}/decision",
            self.key.sign(c["challenge"]), token,
        )
        assert status == 200, r
        return r

    def approve(self, approval_id: str) -> Dict[str, Any]:
        return self.decide(approval_id, "APPROVED")

    def refuse(self, approval_id: str) -> Dict[str, Any]:
        return self.decide(approval_id, "DENIED")
