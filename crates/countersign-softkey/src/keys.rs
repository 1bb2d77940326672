//! Credential keys: deterministic derivation from seeds, public-key encodings and raw signing.

use std::fmt;

// Two `Signer` traits: ed25519-dalek and rsa implement `signature` 2's, p256 and p384 0.14
// `signature` 3's.
use ed25519_dalek::Signer as _;
use p256::ecdsa::signature::Signer as _;
use rsa::pkcs8::DecodePrivateKey as _;
use rsa::traits::PublicKeyParts as _;
use sha2::{Digest as _, Sha256, Sha384};

use crate::cbor::Value;
use crate::der::{self, oids};
use crate::error::Error;
use crate::fixtures::{self, FIXTURE_AAGUID};

/// Default credential id length in bytes.
pub const DEFAULT_CREDENTIAL_ID_LEN: usize = 32;

/// Largest credential id WebAuthn allows (L3 §5.8.3: at most 1023 bytes).
const MAX_CREDENTIAL_ID_LEN: usize = 1023;

/// A COSE signature algorithm a credential may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Alg {
    /// ECDSA on P-256 with SHA-256, COSE -7.
    Es256,
    /// ECDSA on P-384 with SHA-384, COSE -35.
    Es384,
    /// Ed25519, COSE -8.
    EdDsa,
    /// RSASSA-PKCS1-v1_5 with SHA-256, COSE -257.
    Rs256,
}

impl Alg {
    /// The COSE algorithm identifier.
    pub fn cose_alg(self) -> i64 {
        match self {
            Self::Es256 => -7,
            Self::Es384 => -35,
            Self::EdDsa => -8,
            Self::Rs256 => -257,
        }
    }

    /// The JOSE/COSE name: `ES256`, `ES384`, `EdDSA`, `RS256`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Es256 => "ES256",
            Self::Es384 => "ES384",
            Self::EdDsa => "EdDSA",
            Self::Rs256 => "RS256",
        }
    }

    /// Parses a name as written by [`Alg::name`].
    pub fn from_name(name: &str) -> Option<Self> {
        [Self::Es256, Self::Es384, Self::EdDsa, Self::Rs256]
            .into_iter()
            .find(|a| a.name() == name)
    }

    /// True for the two ECDSA algorithms (whose signatures are DER-encoded).
    pub fn is_ecdsa(self) -> bool {
        matches!(self, Self::Es256 | Self::Es384)
    }
}

/// A public key as the pure-Rust crates represent it, so tests can verify signatures with those
/// crates directly rather than through this crate.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PublicKey {
    /// P-256 key.
    Es256(p256::ecdsa::VerifyingKey),
    /// P-384 key.
    Es384(p384::ecdsa::VerifyingKey),
    /// Ed25519 key.
    EdDsa(ed25519_dalek::VerifyingKey),
    /// RSA key.
    Rs256(rsa::RsaPublicKey),
}

#[derive(Clone)]
enum Secret {
    Es256(p256::ecdsa::SigningKey),
    Es384(p384::ecdsa::SigningKey),
    EdDsa(ed25519_dalek::SigningKey),
    Rs256(Box<rsa::pkcs1v15::SigningKey<Sha256>>),
}

/// A software credential: a private key, its credential id and the authenticator's AAGUID.
///
/// Everything it produces is a pure function of its inputs: ECDSA uses RFC 6979 nonces, Ed25519
/// and RSASSA-PKCS1-v1_5 are deterministic by construction.
#[derive(Clone)]
pub struct SoftKey {
    name: Option<String>,
    alg: Alg,
    secret: Secret,
    seed: [u8; 32],
    credential_id: Vec<u8>,
    aaguid: [u8; 16],
}

impl fmt::Debug for SoftKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The secret is test-only, but printing it would still be noise in test failures.
        f.debug_struct("SoftKey")
            .field("name", &self.name)
            .field("alg", &self.alg)
            .field("credential_id", &crate::b64url(&self.credential_id))
            .finish_non_exhaustive()
    }
}

impl SoftKey {
    /// A key from the built-in fixture set (`fixtures/keys/seeds.json`), e.g. `"alice-es256"`.
    pub fn fixture(name: &str) -> Result<Self, Error> {
        let entry = fixtures::entry(name)?;
        let mut key = match entry.alg {
            Alg::Rs256 => {
                let der = fixtures::rsa_pkcs8(name, entry.pkcs8.as_deref())?;
                Self::from_rsa_pkcs8_der(der, entry.seed)?
            }
            alg => Self::from_seed(alg, entry.seed)?,
        };
        key.name = Some(name.to_owned());
        Ok(key)
    }

    /// The names of all built-in fixture keys, sorted.
    pub fn fixture_names() -> Vec<String> {
        fixtures::names()
    }

    /// Derives an ES256, ES384 or EdDSA key from a 32-byte seed (see `docs/spec/softkey.md`).
    /// RS256 keys cannot be derived portably; use [`SoftKey::from_rsa_pkcs8_der`].
    pub fn from_seed(alg: Alg, seed: [u8; 32]) -> Result<Self, Error> {
        let secret = match alg {
            Alg::Es256 => Secret::Es256(derive_scalar::<Sha256, _>(&seed, b"es256", |b| {
                p256::ecdsa::SigningKey::from_slice(b).ok()
            })?),
            Alg::Es384 => Secret::Es384(derive_scalar::<Sha384, _>(&seed, b"es384", |b| {
                p384::ecdsa::SigningKey::from_slice(b).ok()
            })?),
            Alg::EdDsa => {
                let bytes: [u8; 32] = Sha256::new()
                    .chain_update(seed)
                    .chain_update(LABEL_PREFIX)
                    .chain_update(b"eddsa")
                    .finalize()
                    .into();
                Secret::EdDsa(ed25519_dalek::SigningKey::from_bytes(&bytes))
            }
            Alg::Rs256 => return Err(Error::NoSeedDerivation { alg }),
        };
        Ok(Self::assemble(alg, secret, seed))
    }

    /// An RS256 key from a PKCS#8 DER private key; `seed` only feeds the credential id.
    pub fn from_rsa_pkcs8_der(der: &[u8], seed: [u8; 32]) -> Result<Self, Error> {
        let key = rsa::RsaPrivateKey::from_pkcs8_der(der).map_err(|e| Error::BadKeyMaterial {
            reason: e.to_string(),
        })?;
        let secret = Secret::Rs256(Box::new(rsa::pkcs1v15::SigningKey::new(key)));
        Ok(Self::assemble(Alg::Rs256, secret, seed))
    }

    fn assemble(alg: Alg, secret: Secret, seed: [u8; 32]) -> Self {
        Self {
            name: None,
            alg,
            secret,
            seed,
            credential_id: derive_credential_id(&seed, DEFAULT_CREDENTIAL_ID_LEN),
            aaguid: FIXTURE_AAGUID,
        }
    }

    /// Re-derives the credential id with another length (1..=1023 bytes).
    pub fn with_credential_id_len(mut self, len: usize) -> Result<Self, Error> {
        if len == 0 || len > MAX_CREDENTIAL_ID_LEN {
            return Err(Error::CredentialIdLength { len });
        }
        self.credential_id = derive_credential_id(&self.seed, len);
        Ok(self)
    }

    /// Replaces the credential id with arbitrary bytes (no length check: for negative cases).
    pub fn with_credential_id(mut self, id: Vec<u8>) -> Self {
        self.credential_id = id;
        self
    }

    /// Replaces the AAGUID written into attested credential data (default: [`FIXTURE_AAGUID`]).
    pub fn with_aaguid(mut self, aaguid: [u8; 16]) -> Self {
        self.aaguid = aaguid;
        self
    }

    /// The fixture name, when the key came from [`SoftKey::fixture`].
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// The signature algorithm.
    pub fn alg(&self) -> Alg {
        self.alg
    }

    /// The credential id.
    pub fn credential_id(&self) -> &[u8] {
        &self.credential_id
    }

    /// The AAGUID.
    pub fn aaguid(&self) -> [u8; 16] {
        self.aaguid
    }

    /// The public key, for verifying with the pure-Rust crates.
    pub fn public_key(&self) -> PublicKey {
        match &self.secret {
            Secret::Es256(k) => PublicKey::Es256(*k.verifying_key()),
            Secret::Es384(k) => PublicKey::Es384(*k.verifying_key()),
            Secret::EdDsa(k) => PublicKey::EdDsa(k.verifying_key()),
            Secret::Rs256(k) => PublicKey::Rs256(k.as_ref().as_ref().to_public_key()),
        }
    }

    /// The public key as a canonical CTAP2 COSE_Key (RFC 9053 / WebAuthn §5.8.5).
    pub fn cose_public_key(&self) -> Vec<u8> {
        let alg = Value::from(self.alg.cose_alg());
        let map = match self.public_key() {
            PublicKey::Es256(k) => ec2_cose(alg, 1, k.to_sec1_point(false).as_bytes()),
            PublicKey::Es384(k) => ec2_cose(alg, 2, k.to_sec1_point(false).as_bytes()),
            PublicKey::EdDsa(k) => vec![
                (Value::from(1), Value::from(1)),
                (Value::from(3), alg),
                (Value::from(-1), Value::from(6)),
                (Value::from(-2), Value::bytes(k.to_bytes().to_vec())),
            ],
            PublicKey::Rs256(k) => vec![
                (Value::from(1), Value::from(3)),
                (Value::from(3), alg),
                (Value::from(-1), Value::bytes(k.n().to_bytes_be())),
                (Value::from(-2), Value::bytes(k.e().to_bytes_be())),
            ],
        };
        Value::Map(map).encode()
    }

    /// The public key as a DER SubjectPublicKeyInfo (what `getPublicKey()` returns in a browser).
    pub fn public_key_spki_der(&self) -> Vec<u8> {
        match self.public_key() {
            PublicKey::Es256(k) => ec_spki(oids::PRIME256V1, k.to_sec1_point(false).as_bytes()),
            PublicKey::Es384(k) => ec_spki(oids::SECP384R1, k.to_sec1_point(false).as_bytes()),
            PublicKey::EdDsa(k) => der::seq(&[
                &der::seq(&[&der::oid(oids::ED25519)]),
                &der::bit_string(k.as_bytes()),
            ]),
            PublicKey::Rs256(k) => {
                let rsa_key = der::seq(&[
                    &der::uint(&k.n().to_bytes_be()),
                    &der::uint(&k.e().to_bytes_be()),
                ]);
                der::seq(&[
                    &der::seq(&[&der::oid(oids::RSA_ENCRYPTION), &[der::NULL, 0]]),
                    &der::bit_string(&rsa_key),
                ])
            }
        }
    }

    /// Signs `message` and returns the signature as WebAuthn carries it: ASN.1 DER for ECDSA,
    /// 64 raw bytes for Ed25519, a modulus-sized octet string for RSA.
    pub fn sign(&self, message: &[u8]) -> Result<Vec<u8>, Error> {
        let signing = |e: &dyn fmt::Display| Error::Signing {
            reason: e.to_string(),
        };
        match &self.secret {
            Secret::Es256(k) => {
                let sig: p256::ecdsa::Signature = k.try_sign(message).map_err(|e| signing(&e))?;
                Ok(sig.to_der().as_bytes().to_vec())
            }
            Secret::Es384(k) => {
                let sig: p384::ecdsa::Signature = k.try_sign(message).map_err(|e| signing(&e))?;
                Ok(sig.to_der().as_bytes().to_vec())
            }
            Secret::EdDsa(k) => Ok(k.try_sign(message).map_err(|e| signing(&e))?.to_vec()),
            Secret::Rs256(k) => {
                let sig = k.try_sign(message).map_err(|e| signing(&e))?;
                Ok(rsa::signature::SignatureEncoding::to_vec(&sig))
            }
        }
    }

    /// Signs `authenticator_data || SHA-256(client_data_json)`, the WebAuthn assertion message,
    /// for callers that build both halves themselves.
    pub fn sign_client_data(
        &self,
        authenticator_data: &[u8],
        client_data_json: &[u8],
    ) -> Result<Vec<u8>, Error> {
        self.sign(&signed_message(authenticator_data, client_data_json))
    }

    /// Attested credential data (WebAuthn §6.5.2): AAGUID || idLen (u16 BE) || id || COSE key.
    pub fn attested_credential_data(&self) -> Vec<u8> {
        self.attested_credential_data_with(&self.cose_public_key())
    }

    pub(crate) fn attested_credential_data_with(&self, cose_key: &[u8]) -> Vec<u8> {
        // Ids longer than u16 only arise from `with_credential_id`; the length field saturates
        // rather than panicking, which itself makes a (deliberately) malformed structure.
        let id_len = u16::try_from(self.credential_id.len()).unwrap_or(u16::MAX);
        [
            &self.aaguid[..],
            &id_len.to_be_bytes(),
            &self.credential_id,
            cose_key,
        ]
        .concat()
    }
}

/// `authenticator_data || SHA-256(client_data_json)`.
pub fn signed_message(authenticator_data: &[u8], client_data_json: &[u8]) -> Vec<u8> {
    [authenticator_data, &Sha256::digest(client_data_json)].concat()
}

/// Domain-separation prefix for every derivation in this crate.
const LABEL_PREFIX: &[u8] = b"countersign-softkey/v1/";

/// `H(seed || "countersign-softkey/v1/" || label || counter)` until `accept` takes it: the
/// counter byte starts at 0 and only moves on for the rare out-of-range scalar (zero or ≥ n).
fn derive_scalar<H: sha2::Digest, K>(
    seed: &[u8; 32],
    label: &[u8],
    accept: impl Fn(&[u8]) -> Option<K>,
) -> Result<K, Error> {
    for counter in 0..=u8::MAX {
        let candidate = H::new()
            .chain_update(seed)
            .chain_update(LABEL_PREFIX)
            .chain_update(label)
            .chain_update([counter])
            .finalize();
        if let Some(key) = accept(&candidate) {
            return Ok(key);
        }
    }
    // 256 consecutive out-of-range hashes do not happen for real curves.
    Err(Error::BadKeyMaterial {
        reason: "no valid scalar in 256 attempts".into(),
    })
}

/// Counter-mode SHA-256 over the seed, truncated to `len` bytes.
fn derive_credential_id(seed: &[u8; 32], len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 32);
    let mut block: u32 = 0;
    while out.len() < len {
        out.extend_from_slice(
            &Sha256::new()
                .chain_update(seed)
                .chain_update(LABEL_PREFIX)
                .chain_update(b"credential-id")
                .chain_update(block.to_be_bytes())
                .finalize(),
        );
        block += 1;
    }
    out.truncate(len);
    out
}

/// EC2 COSE_Key entries from an uncompressed SEC1 point `04 || x || y`.
fn ec2_cose(alg: Value, crv: i64, sec1: &[u8]) -> Vec<(Value, Value)> {
    let coords = sec1.get(1..).unwrap_or_default();
    let (x, y) = coords.split_at(coords.len() / 2);
    vec![
        (Value::from(1), Value::from(2)),
        (Value::from(3), alg),
        (Value::from(-1), Value::from(crv)),
        (Value::from(-2), Value::bytes(x.to_vec())),
        (Value::from(-3), Value::bytes(y.to_vec())),
    ]
}

fn ec_spki(curve: &[u64], point: &[u8]) -> Vec<u8> {
    der::seq(&[
        &der::seq(&[&der::oid(oids::EC_PUBLIC_KEY), &der::oid(curve)]),
        &der::bit_string(point),
    ])
}
