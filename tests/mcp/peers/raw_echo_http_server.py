"""The smallest Streamable HTTP MCP server that answers `initialize`, `tools/list` and
`tools/call echo` at POST /mcp with `application/json` (no SDK, no SSE), so that the server's own
cost stays small next to what the HTTP benchmark measures. Keep-alive HTTP/1.1, one thread per
connection. Run: `python raw_echo_http_server.py PORT`."""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOOLS = {"tools": [{"name": "echo", "description": "Return the text.",
                    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
                    "annotations": {"readOnlyHint": True}}]}
SESSION = "raw-echo-session"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body are two writes: without this, Nagle and delayed ACKs add ~40 ms a call.
    disable_nagle_algorithm = True

    def log_message(self, *args):  # quiet
        pass

    def _send(self, status: int, body: bytes = b"", headers: dict = None) -> None:
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self._send(405)

    def do_DELETE(self):
        self._send(200)

    def do_POST(self):
        msg = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        if "id" not in msg or "method" not in msg:
            return self._send(202)
        method = msg["method"]
        headers = {"Content-Type": "application/json"}
        if method == "initialize":
            result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                      "serverInfo": {"name": "raw-echo-http", "version": "1"}}
            headers["Mcp-Session-Id"] = SESSION
        elif method == "tools/list":
            result = TOOLS
        elif method == "tools/call":
            result = {"content": [{"type": "text", "text": msg["params"]["arguments"]["text"]}]}
        else:
            body = {"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "method not found"}}
            return self._send(200, json.dumps(body).encode(), headers)
        body = {"jsonrpc": "2.0", "id": msg["id"], "result": result}
        self._send(200, json.dumps(body).encode(), headers)


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()
