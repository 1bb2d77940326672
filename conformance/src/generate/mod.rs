//! The generator: every vector, rebuilt byte for byte from the fixture seeds.
//!
//! Determinism: keys come from `fixtures/keys/`, nonces from labels, ECDSA is RFC 6979, the clock
//! is the constant `countersign_testkit::NOW`; the output order is the order of the code below and
//! JSON objects are written with sorted keys (vector members in declaration order).
#![allow(
    clippy::panic,
    clippy::indexing_slicing,
    reason = "the generator builds vectors from the fixed fixtures; a slip is a generator bug, and \
              the byte-for-byte regeneration test fails on it"
)]

mod binding;
mod case;
mod near;
mod ophash;
mod paths;
mod policy;
mod rules;
mod standing;
mod webauthn;

use crate::vectors::{self, Input, Kind, SCHEMA, Vector, VectorFile};
use anyhow::Context as _;
use serde_json::Value;
use std::path::Path;

/// Vectors collected in generation order.
#[derive(Debug, Default)]
pub(crate) struct Out {
    vectors: Vec<Vector>,
}

impl Out {
    /// An evidence vector.
    pub(crate) fn ev(
        &mut self,
        id: &str,
        description: &str,
        flags: &[&str],
        case: case::Case,
        expected: Value,
    ) {
        self.op(id, description, flags, case.input(), expected);
    }

    /// Any vector, input already built.
    pub(crate) fn op(
        &mut self,
        id: &str,
        description: &str,
        flags: &[&str],
        input: Input,
        expected: Value,
    ) {
        let mut flags: Vec<String> = flags.iter().map(|f| (*f).to_owned()).collect();
        flags.sort();
        flags.dedup();
        self.vectors.push(Vector {
            id: id.to_owned(),
            description: description.to_owned(),
            flags,
            input,
            expected,
        });
    }
}

/// The text of every generated file, by path relative to the repository root.
pub fn files() -> anyhow::Result<Vec<(String, String)>> {
    let mut evidence = Out::default();
    binding::worked(&mut evidence);
    webauthn::algorithms(&mut evidence);
    webauthn::flags(&mut evidence);
    webauthn::client_data(&mut evidence);
    webauthn::counter(&mut evidence);
    binding::binding(&mut evidence);
    binding::mcp_calls(&mut evidence);
    binding::entry_structure(&mut evidence);
    binding::credentials(&mut evidence);
    policy::status(&mut evidence);
    policy::freshness(&mut evidence);
    policy::replay(&mut evidence);
    policy::quorum(&mut evidence);
    policy::check_order(&mut evidence);
    rules::nfc(&mut evidence);
    rules::operation(&mut evidence);
    rules::eligibility(&mut evidence);
    rules::eligibility_more(&mut evidence);
    rules::contradictory(&mut evidence);
    rules::policy_shape(&mut evidence);
    rules::null_members(&mut evidence);
    near::envelope(&mut evidence);
    near::entries(&mut evidence);
    near::freshness(&mut evidence);
    near::near_misses(&mut evidence);
    near::client_data(&mut evidence);
    standing::standing(&mut evidence);
    paths::paths(&mut evidence);

    let mut op_hash = Out::default();
    ophash::op_hash(&mut op_hash);

    let mut files = Vec::new();
    for (name, kind, out, notes) in [
        ("evidence.json", Kind::Evidence, evidence, EVIDENCE_NOTES),
        ("op_hash.json", Kind::OpHash, op_hash, OP_HASH_NOTES),
    ] {
        let file = VectorFile {
            schema: SCHEMA.to_owned(),
            generated_by: "countersign-conformance generate (GENERATED FILE: do not edit; \
                           change conformance/src/generate/ and regenerate)"
                .to_owned(),
            kind,
            flag_registry: "vectors/README.md#flags".to_owned(),
            notes: notes.iter().map(|n| (*n).to_owned()).collect(),
            number_of_vectors: out.vectors.len(),
            vectors: out.vectors,
        };
        files.push((format!("vectors/{name}"), vectors::to_text(&file)?));
    }
    for (name, _, case, _) in binding::worked_example() {
        let value = match case.input() {
            Input::Json(v) => v,
            other => anyhow::bail!("worked example {name} is not plain JSON: {other:?}"),
        };
        let mut text = serde_json::to_string_pretty(&value)?;
        text.push('\n');
        files.push((format!("fixtures/worked-example/{name}.case.json"), text));
    }
    Ok(files)
}

/// Write every generated file under `root` (the repository root).
pub fn write(root: &Path) -> anyhow::Result<usize> {
    let files = files()?;
    for (rel, text) in &files {
        let path = root.join(rel);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(files.len())
}

/// The generated files that differ from what is committed under `root`.
pub fn stale(root: &Path) -> anyhow::Result<Vec<String>> {
    let mut differ = Vec::new();
    for (rel, text) in files()? {
        let committed = std::fs::read_to_string(root.join(&rel)).unwrap_or_default();
        if committed != text {
            differ.push(rel);
        }
    }
    Ok(differ)
}

const EVIDENCE_NOTES: &[&str] = &[
    "Each input is a CASE exactly as `countersign verify` takes it: {action, result, registry, policy, now}. `input_text` carries the exact CASE text where the action's lexical form matters.",
    "expected is {\"unusable_case\": MEMBER} when the CASE itself is unusable because of that member (today a contradictory or malformed policy): there is no verdict, `countersign verify` exits 2.",
    "expected.decision is the transport status, except that a verified refusal makes it DENIED; it is null when the result envelope is unusable (reason result_malformed).",
    "expected.identity_assurance_level is `declared` whenever no evidence verified; otherwise the level derived from the evidence (the weakest approver on ALLOW and policy denials, the refusing approver on a veto).",
    "Replay state is empty at the start of each vector; a nonce repeated inside one CASE is replayed.",
    "Expected verdicts are written from docs/SPEC.md by the generator's author, never computed by a verifier. Flags starting with `policy-` name the policy a verdict depends on.",
];

const OP_HASH_NOTES: &[&str] = &[
    "Each input is an op-hash document {profile, decision, fields} as `countersign op-hash` reads it on stdin: `input` (a JSON value: any serialization of it gives the same op_hash), `input_text` (the exact text: duplicate keys, escapes, big numbers, whitespace) or `input_base64` (exact bytes that are not UTF-8).",
    "expected.op_hash is base64url without padding of SHA-256(JCS({decision, fields, profile})) after NFC; expected.error is the reason code of the refusal.",
    "Expected op_hashes are computed by the generator with its own NFC pass and serde_json_canonicalizer, not by the library's admission code.",
];
