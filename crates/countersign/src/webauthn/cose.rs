//! Credential public keys in their COSE_Key encoding (RFC 9052 §7, RFC 9053, RFC 8230).
//!
//! A key is parsed and validated once — when the registry is loaded — into a form both backends can
//! use without further decoding: the raw encoding `ring` wants and the decoded pure-Rust key. Every
//! rule that could make the backends disagree about a key (point validity, RSA sizes and exponents,
//! Ed25519 canonicity) is enforced here, so a key that parses is a key both accept.

use super::cbor::{self, CborError, Value};
use super::ed25519;
use crate::reason::ReasonCode;
use std::fmt;

/// COSE algorithms this verifier implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CoseAlgorithm {
    /// ECDSA with P-256 and SHA-256 (COSE -7).
    Es256,
    /// EdDSA with Ed25519 (COSE -8, crv 6).
    EdDsa,
    /// RSASSA-PKCS1-v1_5 with SHA-256 (COSE -257).
    Rs256,
    /// ECDSA with P-384 and SHA-384 (COSE -35).
    Es384,
}

impl CoseAlgorithm {
    /// The COSE algorithm identifier.
    pub fn cose_id(self) -> i64 {
        match self {
            Self::Es256 => ALG_ES256,
            Self::EdDsa => ALG_EDDSA,
            Self::Rs256 => ALG_RS256,
            Self::Es384 => ALG_ES384,
        }
    }
}

const ALG_ES256: i64 = -7;
const ALG_EDDSA: i64 = -8;
const ALG_ES384: i64 = -35;
const ALG_RS256: i64 = -257;

const LABEL_KTY: i64 = 1;
const LABEL_ALG: i64 = 3;
/// `crv` for EC2/OKP, `n` for RSA.
const LABEL_M1: i64 = -1;
/// `x` for EC2/OKP, `e` for RSA.
const LABEL_M2: i64 = -2;
/// `y` for EC2.
const LABEL_M3: i64 = -3;

const KTY_OKP: i64 = 1;
const KTY_EC2: i64 = 2;
const KTY_RSA: i64 = 3;

const CRV_P256: i64 = 1;
const CRV_P384: i64 = 2;
const CRV_ED25519: i64 = 6;

/// RSA moduli we accept, in bits. 2048 is the floor both backends can enforce identically;
/// 8192 is `ring`'s ceiling (and keeps verification time bounded).
pub const RSA_MIN_BITS: usize = 2048;
/// See [`RSA_MIN_BITS`].
pub const RSA_MAX_BITS: usize = 8192;

/// A credential public key parsed from its COSE_Key encoding.
///
/// Cheap to verify with: parsing happened once, and it holds both the raw key encoding and the
/// decoded pure-Rust key.
#[derive(Clone)]
pub struct CosePublicKey {
    pub(crate) inner: KeyInner,
}

#[derive(Clone)]
pub(crate) enum KeyInner {
    Es256 {
        sec1: [u8; 65],
        key: p256::ecdsa::VerifyingKey,
    },
    Es384 {
        sec1: [u8; 97],
        key: p384::ecdsa::VerifyingKey,
    },
    EdDsa {
        raw: [u8; 32],
        key: ed25519_dalek::VerifyingKey,
    },
    Rs256 {
        n: Box<[u8]>,
        e: Box<[u8]>,
        key: Box<rsa::RsaPublicKey>,
    },
}

/// The validated key bytes, for backends that decode keys themselves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PublicKeyMaterial<'a> {
    /// A P-256 point, SEC1 uncompressed (`04 || x || y`).
    P256 {
        /// 65 bytes.
        sec1: &'a [u8; 65],
    },
    /// A P-384 point, SEC1 uncompressed (`04 || x || y`).
    P384 {
        /// 97 bytes.
        sec1: &'a [u8; 97],
    },
    /// An Ed25519 public key (RFC 8032 encoding).
    Ed25519 {
        /// 32 bytes.
        key: &'a [u8; 32],
    },
    /// An RSA public key, big-endian without leading zeros.
    Rsa {
        /// The modulus.
        n: &'a [u8],
        /// The public exponent.
        e: &'a [u8],
    },
}

impl CosePublicKey {
    /// Parse one COSE_Key (and nothing after it).
    pub fn from_cose(bytes: &[u8]) -> Result<Self, CoseError> {
        let params = Params::read(bytes)?;
        let alg = params
            .alg
            .ok_or(CoseError::MissingParameter { label: LABEL_ALG })?;
        let kty = params
            .kty
            .ok_or(CoseError::MissingParameter { label: LABEL_KTY })?;
        let inner = match alg {
            ALG_ES256 => {
                params.expect_kty(alg, kty, KTY_EC2)?;
                params.expect_crv(alg, CRV_P256)?;
                let sec1 = params.ec2_point::<32, 65>()?;
                let key = p256::ecdsa::VerifyingKey::from_sec1_bytes(&sec1)
                    .map_err(|_| CoseError::InvalidPoint { alg })?;
                KeyInner::Es256 { sec1, key }
            }
            ALG_ES384 => {
                params.expect_kty(alg, kty, KTY_EC2)?;
                params.expect_crv(alg, CRV_P384)?;
                let sec1 = params.ec2_point::<48, 97>()?;
                let key = p384::ecdsa::VerifyingKey::from_sec1_bytes(&sec1)
                    .map_err(|_| CoseError::InvalidPoint { alg })?;
                KeyInner::Es384 { sec1, key }
            }
            ALG_EDDSA => {
                params.expect_kty(alg, kty, KTY_OKP)?;
                params.expect_crv(alg, CRV_ED25519)?;
                let raw: [u8; 32] = params.fixed_bytes(LABEL_M2)?;
                // See `ed25519.rs`: refuse what either backend would refuse, at load time.
                if !ed25519::is_canonical_point(&raw) || ed25519::is_small_order_point(&raw) {
                    return Err(CoseError::InvalidPoint { alg });
                }
                let key = ed25519_dalek::VerifyingKey::from_bytes(&raw)
                    .map_err(|_| CoseError::InvalidPoint { alg })?;
                KeyInner::EdDsa { raw, key }
            }
            ALG_RS256 => {
                params.expect_kty(alg, kty, KTY_RSA)?;
                rsa_key(params.bytes(LABEL_M1)?, params.bytes(LABEL_M2)?)?
            }
            _ => return Err(CoseError::UnsupportedAlgorithm { alg, crv: None }),
        };
        Ok(Self { inner })
    }

    /// The key's signature algorithm.
    pub fn algorithm(&self) -> CoseAlgorithm {
        match self.inner {
            KeyInner::Es256 { .. } => CoseAlgorithm::Es256,
            KeyInner::Es384 { .. } => CoseAlgorithm::Es384,
            KeyInner::EdDsa { .. } => CoseAlgorithm::EdDsa,
            KeyInner::Rs256 { .. } => CoseAlgorithm::Rs256,
        }
    }

    /// The validated key bytes.
    pub fn material(&self) -> PublicKeyMaterial<'_> {
        match &self.inner {
            KeyInner::Es256 { sec1, .. } => PublicKeyMaterial::P256 { sec1 },
            KeyInner::Es384 { sec1, .. } => PublicKeyMaterial::P384 { sec1 },
            KeyInner::EdDsa { raw, .. } => PublicKeyMaterial::Ed25519 { key: raw },
            KeyInner::Rs256 { n, e, .. } => PublicKeyMaterial::Rsa { n, e },
        }
    }
}

impl PartialEq for CosePublicKey {
    fn eq(&self, other: &Self) -> bool {
        // The decoded keys are functions of the bytes, so comparing the bytes suffices.
        self.material() == other.material()
    }
}

impl Eq for CosePublicKey {}

impl fmt::Debug for CosePublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bytes: &[u8] = match self.material() {
            PublicKeyMaterial::P256 { sec1 } => sec1,
            PublicKeyMaterial::P384 { sec1 } => sec1,
            PublicKeyMaterial::Ed25519 { key } => key,
            PublicKeyMaterial::Rsa { n, .. } => n,
        };
        let prefix: String = bytes.iter().take(12).map(|b| format!("{b:02x}")).collect();
        write!(f, "CosePublicKey({:?}, {prefix}…)", self.algorithm())
    }
}

/// Build an RS256 key under the shared policy (see [`RSA_MIN_BITS`]).
fn rsa_key(n: &[u8], e: &[u8]) -> Result<KeyInner, CoseError> {
    // Leading zeros do not change the number; dropping them gives `ring` the minimal form it
    // requires and lets the bit length be read off the first byte.
    let n = strip_leading_zeros(n);
    let e = strip_leading_zeros(e);
    let bits = match n.first() {
        Some(&top) => n.len().saturating_mul(8) - top.leading_zeros() as usize,
        None => 0,
    };
    if bits < RSA_MIN_BITS {
        return Err(CoseError::RsaModulusTooSmall { bits });
    }
    if bits > RSA_MAX_BITS {
        return Err(CoseError::RsaModulusTooLarge { bits });
    }
    if n.last().is_none_or(|b| b & 1 == 0) {
        return Err(CoseError::RsaModulusEven);
    }
    // `ring` allows odd exponents in [3, 2^33 - 1]; the `rsa` crate allows [2, 2^33 - 1]. Take the
    // intersection so both backends accept the same keys.
    let exponent = if e.len() <= 5 {
        e.iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b))
    } else {
        u64::MAX
    };
    if !(3..(1 << 33)).contains(&exponent) || exponent & 1 == 0 {
        return Err(CoseError::RsaExponentInvalid);
    }
    let key = rsa::RsaPublicKey::new_with_max_size(
        rsa::BigUint::from_bytes_be(n),
        rsa::BigUint::from_bytes_be(e),
        RSA_MAX_BITS,
    )
    .map_err(|_| CoseError::InvalidPoint { alg: ALG_RS256 })?;
    Ok(KeyInner::Rs256 {
        n: n.into(),
        e: e.into(),
        key: Box::new(key),
    })
}

fn strip_leading_zeros(bytes: &[u8]) -> &[u8] {
    let start = bytes.iter().position(|&b| b != 0).unwrap_or(bytes.len());
    bytes.get(start..).unwrap_or_default()
}

/// The COSE_Key parameters we look at, before they are interpreted for a key type.
struct Params<'a> {
    kty: Option<i64>,
    alg: Option<i64>,
    /// Labels -1, -2, -3, whose meaning depends on `kty`.
    by_kty: [Option<Value<'a>>; 3],
}

impl<'a> Params<'a> {
    fn read(bytes: &'a [u8]) -> Result<Self, CoseError> {
        let mut reader = cbor::Reader::new(bytes);
        let mut params = Params {
            kty: None,
            alg: None,
            by_kty: [None; 3],
        };
        for _ in 0..reader.map_len()? {
            let label = reader.value(1)?;
            let value = reader.value(1)?;
            // Other labels (kid, key_ops, base IV, text labels) do not affect verification.
            let Value::Int(label) = label else { continue };
            let slot = match label {
                LABEL_KTY => {
                    set_int(&mut params.kty, label, value)?;
                    continue;
                }
                LABEL_ALG => {
                    set_int(&mut params.alg, label, value)?;
                    continue;
                }
                LABEL_M1 => &mut params.by_kty[0],
                LABEL_M2 => &mut params.by_kty[1],
                LABEL_M3 => &mut params.by_kty[2],
                _ => continue,
            };
            if slot.replace(value).is_some() {
                return Err(CoseError::DuplicateParameter { label });
            }
        }
        reader.finish()?;
        Ok(params)
    }

    fn get(&self, label: i64) -> Option<Value<'a>> {
        let index = usize::try_from(-1 - label).ok()?;
        self.by_kty.get(index).copied().flatten()
    }

    fn expect_kty(&self, alg: i64, kty: i64, expected: i64) -> Result<(), CoseError> {
        if kty == expected {
            Ok(())
        } else {
            Err(CoseError::KeyTypeMismatch { alg, kty })
        }
    }

    fn expect_crv(&self, alg: i64, expected: i64) -> Result<(), CoseError> {
        match self.get(LABEL_M1) {
            Some(Value::Int(crv)) if crv == expected => Ok(()),
            Some(Value::Int(crv)) => Err(CoseError::UnsupportedAlgorithm {
                alg,
                crv: Some(crv),
            }),
            Some(_) => Err(CoseError::WrongParameterType { label: LABEL_M1 }),
            None => Err(CoseError::MissingParameter { label: LABEL_M1 }),
        }
    }

    fn bytes(&self, label: i64) -> Result<&'a [u8], CoseError> {
        match self.get(label) {
            Some(Value::Bytes(bytes)) => Ok(bytes),
            Some(_) => Err(CoseError::WrongParameterType { label }),
            None => Err(CoseError::MissingParameter { label }),
        }
    }

    fn fixed_bytes<const N: usize>(&self, label: i64) -> Result<[u8; N], CoseError> {
        let bytes = self.bytes(label)?;
        bytes.try_into().map_err(|_| CoseError::ParameterLength {
            label,
            expected: N,
            got: bytes.len(),
        })
    }

    /// The SEC1 uncompressed point from `x` and `y`. A boolean `y` (point compression) is refused
    /// as the wrong type: WebAuthn keys carry both coordinates.
    fn ec2_point<const C: usize, const S: usize>(&self) -> Result<[u8; S], CoseError> {
        let x: [u8; C] = self.fixed_bytes(LABEL_M2)?;
        let y: [u8; C] = self.fixed_bytes(LABEL_M3)?;
        let mut sec1 = [0u8; S];
        let (tag, coords) = sec1.split_at_mut(1);
        tag.fill(0x04);
        for (dst, src) in coords.iter_mut().zip(x.iter().chain(y.iter())) {
            *dst = *src;
        }
        Ok(sec1)
    }
}

fn set_int(slot: &mut Option<i64>, label: i64, value: Value<'_>) -> Result<(), CoseError> {
    let Value::Int(v) = value else {
        return Err(CoseError::WrongParameterType { label });
    };
    if slot.replace(v).is_some() {
        return Err(CoseError::DuplicateParameter { label });
    }
    Ok(())
}

/// Why a COSE_Key was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CoseError {
    /// Not the strict CBOR we accept, or not a single map.
    #[error("COSE_Key is not valid CBOR: {0}")]
    Cbor(#[from] CborError),
    /// The algorithm is not one this verifier implements (ES512, PS256, Ed448, ...), or a
    /// supported algorithm on a curve we do not pair it with (EdDSA on Ed448, ES256 on P-384).
    #[error("unsupported COSE algorithm {alg} (curve {crv:?})")]
    UnsupportedAlgorithm {
        /// The COSE algorithm identifier.
        alg: i64,
        /// The COSE curve, when the algorithm is supported but its curve is not.
        crv: Option<i64>,
    },
    /// The key type does not match the algorithm (e.g. an RSA key with alg ES256).
    #[error("key type {kty} does not match COSE algorithm {alg}")]
    KeyTypeMismatch {
        /// The COSE algorithm identifier.
        alg: i64,
        /// The COSE key type found.
        kty: i64,
    },
    /// A parameter the key type requires is absent.
    #[error("COSE_Key parameter {label} is missing")]
    MissingParameter {
        /// The COSE label.
        label: i64,
    },
    /// A parameter has the wrong CBOR type.
    #[error("COSE_Key parameter {label} has the wrong type")]
    WrongParameterType {
        /// The COSE label.
        label: i64,
    },
    /// A parameter appears twice.
    #[error("COSE_Key parameter {label} appears twice")]
    DuplicateParameter {
        /// The COSE label.
        label: i64,
    },
    /// A coordinate or key byte string has the wrong length for the curve.
    #[error("COSE_Key parameter {label} is {got} bytes, expected {expected}")]
    ParameterLength {
        /// The COSE label.
        label: i64,
        /// The curve's length.
        expected: usize,
        /// The length found.
        got: usize,
    },
    /// The coordinates are not a valid public key for the curve (off the curve, identity, small
    /// order or non-canonical), or the RSA components were refused.
    #[error("COSE_Key for algorithm {alg} is not a valid public key")]
    InvalidPoint {
        /// The COSE algorithm identifier.
        alg: i64,
    },
    /// An RSA modulus below [`RSA_MIN_BITS`].
    #[error("RSA modulus of {bits} bits is below the {RSA_MIN_BITS}-bit minimum")]
    RsaModulusTooSmall {
        /// The modulus length.
        bits: usize,
    },
    /// An RSA modulus above [`RSA_MAX_BITS`].
    #[error("RSA modulus of {bits} bits is above the {RSA_MAX_BITS}-bit maximum")]
    RsaModulusTooLarge {
        /// The modulus length.
        bits: usize,
    },
    /// An even RSA modulus (not a product of two odd primes).
    #[error("RSA modulus is even")]
    RsaModulusEven,
    /// An RSA exponent outside the odd values in [3, 2^33 - 1].
    #[error("RSA public exponent must be odd and in [3, 2^33 - 1]")]
    RsaExponentInvalid,
}

impl CoseError {
    /// The wire reason code: keys we decline by policy are `unsupported_algorithm`, broken keys
    /// are `evidence_malformed`.
    pub fn reason_code(&self) -> ReasonCode {
        match self {
            Self::UnsupportedAlgorithm { .. }
            | Self::RsaModulusTooSmall { .. }
            | Self::RsaModulusTooLarge { .. } => ReasonCode::UnsupportedAlgorithm,
            _ => ReasonCode::EvidenceMalformed,
        }
    }
}
