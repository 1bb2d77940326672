//! Canonicalization: strict JSON admission, NFC, JCS, profiles and op_hash.
//!
//! OWNED BY THE CANON HELPER — this file is a contract stub; replace bodies, keep signatures.

mod profile;

pub use profile::{FieldKind, FieldSpec, Profile, ProfileError, ProfileRegistry};

use crate::reason::ReasonCode;
use serde::{Deserialize, Serialize};

/// Maximum size in bytes of the `fields` JSON text admitted for one action.
pub const MAX_FIELDS_BYTES: usize = 64 * 1024;
/// Maximum nesting depth (objects and arrays) of admitted JSON.
pub const MAX_DEPTH: usize = 32;

/// The decision an approver signs. It is inside the hashed structure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Decision {
    #[serde(rename = "APPROVED")]
    Approved,
    #[serde(rename = "DENIED")]
    Denied,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Approved => "APPROVED",
            Self::Denied => "DENIED",
        }
    }
}

/// op_hash = SHA-256(JCS({"profile", "decision", "fields"})).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OpHash(pub [u8; 32]);

/// Why an input was refused before canonicalization.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CanonError {
    #[error("input is {got} bytes, over the {limit}-byte cap")]
    TooLarge { limit: usize, got: usize },
    #[error("unknown canonicalization profile {0:?}")]
    UnknownProfile(String),
    #[error("invalid JSON: {0}")]
    InvalidJson(String),
}

impl CanonError {
    /// The wire reason code for this error.
    pub fn reason_code(&self) -> ReasonCode {
        match self {
            Self::UnknownProfile(_) => ReasonCode::ProfileUnknown,
            _ => ReasonCode::ActionInadmissible,
        }
    }
}

/// Action fields that passed admission under a profile, with every string in NFC.
#[derive(Debug, Clone, PartialEq)]
pub struct CanonicalFields(serde_json::Value);

impl CanonicalFields {
    pub fn as_value(&self) -> &serde_json::Value {
        &self.0
    }
}

/// Admit the raw JSON text of an action's `fields` under `profile`.
pub fn admit_fields(profile: &Profile, raw: &[u8]) -> Result<CanonicalFields, CanonError> {
    let _ = (profile, raw);
    Err(CanonError::InvalidJson("not implemented".into()))
}

/// op_hash of admitted fields with a decision.
pub fn op_hash(profile: &Profile, decision: Decision, fields: &CanonicalFields) -> OpHash {
    let _ = (profile, decision, fields);
    OpHash([0; 32])
}

/// Parse and hash an op-hash document `{"profile", "decision", "fields"}` (the `op-hash` CLI input).
pub fn op_hash_document(registry: &ProfileRegistry, raw: &[u8]) -> Result<OpHash, CanonError> {
    let _ = (registry, raw);
    Err(CanonError::InvalidJson("not implemented".into()))
}
