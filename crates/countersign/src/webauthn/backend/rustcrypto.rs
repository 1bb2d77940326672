//! The pure-Rust backend: `p256`, `p384`, `ed25519-dalek` and `rsa`. Builds anywhere, WebAssembly
//! included; the library default.

use super::{PreparedSignature, SignatureBackend, SignatureError};
use crate::webauthn::cose::{CosePublicKey, KeyInner};
use p256::ecdsa::signature::Verifier as _;
use sha2::{Digest, Sha256};

/// Pure-Rust backend (the default).
#[derive(Debug, Clone, Copy, Default)]
pub struct RustCryptoBackend;

const NAME: &str = "rustcrypto";

impl SignatureBackend for RustCryptoBackend {
    fn name(&self) -> &'static str {
        NAME
    }

    fn verify(
        &self,
        key: &CosePublicKey,
        signed: &[u8],
        signature: &PreparedSignature<'_>,
    ) -> Result<(), SignatureError> {
        let invalid = SignatureError::Invalid { backend: NAME };
        match (&key.inner, signature) {
            (KeyInner::Es256 { key, .. }, PreparedSignature::EcdsaP256(fixed)) => {
                let sig = p256::ecdsa::Signature::from_slice(fixed).map_err(|_| invalid.clone())?;
                key.verify(signed, &sig).map_err(|_| invalid)
            }
            (KeyInner::Es384 { key, .. }, PreparedSignature::EcdsaP384(fixed)) => {
                let sig = p384::ecdsa::Signature::from_slice(fixed).map_err(|_| invalid.clone())?;
                key.verify(signed, &sig).map_err(|_| invalid)
            }
            (KeyInner::EdDsa { key, .. }, PreparedSignature::Ed25519(bytes)) => {
                // `verify_strict`, not `verify`: it refuses small-order R and A, which the shared
                // checks refuse anyway, so both backends see one behaviour (see `ed25519.rs`).
                let sig = ed25519_dalek::Signature::from_bytes(bytes);
                key.verify_strict(signed, &sig).map_err(|_| invalid)
            }
            (KeyInner::Rs256 { key, .. }, PreparedSignature::Rsa(bytes)) => {
                let digest = Sha256::digest(signed);
                key.verify(rsa::Pkcs1v15Sign::new::<Sha256>(), &digest, bytes)
                    .map_err(|_| invalid)
            }
            _ => Err(SignatureError::AlgorithmMismatch {
                key: key.algorithm(),
            }),
        }
    }
}
