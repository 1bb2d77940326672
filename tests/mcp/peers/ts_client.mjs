// A real TypeScript MCP client (@modelcontextprotocol/client, pinned in package.json) for the
// interposer tests. It connects over Streamable HTTP, runs one scenario and prints one JSON object
// on stdout, so pytest asserts on what the SDK itself surfaced.
//
//   node ts_client.mjs URL SCENARIO [JSON-ARGS]
//
// Scenarios:
//   list                        the tool names the server offered this client
//   call  {"name","arguments"}  tools/list, then a plain tools/call; result or error
//   progress {"name","arguments"}  a tools/call with a progress token; every progress notification
//                               in arrival order, then the result
//   url-elicitation {"name","arguments"}  declares URL elicitation, calls, reports a -32042 as the
//                               SDK typed it (UrlElicitationRequiredError) with its data untouched
// Env: MCP_BEARER adds `Authorization: Bearer …` to every request.
import { Client, StreamableHTTPClientTransport, UrlElicitationRequiredError } from "@modelcontextprotocol/client";

const [url, scenario, rawArgs] = process.argv.slice(2);
const args = rawArgs ? JSON.parse(rawArgs) : {};
const headers = process.env.MCP_BEARER ? { Authorization: `Bearer ${process.env.MCP_BEARER}` } : {};

const capabilities = scenario === "url-elicitation" ? { elicitation: { form: {}, url: {} } } : {};
const client = new Client({ name: "countersign-ts-peer", version: "1.0.0" }, { capabilities });
if (scenario === "url-elicitation") {
  // The retry of the upstream's own -32042 goes down the request path: accept it.
  client.setRequestHandler("elicitation/create", async () => ({ action: "accept" }));
}
const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });

function errorShape(e) {
  return {
    error: {
      type: e?.constructor?.name,
      code: e?.code,
      message: e?.message,
      data: e?.data,
      elicitations: e instanceof UrlElicitationRequiredError ? e.elicitations : undefined,
    },
  };
}

let out;
try {
  await client.connect(transport);
  out = { protocolVersion: transport.protocolVersion ?? client.getNegotiatedProtocolVersion?.() };
  if (scenario === "list") {
    const tools = await client.listTools();
    out.tools = tools.tools.map((t) => t.name);
  } else if (scenario === "call" || scenario === "url-elicitation") {
    // A host lists the tools before the model can call one; the interposer holds a tool it has
    // not seen listed (fail closed), so the scenarios do what hosts do.
    await client.listTools();
    try {
      out.result = await client.callTool({ name: args.name, arguments: args.arguments });
    } catch (e) {
      Object.assign(out, errorShape(e));
    }
  } else if (scenario === "progress") {
    await client.listTools();
    out.progress = [];
    try {
      out.result = await client.callTool(
        { name: args.name, arguments: args.arguments },
        { onprogress: (p) => out.progress.push(p), timeout: 120000 },
      );
    } catch (e) {
      Object.assign(out, errorShape(e));
    }
  } else {
    throw new Error(`unknown scenario ${scenario}`);
  }
} catch (e) {
  out = { ...out, ...errorShape(e), fatal: true };
} finally {
  await client.close().catch(() => {});
}
process.stdout.write(JSON.stringify(out) + "\n");
