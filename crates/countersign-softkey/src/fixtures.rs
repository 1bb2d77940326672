//! The built-in fixture set, compiled in so tests need no path plumbing.
//!
//! `fixtures/keys/seeds.json` names every key; RS256 entries additionally point at a committed
//! PKCS#8 file (RSA key generation is not portable across `rsa` versions, so those keys are data).

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::error::Error;
use crate::keys::Alg;

/// The AAGUID of the soft authenticator, bound into the fixture attestation certificate:
/// the ASCII bytes of `countersign-sk01`, readable in any hex dump.
pub const FIXTURE_AAGUID: [u8; 16] = *b"countersign-sk01";

const SEEDS_JSON: &str = include_str!("../../../fixtures/keys/seeds.json");

/// RS256 fixture keys by file name; a unit test checks this table against `seeds.json`.
const RSA_KEYS: &[(&str, &[u8])] = &[
    (
        "alice-rs256.pk8.der",
        include_bytes!("../../../fixtures/keys/alice-rs256.pk8.der"),
    ),
    (
        "bob-rs256.pk8.der",
        include_bytes!("../../../fixtures/keys/bob-rs256.pk8.der"),
    ),
];

/// DER of the fixture root CA certificate.
pub(crate) const ROOT_CERT_DER: &[u8] = include_bytes!("../../../fixtures/ca/root.der");
/// DER of the fixture packed-attestation certificate (issued by the root).
pub(crate) const ATTESTATION_CERT_DER: &[u8] =
    include_bytes!("../../../fixtures/ca/attestation.der");

/// Fixture name of the attestation signing key.
pub(crate) const ATTESTATION_KEY: &str = "attestation-es256";
/// Fixture name of the root CA key.
pub(crate) const ROOT_KEY: &str = "ca-root-es256";

#[derive(Deserialize)]
struct SeedsFile {
    keys: BTreeMap<String, RawEntry>,
}

#[derive(Deserialize)]
struct RawEntry {
    alg: String,
    seed: String,
    #[serde(default)]
    pkcs8: Option<String>,
}

pub(crate) struct Entry {
    pub(crate) alg: Alg,
    pub(crate) seed: [u8; 32],
    pub(crate) pkcs8: Option<String>,
}

fn parse() -> Result<SeedsFile, Error> {
    serde_json::from_str(SEEDS_JSON).map_err(|e| Error::BadKeyMaterial {
        reason: format!("seeds.json: {e}"),
    })
}

pub(crate) fn entry(name: &str) -> Result<Entry, Error> {
    let file = parse()?;
    let raw = file.keys.get(name).ok_or_else(|| Error::UnknownFixture {
        name: name.to_owned(),
    })?;
    let bad = |reason: String| Error::BadKeyMaterial {
        reason: format!("seeds.json entry {name:?}: {reason}"),
    };
    let alg = Alg::from_name(&raw.alg).ok_or_else(|| bad(format!("unknown alg {:?}", raw.alg)))?;
    let seed = decode_seed(&raw.seed).ok_or_else(|| bad("seed is not 64 hex digits".into()))?;
    Ok(Entry {
        alg,
        seed,
        pkcs8: raw.pkcs8.clone(),
    })
}

pub(crate) fn names() -> Vec<String> {
    parse()
        .map(|f| f.keys.into_keys().collect())
        .unwrap_or_default()
}

/// The compiled-in PKCS#8 file that `seeds.json` names for fixture `name`.
pub(crate) fn rsa_pkcs8(name: &str, file: Option<&str>) -> Result<&'static [u8], Error> {
    RSA_KEYS
        .iter()
        .find(|(f, _)| Some(*f) == file)
        .map(|(_, der)| *der)
        .ok_or_else(|| Error::BadKeyMaterial {
            reason: format!("no compiled-in PKCS#8 file {file:?} for {name:?}"),
        })
}

fn decode_seed(hex: &str) -> Option<[u8; 32]> {
    let bytes = hex.as_bytes();
    if bytes.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (o, pair) in out.iter_mut().zip(bytes.chunks_exact(2)) {
        let s = std::str::from_utf8(pair).ok()?;
        *o = u8::from_str_radix(s, 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rsa_table_matches_seeds_json() {
        let file = parse().unwrap();
        let mut from_json: Vec<(String, String)> = file
            .keys
            .iter()
            .filter(|(_, e)| e.alg == "RS256")
            .map(|(n, e)| (format!("{n}.pk8.der"), e.pkcs8.clone().unwrap()))
            .collect();
        from_json.sort();
        let mut compiled: Vec<(String, String)> = RSA_KEYS
            .iter()
            .map(|(f, _)| (f.to_string(), f.to_string()))
            .collect();
        compiled.sort();
        assert_eq!(from_json, compiled);
    }

    #[test]
    fn every_entry_parses() {
        for name in names() {
            entry(&name).unwrap();
        }
        assert!(names().len() >= 10);
    }

    #[test]
    fn seeds_are_the_documented_hash_of_the_name() {
        use sha2::Digest as _;
        for name in names() {
            let expected: [u8; 32] = sha2::Sha256::digest(
                format!("countersign-softkey fixture seed v1: {name}").as_bytes(),
            )
            .into();
            assert_eq!(entry(&name).unwrap().seed, expected, "{name}");
        }
    }

    #[test]
    fn bad_seed_hex_rejected() {
        assert!(decode_seed("zz").is_none());
        assert!(decode_seed(&"g".repeat(64)).is_none());
        assert_eq!(decode_seed(&"01".repeat(32)), Some([1u8; 32]));
    }

    #[test]
    fn unknown_fixture_is_an_error() {
        assert!(matches!(
            entry("nobody-es256"),
            Err(Error::UnknownFixture { .. })
        ));
    }
}
