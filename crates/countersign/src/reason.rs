//! The closed set of wire reason codes.
//!
//! Every DENY carries exactly one of these; an ALLOW carries none. They are deliberately few
//! (low cardinality) so that gateways can switch on them and dashboards can count them. The
//! detailed cause lives in the typed error that produced the code.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A low-cardinality, snake_case reason for a DENY (or for an inadmissible input).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ReasonCode {
    /// A verified refusal: the approver's authenticator signed DENIED for this action.
    ApproverRefused,
    /// The approval window closed with no verdict.
    ExpiredUnanswered,
    /// No enrolled approver may decide this action (a staffing failure, not a security decision).
    NoEligibleApprover,
    /// The approval callback did not answer within the gateway's timeout.
    CallbackTimeout,
    /// The request was withdrawn before any verdict (a terminal settlement, not a human verdict).
    Cancelled,
    /// The request is still waiting for a human.
    Pending,
    /// Policy requires evidence and the result carries none.
    EvidenceMissing,
    /// Evidence is present but cannot be decoded or is structurally invalid.
    EvidenceMalformed,
    /// The evidence `format` is not one this verifier implements.
    UnsupportedFormat,
    /// The canonicalization profile is not in the verifier's pinned registry.
    ProfileUnknown,
    /// The action fields are not admissible under the profile (canonicalization refused them).
    ActionInadmissible,
    /// op_hash, nonce or decision does not match the action and the signed challenge.
    BindingMismatch,
    /// The signature does not verify under the enrolled public key.
    SignatureInvalid,
    /// The authenticator data is for another relying party (rpIdHash).
    RpMismatch,
    /// clientDataJSON names an origin (or cross-origin context) the policy does not allow.
    OriginMismatch,
    /// The UP flag is not set.
    UserNotPresent,
    /// Policy requires user verification and the UV flag is not set.
    UserNotVerified,
    /// The credential id is not in the verifier's registry.
    CredentialUnknown,
    /// The credential was enrolled but has been revoked.
    CredentialRevoked,
    /// The credential belongs to a principal the policy does not allow to decide.
    ApproverIneligible,
    /// The BE flag contradicts what was recorded at enrollment.
    BackupEligibilityMismatch,
    /// The signature counter went backwards: a possible cloned authenticator.
    CounterRegression,
    /// The nonce was already spent.
    Replayed,
    /// The assertion is older than the policy's maximum age (or dated in the future).
    Stale,
    /// The derived identity assurance is below the policy's minimum.
    InsufficientAssurance,
    /// Fewer distinct principals approved than the policy's quorum.
    QuorumNotMet,
    /// The approval result itself is unusable (unknown status, missing fields).
    ResultMalformed,
    /// The signature algorithm of the enrolled key is not supported.
    UnsupportedAlgorithm,
    /// A standing grant verified, but the call is outside its scope: another agent or tool, an
    /// argument constraint not met (an absent argument included), or a use beyond `max_uses`.
    OutOfScope,
    /// A standing grant verified, but it had expired at the time of the call.
    StandingGrantExpired,
}

impl ReasonCode {
    /// Every code, in declaration order (used by docs, vectors and tests).
    pub const ALL: &'static [ReasonCode] = &[
        Self::ApproverRefused,
        Self::ExpiredUnanswered,
        Self::NoEligibleApprover,
        Self::CallbackTimeout,
        Self::Cancelled,
        Self::Pending,
        Self::EvidenceMissing,
        Self::EvidenceMalformed,
        Self::UnsupportedFormat,
        Self::ProfileUnknown,
        Self::ActionInadmissible,
        Self::BindingMismatch,
        Self::SignatureInvalid,
        Self::RpMismatch,
        Self::OriginMismatch,
        Self::UserNotPresent,
        Self::UserNotVerified,
        Self::CredentialUnknown,
        Self::CredentialRevoked,
        Self::ApproverIneligible,
        Self::BackupEligibilityMismatch,
        Self::CounterRegression,
        Self::Replayed,
        Self::Stale,
        Self::InsufficientAssurance,
        Self::QuorumNotMet,
        Self::ResultMalformed,
        Self::UnsupportedAlgorithm,
        Self::OutOfScope,
        Self::StandingGrantExpired,
    ];

    /// The wire spelling, e.g. `binding_mismatch`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ApproverRefused => "approver_refused",
            Self::ExpiredUnanswered => "expired_unanswered",
            Self::NoEligibleApprover => "no_eligible_approver",
            Self::CallbackTimeout => "callback_timeout",
            Self::Cancelled => "cancelled",
            Self::Pending => "pending",
            Self::EvidenceMissing => "evidence_missing",
            Self::EvidenceMalformed => "evidence_malformed",
            Self::UnsupportedFormat => "unsupported_format",
            Self::ProfileUnknown => "profile_unknown",
            Self::ActionInadmissible => "action_inadmissible",
            Self::BindingMismatch => "binding_mismatch",
            Self::SignatureInvalid => "signature_invalid",
            Self::RpMismatch => "rp_mismatch",
            Self::OriginMismatch => "origin_mismatch",
            Self::UserNotPresent => "user_not_present",
            Self::UserNotVerified => "user_not_verified",
            Self::CredentialUnknown => "credential_unknown",
            Self::CredentialRevoked => "credential_revoked",
            Self::ApproverIneligible => "approver_ineligible",
            Self::BackupEligibilityMismatch => "backup_eligibility_mismatch",
            Self::CounterRegression => "counter_regression",
            Self::Replayed => "replayed",
            Self::Stale => "stale",
            Self::InsufficientAssurance => "insufficient_assurance",
            Self::QuorumNotMet => "quorum_not_met",
            Self::ResultMalformed => "result_malformed",
            Self::UnsupportedAlgorithm => "unsupported_algorithm",
            Self::OutOfScope => "out_of_scope",
            Self::StandingGrantExpired => "standing_grant_expired",
        }
    }

    /// Parse a wire spelling; `None` for anything outside the closed set.
    pub fn from_wire(s: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|c| c.as_str() == s)
    }
}

impl fmt::Display for ReasonCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_spelling_round_trips_through_serde_and_from_wire() {
        for &code in ReasonCode::ALL {
            let json = serde_json::to_string(&code).unwrap_or_default();
            assert_eq!(json, format!("\"{}\"", code.as_str()));
            assert_eq!(ReasonCode::from_wire(code.as_str()), Some(code));
        }
        assert_eq!(ReasonCode::from_wire("approved"), None);
    }
}
