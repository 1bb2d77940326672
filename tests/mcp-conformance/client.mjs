// A client for the suite's client scenarios (`conformance client --command ...`), on the pinned
// TypeScript SDK: connect, list the tools, call what the scenario's server offers, answer an
// elicitation with an empty accept (the SDK fills in the defaults), close.
//
// Usage: MCP_CONFORMANCE_SCENARIO=NAME node client.mjs URL
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const url = new URL(process.argv[2]);
const client = new Client({ name: 'countersign-conformance-client', version: '1.0.0' },
  { capabilities: { elicitation: { form: { applyDefaults: true } } } });
client.setRequestHandler(ElicitRequestSchema, async () => ({ action: 'accept', content: {} }));
const transport = new StreamableHTTPClientTransport(url);
await client.connect(transport);
const { tools } = await client.listTools();
for (const tool of tools) {
  const args = tool.name === 'add_numbers' ? { a: 5, b: 3 } : {};
  await client.callTool({ name: tool.name, arguments: args });
}
await transport.close();
