//! The `ring` backend (C and assembly; several times faster). Behind the `ring` feature.
//!
//! It takes the raw key bytes validated at parse time and the fixed-width ECDSA form, so it sees
//! exactly what the pure-Rust backend sees.

use super::{PreparedSignature, SignatureBackend, SignatureError};
use crate::webauthn::cose::{CosePublicKey, PublicKeyMaterial};
use ring::signature::{self, RsaPublicKeyComponents, UnparsedPublicKey};

/// Backend on `ring::signature`.
#[derive(Debug, Clone, Copy, Default)]
pub struct RingBackend;

const NAME: &str = "ring";

impl SignatureBackend for RingBackend {
    fn name(&self) -> &'static str {
        NAME
    }

    fn verify(
        &self,
        key: &CosePublicKey,
        signed: &[u8],
        signature: &PreparedSignature<'_>,
    ) -> Result<(), SignatureError> {
        let result = match (key.material(), signature) {
            (PublicKeyMaterial::P256 { sec1 }, PreparedSignature::EcdsaP256(fixed)) => {
                UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_FIXED, sec1)
                    .verify(signed, fixed)
            }
            (PublicKeyMaterial::P384 { sec1 }, PreparedSignature::EcdsaP384(fixed)) => {
                UnparsedPublicKey::new(&signature::ECDSA_P384_SHA384_FIXED, sec1)
                    .verify(signed, fixed)
            }
            (PublicKeyMaterial::Ed25519 { key }, PreparedSignature::Ed25519(bytes)) => {
                UnparsedPublicKey::new(&signature::ED25519, key).verify(signed, *bytes)
            }
            (PublicKeyMaterial::Rsa { n, e }, PreparedSignature::Rsa(bytes)) => {
                RsaPublicKeyComponents { n, e }.verify(
                    &signature::RSA_PKCS1_2048_8192_SHA256,
                    signed,
                    bytes,
                )
            }
            _ => {
                return Err(SignatureError::AlgorithmMismatch {
                    key: key.algorithm(),
                });
            }
        };
        result.map_err(|_| SignatureError::Invalid { backend: NAME })
    }
}
