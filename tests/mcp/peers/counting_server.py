"""A small MCP server (Python SDK `MCPServer`, stdio or Streamable HTTP) whose tools leave
evidence on disk: the exactly-once oracle of the interposer tests.

Tools:
- `delete_thing(name)`: destructive; appends one line `name` to $COUNTING_LOG every time it runs,
  so the number of lines is the number of executions, whatever any process says about it.
- `read_thing(name)`: read-only (`readOnlyHint: true`), appends nothing.
- `echo(text)`: read-only, returns its argument; the benchmark's pass-through call.
- `quick_thing(name)`: like `delete_thing`; the tests' service expires its approvals in 2 s.
- `slow_thing(name, seconds)`: destructive, sleeps then appends like `delete_thing`; lets a test
  kill a process while an execution is in flight.
- `confirm_thing(name)`: destructive, on 2026-07-28 asks the client to confirm first (the server's
  own multi round trip: an `InputRequiredResult` with its own `requestState`), then appends like
  `delete_thing`; on older revisions it runs at once.

Run: `python counting_server.py [stdio | http PORT]` with COUNTING_LOG set.
"""

from __future__ import annotations

import os
import pathlib
import sys
import time

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp_types import ElicitRequest, ElicitRequestFormParams, InputRequiredResult, ToolAnnotations

LOG = pathlib.Path(os.environ.get("COUNTING_LOG", "counting.log"))

server = MCPServer("countersign-counting-server")


def _record(name: str) -> int:
    # O_APPEND writes of one short line are atomic, so concurrent executions cannot interleave.
    with LOG.open("a", encoding="utf-8") as f:
        f.write(name + "\n")
    return len(LOG.read_text(encoding="utf-8").splitlines())


@server.tool(annotations=ToolAnnotations(destructive_hint=True, read_only_hint=False))
def delete_thing(name: str) -> str:
    """Delete a thing (destructive; each execution is recorded on disk)."""
    return f"deleted {name} (execution {_record(name)})"


@server.tool(annotations=ToolAnnotations(destructive_hint=True, read_only_hint=False))
def slow_thing(name: str, seconds: float) -> str:
    """Delete a thing slowly (destructive; recorded on disk after the wait)."""
    time.sleep(seconds)
    return f"deleted {name} slowly (execution {_record(name)})"


@server.tool(annotations=ToolAnnotations(destructive_hint=True, read_only_hint=False))
def quick_thing(name: str) -> str:
    """Like delete_thing; the tests' service gives its approvals a 2-second lifetime."""
    return f"deleted {name} quickly (execution {_record(name)})"


@server.tool(annotations=ToolAnnotations(destructive_hint=True, read_only_hint=False))
async def confirm_thing(name: str, ctx: Context) -> str | InputRequiredResult:
    """Delete a thing once the user confirmed (destructive; each execution is recorded on disk)."""
    modern = (ctx.protocol_version or "") >= "2026-07-28"
    confirmed = (ctx.input_responses or {}).get("confirm") is not None
    if modern and not (confirmed and ctx.request_state == f"confirm:{name}"):
        ask = ElicitRequest(
            method="elicitation/create",
            params=ElicitRequestFormParams(
                mode="form", message=f"Really delete {name}?",
                requested_schema={"type": "object", "properties": {}}),
        )
        return InputRequiredResult(input_requests={"confirm": ask}, request_state=f"confirm:{name}")
    return f"deleted {name} after confirmation (execution {_record(name)})"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def read_thing(name: str) -> str:
    """Read a thing (read-only; records nothing)."""
    return f"thing {name} is here"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def echo(text: str) -> str:
    """Return the text (read-only)."""
    return text


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if mode == "stdio":
        server.run("stdio")
    elif mode == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        raise SystemExit(f"usage: {sys.argv[0]} [stdio | http PORT]")
