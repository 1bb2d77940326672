"""Fixtures for the real-peer MCP tests.

What they need (`.ci/steps/mcp.sh` provides all of it):
- the `countersign` binary (`cargo build -p countersign-cli`), or COUNTERSIGN_BIN;
- the Python package built with the test-only software authenticator
  (`maturin develop --features testing` in bindings/python) in the venv running pytest, together
  with the Python MCP SDK (`mcp==2.3.0`, see requirements.txt);
- `npm ci` in this directory (the TypeScript client and the two reference servers, pinned in
  package-lock.json) and `node` on PATH.

The service side reuses bindings/python/tests/support.py: a real `countersign serve` on
127.0.0.1:0 with a scratch directory, a gateway token from `countersign gateway add`, and an
approver who signs through the approver API with `SoftAuthenticator`.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "bindings" / "python" / "tests"))
sys.path.insert(0, str(HERE))

from countersign._native import testing  # noqa: E402
from support import Approver, Service  # noqa: E402

NODE_MODULES = HERE / "node_modules"
FILESYSTEM_SERVER = NODE_MODULES / "@modelcontextprotocol/server-filesystem/dist/index.js"
EVERYTHING_SERVER = NODE_MODULES / "@modelcontextprotocol/server-everything/dist/index.js"
COUNTING_SERVER = HERE / "peers" / "counting_server.py"
TS_CLIENT = HERE / "peers" / "ts_client.mjs"


@pytest.fixture(scope="session")
def countersign_bin() -> str:
    path = os.environ.get("COUNTERSIGN_BIN") or str(REPO / "target" / "debug" / "countersign")
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} is missing: run `cargo build -p countersign-cli` or set COUNTERSIGN_BIN")
    return path


@pytest.fixture(scope="session")
def node() -> str:
    path = shutil.which("node")
    if path is None:
        pytest.fail("node is not on PATH (the TypeScript peers need Node >= 20)")
    if not FILESYSTEM_SERVER.exists() or not EVERYTHING_SERVER.exists():
        pytest.fail(f"the npm peers are missing: run `npm ci` in {HERE}")
    return path


@pytest.fixture(scope="session")
def interposer(countersign_bin) -> str:
    """The binary, if it has the `mcp` subcommand (issue 12); otherwise the interposer scenarios
    are skipped, saying so."""
    probe = subprocess.run([countersign_bin, "mcp", "--help"], capture_output=True, text=True)
    if probe.returncode != 0 or "stdio" not in probe.stdout:
        pytest.skip("`countersign mcp` (issue 12, the interposer) is not in this binary yet")
    return countersign_bin


@pytest.fixture
def service(countersign_bin, tmp_path):
    """`countersign serve` with one enrolled approver, alice, as `service.alice`."""
    alice = testing.SoftAuthenticator("alice-es256")
    directory = tmp_path / "service"
    directory.mkdir()
    svc = Service(countersign_bin, directory, {"alice@example.com": alice}, SERVICE_RULES)
    svc.alice = Approver(svc.base, alice)
    svc.token_file = directory / "gateway-token"
    svc.token_file.write_text(svc.token + "\n")
    yield svc
    svc.stop()


# `quick_thing` approvals expire unanswered after 2 s so the expiry scenario needs no long wait.
SERVICE_RULES = '[[tools]]\nname = "quick_thing"\napproval_seconds = 2\n'


@pytest.fixture
def counting_log(tmp_path) -> pathlib.Path:
    """The counting server's on-disk execution log (one line per execution)."""
    return tmp_path / "executions.log"


def executions(log: pathlib.Path) -> list[str]:
    """What the counting server actually ran, oldest first."""
    return log.read_text().splitlines() if log.exists() else []
