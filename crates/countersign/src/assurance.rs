//! identity_assurance: how strong the evidence behind a verdict is, derived from the evidence.
//!
//! The mapping follows the spirit of NIST SP 800-63B-4 authenticator assurance levels:
//!
//! | level      | requires                                                                      |
//! |------------|-------------------------------------------------------------------------------|
//! | `AAL3`     | UV, device-bound (BE=0), enrollment attestation chain verified, AAGUID allowed |
//! | `AAL2`     | UV (synced passkey, or device-bound without verified attestation)              |
//! | `AAL1`     | user presence only                                                            |
//! | `declared` | no verified evidence: a label the transport applied to itself                 |
//!
//! A transport-asserted level is never an input here: the normative rule is that once evidence
//! verifies, the level comes from the evidence alone.

use crate::registry::{Aaguid, EnrolledCredential};
use crate::webauthn::Flags;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Assurance levels, ordered from weakest to strongest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum AssuranceLevel {
    /// No verified evidence; recorded for the audit trail, never used for enforcement.
    #[serde(rename = "declared")]
    Declared,
    /// User presence only: someone touched the authenticator, nobody was verified.
    #[serde(rename = "AAL1")]
    Aal1,
    /// User verification (PIN or biometric) on a synced passkey, or on a device-bound key whose
    /// attestation was not verified at enrollment.
    #[serde(rename = "AAL2")]
    Aal2,
    /// User verification on a device-bound key (BE=0) whose attestation chain was verified at
    /// enrollment and whose AAGUID the policy allows.
    #[serde(rename = "AAL3")]
    Aal3,
}

impl AssuranceLevel {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Declared => "declared",
            Self::Aal1 => "AAL1",
            Self::Aal2 => "AAL2",
            Self::Aal3 => "AAL3",
        }
    }
}

/// Where an assurance level came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AssuranceSource {
    /// Derived from verified WebAuthn evidence.
    Evidence,
    /// No verified evidence: whatever the transport said, kept for the record.
    Declared,
}

/// The assurance attached to a verdict.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IdentityAssurance {
    /// The level the verdict carries.
    pub level: AssuranceLevel,
    /// Whether `level` was derived from verified evidence or merely declared by the transport.
    pub source: AssuranceSource,
    /// Facts the level was derived from (absent when `source` is `declared`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub basis: Option<AssuranceBasis>,
    /// A transport-asserted claim. Present only for `declared` results; ignored otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub declared_value: Option<Value>,
}

/// The evidence facts behind a derived level.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AssuranceBasis {
    /// The signed UV flag: the authenticator verified the user (PIN or biometric).
    pub user_verified: bool,
    /// The signed BE flag: the credential may be synced to other devices (a passkey).
    pub backup_eligible: bool,
    /// The signed BS flag: the credential is currently backed up.
    pub backup_state: bool,
    /// `verified` (chain checked at enrollment), `unverified` (statement present, chain not
    /// verified) or `none`.
    pub attestation: String,
    /// Whether the enrolled AAGUID passes the policy's allowlist (always true without a list).
    pub aaguid_allowed: bool,
}

impl IdentityAssurance {
    /// The `declared` assurance of a result without verified evidence.
    pub fn declared(transport_claim: Option<&Value>) -> Self {
        Self {
            level: AssuranceLevel::Declared,
            source: AssuranceSource::Declared,
            basis: None,
            declared_value: transport_claim.cloned(),
        }
    }

    /// Derive the level of one verified assertion made with `credential`.
    pub fn derive(
        flags: Flags,
        credential: &EnrolledCredential,
        aal3_aaguids: Option<&[Aaguid]>,
    ) -> Self {
        let record = credential.record();
        let chain_verified = record
            .attestation
            .as_ref()
            .is_some_and(|a| a.chain_verified);
        let aaguid_allowed = match aal3_aaguids {
            None => true,
            Some(list) => record.aaguid.is_some_and(|a| list.contains(&a)),
        };
        // Device-bound means BE=0 in the signed flags *and* not enrolled as backup eligible.
        let device_bound = !flags.backup_eligible() && record.backup_eligible != Some(true);
        let level = if !flags.user_verified() {
            AssuranceLevel::Aal1
        } else if device_bound && chain_verified && aaguid_allowed {
            AssuranceLevel::Aal3
        } else {
            AssuranceLevel::Aal2
        };
        let attestation = match &record.attestation {
            Some(a) if a.chain_verified => "verified",
            Some(a) if a.format != "none" => "unverified",
            _ => "none",
        };
        Self {
            level,
            source: AssuranceSource::Evidence,
            basis: Some(AssuranceBasis {
                user_verified: flags.user_verified(),
                backup_eligible: flags.backup_eligible(),
                backup_state: flags.backup_state(),
                attestation: attestation.to_owned(),
                aaguid_allowed,
            }),
            declared_value: None,
        }
    }
}
