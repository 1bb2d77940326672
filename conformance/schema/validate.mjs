#!/usr/bin/env node
// Validate every generated file against the schemas in this directory (JSON Schema 2020-12, with
// Ajv, pinned in package-lock.json):
//
//   vectors/*.json                         vectors.schema.json (and case.schema.json for CASE inputs)
//   fixtures/worked-example/*.case.json    case.schema.json
//   conformance/baselines/*.json           baseline.schema.json
//   every vector, as the runner sends it   harness.schema.json#/$defs/request
//
// Evidence vectors whose CASE travels as exact text (`input_text`) are parsed and validated as if
// their input were a JSON value, unless parsing would lose what the text is about: text that is
// not JSON, or that names a member twice (JSON.parse keeps one of the two). Those are counted. Usage: node conformance/schema/validate.mjs [REPO_ROOT]
// Exit 0 when everything validates, 1 otherwise.

import { execSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import Ajv2020 from "ajv/dist/2020.js";

const here = dirname(fileURLToPath(import.meta.url));
const helloOf = process.argv[2] === "--hello" ? process.argv[3] : undefined;
const root = helloOf === undefined ? (process.argv[2] ?? join(here, "..", "..")) : join(here, "..", "..");
const load = (p) => JSON.parse(readFileSync(p, "utf8"));

// Formats are annotations in 2020-12; the schemas say what they need with patterns.
// strict: unknown keywords are schema bugs; strictTypes off: a subschema inside if/then need not
// repeat the type its parent already states, nor list a required member its parent declares.
const ajv = new Ajv2020({ allErrors: true, strict: true, strictTypes: false, strictRequired: false, validateFormats: false });
for (const name of ["case", "vectors", "baseline", "harness"]) ajv.addSchema(load(join(here, `${name}.schema.json`)));
const validator = (name) => ajv.getSchema(`urn:countersign:schema:${name}:1`);
const caseSchema = validator("case");
const vectorsSchema = validator("vectors");
const baselineSchema = validator("baseline");
const evidenceVector = ajv.getSchema("urn:countersign:schema:vectors:1#/$defs/evidence_vector");
const request = ajv.getSchema("urn:countersign:schema:harness:1#/$defs/request");

let failures = 0;

if (helloOf !== undefined) {
  // The harness sees its stdin closed at once, prints its hello and exits (HARNESS.md §1).
  const first = execSync(helloOf, { cwd: root, input: "", encoding: "utf8", shell: "/bin/sh" }).split("\n")[0];
  const hello = ajv.getSchema("urn:countersign:schema:harness:1#/$defs/hello");
  const ok = hello(JSON.parse(first));
  console.log(`${ok ? "valid" : "INVALID"} hello: ${first.slice(0, 100)}${first.length > 100 ? "..." : ""}`);
  if (!ok) console.error(JSON.stringify(hello.errors));
  process.exit(ok ? 0 : 1);
}
const report = (file, errors, where = "", ids = []) => {
  failures += 1;
  // Name vectors by id, not by index.
  const name = (path) => path.replace(/^\/vectors\/(\d+)/, (m, i) => (ids[Number(i)] ? ` ${ids[Number(i)]}: ` : m));
  for (const e of errors.slice(0, 8)) console.error(`FAIL ${file}${where}${name(e.instancePath)}: ${e.message} ${JSON.stringify(e.params)}`);
  if (errors.length > 8) console.error(`     ... and ${errors.length - 8} more`);
};
const check = (validate, file, value, where = "") => {
  const ids = Array.isArray(value?.vectors) ? value.vectors.map((v) => v?.id) : [];
  if (!validate(value)) report(file, validate.errors ?? [], where, ids);
  return validate.errors === null;
};
const jsonFiles = (dir, suffix = ".json") =>
  readdirSync(join(root, dir))
    .filter((f) => f.endsWith(suffix))
    .sort()
    .map((f) => join(root, dir, f));

/** Whether any object in the JSON text names a member twice (keys compared after unescaping). */
function hasDuplicateMember(text) {
  const stack = []; // one Set of keys per open object, null per open array
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === "{") stack.push(new Set());
    else if (c === "[") stack.push(null);
    else if (c === "}" || c === "]") stack.pop();
    else if (c === '"') {
      let j = i + 1;
      while (text[j] !== '"') j += text[j] === "\\" ? 2 : 1;
      const str = JSON.parse(text.slice(i, j + 1));
      i = j;
      let k = j + 1;
      while (" \t\r\n".includes(text[k])) k++;
      const keys = stack[stack.length - 1];
      if (text[k] === ":" && keys) {
        if (keys.has(str)) return true;
        keys.add(str);
      }
    }
  }
  return false;
}

let files = 0;
let textValidated = 0;
let textNotJson = 0;
let textDuplicates = 0;
for (const path of jsonFiles("vectors")) {
  const file = relative(root, path);
  const doc = load(path);
  files += 1;
  check(vectorsSchema, file, doc);
  if (doc.number_of_vectors !== doc.vectors?.length) {
    failures += 1;
    console.error(`FAIL ${file}: number_of_vectors ${doc.number_of_vectors}, but ${doc.vectors?.length} vectors`);
  }
  const ids = new Set();
  for (const v of doc.vectors ?? []) {
    if (ids.has(v.id)) {
      failures += 1;
      console.error(`FAIL ${file}: duplicate vector id ${v.id}`);
    }
    ids.add(v.id);
    // The request the runner makes of it (HARNESS.md §2): the vector without its answer.
    const { description: _d, expected: _e, ...req } = v;
    check(request, file, { ...req, kind: doc.kind }, ` (${v.id}, as a harness request)`);
    if (doc.kind !== "evidence" || typeof v.input_text !== "string") continue;
    let parsed;
    try {
      parsed = JSON.parse(v.input_text);
    } catch {
      textNotJson += 1;
      continue;
    }
    if (hasDuplicateMember(v.input_text)) {
      textDuplicates += 1;
      continue;
    }
    textValidated += 1;
    const { input_text: _, ...rest } = v;
    check(evidenceVector, file, { ...rest, input: parsed }, ` (${v.id}, input_text parsed)`);
  }
}
for (const path of jsonFiles("fixtures/worked-example", ".case.json")) {
  files += 1;
  check(caseSchema, relative(root, path), load(path));
}
for (const path of jsonFiles("conformance/baselines")) {
  files += 1;
  check(baselineSchema, relative(root, path), load(path));
}
console.log(
  `${files} files checked against conformance/schema/ (${textValidated} CASE texts parsed and checked; not parsed by design: ${textNotJson} not JSON, ${textDuplicates} with a duplicate member): ${failures === 0 ? "all valid" : `${failures} failures`}`,
);
process.exit(failures === 0 ? 0 : 1);
