//! Verifier policy: what evidence a verifier demands before it lets an action run.
//!
//! Defaults fail closed: evidence is required, user verification is required, one approver, five
//! minutes maximum age, strings already in NFC, every enrolled principal eligible. A policy with no
//! allowed origins can never be satisfied; a contradictory policy ([`Policy::validate`]) is refused
//! where it is loaded.

use crate::assurance::AssuranceLevel;
use crate::canon::{NfcMode, ProfileRegistry};
use crate::registry::Aaguid;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Default maximum age of an assertion, in seconds.
pub const DEFAULT_MAX_AGE_SECONDS: u64 = 300;
/// Default tolerance for an `assertion_at` slightly in the verifier's future, in seconds.
pub const DEFAULT_CLOCK_SKEW_SECONDS: u64 = 60;

/// A verifier policy (the `policy` object of a CASE).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// The WebAuthn relying party id the credentials were enrolled for.
    pub rp_id: String,
    /// Origins allowed in clientDataJSON (compared as origins, not strings).
    pub origins: Vec<String>,
    /// Whether an APPROVED result must carry verified evidence (default true).
    #[serde(default = "yes")]
    pub require_evidence: bool,
    /// Whether every counted assertion must have the UV flag (default true).
    #[serde(default = "yes")]
    pub require_user_verification: bool,
    /// The weakest assurance an approval may have (default: none beyond the other rules).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "not_null::min_assurance"
    )]
    pub min_assurance: Option<AssuranceLevel>,
    /// How many distinct principals must approve (default 1).
    #[serde(default = "one")]
    pub quorum: u32,
    /// Maximum age of `assertion_at` relative to `now` (default 300).
    #[serde(default = "default_max_age")]
    pub max_age_seconds: u64,
    /// Tolerated clock skew for assertions dated in the future (default 60).
    #[serde(default = "default_skew")]
    pub clock_skew_seconds: u64,
    /// Accept `crossOrigin: true` (an approval page embedded in another site's iframe). Default false.
    #[serde(default)]
    pub allow_cross_origin: bool,
    /// Origins allowed as `topOrigin` when cross-origin assertions are allowed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub top_origins: Vec<String>,
    /// AAGUIDs eligible for AAL3. Absent: any authenticator whose attestation chain verified.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "not_null::aal3_aaguids"
    )]
    pub aal3_aaguids: Option<Vec<Aaguid>>,
    /// What admission does with action strings that NFC would change: refuse them (`require`, the
    /// default) or normalize them (`normalize`, for a gateway that executes the NFC form).
    #[serde(default, skip_serializing_if = "is_require")]
    pub nfc: NfcMode,
    /// For each profile that does not sign its operation (no `tool_name` field), the one tool
    /// allowed to use it. See [`Policy::check_operation`].
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub profile_tools: BTreeMap<String, String>,
    /// The principals allowed to decide. Absent: every credential of the registry.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "not_null::approvers"
    )]
    pub approvers: Option<Vec<String>>,
    /// The canonicalization profiles this verifier accepts, pinned by digest. Not part of the
    /// CASE wire form: a CASE verifier uses the built-in profiles.
    #[serde(skip, default = "ProfileRegistry::builtin")]
    pub profiles: ProfileRegistry,
}

/// The optional members: absent means "no such restriction", so `null` is refused rather than
/// read as absent (see `crate::absent_or_value`).
mod not_null {
    crate::absent_or_value::refuse_null! {
        min_assurance => "min_assurance",
        aal3_aaguids => "aal3_aaguids",
        approvers => "approvers",
    }
}

fn is_require(mode: &NfcMode) -> bool {
    *mode == NfcMode::Require
}
fn yes() -> bool {
    true
}
fn one() -> u32 {
    1
}
fn default_max_age() -> u64 {
    DEFAULT_MAX_AGE_SECONDS
}
fn default_skew() -> u64 {
    DEFAULT_CLOCK_SKEW_SECONDS
}

impl Policy {
    /// A fail-closed policy for one relying party and its origins; everything else default.
    pub fn new(
        rp_id: impl Into<String>,
        origins: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        Self {
            rp_id: rp_id.into(),
            origins: origins.into_iter().map(Into::into).collect(),
            require_evidence: true,
            require_user_verification: true,
            min_assurance: None,
            quorum: 1,
            max_age_seconds: DEFAULT_MAX_AGE_SECONDS,
            clock_skew_seconds: DEFAULT_CLOCK_SKEW_SECONDS,
            allow_cross_origin: false,
            top_origins: Vec::new(),
            aal3_aaguids: None,
            nfc: NfcMode::Require,
            profile_tools: BTreeMap::new(),
            approvers: None,
            profiles: ProfileRegistry::builtin(),
        }
    }

    /// Refuse a policy whose members contradict each other, or that no evidence could ever
    /// satisfy. Where a policy is loaded (a CASE, a configuration file) this makes it unusable;
    /// [`crate::verify_evidence`] given one fails closed instead (it demands evidence).
    ///
    /// - `require_evidence = false` with `min_assurance` above `declared`, or with `quorum > 1`:
    ///   a bare `"APPROVED"` carries no approver and no assurance, so the policy would both demand
    ///   and waive the evidence;
    /// - `approvers = []`: nobody could ever approve;
    /// - `approvers` naming fewer distinct principals than `quorum`: the quorum can never be met.
    pub fn validate(&self) -> Result<(), PolicyError> {
        if !self.require_evidence {
            if self
                .min_assurance
                .is_some_and(|m| m > AssuranceLevel::Declared)
            {
                return Err(PolicyError::Contradictory {
                    members: "require_evidence, min_assurance",
                    why: "a result without evidence has declared assurance, below the minimum",
                });
            }
            if self.quorum > 1 {
                return Err(PolicyError::Contradictory {
                    members: "require_evidence, quorum",
                    why: "a result without evidence names no approver, so no quorum above one",
                });
            }
        }
        if let Some(approvers) = &self.approvers {
            if approvers.is_empty() {
                return Err(PolicyError::Contradictory {
                    members: "approvers",
                    why: "an empty list lets nobody approve",
                });
            }
            let mut distinct: Vec<&str> = approvers.iter().map(String::as_str).collect();
            distinct.sort_unstable();
            distinct.dedup();
            if u32::try_from(distinct.len()).is_ok_and(|n| n < self.quorum) {
                return Err(PolicyError::Contradictory {
                    members: "approvers, quorum",
                    why: "fewer eligible principals than the quorum requires",
                });
            }
        }
        Ok(())
    }

    /// Whether `principal` may decide under this policy.
    pub fn is_eligible(&self, principal: &str) -> bool {
        self.approvers
            .as_ref()
            .is_none_or(|list| list.iter().any(|p| p == principal))
    }
}

/// Why a policy is unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// Members that cannot all hold, or that no evidence could satisfy.
    #[error("policy members {members} contradict each other: {why}")]
    Contradictory {
        /// The policy members involved, comma-separated, e.g. `require_evidence, quorum`.
        members: &'static str,
        /// Why they cannot all hold.
        why: &'static str,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn omitted_fields_default_to_fail_closed_values() {
        let p: Result<Policy, _> =
            serde_json::from_str(r#"{"rp_id":"example.org","origins":["https://example.org"]}"#);
        let p = p.ok();
        assert_eq!(
            p.as_ref()
                .map(|p| (p.require_evidence, p.require_user_verification, p.quorum)),
            Some((true, true, 1))
        );
        assert_eq!(p.map(|p| p.max_age_seconds), Some(DEFAULT_MAX_AGE_SECONDS));
    }

    #[test]
    fn null_optional_members_are_refused_naming_the_member() {
        let base = r#""rp_id":"example.org","origins":["https://example.org"]"#;
        for (member, value) in [
            ("min_assurance", r#""AAL2""#),
            ("aal3_aaguids", "[]"),
            ("approvers", r#"["alice"]"#),
        ] {
            let given = serde_json::from_str::<Policy>(&format!("{{{base},\"{member}\":{value}}}"));
            assert!(given.is_ok(), "{member}: {value}");
            let null = serde_json::from_str::<Policy>(&format!("{{{base},\"{member}\":null}}"))
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(
                null.contains(&format!("\"{member}\" is null")),
                "{member}: {null}"
            );
        }
    }

    #[test]
    fn unknown_fields_and_bad_levels_are_refused() {
        assert!(
            serde_json::from_str::<Policy>(r#"{"rp_id":"a","origins":[],"quorom":2}"#).is_err()
        );
        assert!(
            serde_json::from_str::<Policy>(r#"{"rp_id":"a","origins":[],"min_assurance":"AAL4"}"#)
                .is_err()
        );
    }
}
