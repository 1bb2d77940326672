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
    /// The action itself is not admissible under its profile, before any evidence is looked at.
    #[error("the action is not admissible under its profile: {0}")]
    Action(CanonError),
    /// The policy requires evidence and the result carries none.
    #[error("policy requires evidence and the {status} result carries none")]
    EvidenceMissing {
        /// The result's status.
        status: &'static str,
    },
    /// One evidence entry failed; the first failing entry decides.
    #[error("evidence[{index}]: {error}")]
    Evidence {
        /// The entry's position in `approver_evidence`, from 0.
        index: usize,
        /// Why the entry failed.
        error: EvidenceError,
    },
    /// The transport status is not APPROVED while every verified entry signs APPROVED.
    #[error("the result says {status} but its verified evidence signs {signed}")]
    StatusContradictsEvidence {
        /// The result's status.
        status: &'static str,
        /// The decision the evidence signs.
        signed: &'static str,
    },
    /// An approving entry's derived level is below `policy.min_assurance`.
    #[error("{principal} approved at {got}, below the policy minimum {required}")]
    InsufficientAssurance {
        /// Whose approval fell short.
        principal: String,
        /// The policy's minimum level.
        required: &'static str,
        /// The approval's derived level.
        got: &'static str,
    },
    /// Fewer distinct principals approved than `policy.quorum` requires.
    #[error("{got} distinct principal(s) approved, the policy requires {required}")]
    QuorumNotMet {
        /// The policy's quorum.
        required: u32,
        /// How many distinct principals approved.
        got: u32,
    },
    /// The gateway runs another tool than the one the approver signed.
    #[error("the action runs tool {tool:?} but its signed tool_name is {signed:?}")]
    OperationMismatch {
        /// The tool the gateway will run.
        tool: String,
        /// The signed `tool_name`.
        signed: String,
    },
    /// The profile does not sign its operation, and the policy's `profile_tools` does not bind it
    /// to this tool.
    #[error("{}", operation_not_bound(profile, tool, bound.as_deref()))]
    OperationNotBound {
        /// The action's profile.
        profile: String,
        /// The tool the gateway will run.
        tool: String,
        /// The tool the policy binds the profile to, if any.
        bound: Option<String>,
    },
    /// The action names no tool, but the policy binds its profile to one.
    #[error(
        "the action names no tool, and profile {profile:?} is bound to tool {bound:?} by the policy"
    )]
    OperationUnnamed {
        /// The action's profile.
        profile: String,
        /// The tool the policy binds the profile to, if any.
        bound: String,
    },
    /// A standing grant was presented for an action whose profile is not a tool call (or whose
    /// `server_id` is not a string a grant could name).
    #[error(
        "a standing grant covers tool calls only (string agent_id and tool_name, params, and a \
         string server_id if any); the call under profile {profile:?} is not one"
    )]
    StandingNotToolCall {
        /// The action's profile.
        profile: String,
    },
    /// The result's standing grant fields are not a readable grant.
    #[error("the standing grant's fields cannot be read: {0}")]
    StandingGrantUnusable(String),
    /// The standing grant verified, but the call is at or after its `expires_at`.
    #[error("the standing grant expired at {expires_at}; the call is at {now}")]
    StandingGrantExpired {
        /// The grant's `expires_at`.
        expires_at: String,
        /// The verifier's time.
        now: String,
    },
    /// The call falls outside the standing grant's scope.
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
    /// The entry does not decode (bad base64url, a missing or unknown member, a bad timestamp,
    /// ...).
    #[error("cannot decode the entry: {0}")]
    Malformed(String),
    /// The entry is in a format this verifier does not implement.
    #[error("format {0:?} is not implemented (expected {WEBAUTHN_ASSERTION_FORMAT})")]
    UnsupportedFormat(String),
    /// The entry's profile is not in the verifier's registry.
    #[error("canonicalization profile {0:?} is not in the verifier's registry")]
    ProfileUnknown(String),
    /// The entry's profile is not the action's.
    #[error("evidence is for profile {evidence:?}, the action uses {action:?}")]
    ProfileMismatch {
        /// The entry's profile.
        evidence: String,
        /// The action's profile.
        action: String,
    },
    /// No key of the registry has this credential id.
    #[error("credential {0} is not enrolled")]
    CredentialUnknown(String),
    /// The key was revoked.
    #[error("credential {credential_id} of {principal} is revoked")]
    CredentialRevoked {
        /// The credential id, base64url.
        credential_id: String,
        /// The key's principal.
        principal: String,
    },
    /// The key's principal is not among `policy.approvers`: its refusal is no veto either.
    #[error(
        "credential {credential_id} belongs to {principal}, who is not among the policy's approvers"
    )]
    Ineligible {
        /// The key's principal.
        principal: String,
        /// The credential id, base64url.
        credential_id: String,
    },
    /// The enrolled key uses an algorithm this verifier does not implement.
    #[error("credential {credential_id}: {source}")]
    UnusableKey {
        /// The credential id, base64url.
        credential_id: String,
        /// Why the key cannot be used.
        source: CoseError,
    },
    /// The entry's nonce is not 32 bytes.
    #[error("nonce is {got} bytes, expected {NONCE_LEN}")]
    NonceLength {
        /// The length received, in bytes.
        got: usize,
    },
    /// The signed challenge is not 64 bytes (nonce then op_hash).
    #[error("challenge is {got} bytes, expected nonce(32) || op_hash(32)")]
    ChallengeLength {
        /// The length received, in bytes.
        got: usize,
    },
    /// The entry's nonce is not the signed challenge's.
    #[error("the nonce beside the signature differs from the signed challenge's nonce")]
    NonceMismatch,
    /// The entry's op_hash is not the signed challenge's.
    #[error("the op_hash beside the signature differs from the signed challenge's op_hash")]
    OpHashFieldMismatch,
    /// The entry claims one decision and the signature covers the other (a decision flip).
    #[error("entry claims {claimed} but the signature covers {signed}")]
    DecisionMismatch {
        /// The decision the entry claims.
        claimed: &'static str,
        /// The decision the signature covers.
        signed: &'static str,
    },
    /// The signed op_hash is this action's under neither decision: the evidence is for another
    /// action.
    #[error(
        "signed op_hash {signed} matches neither decision on this action (APPROVED would be {approved})"
    )]
    ActionMismatch {
        /// The op_hash that was signed, base64url.
        signed: String,
        /// This action's op_hash for APPROVED, base64url.
        approved: String,
    },
    /// The WebAuthn assertion checks refused the entry.
    #[error("{0}")]
    Assertion(AssertionError),
    /// `assertion_at` is not RFC 3339.
    #[error("assertion_at {0:?} is not an RFC 3339 timestamp")]
    AssertionAtInvalid(String),
    /// The assertion is older than `policy.max_age_seconds`.
    #[error("assertion is {}s old, the policy allows {max_age_seconds}s", seconds(*age))]
    Stale {
        /// Exactly how old (`now - assertion_at`), never rounded.
        age: std::time::Duration,
        /// The policy's maximum age.
        max_age_seconds: u64,
    },
    /// The assertion is dated further in the future than `policy.clock_skew_seconds` allows.
    #[error(
        "assertion is dated {}s in the future, beyond the {skew_seconds}s skew",
        seconds(*ahead)
    )]
    FutureDated {
        /// Exactly how far ahead (`assertion_at - now`), never rounded.
        ahead: std::time::Duration,
        /// The policy's tolerated skew.
        skew_seconds: u64,
    },
    /// The nonce was already spent, in the replay state or by an earlier entry of the same result.
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
