//! The enrolled-credential registry: the only source of public keys the verifier trusts.
//!
//! A record being verified names a credential id; its key, principal, backup eligibility and
//! enrollment attestation come from here, never from the record. Keys are parsed once at load time
//! so verification does no COSE work on the hot path.

use crate::b64;
use crate::reason::ReasonCode;
use crate::webauthn::{CoseError, CosePublicKey};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fmt;

/// An AAGUID (authenticator model identifier), 16 bytes, written as a UUID on the wire.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Aaguid(pub [u8; 16]);

impl Aaguid {
    /// Parse the 8-4-4-4-12 hexadecimal form (either case).
    pub fn parse(text: &str) -> Option<Self> {
        let bytes = text.as_bytes();
        if bytes.len() != 36 || [8, 13, 18, 23].iter().any(|&i| bytes.get(i) != Some(&b'-')) {
            return None;
        }
        let mut digits = bytes.iter().copied().filter(|&b| b != b'-');
        let mut out = [0u8; 16];
        for byte in &mut out {
            let hi = hex_value(digits.next()?)?;
            let lo = hex_value(digits.next()?)?;
            *byte = (hi << 4) | lo;
        }
        Some(Self(out))
    }
}

fn hex_value(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

impl fmt::Display for Aaguid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, b) in self.0.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                f.write_str("-")?;
            }
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Aaguid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Aaguid({self})")
    }
}

impl Serialize for Aaguid {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Aaguid {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Self::parse(&text)
            .ok_or_else(|| serde::de::Error::custom("aaguid must be a UUID (8-4-4-4-12 hex)"))
    }
}

/// The optional members of a credential: absent has a documented meaning (no AAGUID, no backup
/// check, no attestation), so `null` is refused rather than read as absent (see
/// `crate::absent_or_value`).
mod not_null {
    crate::absent_or_value::refuse_null! {
        root => "attestation.root",
        aaguid => "aaguid",
        backup_eligible => "backup_eligible",
        attestation => "attestation",
    }
}

/// What enrollment established about the authenticator's attestation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttestationRecord {
    /// The attestation statement format seen at enrollment (`none`, `packed`, `tpm`, ...).
    pub format: String,
    /// Whether the attestation chain verified against the enrolling service's configured roots.
    #[serde(default)]
    pub chain_verified: bool,
    /// The root the chain verified against (informational).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "not_null::root"
    )]
    pub root: Option<String>,
}

/// One credential as published in a registry document.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CredentialRecord {
    /// The WebAuthn credential id, base64url; evidence names its key by it.
    #[serde(with = "b64::bytes")]
    pub credential_id: Vec<u8>,
    /// The human the key belongs to: what a verdict reports, what `policy.approvers` and the
    /// quorum count.
    pub principal: String,
    /// The COSE_Key, base64url.
    #[serde(with = "b64::bytes")]
    pub public_key: Vec<u8>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "not_null::aaguid"
    )]
    /// The authenticator model recorded at enrollment, matched against `policy.aal3_aaguids`.
    pub aaguid: Option<Aaguid>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "not_null::backup_eligible"
    )]
    /// The BE flag seen at enrollment. When recorded, an assertion with a different BE flag is
    /// refused (BE is fixed when the credential is created), and `true` rules out AAL3.
    pub backup_eligible: Option<bool>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "not_null::attestation"
    )]
    /// What enrollment learned of the authenticator's attestation; AAL3 needs a verified chain.
    pub attestation: Option<AttestationRecord>,
    /// The highest signature counter the publisher has seen; an assertion must exceed it (or
    /// both be 0, for authenticators that keep no counter).
    #[serde(default)]
    pub sign_count: u32,
    /// A revoked key's evidence is refused (`credential_revoked`), approvals and refusals alike.
    #[serde(default)]
    pub revoked: bool,
}

/// The published registry document: `{"credentials": [...]}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegistryDocument {
    /// Every published key, revoked ones included; ids must be unique.
    pub credentials: Vec<CredentialRecord>,
}

/// Why a registry document could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// The document is not `{"credentials": [...]}` with well-formed records.
    #[error("registry is not a valid document: {0}")]
    Malformed(String),
    /// Two records share a credential id: which key signs would be ambiguous.
    #[error("credential id {credential_id} appears twice")]
    DuplicateCredential {
        /// The credential id, base64url.
        credential_id: String,
    },
    /// A record names no principal, so nobody could be held to its evidence.
    #[error("credential {credential_id} has an empty principal")]
    EmptyPrincipal {
        /// The credential id, base64url.
        credential_id: String,
    },
    /// A record's COSE key does not parse.
    #[error("credential {credential_id} has an unusable public key: {source}")]
    BadPublicKey {
        /// The credential id, base64url.
        credential_id: String,
        /// Why the key was refused.
        source: CoseError,
    },
}

/// An enrolled credential with its key parsed.
#[derive(Clone, Debug)]
pub struct EnrolledCredential {
    record: CredentialRecord,
    /// `Err` keeps a credential whose algorithm this verifier does not implement: evidence made
    /// with it is then refused as `unsupported_algorithm` rather than as an unknown credential.
    key: Result<CosePublicKey, CoseError>,
}

impl EnrolledCredential {
    /// The published record.
    pub fn record(&self) -> &CredentialRecord {
        &self.record
    }
    /// The principal this credential was enrolled for.
    pub fn principal(&self) -> &str {
        &self.record.principal
    }
    /// The parsed public key, or why it cannot be used.
    pub fn key(&self) -> Result<&CosePublicKey, &CoseError> {
        self.key.as_ref()
    }
}

/// Credentials by id.
#[derive(Clone, Debug, Default)]
pub struct CredentialRegistry {
    by_id: HashMap<Vec<u8>, EnrolledCredential>,
}

impl CredentialRegistry {
    /// Parse a registry document's JSON text.
    pub fn from_json(bytes: &[u8]) -> Result<Self, RegistryError> {
        let doc: RegistryDocument =
            serde_json::from_slice(bytes).map_err(|e| RegistryError::Malformed(e.to_string()))?;
        Self::from_document(doc)
    }

    /// Load a document: every key is parsed now, duplicates and malformed keys are refused.
    pub fn from_document(doc: RegistryDocument) -> Result<Self, RegistryError> {
        let mut by_id = HashMap::with_capacity(doc.credentials.len());
        for record in doc.credentials {
            let credential_id = b64::encode(&record.credential_id);
            if record.principal.trim().is_empty() {
                return Err(RegistryError::EmptyPrincipal { credential_id });
            }
            let key = match CosePublicKey::from_cose(&record.public_key) {
                Ok(key) => Ok(key),
                // A well-formed key this verifier cannot use (unknown algorithm, RSA outside
                // 2048..=8192 bits) keeps its place: its evidence is then refused as
                // `unsupported_algorithm`, not as an unknown credential.
                Err(e) if e.reason_code() == ReasonCode::UnsupportedAlgorithm => Err(e),
                Err(source) => {
                    return Err(RegistryError::BadPublicKey {
                        credential_id,
                        source,
                    });
                }
            };
            if by_id.contains_key(&record.credential_id) {
                return Err(RegistryError::DuplicateCredential { credential_id });
            }
            by_id.insert(
                record.credential_id.clone(),
                EnrolledCredential { record, key },
            );
        }
        Ok(Self { by_id })
    }

    /// Look a credential up by its raw id.
    pub fn get(&self, credential_id: &[u8]) -> Option<&EnrolledCredential> {
        self.by_id.get(credential_id)
    }

    /// Number of credentials.
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    /// Whether the registry is empty.
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// Iterate over credentials (arbitrary order).
    pub fn iter(&self) -> impl Iterator<Item = &EnrolledCredential> {
        self.by_id.values()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aaguid_parses_and_prints_canonically() {
        let text = "adce0002-35bc-c60a-648b-0b25f1f05503";
        let a = Aaguid::parse(text);
        assert_eq!(a.map(|a| a.to_string()).as_deref(), Some(text));
        assert_eq!(Aaguid::parse("ADCE0002-35BC-C60A-648B-0B25F1F05503"), a);
        assert_eq!(Aaguid::parse("adce000235bcc60a648b0b25f1f05503"), None);
        assert_eq!(Aaguid::parse("adce0002-35bc-c60a-648b-0b25f1f0550g"), None);
        assert_eq!(Aaguid::parse("adce0002-35bc-c60a-648b_0b25f1f05503"), None);
    }

    #[test]
    fn malformed_documents_are_refused() {
        assert!(matches!(
            CredentialRegistry::from_json(b"{}"),
            Err(RegistryError::Malformed(_))
        ));
        assert!(matches!(
            CredentialRegistry::from_json(br#"{"credentials":[{"credential_id":"AA","principal":"a","public_key":"AA","extra":1}]}"#),
            Err(RegistryError::Malformed(_))
        ));
    }

    #[test]
    fn null_optional_credential_members_are_refused_absent_ones_are_not() {
        let cred = |extra: &str| {
            format!(
                r#"{{"credentials":[{{"credential_id":"AA","principal":"alice","public_key":"AA"{extra}}}]}}"#
            )
        };
        assert!(serde_json::from_str::<RegistryDocument>(&cred("")).is_ok());
        for (member, value) in [
            ("aaguid", r#""00000000-0000-0000-0000-000000000001""#),
            ("backup_eligible", "false"),
            (
                "attestation",
                r#"{"format":"packed","chain_verified":true}"#,
            ),
        ] {
            let given = cred(&format!(r#","{member}":{value}"#));
            assert!(
                serde_json::from_str::<RegistryDocument>(&given).is_ok(),
                "{member}"
            );
            let null =
                serde_json::from_str::<RegistryDocument>(&cred(&format!(r#","{member}":null"#)))
                    .err()
                    .map(|e| e.to_string())
                    .unwrap_or_default();
            assert!(
                null.contains(&format!("\"{member}\" is null")),
                "{member}: {null}"
            );
        }
        let root_null = cred(r#","attestation":{"format":"packed","root":null}"#);
        assert!(serde_json::from_str::<RegistryDocument>(&root_null).is_err());
    }
}
