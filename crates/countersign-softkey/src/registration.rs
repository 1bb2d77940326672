//! `navigator.credentials.create()` as a function: a registration response with `none` or
//! `packed` attestation.

use crate::cbor::Value;
use crate::ceremony::Ceremony;
use crate::error::Error;
use crate::keys::{self, Alg, SoftKey};
use crate::x509;

/// The attestation statement format to produce.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Attestation {
    /// `fmt: "none"`, empty `attStmt` (WebAuthn §8.7).
    #[default]
    None,
    /// `fmt: "packed"` self attestation: signed by the credential key, no `x5c` (§8.2).
    PackedSelf,
    /// `fmt: "packed"` full attestation: signed by the fixture attestation key (ES256), with
    /// `x5c` = [fixture attestation certificate] (§8.2; the root is not included).
    PackedFull,
}

impl Attestation {
    fn fmt(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::PackedSelf | Self::PackedFull => "packed",
        }
    }
}

/// Everything a registration depends on: a [`Ceremony`], the attestation and the key it
/// carries. Build from a ceremony (`RegistrationRequest::from(Ceremony::create(rp_id, origin,
/// challenge))`, or a [`Ceremony`] with fields overridden), and override the registration's own
/// fields with struct-update syntax.
#[derive(Clone, Debug, PartialEq)]
pub struct RegistrationRequest {
    /// What is signed and how.
    pub ceremony: Ceremony,
    /// COSE_Key bytes to put in the attested credential data instead of the real key.
    pub cose_key_override: Option<Vec<u8>>,
    /// Attestation format. Default [`Attestation::None`].
    pub attestation: Attestation,
}

impl From<Ceremony> for RegistrationRequest {
    /// A registration of `ceremony`: the real key, `none` attestation.
    fn from(ceremony: Ceremony) -> Self {
        Self {
            ceremony,
            cose_key_override: None,
            attestation: Attestation::None,
        }
    }
}

/// The raw bytes of a registration, as `AuthenticatorAttestationResponse` exposes them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegistrationResponse {
    /// The credential id.
    pub credential_id: Vec<u8>,
    /// clientDataJSON.
    pub client_data_json: Vec<u8>,
    /// The attestation object (CBOR map `fmt`, `attStmt`, `authData`).
    pub attestation_object: Vec<u8>,
    /// The authenticator data inside the attestation object (`getAuthenticatorData()`).
    pub authenticator_data: Vec<u8>,
    /// The credential public key as COSE_Key (as in the attested credential data).
    pub public_key_cose: Vec<u8>,
    /// The credential public key as SubjectPublicKeyInfo DER (`getPublicKey()`).
    pub public_key_spki_der: Vec<u8>,
    /// The credential algorithm (`getPublicKeyAlgorithm()`).
    pub alg: Alg,
}

impl RegistrationResponse {
    /// `RegistrationResponseJSON` (WebAuthn L3 §5.1), every binary field base64url.
    pub fn to_json(&self) -> serde_json::Value {
        let response = serde_json::json!({
            "clientDataJSON": crate::b64url(&self.client_data_json),
            "attestationObject": crate::b64url(&self.attestation_object),
            "authenticatorData": crate::b64url(&self.authenticator_data),
            "publicKey": crate::b64url(&self.public_key_spki_der),
            "publicKeyAlgorithm": self.alg.cose_alg(),
            "transports": ["usb"],
        });
        crate::credential_json(&self.credential_id, response)
    }
}

impl SoftKey {
    /// Produces a registration response for this credential.
    pub fn register(&self, req: &RegistrationRequest) -> Result<RegistrationResponse, Error> {
        let public_key_cose = req
            .cose_key_override
            .clone()
            .unwrap_or_else(|| self.cose_public_key());
        let attested = self.attested_credential_data_with(&public_key_cose);
        let c = &req.ceremony;
        let authenticator_data = c.authenticator_data(Some(&attested));
        let client_data_json = c.client_data_json();
        let message = keys::signed_message(&authenticator_data, &client_data_json);

        let att_stmt = match req.attestation {
            Attestation::None => Value::Map(Vec::new()),
            Attestation::PackedSelf => {
                let sig = c.signature_quirk.apply(self.alg(), &self.sign(&message)?)?;
                Value::Map(vec![
                    ("alg".into(), self.alg().cose_alg().into()),
                    ("sig".into(), sig.into()),
                ])
            }
            Attestation::PackedFull => {
                let att_key = x509::fixture_attestation_key()?;
                let sig = c
                    .signature_quirk
                    .apply(att_key.alg(), &att_key.sign(&message)?)?;
                Value::Map(vec![
                    ("alg".into(), att_key.alg().cose_alg().into()),
                    ("sig".into(), sig.into()),
                    (
                        "x5c".into(),
                        Value::Array(vec![
                            x509::fixture_attestation_certificate().to_vec().into(),
                        ]),
                    ),
                ])
            }
        };
        let attestation_object = Value::Map(vec![
            ("fmt".into(), req.attestation.fmt().into()),
            ("attStmt".into(), att_stmt),
            ("authData".into(), Value::Bytes(authenticator_data.clone())),
        ])
        .encode();

        Ok(RegistrationResponse {
            credential_id: self.credential_id().to_vec(),
            client_data_json,
            attestation_object,
            authenticator_data,
            public_key_cose,
            public_key_spki_der: self.public_key_spki_der(),
            alg: self.alg(),
        })
    }
}
