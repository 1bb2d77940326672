// An upstream MCP server that reads its stdin exactly as the TypeScript SDK does: the SDK's own
// StdioServerTransport (ReadBuffer: split on "\n", one trailing "\r" dropped, the bytes decoded
// as UTF-8 with replacement, JSON.parse, then the SDK's JSONRPCMessageSchema) feeding the SDK's
// low-level Server (@modelcontextprotocol/sdk, pinned in package-lock.json).
//
// Every tools/call the SDK hands to the tool handler is appended, before anything else, to
// $READER_RECORD as one JSON line {"reader": "typescript", "tool", "case"} (case: the corpus
// marker in its arguments): that record is what this server executed. Tools: read_file (read-only) and write_file.
// Used by test_differential_readers.py.
import { appendFileSync } from "node:fs";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const RECORD = process.env.READER_RECORD;
const TOOLS = [
  { name: "read_file", description: "Read a file.", inputSchema: { type: "object" },
    annotations: { readOnlyHint: true } },
  { name: "write_file", description: "Write a file.", inputSchema: { type: "object" },
    annotations: { destructiveHint: true, readOnlyHint: false } },
];
const KNOWN = new Set(TOOLS.map((t) => t.name));

const server = new Server({ name: "reader-typescript", version: "1" }, { capabilities: { tools: {} } });
server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: TOOLS }));
server.setRequestHandler(CallToolRequestSchema, async (request) => {
  const { name, arguments: args } = request.params;
  if (!KNOWN.has(name)) {
    return { content: [{ type: "text", text: "unknown tool" }], isError: true };
  }
  const c = args?.case;
  appendFileSync(RECORD, JSON.stringify({ reader: "typescript", tool: name, case: typeof c === "string" ? c : null }) + "\n");
  return { content: [{ type: "text", text: "done" }] };
});
// A frame the SDK cannot read is reported here and skipped, as the SDK does.
server.onerror = () => {};
await server.connect(new StdioServerTransport());
