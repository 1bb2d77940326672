//! WebAuthn assertion verification (the lower-level API).
//!
//! OWNED BY THE WEBAUTHN HELPER — this file is a contract stub; replace bodies, keep signatures.

use crate::reason::ReasonCode;

/// COSE algorithms this verifier implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CoseAlgorithm {
    Es256,
    EdDsa,
    Rs256,
    Es384,
}

/// A credential public key parsed from its COSE_Key encoding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CosePublicKey {
    alg: CoseAlgorithm,
}

impl CosePublicKey {
    pub fn from_cose(bytes: &[u8]) -> Result<Self, CoseError> {
        let _ = bytes;
        Err(CoseError::Malformed("not implemented".into()))
    }
    pub fn algorithm(&self) -> CoseAlgorithm {
        self.alg
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CoseError {
    #[error("malformed COSE_Key: {0}")]
    Malformed(String),
    #[error("unsupported COSE algorithm {0}")]
    UnsupportedAlgorithm(i64),
}

/// Authenticator data flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flags(pub u8);

impl Flags {
    pub fn user_present(self) -> bool {
        self.0 & 0x01 != 0
    }
    pub fn user_verified(self) -> bool {
        self.0 & 0x04 != 0
    }
    pub fn backup_eligible(self) -> bool {
        self.0 & 0x08 != 0
    }
    pub fn backup_state(self) -> bool {
        self.0 & 0x10 != 0
    }
}

/// Parsed clientDataJSON (unknown keys tolerated).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientData {
    pub type_: String,
    pub challenge: Vec<u8>,
    pub origin: String,
    pub cross_origin: Option<bool>,
    pub top_origin: Option<String>,
}

impl ClientData {
    pub fn parse(bytes: &[u8]) -> Result<Self, AssertionError> {
        let _ = bytes;
        Err(AssertionError::Malformed("not implemented".into()))
    }
}

/// What the relying party expects of an assertion.
#[derive(Debug, Clone)]
pub struct AssertionExpectations<'a> {
    pub challenge: &'a [u8],
    pub rp_id: &'a str,
    pub origins: &'a [String],
    pub allow_cross_origin: bool,
    pub require_user_verification: bool,
    pub stored_sign_count: u32,
    pub backup_eligible: Option<bool>,
}

/// The three byte strings an authenticator returns.
#[derive(Debug, Clone, Copy)]
pub struct Assertion<'a> {
    pub client_data_json: &'a [u8],
    pub authenticator_data: &'a [u8],
    pub signature: &'a [u8],
}

/// Proof that every check passed (constructible only inside the crate).
#[derive(Debug, Clone)]
pub struct VerifiedAssertion {
    pub client_data: ClientData,
    pub flags: Flags,
    pub sign_count: u32,
    _private: (),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AssertionError {
    #[error("malformed: {0}")]
    Malformed(String),
}

impl AssertionError {
    pub fn reason_code(&self) -> ReasonCode {
        ReasonCode::EvidenceMalformed
    }
}

/// Signature verification seam.
pub trait SignatureBackend: Send + Sync + std::fmt::Debug {
    fn name(&self) -> &'static str;
    fn verify(
        &self,
        key: &CosePublicKey,
        signed: &[u8],
        signature: &[u8],
    ) -> Result<(), AssertionError>;
}

/// Pure-Rust backend (the default).
#[derive(Debug, Clone, Copy, Default)]
pub struct RustCryptoBackend;

impl SignatureBackend for RustCryptoBackend {
    fn name(&self) -> &'static str {
        "rustcrypto"
    }
    fn verify(
        &self,
        key: &CosePublicKey,
        signed: &[u8],
        signature: &[u8],
    ) -> Result<(), AssertionError> {
        let _ = (key, signed, signature);
        Err(AssertionError::Malformed("not implemented".into()))
    }
}

/// The fastest backend compiled in.
pub fn default_backend() -> &'static dyn SignatureBackend {
    &RustCryptoBackend
}

/// Verify one assertion against `key` and `expect`.
pub fn verify_assertion(
    key: &CosePublicKey,
    assertion: &Assertion<'_>,
    expect: &AssertionExpectations<'_>,
    backend: &dyn SignatureBackend,
) -> Result<VerifiedAssertion, AssertionError> {
    let _ = (key, assertion, expect, backend);
    Err(AssertionError::Malformed("not implemented".into()))
}

/// Every backend compiled in.
pub fn all_backends() -> Vec<&'static dyn SignatureBackend> {
    vec![&RustCryptoBackend]
}
