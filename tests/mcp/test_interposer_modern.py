"""The 2026-07-28 multi round-trip answer (issue 12 §4, first bullet): a modern client declaring
URL elicitation gets an `InputRequiredResult` whose `requestState` is integrity-protected, and a
tampered or replayed `requestState` is refused. Client: the Python SDK's `Client` pinned to
2026-07-28 over stdio; upstream: the counting server (itself a 2026-07-28 server)."""

from __future__ import annotations

import sys

import anyio
import mcp_types as types
import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError

from conftest import COUNTING_SERVER, executions
from peers.clients import UrlElicitations
from peers.interposer import StdioInterposer

pytestmark = pytest.mark.usefixtures("interposer")

MODERN = "2026-07-28"


def modern_client(ip: StdioInterposer, counting_log, elicitations) -> Client:
    command, args = ip.command()
    return Client(
        StdioServerParameters(command=command, args=args, env={"COUNTING_LOG": str(counting_log)}),
        mode=MODERN, elicitation_callback=elicitations, cache=None,
    )


async def first_answer(client: Client, name: str, arguments: dict):
    await client.list_tools()  # as a host does; the interposer holds tools it has not seen listed
    return await client.session.call_tool(name, arguments, allow_input_required=True)


async def refused_or_error(client, name, arguments, responses, state) -> bool:
    """True if the retry was refused: a JSON-RPC error, or a tool error."""
    try:
        answer = await client.session.call_tool(
            name, arguments, input_responses=responses, request_state=state,
            allow_input_required=True)
    except MCPError:
        return True
    return isinstance(answer, types.CallToolResult) and bool(answer.is_error)


def flip(state: str) -> str:
    middle = len(state) // 2
    return state[:middle] + ("A" if state[middle] != "A" else "B") + state[middle + 1:]


def test_a_modern_client_can_read_the_held_answer(interposer, service, tmp_path, counting_log):
    # Whatever the interposer answers a 2026-07-28 client (MRTR, or the tool-error fallback),
    # the client's SDK must be able to parse it: otherwise the model sees a protocol failure.
    ip = StdioInterposer(interposer, service, tmp_path / "interposer",
                         [sys.executable, str(COUNTING_SERVER)],
                         settings={"hold": ["delete_thing"], "trust_annotations": True})

    async def scenario():
        async with modern_client(ip, counting_log, None) as client:
            assert client.protocol_version == MODERN
            answer = await first_answer(client, "delete_thing", {"name": "a"})
            if isinstance(answer, types.CallToolResult):
                assert answer.is_error and "io.countersign/approval" in (answer.meta or {})
            else:
                assert isinstance(answer, types.InputRequiredResult) and answer.request_state

    anyio.run(scenario)
    assert executions(counting_log) == []


def test_mrtr_round_trip_and_tampered_or_replayed_request_state_refused(
        interposer, service, tmp_path, counting_log):
    ip = StdioInterposer(interposer, service, tmp_path / "interposer",
                         [sys.executable, str(COUNTING_SERVER)],
                         settings={"hold": ["delete_thing"], "trust_annotations": True})
    elicitations = UrlElicitations()

    async def scenario():
        async with modern_client(ip, counting_log, elicitations) as client:
            assert client.protocol_version == MODERN
            held = await first_answer(client, "delete_thing", {"name": "a"})
            assert isinstance(held, types.InputRequiredResult), held
            assert held.request_state, "the held answer must carry a requestState"
            [(key, request)] = held.input_requests.items()
            assert request.method == "elicitation/create" and request.params.mode == "url"
            approval_id = request.params.url.rsplit("/", 1)[-1]
            responses = {key: types.ElicitResult(action="accept")}
            service.alice.approve(approval_id)

            # Tampered state: refused, nothing runs.
            tampered = await refused_or_error(client, "delete_thing", {"name": "a"}, responses,
                                              flip(held.request_state))
            assert tampered, "a tampered requestState was accepted"
            assert executions(counting_log) == []

            # Replayed onto other arguments: refused, nothing runs.
            replayed = await refused_or_error(client, "delete_thing", {"name": "b"}, responses,
                                              held.request_state)
            assert replayed, "a requestState replayed onto other arguments was accepted"
            assert executions(counting_log) == []

            # The genuine round trip executes once: the upstream (itself a 2026-07-28 server
            # that checks requestState) gets the call without the interposer's own state and
            # input response, and runs it.
            done = await client.session.call_tool(
                "delete_thing", {"name": "a"}, input_responses=responses,
                request_state=held.request_state, allow_input_required=True)
            assert isinstance(done, types.CallToolResult) and not done.is_error, done

            # Replayed after it ran: refused, nothing runs twice.
            again = await refused_or_error(client, "delete_thing", {"name": "a"}, responses,
                                           held.request_state)
            assert again, "a requestState replayed after its call ran was accepted"

    anyio.run(scenario)
    assert executions(counting_log) == ["a"]


def test_an_upstream_that_asks_its_own_question_after_approval_completes_once(
        interposer, service, tmp_path, counting_log):
    # The approved call reaches the upstream, which answers with its own InputRequiredResult
    # (a confirmation form, its own requestState). The client answers it with that state: the
    # interposer lets the answer through once as the same approved call, with no new approval.
    ip = StdioInterposer(interposer, service, tmp_path / "interposer",
                         [sys.executable, str(COUNTING_SERVER)],
                         settings={"hold": ["confirm_thing"], "trust_annotations": True})

    async def scenario():
        async with modern_client(ip, counting_log, UrlElicitations()) as client:
            held = await first_answer(client, "confirm_thing", {"name": "c"})
            assert isinstance(held, types.InputRequiredResult), held
            [(key, request)] = held.input_requests.items()
            service.alice.approve(request.params.url.rsplit("/", 1)[-1])
            ours = {key: types.ElicitResult(action="accept")}

            asked = await client.session.call_tool(
                "confirm_thing", {"name": "c"}, input_responses=ours,
                request_state=held.request_state, allow_input_required=True)
            assert isinstance(asked, types.InputRequiredResult), asked
            # The SDK seals the tool's state its own way: neither the tool's text nor ours.
            assert asked.request_state and asked.request_state != held.request_state
            assert asked.input_requests["confirm"].params.mode == "form"
            assert executions(counting_log) == [], "asked first, not run"

            confirm = {"confirm": types.ElicitResult(action="accept", content={})}
            done = await client.session.call_tool(
                "confirm_thing", {"name": "c"}, input_responses=confirm,
                request_state=asked.request_state, allow_input_required=True)
            assert isinstance(done, types.CallToolResult) and not done.is_error, done
            assert "after confirmation (execution 1)" in done.content[0].text

            # The upstream's state was a single pass: once more is refused, nothing runs again.
            again = await refused_or_error(client, "confirm_thing", {"name": "c"}, confirm,
                                           asked.request_state)
            assert again, "the upstream's state let a second execution through"

    anyio.run(scenario)
    assert executions(counting_log) == ["c"]
    check = ip.cross_check()
    assert check.returncode == 0, check.stdout + check.stderr
    outcomes = [l.get("outcome") for l in ip.audit_lines() if l.get("kind") == "mcp_outcome"]
    assert outcomes.count("executed") == 1 and outcomes.count("continued") == 1, outcomes
