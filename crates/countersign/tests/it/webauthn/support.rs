//! Test helpers: software keys that sign like authenticators, a tiny CBOR writer for COSE keys,
//! and a runner that verifies on every backend and insists they agree.

use countersign::webauthn::{
    Assertion, AssertionError, AssertionExpectations, CosePublicKey, VerifiedAssertion,
    all_backends, verify_assertion,
};
// p256/p384 implement `signature` 3's `Signer`, ed25519-dalek `signature` 2's.
use ed25519_dalek::Signer as _;
use p256::ecdsa::signature::Signer as _;
use rand_chacha::ChaCha20Rng;
use rand_chacha::rand_core::SeedableRng;
use rsa::traits::PublicKeyParts as _;
use sha2::{Digest, Sha256};
use std::sync::OnceLock;

pub(crate) const RP_ID: &str = "example.org";
pub(crate) const ORIGIN: &str = "https://example.org";
pub(crate) const CHALLENGE: [u8; 64] = [0x5a; 64];

/// A CBOR value, encoded canonically enough for COSE keys.
#[derive(Debug, Clone)]
pub(crate) enum Cbor {
    Int(i64),
    Bytes(Vec<u8>),
    Text(&'static str),
    Bool(bool),
    Array(Vec<Cbor>),
    Map(Vec<(Cbor, Cbor)>),
}

fn head(out: &mut Vec<u8>, major: u8, arg: u64) {
    let m = major << 5;
    match arg {
        0..=23 => out.push(m | arg as u8),
        24..=0xff => out.extend_from_slice(&[m | 24, arg as u8]),
        0x100..=0xffff => {
            out.push(m | 25);
            out.extend_from_slice(&(arg as u16).to_be_bytes());
        }
        0x1_0000..=0xffff_ffff => {
            out.push(m | 26);
            out.extend_from_slice(&(arg as u32).to_be_bytes());
        }
        _ => {
            out.push(m | 27);
            out.extend_from_slice(&arg.to_be_bytes());
        }
    }
}

impl Cbor {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.write(&mut out);
        out
    }

    fn write(&self, out: &mut Vec<u8>) {
        match self {
            Cbor::Int(v) if *v >= 0 => head(out, 0, *v as u64),
            Cbor::Int(v) => head(out, 1, (-1 - *v) as u64),
            Cbor::Bytes(b) => {
                head(out, 2, b.len() as u64);
                out.extend_from_slice(b);
            }
            Cbor::Text(t) => {
                head(out, 3, t.len() as u64);
                out.extend_from_slice(t.as_bytes());
            }
            Cbor::Bool(b) => out.push(if *b { 0xf5 } else { 0xf4 }),
            Cbor::Array(items) => {
                head(out, 4, items.len() as u64);
                items.iter().for_each(|i| i.write(out));
            }
            Cbor::Map(entries) => {
                head(out, 5, entries.len() as u64);
                for (k, v) in entries {
                    k.write(out);
                    v.write(out);
                }
            }
        }
    }
}

pub(crate) fn ec2_params(alg: i64, crv: i64, x: &[u8], y: &[u8]) -> Vec<(Cbor, Cbor)> {
    vec![
        (Cbor::Int(1), Cbor::Int(2)),
        (Cbor::Int(3), Cbor::Int(alg)),
        (Cbor::Int(-1), Cbor::Int(crv)),
        (Cbor::Int(-2), Cbor::Bytes(x.to_vec())),
        (Cbor::Int(-3), Cbor::Bytes(y.to_vec())),
    ]
}

pub(crate) fn okp_params(alg: i64, crv: i64, x: &[u8]) -> Vec<(Cbor, Cbor)> {
    vec![
        (Cbor::Int(1), Cbor::Int(1)),
        (Cbor::Int(3), Cbor::Int(alg)),
        (Cbor::Int(-1), Cbor::Int(crv)),
        (Cbor::Int(-2), Cbor::Bytes(x.to_vec())),
    ]
}

pub(crate) fn rsa_params(n: &[u8], e: &[u8]) -> Vec<(Cbor, Cbor)> {
    vec![
        (Cbor::Int(1), Cbor::Int(3)),
        (Cbor::Int(3), Cbor::Int(-257)),
        (Cbor::Int(-1), Cbor::Bytes(n.to_vec())),
        (Cbor::Int(-2), Cbor::Bytes(e.to_vec())),
    ]
}

/// A software credential of one of the supported algorithms.
#[derive(Clone)]
pub(crate) enum TestKey {
    P256(p256::ecdsa::SigningKey),
    P384(p384::ecdsa::SigningKey),
    Ed25519(ed25519_dalek::SigningKey),
    Rsa(Box<rsa::RsaPrivateKey>),
}

impl TestKey {
    pub(crate) fn p256(seed: u8) -> Self {
        Self::P256(p256::ecdsa::SigningKey::from_slice(&[seed.max(1); 32]).unwrap())
    }
    pub(crate) fn p384(seed: u8) -> Self {
        Self::P384(p384::ecdsa::SigningKey::from_slice(&[seed.max(1); 48]).unwrap())
    }
    pub(crate) fn ed25519(seed: u8) -> Self {
        Self::Ed25519(ed25519_dalek::SigningKey::from_bytes(&[seed; 32]))
    }
    /// One 2048-bit RSA key per test run (key generation is the slow part).
    pub(crate) fn rsa() -> Self {
        static KEY: OnceLock<rsa::RsaPrivateKey> = OnceLock::new();
        let key = KEY.get_or_init(|| {
            let mut rng = ChaCha20Rng::seed_from_u64(2048);
            rsa::RsaPrivateKey::new(&mut rng, 2048).unwrap()
        });
        Self::Rsa(Box::new(key.clone()))
    }

    /// One key of every supported algorithm.
    pub(crate) fn all() -> Vec<(&'static str, TestKey)> {
        vec![
            ("ES256", Self::p256(1)),
            ("ES384", Self::p384(2)),
            ("EdDSA", Self::ed25519(3)),
            ("RS256", Self::rsa()),
        ]
    }

    pub(crate) fn cose_params(&self) -> Vec<(Cbor, Cbor)> {
        match self {
            TestKey::P256(k) => {
                let p = k.verifying_key().to_sec1_point(false);
                ec2_params(-7, 1, p.x().unwrap(), p.y().unwrap())
            }
            TestKey::P384(k) => {
                let p = k.verifying_key().to_sec1_point(false);
                ec2_params(-35, 2, p.x().unwrap(), p.y().unwrap())
            }
            TestKey::Ed25519(k) => okp_params(-8, 6, k.verifying_key().as_bytes()),
            TestKey::Rsa(k) => rsa_params(&k.n().to_bytes_be(), &k.e().to_bytes_be()),
        }
    }

    pub(crate) fn cose(&self) -> Vec<u8> {
        Cbor::Map(self.cose_params()).encode()
    }

    pub(crate) fn public(&self) -> CosePublicKey {
        CosePublicKey::from_cose(&self.cose()).unwrap()
    }

    /// Sign as an authenticator does (DER for ECDSA).
    pub(crate) fn sign(&self, message: &[u8]) -> Vec<u8> {
        match self {
            TestKey::P256(k) => {
                let sig: p256::ecdsa::Signature = k.sign(message);
                sig.to_der().as_bytes().to_vec()
            }
            TestKey::P384(k) => {
                let sig: p384::ecdsa::Signature = k.sign(message);
                sig.to_der().as_bytes().to_vec()
            }
            TestKey::Ed25519(k) => k.sign(message).to_bytes().to_vec(),
            TestKey::Rsa(k) => k
                .sign(rsa::Pkcs1v15Sign::new::<Sha256>(), &Sha256::digest(message))
                .unwrap(),
        }
    }
}

/// The byte strings of one assertion.
#[derive(Debug, Clone)]
pub(crate) struct Signed {
    pub(crate) cdj: Vec<u8>,
    pub(crate) auth_data: Vec<u8>,
    pub(crate) sig: Vec<u8>,
}

impl Signed {
    pub(crate) fn assertion(&self) -> Assertion<'_> {
        Assertion {
            client_data_json: &self.cdj,
            authenticator_data: &self.auth_data,
            signature: &self.sig,
        }
    }
}

pub(crate) fn b64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// clientDataJSON as Chrome writes it, with optional extra members appended.
pub(crate) fn client_data(challenge: &[u8], origin: &str, extra: &str) -> Vec<u8> {
    format!(
        r#"{{"type":"webauthn.get","challenge":"{}","origin":"{origin}","crossOrigin":false{extra}}}"#,
        b64(challenge)
    )
    .into_bytes()
}

/// rpIdHash || flags || signCount, plus `tail` (attested data, extensions).
pub(crate) fn auth_data(rp_id: &str, flags: u8, count: u32, tail: &[u8]) -> Vec<u8> {
    let mut out = Sha256::digest(rp_id.as_bytes()).to_vec();
    out.push(flags);
    out.extend_from_slice(&count.to_be_bytes());
    out.extend_from_slice(tail);
    out
}

/// Sign `auth_data || SHA-256(cdj)`.
pub(crate) fn sign(key: &TestKey, cdj: Vec<u8>, auth_data: Vec<u8>) -> Signed {
    let mut message = auth_data.clone();
    message.extend_from_slice(&Sha256::digest(&cdj));
    let sig = key.sign(&message);
    Signed {
        cdj,
        auth_data,
        sig,
    }
}

/// The usual good assertion: UP|UV, counter 1, Chrome-style client data.
pub(crate) fn good(key: &TestKey) -> Signed {
    sign(
        key,
        client_data(&CHALLENGE, ORIGIN, ""),
        auth_data(RP_ID, 0x05, 1, &[]),
    )
}

pub(crate) fn origins() -> Vec<String> {
    vec![ORIGIN.to_string()]
}

pub(crate) fn expect(origins: &[String]) -> AssertionExpectations<'_> {
    AssertionExpectations::new(&CHALLENGE, RP_ID, origins)
}

/// Verify on every backend; fail the test unless they agree; return the common result with the
/// backend name erased from errors.
pub(crate) fn verify_all(
    key: &CosePublicKey,
    signed: &Signed,
    expect: &AssertionExpectations<'_>,
) -> Result<VerifiedAssertion, AssertionError> {
    let mut results = all_backends()
        .into_iter()
        .map(|backend| {
            let result = verify_assertion(key, &signed.assertion(), expect, backend);
            (backend.name(), result)
        })
        .collect::<Vec<_>>();
    let (first_name, first) = results.remove(0);
    for (name, result) in &results {
        assert_eq!(
            summary(result),
            summary(&first),
            "backends {first_name} and {name} disagree on {signed:?}"
        );
    }
    first
}

/// A backend-independent rendering of a result.
pub(crate) fn summary(result: &Result<VerifiedAssertion, AssertionError>) -> String {
    match result {
        Ok(v) => format!("ok {:?} {} {:?}", v.flags, v.sign_count, v.client_data),
        Err(e) => {
            let text = format!("{e:?}");
            text.replace("\"ring\"", "\"backend\"")
                .replace("\"rustcrypto\"", "\"backend\"")
        }
    }
}

pub(crate) fn reason(result: Result<VerifiedAssertion, AssertionError>) -> countersign::ReasonCode {
    match result {
        Ok(v) => panic!("expected a refusal, got {v:?}"),
        Err(e) => e.reason_code(),
    }
}

/// Note, once per run, which backends the agreement tests cover.
pub(crate) fn note_backends() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        let names: Vec<_> = all_backends().iter().map(|b| b.name()).collect();
        if names.len() < 2 {
            eprintln!(
                "note: only the {names:?} backend is compiled in; run with `--features ring` \
                 to check backend agreement"
            );
        }
    });
}
