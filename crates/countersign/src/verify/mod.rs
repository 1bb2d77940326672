//! `verify_evidence`: from an approval result to an ALLOW or DENY verdict.
//!
//! The function never fails and never panics: every problem with its inputs becomes a DENY whose
//! `reason_code` names the rule that refused it and whose `error` carries the evidence for a human.
//! The order of the checks is normative (docs/SPEC.md §6) because it decides which reason code a
//! record with several defects reports.

use crate::assurance::{AssuranceLevel, IdentityAssurance};
use crate::canon::{self, CanonError, CanonicalFields, Decision, OpHash, Profile};
use crate::policy::Policy;
use crate::reason::ReasonCode;
use crate::registry::CredentialRegistry;
use crate::replay::{Enforcement, ReplayState};
use crate::result::{ApprovalResult, ApprovalStatus};
use crate::webauthn::{self, SignatureBackend};
use serde::Serialize;
use time::OffsetDateTime;

mod entry;
mod error;
mod standing;

pub use error::{EvidenceError, VerifyError};
pub use standing::{GrantScope, grant_fields_of_scope, scope_of_grant_fields};

use crate::challenge::NONCE_LEN;
use entry::EntryMode;

/// The action a gateway is about to authorize: a profile id, the raw JSON text of its fields and,
/// optionally, the tool (operation) it will run them with.
///
/// The fields stay raw until verification because admission (duplicate keys, lone surrogates,
/// number ranges, NFC) must look at the bytes, not at an already-parsed value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Action {
    /// The canonicalization profile the fields follow, e.g. `countersign.tool-call/1`; evidence
    /// signed under another profile does not bind to this action.
    pub profile: String,
    /// The fields as the JSON text the gateway will act on, admitted and canonicalized at
    /// verification.
    pub fields_json: Vec<u8>,
    /// The tool the gateway will run. Checked against the signed `tool_name` of a profile that
    /// signs its operation, or against the policy's `profile_tools` binding of one that does not
    /// ([`Policy::check_operation`]).
    pub tool: Option<String>,
}

impl Action {
    /// An action from a profile id and the JSON text of its fields, with no tool named.
    pub fn new(profile: impl Into<String>, fields_json: impl Into<Vec<u8>>) -> Self {
        Self {
            profile: profile.into(),
            fields_json: fields_json.into(),
            tool: None,
        }
    }

    /// The same action, run by the tool `name`.
    #[must_use]
    pub fn with_tool(mut self, name: impl Into<String>) -> Self {
        self.tool = Some(name.into());
        self
    }
}

/// ALLOW or DENY.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Effect {
    /// Every check passed: the gateway may run the action.
    #[serde(rename = "ALLOW")]
    Allow,
    /// Something failed, or a human refused: the gateway must not run the action.
    #[serde(rename = "DENY")]
    Deny,
}

/// One approver whose evidence verified.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Approver {
    /// Whom the registry says the key belongs to.
    pub principal: String,
    /// The signing key's credential id, base64url.
    pub credential_id: String,
    /// The decision read from the signed challenge.
    pub decision: Decision,
    /// The assurance derived from this assertion's signed flags and the key's enrollment.
    pub identity_assurance: IdentityAssurance,
    /// The signed signature counter; the replay state records it for the next check.
    pub sign_count: u32,
    /// When the service received the assertion, as the entry states it.
    pub assertion_at: String,
}

/// Something an offline audit found but did not enforce.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// The reason an enforcing verifier would have refused with.
    pub reason_code: ReasonCode,
    /// What was seen, for a human reading the audit.
    pub detail: String,
}

/// The outcome of [`verify_evidence`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Verdict {
    /// ALLOW only when every check passed; the one field a gateway must act on.
    pub effective: Effect,
    /// What was decided: the signed decision when evidence verified, else the transport status.
    pub decision: ApprovalStatus,
    /// Why the verdict is DENY; `None` exactly when it is ALLOW.
    pub reason_code: Option<ReasonCode>,
    /// Derived from the verified evidence (on ALLOW, the weakest approving entry's level), or
    /// `declared` when no evidence verified.
    pub identity_assurance: IdentityAssurance,
    /// Every entry whose evidence verified, in the order sent.
    pub approvers: Vec<Approver>,
    /// `enforced`, or `report_only` for an offline audit.
    pub replay: &'static str,
    /// Human-readable cause of a DENY (the typed error's message).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Findings an offline audit reported instead of enforcing.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<Finding>,
    /// The typed error behind a DENY that evidence checks produced.
    #[serde(skip)]
    pub error: Option<VerifyError>,
}

impl Verdict {
    /// Whether the gateway may proceed.
    pub fn is_allow(&self) -> bool {
        self.effective == Effect::Allow
    }
}

/// Verify an approval result for `action` with the fastest signature backend compiled in.
///
/// See [`verify_evidence_with`].
pub fn verify_evidence(
    policy: &Policy,
    action: &Action,
    result: &ApprovalResult,
    registry: &CredentialRegistry,
    replay: &mut dyn ReplayState,
    now: OffsetDateTime,
) -> Verdict {
    verify_evidence_with(
        webauthn::default_backend(),
        policy,
        action,
        result,
        registry,
        replay,
        now,
    )
}

/// Verify an approval result for `action`, the action the caller is about to authorize.
///
/// The replay state is updated (nonces spent, counters advanced) only when every evidence entry
/// verifies, so a rejected record burns nothing.
pub fn verify_evidence_with(
    backend: &dyn SignatureBackend,
    policy: &Policy,
    action: &Action,
    result: &ApprovalResult,
    registry: &CredentialRegistry,
    replay: &mut dyn ReplayState,
    now: OffsetDateTime,
) -> Verdict {
    let mut ctx = Context {
        backend,
        policy,
        action,
        registry,
        now,
        findings: Vec::new(),
        replay,
    };
    let outcome = ctx.decide(result);
    let replay_mode = match ctx.replay.enforcement() {
        Enforcement::Enforce => "enforced",
        Enforcement::ReportOnly => "report_only",
    };
    let findings = std::mem::take(&mut ctx.findings);
    match outcome {
        Outcome::Allow {
            approvers,
            assurance,
        } => Verdict {
            effective: Effect::Allow,
            decision: result.status,
            reason_code: None,
            identity_assurance: assurance,
            approvers,
            replay: replay_mode,
            detail: None,
            findings,
            error: None,
        },
        Outcome::Deny {
            decision,
            reason,
            approvers,
            assurance,
            error,
        } => Verdict {
            effective: Effect::Deny,
            decision,
            reason_code: Some(reason),
            identity_assurance: assurance,
            approvers,
            replay: replay_mode,
            detail: error.as_ref().map(ToString::to_string),
            findings,
            error,
        },
    }
}

enum Outcome {
    Allow {
        approvers: Vec<Approver>,
        assurance: IdentityAssurance,
    },
    Deny {
        decision: ApprovalStatus,
        reason: ReasonCode,
        approvers: Vec<Approver>,
        assurance: IdentityAssurance,
        error: Option<VerifyError>,
    },
}

impl Outcome {
    fn deny_with(result: &ApprovalResult, error: VerifyError) -> Self {
        Self::Deny {
            decision: result.status,
            reason: error.reason_code(),
            approvers: Vec::new(),
            assurance: IdentityAssurance::declared(result.identity_assurance.as_ref()),
            error: Some(error),
        }
    }
}

struct Context<'a> {
    backend: &'a dyn SignatureBackend,
    policy: &'a Policy,
    action: &'a Action,
    registry: &'a CredentialRegistry,
    now: OffsetDateTime,
    findings: Vec<Finding>,
    replay: &'a mut dyn ReplayState,
}

/// The action's profile, fields and op_hashes, computed at most once per decision.
struct Bound<'a> {
    profile: &'a Profile,
    fields: CanonicalFields,
    approved: Option<OpHash>,
    denied: Option<OpHash>,
}

impl Bound<'_> {
    fn op_hash(&mut self, decision: Decision) -> OpHash {
        let slot = match decision {
            Decision::Approved => &mut self.approved,
            Decision::Denied => &mut self.denied,
        };
        *slot.get_or_insert_with(|| canon::op_hash(self.profile, decision, &self.fields))
    }
}

impl<'a> Context<'a> {
    /// SPEC §6 in order: steps 1–3 here, 4–5 in [`Context::verify_entries`], 6–10 in
    /// [`Context::apply_policy`].
    fn decide(&mut self, result: &ApprovalResult) -> Outcome {
        // §6 step 1: a pending result is never permission, whatever it carries.
        if result.status == ApprovalStatus::Pending {
            return Outcome::Deny {
                decision: ApprovalStatus::Pending,
                reason: ReasonCode::Pending,
                approvers: Vec::new(),
                assurance: IdentityAssurance::declared(result.identity_assurance.as_ref()),
                error: None,
            };
        }
        // §6 step 1: a call approved under a standing grant carries the grant's evidence (§14.3).
        if let Some(standing) = &result.standing_grant {
            return self.decide_standing(result, standing);
        }
        // §6 step 2: no evidence.
        if result.approver_evidence.is_empty() {
            return self.decide_without_evidence(result);
        }
        // §6 step 3: the action.
        let mut bound = match self.bind_action() {
            Ok(bound) => bound,
            Err(e) => return Outcome::deny_with(result, e),
        };
        // §6 steps 4–5: every entry binds it; the replay state records them.
        let approvers =
            match self.verify_entries(&result.approver_evidence, &mut bound, EntryMode::Call) {
                Ok(approvers) => approvers,
                Err(e) => return Outcome::deny_with(result, e),
            };
        // §6 steps 6–10: the verified decisions under the policy.
        self.apply_policy(result, approvers)
    }

    /// SPEC §6 step 2: a result without evidence.
    fn decide_without_evidence(&self, result: &ApprovalResult) -> Outcome {
        let assurance = IdentityAssurance::declared(result.identity_assurance.as_ref());
        match result.status {
            // A contradictory policy (Policy::validate) fails closed: it demands evidence.
            ApprovalStatus::Approved
                if self.policy.require_evidence || self.policy.validate().is_err() =>
            {
                Outcome::deny_with(result, VerifyError::EvidenceMissing { status: "APPROVED" })
            }
            ApprovalStatus::Approved => Outcome::Allow {
                approvers: Vec::new(),
                assurance,
            },
            // A DENIED without evidence keeps the transport's reason when it is one of the codes a
            // callback may legitimately report; anything else reads as a plain refusal.
            _ => {
                let reason = result
                    .reason_code
                    .as_deref()
                    .and_then(ReasonCode::from_wire)
                    .filter(|c| TRANSPORT_DENY_REASONS.contains(c))
                    .unwrap_or(ReasonCode::ApproverRefused);
                Outcome::Deny {
                    decision: result.status,
                    reason,
                    approvers: Vec::new(),
                    assurance,
                    error: None,
                }
            }
        }
    }

    /// SPEC §6 step 3: resolve the profile, admit the fields under the policy's NFC rule, and check
    /// the operation the action will run (crate::binding).
    fn bind_action(&self) -> Result<Bound<'a>, VerifyError> {
        let policy: &'a Policy = self.policy;
        let profile = policy.profiles.get(&self.action.profile).ok_or_else(|| {
            VerifyError::Action(CanonError::UnknownProfile(self.action.profile.clone()))
        })?;
        let fields = canon::admit_fields_with(profile, &self.action.fields_json, policy.nfc)
            .map_err(VerifyError::Action)?;
        policy.check_operation_admitted(self.action, profile, Some(&fields))?;
        Ok(Bound {
            profile,
            fields,
            approved: None,
            denied: None,
        })
    }

    fn enforce_or_report(&mut self, error: EvidenceError) -> Result<(), EvidenceError> {
        match self.replay.enforcement() {
            Enforcement::Enforce => Err(error),
            Enforcement::ReportOnly => {
                self.report(error.reason_code(), error.to_string());
                Ok(())
            }
        }
    }

    fn report(&mut self, reason_code: ReasonCode, detail: String) {
        self.findings.push(Finding {
            reason_code,
            detail,
        });
    }

    /// SPEC §6 steps 6–10: a refusal vetoes, then the status, assurance and quorum.
    fn apply_policy(&self, result: &ApprovalResult, approvers: Vec<Approver>) -> Outcome {
        // §6 step 6: a verified refusal from any enrolled approver is a veto (fail closed).
        if let Some(first) = approvers.iter().find(|a| a.decision == Decision::Denied) {
            let assurance = first.identity_assurance.clone();
            return Outcome::Deny {
                decision: ApprovalStatus::Denied,
                reason: ReasonCode::ApproverRefused,
                approvers,
                assurance,
                error: None,
            };
        }
        // §6 step 7: a refusing status over evidence that only approves contradicts it.
        if result.status != ApprovalStatus::Approved {
            let error = VerifyError::StatusContradictsEvidence {
                status: result.status.as_str(),
                signed: "APPROVED",
            };
            return Outcome::Deny {
                decision: result.status,
                reason: error.reason_code(),
                assurance: weakest(&approvers),
                approvers,
                error: Some(error),
            };
        }
        // §6 step 8: every approval at the policy's minimum assurance.
        if let Some(required) = self.policy.min_assurance
            && let Some(low) = approvers
                .iter()
                .find(|a| a.identity_assurance.level < required)
        {
            let error = VerifyError::InsufficientAssurance {
                principal: low.principal.clone(),
                required: required.as_str(),
                got: low.identity_assurance.level.as_str(),
            };
            return deny_after_evidence(error, approvers);
        }
        // §6 step 9: distinct principals; a quorum of 0 would allow with no approver: read as 1.
        let mut principals: Vec<&str> = approvers.iter().map(|a| a.principal.as_str()).collect();
        principals.sort_unstable();
        principals.dedup();
        let got = u32::try_from(principals.len()).unwrap_or(u32::MAX);
        let required = self.policy.quorum.max(1);
        if got < required {
            return deny_after_evidence(VerifyError::QuorumNotMet { required, got }, approvers);
        }
        // §6 step 10: ALLOW at the weakest approving entry's level.
        let assurance = weakest(&approvers);
        debug_assert!(assurance.level > AssuranceLevel::Declared);
        Outcome::Allow {
            approvers,
            assurance,
        }
    }
}

/// The weakest verified entry's assurance (`declared` for none): a verdict is as strong as its
/// weakest approval.
fn weakest(approvers: &[Approver]) -> IdentityAssurance {
    approvers
        .iter()
        .min_by_key(|a| a.identity_assurance.level)
        .map(|a| a.identity_assurance.clone())
        .unwrap_or_else(|| IdentityAssurance::declared(None))
}

/// A DENY of an APPROVED result whose evidence verified, for a rule applied after it.
fn deny_after_evidence(error: VerifyError, approvers: Vec<Approver>) -> Outcome {
    Outcome::Deny {
        decision: ApprovalStatus::Approved,
        reason: error.reason_code(),
        assurance: weakest(&approvers),
        approvers,
        error: Some(error),
    }
}

/// Transport reason codes a DENIED result without evidence may carry through to the verdict.
const TRANSPORT_DENY_REASONS: &[ReasonCode] = &[
    ReasonCode::ApproverRefused,
    ReasonCode::ExpiredUnanswered,
    ReasonCode::NoEligibleApprover,
    ReasonCode::CallbackTimeout,
    ReasonCode::Cancelled,
];
