// Standing grants (docs/SPEC.md §14): the grant's signed fields read as a scope, and whether a call
// is inside it. The evidence itself is verified by evidence.ts, as for any entry, with the three
// differences §14.3 step 4 names.

import type { Value } from "./canon.js";
import type { Node } from "./json.js";
import { pathCovers, PathRefused, pathUnder, prefixTextReadable } from "./path.js";
import { parseTime, type Instant } from "./time.js";

/** The profile an approver signs a grant under. */
export const STANDING_PROFILE = "countersign.standing-grant/2";

/** A call outside the grant (SPEC §14.3 step 7): `out_of_scope`. */
export class OutOfScope extends Error {}

interface Calls {
  profile: string;
  server_id: string | null;
  gateways: string[];
}

interface Rule {
  kind: "one_of" | "prefix" | "path" | "max" | "currency";
  path: string[];
  values: Value[];
  prefix: string;
  /** A `path` rule's directory, in normal form (SPEC §14.4). */
  under: string;
  max: Amount | null;
  allowed: string[];
}

export interface Scope {
  calls: Calls;
  agent: string;
  tool: string;
  rules: Rule[];
  maxUses: number;
  expiresAt: Instant;
}

/** The call the gateway is about to run, as the grant sees it. */
export interface Call {
  profile: string;
  serverId: string | null;
  agentId: string;
  toolName: string;
  params: Value;
}

const MEMBERS: Record<Rule["kind"], string[]> = {
  one_of: ["arg", "values"],
  prefix: ["arg", "prefix"],
  path: ["arg", "under"],
  max: ["arg", "max"],
  currency: ["arg", "allowed"],
};
const GATEWAY = /^[A-Za-z0-9._-]{1,64}$/;
// Unicode Cc, as the Rust `char::is_control`.
const CONTROL = /\p{Cc}/u;
const utf8Length = (s: string) => Buffer.byteLength(s, "utf8");

/** A node back to JSON text, every member and lexeme as written (duplicates included), so that the
 * grant's fields are admitted by the same strict path as an action's. */
export function nodeText(n: Node): string {
  switch (n.t) {
    case "null":
      return "null";
    case "bool":
      return String(n.v);
    case "num":
      return n.lex;
    case "str":
      return JSON.stringify(n.v);
    case "arr":
      return `[${n.items.map(nodeText).join(",")}]`;
    case "obj":
      return `{${n.members.map(([k, v]) => `${JSON.stringify(k)}:${nodeText(v)}`).join(",")}}`;
  }
}

function fail(why: string): never {
  throw new Error(`grant unreadable: ${why}`);
}

function name(v: Value | undefined, limit = 256): string {
  if (typeof v !== "string" || v === "" || utf8Length(v) > limit || CONTROL.test(v)) fail(`bad name ${JSON.stringify(v)}`);
  return v;
}

function only(m: Map<string, Value>, required: string[], optional: string[] = []): void {
  for (const k of required) if (!m.has(k)) fail(`missing ${k}`);
  for (const k of m.keys()) if (!required.includes(k) && !optional.includes(k)) fail(`unknown member ${k}`);
}

/** A JSON Pointer into the call's arguments (SPEC §12.1): its tokens. */
function pointer(v: Value | undefined): string[] {
  if (typeof v !== "string" || utf8Length(v) > 256 || !v.startsWith("/") || CONTROL.test(v)) fail(`bad argument path ${JSON.stringify(v)}`);
  const tokens = v.slice(1).split("/").map((raw) => {
    if (raw === "" || /~(?![01])/.test(raw)) fail(`bad argument path ${v}`);
    return raw.replace(/~1/g, "/").replace(/~0/g, "~");
  });
  if (tokens.length > 16) fail("argument path deeper than 16");
  return tokens;
}

/** An exact amount: sign, integer digits without leading zeros, fraction without trailing zeros. */
interface Amount {
  negative: boolean;
  int: string;
  frac: string;
}

const DECIMAL = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?$/;

/** A decimal string or a JSON integer (never a float, SPEC §12.1 `max`). */
function amount(v: Value | undefined): Amount | null {
  let text: string;
  if (typeof v === "number" && Number.isInteger(v)) text = String(v);
  else if (typeof v === "string") text = v;
  else return null;
  if ([...text].length > 64 || !DECIMAL.test(text)) return null;
  const negative = text.startsWith("-");
  const [i, f = ""] = (negative ? text.slice(1) : text).split(".");
  const int = i!.replace(/^0+/, "");
  const frac = f.replace(/0+$/, "");
  if (negative && int === "" && frac === "") return null; // negative zero
  return { negative, int, frac };
}

function magnitude(a: Amount, b: Amount): number {
  if (a.int.length !== b.int.length) return a.int.length < b.int.length ? -1 : 1;
  if (a.int !== b.int) return a.int < b.int ? -1 : 1;
  if (a.frac !== b.frac) return a.frac < b.frac ? -1 : 1;
  return 0;
}

/** The grant's admitted fields as a scope; throws when unreadable (`evidence_malformed`). */
export function readScope(fields: Map<string, Value>): Scope {
  only(fields, ["calls", "agent_id", "tool_name", "constraints", "max_uses", "expires_at"]);
  const c = fields.get("calls");
  if (!(c instanceof Map)) fail("calls is not an object");
  only(c, ["profile", "gateways"], ["server_id"]);
  // Present means a name: null is not absent.
  const server_id = c.has("server_id") ? name(c.get("server_id")) : null;
  const g = c.get("gateways");
  if (!Array.isArray(g) || g.length < 1 || g.length > 64) fail("calls.gateways: 1 to 64 names");
  const gateways = g.map((x) => {
    if (typeof x !== "string" || !GATEWAY.test(x)) fail(`bad gateway name ${JSON.stringify(x)}`);
    return x;
  });
  if (new Set(gateways).size !== gateways.length) fail("a gateway is named twice");
  const calls: Calls = { profile: name(c.get("profile")), server_id, gateways };
  const constraints = fields.get("constraints");
  if (!Array.isArray(constraints)) fail("constraints is not an array");
  const rules = constraints.map((r): Rule => {
    if (!(r instanceof Map)) fail("a constraint is not an object");
    const kind = r.get("kind");
    if (kind !== "one_of" && kind !== "prefix" && kind !== "path" && kind !== "max" && kind !== "currency") {
      fail(`constraint kind ${JSON.stringify(kind)}`);
    }
    only(r, ["kind", ...MEMBERS[kind]]);
    const rule: Rule = { kind, path: pointer(r.get("arg")), values: [], prefix: "", under: "", max: null, allowed: [] };
    if (kind === "one_of") {
      const values = r.get("values");
      if (!Array.isArray(values) || values.length === 0) fail("one_of lists nothing");
      rule.values = values;
    } else if (kind === "prefix") {
      const prefix = r.get("prefix");
      // A prefix holding a separator is a rule about paths, which is `path`'s (SPEC §14.4).
      if (typeof prefix !== "string" || !prefixTextReadable(prefix)) fail("prefix empty, or holding '/' or '\\'");
      rule.prefix = prefix;
    } else if (kind === "path") {
      const under = r.get("under");
      if (typeof under !== "string") fail("path: under is not a string");
      try {
        pathUnder(under);
      } catch (e) {
        if (e instanceof PathRefused) fail(`path: under ${e.message}`);
        throw e;
      }
      rule.under = under;
    } else if (kind === "max") {
      const max = r.get("max");
      const parsed = typeof max === "string" ? amount(max) : null;
      if (parsed === null || parsed.negative) fail("max is not a decimal of zero or more");
      rule.max = parsed;
    } else {
      const allowed = r.get("allowed");
      if (!Array.isArray(allowed) || allowed.length === 0) fail("currency lists nothing");
      rule.allowed = allowed.map((x) => {
        if (typeof x !== "string" || !/^[A-Z]{3}$/.test(x)) fail(`bad currency ${JSON.stringify(x)}`);
        return x;
      });
    }
    return rule;
  });
  const maxUses = fields.get("max_uses");
  if (typeof maxUses !== "number" || maxUses < 1) fail("max_uses below 1");
  let expiresAt: Instant;
  try {
    expiresAt = parseTime(String(fields.get("expires_at")));
  } catch {
    fail("expires_at is not RFC 3339 with an offset");
  }
  return { calls, agent: name(fields.get("agent_id")), tool: name(fields.get("tool_name")), rules, maxUses, expiresAt };
}

/** `*` matches any run of characters, every other character itself (SPEC §12.1). */
export function patternMatches(pattern: string, text: string): boolean {
  // Code points, not UTF-16 units. The pieces between stars must appear in order: the first at
  // the start, the last at the end, each of the others at its leftmost place after the previous.
  const p = [...pattern];
  const t = [...text];
  const pieces: string[][] = [[]];
  for (const ch of p) {
    if (ch === "*") pieces.push([]);
    else pieces[pieces.length - 1]!.push(ch);
  }
  const at = (piece: string[], i: number) => piece.every((ch, j) => t[i + j] === ch);
  if (pieces.length === 1) return t.length === p.length && at(p, 0);
  const first = pieces[0]!;
  const last = pieces[pieces.length - 1]!;
  if (first.length + last.length > t.length || !at(first, 0) || !at(last, t.length - last.length)) return false;
  let i = first.length;
  const end = t.length - last.length;
  for (const piece of pieces.slice(1, -1)) {
    let found = -1;
    for (let k = i; k + piece.length <= end; k++) {
      if (at(piece, k)) {
        found = k;
        break;
      }
    }
    if (found < 0) return false;
    i = found + piece.length;
  }
  return true;
}

/** JSON equality over admitted values (Maps for objects): 1 is not "1", true is not 1. */
function jsonEqual(a: Value, b: Value): boolean {
  if (a instanceof Map || b instanceof Map) {
    if (!(a instanceof Map && b instanceof Map) || a.size !== b.size) return false;
    for (const [k, v] of a) if (!b.has(k) || !jsonEqual(v, b.get(k)!)) return false;
    return true;
  }
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((x, i) => jsonEqual(x, b[i]!));
  }
  return a === b;
}

function resolve(tokens: string[], args: Value): Value {
  let at: Value = args;
  for (const t of tokens) {
    if (at instanceof Map && at.has(t)) at = at.get(t)!;
    else if (Array.isArray(at) && /^(0|[1-9][0-9]*)$/.test(t) && Number(t) < at.length) at = at[Number(t)]!;
    else throw new OutOfScope(`argument ${t} is absent`);
  }
  return at;
}

/** SPEC §14.3 step 7: the use number, the calls (profile, server), agent, tool, each constraint. */
export function checkCoverage(scope: Scope, use: number, call: Call): void {
  if (use > scope.maxUses) throw new OutOfScope("use beyond max_uses");
  if (scope.calls.profile !== call.profile) throw new OutOfScope("another profile");
  if (scope.calls.server_id !== call.serverId) throw new OutOfScope("another server (or one side names none)");
  if (!patternMatches(scope.agent, call.agentId)) throw new OutOfScope("agent");
  if (!patternMatches(scope.tool, call.toolName)) throw new OutOfScope("tool");
  if (!(call.params instanceof Map)) throw new OutOfScope("arguments are not an object");
  for (const rule of scope.rules) {
    const value = resolve(rule.path, call.params);
    switch (rule.kind) {
      case "one_of":
        if (!rule.values.some((v) => jsonEqual(v, value))) throw new OutOfScope("one_of");
        break;
      case "prefix":
        if (typeof value !== "string" || !value.startsWith(rule.prefix)) throw new OutOfScope("prefix");
        break;
      case "path":
        if (!pathCovers(rule.under, value)) throw new OutOfScope("path: not inside the directory, or read two ways");
        break;
      case "currency":
        if (typeof value !== "string" || !rule.allowed.includes(value)) throw new OutOfScope("currency");
        break;
      case "max": {
        const got = amount(value);
        if (got === null || got.negative || magnitude(got, rule.max!) > 0) throw new OutOfScope("max");
        break;
      }
    }
  }
}
