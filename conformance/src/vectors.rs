//! The vector file format: a versioned envelope, then vectors.
//!
//! Both kinds share one shape: `{"id", "description", "flags", <input>, "expected"}`, where the
//! input is exactly one of `input` (a JSON value), `input_text` (the exact bytes, as a JSON string,
//! for inputs whose lexical form matters: duplicate keys, escapes, big integers) or
//! `input_base64` (standard base64 of bytes that are not UTF-8). See `vectors/README.md`.

use anyhow::{Context as _, bail};
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::Path;

/// The envelope's schema id; bump on any incompatible change of the format.
pub const SCHEMA: &str = "countersign-vectors/1";

/// The vector files, in the order the runner reads them.
pub const FILES: &[(&str, Kind)] = &[
    ("evidence.json", Kind::Evidence),
    ("op_hash.json", Kind::OpHash),
];

/// What a vector asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Kind {
    /// A CASE in, a verdict out.
    #[serde(rename = "evidence")]
    Evidence,
    /// An op-hash document in, an op_hash (or a refusal) out.
    #[serde(rename = "op_hash")]
    OpHash,
}

impl Kind {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Evidence => "evidence",
            Self::OpHash => "op_hash",
        }
    }
}

/// One vector file.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VectorFile {
    pub schema: String,
    pub generated_by: String,
    pub kind: Kind,
    pub flag_registry: String,
    pub notes: Vec<String>,
    pub number_of_vectors: usize,
    pub vectors: Vec<Vector>,
}

/// The input of a vector, in one of three spellings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Input {
    /// A JSON value; its lexical form carries no meaning.
    #[serde(rename = "input")]
    Json(Value),
    /// The exact input text.
    #[serde(rename = "input_text")]
    Text(String),
    /// The exact input bytes (not UTF-8), standard base64 with padding.
    #[serde(rename = "input_base64")]
    Base64(String),
}

impl Input {
    /// The exact bytes an implementation is given.
    pub fn bytes(&self) -> anyhow::Result<Vec<u8>> {
        Ok(match self {
            Self::Json(v) => serde_json::to_vec(v)?,
            Self::Text(t) => t.as_bytes().to_vec(),
            Self::Base64(b) => base64::engine::general_purpose::STANDARD
                .decode(b)
                .context("input_base64")?,
        })
    }

    /// The member name and value as they appear in a vector (and in a harness request).
    pub fn member(&self) -> (&'static str, Value) {
        match self {
            Self::Json(v) => ("input", v.clone()),
            Self::Text(t) => ("input_text", Value::String(t.clone())),
            Self::Base64(b) => ("input_base64", Value::String(b.clone())),
        }
    }
}

/// One vector.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Vector {
    pub id: String,
    pub description: String,
    pub flags: Vec<String>,
    #[serde(flatten)]
    pub input: Input,
    /// For evidence: `{"effective", "decision", "reason_code", "identity_assurance_level"}`, or
    /// `{"unusable_case": MEMBER}` for a CASE that gets no verdict at all; for op_hash:
    /// `{"op_hash"}` or `{"error"}`.
    pub expected: Value,
}

/// The expected verdict of an evidence vector, in the order it is written.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvidenceExpected {
    pub effective: String,
    pub decision: Option<String>,
    pub reason_code: Option<String>,
    pub identity_assurance_level: String,
}

/// The expectation of an evidence vector whose CASE is unusable (no verdict; `countersign verify`
/// exits 2): which CASE member makes it so. A result envelope that is unusable is not this: it is a
/// verdict (`result_malformed`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UnusableCase {
    pub unusable_case: String,
}

/// The CASE members an `unusable_case` expectation may name.
pub const UNUSABLE_CASE_MEMBERS: &[&str] = &["case", "action", "registry", "policy", "now"];

/// A loaded vector with its kind.
#[derive(Clone, Debug)]
pub struct Loaded {
    pub kind: Kind,
    pub vector: Vector,
}

/// Serialize a file the one way the generator writes it (pretty, two spaces, final newline).
pub fn to_text(file: &VectorFile) -> anyhow::Result<String> {
    let mut text = serde_json::to_string_pretty(file)?;
    text.push('\n');
    Ok(text)
}

/// Read every vector file in `dir`.
pub fn load_dir(dir: &Path) -> anyhow::Result<Vec<Loaded>> {
    let mut out = Vec::new();
    for (name, kind) in FILES {
        let path = dir.join(name);
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let file: VectorFile =
            serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        if file.schema != SCHEMA {
            bail!(
                "{}: schema {:?}, this runner reads {SCHEMA:?}",
                path.display(),
                file.schema
            );
        }
        if file.kind != *kind {
            bail!(
                "{}: kind {:?}, expected {:?}",
                path.display(),
                file.kind,
                kind
            );
        }
        out.extend(file.vectors.into_iter().map(|vector| Loaded {
            kind: *kind,
            vector,
        }));
    }
    Ok(out)
}
