"""The smallest MCP server that answers `initialize`, `tools/list` and `tools/call echo` over
stdio: newline-delimited JSON-RPC, no SDK. The benchmark uses it so that the server's own cost is
small next to what is measured (the interposer's added latency)."""

import json
import sys

TOOLS = {"tools": [{"name": "echo", "description": "Return the text.",
                    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
                    "annotations": {"readOnlyHint": True}}]}


def main() -> None:
    out = sys.stdout
    for line in sys.stdin:
        msg = json.loads(line)
        if "id" not in msg:
            continue  # notifications
        method = msg.get("method")
        if method == "initialize":
            result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                      "serverInfo": {"name": "raw-echo", "version": "1"}}
        elif method == "tools/list":
            result = TOOLS
        elif method == "tools/call":
            result = {"content": [{"type": "text", "text": msg["params"]["arguments"]["text"]}]}
        else:
            out.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"],
                                  "error": {"code": -32601, "message": "method not found"}}) + "\n")
            out.flush()
            continue
        out.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
