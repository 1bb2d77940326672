//! WebAuthn assertion verification (the lower-level API).
//!
//! [`verify_assertion`] checks one authentication assertion against an enrolled [`CosePublicKey`]
//! and the relying party's [`AssertionExpectations`], in the order of WebAuthn Level 3 §7.2. The
//! modules each own one concern:
//!
//! - `client_data`: clientDataJSON — type, challenge, origin, cross-origin context;
//! - `auth_data`: authenticatorData — framing, rpIdHash, flags, counter;
//! - `cose` (with a minimal strict CBOR reader in `cbor`): credential public keys;
//! - `der` and `ed25519`: the signature encoding rules shared by all backends;
//! - `backend`: the [`SignatureBackend`] seam, a pure-Rust backend and (feature `ring`) a `ring` one.
//!
//! Policies that go beyond the specification, and why, are in `docs/spec/webauthn.md`.

mod assertion;
mod auth_data;
mod backend;
mod cbor;
mod client_data;
mod cose;
mod der;
mod ed25519;

pub use assertion::{
    Assertion, AssertionError, AssertionExpectations, VerifiedAssertion, verify_assertion,
};
pub use auth_data::{
    AttestedCredentialData, AuthDataError, AuthenticatorData, Flags, MAX_CREDENTIAL_ID_LEN,
    check_sign_count, sign_count_advances,
};
#[cfg(feature = "ring")]
pub use backend::RingBackend;
pub use backend::{
    PreparedSignature, RustCryptoBackend, SignatureBackend, SignatureError, all_backends,
    default_backend,
};
pub use cbor::CborError;
pub use client_data::{ClientData, ClientDataError, TYPE_GET};
pub use cose::{
    CoseAlgorithm, CoseError, CosePublicKey, PublicKeyMaterial, RSA_MAX_BITS, RSA_MIN_BITS,
};
pub use der::{DerError, DerPolicy};
