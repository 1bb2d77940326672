"""`countersign mcp stdio` between real MCP peers (issue 12, "Tests with real MCP peers").

Client: the Python SDK (`mcp` 2.3.0) over stdio, launching the interposer as an agent host does.
Upstreams: `@modelcontextprotocol/server-filesystem` and the counting server, whose on-disk log is
the exactly-once oracle. The service is a real `countersign serve`; the approver signs with the
software authenticator through the approver API. Wire shapes asserted here are the ones
docs/MCP.md promises ("What the client sees when a call is held").
"""

from __future__ import annotations

import json
import sys
import time

import anyio
import pytest

from conftest import COUNTING_SERVER, FILESYSTEM_SERVER, executions
from peers.clients import UrlElicitations, call, stdio_session
from peers.interposer import StdioInterposer, block_of
from support import http

pytestmark = pytest.mark.usefixtures("interposer")

HELD = "Held for human approval (approval "
STILL = "Still awaiting human approval (approval "


def counting(interposer, service, tmp_path, counting_log, **settings) -> StdioInterposer:
    settings.setdefault("hold", ["delete_thing", "quick_thing", "slow_thing"])
    settings.setdefault("trust_annotations", True)
    return StdioInterposer(
        interposer, service, tmp_path / "interposer",
        [sys.executable, str(COUNTING_SERVER)], settings=settings,
    )


def session(ip: StdioInterposer, counting_log, elicitation=None):
    command, args = ip.command()
    return stdio_session(command, args, {"COUNTING_LOG": str(counting_log)}, elicitation)


def approval_status(service, approval_id: str) -> dict:
    status, body = http("GET", f"{service.base}/v1/approvals/{approval_id}", token=service.token)
    assert status == 200, body
    return body


def assert_held_ticket(outcome, tool: str) -> dict:
    """Answer B (docs/MCP.md): a tool error a model can act on, the block in `_meta`."""
    assert outcome.result is not None, f"expected the tool-error ticket, got {outcome.error!r}"
    assert outcome.result.is_error is True
    block = block_of(outcome)
    assert block is not None and block["status"] == "PENDING", outcome.result
    text = outcome.text
    assert text.startswith(HELD + block["approval_id"]), text
    assert block["approve_url"] in text and f"call {tool} again with identical arguments" in text
    # The link carries the opaque id and nothing about the call.
    assert block["approve_url"].endswith("/approve/" + block["approval_id"])
    return block


# --- stdio, Python client with a URL-elicitation callback -> server-filesystem -------------------

def test_url_elicitation_client_filesystem_reads_pass_write_held_then_exactly_once(
        interposer, service, node, tmp_path):
    root = tmp_path / "files"
    root.mkdir()
    (root / "notes.txt").write_text("read me\n")
    target = root / "out.txt"
    ip = StdioInterposer(
        interposer, service, tmp_path / "interposer", [node, str(FILESYSTEM_SERVER), str(root)],
        server_id="filesystem",
        settings={"trust_annotations": True, "hold": ["write_file", "edit_file", "move_file"]},
    )
    elicitations = UrlElicitations()
    args = {"path": str(target), "content": "approved content\n"}

    async def scenario():
        command, cargs = ip.command()
        async with stdio_session(command, cargs, elicitation=elicitations) as s:
            # Reads pass through untouched (readOnlyHint, trusted by this configuration).
            read = await call(s, "read_text_file", {"path": str(root / "notes.txt")})
            assert read.text == "read me\n"

            held = await call(s, "write_file", args)
            assert held.code == -32042, held
            [elicitation] = held.data["elicitations"]
            block = block_of(held)
            assert block["status"] == "PENDING"
            assert elicitation["mode"] == "url"
            assert elicitation["elicitationId"] == block["approval_id"]
            assert elicitation["url"] == block["approve_url"]
            assert "approved content" not in elicitation["url"]
            assert not target.exists(), "a held call must not reach the upstream"

            service.alice.approve(block["approval_id"])
            done = await call(s, "write_file", args)
            assert done.result is not None and not done.result.is_error, done
            assert target.read_text() == "approved content\n"

            # Prove the next identical call does not run: change the file behind its back.
            target.write_text("changed by someone else\n")
            third = await call(s, "write_file", args)
            assert third.code == -32042, third
            assert block_of(third)["approval_id"] != block["approval_id"]
            assert target.read_text() == "changed by someone else\n"

    anyio.run(scenario)
    outcomes = [line for line in ip.audit_lines() if line.get("kind") == "mcp_outcome"]
    assert [o["outcome"] for o in outcomes].count("executed") == 1, outcomes
    assert_cross_check(ip, executed=1)


def assert_cross_check(ip: StdioInterposer, executed: int) -> None:
    """Both logs verify and agree: each executed held call has one verdict and one grant."""
    checked = ip.cross_check()
    assert checked.returncode == 0, checked.stdout + checked.stderr
    report = json.loads(checked.stdout)
    assert report["valid"] is True
    assert report["cross_check"]["executed"] == executed, report["cross_check"]
    assert report["cross_check"]["issues"] == [], report["cross_check"]


# --- Python client without elicitation -> counting server ----------------------------------------

def test_model_visible_ticket_then_retry_executes_once_and_changed_args_are_a_new_approval(
        interposer, service, tmp_path, counting_log):
    ip = counting(interposer, service, tmp_path, counting_log)

    async def scenario():
        async with session(ip, counting_log) as s:
            assert (await call(s, "read_thing", {"name": "a"})).text == "thing a is here"
            held = await call(s, "delete_thing", {"name": "a"})
            first = assert_held_ticket(held, "delete_thing")
            assert executions(counting_log) == []

            # Still pending: the retry is parked for park_seconds, then "still awaiting".
            waiting = await call(s, "delete_thing", {"name": "a"})
            assert waiting.result.is_error and waiting.text.startswith(STILL + first["approval_id"])
            assert approval_status(service, first["approval_id"])["status"] == "PENDING"

            service.alice.approve(first["approval_id"])
            ran = await call(s, "delete_thing", {"name": "a"})
            assert ran.text == "deleted a (execution 1)", ran
            assert executions(counting_log) == ["a"]

            # The grant is spent: the third identical call is a new approval.
            third = assert_held_ticket(await call(s, "delete_thing", {"name": "a"}), "delete_thing")
            assert third["approval_id"] != first["approval_id"]
            # Changed arguments never reuse a ticket.
            other = assert_held_ticket(await call(s, "delete_thing", {"name": "b"}), "delete_thing")
            assert other["approval_id"] not in (first["approval_id"], third["approval_id"])
            assert other["op_hash"] != third["op_hash"]

    anyio.run(scenario)
    assert executions(counting_log) == ["a"]
    verify = ip.audit_verify()
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert_cross_check(ip, executed=1)


def test_jsonrpc_error_mode_carries_the_ticket_in_error_data(
        interposer, service, tmp_path, counting_log):
    ip = counting(interposer, service, tmp_path, counting_log, held_as="jsonrpc_error")

    async def scenario():
        async with session(ip, counting_log) as s:
            held = await call(s, "delete_thing", {"name": "a"})
            assert held.code == -32010 and held.data["status"] == "PENDING", held
            service.alice.refuse(held.data["approval_id"])
            refused = await call(s, "delete_thing", {"name": "a"})
            assert refused.code == -32011, refused
            assert refused.data["status"] == "DENIED"
            assert refused.data["reason_code"] == "approver_refused"

    anyio.run(scenario)
    assert executions(counting_log) == []


def test_refusal_is_a_tool_error_and_nothing_runs(interposer, service, tmp_path, counting_log):
    ip = counting(interposer, service, tmp_path, counting_log)

    async def scenario():
        async with session(ip, counting_log) as s:
            block = assert_held_ticket(await call(s, "delete_thing", {"name": "a"}), "delete_thing")
            service.alice.refuse(block["approval_id"])
            refused = await call(s, "delete_thing", {"name": "a"})
            assert refused.result.is_error
            assert refused.text.startswith("Not run: refused (approver_refused)"), refused.text
            assert block_of(refused)["status"] == "DENIED"
            # The refused ticket is dropped: asking again is a new approval, not the old verdict.
            again = assert_held_ticket(await call(s, "delete_thing", {"name": "a"}), "delete_thing")
            assert again["approval_id"] != block["approval_id"]

    anyio.run(scenario)
    assert executions(counting_log) == []


def test_expiry_is_denied_expired_unanswered(interposer, service, tmp_path, counting_log):
    ip = counting(interposer, service, tmp_path, counting_log)

    async def scenario():
        async with session(ip, counting_log) as s:
            block = assert_held_ticket(await call(s, "quick_thing", {"name": "a"}), "quick_thing")
            # The service's rule gives quick_thing approvals 2 s; wait on the service, not a clock.
            settled = http("GET", f"{service.base}/v1/approvals/{block['approval_id']}?wait=10",
                           token=service.token)[1]
            assert settled["status"] == "DENIED" and settled["reason_code"] == "expired_unanswered"
            late = await call(s, "quick_thing", {"name": "a"})
            assert late.text.startswith("Not run: refused (expired_unanswered)"), late.text

    anyio.run(scenario)
    assert executions(counting_log) == []


def test_client_timeout_during_a_park_leaves_the_approval_pending(
        interposer, service, tmp_path, counting_log):
    ip = counting(interposer, service, tmp_path, counting_log, park_seconds=20)

    async def scenario():
        async with session(ip, counting_log) as s:
            block = assert_held_ticket(await call(s, "delete_thing", {"name": "a"}), "delete_thing")
            # The SDK gives up after 3 s and sends notifications/cancelled for the parked retry.
            timed_out = await call(s, "delete_thing", {"name": "a"}, read_timeout_seconds=3)
            assert timed_out.error is not None, timed_out
            # The SDK writes its cancel from its own task: let it go out, and see the interposer
            # record that only the parked response was dropped, before the human decides.
            with anyio.fail_after(30):
                while not any(line.get("reason_code") == "client_cancelled"
                              for line in ip.audit_lines()):
                    await anyio.sleep(0.05)
            # A cancellation is not a withdrawal: the human can still decide.
            assert approval_status(service, block["approval_id"])["status"] == "PENDING"
            service.alice.approve(block["approval_id"])
            ran = await call(s, "delete_thing", {"name": "a"})
            assert ran.text == "deleted a (execution 1)", ran

    anyio.run(scenario)
    assert executions(counting_log) == ["a"]


def test_policy_hardened_between_hold_and_retry_refuses_without_collecting(
        interposer, service, tmp_path, counting_log):
    ip = counting(interposer, service, tmp_path, counting_log)

    async def hold_it():
        async with session(ip, counting_log) as s:
            return assert_held_ticket(await call(s, "delete_thing", {"name": "a"}), "delete_thing")

    block = anyio.run(hold_it)
    service.alice.approve(block["approval_id"])
    ip.write_config(deny=["delete_*"])

    async def retry():
        async with session(ip, counting_log) as s:
            refused = await call(s, "delete_thing", {"name": "a"})
            assert refused.text.startswith("Not run: refused (policy_denied)"), refused.text

    anyio.run(retry)
    assert executions(counting_log) == []
    # The grant is still there to collect: the interposer never burned it.
    status, grant = http("POST", f"{service.base}/v1/approvals/{block['approval_id']}/grant",
                         {"fingerprint": block["op_hash"], "tool_name": "delete_thing"}, service.token)
    assert status == 200, grant


def test_evidence_from_a_credential_the_interposer_does_not_trust_is_refused_unburned(
        interposer, service, tmp_path, counting_log):
    # The interposer's registry lists another key for alice: the service's evidence is genuine
    # but not trusted here, so the interposer must refuse before collecting.
    from countersign._native import testing

    foreign = testing.SoftAuthenticator("mallory-es256")
    registry = tmp_path / "foreign-registry.json"
    import json
    registry.write_text(json.dumps({"credentials": [json.loads(foreign.registry_record("alice@example.com"))]}))
    ip = counting(interposer, service, tmp_path, counting_log, registry=str(registry))

    async def scenario():
        async with session(ip, counting_log) as s:
            block = assert_held_ticket(await call(s, "delete_thing", {"name": "a"}), "delete_thing")
            service.alice.approve(block["approval_id"])
            refused = await call(s, "delete_thing", {"name": "a"})
            assert refused.text.startswith("Not run: refused ("), refused.text
            denied = block_of(refused)
            assert denied["status"] == "DENIED" and denied["reason_code"] != "approver_refused"
            return block

    block = anyio.run(scenario)
    assert executions(counting_log) == []
    status, grant = http("POST", f"{service.base}/v1/approvals/{block['approval_id']}/grant",
                         {"fingerprint": block["op_hash"], "tool_name": "delete_thing"}, service.token)
    assert status == 200, grant


def test_two_concurrent_identical_retries_execute_once(interposer, service, tmp_path, counting_log):
    ip = counting(interposer, service, tmp_path, counting_log)

    async def scenario():
        async with session(ip, counting_log) as s:
            block = assert_held_ticket(await call(s, "delete_thing", {"name": "a"}), "delete_thing")
            service.alice.approve(block["approval_id"])
            results = []

            async def retry():
                results.append(await call(s, "delete_thing", {"name": "a"}))

            async with anyio.create_task_group() as tg:
                tg.start_soon(retry)
                tg.start_soon(retry)
            texts = [r.text if r.result else repr(r.error) for r in results]
            assert sum(t == "deleted a (execution 1)" for t in texts) == 1, texts

    anyio.run(scenario)
    assert executions(counting_log) == ["a"]


def test_sigkill_of_the_interposer_mid_park_then_a_restarted_one_executes_once(
        interposer, service, tmp_path, counting_log):
    ip = counting(interposer, service, tmp_path, counting_log, park_seconds=30)

    async def hold_then_kill_mid_park():
        async with session(ip, counting_log) as s:
            block = assert_held_ticket(await call(s, "delete_thing", {"name": "a"}), "delete_thing")
            killed = {}

            async def parked_retry():
                killed["outcome"] = await call(s, "delete_thing", {"name": "a"})

            async with anyio.create_task_group() as tg:
                tg.start_soon(parked_retry)
                await anyio.sleep(0.5)  # the retry is on the wire; the park budget is 30 s
                ip.kill()
                with anyio.fail_after(30):
                    while "outcome" not in killed:
                        await anyio.sleep(0.05)
            assert killed["outcome"].error is not None, killed
            return block

    try:
        block = anyio.run(hold_then_kill_mid_park)
    except BaseException as e:  # the SDK may surface the dead peer as a broken session instead
        if not ip.pid_file.exists():
            raise
        block = None
        pytest.fail(f"the client did not survive the interposer's death cleanly: {e!r}")
    assert executions(counting_log) == []
    service.alice.approve(block["approval_id"])

    async def retry_after_restart():
        async with session(ip, counting_log) as s:
            ran = await call(s, "delete_thing", {"name": "a"})
            assert ran.text == "deleted a (execution 1)", ran
            again = assert_held_ticket(await call(s, "delete_thing", {"name": "a"}), "delete_thing")
            assert again["approval_id"] != block["approval_id"]

    anyio.run(retry_after_restart)
    assert executions(counting_log) == ["a"]
