//! A deterministic software FIDO2 authenticator for tests, benchmarks and conformance vectors.
//!
//! Every output is a pure function of its inputs: keys come from named seeds in
//! `fixtures/keys/seeds.json` (or committed PKCS#8 files for RSA), ECDSA uses RFC 6979 nonces, and
//! nothing reads a clock or a random number generator. Rebuilding a vector therefore reproduces it
//! byte for byte.
//!
//! ```
//! use countersign_softkey::{AssertionRequest, Ceremony, SoftKey};
//!
//! let key = SoftKey::fixture("alice-es256")?;
//! let ceremony = Ceremony::get("example.com", "https://example.com", [7u8; 64]);
//! let resp = key.assert(&AssertionRequest::from(ceremony))?;
//! assert_eq!(resp.authenticator_data.len(), 37);
//! # Ok::<(), countersign_softkey::Error>(())
//! ```
//!
//! Negative cases are built by asking for them: flags are written verbatim, ECDSA signatures can
//! be mis-encoded ([`SignatureQuirk`]), clientDataJSON can be replaced outright, and
//! [`AssertionResponse::flip_bit`] tampers with a field after signing. The derivations and the
//! fixture PKI are described in `docs/spec/softkey.md`.
//!
//! This crate must not depend on `countersign` (which uses it as a dev-dependency).

#![forbid(unsafe_code)]

mod assertion;
mod authdata;
pub mod cbor;
mod ceremony;
mod client_data;
#[cfg(feature = "ctap2")]
pub mod ctap2;
mod der;
mod error;
mod fixtures;
mod keys;
mod registration;
mod x509;

pub use assertion::{AssertionRequest, AssertionResponse};
pub use authdata::{Flags, Part, SignatureQuirk, build_authenticator_data};
pub use ceremony::Ceremony;
pub use client_data::CHROME_EXTRA_KEY;
pub use error::Error;
pub use fixtures::FIXTURE_AAGUID;
pub use keys::{Alg, DEFAULT_CREDENTIAL_ID_LEN, PublicKey, SoftKey, signed_message};
pub use registration::{Attestation, RegistrationRequest, RegistrationResponse};
pub use x509::{
    FixtureCertificates, build_fixture_certificates, fixture_attestation_certificate,
    fixture_attestation_key, fixture_root_certificate, pem,
};

/// base64url without padding, the encoding WebAuthn's JSON forms use.
pub fn b64url(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// A `PublicKeyCredential` as JSON (WebAuthn L3 §5.1) around a ceremony's `response` member: the
/// envelope both `to_json`s share, a cross-platform key with no client extension results.
fn credential_json(credential_id: &[u8], response: serde_json::Value) -> serde_json::Value {
    serde_json::json!({
        "id": b64url(credential_id),
        "rawId": b64url(credential_id),
        "type": "public-key",
        "authenticatorAttachment": "cross-platform",
        "clientExtensionResults": {},
        "response": response,
    })
}
