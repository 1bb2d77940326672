"""Python MCP client helpers (the SDK `mcp` 2.3.0, pinned in requirements.txt) shared by the tests
and the benchmark: connect over stdio with or without an elicitation callback, call a tool and
return what the SDK surfaced (a result or the JSON-RPC error it raised)."""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Optional

import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError


@dataclass
class Outcome:
    """A tools/call as the client saw it: exactly one of `result` / `error` is set."""

    result: Optional[types.CallToolResult] = None
    error: Optional[MCPError] = None

    @property
    def text(self) -> str:
        assert self.result is not None, f"expected a result, got error {self.error!r}"
        return "".join(c.text for c in self.result.content if getattr(c, "type", "") == "text")

    @property
    def code(self) -> Optional[int]:
        return None if self.error is None else self.error.error.code

    @property
    def data(self) -> Any:
        return None if self.error is None else self.error.error.data


@dataclass
class UrlElicitations:
    """An elicitation callback that accepts every URL request and remembers it."""

    seen: list[types.ElicitRequestParams] = field(default_factory=list)

    async def __call__(self, context, params):  # ElicitationFnT
        self.seen.append(params)
        return types.ElicitResult(action="accept")


@contextlib.asynccontextmanager
async def stdio_session(
    command: str, args: list[str], env: Optional[dict[str, str]] = None, elicitation=None,
    errlog=sys.stderr, list_tools: bool = True,
) -> AsyncIterator[ClientSession]:
    """An initialized legacy-handshake (2025-11-25) session over stdio to `command args`.
    With `elicitation`, the client declares `elicitation: {form, url}`; without, no elicitation.
    Like an agent host, it lists the tools before calling any (the interposer holds a tool it has
    not seen listed)."""
    params = StdioServerParameters(command=command, args=args, env=env)
    async with stdio_client(params, errlog=errlog) as (read, write):
        async with ClientSession(read, write, elicitation_callback=elicitation) as session:
            await session.initialize()
            if list_tools:
                await session.list_tools()
            yield session


async def call(session: ClientSession, name: str, arguments: dict[str, Any], **kw) -> Outcome:
    try:
        return Outcome(result=await session.call_tool(name, arguments, **kw))
    except MCPError as e:
        return Outcome(error=e)
