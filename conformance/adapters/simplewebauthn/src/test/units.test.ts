// Unit tests of the pieces the vectors reach only indirectly: each rule once kept, once broken.
// Run: npm test (node's built-in test runner on the compiled files).

import assert from "node:assert/strict";
import { test } from "node:test";
import { admitFields, jcs, opHashDocument, Refused, type Value } from "../canon.js";
import { b64url } from "../evidence.js";
import { pathCovers, pathNames, PathRefused, pathUnder, prefixTextReadable } from "../path.js";
import { exceeds, parseTime, secondsBetween } from "../time.js";

const enc = (s: string) => Buffer.from(s, "utf8");
const tool = (params: string) => enc(`{"agent_id":"a","tool_name":"t","params":${params}}`);
const refused = (f: () => unknown, code = "action_inadmissible") =>
  assert.throws(f, (e: unknown) => e instanceof Refused && e.code === code);

test("JCS orders members by UTF-16 code units and escapes minimally", () => {
  const m = new Map<string, Value>([
    ["\uE000", 1],
    ["\u{1F600}", 2],
    ["a\u0001\"\\\u2028", -0],
  ]);
  assert.equal(jcs(m), '{"a\\u0001\\"\\\\\u2028":0,"\u{1F600}":2,"\uE000":1}');
});

test("the SPEC's worked example hashes to the pinned op_hash", () => {
  const doc = '{"profile":"countersign.payment/1","decision":"APPROVED","fields":{"amount":"40000.00","currency":"EUR","source_account":"OPS-1","destination_account":"A","reference":"Q3 supplier"}}';
  assert.equal(opHashDocument(enc(doc)).toString("hex"), "0464522cf64b2f6b2f34034c80877595bb1bf41424e77afa03cbbcde2953791e");
});

test("admission keeps ordinary JSON and refuses its edges", () => {
  assert.ok(admitFields("countersign.tool-call/1", tool('{"n":9007199254740991}'), "require"));
  refused(() => admitFields("countersign.tool-call/1", tool('{"n":9007199254740992}'), "require"));
  refused(() => admitFields("countersign.tool-call/1", tool('{"n":1.0}'), "require"));
  refused(() => admitFields("countersign.tool-call/1", tool('{"a":1,"\\u0061":2}'), "require"));
  refused(() => admitFields("countersign.tool-call/1", tool('{"x":"\\ud800"}'), "require"));
  refused(() => admitFields("countersign.tool-call/1", tool('{"x":"\\udc00\\ud800"}'), "require"));
  assert.ok(admitFields("countersign.tool-call/1", tool('{"x":"\\ud83d\\ude00"}'), "require"));
  refused(() => admitFields("countersign.tool-call/1", Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), tool("{}")]), "require"));
  refused(() => admitFields("countersign.tool-call/1", Buffer.from([0x7b, 0xc0, 0xaf, 0x7d]), "require"));
  refused(() => admitFields("countersign.tool-call/1", tool("{}").subarray(1), "require"));
  refused(() => admitFields("other/1", tool("{}"), "require"), "profile_unknown");
});

test("NFC: require refuses what normalize rewrites; colliding keys are refused in both", () => {
  const kelvin = tool('{"temp":"300\u212A"}');
  refused(() => admitFields("countersign.tool-call/1", kelvin, "require"));
  const admitted = admitFields("countersign.tool-call/1", kelvin, "normalize");
  assert.equal((admitted.get("params") as Map<string, Value>).get("temp"), "300K");
  const collide = tool('{"\u00e9":1,"e\u0301":2}');
  refused(() => admitFields("countersign.tool-call/1", collide, "normalize"));
  // An exact field stays exact under normalize.
  refused(() => admitFields("countersign.tool-call/1", enc('{"agent_id":"e\u0301","tool_name":"t","params":{}}'), "normalize"));
});

test("freshness compares exact durations, fractions and offsets included", () => {
  const now = parseTime("2026-11-20T10:00:00Z");
  assert.equal(exceeds(secondsBetween(parseTime("2026-11-20T09:55:00Z"), now), 300), false);
  assert.equal(exceeds(secondsBetween(parseTime("2026-11-20T09:54:59.5Z"), now), 300), true);
  assert.equal(exceeds(secondsBetween(parseTime("2026-11-20T09:54:59.9999999999Z"), now), 300), true);
  assert.equal(exceeds(secondsBetween(parseTime("2026-11-20T10:59:00+01:00"), now), 300), false);
  assert.throws(() => parseTime("2026-02-30T10:00:00Z"));
  assert.throws(() => parseTime("2026-11-20 10:00:00Z"));
});

test("base64url has one spelling per byte string", () => {
  assert.deepEqual([...b64url("AQ")], [1]);
  assert.throws(() => b64url("AQ=="));
  assert.throws(() => b64url("AR"));
  assert.throws(() => b64url("+w"));
});

test("the path rule reads POSIX spellings and refuses ambiguous ones", () => {
  assert.deepEqual(pathNames("/srv//data/./q3/"), ["srv", "data", "q3"]);
  assert.deepEqual(pathNames("/"), []);
  assert.deepEqual(pathNames("/srv/data/..."), ["srv", "data", "..."]);
  for (const text of ["/srv/data/../../etc/shadow", "/srv/data/a/../b", "srv/data", "//srv", "/srv\\data", "/srv/%2e%2e", "/srv/a\u0000b", "/srv/a\u0085", "/" + "a".repeat(4096)]) {
    assert.throws(() => pathNames(text), PathRefused, JSON.stringify(text));
  }
});

test("the path rule compares whole names under a directory in normal form", () => {
  assert.ok(pathCovers("/srv/data", "/srv/data"));
  assert.ok(pathCovers("/srv/data", "/srv/data/q3/report.pdf"));
  assert.ok(pathCovers("/", "/etc/hosts"));
  assert.ok(!pathCovers("/srv/data", "/srv/data2/x"));
  assert.ok(!pathCovers("/srv/data", "/srv/data/../../etc/shadow"));
  assert.ok(!pathCovers("/srv/data", "/SRV/data/x"));
  assert.ok(!pathCovers("/srv/data", ["/srv/data"]));
  assert.deepEqual(pathUnder("/srv/data"), ["srv", "data"]);
  for (const text of ["/srv/data/", "/srv//data", "/srv/./data", "srv/data", ""]) {
    assert.throws(() => pathUnder(text), PathRefused, JSON.stringify(text));
  }
  assert.ok(prefixTextReadable("ops-"));
  for (const text of ["/srv/data/", "refs/heads/", "C:\\data", ""]) assert.ok(!prefixTextReadable(text), text);
});
