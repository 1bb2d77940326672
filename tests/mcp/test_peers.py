"""The ground the interposer scenarios stand on, checked without the interposer: the pinned peers
are installed, talk to each other directly, the counting server counts, and the approver signs.
If one of these fails, an interposer scenario failing says nothing about the interposer."""

from __future__ import annotations

import json
import sys

import anyio
import pytest

from conftest import (
    COUNTING_SERVER, EVERYTHING_SERVER, FILESYSTEM_SERVER, NODE_MODULES, executions,
)
from peers.clients import UrlElicitations, call, stdio_session
from peers.servers import UPSTREAM_ELICITATION, everything_http, ts_client
from support import http


def test_the_peers_are_the_pinned_versions(node):
    import mcp  # noqa: F401
    from importlib.metadata import version

    assert version("mcp") == "2.3.0"
    pinned = {
        "@modelcontextprotocol/client": "2.4.0",
        "@modelcontextprotocol/server-everything": "2026.8.31",
        "@modelcontextprotocol/server-filesystem": "2026.8.31",
    }
    for name, want in pinned.items():
        got = json.loads((NODE_MODULES / name / "package.json").read_text())["version"]
        assert got == want, f"{name} is {got}, package-lock.json pins {want}"


def test_counting_server_records_each_execution_once(counting_log):
    env = {"COUNTING_LOG": str(counting_log)}

    async def scenario():
        async with stdio_session(sys.executable, [str(COUNTING_SERVER)], env) as s:
            tools = {t.name: t for t in (await s.list_tools()).tools}
            assert tools["delete_thing"].annotations.destructive_hint is True
            assert tools["read_thing"].annotations.read_only_hint is True
            assert (await call(s, "read_thing", {"name": "a"})).text == "thing a is here"
            assert executions(counting_log) == []
            first = await call(s, "delete_thing", {"name": "a"})
            second = await call(s, "delete_thing", {"name": "b"})
            assert first.text == "deleted a (execution 1)"
            assert second.text == "deleted b (execution 2)"

    anyio.run(scenario)
    assert executions(counting_log) == ["a", "b"]


def test_python_client_reads_and_writes_through_filesystem_server_directly(node, tmp_path):
    root = tmp_path / "files"
    root.mkdir()
    (root / "hello.txt").write_text("hello\n")
    elicitations = UrlElicitations()

    async def scenario():
        async with stdio_session(node, [str(FILESYSTEM_SERVER), str(root)], elicitation=elicitations) as s:
            tools = {t.name: t for t in (await s.list_tools()).tools}
            assert tools["read_text_file"].annotations.read_only_hint is True
            assert tools["write_file"].annotations.read_only_hint is False
            read = await call(s, "read_text_file", {"path": str(root / "hello.txt")})
            assert read.text == "hello\n"
            wrote = await call(s, "write_file", {"path": str(root / "out.txt"), "content": "x"})
            assert wrote.result is not None and not wrote.result.is_error, wrote

    anyio.run(scenario)
    assert (root / "out.txt").read_text() == "x"
    assert elicitations.seen == []


def test_ts_client_over_streamable_http_sees_progress_in_order_and_the_upstreams_32042(node):
    with everything_http(node) as url:
        progress = ts_client(node, url, "progress", {
            "name": "trigger-long-running-operation", "arguments": {"duration": 1, "steps": 4}})
        assert progress["protocolVersion"] == "2025-11-25"
        assert [p["progress"] for p in progress["progress"]] == [1, 2, 3, 4]
        assert all(p["total"] == 4 for p in progress["progress"])
        assert "completed" in progress["result"]["content"][0]["text"]

        held = ts_client(node, url, "url-elicitation", {
            "name": "trigger-url-elicitation",
            "arguments": {"url": "https://approver.example/x", "errorPath": True,
                          "elicitationId": "upstream-own-id"}})
        assert held["error"]["type"] == "UrlElicitationRequiredError"
        assert held["error"]["code"] == -32042
        assert set(held["error"]["data"]) == {"elicitations"}
        [elicitation] = held["error"]["data"]["elicitations"]
        # server-everything 2026.8.31 draws a fresh elicitationId and a fixed URL and message: the
        # HTTP pass-through test compares against exactly these.
        assert elicitation["mode"] == "url" and elicitation["elicitationId"]
        assert elicitation["url"] == UPSTREAM_ELICITATION["url"]
        assert elicitation["message"] == UPSTREAM_ELICITATION["message"]


def test_approver_signs_an_approval_the_gateway_created(service):
    status, pending = http("POST", f"{service.base}/v1/approvals", {
        "agent_id": "agent-7", "tool_name": "delete_thing", "params": {"name": "a"}}, service.token)
    assert status in (200, 201) and pending["status"] == "PENDING", pending
    settled = service.alice.approve(pending["approval_id"])
    assert settled["status"] == "APPROVED"
    status, now = http("GET", f"{service.base}/v1/approvals/{pending['approval_id']}", token=service.token)
    assert status == 200 and now["status"] == "APPROVED" and now["approver_evidence"], now


def test_a_refused_approval_is_denied_with_the_approvers_evidence(service):
    _, pending = http("POST", f"{service.base}/v1/approvals", {
        "agent_id": "agent-7", "tool_name": "delete_thing", "params": {"name": "a"}}, service.token)
    refused = service.alice.refuse(pending["approval_id"])
    assert refused["status"] == "DENIED" and refused["reason_code"] == "approver_refused", refused


@pytest.mark.parametrize("url_capable", [True, False])
def test_filesystem_server_needs_no_elicitation_capability(node, tmp_path, url_capable):
    # The interposer decides how to answer from what the client declares; the upstream itself must
    # work for both kinds of client, or the scenarios below would test the server, not the relay.
    root = tmp_path / "files"
    root.mkdir()

    async def scenario():
        async with stdio_session(node, [str(FILESYSTEM_SERVER), str(root)],
                                 elicitation=UrlElicitations() if url_capable else None) as s:
            out = await call(s, "list_directory", {"path": str(root)})
            assert out.result is not None and not out.result.is_error

    anyio.run(scenario)
