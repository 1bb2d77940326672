//! `verify_evidence`: from an approval result to an ALLOW or DENY verdict.
//!
//! The function never fails and never panics: every problem with its inputs becomes a DENY whose
//! `reason_code` names the rule that refused it and whose `error` carries the evidence for a human.
//! The order of the checks is normative (docs/SPEC.md §6) because it decides which reason code a
//! record with several defects reports.

use crate::assurance::{AssuranceLevel, IdentityAssurance};
use crate::b64;
use crate::canon::{self, CanonError, CanonicalFields, Decision, OpHash, Profile};
use crate::policy::Policy;
use crate::reason::ReasonCode;
use crate::registry::{CredentialRegistry, EnrolledCredential};
use crate::replay::{Enforcement, ReplayState};
use crate::result::{
    ApprovalResult, ApprovalStatus, EvidenceEntry, EvidenceSlot, WEBAUTHN_ASSERTION_FORMAT,
};
use crate::webauthn::{
    self, Assertion, AssertionExpectations, ClientData, DerPolicy, SignatureBackend,
};
use serde::Serialize;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

mod error;
mod standing;

pub use error::{EvidenceError, VerifyError};
pub use standing::{GrantScope, grant_fields_of_scope, scope_of_grant_fields};

use crate::challenge::{DECISION_CHALLENGE_LEN, NONCE_LEN, split_decision_challenge};

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
        standing_use: None,
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

/// One verified entry, before the replay state is committed.
struct Verified {
    approver: Approver,
    nonce: Vec<u8>,
    credential_id: Vec<u8>,
}

struct Context<'a> {
    backend: &'a dyn SignatureBackend,
    policy: &'a Policy,
    action: &'a Action,
    registry: &'a CredentialRegistry,
    now: OffsetDateTime,
    findings: Vec<Finding>,
    replay: &'a mut dyn ReplayState,
    /// Set while verifying the evidence of a standing grant: this call's use number.
    standing_use: Option<u64>,
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
    fn decide(&mut self, result: &ApprovalResult) -> Outcome {
        // A pending result is never permission, whatever it carries.
        if result.status == ApprovalStatus::Pending {
            return Outcome::Deny {
                decision: ApprovalStatus::Pending,
                reason: ReasonCode::Pending,
                approvers: Vec::new(),
                assurance: IdentityAssurance::declared(result.identity_assurance.as_ref()),
                error: None,
            };
        }
        // A call approved under a standing grant carries the grant's evidence (§14).
        if let Some(standing) = &result.standing_grant {
            return self.decide_standing(result, standing);
        }
        if result.approver_evidence.is_empty() {
            return self.decide_without_evidence(result);
        }
        let mut bound = match self.bind_action() {
            Ok(bound) => bound,
            Err(e) => return Outcome::deny_with(result, e),
        };
        let mut verified: Vec<Verified> = Vec::with_capacity(result.approver_evidence.len());
        for (index, slot) in result.approver_evidence.iter().enumerate() {
            let in_this_result = verified.iter().map(|v| v.nonce.as_slice());
            match self.verify_entry(slot, &mut bound, in_this_result) {
                Ok(v) => verified.push(v),
                Err(error) => {
                    return Outcome::deny_with(result, VerifyError::Evidence { index, error });
                }
            }
        }
        // Every entry verified: spend the nonces and advance the counters, whatever the verdict.
        for v in &verified {
            self.replay
                .record(&v.nonce, &v.credential_id, v.approver.sign_count);
        }
        self.apply_policy(result, verified.into_iter().map(|v| v.approver).collect())
    }

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

    /// The per-entry checks, in the order docs/SPEC.md §6 gives.
    fn verify_entry<'n>(
        &mut self,
        slot: &EvidenceSlot,
        bound: &mut Bound<'_>,
        mut earlier_nonces: impl Iterator<Item = &'n [u8]>,
    ) -> Result<Verified, EvidenceError> {
        let entry: &EvidenceEntry = match slot {
            EvidenceSlot::Decoded(entry) => entry,
            // A format this verifier does not implement cannot be expected to have our fields:
            // name the format rather than call the entry malformed.
            EvidenceSlot::Malformed { raw, reason } => {
                return Err(match raw.get("format").and_then(|f| f.as_str()) {
                    Some(format) if format != WEBAUTHN_ASSERTION_FORMAT => {
                        EvidenceError::UnsupportedFormat(format.to_owned())
                    }
                    _ => EvidenceError::Malformed(reason.clone()),
                });
            }
        };
        if entry.format != WEBAUTHN_ASSERTION_FORMAT {
            return Err(EvidenceError::UnsupportedFormat(entry.format.clone()));
        }
        // Decoding the entry includes its timestamp: an undecodable one is malformed whatever
        // else is wrong, before any lookup or signature work.
        let assertion_at = OffsetDateTime::parse(&entry.assertion_at, &Rfc3339)
            .map_err(|_| EvidenceError::AssertionAtInvalid(entry.assertion_at.clone()))?;
        self.check_profile(entry, bound.profile)?;
        let credential = self.enrolled_credential(entry)?;
        let key = credential.key().map_err(|e| EvidenceError::UnusableKey {
            credential_id: b64::encode(&entry.credential_id),
            source: e.clone(),
        })?;
        let signed_decision = check_binding(entry, bound)?;
        // A spent nonce is refused before any signature work: nothing else about the record can
        // make it acceptable again, and a replay would otherwise surface as a counter regression.
        // Under a standing grant the single-use key is the nonce and this call's use (§14).
        let replay_key = match self.standing_use {
            Some(use_number) => standing::use_key(&entry.nonce, use_number),
            None => entry.nonce.clone(),
        };
        let spent_here = earlier_nonces.any(|n| n == replay_key.as_slice());
        if spent_here || self.replay.is_spent(&replay_key) {
            let error = EvidenceError::Replayed(b64::encode(&replay_key));
            self.enforce_or_report(error)?;
        }

        let stored_sign_count = match (self.replay.enforcement(), self.standing_use) {
            (Enforcement::Enforce, None) => {
                self.stored_sign_count(credential, &entry.credential_id)
            }
            // An audit of an old record against today's registry would always see a "regression",
            // and so would every use of a standing grant after its approver signed anything else.
            (Enforcement::ReportOnly, _) | (_, Some(_)) => 0,
        };
        let expectations = AssertionExpectations {
            challenge: &challenge_of(entry),
            rp_id: &self.policy.rp_id,
            origins: &self.policy.origins,
            allow_cross_origin: self.policy.allow_cross_origin,
            allowed_top_origins: &self.policy.top_origins,
            der_policy: DerPolicy::Strict,
            require_user_verification: self.policy.require_user_verification,
            stored_sign_count,
            backup_eligible: credential.record().backup_eligible,
        };
        let assertion = Assertion {
            client_data_json: &entry.client_data_json,
            authenticator_data: &entry.authenticator_data,
            signature: &entry.signature,
        };
        let verified = webauthn::verify_assertion(key, &assertion, &expectations, self.backend)
            .map_err(EvidenceError::Assertion)?;

        if self.replay.enforcement() == Enforcement::ReportOnly && self.standing_use.is_none() {
            let known = self.stored_sign_count(credential, &entry.credential_id);
            if !(verified.sign_count == 0 && known == 0) && verified.sign_count <= known {
                self.report(
                    ReasonCode::CounterRegression,
                    format!(
                        "counter {} is not above the recorded {known}",
                        verified.sign_count
                    ),
                );
            }
        }
        if self.standing_use.is_some() {
            self.check_grant_assertion_time(assertion_at)?;
        } else {
            self.check_freshness(assertion_at)?;
        }
        let assurance = IdentityAssurance::derive(
            verified.flags,
            credential,
            self.policy.aal3_aaguids.as_deref(),
        );
        Ok(Verified {
            approver: Approver {
                principal: credential.principal().to_owned(),
                credential_id: b64::encode(&entry.credential_id),
                decision: signed_decision,
                identity_assurance: assurance,
                sign_count: verified.sign_count,
                assertion_at: entry.assertion_at.clone(),
            },
            nonce: replay_key,
            credential_id: entry.credential_id.clone(),
        })
    }

    fn check_profile(
        &self,
        entry: &EvidenceEntry,
        action_profile: &Profile,
    ) -> Result<(), EvidenceError> {
        // The profile named in the evidence is resolved against the verifier's own registry; an
        // unknown one is refused, never replaced by a default.
        if self
            .policy
            .profiles
            .get(&entry.canonicalization_profile)
            .is_none()
        {
            return Err(EvidenceError::ProfileUnknown(
                entry.canonicalization_profile.clone(),
            ));
        }
        if entry.canonicalization_profile != action_profile.id {
            return Err(EvidenceError::ProfileMismatch {
                evidence: entry.canonicalization_profile.clone(),
                action: action_profile.id.clone(),
            });
        }
        Ok(())
    }

    fn enrolled_credential(
        &self,
        entry: &EvidenceEntry,
    ) -> Result<&'a EnrolledCredential, EvidenceError> {
        let registry: &'a CredentialRegistry = self.registry;
        let credential = registry
            .get(&entry.credential_id)
            .ok_or_else(|| EvidenceError::CredentialUnknown(b64::encode(&entry.credential_id)))?;
        if credential.record().revoked {
            return Err(EvidenceError::CredentialRevoked {
                credential_id: b64::encode(&entry.credential_id),
                principal: credential.principal().to_owned(),
            });
        }
        // Eligibility before any signature work: evidence from a principal who may not decide
        // is refused whatever it says, approvals and refusals alike.
        if !self.policy.is_eligible(credential.principal()) {
            return Err(EvidenceError::Ineligible {
                principal: credential.principal().to_owned(),
                credential_id: b64::encode(&entry.credential_id),
            });
        }
        Ok(credential)
    }

    fn stored_sign_count(&self, credential: &EnrolledCredential, credential_id: &[u8]) -> u32 {
        let recorded = credential.record().sign_count;
        self.replay
            .sign_count(credential_id)
            .map_or(recorded, |seen| seen.max(recorded))
    }

    /// Exact durations, never truncated: 300.5 s old is older than a 300 s maximum age.
    fn check_freshness(&mut self, at: OffsetDateTime) -> Result<(), EvidenceError> {
        let age = self.now - at;
        let max_age = self.policy.max_age_seconds;
        let skew = self.policy.clock_skew_seconds;
        if age.is_negative() && age.unsigned_abs() > std::time::Duration::from_secs(skew) {
            return self.enforce_or_report(EvidenceError::FutureDated {
                ahead: age.unsigned_abs(),
                skew_seconds: skew,
            });
        }
        if age.is_positive() && age.unsigned_abs() > std::time::Duration::from_secs(max_age) {
            return self.enforce_or_report(EvidenceError::Stale {
                age: age.unsigned_abs(),
                max_age_seconds: max_age,
            });
        }
        Ok(())
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

    /// Combine verified entries under the policy: a refusal vetoes, then assurance, then quorum.
    fn apply_policy(&self, result: &ApprovalResult, approvers: Vec<Approver>) -> Outcome {
        let weakest = |list: &[Approver]| {
            list.iter()
                .min_by_key(|a| a.identity_assurance.level)
                .map(|a| a.identity_assurance.clone())
                .unwrap_or_else(|| IdentityAssurance::declared(None))
        };
        // A verified refusal from any enrolled approver is a veto (fail closed).
        let refusals: Vec<&Approver> = approvers
            .iter()
            .filter(|a| a.decision == Decision::Denied)
            .collect();
        if let Some(first) = refusals.first() {
            let assurance = first.identity_assurance.clone();
            return Outcome::Deny {
                decision: ApprovalStatus::Denied,
                reason: ReasonCode::ApproverRefused,
                approvers,
                assurance,
                error: None,
            };
        }
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
            return deny_after_evidence(error, approvers, weakest);
        }

        let mut principals: Vec<&str> = approvers.iter().map(|a| a.principal.as_str()).collect();
        principals.sort_unstable();
        principals.dedup();
        let got = u32::try_from(principals.len()).unwrap_or(u32::MAX);
        // A quorum of zero would allow with no approver at all: read it as one.
        let required = self.policy.quorum.max(1);
        if got < required {
            return deny_after_evidence(
                VerifyError::QuorumNotMet { required, got },
                approvers,
                weakest,
            );
        }
        let assurance = weakest(&approvers);
        debug_assert!(assurance.level > AssuranceLevel::Declared);
        Outcome::Allow {
            approvers,
            assurance,
        }
    }
}

fn deny_after_evidence(
    error: VerifyError,
    approvers: Vec<Approver>,
    weakest: impl Fn(&[Approver]) -> IdentityAssurance,
) -> Outcome {
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

fn challenge_of(entry: &EvidenceEntry) -> Vec<u8> {
    let mut challenge = Vec::with_capacity(DECISION_CHALLENGE_LEN);
    challenge.extend_from_slice(&entry.nonce);
    challenge.extend_from_slice(&entry.op_hash);
    challenge
}

/// Read the decision from the signed challenge and check it binds this action.
///
/// The signature itself is checked later against the same challenge bytes, so everything read
/// here is covered by it once verification succeeds.
fn check_binding(entry: &EvidenceEntry, bound: &mut Bound<'_>) -> Result<Decision, EvidenceError> {
    if entry.nonce.len() != NONCE_LEN {
        return Err(EvidenceError::NonceLength {
            got: entry.nonce.len(),
        });
    }
    let client_data =
        ClientData::parse(&entry.client_data_json).map_err(EvidenceError::Assertion)?;
    let challenge = client_data.challenge.as_slice();
    let Some((signed_nonce, signed_op_hash)) = split_decision_challenge(challenge) else {
        return Err(EvidenceError::ChallengeLength {
            got: challenge.len(),
        });
    };
    if signed_nonce.as_slice() != entry.nonce.as_slice() {
        return Err(EvidenceError::NonceMismatch);
    }
    if signed_op_hash != entry.op_hash.as_slice() {
        return Err(EvidenceError::OpHashFieldMismatch);
    }
    let other = match entry.decision {
        Decision::Approved => Decision::Denied,
        Decision::Denied => Decision::Approved,
    };
    if bound.op_hash(entry.decision).0.as_slice() == signed_op_hash {
        return Ok(entry.decision);
    }
    if bound.op_hash(other).0.as_slice() == signed_op_hash {
        return Err(EvidenceError::DecisionMismatch {
            claimed: entry.decision.as_str(),
            signed: other.as_str(),
        });
    }
    Err(EvidenceError::ActionMismatch {
        signed: b64::encode(signed_op_hash),
        approved: b64::encode(&bound.op_hash(Decision::Approved).0),
    })
}
