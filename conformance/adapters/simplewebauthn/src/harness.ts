// An independent Countersign verifier on @simplewebauthn/server, speaking the conformance harness
// protocol (conformance/HARNESS.md, countersign-harness/1) on stdin/stdout.
//
//   node dist/harness.js      serve the protocol: one JSON request per line in, one answer out

import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { opHashDocument, Refused } from "./canon.js";
import { Unusable, verifyCase } from "./evidence.js";

const PROTOCOL = "countersign-harness/1";
const PINNED_UNICODE = 18;

// What @simplewebauthn/server (or Node under it) cannot check, by flag, with the reason. These
// vectors are skipped with the reason, never silently, and never to hide a disagreement.
const UNSUPPORTED: Record<string, string> = {
  "cross-origin":
    "@simplewebauthn/server 14 accepts crossOrigin: true whenever clientDataJSON has no topOrigin (kept for Safari), so it cannot refuse a framed ceremony the policy does not allow",
  "policy-der-strict":
    "@simplewebauthn/server unwraps ECDSA signatures with @peculiar/asn1-schema, which accepts non-minimal DER (a long-form length, a missing 0x00 pad) and verifies the signature inside",
  "signature-encoding":
    "@simplewebauthn/server hands an Ed25519 signature of the wrong length to WebCrypto, which answers false: a bad signature, not malformed evidence",
  "policy-origin-tuple": "@simplewebauthn/server compares origins (and topOrigin) as strings, not as (scheme, host, port) tuples",
};
const unicode = process.versions.unicode ?? "0";
if (Number(unicode.split(".")[0]) < PINNED_UNICODE) {
  UNSUPPORTED["policy-unicode-18"] = `Node ${process.versions.node.split(".")[0]}'s ICU has Unicode ${unicode}; the vectors pin ${PINNED_UNICODE}.0`;
}

interface Request {
  id?: string;
  kind?: string;
  input?: unknown;
  input_text?: string;
  input_base64?: string;
}

function inputBytes(req: Request): Uint8Array {
  if ("input" in req) return Buffer.from(JSON.stringify(req.input), "utf8");
  if (typeof req.input_text === "string") return Buffer.from(req.input_text, "utf8");
  if (typeof req.input_base64 === "string") return Buffer.from(req.input_base64, "base64");
  throw new Error("no input member");
}

async function answer(req: Request): Promise<object> {
  const id = req.id;
  try {
    const bytes = inputBytes(req);
    if (req.kind === "op_hash") {
      try {
        return { id, verdict: { op_hash: opHashDocument(bytes).toString("base64url") } };
      } catch (e) {
        if (e instanceof Refused) return { id, verdict: { error: e.code } };
        throw e;
      }
    }
    if (req.kind === "evidence") return { id, verdict: await verifyCase(bytes) };
    return { id, unsupported: `kind ${JSON.stringify(req.kind)}` };
  } catch (e) {
    if (e instanceof Unusable) return { id, verdict: { unusable_case: e.member } };
    return { id, error: `adapter error: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}` };
  }
}

async function serve(): Promise<void> {
  // The installed version (the package does not export its package.json).
  const manifest = new URL("../node_modules/@simplewebauthn/server/package.json", import.meta.url);
  const version = (JSON.parse(readFileSync(manifest, "utf8")) as { version: string }).version;
  const hello = {
    protocol: PROTOCOL,
    implementation: `@simplewebauthn/server ${version} adapter (Node ${process.versions.node.split(".")[0]})`,
    kinds: ["evidence", "op_hash"],
    unsupported_flags: UNSUPPORTED,
  };
  process.stdout.write(`${JSON.stringify(hello)}\n`);
  // One request at a time, in order (HARNESS.md: everything is sequential).
  for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
    if (line.trim() === "") continue;
    process.stdout.write(`${JSON.stringify(await answer(JSON.parse(line) as Request))}\n`);
  }
}

await serve();
