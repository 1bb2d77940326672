//! Integration tests for the soft authenticator: one binary, one module per concern.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "test code: a panic is a failed test (clippy.toml covers #[test] fns, not helpers)"
)]

mod cbor_decode;
mod determinism;
mod encodings;
mod negative;
mod registration;
mod sign_verify;
mod x509;

use countersign_softkey::{PublicKey, SoftKey};

pub(crate) const RP: &str = "example.com";
pub(crate) const ORIGIN: &str = "https://example.com";

/// One fixture key per algorithm.
pub(crate) const ALG_FIXTURES: [&str; 4] =
    ["alice-es256", "alice-es384", "alice-eddsa", "alice-rs256"];

pub(crate) fn key(name: &str) -> SoftKey {
    SoftKey::fixture(name).unwrap()
}

/// The 64-byte challenge shape Countersign uses (nonce || op_hash).
pub(crate) fn challenge(tag: u8) -> Vec<u8> {
    (0..64u8).map(|i| i.wrapping_mul(31) ^ tag).collect()
}

/// Verifies a WebAuthn-format signature with the pure-Rust crates directly (not via softkey).
pub(crate) fn verify(pk: &PublicKey, message: &[u8], sig: &[u8]) -> bool {
    // p256/p384 implement `signature` 3's `Verifier`, rsa `signature` 2's.
    use p256::ecdsa::signature::Verifier as _;
    use rsa::signature::Verifier as _;
    match pk {
        PublicKey::Es256(k) => {
            p256::ecdsa::Signature::from_der(sig).is_ok_and(|s| k.verify(message, &s).is_ok())
        }
        PublicKey::Es384(k) => {
            p384::ecdsa::Signature::from_der(sig).is_ok_and(|s| k.verify(message, &s).is_ok())
        }
        PublicKey::EdDsa(k) => ed25519_dalek::Signature::from_slice(sig)
            .is_ok_and(|s| k.verify_strict(message, &s).is_ok()),
        PublicKey::Rs256(k) => {
            let vk = rsa::pkcs1v15::VerifyingKey::<sha2::Sha256>::new(k.clone());
            rsa::pkcs1v15::Signature::try_from(sig).is_ok_and(|s| vk.verify(message, &s).is_ok())
        }
        _ => panic!("unknown key type"),
    }
}
