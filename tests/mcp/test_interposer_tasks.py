"""Tasks (protocol revision 2025-11-25) through `countersign mcp stdio` with a real client: the
TypeScript SDK 1.32.2's experimental tasks client (`callToolStream`, `cancelTask`), the one
released SDK client that speaks that revision's tasks, in front of the counting server.

The SDK decides by itself to send a held tool as a task (the interposer's `tools/list` says the
tool supports tasks, and its `initialize` result declares `tasks.requests.tools.call`); the task
runs the call once approved with no retry, and `tasks/cancel` withdraws the approval.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from conftest import COUNTING_SERVER, HERE, executions
from peers.interposer import StdioInterposer
from support import http
from test_interposer_http import AGENT_TOKEN, counting_http, http_interposer_for

pytestmark = pytest.mark.usefixtures("interposer")

TS_TASKS_CLIENT = HERE / "peers" / "ts_tasks_client.mjs"


def counting(interposer, service, tmp_path) -> StdioInterposer:
    return StdioInterposer(
        interposer, service, tmp_path / "interposer", [sys.executable, str(COUNTING_SERVER)],
        settings={"hold": ["delete_thing"], "trust_annotations": True},
    )


class TasksClient:
    """The TypeScript client, read event by event as it prints them."""

    def __init__(self, node: str, scenario: str, ip, counting_log, name, arguments):
        if isinstance(ip, StdioInterposer):
            command, args = ip.command()
            spec = {"command": command, "args": args, "env": {"COUNTING_LOG": str(counting_log)}}
        else:  # the URL of `countersign mcp http`
            spec = {"url": ip, "bearer": AGENT_TOKEN}
        spec.update({"name": name, "arguments": arguments})
        self.process = subprocess.Popen(
            [node, str(TS_TASKS_CLIENT), scenario, json.dumps(spec)],
            cwd=HERE, stdout=subprocess.PIPE, text=True,
        )
        self.events: list[dict] = []

    def next(self) -> dict:
        line = self.process.stdout.readline()
        assert line, f"the client ended early; its events: {self.events}"
        event = json.loads(line)
        self.events.append(event)
        return event

    def until(self, kind: str) -> dict:
        while True:
            event = self.next()
            if event["event"] == kind:
                return event
            assert event["event"] not in ("fatal", "done"), self.events

    def finish(self) -> list[dict]:
        self.until("done")
        assert self.process.wait(timeout=60) == 0
        return self.events


def approval_of(task: dict) -> str:
    found = re.search(r"\(approval (\S+), expires", task["statusMessage"])
    assert found, task
    return found.group(1)


def approval_status(service, approval_id: str) -> dict:
    status, body = http("GET", f"{service.base}/v1/approvals/{approval_id}", token=service.token)
    assert status == 200, body
    return body


def test_the_sdk_runs_a_held_tool_as_a_task_that_executes_once_when_approved(
        interposer, service, tmp_path, counting_log, node):
    ip = counting(interposer, service, tmp_path)
    client = TasksClient(node, "run", ip, counting_log, "delete_thing", {"name": "t1"})
    connected = client.until("connected")
    assert connected["capabilities"]["tasks"]["requests"]["tools"]["call"] == {}
    assert connected["taskSupport"] == "optional"
    created = client.until("taskCreated")["task"]
    assert created["status"] == "working"
    approval_id = approval_of(created)
    assert executions(counting_log) == [], "nothing runs before a human approves"

    service.alice.approve(approval_id)
    result = client.until("result")["result"]
    assert not result.get("isError"), result
    assert "deleted t1 (execution 1)" in result["content"][0]["text"]
    events = client.finish()
    statuses = [e["task"]["status"] for e in events if e["event"] == "taskStatus"]
    assert statuses[-1] == "completed", statuses
    assert executions(counting_log) == ["t1"], "exactly once, and with no retry by the client"

    # Both logs verify, and the executed held call has one verdict and one collected grant.
    check = ip.cross_check()
    assert check.returncode == 0, check.stdout + check.stderr
    executed = [l for l in ip.audit_lines() if l.get("outcome") == "executed"]
    assert [l["approval_ref"] for l in executed] == [approval_id]


def test_tasks_cancel_from_the_sdk_withdraws_the_approval(
        interposer, service, tmp_path, counting_log, node):
    ip = counting(interposer, service, tmp_path)
    client = TasksClient(node, "cancel", ip, counting_log, "delete_thing", {"name": "t2"})
    created = client.until("taskCreated")["task"]
    approval_id = approval_of(created)
    cancelled = client.until("cancelled")["task"]
    assert cancelled["status"] == "cancelled", cancelled
    result = client.until("cancelledResult")["result"]
    assert result["isError"] is True, result
    events = client.finish()
    errors = [e["error"]["message"] for e in events if e["event"] == "error"]
    assert errors and "cancelled" in errors[-1], events
    # An explicit cancel is a withdrawal: the service settled the approval, nobody can approve it.
    status = approval_status(service, approval_id)
    assert (status["status"], status.get("reason_code")) == ("DENIED", "cancelled"), status
    assert executions(counting_log) == []


def test_over_http_the_approved_task_runs_in_the_clients_session(
        interposer, service, tmp_path, counting_log, node):
    # Over Streamable HTTP no client request is under way when the verdict lands: the
    # interposer's session carries the call to the upstream session on its own.
    audit_log = tmp_path / "interposer" / "mcp-audit.jsonl"
    settings = {"hold": ["delete_thing"], "trust_annotations": True, "audit_log": str(audit_log)}
    with counting_http(counting_log) as upstream, http_interposer_for(
            interposer, service, tmp_path / "interposer", upstream, "counting", settings) as url:
        client = TasksClient(node, "run", url, counting_log, "delete_thing", {"name": "t3"})
        connected = client.until("connected")
        assert connected["taskSupport"] == "optional", connected
        approval_id = approval_of(client.until("taskCreated")["task"])
        service.alice.approve(approval_id)
        result = client.until("result")["result"]
        assert "deleted t3 (execution 1)" in result["content"][0]["text"], result
        client.finish()
    assert executions(counting_log) == ["t3"]
    lines = [json.loads(line) for line in audit_log.read_text().splitlines()]
    executed = [l for l in lines if l.get("outcome") == "executed"]
    assert [(l["approval_ref"], l["upstream"]) for l in executed] == [(approval_id, "ok")]
