"""`countersign mcp http` (Streamable HTTP on both sides) between the TypeScript client
(`@modelcontextprotocol/client` 2.4.0) and `server-everything` 2026.8.31: progress of a long
operation arrives in order through the interposer, and the upstream's own `-32042` passes through
untouched (issue 12, "Tests with real MCP peers")."""

from __future__ import annotations

import subprocess

import pytest

from peers.interposer import toml_value
from peers.servers import UPSTREAM_ELICITATION, everything_http, free_port, ts_client, wait_http
from countersign._native import testing

AGENT_TOKEN = "agent-7-bearer-for-tests"


@pytest.fixture
def http_interposer(interposer, service, tmp_path, node):
    probe = subprocess.run([interposer, "mcp", "http", "--help"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip("`countersign mcp http` (Streamable HTTP mode, issue 12 §1) is not in this binary "
                    "yet (docs/MCP.md, 'Not yet')")
    config = tmp_path / "mcp-http.toml"
    settings = {
        "rp_id": testing.RP_ID, "origins": [testing.ORIGIN],
        "registry": str(service.dir / "registry.json"),
        "allow": ["trigger-long-running-operation", "trigger-url-elicitation", "echo", "get-sum"],
    }
    config.write_text(
        "".join(f"{k} = {toml_value(v)}\n" for k, v in settings.items())
        + f'\n[[agents]]\nid = "agent-7"\ntoken = "{AGENT_TOKEN}"\n'
    )
    with everything_http(node) as upstream:
        port = free_port()
        proc = subprocess.Popen([
            interposer, "mcp", "http", "--listen", f"127.0.0.1:{port}", "--upstream", upstream,
            "--service", service.base, "--gateway-token-file", str(service.token_file),
            "--server-id", "everything", "--config", str(config)])
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
