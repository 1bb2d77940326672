// Unit tests of the standing-grant pieces (SPEC §14): patterns, the calls a grant names, and the
// shape of the scope, each rule once kept and once broken.

import assert from "node:assert/strict";
import { test } from "node:test";
import type { Value } from "../canon.js";
import { checkCoverage, OutOfScope, patternMatches, readScope, type Call } from "../standing.js";

/** An admitted value from plain JSON (objects as Maps, as admission gives them). */
function admitted(v: unknown): Value {
  if (Array.isArray(v)) return v.map(admitted);
  if (v !== null && typeof v === "object") return new Map(Object.entries(v).map(([k, x]) => [k, admitted(x)]));
  return v as Value;
}

const grant = (calls: object, constraints: object[] = []) =>
  admitted({ calls, agent_id: "agent-7", tool_name: "payments.*", constraints, max_uses: 3, expires_at: "2026-11-21T10:00:00Z" }) as Map<string, Value>;
const MCP = "countersign.mcp-tool-call/1";
const call = (over: Partial<Call> = {}): Call => ({
  profile: MCP,
  serverId: "payments-server",
  agentId: "agent-7",
  toolName: "payments.transfer",
  params: admitted({ amount: "5.00" }),
  ...over,
});
const outside = (f: () => unknown) => assert.throws(f, (e: unknown) => e instanceof OutOfScope);

test("a pattern's star matches any run of characters, every other character itself", () => {
  for (const [p, t] of [["payments.*", "payments.transfer"], ["payments.*", "payments."], ["*", ""], ["a*b*c", "abc"], ["a*b*c", "aXbYbc"], ["x-1", "x-1"]]) {
    assert.ok(patternMatches(p!, t!), `${p} ${t}`);
  }
  for (const [p, t] of [["payments.*", "payments"], ["a*a", "a"], ["a*b*c", "acb"], ["x-1", "x-12"], ["é", "e"]]) {
    assert.ok(!patternMatches(p!, t!), `${p} ${t}`);
  }
});

test("a grant covers the profile and server it names, and nothing else", () => {
  const scope = readScope(grant({ profile: MCP, server_id: "payments-server", gateways: ["ci-gw"] }));
  checkCoverage(scope, 1, call());
  outside(() => checkCoverage(scope, 1, call({ serverId: "other-server" })));
  outside(() => checkCoverage(scope, 1, call({ profile: "countersign.tool-call/1", serverId: null })));
  // A grant that names no server covers no call that signs one.
  const unnamed = readScope(grant({ profile: MCP, gateways: ["ci-gw"] }));
  outside(() => checkCoverage(unnamed, 1, call()));
});

test("a grant whose calls are missing, null or malformed is unreadable", () => {
  const ok = { profile: MCP, server_id: "s", gateways: ["ci-gw"] };
  readScope(grant(ok));
  for (const calls of [
    { profile: MCP, server_id: null, gateways: ["ci-gw"] },
    { profile: MCP, gateways: [] },
    { profile: MCP, gateways: ["a", "a"] },
    { profile: MCP, gateways: ["ci gw"] },
    { gateways: ["ci-gw"] },
    { ...ok, tenant: "x" },
  ]) {
    assert.throws(() => readScope(grant(calls)), /grant unreadable/, JSON.stringify(calls));
  }
  const noCalls = grant(ok);
  noCalls.delete("calls");
  assert.throws(() => readScope(noCalls), /grant unreadable/);
});

const TOOL_CALLS = { profile: "countersign.tool-call/1", gateways: ["ci-gw"] };
const DATA = { kind: "path", arg: "/path", under: "/srv/data" };
const fileRead = (path: unknown): Call =>
  call({ profile: "countersign.tool-call/1", serverId: null, toolName: "payments.read", params: admitted({ path }) });

test("a path rule covers a path inside its directory, and nothing outside it or read two ways", () => {
  const scope = readScope(grant(TOOL_CALLS, [DATA]));
  for (const path of ["/srv/data", "/srv/data/q3/report.pdf", "/srv//data/./q3/"]) checkCoverage(scope, 1, fileRead(path));
  for (const path of ["/srv/data2/x", "/srv/data/../../etc/shadow", "/srv/data/q3/../q4", "srv/data/x", "/srv/data\\x", "/srv/data/%2e%2e/x", "//srv/data/x", 7, ["/srv/data"]]) {
    outside(() => checkCoverage(scope, 1, fileRead(path)));
  }
});

test("a path rule's directory not in normal form, or a prefix holding a separator, makes the grant unreadable", () => {
  for (const under of ["/srv/data/", "/srv/../data", "srv/data", 3]) {
    assert.throws(() => readScope(grant(TOOL_CALLS, [{ ...DATA, under }])), /grant unreadable/, JSON.stringify(under));
  }
  assert.throws(() => readScope(grant(TOOL_CALLS, [{ ...DATA, prefix: "x" }])), /grant unreadable/);
  readScope(grant(TOOL_CALLS, [{ kind: "prefix", arg: "/path", prefix: "report-" }]));
  for (const prefix of ["/srv/data/", "C:\\data", ""]) {
    assert.throws(() => readScope(grant(TOOL_CALLS, [{ kind: "prefix", arg: "/path", prefix }])), /grant unreadable/, prefix);
  }
});
