// Admission, NFC, profiles, JCS (RFC 8785) and op_hash, written from docs/spec/canon.md.
//
// Every refusal is a Refused with reason code action_inadmissible (or profile_unknown). Unicode
// comes from the JavaScript engine: String.prototype.normalize for NFC and the \p{...} regular
// expression classes for assigned code points and noncharacters, both from Node's ICU. When that
// ICU is older than the Unicode version the vectors pin, the harness says so in its hello line.

import { createHash } from "node:crypto";
import { decodeUtf8, JsonError, parse, type Node } from "./json.js";

export const MAX_FIELDS_BYTES = 65536;
export const MAX_DEPTH = 32;
const SAFE = 2n ** 53n - 1n;

/** A DENY (or an op_hash refusal) with its reason code. */
export class Refused extends Error {
  constructor(
    readonly code: string,
    detail = "",
  ) {
    super(detail ? `${code}: ${detail}` : code);
  }
}

const inadmissible = (detail: string) => new Refused("action_inadmissible", detail);

/** `require`: a string NFC would change is refused; `normalize`: it is normalized (canon.md §3). */
export type NfcMode = "require" | "normalize";

/** An admitted JSON value: strings in NFC, integers only, objects as Maps (no prototype games). */
export type Value = null | boolean | number | string | Value[] | Map<string, Value>;

type FieldType = "string" | "decimal" | "currency" | "identifier" | "integer" | "boolean" | "object" | "any";
interface Field {
  name: string;
  type: FieldType;
  exact: boolean;
}

/** The built-in profiles (canon.md §4), the only ones this harness trusts. */
export const PROFILES: ReadonlyMap<string, readonly Field[]> = new Map([
  [
    "countersign.payment/1",
    [
      { name: "amount", type: "decimal", exact: true },
      { name: "currency", type: "currency", exact: true },
      { name: "source_account", type: "identifier", exact: true },
      { name: "destination_account", type: "identifier", exact: true },
      { name: "reference", type: "string", exact: true },
    ],
  ],
  [
    "countersign.tool-call/1",
    [
      { name: "agent_id", type: "string", exact: true },
      { name: "tool_name", type: "string", exact: true },
      { name: "params", type: "object", exact: false },
    ],
  ],
  [
    "countersign.mcp-tool-call/1",
    [
      { name: "agent_id", type: "string", exact: true },
      { name: "server_id", type: "string", exact: true },
      { name: "tool_name", type: "string", exact: true },
      { name: "params", type: "object", exact: false },
    ],
  ],
  [
    // SPEC §14.1: a standing grant's scope is its fields.
    "countersign.standing-grant/2",
    [
      { name: "calls", type: "object", exact: false },
      { name: "agent_id", type: "string", exact: true },
      { name: "tool_name", type: "string", exact: true },
      { name: "constraints", type: "any", exact: false },
      { name: "max_uses", type: "integer", exact: false },
      { name: "expires_at", type: "string", exact: true },
    ],
  ],
]);

const UNASSIGNED = /\p{gc=Cn}/u;
const NONCHARACTER = /\p{Noncharacter_Code_Point}/u;

function checkString(s: string, path: string, mode: NfcMode): string {
  // The parser already refused lone surrogates (they only arrive as escapes).
  if (NONCHARACTER.test(s)) throw inadmissible(`noncharacter in ${path}`);
  const un = UNASSIGNED.exec(s);
  if (un) throw inadmissible(`unassigned U+${un[0].codePointAt(0)!.toString(16).toUpperCase()} in ${path}`);
  const n = s.normalize("NFC");
  if (n !== s && mode === "require") {
    const changed = [...s].filter((ch) => ch.normalize("NFC") !== ch);
    throw inadmissible(`string at ${path} is not in NFC (${changed.map(cp).join(", ") || "a sequence"})`);
  }
  return n;
}

const cp = (ch: string) => `U+${ch.codePointAt(0)!.toString(16).toUpperCase().padStart(4, "0")}`;
const pointer = (path: string, key: string) => `${path}/${key.replace(/~/g, "~0").replace(/\//g, "~1")}`;

function admitNode(n: Node, path: string, mode: NfcMode): Value {
  switch (n.t) {
    case "null":
      return null;
    case "bool":
      return n.v;
    case "num": {
      if (/[.eE]/.test(n.lex)) throw inadmissible(`float ${n.lex} at ${path}`);
      const big = BigInt(n.lex);
      if (big > SAFE || big < -SAFE) throw inadmissible(`integer out of range at ${path}`);
      return Number(big); // "-0" becomes 0: JCS prints the integer zero either way
    }
    case "str":
      return checkString(n.v, path, mode);
    case "arr":
      return n.items.map((x, i) => admitNode(x, `${path}/${i}`, mode));
    case "obj": {
      const raw = new Set<string>();
      const out = new Map<string, Value>();
      for (const [k, v] of n.members) {
        if (raw.has(k)) throw inadmissible(`duplicate key at ${pointer(path, k)}`);
        raw.add(k);
        const nk = checkString(k, pointer(path, k), mode);
        if (out.has(nk)) throw inadmissible(`two keys equal after NFC at ${pointer(path, nk)}`);
        out.set(nk, admitNode(v, pointer(path, k), mode));
      }
      return out;
    }
  }
}

/** Grammar and caps, with canon.md's rule names turned into action_inadmissible. */
export function parseAdmissible(text: string, maxDepth: number): Node {
  try {
    return parse(text, maxDepth);
  } catch (e) {
    if (e instanceof JsonError) throw inadmissible(e.message);
    throw e;
  }
}

const DECIMAL = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?$/;

function fieldOk(type: FieldType, n: Node): boolean {
  switch (type) {
    case "string":
      return n.t === "str";
    case "decimal":
      return n.t === "str" && [...n.v].length <= 64 && DECIMAL.test(n.v) && !/^-[0.]*$/.test(n.v);
    case "currency":
      return n.t === "str" && /^[A-Z]{3}$/.test(n.v);
    case "identifier":
      return n.t === "str" && /^[\x21-\x7e]{1,256}$/.test(n.v);
    case "integer":
      return n.t === "num" && !/[.eE]/.test(n.lex);
    case "boolean":
      return n.t === "bool";
    case "object":
      return n.t === "obj";
    case "any":
      return true;
  }
}

/** Admit the exact bytes of a fields object under a built-in profile. */
export function admitFields(profile: string, bytes: Uint8Array, mode: NfcMode): Map<string, Value> {
  const fields = PROFILES.get(profile);
  if (fields === undefined) throw new Refused("profile_unknown", profile);
  if (bytes.length > MAX_FIELDS_BYTES) throw inadmissible(`fields are ${bytes.length} bytes`);
  let text: string;
  try {
    text = decodeUtf8(bytes);
  } catch (e) {
    throw inadmissible((e as Error).message);
  }
  return admitFieldsNode(fields, parseAdmissible(text, MAX_DEPTH), mode);
}

function admitFieldsNode(fields: readonly Field[], node: Node, mode: NfcMode): Map<string, Value> {
  const value = admitNode(node, "", mode);
  if (node.t !== "obj" || !(value instanceof Map)) throw inadmissible("fields must be an object");
  const names = new Set(fields.map((f) => f.name));
  // An undeclared field first: it is how content the approver never saw would ride along.
  for (const k of value.keys()) if (!names.has(k)) throw inadmissible(`undeclared field ${JSON.stringify(k)}`);
  for (const f of fields) if (!value.has(f.name)) throw inadmissible(`missing field ${f.name}`);
  for (const f of fields) {
    const raw = node.members.find(([k]) => k.normalize("NFC") === f.name)?.[1];
    if (raw === undefined || !fieldOk(f.type, raw)) throw inadmissible(`${f.name} is not a valid ${f.type}`);
    if (f.exact && raw.t === "str" && raw.v.normalize("NFC") !== raw.v) throw inadmissible(`${f.name} is exact and not in NFC`);
  }
  return value;
}

/** RFC 8785: members sorted by UTF-16 code units (JavaScript's default string order), strings
 * with the minimal escapes, integers as themselves. */
export function jcs(v: Value): string {
  if (v === null) return "null";
  if (typeof v === "boolean") return v ? "true" : "false";
  if (typeof v === "number") return String(v);
  if (typeof v === "string") return jcsString(v);
  if (Array.isArray(v)) return `[${v.map(jcs).join(",")}]`;
  const keys = [...v.keys()].sort();
  return `{${keys.map((k) => `${jcsString(k)}:${jcs(v.get(k)!)}`).join(",")}}`;
}

const SHORT: Record<number, string> = { 8: "\\b", 9: "\\t", 10: "\\n", 12: "\\f", 13: "\\r" };

function jcsString(s: string): string {
  let out = '"';
  for (const ch of s) {
    const c = ch.charCodeAt(0);
    if (ch === '"') out += '\\"';
    else if (ch === "\\") out += "\\\\";
    else if (c < 0x20) out += SHORT[c] ?? `\\u${c.toString(16).padStart(4, "0")}`;
    else out += ch;
  }
  return `${out}"`;
}

export type Decision = "APPROVED" | "DENIED";

/** op_hash = SHA-256(JCS({"decision", "fields", "profile"})). */
export function opHash(profile: string, decision: Decision, fields: Map<string, Value>): Buffer {
  const doc = new Map<string, Value>([
    ["profile", profile],
    ["decision", decision],
    ["fields", fields],
  ]);
  return createHash("sha256").update(jcs(doc), "utf8").digest();
}

/** The op-hash document `{"profile", "decision", "fields"}` as `countersign op-hash` reads it:
 * parsed once as a whole (one level more for the wrapper), fields held to the same caps, NFC
 * normalized (the op-hash command's mode). */
export function opHashDocument(bytes: Uint8Array): Buffer {
  let text: string;
  try {
    text = decodeUtf8(bytes);
  } catch (e) {
    throw inadmissible((e as Error).message);
  }
  const doc = parseAdmissible(text, MAX_DEPTH + 1);
  if (doc.t !== "obj") throw inadmissible("the document must be an object");
  const names = doc.members.map(([k]) => k);
  if (new Set(names).size !== names.length) throw inadmissible("duplicate document member");
  if (names.length !== 3 || !["profile", "decision", "fields"].every((k) => names.includes(k))) {
    throw inadmissible("members must be exactly profile, decision, fields");
  }
  const get = (k: string) => doc.members.find(([m]) => m === k)![1];
  const profile = get("profile");
  const decision = get("decision");
  const fieldsNode = get("fields");
  if (profile.t !== "str") throw inadmissible("profile must be a string");
  const fields = PROFILES.get(profile.v);
  if (fields === undefined) throw new Refused("profile_unknown", profile.v);
  if (decision.t !== "str" || (decision.v !== "APPROVED" && decision.v !== "DENIED")) throw inadmissible("decision");
  if (Buffer.byteLength(text.slice(fieldsNode.start, fieldsNode.end), "utf8") > MAX_FIELDS_BYTES) {
    throw inadmissible("fields over 65,536 bytes");
  }
  return opHash(profile.v, decision.v, admitFieldsNode(fields, fieldsNode, "normalize"));
}
