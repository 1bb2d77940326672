#!/usr/bin/env node
// The schemas' own tests: each rule they state, once kept (the vector still validates) and once
// broken (it must not). The inputs are mutations of a committed vector, so the test follows the
// vectors as they are regenerated. Usage: node conformance/schema/selftest.mjs; exit 1 on a miss.

import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import Ajv2020 from "ajv/dist/2020.js";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..", "..");
const load = (p) => JSON.parse(readFileSync(p, "utf8"));
const ajv = new Ajv2020({ allErrors: true, strict: true, strictTypes: false, strictRequired: false, validateFormats: false });
for (const name of ["case", "vectors", "baseline", "harness"]) ajv.addSchema(load(join(here, `${name}.schema.json`)));
const evidence = ajv.getSchema("urn:countersign:schema:vectors:1#/$defs/evidence_vector");
const ophash = ajv.getSchema("urn:countersign:schema:vectors:1#/$defs/op_hash_vector");
const baseline = ajv.getSchema("urn:countersign:schema:baseline:1");
const hello = ajv.getSchema("urn:countersign:schema:harness:1#/$defs/hello");
const answer = ajv.getSchema("urn:countersign:schema:harness:1#/$defs/answer");

const find = (file, id) => load(join(root, "vectors", file)).vectors.find((v) => v.id === id);
const allow = find("evidence.json", "worked::approve-account-a");
const ophashVector = find("op_hash.json", "ophash::worked-account-a-approved");
const copy = (v) => structuredClone(v);
const withPolicy = (extra) => {
  const v = copy(allow);
  Object.assign(v.input.policy, extra);
  return v;
};

const cases = [
  // [name, validator, value, valid?]
  ["the committed ALLOW vector", evidence, allow, true],
  ["policy nfc normalize", evidence, withPolicy({ nfc: "normalize" }), true],
  ["policy nfc other", evidence, withPolicy({ nfc: "NFKC" }), false],
  ["policy profile_tools", evidence, withPolicy({ profile_tools: { "countersign.payment/1": "pay" } }), true],
  ["policy profile_tools not strings", evidence, withPolicy({ profile_tools: { "countersign.payment/1": 1 } }), false],
  ["policy approvers", evidence, withPolicy({ approvers: ["alice@example.com"] }), true],
  ["policy approvers empty (contradictory)", evidence, withPolicy({ approvers: [] }), false],
  ["policy unknown member", evidence, withPolicy({ quorom: 2 }), false],
  ["evidence optional, quorum 1", evidence, withPolicy({ require_evidence: false, quorum: 1 }), true],
  ["evidence optional, quorum 2 (contradictory)", evidence, withPolicy({ require_evidence: false, quorum: 2 }), false],
  ["evidence optional, min_assurance AAL2 (contradictory)", evidence, withPolicy({ require_evidence: false, min_assurance: "AAL2" }), false],
  ["evidence required, min_assurance AAL2", evidence, withPolicy({ min_assurance: "AAL2" }), true],
  ["action with tool", evidence, (() => { const v = copy(allow); v.input.action.tool = "pay"; return v; })(), true],
  ["action with unknown member", evidence, (() => { const v = copy(allow); v.input.action.tools = "pay"; return v; })(), false],
  ["ALLOW with an entry missing its signature", evidence, (() => { const v = copy(allow); delete v.input.result.approver_evidence[0].signature; return v; })(), false],
  ["ALLOW with an entry member of the wrong type", evidence, (() => { const v = copy(allow); v.input.result.approver_evidence[0].aaguid = 7; return v; })(), false],
  ["ALLOW with a reason code", evidence, (() => { const v = copy(allow); v.expected.reason_code = "stale"; return v; })(), false],
  ["result_malformed for an unusable status", evidence, (() => { const v = copy(allow); v.input.result.status = 42; v.expected = { effective: "DENY", decision: null, reason_code: "result_malformed", identity_assurance_level: "declared" }; return v; })(), true],
  ["result_malformed for a usable result", evidence, (() => { const v = copy(allow); v.expected = { effective: "DENY", decision: null, reason_code: "result_malformed", identity_assurance_level: "declared" }; return v; })(), false],
  ["a verdict other than result_malformed for an unusable result", evidence, (() => { const v = copy(allow); v.input.result.approver_evidence = null; v.expected = { effective: "DENY", decision: "APPROVED", reason_code: "evidence_missing", identity_assurance_level: "declared" }; return v; })(), false],
  ["null informational members on an ALLOW are usable", evidence, (() => { const v = copy(allow); Object.assign(v.input.result, { approval_id: null, expires_at: null, redrive_url: null, reason_code: null }); return v; })(), true],
  ["null informational members read as unusable", evidence, (() => { const v = copy(allow); v.input.result.reason_code = null; v.expected = { effective: "DENY", decision: null, reason_code: "result_malformed", identity_assurance_level: "declared" }; return v; })(), false],
  ["PENDING with approval_id null is unusable", evidence, (() => { const v = copy(allow); v.input.result = { status: "PENDING", approval_id: null }; v.expected = { effective: "DENY", decision: "PENDING", reason_code: "pending", identity_assurance_level: "declared" }; return v; })(), false],
  ["authority null is unusable", evidence, (() => { const v = copy(allow); v.input.result.authority = null; return v; })(), false],
  ["PENDING without approval_id is unusable", evidence, (() => { const v = copy(allow); v.input.result = { status: "PENDING" }; v.expected = { effective: "DENY", decision: "PENDING", reason_code: "pending", identity_assurance_level: "declared" }; return v; })(), false],
  ["unusable_case for a contradictory policy", evidence, (() => { const v = withPolicy({ approvers: [] }); v.expected = { unusable_case: "policy" }; return v; })(), true],
  ["a verdict for a contradictory policy", evidence, (() => { const v = withPolicy({ require_evidence: false, quorum: 2 }); return v; })(), false],
  ["unusable_case naming no CASE member", evidence, (() => { const v = withPolicy({ approvers: [] }); v.expected = { unusable_case: "fields" }; return v; })(), false],
  ["unusable_case beside a verdict", evidence, (() => { const v = withPolicy({ approvers: [] }); v.expected = { ...v.expected, unusable_case: "policy" }; return v; })(), false],
  ["two input members", evidence, { ...copy(allow), input_text: "{}" }, false],
  ["an unknown vector member", evidence, { ...copy(allow), comment: "x" }, false],
  ["the committed op_hash vector", ophash, ophashVector, true],
  ["an op_hash expected for a document with a fourth member", ophash, (() => { const v = copy(ophashVector); v.input.extra = 1; return v; })(), false],
  ["an error expected for a document with a fourth member", ophash, (() => { const v = copy(ophashVector); v.input.extra = 1; v.expected = { error: "action_inadmissible" }; return v; })(), true],
  ["a baseline", baseline, { implementation: "x", passed: 1, failed: 0, skipped: 1, results: { "a::b": "pass", "a::c": "skip: flag x: y" } }, true],
  ["a baseline with an unknown outcome", baseline, { implementation: "x", passed: 1, failed: 0, skipped: 0, results: { "a::b": "passed" } }, false],
  ["a hello", hello, { protocol: "countersign-harness/1", implementation: "x 1", kinds: ["evidence"], unsupported_flags: { "alg-es384": "no P-384" } }, true],
  ["a hello of another protocol version", hello, { protocol: "countersign-harness/2", implementation: "x 1", kinds: ["evidence"] }, false],
  ["a hello with an unknown kind", hello, { protocol: "countersign-harness/1", implementation: "x 1", kinds: ["evidence", "grants"] }, false],
  ["an evidence answer", answer, { id: "a::b", verdict: { effective: "DENY", decision: null, reason_code: "result_malformed", identity_assurance_level: "declared" } }, true],
  ["an evidence answer with the level nested", answer, { id: "a::b", verdict: { effective: "ALLOW", decision: "APPROVED", reason_code: null, identity_assurance: { level: "AAL2", source: "evidence" } } }, true],
  ["an evidence answer without a level", answer, { id: "a::b", verdict: { effective: "ALLOW", decision: "APPROVED", reason_code: null } }, false],
  ["an unusable_case answer", answer, { id: "a::b", verdict: { unusable_case: "policy" } }, true],
  ["an op_hash answer", answer, { id: "a::b", verdict: { op_hash: "BGRSLPZLL2svNANMgId1lbsb9BQk53r6A8u83ilTeR4" } }, true],
  ["an answer both unsupported and failed", answer, { id: "a::b", unsupported: "x", error: "y" }, false],
];

let missed = 0;
for (const [name, validate, value, valid] of cases) {
  const got = validate(value);
  if (got !== valid) {
    missed += 1;
    console.error(`MISS ${name}: expected ${valid ? "valid" : "invalid"}, got ${got ? "valid" : JSON.stringify(validate.errors?.slice(0, 3))}`);
  }
}
console.log(`${cases.length - missed} of ${cases.length} schema self-tests hold`);
process.exit(missed === 0 ? 0 : 1);
