// A real TypeScript MCP client that runs tool calls as tasks (protocol revision 2025-11-25):
// `@modelcontextprotocol/sdk` 1.32.2, pinned in package.json, whose experimental tasks client is
// the one SDK client that speaks that revision's tasks. It launches the interposer over stdio (or
// connects to it over Streamable HTTP) and prints one JSON line per event, as the events happen,
// so pytest can approve while it waits.
//
//   node ts_tasks_client.mjs SCENARIO '{"command", "args", "env", "name", "arguments"}'
//   node ts_tasks_client.mjs SCENARIO '{"url", "bearer", "name", "arguments"}'
//
// Scenarios:
//   run     tools/list, then callToolStream: the SDK itself decides to use a task (the tool says
//           `execution.taskSupport`); every stream message (taskCreated, taskStatus, result, error)
//   cancel  the same, and tasks/cancel as soon as the task exists; then the stream to its end
// First line: {"event":"connected", capabilities, taskSupport}. Last line: {"event":"done"}.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CallToolResultSchema } from "@modelcontextprotocol/sdk/types.js";

const [scenario, rawArgs] = process.argv.slice(2);
const args = JSON.parse(rawArgs);
const emit = (o) => process.stdout.write(JSON.stringify(o) + "\n");

const client = new Client({ name: "countersign-ts-tasks-peer", version: "1.0.0" }, { capabilities: {} });
const transport = args.url
  ? new StreamableHTTPClientTransport(new URL(args.url), {
      requestInit: { headers: { Authorization: `Bearer ${args.bearer}` } },
    })
  : new StdioClientTransport({
      command: args.command,
      args: args.args,
      env: { ...process.env, ...(args.env ?? {}) },
      stderr: "inherit",
    });

try {
  await client.connect(transport);
  const tools = await client.listTools();
  const tool = tools.tools.find((t) => t.name === args.name);
  emit({
    event: "connected",
    protocolVersion: transport._protocolVersion ?? null,
    capabilities: client.getServerCapabilities(),
    taskSupport: tool?.execution?.taskSupport ?? null,
  });
  const stream = client.experimental.tasks.callToolStream({ name: args.name, arguments: args.arguments });
  for await (const message of stream) {
    const out = { event: message.type };
    if (message.task) out.task = message.task;
    if (message.result) out.result = message.result;
    if (message.error) out.error = { code: message.error.code, message: message.error.message };
    emit(out);
    if (message.type === "taskCreated" && scenario === "cancel") {
      const cancelled = await client.experimental.tasks.cancelTask(message.task.taskId);
      emit({ event: "cancelled", task: cancelled });
      const result = await client.experimental.tasks.getTaskResult(message.task.taskId, CallToolResultSchema);
      emit({ event: "cancelledResult", result });
    }
  }
} catch (e) {
  emit({ event: "fatal", error: { code: e?.code, message: e?.message } });
} finally {
  await client.close().catch(() => {});
  emit({ event: "done" });
}
