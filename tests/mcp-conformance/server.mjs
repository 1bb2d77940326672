// The project's stand-in for the conformance suite's reference server.
//
// `@modelcontextprotocol/conformance` checks a server against what each of its server scenarios
// asks for (the "Server Implementation Requirements" of each scenario in the suite's
// src/scenarios/server). The suite's own reference server lives only in its GitHub repository,
// which CI cannot reach (CI reaches crates.io, PyPI, npm and Debian), so this file implements
// those requirements anew on the official TypeScript SDK, pinned in package-lock.json. It is a
// test fixture: its only job is to pass the suite bare, so that CI can check the interposer in
// front of it loses nothing. docs/MCP.md ("The official conformance suite") says how it compares
// with the suite's own server.
//
// Usage: node server.mjs   (listens on 127.0.0.1, a free port; prints "listening PORT")
import { randomUUID } from 'node:crypto';
import { McpServer, ResourceTemplate } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { createMcpExpressApp } from '@modelcontextprotocol/sdk/server/express.js';
import {
  CompleteRequestSchema,
  ElicitResultSchema,
  CreateMessageResultSchema,
  SubscribeRequestSchema,
  UnsubscribeRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';

// A 1x1 PNG and a 44-byte silent WAV: the smallest valid payloads of each kind.
const PNG =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC';
const WAV = Buffer.concat([
  Buffer.from('RIFF'), Buffer.from([36, 0, 0, 0]), Buffer.from('WAVEfmt '),
  Buffer.from([16, 0, 0, 0, 1, 0, 1, 0, 0x40, 0x1f, 0, 0, 0x80, 0x3e, 0, 0, 2, 0, 16, 0]),
  Buffer.from('data'), Buffer.from([0, 0, 0, 0]),
]).toString('base64');

const text = (t) => ({ content: [{ type: 'text', text: t }] });
const pause = (ms) => new Promise((r) => setTimeout(r, ms));

// A simple in-memory event store, so a client can resume a stream (Last-Event-ID) the server
// closed: the suite's SSE polling scenario.
class Events {
  constructor() { this.events = new Map(); }
  async storeEvent(streamId, message) {
    const id = `${streamId}_${randomUUID()}`;
    this.events.set(id, { streamId, message });
    return id;
  }
  async getStreamIdForEventId(id) { return this.events.get(id)?.streamId; }
  async replayEventsAfter(last, { send }) {
    const at = this.events.get(last);
    if (!at) return '';
    let after = false;
    for (const [id, e] of this.events) {
      if (id === last) { after = true; continue; }
      if (after && e.streamId === at.streamId) await send(id, e.message);
    }
    return at.streamId;
  }
}

const transports = new Map();

function build() {
  const mcp = new McpServer(
    { name: 'countersign-conformance-stand-in', version: '1.0.0' },
    { capabilities: { tools: { listChanged: true }, resources: { subscribe: true, listChanged: true },
      prompts: { listChanged: true }, logging: {}, completions: {} } },
  );
  const server = mcp.server;

  // Tools (scenarios tools-*, json-schema-2020-12, elicitation-*, server-sse-polling).
  mcp.registerTool('test_simple_text', { description: 'Answers with one text item' },
    async () => text('This is a simple text response for testing.'));
  mcp.registerTool('test_image_content', { description: 'Answers with a PNG image' },
    async () => ({ content: [{ type: 'image', data: PNG, mimeType: 'image/png' }] }));
  mcp.registerTool('test_audio_content', { description: 'Answers with a WAV clip' },
    async () => ({ content: [{ type: 'audio', data: WAV, mimeType: 'audio/wav' }] }));
  mcp.registerTool('test_embedded_resource', { description: 'Answers with an embedded resource' },
    async () => ({ content: [{ type: 'resource', resource: {
      uri: 'test://embedded-resource', mimeType: 'text/plain',
      text: 'This is an embedded resource content.' } }] }));
  mcp.registerTool('test_multiple_content_types', { description: 'Answers with text, image and resource' },
    async () => ({ content: [
      { type: 'text', text: 'Multiple content types test:' },
      { type: 'image', data: PNG, mimeType: 'image/png' },
      { type: 'resource', resource: { uri: 'test://mixed-content-resource',
        mimeType: 'application/json', text: JSON.stringify({ test: 'data', value: 123 }) } },
    ] }));
  mcp.registerTool('test_tool_with_logging', { description: 'Logs three messages while it runs', inputSchema: {} },
    async (_args, extra) => {
      const log = (data) => server.sendLoggingMessage({ level: 'info', data }, extra.sessionId);
      await log('Tool execution started');
      await pause(50);
      await log('Tool processing data');
      await pause(50);
      await log('Tool execution completed');
      return text('Logging test completed');
    });
  mcp.registerTool('test_tool_with_progress', { description: 'Reports progress 0, 50, 100 of 100', inputSchema: {} },
    async (_args, extra) => {
      const token = extra._meta?.progressToken;
      for (const progress of [0, 50, 100]) {
        if (token !== undefined) {
          await extra.sendNotification({ method: 'notifications/progress',
            params: { progressToken: token, progress, total: 100 } });
        }
        if (progress < 100) await pause(50);
      }
      return text('Progress test completed');
    });
  mcp.registerTool('test_error_handling', { description: 'Always fails' }, async () => {
    throw new Error('This tool intentionally returns an error for testing');
  });
  mcp.registerTool('test_sampling', { description: 'Asks the client to sample a completion',
    inputSchema: { prompt: z.string() } }, async ({ prompt }, extra) => {
    const answer = await extra.sendRequest({ method: 'sampling/createMessage', params: {
      messages: [{ role: 'user', content: { type: 'text', text: prompt } }], maxTokens: 100 } },
    CreateMessageResultSchema);
    const said = answer.content?.type === 'text' ? answer.content.text : JSON.stringify(answer.content);
    return text(`LLM response: ${said}`);
  });
  const elicit = async (extra, message, properties, required = []) => {
    const r = await extra.sendRequest({ method: 'elicitation/create', params: {
      message, requestedSchema: { type: 'object', properties, required } } }, ElicitResultSchema);
    return r;
  };
  mcp.registerTool('test_elicitation', { description: 'Asks the user for input',
    inputSchema: { message: z.string() } }, async ({ message }, extra) => {
    const r = await elicit(extra, message, {
      username: { type: 'string', description: "User's response" },
      email: { type: 'string', description: "User's email address" },
    }, ['username', 'email']);
    return text(`User response: action=${r.action}, content=${JSON.stringify(r.content ?? {})}`);
  });
  mcp.registerTool('test_elicitation_sep1034_defaults', { description: 'Elicitation with defaults (SEP-1034)', inputSchema: {} },
    async (_args, extra) => {
      const r = await elicit(extra, 'Confirm or change the defaults', {
        name: { type: 'string', description: 'Name', default: 'John Doe' },
        age: { type: 'integer', description: 'Age', default: 30 },
        score: { type: 'number', description: 'Score', default: 95.5 },
        status: { type: 'string', description: 'Status', enum: ['active', 'inactive', 'pending'], default: 'active' },
        verified: { type: 'boolean', description: 'Verified', default: true },
      });
      return text(`Elicitation completed: action=${r.action}, content=${JSON.stringify(r.content ?? {})}`);
    });
  mcp.registerTool('test_elicitation_sep1330_enums', { description: 'Elicitation with the five enum forms (SEP-1330)', inputSchema: {} },
    async (_args, extra) => {
      const r = await elicit(extra, 'Pick from each list', {
        untitledSingle: { type: 'string', enum: ['option1', 'option2', 'option3'] },
        titledSingle: { type: 'string', oneOf: [
          { const: 'value1', title: 'First Option' }, { const: 'value2', title: 'Second Option' },
          { const: 'value3', title: 'Third Option' }] },
        legacyEnum: { type: 'string', enum: ['opt1', 'opt2', 'opt3'],
          enumNames: ['Option One', 'Option Two', 'Option Three'] },
        untitledMulti: { type: 'array', items: { type: 'string', enum: ['option1', 'option2', 'option3'] } },
        titledMulti: { type: 'array', items: { anyOf: [
          { const: 'value1', title: 'First Choice' }, { const: 'value2', title: 'Second Choice' },
          { const: 'value3', title: 'Third Choice' }] } },
      });
      return text(`Elicitation completed: action=${r.action}, content=${JSON.stringify(r.content ?? {})}`);
    });
  mcp.registerTool('test_reconnection', { description: 'Closes its SSE stream, then answers (SEP-1699)', inputSchema: {} },
    async (_args, extra) => {
      transports.get(extra.sessionId)?.closeSSEStream(extra.requestId);
      await pause(100);
      return text('Reconnection test completed successfully.');
    });
  // The JSON Schema 2020-12 scenario needs `$schema`, `$defs` and `additionalProperties` kept as
  // written: registered through the low-level handler below, not through a zod schema.
  const schemaTool = {
    name: 'json_schema_2020_12_tool',
    description: 'Tool with JSON Schema 2020-12 features',
    inputSchema: {
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      type: 'object',
      $defs: { address: { type: 'object', properties: { street: { type: 'string' }, city: { type: 'string' } } } },
      properties: { name: { type: 'string' }, address: { $ref: '#/$defs/address' } },
      additionalProperties: false,
    },
  };

  // Resources (resources-*).
  mcp.registerResource('static-text', 'test://static-text', { description: 'A text resource', mimeType: 'text/plain' },
    async () => ({ contents: [{ uri: 'test://static-text', mimeType: 'text/plain',
      text: 'This is the content of the static text resource.' }] }));
  mcp.registerResource('static-binary', 'test://static-binary', { description: 'A PNG resource', mimeType: 'image/png' },
    async () => ({ contents: [{ uri: 'test://static-binary', mimeType: 'image/png', blob: PNG }] }));
  mcp.registerResource('template', new ResourceTemplate('test://template/{id}/data', { list: undefined }),
    { description: 'A resource template', mimeType: 'application/json' },
    async (uri, { id }) => ({ contents: [{ uri: uri.toString(), mimeType: 'application/json',
      text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${id}` }) }] }));
  mcp.registerResource('watched', 'test://watched-resource', { description: 'A resource to subscribe to', mimeType: 'text/plain' },
    async () => ({ contents: [{ uri: 'test://watched-resource', mimeType: 'text/plain', text: 'watched' }] }));
  const subscribed = new Set();
  server.setRequestHandler(SubscribeRequestSchema, async (r) => { subscribed.add(r.params.uri); return {}; });
  server.setRequestHandler(UnsubscribeRequestSchema, async (r) => { subscribed.delete(r.params.uri); return {}; });

  // Prompts (prompts-*) and completion (completion-complete).
  mcp.registerPrompt('test_simple_prompt', { description: 'A prompt without arguments' },
    async () => ({ messages: [{ role: 'user', content: { type: 'text', text: 'This is a simple prompt for testing.' } }] }));
  mcp.registerPrompt('test_prompt_with_arguments', { description: 'A prompt with two arguments',
    argsSchema: { arg1: z.string(), arg2: z.string() } },
  async ({ arg1, arg2 }) => ({ messages: [{ role: 'user', content: { type: 'text',
    text: `Prompt with arguments: arg1='${arg1}', arg2='${arg2}'` } }] }));
  mcp.registerPrompt('test_prompt_with_embedded_resource', { description: 'A prompt embedding a resource',
    argsSchema: { resourceUri: z.string() } },
  async ({ resourceUri }) => ({ messages: [
    { role: 'user', content: { type: 'resource', resource: { uri: resourceUri, mimeType: 'text/plain',
      text: 'Embedded resource content for testing.' } } },
    { role: 'user', content: { type: 'text', text: 'Please process the embedded resource above.' } },
  ] }));
  mcp.registerPrompt('test_prompt_with_image', { description: 'A prompt with an image' },
    async () => ({ messages: [
      { role: 'user', content: { type: 'image', data: PNG, mimeType: 'image/png' } },
      { role: 'user', content: { type: 'text', text: 'Please analyze the image above.' } },
    ] }));
  server.setRequestHandler(CompleteRequestSchema, async () => ({ completion: { values: [], total: 0, hasMore: false } }));

  // tools/list: the SDK's own list plus the 2020-12 tool as written.
  const listed = server._requestHandlers.get('tools/list');
  server._requestHandlers.set('tools/list', async (request, extra) => {
    const out = await listed(request, extra);
    return { ...out, tools: [...out.tools, schemaTool] };
  });
  return mcp;
}

// createMcpExpressApp on 127.0.0.1 refuses a Host that is not localhost (the DNS rebinding
// scenario).
const app = createMcpExpressApp();
app.post('/mcp', async (req, res) => {
  const id = req.headers['mcp-session-id'];
  let transport = id ? transports.get(id) : undefined;
  if (!transport) {
    if (id || req.body?.method !== 'initialize') {
      res.status(id ? 404 : 400).json({ jsonrpc: '2.0', id: null,
        error: { code: -32000, message: id ? 'Session not found' : 'No session: initialize first' } });
      return;
    }
    transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      eventStore: new Events(),
      retryInterval: 500,
      onsessioninitialized: (sid) => transports.set(sid, transport),
    });
    transport.onclose = () => transports.delete(transport.sessionId);
    await build().connect(transport);
  }
  await transport.handleRequest(req, res, req.body);
});
const bySession = async (req, res) => {
  const transport = transports.get(req.headers['mcp-session-id']);
  if (!transport) {
    res.status(400).send('missing or unknown session');
    return;
  }
  await transport.handleRequest(req, res);
};
app.get('/mcp', bySession);
app.delete('/mcp', bySession);
const listener = app.listen(0, '127.0.0.1', () => console.log(`listening ${listener.address().port}`));
