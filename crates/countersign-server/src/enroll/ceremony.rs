//! The registration ceremony, built on `webauthn-rs`, and the attestation policy.
//!
//! `webauthn-rs` checks the registration (challenge, origin, rpIdHash, UP/UV, algorithm, the
//! attestation statement and, under the `verified` policy, the chain to a configured root and the
//! AAGUID allowlist). What it verified is then copied into a [`CredentialRecord`]: the credential
//! id, the authenticator's exact COSE_Key bytes (taken from the attested credential data, so the
//! published key is byte for byte what the authenticator produced), the AAGUID, backup
//! eligibility and the attestation format and whether its chain verified.
//!
//! Ceremony state lives in memory for the ceremony's few minutes: a registration must finish on
//! the replica that started it. Only the invite, which outlives the ceremony, is in the database.

use crate::hints::Hint;
use countersign::webauthn::AuthenticatorData;
use countersign::{Aaguid, AttestationRecord, CredentialRecord};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Mutex;
use webauthn_rs::prelude::{
    AttestationCaList, AttestationCaListBuilder, AttestedPasskeyRegistration, Credential,
    PasskeyRegistration, RegisterPublicKeyCredential, Url, Uuid, Webauthn, WebauthnBuilder,
};

/// How much an enrollment must prove about the authenticator.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttestationPolicy {
    /// Any authenticator; attestation is recorded but not required. Verdicts reach at most AAL2.
    #[default]
    None,
    /// A `packed` or `tpm` attestation whose chain verifies against one of `roots`, from an
    /// authenticator model in `aaguids`, not synced (BE=0). Needed for AAL3.
    Verified,
}

/// `[enrollment]` in the service configuration.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnrollmentConfig {
    #[serde(default)]
    pub attestation: AttestationPolicy,
    /// PEM files of trusted attestation roots (`verified`).
    #[serde(default)]
    pub roots: Vec<PathBuf>,
    /// Authenticator models allowed under `verified`.
    #[serde(default)]
    pub aaguids: Vec<Aaguid>,
    /// Default lifetime of an invite, seconds.
    #[serde(default = "default_invite_seconds")]
    pub invite_seconds: u64,
}

fn default_invite_seconds() -> u64 {
    24 * 3600
}

impl Default for EnrollmentConfig {
    fn default() -> Self {
        Self {
            attestation: AttestationPolicy::None,
            roots: Vec::new(),
            aaguids: Vec::new(),
            invite_seconds: default_invite_seconds(),
        }
    }
}

/// Why an enrollment step was refused.
#[derive(Debug, thiserror::Error)]
pub enum EnrollError {
    #[error("enrollment is not configured: {0}")]
    Config(String),
    #[error("no registration ceremony is in progress for this invite (start again)")]
    NoCeremony,
    #[error("the registration was refused: {0}")]
    Registration(String),
    #[error("the authenticator data is unusable: {0}")]
    AuthenticatorData(String),
    #[error("the registered public key is unusable: {0}")]
    PublicKey(String),
}

/// What the ceremony start hands the browser.
#[derive(Debug, Clone)]
pub struct StartedCeremony {
    /// `CredentialCreationOptions` JSON (`{"publicKey": {...}}`, byte strings base64url).
    pub options: Value,
}

/// What an enrollment recorded, for the enrolling person and the operator.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EnrolledSummary {
    pub principal: String,
    pub credential_id: String,
    pub aaguid: Option<String>,
    pub backup_eligible: Option<bool>,
    pub attestation_format: String,
    pub chain_verified: bool,
    /// The strongest assurance verdicts made with this credential can reach.
    pub assurance_ceiling: String,
}

enum Registration {
    Passkey(PasskeyRegistration),
    Attested(AttestedPasskeyRegistration),
}

/// `(subject DER, display name)` of a configured root.
type RootName = (Vec<u8>, String);

struct Pending {
    registration: Registration,
    expires_at: i64,
}

/// At most this many ceremonies in flight; the oldest are dropped first.
const MAX_PENDING: usize = 1024;

/// The configured ceremony.
pub struct Enroller {
    webauthn: Webauthn,
    policy: AttestationPolicy,
    ca_list: Option<AttestationCaList>,
    roots: Vec<RootName>,
    pending: Mutex<HashMap<[u8; 32], Pending>>,
}

impl std::fmt::Debug for Enroller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Enroller")
            .field("policy", &self.policy)
            .field("roots", &self.roots.len())
            .finish_non_exhaustive()
    }
}

impl Enroller {
    /// Build the ceremony for `rp_id` and `origins` under `config`.
    pub fn new(
        rp_id: &str,
        origins: &[String],
        config: &EnrollmentConfig,
    ) -> Result<Self, EnrollError> {
        let parsed: Vec<Url> = origins
            .iter()
            .map(|o| Url::parse(o).map_err(|e| EnrollError::Config(format!("origin {o:?}: {e}"))))
            .collect::<Result<_, _>>()?;
        let (first, rest) = parsed
            .split_first()
            .ok_or_else(|| EnrollError::Config("no origins configured".to_owned()))?;
        let mut builder = WebauthnBuilder::new(rp_id, first)
            .map_err(|e| {
                EnrollError::Config(format!("rp_id {rp_id:?} does not fit origin {first}: {e}"))
            })?
            .rp_name("Countersign");
        for origin in rest {
            builder = builder.append_allowed_origin(origin);
        }
        let webauthn = builder
            .build()
            .map_err(|e| EnrollError::Config(e.to_string()))?;
        let (ca_list, roots) = match config.attestation {
            AttestationPolicy::None => (None, Vec::new()),
            AttestationPolicy::Verified => {
                let (list, roots) = load_roots(config)?;
                (Some(list), roots)
            }
        };
        Ok(Self {
            webauthn,
            policy: config.attestation,
            ca_list,
            roots,
            pending: Mutex::new(HashMap::new()),
        })
    }

    /// The attestation policy.
    pub fn policy(&self) -> AttestationPolicy {
        self.policy
    }

    /// Start a registration for the invite `key` (its token hash) and `principal`.
    pub fn start(
        &self,
        key: [u8; 32],
        principal: &str,
        exclude: Vec<Vec<u8>>,
        now: i64,
        ttl_ms: i64,
        hints: &[Hint],
    ) -> Result<StartedCeremony, EnrollError> {
        let user_id = Uuid::from_bytes(random16()?);
        let exclude = (!exclude.is_empty()).then_some(exclude);
        let (ccr, registration) = match &self.ca_list {
            None => {
                let (ccr, reg) = self
                    .webauthn
                    .start_passkey_registration(user_id, principal, principal, exclude)
                    .map_err(|e| EnrollError::Registration(e.to_string()))?;
                (ccr, Registration::Passkey(reg))
            }
            Some(list) => {
                let (ccr, reg) = self
                    .webauthn
                    .start_attested_passkey_registration(
                        user_id,
                        principal,
                        principal,
                        exclude,
                        list.clone(),
                        None,
                    )
                    .map_err(|e| EnrollError::Registration(e.to_string()))?;
                (ccr, Registration::Attested(reg))
            }
        };
        let mut options =
            serde_json::to_value(&ccr).map_err(|e| EnrollError::Registration(e.to_string()))?;
        // The approver page signs in without asking for a user name, so the credential must be
        // discoverable: ask for a resident key.
        if let Some(obj) = options
            .pointer_mut("/publicKey/authenticatorSelection")
            .and_then(Value::as_object_mut)
        {
            obj.insert("residentKey".to_owned(), Value::from("required"));
            obj.insert("requireResidentKey".to_owned(), Value::from(true));
        }
        // The request's hints replace webauthn-rs's fixed ones; under verified attestation
        // without `hybrid`, which that policy would refuse (crate::hints).
        let hints = match self.ca_list {
            None => hints.to_vec(),
            Some(_) => crate::hints::for_attested_creation(hints),
        };
        if let Some(obj) = options.get_mut("publicKey").and_then(Value::as_object_mut) {
            let hints = serde_json::to_value(hints)
                .map_err(|e| EnrollError::Registration(e.to_string()))?;
            obj.insert("hints".to_owned(), hints);
        }
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        pending.retain(|_, p| p.expires_at > now);
        let oldest = (pending.len() >= MAX_PENDING)
            .then(|| {
                pending
                    .iter()
                    .min_by_key(|(_, p)| p.expires_at)
                    .map(|(k, _)| *k)
            })
            .flatten();
        if let Some(oldest) = oldest {
            pending.remove(&oldest);
        }
        pending.insert(
            key,
            Pending {
                registration,
                expires_at: now.saturating_add(ttl_ms),
            },
        );
        Ok(StartedCeremony { options })
    }

    /// Finish the registration started for `key`; the ceremony is consumed whatever happens.
    pub fn finish(
        &self,
        key: &[u8; 32],
        principal: &str,
        response: &RegisterPublicKeyCredential,
        now: i64,
    ) -> Result<CredentialRecord, EnrollError> {
        let pending = self
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(key)
            .filter(|p| p.expires_at > now)
            .ok_or(EnrollError::NoCeremony)?;
        let (credential, chain_verified): (Credential, bool) = match &pending.registration {
            Registration::Passkey(state) => (
                self.webauthn
                    .finish_passkey_registration(response, state)
                    .map_err(|e| EnrollError::Registration(e.to_string()))?
                    .into(),
                false,
            ),
            // webauthn-rs refuses an attested registration whose chain does not reach a
            // configured root or whose AAGUID is not allowed for that root: reaching here means
            // the chain verified.
            Registration::Attested(state) => (
                self.webauthn
                    .finish_attested_passkey_registration(response, state)
                    .map_err(|e| EnrollError::Registration(e.to_string()))?
                    .into(),
                true,
            ),
        };
        let (public_key, aaguid) =
            attested_key(&response.response.attestation_object, &credential.cred_id)?;
        countersign::webauthn::CosePublicKey::from_cose(&public_key)
            .map_err(|e| EnrollError::PublicKey(e.to_string()))?;
        let format = serde_json::to_value(&credential.attestation_format)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_else(|| "unknown".to_owned());
        let root = if chain_verified {
            self.root_name(&credential)
        } else {
            None
        };
        Ok(CredentialRecord {
            credential_id: credential.cred_id.clone(),
            principal: principal.to_owned(),
            public_key,
            aaguid: Some(Aaguid(aaguid)),
            backup_eligible: Some(credential.backup_eligible),
            attestation: Some(AttestationRecord {
                format,
                chain_verified,
                root,
            }),
            sign_count: credential.counter,
            revoked: false,
        })
    }

    /// The configured root whose subject issued the top of the attestation chain.
    fn root_name(&self, credential: &Credential) -> Option<String> {
        // webauthn-rs serializes the verified chain as `{"Basic": [DER, ...]}` (or `AttCa`,
        // `AnonCa`), leaf first, base64url; the last certificate's issuer names the root.
        let data = serde_json::to_value(&credential.attestation.data).ok()?;
        let top = data
            .as_object()?
            .values()
            .next()?
            .as_array()?
            .last()?
            .as_str()?;
        let der = countersign::b64::decode(top).ok()?;
        let (_, cert) = x509_parser::parse_x509_certificate(&der).ok()?;
        let issuer = cert.issuer().as_raw();
        self.roots
            .iter()
            .find(|(subject, _)| subject.as_slice() == issuer)
            .map(|(_, name)| name.clone())
    }
}

fn random16() -> Result<[u8; 16], EnrollError> {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).map_err(|e| EnrollError::Registration(e.to_string()))?;
    Ok(b)
}

/// The exact COSE_Key bytes and AAGUID in the attestation object's attested credential data.
fn attested_key(
    attestation_object: &[u8],
    credential_id: &[u8],
) -> Result<(Vec<u8>, [u8; 16]), EnrollError> {
    let map: BTreeMap<String, serde_cbor_2::Value> =
        serde_cbor_2::from_slice(attestation_object)
            .map_err(|e| EnrollError::AuthenticatorData(format!("attestation object: {e}")))?;
    let Some(serde_cbor_2::Value::Bytes(auth_data)) = map.get("authData") else {
        return Err(EnrollError::AuthenticatorData(
            "attestation object has no authData".to_owned(),
        ));
    };
    let parsed = AuthenticatorData::parse(auth_data)
        .map_err(|e| EnrollError::AuthenticatorData(e.to_string()))?;
    let acd = parsed
        .attested_credential_data
        .ok_or_else(|| EnrollError::AuthenticatorData("no attested credential data".to_owned()))?;
    if acd.credential_id != credential_id {
        return Err(EnrollError::AuthenticatorData(
            "credential id differs from the verified one".to_owned(),
        ));
    }
    Ok((acd.credential_public_key.to_vec(), *acd.aaguid))
}

fn load_roots(
    config: &EnrollmentConfig,
) -> Result<(AttestationCaList, Vec<RootName>), EnrollError> {
    if config.roots.is_empty() || config.aaguids.is_empty() {
        return Err(EnrollError::Config(
            "attestation = \"verified\" needs at least one root and one AAGUID".to_owned(),
        ));
    }
    let mut builder = AttestationCaListBuilder::new();
    let mut roots = Vec::new();
    for path in &config.roots {
        let pem = std::fs::read(path)
            .map_err(|e| EnrollError::Config(format!("reading {}: {e}", path.display())))?;
        let (_, parsed) = x509_parser::pem::parse_x509_pem(&pem)
            .map_err(|e| EnrollError::Config(format!("{}: not PEM: {e}", path.display())))?;
        let cert = parsed
            .parse_x509()
            .map_err(|e| EnrollError::Config(format!("{}: not X.509: {e}", path.display())))?;
        let name = cert.subject().to_string();
        roots.push((cert.subject().as_raw().to_vec(), name.clone()));
        for aaguid in &config.aaguids {
            builder
                .insert_device_pem(
                    &pem,
                    Uuid::from_bytes(aaguid.0),
                    name.clone(),
                    BTreeMap::new(),
                )
                .map_err(|e| EnrollError::Config(format!("{}: {e:?}", path.display())))?;
        }
    }
    Ok((builder.build(), roots))
}

impl EnrolledSummary {
    /// Summarize a record for display.
    pub fn of(record: &CredentialRecord) -> Self {
        let attestation = record.attestation.clone().unwrap_or(AttestationRecord {
            format: "none".to_owned(),
            chain_verified: false,
            root: None,
        });
        let device_bound = record.backup_eligible == Some(false);
        let ceiling = if attestation.chain_verified && device_bound {
            "AAL3"
        } else {
            "AAL2"
        };
        Self {
            principal: record.principal.clone(),
            credential_id: countersign::b64::encode(&record.credential_id),
            aaguid: record.aaguid.map(|a| a.to_string()),
            backup_eligible: record.backup_eligible,
            attestation_format: attestation.format,
            chain_verified: attestation.chain_verified,
            assurance_ceiling: ceiling.to_owned(),
        }
    }
}
