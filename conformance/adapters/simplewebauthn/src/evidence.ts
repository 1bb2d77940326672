// verify_evidence (docs/SPEC.md §6) around @simplewebauthn/server.
//
// The WebAuthn layer (clientDataJSON type, challenge, origin, topOrigin, authenticatorData framing,
// rpIdHash, UP, UV, BS without BE, counter, signature) is @simplewebauthn/server's
// verifyAuthenticationResponse. Everything Countersign adds (the CASE, the result envelope, the
// entry format, the binding of nonce, op_hash and decision, operation binding, eligibility, BE
// against enrollment, freshness, replay inside one CASE, assurance, quorum) is written here from
// docs/SPEC.md and /work's contract text, not from the Rust code.

import { verifyAuthenticationResponse } from "@simplewebauthn/server";
import { decodeCredentialPublicKey } from "@simplewebauthn/server/helpers";
import { admitFields, opHash, PROFILES, Refused, type Decision, type NfcMode, type Value } from "./canon.js";
import { decodeUtf8, hasDuplicate, JsonError, member, parse, plain, type Node } from "./json.js";
import { checkCoverage, nodeText, OutOfScope, readScope, STANDING_PROFILE, type Scope } from "./standing.js";
import { exceeds, parseTime, secondsBetween, type Instant } from "./time.js";

/** The CASE member at fault when the CASE itself cannot be used. */
export type CaseMember = "case" | "action" | "registry" | "policy" | "now";

/** The CASE itself cannot be used (`countersign verify` exits 2): there is no verdict, and the
 * harness answers `{"unusable_case": member}` (HARNESS.md §3). */
export class Unusable extends Error {
  constructor(
    readonly member: CaseMember,
    detail: string,
  ) {
    super(detail);
  }
}

export interface Verdict {
  effective: "ALLOW" | "DENY";
  decision: string | null;
  reason_code: string | null;
  identity_assurance_level: Level;
}

type Level = "declared" | "AAL1" | "AAL2" | "AAL3";
const LEVELS: Level[] = ["declared", "AAL1", "AAL2", "AAL3"];
const TRANSPORT = new Set(["approver_refused", "expired_unanswered", "no_eligible_approver", "callback_timeout", "cancelled"]);

const verdict = (effective: "ALLOW" | "DENY", decision: string | null, reason: string | null, level: Level = "declared"): Verdict => ({
  effective,
  decision,
  reason_code: reason,
  identity_assurance_level: level,
});

// --- the CASE ------------------------------------------------------------------------------------

interface Policy {
  rp_id: string;
  origins: string[];
  require_evidence: boolean;
  require_user_verification: boolean;
  min_assurance: Level | null;
  quorum: number;
  max_age_seconds: number;
  clock_skew_seconds: number;
  allow_cross_origin: boolean;
  top_origins: string[];
  aal3_aaguids: string[] | null;
  nfc: NfcMode;
  profile_tools: Map<string, string>;
  approvers: string[] | null;
}

interface Credential {
  credential_id: Buffer;
  principal: string;
  public_key: Buffer;
  aaguid: string | null;
  backup_eligible: boolean | null;
  chain_verified: boolean;
  sign_count: number;
  revoked: boolean;
}

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
const isStr = (v: unknown): v is string => typeof v === "string";
const isStrs = (v: unknown): v is string[] => Array.isArray(v) && v.every(isStr);
const isUint = (v: unknown): v is number => typeof v === "number" && Number.isSafeInteger(v) && v >= 0;

function only(o: Record<string, unknown>, allowed: string[], what: CaseMember): void {
  for (const k of Object.keys(o)) if (!allowed.includes(k)) throw new Unusable(what, `${what}: unknown member ${k}`);
}

function readPolicy(v: unknown): Policy {
  if (!isObj(v)) throw new Unusable("policy", "policy must be an object");
  // Unknown members are refused (SPEC §8): a misspelt "quorom" must not silently mean quorum 1.
  only(
    v,
    ["rp_id", "origins", "require_evidence", "require_user_verification", "min_assurance", "quorum", "max_age_seconds", "clock_skew_seconds", "allow_cross_origin", "top_origins", "aal3_aaguids", "nfc", "profile_tools", "approvers"],
    "policy",
  );
  const p: Policy = {
    rp_id: "",
    origins: [],
    require_evidence: true,
    require_user_verification: true,
    min_assurance: null,
    quorum: 1,
    max_age_seconds: 300,
    clock_skew_seconds: 60,
    allow_cross_origin: false,
    top_origins: [],
    aal3_aaguids: null,
    nfc: "require",
    profile_tools: new Map(),
    approvers: null,
  };
  const bad = (k: string) => new Unusable("policy", `policy.${k} has the wrong type`);
  if (!isStr(v.rp_id)) throw bad("rp_id");
  p.rp_id = v.rp_id;
  if (!isStrs(v.origins)) throw bad("origins");
  p.origins = v.origins;
  for (const k of ["require_evidence", "require_user_verification", "allow_cross_origin"] as const) {
    if (k in v) {
      if (typeof v[k] !== "boolean") throw bad(k);
      p[k] = v[k] as boolean;
    }
  }
  for (const k of ["quorum", "max_age_seconds", "clock_skew_seconds"] as const) {
    if (k in v) {
      if (!isUint(v[k])) throw bad(k);
      p[k] = v[k] as number;
    }
  }
  if ("min_assurance" in v) {
    if (!LEVELS.includes(v.min_assurance as Level)) throw bad("min_assurance");
    p.min_assurance = v.min_assurance as Level;
  }
  if ("top_origins" in v) {
    if (!isStrs(v.top_origins)) throw bad("top_origins");
    p.top_origins = v.top_origins;
  }
  if ("aal3_aaguids" in v) {
    if (!isStrs(v.aal3_aaguids)) throw bad("aal3_aaguids");
    p.aal3_aaguids = v.aal3_aaguids;
  }
  if ("nfc" in v) {
    if (v.nfc !== "require" && v.nfc !== "normalize") throw bad("nfc");
    p.nfc = v.nfc;
  }
  if ("profile_tools" in v) {
    const t = v.profile_tools;
    if (!isObj(t) || !Object.values(t).every(isStr)) throw bad("profile_tools");
    p.profile_tools = new Map(Object.entries(t) as [string, string][]);
  }
  if ("approvers" in v) {
    if (!isStrs(v.approvers)) throw bad("approvers");
    p.approvers = v.approvers;
  }
  // Contradictory policies are refused rather than guessed at: an ALLOW without evidence cannot
  // meet an assurance floor or a quorum, and an empty approver list can never approve.
  if (!p.require_evidence && ((p.min_assurance !== null && p.min_assurance !== "declared") || p.quorum > 1)) {
    throw new Unusable("policy", "contradictory policy: require_evidence false with min_assurance or quorum > 1");
  }
  // Fewer distinct eligible principals than the quorum (none at all included): nobody could ever
  // satisfy the policy.
  if (p.approvers !== null && new Set(p.approvers).size < Math.max(p.quorum, 1)) {
    throw new Unusable("policy", "contradictory policy: fewer distinct approvers than the quorum");
  }
  return p;
}

function readRegistry(v: unknown): Map<string, Credential> {
  if (!isObj(v) || !Array.isArray(v.credentials)) throw new Unusable("registry", "registry.credentials must be an array");
  const out = new Map<string, Credential>();
  for (const c of v.credentials) {
    if (!isObj(c) || !isStr(c.credential_id) || !isStr(c.principal) || !isStr(c.public_key)) {
      throw new Unusable("registry", "registry record: credential_id, principal and public_key are required strings");
    }
    let id: Buffer, key: Buffer;
    try {
      id = b64url(c.credential_id);
      key = b64url(c.public_key);
    } catch {
      throw new Unusable("registry", "registry record: not base64url");
    }
    // Optional members are absent or of their type: null is refused, not read as absent (SPEC §2).
    for (const k of ["aaguid", "backup_eligible", "attestation"]) {
      if (k in c && c[k] === null) throw new Unusable("registry", `registry record: ${k} is null`);
    }
    const att = c.attestation;
    if (isObj(att) && "root" in att && att.root === null) throw new Unusable("registry", "registry record: attestation.root is null");
    const hex = id.toString("hex");
    if (out.has(hex)) throw new Unusable("registry", "registry: a credential id enrolled twice");
    out.set(hex, {
      credential_id: id,
      principal: c.principal,
      public_key: key,
      aaguid: isStr(c.aaguid) ? c.aaguid : null,
      backup_eligible: typeof c.backup_eligible === "boolean" ? c.backup_eligible : null,
      chain_verified: isObj(att) && att.chain_verified === true,
      sign_count: isUint(c.sign_count) ? c.sign_count : 0,
      revoked: c.revoked === true,
    });
  }
  return out;
}

const B64URL = /^[A-Za-z0-9_-]*$/;

/** Strict unpadded base64url: no padding, no standard alphabet, no non-zero trailing bits. */
export function b64url(text: string): Buffer {
  if (!B64URL.test(text) || text.length % 4 === 1) throw new Error("not unpadded base64url");
  const data = Buffer.from(text, "base64url");
  if (data.toString("base64url") !== text) throw new Error("non-zero trailing bits");
  return data;
}

// --- the entry -------------------------------------------------------------------------------------

interface Entry {
  decision: Decision;
  profile: string;
  credential_id: Buffer;
  client_data_json: Buffer;
  authenticator_data: Buffer;
  signature: Buffer;
  nonce: Buffer;
  op_hash: Buffer;
  assertion_at: Instant;
}

const FORMAT = "webauthn.assertion/1";
const REQUIRED = ["format", "decision", "canonicalization_profile", "credential_id", "client_data_json", "authenticator_data", "signature", "nonce", "op_hash", "assertion_at"];
const OPTIONAL = ["aaguid", "attestation_ref", "co_signatures"];
const UUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;

function decodeEntry(node: Node): Entry {
  const e = plain(node);
  // SPEC §6 4.1: another format is named before its members are judged.
  if (isObj(e) && isStr(e.format) && e.format !== FORMAT) throw new Refused("unsupported_format", e.format);
  const malformed = (why: string) => new Refused("evidence_malformed", why);
  if (!isObj(e)) throw malformed("an entry must be an object");
  const keys = Object.keys(e);
  if (!REQUIRED.every((k) => keys.includes(k)) || !keys.every((k) => REQUIRED.includes(k) || OPTIONAL.includes(k))) {
    throw malformed("entry members");
  }
  for (const k of ["format", "canonicalization_profile", "assertion_at"]) if (!isStr(e[k])) throw malformed(k);
  if (e.decision !== "APPROVED" && e.decision !== "DENIED") throw malformed("decision");
  if ("aaguid" in e && !(isStr(e.aaguid) && UUID.test(e.aaguid))) throw malformed("aaguid");
  if ("attestation_ref" in e && e.attestation_ref !== null && !isStr(e.attestation_ref)) throw malformed("attestation_ref");
  if ("co_signatures" in e && !Array.isArray(e.co_signatures)) throw malformed("co_signatures");
  const bytes: Record<string, Buffer> = {};
  for (const k of ["credential_id", "client_data_json", "authenticator_data", "signature", "nonce", "op_hash"]) {
    const v = e[k];
    if (!isStr(v)) throw malformed(k);
    try {
      bytes[k] = b64url(v);
    } catch (err) {
      throw malformed(`${k}: ${(err as Error).message}`);
    }
  }
  let at: Instant;
  try {
    at = parseTime(e.assertion_at as string);
  } catch {
    throw malformed("assertion_at is not RFC 3339");
  }
  return {
    decision: e.decision,
    profile: e.canonicalization_profile as string,
    credential_id: bytes.credential_id!,
    client_data_json: bytes.client_data_json!,
    authenticator_data: bytes.authenticator_data!,
    signature: bytes.signature!,
    nonce: bytes.nonce!,
    op_hash: bytes.op_hash!,
    assertion_at: at,
  };
}

/** clientDataJSON as far as the binding needs it: UTF-8 anywhere in it, one object, the members
 * we read present once and of the right type, the challenge strictly base64url. */
function clientDataChallenge(raw: Buffer): Buffer {
  const malformed = (why: string) => new Refused("evidence_malformed", `clientDataJSON: ${why}`);
  let node: Node;
  try {
    node = parse(decodeUtf8(raw), 64);
  } catch (e) {
    throw malformed(e instanceof JsonError ? e.message : String(e));
  }
  if (node.t !== "obj") throw malformed("not an object");
  const read = ["type", "challenge", "origin", "crossOrigin", "topOrigin"];
  const seen = new Set<string>();
  for (const [k] of node.members) {
    if (read.includes(k) && seen.has(k)) throw malformed(`duplicate ${k}`);
    seen.add(k);
  }
  const str = (k: string) => member(node, k)?.t === "str";
  if (!str("type") || !str("challenge") || !str("origin")) throw malformed("type, challenge and origin must be strings");
  const co = member(node, "crossOrigin");
  if (co !== undefined && co.t !== "bool") throw malformed("crossOrigin must be a boolean");
  const to = member(node, "topOrigin");
  if (to !== undefined && to.t !== "str") throw malformed("topOrigin must be a string");
  try {
    return b64url((member(node, "challenge") as { v: string }).v);
  } catch {
    throw malformed("challenge encoding");
  }
}

// --- COSE keys ----------------------------------------------------------------------------------

/** SPEC §5: ES256 on P-256, ES384 on P-384, EdDSA on Ed25519, RS256 with 2048..8192-bit moduli. */
function checkKey(publicKey: Buffer): void {
  let key: Map<number, unknown>;
  try {
    key = decodeCredentialPublicKey(new Uint8Array(publicKey)) as unknown as Map<number, unknown>;
  } catch (e) {
    throw new Refused("evidence_malformed", `COSE key: ${(e as Error).message}`);
  }
  if (!(key instanceof Map)) throw new Refused("evidence_malformed", "COSE key is not a map");
  const alg = key.get(3);
  const crv = key.get(-1);
  const unsupported = () => new Refused("unsupported_algorithm", `COSE alg ${String(alg)} crv ${String(crv)}`);
  if (alg === -7 && crv !== 1) throw unsupported();
  else if (alg === -35 && crv !== 2) throw unsupported();
  else if (alg === -8 && crv !== 6) throw unsupported();
  else if (alg === -257) {
    const n = key.get(-1);
    if (!(n instanceof Uint8Array)) throw new Refused("evidence_malformed", "RSA key without n");
    const bits = BigInt(`0x${Buffer.from(n).toString("hex") || "0"}`).toString(2).length;
    if (bits < 2048 || bits > 8192) throw unsupported();
  } else if (![-7, -35, -8].includes(alg as number)) throw unsupported();
}

// --- the WebAuthn layer, by @simplewebauthn/server ------------------------------------------------

// The library throws plain Errors; their messages are the only way to tell them apart. Errors the
// list does not know are thrown while the signature is decoded or checked (ASN.1, WebCrypto): the
// signature is then not a valid encoding, which SPEC §5 calls evidence_malformed.
const LIBRARY_REASONS: [RegExp, string][] = [
  [/Unexpected authentication response type/, "evidence_malformed"],
  [/Unexpected authentication response challenge/, "binding_mismatch"],
  [/within a non-cross-origin authentication response/, "evidence_malformed"],
  [/top origin/, "origin_mismatch"],
  [/Unexpected authentication response origin/, "origin_mismatch"],
  [/Authenticator data was|Leftover bytes/, "evidence_malformed"],
  [/Unexpected RP ID hash/, "rp_mismatch"],
  [/User not present/, "user_not_present"],
  [/User verification required/, "user_not_verified"],
];

/** Findings SPEC §5 makes after the BE checks: the counter, BS without BE (which the library
 * checks after the counter), and the signature. */
const LATE_REASONS: [RegExp, string][] = [
  [/Response counter value/, "counter_regression"],
  [/Single-device credential indicated that it was backed up/, "evidence_malformed"],
];

const messageOf = (e: unknown) => (e instanceof Error ? e.message : String(e));

/** The reason code of a library error, and whether SPEC §5 makes that finding after BE. */
function reasonOf(e: unknown): { code: string; late: boolean } {
  if (e instanceof Refused) return { code: e.code, late: true };
  const msg = messageOf(e);
  const early = LIBRARY_REASONS.find(([re]) => re.test(msg));
  if (early) return { code: early[1], late: false };
  return { code: LATE_REASONS.find(([re]) => re.test(msg))?.[1] ?? "evidence_malformed", late: true };
}

async function library(entry: Entry, cred: Credential, policy: Policy, counter: number): Promise<void> {
  const id = entry.credential_id.toString("base64url");
  const result = await verifyAuthenticationResponse({
    response: {
      id,
      rawId: id,
      type: "public-key",
      response: {
        clientDataJSON: entry.client_data_json.toString("base64url"),
        authenticatorData: entry.authenticator_data.toString("base64url"),
        signature: entry.signature.toString("base64url"),
      },
      clientExtensionResults: {},
    },
    expectedChallenge: Buffer.concat([entry.nonce, entry.op_hash]).toString("base64url"),
    expectedOrigin: policy.origins,
    expectedRPID: policy.rp_id,
    expectedTopOrigin: policy.allow_cross_origin ? policy.top_origins : undefined,
    credential: { id, publicKey: new Uint8Array(cred.public_key), counter },
    requireUserVerification: policy.require_user_verification,
  });
  if (!result.verified) throw new Refused("signature_invalid");
}

/** The library's verdict on one assertion, as SPEC §5 orders it, given the BE finding the
 * library cannot make (BS without BE, or BE against enrollment), which comes after UV and before
 * the signature. */
async function webauthnLayer(entry: Entry, cred: Credential, policy: Policy, beProblem: string | null): Promise<void> {
  let found: { code: string; late: boolean } | null = null;
  try {
    await library(entry, cred, policy, cred.sign_count);
  } catch (e) {
    found = reasonOf(e);
    if (found.code === "counter_regression") {
      // The library compares the counter before the signature; SPEC §5 checks the signature
      // first, so a regression only counts for bytes the authenticator really signed.
      try {
        await library(entry, cred, policy, 0);
      } catch (e2) {
        found = reasonOf(e2);
      }
      if (found.code !== "signature_invalid" && found.code !== "evidence_malformed") found = { code: "counter_regression", late: true };
    }
    if (beProblem === null || !found.late) throw new Refused(found.code, messageOf(e));
  }
  if (beProblem !== null) throw new Refused(beProblem);
}

// --- verify_evidence ----------------------------------------------------------------------------

interface Approver {
  principal: string;
  decision: Decision;
  level: Level;
}

interface Action {
  profile: string;
  fieldsBytes: Uint8Array;
  tool: string | null;
}

export async function verifyCase(bytes: Uint8Array): Promise<Verdict> {
  let root: Node;
  try {
    root = parse(decodeUtf8(bytes), 512, true);
  } catch (e) {
    throw new Unusable("case", `CASE: ${(e as Error).message}`);
  }
  if (root.t !== "obj" || hasDuplicateKeysAt(root)) {
    throw new Unusable("case", "CASE must be an object without duplicate members");
  }
  const text = decodeUtf8(bytes);
  const top = plain(root) as Record<string, unknown>;
  only(top, ["action", "result", "registry", "policy", "now"], "case");
  const actionNode = member(root, "action");
  const resultNode = member(root, "result");
  if (resultNode === undefined) throw new Unusable("case", "result is required");
  if (actionNode === undefined || actionNode.t !== "obj") throw new Unusable("action", "action must be an object");
  const a = plain(actionNode) as Record<string, unknown>;
  only(a, ["profile", "fields", "tool"], "action");
  const fieldsNode = member(actionNode, "fields");
  if (hasDuplicateKeysAt(actionNode) || !isStr(a.profile) || fieldsNode === undefined) throw new Unusable("action", "action: profile and fields are required");
  if ("tool" in a && !isStr(a.tool)) throw new Unusable("action", "action.tool must be a string (null is refused, not read as absent)");
  const action: Action = {
    profile: a.profile,
    fieldsBytes: Buffer.from(text.slice(fieldsNode.start, fieldsNode.end), "utf8"),
    tool: isStr(a.tool) ? a.tool : null,
  };
  const policy = readPolicy(top.policy);
  const registry = readRegistry(top.registry);
  if (!isStr(top.now)) throw new Unusable("now", "now must be an RFC 3339 string");
  let now: Instant;
  try {
    now = parseTime(top.now);
  } catch {
    throw new Unusable("now", "now is not RFC 3339");
  }
  return verify(policy, action, resultNode, registry, now);
}

function hasDuplicateKeysAt(n: Node): boolean {
  if (n.t !== "obj") return false;
  const keys = n.members.map(([k]) => k);
  return new Set(keys).size !== keys.length;
}

async function verify(policy: Policy, action: Action, resultNode: Node, registry: Map<string, Credential>, now: Instant): Promise<Verdict> {
  // The result envelope (SPEC §2.1): an unusable one is answered DENY / null / result_malformed.
  const malformed = verdict("DENY", null, "result_malformed");
  let result: Record<string, unknown>;
  if (resultNode.t === "str") result = { status: resultNode.v };
  else if (resultNode.t === "obj") {
    // Two members with one name, in the envelope or inside an entry, can be read two ways by two
    // parsers: the result is unusable rather than read one way.
    if (hasDuplicate(resultNode)) return malformed;
    result = plain(resultNode) as Record<string, unknown>;
  } else return malformed;
  const status = result.status;
  if (status !== "APPROVED" && status !== "DENIED" && status !== "PENDING") return malformed;
  // The transport's informational strings: null reads as absent (SPEC §2.1), except the
  // approval_id of a PENDING result, which is what the gateway asks again with.
  for (const k of ["approval_id", "expires_at", "redrive_url", "reason_code"]) {
    const informational = k !== "approval_id" || status !== "PENDING";
    if (k in result && result[k] === null && informational) delete result[k];
    if (k in result && !isStr(result[k])) return malformed;
  }
  // Members that carry meaning are absent or of their type: null is refused, not read as absent.
  for (const k of ["identity_assurance", "authority"]) {
    if (k in result && result[k] === null) return malformed;
  }
  if ("revises" in result && !isStr(result.revises)) return malformed;
  if ("approver_evidence" in result && !Array.isArray(result.approver_evidence)) return malformed;
  if (status === "PENDING" && !isStr(result.approval_id)) return malformed;
  if ("standing_grant" in result && !standingMemberOk(result.standing_grant)) return malformed;
  const entries = resultNode.t === "obj" && member(resultNode, "approver_evidence")?.t === "arr" ? (member(resultNode, "approver_evidence") as { items: Node[] }).items : [];

  // 1. pending; a result carrying a standing grant is verified by SPEC §14 instead; 2. no evidence.
  if (status === "PENDING") return verdict("DENY", "PENDING", "pending");
  if ("standing_grant" in result) return verifyStanding(policy, action, resultNode, entries, registry, now);
  if (entries.length === 0) {
    if (status === "APPROVED") return policy.require_evidence ? verdict("DENY", "APPROVED", "evidence_missing") : verdict("ALLOW", "APPROVED", null);
    const reason = result.reason_code;
    return verdict("DENY", "DENIED", isStr(reason) && TRANSPORT.has(reason) ? reason : "approver_refused");
  }
  const approvers: Approver[] = [];
  try {
    // 3. The action is bound: profile, fields, operation.
    if (!PROFILES.has(action.profile)) throw new Refused("profile_unknown", action.profile);
    const fields = admitFields(action.profile, action.fieldsBytes, policy.nfc);
    checkOperation(policy, action, fields);
    // 4. Each entry, in order; the first failing one decides.
    const spent = new Set<string>();
    for (const node of entries) approvers.push(await verifyEntry(node, action.profile, fields, registry, policy, now, spent));
  } catch (e) {
    if (e instanceof Refused) return verdict("DENY", status, e.code);
    throw e;
  }
  // 6..10.
  const refusal = approvers.find((x) => x.decision === "DENIED");
  if (refusal) return verdict("DENY", "DENIED", "approver_refused", refusal.level);
  const weakest = approvers.reduce<Level>((w, x) => (LEVELS.indexOf(x.level) < LEVELS.indexOf(w) ? x.level : w), "AAL3");
  if (status !== "APPROVED") return verdict("DENY", status, "binding_mismatch", weakest);
  if (policy.min_assurance !== null && approvers.some((x) => LEVELS.indexOf(x.level) < LEVELS.indexOf(policy.min_assurance!))) {
    return verdict("DENY", "APPROVED", "insufficient_assurance", weakest);
  }
  if (new Set(approvers.map((x) => x.principal)).size < Math.max(policy.quorum, 1)) return verdict("DENY", "APPROVED", "quorum_not_met", weakest);
  return verdict("ALLOW", "APPROVED", null, weakest);
}

/** The operation: a profile with a `tool_name` field signs it; any other profile may be bound to
 * one tool by policy.profile_tools. */
function checkOperation(policy: Policy, action: Action, fields: Map<string, Value>): void {
  const signed = fields.get("tool_name");
  const signsOperation = PROFILES.get(action.profile)!.some((f) => f.name === "tool_name");
  if (signsOperation) {
    if (action.tool !== null && signed !== action.tool) throw new Refused("binding_mismatch", `action.tool ${action.tool} is not the signed tool_name`);
    return;
  }
  const bound = policy.profile_tools.get(action.profile);
  if (action.tool !== null && bound !== action.tool) throw new Refused("action_inadmissible", `profile ${action.profile} is not bound to tool ${action.tool}`);
  if (action.tool === null && bound !== undefined) throw new Refused("action_inadmissible", `profile ${action.profile} belongs to tool ${bound}; the action names none`);
}

async function verifyEntry(
  node: Node,
  profile: string,
  fields: Map<string, Value>,
  registry: Map<string, Credential>,
  policy: Policy,
  now: Instant,
  spent: Set<string>,
  standingUse: number | null = null,
): Promise<Approver> {
  // 4.1, 4.2
  const entry = decodeEntry(node);
  // 4.3
  if (!PROFILES.has(entry.profile)) throw new Refused("profile_unknown", entry.profile);
  if (entry.profile !== profile) throw new Refused("binding_mismatch", "profile");
  // 4.4 the credential, its principal's eligibility, its key
  const cred = registry.get(entry.credential_id.toString("hex"));
  if (cred === undefined) throw new Refused("credential_unknown");
  if (cred.revoked) throw new Refused("credential_revoked");
  if (policy.approvers !== null && !policy.approvers.includes(cred.principal)) throw new Refused("approver_ineligible", cred.principal);
  checkKey(cred.public_key);
  // 4.5 binding: the decision is read from the signed challenge
  if (entry.nonce.length !== 32) throw new Refused("evidence_malformed", "nonce length");
  const challenge = clientDataChallenge(entry.client_data_json);
  if (challenge.length !== 64) throw new Refused("binding_mismatch", "challenge length");
  if (!challenge.subarray(0, 32).equals(entry.nonce) || !challenge.subarray(32).equals(entry.op_hash)) {
    throw new Refused("binding_mismatch", "nonce or op_hash beside the signature");
  }
  if (!opHash(profile, entry.decision, fields).equals(entry.op_hash)) throw new Refused("binding_mismatch", "op_hash");
  // 4.6 replay inside this CASE, before any signature work; a grant's use is keyed nonce || use
  const nonce = entry.nonce.toString("hex") + (standingUse === null ? "" : BigInt(standingUse).toString(16).padStart(16, "0"));
  if (spent.has(nonce)) throw new Refused("replayed");
  // 4.7 the WebAuthn layer; BE against enrollment sits between UV and the signature
  const ad = entry.authenticator_data;
  const flags = ad.length > 32 ? ad[32]! : 0;
  const uv = (flags & 0x04) !== 0;
  const be = (flags & 0x08) !== 0;
  const bs = (flags & 0x10) !== 0;
  let beProblem: string | null = null;
  if (bs && !be) beProblem = "evidence_malformed";
  else if (cred.backup_eligible !== null && cred.backup_eligible !== be) beProblem = "backup_eligibility_mismatch";
  // A grant's counter is not compared: the key has signed other things since (SPEC §14.3).
  await webauthnLayer(entry, standingUse === null ? cred : { ...cred, sign_count: 0 }, policy, beProblem);
  // 4.8 freshness, exact: no rounding of either instant; a grant's age is bounded by its expiry
  if (exceeds(secondsBetween(now, entry.assertion_at), policy.clock_skew_seconds)) throw new Refused("stale", "dated in the future");
  if (standingUse === null && exceeds(secondsBetween(entry.assertion_at, now), policy.max_age_seconds)) throw new Refused("stale", "too old");
  spent.add(nonce);
  // SPEC §7: the level, from the signed flags and the enrollment record
  const aaguidAllowed = policy.aal3_aaguids === null || (cred.aaguid !== null && policy.aal3_aaguids.some((g) => g.toLowerCase() === cred.aaguid!.toLowerCase()));
  const deviceBound = !be && cred.backup_eligible !== true;
  const level: Level = !uv ? "AAL1" : deviceBound && cred.chain_verified && aaguidAllowed ? "AAL3" : "AAL2";
  return { principal: cred.principal, decision: entry.decision, level };
}

// --- standing grants (SPEC §14) -----------------------------------------------------------------

/** SPEC §2.1: exactly grant_id (string), fields (object), use (integer of at least 1). */
function standingMemberOk(g: unknown): boolean {
  if (!isObj(g)) return false;
  const keys = Object.keys(g).sort();
  return keys.join(",") === "fields,grant_id,use" && isStr(g.grant_id) && isObj(g.fields) && isUint(g.use) && g.use >= 1;
}

/** SPEC §14.3: a call approved under a standing grant, checked against the grant's scope. */
async function verifyStanding(
  policy: Policy,
  action: Action,
  resultNode: Node,
  entries: Node[],
  registry: Map<string, Credential>,
  now: Instant,
): Promise<Verdict> {
  const grantNode = member(resultNode, "standing_grant")!;
  const useNode = member(grantNode, "use")!;
  // An integer is written without a fraction or an exponent (1.0 is not a use number).
  if (useNode.t !== "num" || /[.eE]/.test(useNode.lex)) return verdict("DENY", null, "result_malformed");
  const use = Number(useNode.lex);
  const status = (plain(resultNode) as Record<string, unknown>).status as string;
  // 1. A grant only ever approves, and only with evidence.
  if (status !== "APPROVED") return verdict("DENY", status, "binding_mismatch");
  if (entries.length === 0) return verdict("DENY", "APPROVED", "evidence_missing");
  const approvers: Approver[] = [];
  let scope: Scope;
  let call: Map<string, Value>;
  try {
    // 2. The call, bound as any action; only a tool call can be covered.
    if (!PROFILES.has(action.profile)) throw new Refused("profile_unknown", action.profile);
    call = admitFields(action.profile, action.fieldsBytes, policy.nfc);
    checkOperation(policy, action, call);
    const declared = PROFILES.get(action.profile)!.map((f) => f.name);
    if (!["agent_id", "tool_name", "params"].every((n) => declared.includes(n))) {
      throw new Refused("action_inadmissible", "a standing grant covers tool calls only");
    }
    // 3. The grant's fields, admitted under its profile with NFC required, read as a scope.
    let grantFields: Map<string, Value>;
    try {
      const text = nodeText(member(grantNode, "fields")!);
      grantFields = admitFields(STANDING_PROFILE, Buffer.from(text, "utf8"), "require");
      scope = readScope(grantFields);
    } catch (e) {
      throw new Refused("evidence_malformed", (e as Error).message);
    }
    // 4.-5. Every entry binds the grant; eligibility is the call's policy's.
    const spent = new Set<string>();
    for (const node of entries) approvers.push(await verifyEntry(node, STANDING_PROFILE, grantFields, registry, policy, now, spent, use));
  } catch (e) {
    if (e instanceof Refused) return verdict("DENY", status, e.code);
    throw e;
  }
  const refusal = approvers.find((x) => x.decision === "DENIED");
  if (refusal) return verdict("DENY", "DENIED", "approver_refused", refusal.level);
  const weakest = approvers.reduce<Level>((w, x) => (LEVELS.indexOf(x.level) < LEVELS.indexOf(w) ? x.level : w), "AAL3");
  // 6. Expiry (exclusive), 7. coverage.
  if (secondsBetween(scope.expiresAt, now).num >= 0n) return verdict("DENY", "APPROVED", "standing_grant_expired", weakest);
  try {
    const server = call.get("server_id");
    checkCoverage(scope, use, {
      profile: action.profile,
      serverId: typeof server === "string" ? server : null,
      agentId: call.get("agent_id") as string,
      toolName: call.get("tool_name") as string,
      params: call.get("params")!,
    });
  } catch (e) {
    if (e instanceof OutOfScope) return verdict("DENY", "APPROVED", "out_of_scope", weakest);
    throw e;
  }
  // 8. Assurance and quorum, as for any approval.
  if (policy.min_assurance !== null && approvers.some((x) => LEVELS.indexOf(x.level) < LEVELS.indexOf(policy.min_assurance!))) {
    return verdict("DENY", "APPROVED", "insufficient_assurance", weakest);
  }
  if (new Set(approvers.map((x) => x.principal)).size < Math.max(policy.quorum, 1)) return verdict("DENY", "APPROVED", "quorum_not_met", weakest);
  return verdict("ALLOW", "APPROVED", null, weakest);
}
