"""An upstream MCP server that reads its stdin exactly as the Python SDK does: the SDK's own
`mcp.server.stdio.stdio_server` (its stdin is a UTF-8 `TextIOWrapper` with universal newlines and
`errors="replace"`, each line validated by pydantic) feeding the SDK's low-level `Server`.

Every `tools/call` the SDK hands to the tool handler is appended, before anything else happens,
to $READER_RECORD as one JSON line `{"reader": "python", "tool": ..., "case": ...}` (`case`: the
corpus marker in its arguments): that record is what this server executed. Tools: `read_file`
(read-only) and `write_file`. Used by test_differential_readers.py.
"""

from __future__ import annotations

import json
import os

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

RECORD = os.environ["READER_RECORD"]

TOOLS = [
    types.Tool(
        name="read_file",
        description="Read a file.",
        input_schema={"type": "object"},
        annotations=types.ToolAnnotations(read_only_hint=True),
    ),
    types.Tool(
        name="write_file",
        description="Write a file.",
        input_schema={"type": "object"},
        annotations=types.ToolAnnotations(destructive_hint=True, read_only_hint=False),
    ),
]
KNOWN = {tool.name for tool in TOOLS}


async def list_tools(ctx, params) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
    if params.name not in KNOWN:
        return types.CallToolResult(content=[types.TextContent(text="unknown tool")], is_error=True)
    args = params.arguments
    case = args.get("case") if isinstance(args, dict) else None
    line = json.dumps(
        {"reader": "python", "tool": params.name, "case": case if isinstance(case, str) else None}
    )
    with open(RECORD, "a", encoding="utf-8") as f:
        f.write(line + "\n")
    return types.CallToolResult(content=[types.TextContent(text="done")])


server = Server("reader-python", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
