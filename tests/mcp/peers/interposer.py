"""Launching `countersign mcp stdio` the way an agent host does (docs/MCP.md): the client spawns
the interposer, the interposer spawns the upstream after `--`."""

from __future__ import annotations

import base64
import json
import os
import pathlib
import signal
import subprocess
from dataclasses import dataclass, field
from typing import Any, Optional

from countersign._native import testing

APPROVAL_KEY = "io.countersign/approval"


def toml_value(v: Any) -> str:
    # JSON strings, numbers, booleans and arrays of them are valid TOML values.
    return json.dumps(v)


@dataclass
class StdioInterposer:
    """One interposer configuration. `command()` is what the client launches; every launch writes
    the interposer's pid to `pid_file` (the shell `exec`s, so the pid is the interposer's)."""

    binary: str
    service: Any  # support.Service with .token_file
    directory: pathlib.Path
    upstream: list[str]
    agent_id: str = "agent-7"
    server_id: str = "counting"
    settings: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.config = self.directory / "mcp.toml"
        self.pid_file = self.directory / "interposer.pid"
        self.audit_log = self.directory / "mcp-audit.jsonl"
        self.audit_key = self.directory / "mcp-audit.key"
        self.write_config()

    def write_config(self, **changes: Any) -> None:
        """(Re)write the TOML; `changes` override `settings`. A running interposer keeps the
        configuration it started with: restart it to apply a change."""
        self.settings.update(changes)
        base = {
            "rp_id": testing.RP_ID,
            "origins": [testing.ORIGIN],
            "registry": str(self.service.dir / "registry.json"),
            "audit_log": str(self.audit_log),
            "audit_key": str(self.audit_key),
            "park_seconds": 2,
        }
        base.update(self.settings)
        # A setting given as None is left out (e.g. `audit_log=None`: no audit log).
        self.config.write_text(
            "".join(f"{k} = {toml_value(v)}\n" for k, v in base.items() if v is not None))

    def command(self) -> tuple[str, list[str]]:
        return "/bin/sh", [
            "-c", 'echo $$ > "$0"; exec "$@"', str(self.pid_file),
            self.binary, "mcp", "stdio",
            "--service", self.service.base,
            "--gateway-token-file", str(self.service.token_file),
            "--agent-id", self.agent_id,
            "--server-id", self.server_id,
            "--config", str(self.config),
            "--", *self.upstream,
        ]

    def kill(self) -> None:
        """SIGKILL the running interposer: no clean shutdown, no close line in its audit log."""
        os.kill(int(self.pid_file.read_text()), signal.SIGKILL)

    def audit_lines(self) -> list[dict[str, Any]]:
        if not self.audit_log.exists():
            return []
        return [json.loads(line) for line in self.audit_log.read_text().splitlines() if line]

    def audit_public_key(self) -> str:
        """The verifying key of the interposer's audit log, derived from its seed file
        (base64url of 32 bytes, as the service's key file)."""
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
        from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

        seed = base64.urlsafe_b64decode(self.audit_key.read_text().strip() + "==")
        raw = Ed25519PrivateKey.from_private_bytes(seed).public_key().public_bytes(
            Encoding.Raw, PublicFormat.Raw)
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    def audit_verify(self) -> subprocess.CompletedProcess:
        """`countersign audit verify` on the interposer's own log."""
        return subprocess.run(
            [self.binary, "audit", "verify", str(self.audit_log), "--key", self.audit_public_key()],
            capture_output=True, text=True,
        )


    def cross_check(self) -> subprocess.CompletedProcess:
        """`countersign audit verify` of the service's log together with this interposer's: both
        logs verify under their own keys (the service's Decisions' evidence re-verified under the
        test RP), and every held call the interposer executed has exactly one verdict and one
        collected grant in the service's log (docs/MCP.md, "Audit log"). JSON report on stdout."""
        data = self.service.data
        return subprocess.run(
            [self.binary, "audit", "verify", str(data / "audit.jsonl"),
             "--key", str(data / "service-key.pub"),
             "--rp-id", testing.RP_ID, "--origin", testing.ORIGIN,
             "--interposer-log", str(self.audit_log),
             "--interposer-key", str(self.audit_key) + ".pub",
             "--json"],
            capture_output=True, text=True,
        )


def block_of(outcome) -> Optional[dict[str, Any]]:
    """The `io.countersign/approval` block of a held/refused answer, wherever the mode puts it:
    `data` of a -32042 (beside `elicitations`), `error.data` itself in `jsonrpc_error` mode, or
    `_meta` of a tool-error result."""
    if outcome.error is not None:
        data = outcome.data or {}
        return data.get(APPROVAL_KEY, data if "status" in data else None)
    meta = outcome.result.meta or {}
    return meta.get(APPROVAL_KEY)
