//! The typed errors of `verify_evidence`: what refused an action, with the evidence for a human,
//! and the one wire reason code each maps to.

use super::NONCE_LEN;
use crate::canon::CanonError;
use crate::reason::ReasonCode;
use crate::result::WEBAUTHN_ASSERTION_FORMAT;
use crate::webauthn::{AssertionError, CoseError};

/// Why evidence, or the policy applied to it, refused an action.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VerifyError {
    #[error("the action is not admissible under its profile: {0}")]
    Action(CanonError),
    #[error("policy requires evidence and the {status} result carries none")]
    EvidenceMissing { status: &'static str },
    #[error("evidence[{index}]: {error}")]
    Evidence { index: usize, error: EvidenceError },
    #[error("the result says {status} but its verified evidence signs {signed}")]
    StatusContradictsEvidence {
        status: &'static str,
        signed: &'static str,
    },
    #[error("{principal} approved at {got}, below the policy minimum {required}")]
    InsufficientAssurance {
        principal: String,
        required: &'static str,
        got: &'static str,
    },
    #[error("{got} distinct principal(s) approved, the policy requires {required}")]
    QuorumNotMet { required: u32, got: u32 },
    #[error("the action runs tool {tool:?} but its signed tool_name is {signed:?}")]
    OperationMismatch { tool: String, signed: String },
    #[error("{}", operation_not_bound(profile, tool, bound.as_deref()))]
    OperationNotBound {
        profile: String,
        tool: String,
        bound: Option<String>,
    },
    #[error(
        "the action names no tool, and profile {profile:?} is bound to tool {bound:?} by the policy"
    )]
    OperationUnnamed { profile: String, bound: String },
    #[error(
        "a standing grant covers tool calls only (agent_id, tool_name, params); profile {profile:?} \
         does not declare them"
    )]
    StandingNotToolCall { profile: String },
    #[error("the standing grant's fields cannot be read: {0}")]
    StandingGrantUnusable(String),
    #[error("the standing grant expired at {expires_at}; the call is at {now}")]
    StandingGrantExpired { expires_at: String, now: String },
    #[error("the call is outside the standing grant's scope: {0}")]
    OutOfScope(crate::scope::OutOfScope),
}

fn operation_not_bound(profile: &str, tool: &str, bound: Option<&str>) -> String {
    match bound {
        Some(bound) => format!(
            "tool {tool:?} may not use profile {profile:?}: the policy binds it to tool {bound:?}"
        ),
        None => format!(
            "tool {tool:?} may not use profile {profile:?}: the profile does not sign its operation \
             and the policy's profile_tools binds it to no tool"
        ),
    }
}

impl VerifyError {
    /// The wire reason code.
    pub fn reason_code(&self) -> ReasonCode {
        match self {
            Self::Action(e) => e.reason_code(),
            Self::EvidenceMissing { .. } => ReasonCode::EvidenceMissing,
            Self::Evidence { error, .. } => error.reason_code(),
            Self::StatusContradictsEvidence { .. } => ReasonCode::BindingMismatch,
            Self::InsufficientAssurance { .. } => ReasonCode::InsufficientAssurance,
            Self::QuorumNotMet { .. } => ReasonCode::QuorumNotMet,
            Self::OperationMismatch { .. } => ReasonCode::BindingMismatch,
            Self::OperationNotBound { .. }
            | Self::OperationUnnamed { .. }
            | Self::StandingNotToolCall { .. } => ReasonCode::ActionInadmissible,
            Self::StandingGrantUnusable(_) => ReasonCode::EvidenceMalformed,
            Self::StandingGrantExpired { .. } => ReasonCode::StandingGrantExpired,
            Self::OutOfScope(_) => ReasonCode::OutOfScope,
        }
    }
}

/// Why one evidence entry failed, in check order.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EvidenceError {
    #[error("cannot decode the entry: {0}")]
    Malformed(String),
    #[error("format {0:?} is not implemented (expected {WEBAUTHN_ASSERTION_FORMAT})")]
    UnsupportedFormat(String),
    #[error("canonicalization profile {0:?} is not in the verifier's registry")]
    ProfileUnknown(String),
    #[error("evidence is for profile {evidence:?}, the action uses {action:?}")]
    ProfileMismatch { evidence: String, action: String },
    #[error("credential {0} is not enrolled")]
    CredentialUnknown(String),
    #[error("credential {credential_id} of {principal} is revoked")]
    CredentialRevoked {
        credential_id: String,
        principal: String,
    },
    #[error(
        "credential {credential_id} belongs to {principal}, who is not among the policy's approvers"
    )]
    Ineligible {
        principal: String,
        credential_id: String,
    },
    #[error("credential {credential_id}: {source}")]
    UnusableKey {
        credential_id: String,
        source: CoseError,
    },
    #[error("nonce is {got} bytes, expected {NONCE_LEN}")]
    NonceLength { got: usize },
    #[error("challenge is {got} bytes, expected nonce(32) || op_hash(32)")]
    ChallengeLength { got: usize },
    #[error("the nonce beside the signature differs from the signed challenge's nonce")]
    NonceMismatch,
    #[error("the op_hash beside the signature differs from the signed challenge's op_hash")]
    OpHashFieldMismatch,
    #[error("entry claims {claimed} but the signature covers {signed}")]
    DecisionMismatch {
        claimed: &'static str,
        signed: &'static str,
    },
    #[error(
        "signed op_hash {signed} matches neither decision on this action (APPROVED would be {approved})"
    )]
    ActionMismatch { signed: String, approved: String },
    #[error("{0}")]
    Assertion(AssertionError),
    #[error("assertion_at {0:?} is not an RFC 3339 timestamp")]
    AssertionAtInvalid(String),
    #[error("assertion is {}s old, the policy allows {max_age_seconds}s", seconds(*age))]
    Stale {
        /// Exactly how old (`now - assertion_at`), never rounded.
        age: std::time::Duration,
        max_age_seconds: u64,
    },
    #[error(
        "assertion is dated {}s in the future, beyond the {skew_seconds}s skew",
        seconds(*ahead)
    )]
    FutureDated {
        /// Exactly how far ahead (`assertion_at - now`), never rounded.
        ahead: std::time::Duration,
        skew_seconds: u64,
    },
    #[error("nonce {0} was already spent")]
    Replayed(String),
}

/// A duration in seconds with its fraction, as short as exact: `300`, `300.5`, `0.000000001`.
fn seconds(d: std::time::Duration) -> String {
    let nanos = d.subsec_nanos();
    if nanos == 0 {
        return d.as_secs().to_string();
    }
    let fraction = format!("{nanos:09}");
    format!("{}.{}", d.as_secs(), fraction.trim_end_matches('0'))
}

impl EvidenceError {
    /// The wire reason code.
    pub fn reason_code(&self) -> ReasonCode {
        match self {
            Self::Malformed(_) | Self::NonceLength { .. } | Self::AssertionAtInvalid(_) => {
                ReasonCode::EvidenceMalformed
            }
            Self::UnsupportedFormat(_) => ReasonCode::UnsupportedFormat,
            Self::ProfileUnknown(_) => ReasonCode::ProfileUnknown,
            Self::ProfileMismatch { .. }
            | Self::ChallengeLength { .. }
            | Self::NonceMismatch
            | Self::OpHashFieldMismatch
            | Self::DecisionMismatch { .. }
            | Self::ActionMismatch { .. } => ReasonCode::BindingMismatch,
            Self::CredentialUnknown(_) => ReasonCode::CredentialUnknown,
            Self::CredentialRevoked { .. } => ReasonCode::CredentialRevoked,
            Self::Ineligible { .. } => ReasonCode::ApproverIneligible,
            Self::UnusableKey { .. } => ReasonCode::UnsupportedAlgorithm,
            Self::Assertion(e) => e.reason_code(),
            Self::Stale { .. } | Self::FutureDated { .. } => ReasonCode::Stale,
            Self::Replayed(_) => ReasonCode::Replayed,
        }
    }
}
