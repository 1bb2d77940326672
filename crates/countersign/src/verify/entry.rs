//! SPEC §6 steps 4–5: the checks of each evidence entry, shared by per-call approvals and
//! standing grants.
//!
//! A grant's evidence is checked exactly as a call's, except in the three places SPEC §14.3
//! step 4 names; [`EntryMode`] carries those differences and nothing else, so the two paths
//! cannot drift apart.

use super::{Approver, Bound, Context, EvidenceError, VerifyError, standing};
use crate::assurance::IdentityAssurance;
use crate::b64;
use crate::canon::Decision;
use crate::challenge::{DECISION_CHALLENGE_LEN, NONCE_LEN, split_decision_challenge};
use crate::reason::ReasonCode;
use crate::registry::{CredentialRegistry, EnrolledCredential};
use crate::replay::Enforcement;
use crate::result::{EvidenceEntry, EvidenceSlot, WEBAUTHN_ASSERTION_FORMAT};
use crate::webauthn::{
    self, Assertion, AssertionExpectations, ClientData, CosePublicKey, DerPolicy,
    VerifiedAssertion, sign_count_advances,
};
use std::time::Duration;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// What the evidence entries are checked as: the differences of SPEC §14.3 step 4.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum EntryMode {
    /// A per-call approval: the entries bind the action (§6).
    Call,
    /// A standing grant's evidence presented for one call: the entries bind the grant's fields,
    /// and `use_number` is this call's use of the grant (§14.3).
    Grant {
        /// The use the service assigned to this call, from 1.
        use_number: u64,
    },
}

impl EntryMode {
    /// The single-use key the replay state spends: the nonce, or under a grant `nonce || use`,
    /// so one signature serves many calls and each use is spendable once.
    fn replay_key(self, nonce: &[u8]) -> Vec<u8> {
        match self {
            Self::Call => nonce.to_vec(),
            Self::Grant { use_number } => standing::use_key(nonce, use_number),
        }
    }

    /// How the signature counter is held. Not at all under a grant: its approver's
    /// authenticator has legitimately signed other things since. In an offline audit it is
    /// reported, not enforced: an old record read against today's registry would always look
    /// like a regression.
    fn counter(self, enforcement: Enforcement) -> CounterRule {
        match (self, enforcement) {
            (Self::Grant { .. }, _) => CounterRule::NotCompared,
            (Self::Call, Enforcement::Enforce) => CounterRule::Enforce,
            (Self::Call, Enforcement::ReportOnly) => CounterRule::Report,
        }
    }

    /// Whether an old assertion is `stale` after `max_age_seconds`. Not under a grant: an old
    /// signature is the point of one, and its expiry bounds its age instead.
    fn bounds_age(self) -> bool {
        matches!(self, Self::Call)
    }
}

/// How one entry's signature counter is compared with the highest one known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CounterRule {
    /// Inside the assertion checks (WebAuthn §7.2 step 22): a regression refuses the entry.
    Enforce,
    /// After the assertion verified: a regression is a finding (§10, offline audit).
    Report,
    /// Not compared (§14.3 step 4).
    NotCompared,
}

/// One verified entry, before the replay state is committed.
pub(super) struct Verified {
    approver: Approver,
    replay_key: Vec<u8>,
    credential_id: Vec<u8>,
}

impl<'a> Context<'a> {
    /// §6 steps 4–5 (§14.3 steps 4–5 under a grant): every entry in array order, the first
    /// failure deciding the verdict; then, all verified, the replay state records every key and
    /// counter (refusals included), so a rejected record burns nothing.
    pub(super) fn verify_entries(
        &mut self,
        evidence: &[EvidenceSlot],
        bound: &mut Bound<'_>,
        mode: EntryMode,
    ) -> Result<Vec<Approver>, VerifyError> {
        let mut verified: Vec<Verified> = Vec::with_capacity(evidence.len());
        for (index, slot) in evidence.iter().enumerate() {
            let entry = self
                .verify_entry(slot, bound, mode, &verified)
                .map_err(|error| VerifyError::Evidence { index, error })?;
            verified.push(entry);
        }
        for v in &verified {
            self.replay
                .record(&v.replay_key, &v.credential_id, v.approver.sign_count);
        }
        Ok(verified.into_iter().map(|v| v.approver).collect())
    }

    /// §6 step 4: one entry, its checks in the order the spec gives.
    fn verify_entry(
        &mut self,
        slot: &EvidenceSlot,
        bound: &mut Bound<'_>,
        mode: EntryMode,
        earlier: &[Verified],
    ) -> Result<Verified, EvidenceError> {
        // §6 steps 4.1–4.2: a format we implement, decoded (timestamp too) before any lookup.
        let entry = decoded_entry(slot)?;
        let assertion_at = OffsetDateTime::parse(&entry.assertion_at, &Rfc3339)
            .map_err(|_| EvidenceError::AssertionAtInvalid(entry.assertion_at.clone()))?;
        // §6 step 4.3: the profile it was signed under.
        self.check_profile(entry, bound)?;
        // §6 step 4.4: an enrolled, unrevoked credential of an eligible principal; a usable key.
        let credential = enrolled_credential(self.registry, entry)?;
        self.check_eligible(credential, entry)?;
        let key = usable_key(credential, entry)?;
        // §6 step 4.5: the challenge binds the action (or grant); the signed decision counts.
        let decision = check_binding(entry, bound)?;
        // §6 step 4.6: unspent, before any signature work.
        let replay_key = mode.replay_key(&entry.nonce);
        self.check_unspent(&replay_key, earlier)?;
        // §6 step 4.7: the WebAuthn assertion checks of §5, the counter held as the mode says.
        let assertion = self.check_assertion(entry, credential, key, mode)?;
        // §6 step 4.8: freshness (§10).
        self.check_freshness(mode, assertion_at)?;
        Ok(Verified {
            approver: Approver {
                principal: credential.principal().to_owned(),
                credential_id: b64::encode(&entry.credential_id),
                decision,
                identity_assurance: IdentityAssurance::derive(
                    assertion.flags,
                    credential,
                    self.policy.aal3_aaguids.as_deref(),
                ),
                sign_count: assertion.sign_count,
                assertion_at: entry.assertion_at.clone(),
            },
            replay_key,
            credential_id: entry.credential_id.clone(),
        })
    }

    /// §6 step 4.3: the profile named in the evidence is resolved against the verifier's own
    /// registry (an unknown one is refused, never replaced by a default), then compared with the
    /// profile the entry must bind.
    fn check_profile(&self, entry: &EvidenceEntry, bound: &Bound<'_>) -> Result<(), EvidenceError> {
        let named = &entry.canonicalization_profile;
        if self.policy.profiles.get(named).is_none() {
            return Err(EvidenceError::ProfileUnknown(named.clone()));
        }
        if *named != bound.profile.id {
            return Err(EvidenceError::ProfileMismatch {
                evidence: named.clone(),
                action: bound.profile.id.clone(),
            });
        }
        Ok(())
    }

    /// §6 step 4.4, eligibility: before any signature work, evidence from a principal who may
    /// not decide is refused whatever it says, approvals and refusals alike. Under a grant the
    /// policy is still the call's (§14.3 step 4).
    fn check_eligible(
        &self,
        credential: &EnrolledCredential,
        entry: &EvidenceEntry,
    ) -> Result<(), EvidenceError> {
        if self.policy.is_eligible(credential.principal()) {
            return Ok(());
        }
        Err(EvidenceError::Ineligible {
            principal: credential.principal().to_owned(),
            credential_id: b64::encode(&entry.credential_id),
        })
    }

    /// §6 step 4.6: the single-use key is spent neither in the replay state nor by an earlier
    /// entry of this result. Checked before the signature: nothing else about the record can
    /// make a spent key acceptable again, and a replay would otherwise surface as a counter
    /// regression.
    fn check_unspent(&mut self, key: &[u8], earlier: &[Verified]) -> Result<(), EvidenceError> {
        let spent_here = earlier.iter().any(|v| v.replay_key == key);
        if spent_here || self.replay.is_spent(key) {
            return self.enforce_or_report(EvidenceError::Replayed(b64::encode(key)));
        }
        Ok(())
    }

    /// §6 step 4.7: the assertion over `nonce || op_hash`, verified as WebAuthn §7.2 says, with
    /// the counter enforced, reported or not compared ([`EntryMode::counter`]).
    fn check_assertion(
        &mut self,
        entry: &EvidenceEntry,
        credential: &EnrolledCredential,
        key: &CosePublicKey,
        mode: EntryMode,
    ) -> Result<VerifiedAssertion, EvidenceError> {
        let counter = mode.counter(self.replay.enforcement());
        let stored_sign_count = match counter {
            CounterRule::Enforce => self.stored_sign_count(credential, &entry.credential_id),
            CounterRule::Report | CounterRule::NotCompared => 0,
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
        if counter == CounterRule::Report {
            let known = self.stored_sign_count(credential, &entry.credential_id);
            if !sign_count_advances(known, verified.sign_count) {
                self.report(
                    ReasonCode::CounterRegression,
                    format!(
                        "counter {} is not above the recorded {known}",
                        verified.sign_count
                    ),
                );
            }
        }
        Ok(verified)
    }

    /// The highest counter known for a credential: enrolled, or seen by the replay state.
    fn stored_sign_count(&self, credential: &EnrolledCredential, credential_id: &[u8]) -> u32 {
        let recorded = credential.record().sign_count;
        self.replay
            .sign_count(credential_id)
            .map_or(recorded, |seen| seen.max(recorded))
    }

    /// §6 step 4.8 (§10): an assertion dated beyond the clock skew in the future, or (per call
    /// only, §14.3 step 4) older than `max_age_seconds`, is `stale`. Exact durations, never
    /// truncated: 300.5 s old is older than a 300 s maximum age.
    fn check_freshness(
        &mut self,
        mode: EntryMode,
        at: OffsetDateTime,
    ) -> Result<(), EvidenceError> {
        let age = self.now - at;
        let skew = self.policy.clock_skew_seconds;
        if age.is_negative() && age.unsigned_abs() > Duration::from_secs(skew) {
            return self.enforce_or_report(EvidenceError::FutureDated {
                ahead: age.unsigned_abs(),
                skew_seconds: skew,
            });
        }
        let max_age = self.policy.max_age_seconds;
        if mode.bounds_age()
            && age.is_positive()
            && age.unsigned_abs() > Duration::from_secs(max_age)
        {
            return self.enforce_or_report(EvidenceError::Stale {
                age: age.unsigned_abs(),
                max_age_seconds: max_age,
            });
        }
        Ok(())
    }
}

/// §6 steps 4.1–4.2: the entry as decoded. A format this verifier does not implement cannot be
/// expected to have our members, so it is named (checked first, on the raw entry) rather than
/// called malformed.
fn decoded_entry(slot: &EvidenceSlot) -> Result<&EvidenceEntry, EvidenceError> {
    let entry = match slot {
        EvidenceSlot::Decoded(entry) => entry,
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
    Ok(entry)
}

/// §6 step 4.4: the credential is enrolled and not revoked.
fn enrolled_credential<'r>(
    registry: &'r CredentialRegistry,
    entry: &EvidenceEntry,
) -> Result<&'r EnrolledCredential, EvidenceError> {
    let credential = registry
        .get(&entry.credential_id)
        .ok_or_else(|| EvidenceError::CredentialUnknown(b64::encode(&entry.credential_id)))?;
    if credential.record().revoked {
        return Err(EvidenceError::CredentialRevoked {
            credential_id: b64::encode(&entry.credential_id),
            principal: credential.principal().to_owned(),
        });
    }
    Ok(credential)
}

/// §6 step 4.4, last: the enrolled key has an algorithm this verifier implements.
fn usable_key<'r>(
    credential: &'r EnrolledCredential,
    entry: &EvidenceEntry,
) -> Result<&'r CosePublicKey, EvidenceError> {
    credential.key().map_err(|e| EvidenceError::UnusableKey {
        credential_id: b64::encode(&entry.credential_id),
        source: e.clone(),
    })
}

fn challenge_of(entry: &EvidenceEntry) -> Vec<u8> {
    let mut challenge = Vec::with_capacity(DECISION_CHALLENGE_LEN);
    challenge.extend_from_slice(&entry.nonce);
    challenge.extend_from_slice(&entry.op_hash);
    challenge
}

/// §6 step 4.5: read the decision from the signed challenge and check it binds this action.
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
