//! The signature-verification seam.
//!
//! Everything a backend could disagree on — DER, Ed25519 encodings, RSA sizes, signature lengths —
//! is settled before a backend is called: the key by [`CosePublicKey::from_cose`], the signature by
//! [`PreparedSignature::new`]. A backend only does the arithmetic, so the pure-Rust backend and
//! `ring` accept exactly the same signatures (the integration tests check this on every case).

#[cfg(feature = "ring")]
mod ring;
mod rustcrypto;

#[cfg(feature = "ring")]
pub use self::ring::RingBackend;
pub use rustcrypto::RustCryptoBackend;

use super::cose::{CoseAlgorithm, CosePublicKey, PublicKeyMaterial};
use super::der::{self, DerError, DerPolicy};
use super::ed25519;
use crate::reason::ReasonCode;

/// Signature verification seam: verify a prepared signature over `signed` under `key`.
pub trait SignatureBackend: Send + Sync + std::fmt::Debug {
    /// A short stable name (`rustcrypto`, `ring`).
    fn name(&self) -> &'static str;

    /// Verify. `signature` was prepared for `key` by [`PreparedSignature::new`]; a signature
    /// prepared for another algorithm is an [`SignatureError::AlgorithmMismatch`].
    fn verify(
        &self,
        key: &CosePublicKey,
        signed: &[u8],
        signature: &PreparedSignature<'_>,
    ) -> Result<(), SignatureError>;
}

/// A signature decoded and checked for encoding against the key's algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PreparedSignature<'a> {
    /// ES256 as fixed-width `r || s`.
    EcdsaP256(
        /// `r || s`, 32 bytes each.
        [u8; 64],
    ),
    /// ES384 as fixed-width `r || s`.
    EcdsaP384(
        /// `r || s`, 48 bytes each.
        [u8; 96],
    ),
    /// Ed25519 `R || S`.
    Ed25519(
        /// 64 bytes.
        &'a [u8; 64],
    ),
    /// RSASSA-PKCS1-v1_5, exactly as long as the modulus.
    Rsa(
        /// The signature, big-endian.
        &'a [u8],
    ),
}

impl<'a> PreparedSignature<'a> {
    /// Decode `signature` as `key`'s algorithm requires, under `policy` for ECDSA DER.
    pub fn new(
        key: &CosePublicKey,
        signature: &'a [u8],
        policy: DerPolicy,
    ) -> Result<Self, SignatureError> {
        match key.material() {
            PublicKeyMaterial::P256 { .. } => der::p256_fixed(signature, policy)
                .map(Self::EcdsaP256)
                .map_err(SignatureError::Der),
            PublicKeyMaterial::P384 { .. } => der::p384_fixed(signature, policy)
                .map(Self::EcdsaP384)
                .map_err(SignatureError::Der),
            PublicKeyMaterial::Ed25519 { .. } => {
                let bytes: &[u8; 64] =
                    signature
                        .try_into()
                        .map_err(|_| SignatureError::WrongLength {
                            alg: CoseAlgorithm::EdDsa,
                            expected: 64,
                            got: signature.len(),
                        })?;
                let (r, s) = bytes.split_at(32);
                let (r, s): (&[u8; 32], &[u8; 32]) = match (r.try_into(), s.try_into()) {
                    (Ok(r), Ok(s)) => (r, s),
                    _ => return Err(SignatureError::Ed25519Rejected { check: "length" }),
                };
                // See `ed25519.rs` for why these run here rather than in the backends.
                if !ed25519::is_canonical_point(r) {
                    return Err(SignatureError::Ed25519Rejected {
                        check: "R not canonical",
                    });
                }
                if ed25519::is_small_order_point(r) {
                    return Err(SignatureError::Ed25519Rejected {
                        check: "R of small order",
                    });
                }
                if !ed25519::is_canonical_scalar(s) {
                    return Err(SignatureError::Ed25519Rejected {
                        check: "S not reduced",
                    });
                }
                Ok(Self::Ed25519(bytes))
            }
            PublicKeyMaterial::Rsa { n, .. } => {
                if signature.len() != n.len() {
                    return Err(SignatureError::WrongLength {
                        alg: CoseAlgorithm::Rs256,
                        expected: n.len(),
                        got: signature.len(),
                    });
                }
                // Equal-length big-endian byte strings compare as numbers. Both backends refuse
                // s >= n; doing it here makes that refusal one shared, named check.
                if signature >= n {
                    return Err(SignatureError::RsaSignatureOutOfRange);
                }
                Ok(Self::Rsa(signature))
            }
        }
    }
}

/// Why a signature was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SignatureError {
    /// The ECDSA signature's DER was refused (see [`DerPolicy`]).
    #[error("ECDSA signature encoding: {0}")]
    Der(DerError),
    /// An Ed25519 or RSA signature of the wrong length.
    #[error("{alg:?} signature is {got} bytes, expected {expected}")]
    WrongLength {
        /// The key's algorithm.
        alg: CoseAlgorithm,
        /// The required length.
        expected: usize,
        /// The length found.
        got: usize,
    },
    /// An Ed25519 signature refused by the shared encoding checks.
    #[error("Ed25519 signature refused: {check}")]
    Ed25519Rejected {
        /// Which check failed.
        check: &'static str,
    },
    /// An RSA signature not below the modulus.
    #[error("RSA signature is not less than the modulus")]
    RsaSignatureOutOfRange,
    /// The backend computed that the signature does not verify.
    #[error("signature does not verify ({backend} backend)")]
    Invalid {
        /// The backend's name.
        backend: &'static str,
    },
    /// API misuse: the prepared signature is for another algorithm than the key.
    #[error("signature prepared for another algorithm than the {key:?} key")]
    AlgorithmMismatch {
        /// The key's algorithm.
        key: CoseAlgorithm,
    },
}

impl SignatureError {
    /// The wire reason code: encoding errors are `evidence_malformed`, everything that is a
    /// well-formed but wrong signature is `signature_invalid`.
    pub fn reason_code(&self) -> ReasonCode {
        match self {
            Self::Der(DerError::ScalarOutOfRange { .. })
            | Self::Ed25519Rejected { .. }
            | Self::RsaSignatureOutOfRange
            | Self::Invalid { .. }
            | Self::AlgorithmMismatch { .. } => ReasonCode::SignatureInvalid,
            Self::Der(_) | Self::WrongLength { .. } => ReasonCode::EvidenceMalformed,
        }
    }
}

/// The fastest backend compiled in: `ring` with the `ring` feature, else the pure-Rust one.
pub fn default_backend() -> &'static dyn SignatureBackend {
    #[cfg(feature = "ring")]
    {
        &RingBackend
    }
    #[cfg(not(feature = "ring"))]
    {
        &RustCryptoBackend
    }
}

/// Every backend compiled in (for agreement tests and benchmarks).
pub fn all_backends() -> Vec<&'static dyn SignatureBackend> {
    vec![
        &RustCryptoBackend,
        #[cfg(feature = "ring")]
        &RingBackend,
    ]
}
