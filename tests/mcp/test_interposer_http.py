"""`countersign mcp http` (Streamable HTTP on both sides) between the TypeScript client
(`@modelcontextprotocol/client` 2.4.0) and two upstreams over Streamable HTTP: `server-everything`
2026.8.31 (progress of a long operation arrives in order through the interposer, and the upstream's
own `-32042` passes through untouched) and the counting server (a held call runs exactly once after
approval; the agent is the one its bearer credential names). Issue 12, "Tests with real MCP peers"."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from typing import Any, Iterator

import pytest

from conftest import COUNTING_SERVER, executions
from peers.interposer import APPROVAL_KEY, toml_value
from peers.servers import UPSTREAM_ELICITATION, everything_http, free_port, ts_client, wait_http
from countersign._native import testing

AGENT_TOKEN = "agent-7-bearer-for-tests"


@pytest.fixture
def http_mode(interposer):
    probe = subprocess.run([interposer, "mcp", "http", "--help"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip("`countersign mcp http` (Streamable HTTP mode, issue 12 §1) is not in this binary "
                    "yet (docs/MCP.md, 'Not yet')")
    return interposer


@contextlib.contextmanager
def http_interposer_for(binary: str, service, directory, upstream: str, server_id: str,
                        settings: dict[str, Any]) -> Iterator[str]:
    """`countersign mcp http` in front of `upstream` with agent-7's bearer credential configured
    (as a token file: no secret in the configuration); yields the interposer's MCP endpoint."""
    directory.mkdir(parents=True, exist_ok=True)
    token_file = directory / "agent-7.token"
    token_file.write_text(AGENT_TOKEN + "\n")
    config = directory / "mcp-http.toml"
    base = {
        "rp_id": testing.RP_ID, "origins": [testing.ORIGIN],
        "registry": str(service.dir / "registry.json"),
        **settings,
    }
    config.write_text(
        "".join(f"{k} = {toml_value(v)}\n" for k, v in base.items())
        + f'\n[[agents]]\nid = "agent-7"\ntoken_file = "{token_file}"\n'
    )
    port = free_port()
    proc = subprocess.Popen([
        binary, "mcp", "http", "--listen", f"127.0.0.1:{port}", "--upstream", upstream,
        "--service", service.base, "--gateway-token-file", str(service.token_file),
        "--server-id", server_id, "--config", str(config)])
    try:
        wait_http(f"http://127.0.0.1:{port}/mcp")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture
def http_interposer(http_mode, service, tmp_path, node):
    with everything_http(node) as upstream:
        with http_interposer_for(
                http_mode, service, tmp_path / "interposer", upstream, "everything",
                {"allow": ["trigger-long-running-operation", "trigger-url-elicitation", "echo",
                           "get-sum"]}) as url:
            yield url


@contextlib.contextmanager
def counting_http(counting_log) -> Iterator[str]:
    """The counting server over Streamable HTTP (Python SDK `MCPServer`); its endpoint URL."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(COUNTING_SERVER), "http", str(port)],
        env={**os.environ, "COUNTING_LOG": str(counting_log)},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/mcp")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        proc.wait()


def test_progress_is_relayed_in_order(http_interposer, node):
    out = ts_client(node, http_interposer, "progress", {
        "name": "trigger-long-running-operation", "arguments": {"duration": 1, "steps": 5}},
        bearer=AGENT_TOKEN)
    assert "error" not in out, out
    assert [p["progress"] for p in out["progress"]] == [1, 2, 3, 4, 5]
    assert "completed" in out["result"]["content"][0]["text"]


def test_the_upstreams_own_32042_passes_through_untouched(http_interposer, node):
    out = ts_client(node, http_interposer, "url-elicitation", {
        "name": "trigger-url-elicitation",
        "arguments": {"url": "https://upstream.example/consent", "errorPath": True,
                      "elicitationId": "upstream-own-id"}}, bearer=AGENT_TOKEN)
    assert out["error"]["code"] == -32042, out
    data = out["error"]["data"]
    # The upstream's elicitation, and nothing of the interposer's.
    assert "io.countersign/approval" not in data
    assert set(data) == {"elicitations"}
    [elicitation] = data["elicitations"]
    assert {k: elicitation[k] for k in UPSTREAM_ELICITATION} == UPSTREAM_ELICITATION
    assert elicitation["elicitationId"]


def test_an_agent_without_its_bearer_credential_is_refused(http_interposer, node):
    out = ts_client(node, http_interposer, "list", bearer=None)
    assert "error" in out and "tools" not in out, out


def test_a_held_call_over_http_runs_once_after_approval(http_mode, service, tmp_path, node,
                                                         counting_log):
    audit_log = tmp_path / "interposer" / "mcp-audit.jsonl"
    settings = {"hold": ["delete_thing"], "allow": ["read_thing", "echo"],
                "audit_log": str(audit_log), "park_seconds": 2}
    with counting_http(counting_log) as upstream, http_interposer_for(
            http_mode, service, tmp_path / "interposer", upstream, "counting", settings) as url:
        call = {"name": "delete_thing", "arguments": {"name": "h"}}
        # Each ts_client run is a new HTTP session: the approval follows the call (agent from the
        # bearer, server, tool, arguments), not the session.
        first = ts_client(node, url, "call", call, bearer=AGENT_TOKEN)
        assert first["result"]["isError"] is True, first
        block = first["result"]["_meta"][APPROVAL_KEY]
        assert block["status"] == "PENDING"
        assert first["result"]["content"][0]["text"].startswith("Held for human approval")
        assert executions(counting_log) == []

        service.alice.approve(block["approval_id"])
        ran = ts_client(node, url, "call", call, bearer=AGENT_TOKEN)
        assert "error" not in ran, ran
        assert not ran["result"].get("isError"), ran
        assert "deleted h" in ran["result"]["content"][0]["text"]
        assert executions(counting_log) == ["h"]

        third = ts_client(node, url, "call", call, bearer=AGENT_TOKEN)
        assert third["result"]["isError"] is True, third
        assert third["result"]["_meta"][APPROVAL_KEY]["approval_id"] != block["approval_id"]
        assert executions(counting_log) == ["h"], "executed exactly once"

        # An allowed call passes straight through.
        echoed = ts_client(node, url, "call", {"name": "echo", "arguments": {"text": "hi"}},
                           bearer=AGENT_TOKEN)
        assert echoed["result"]["content"][0]["text"] == "hi", echoed

    lines = [json.loads(line) for line in audit_log.read_text().splitlines()]
    calls = [l for l in lines if l["kind"] == "mcp_call" and l["tool_name"] == "delete_thing"]
    assert {c["agent_id"] for c in calls} == {"agent-7"}, "the agent its bearer names"
    executed = [l for l in lines if l.get("outcome") == "executed"]
    assert len(executed) == 1, lines
    assert executed[0]["approval_ref"] == block["approval_id"]
    assert executed[0]["upstream"] == "ok"
