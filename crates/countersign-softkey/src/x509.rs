//! The fixture attestation PKI: a root CA and one packed-attestation certificate, both ES256.
//!
//! The certificates are committed under `fixtures/ca/` and compiled in; [`build_fixture_certificates`]
//! rebuilds them byte for byte from the fixture seeds (RFC 6979 makes the signatures deterministic),
//! which a test checks, so the committed files are reproducible rather than trusted blobs.

use sha2::{Digest as _, Sha256};

use crate::der::{self, oids};
use crate::error::Error;
use crate::fixtures::{self, FIXTURE_AAGUID};
use crate::keys::SoftKey;

/// The fixture certificates, DER-encoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FixtureCertificates {
    /// Self-signed root CA (the trust anchor a verifier configures).
    pub root_der: Vec<u8>,
    /// Attestation certificate issued by the root, carrying [`FIXTURE_AAGUID`].
    pub attestation_der: Vec<u8>,
}

/// The committed fixture root CA certificate (DER).
pub fn fixture_root_certificate() -> &'static [u8] {
    fixtures::ROOT_CERT_DER
}

/// The committed fixture attestation certificate (DER).
pub fn fixture_attestation_certificate() -> &'static [u8] {
    fixtures::ATTESTATION_CERT_DER
}

/// The key that signs packed attestation statements (fixture `attestation-es256`).
pub fn fixture_attestation_key() -> Result<SoftKey, Error> {
    SoftKey::fixture(fixtures::ATTESTATION_KEY)
}

/// Rebuilds both fixture certificates from the fixture seeds.
pub fn build_fixture_certificates() -> Result<FixtureCertificates, Error> {
    let root_key = SoftKey::fixture(fixtures::ROOT_KEY)?;
    let att_key = fixture_attestation_key()?;
    let root_name = name(&[
        (oids::COUNTRY, "US"),
        (oids::ORGANIZATION, "Countersign Test"),
        (oids::COMMON_NAME, "Countersign Softkey Test Root CA"),
    ]);
    // WebAuthn §8.2.1: C, O, OU = "Authenticator Attestation", CN.
    let att_name = name(&[
        (oids::COUNTRY, "US"),
        (oids::ORGANIZATION, "Countersign Test"),
        (oids::ORGANIZATIONAL_UNIT, "Authenticator Attestation"),
        (oids::COMMON_NAME, "Countersign Softkey Attestation ES256"),
    ]);
    let root_spki = root_key.public_key_spki_der();
    let att_spki = att_key.public_key_spki_der();
    let root_ski = key_id(&root_spki);
    let att_ski = key_id(&att_spki);

    let root_extensions = [
        // CA:TRUE, critical.
        extension(
            oids::BASIC_CONSTRAINTS,
            true,
            &der::seq(&[&[der::BOOLEAN, 1, 0xff]]),
        ),
        // keyCertSign | cRLSign.
        extension(oids::KEY_USAGE, true, &[der::BIT_STRING, 2, 1, 0x06]),
        extension(oids::SUBJECT_KEY_ID, false, &der::octet_string(&root_ski)),
    ];
    let root = certificate(
        &root_key,
        &TbsParts {
            serial: serial("root"),
            issuer: &root_name,
            subject: &root_name,
            spki: &root_spki,
            extensions: &root_extensions,
        },
    )?;

    let att_extensions = [
        // CA:FALSE is the DEFAULT, so DER encodes it as an empty SEQUENCE.
        extension(oids::BASIC_CONSTRAINTS, true, &der::seq(&[])),
        // digitalSignature.
        extension(oids::KEY_USAGE, true, &[der::BIT_STRING, 2, 7, 0x80]),
        extension(oids::SUBJECT_KEY_ID, false, &der::octet_string(&att_ski)),
        extension(
            oids::AUTHORITY_KEY_ID,
            false,
            &der::seq(&[&der::tlv(0x80, &root_ski)]),
        ),
        // §8.2.1: the AAGUID as an OCTET STRING inside the extnValue OCTET STRING, not critical.
        extension(
            oids::FIDO_AAGUID,
            false,
            &der::octet_string(&FIXTURE_AAGUID),
        ),
    ];
    let attestation = certificate(
        &root_key,
        &TbsParts {
            serial: serial("attestation"),
            issuer: &root_name,
            subject: &att_name,
            spki: &att_spki,
            extensions: &att_extensions,
        },
    )?;
    Ok(FixtureCertificates {
        root_der: root,
        attestation_der: attestation,
    })
}

/// PEM armour (RFC 7468) with 64-column lines.
pub fn pem(label: &str, der: &[u8]) -> String {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in b64.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

struct TbsParts<'a> {
    serial: Vec<u8>,
    issuer: &'a [u8],
    subject: &'a [u8],
    spki: &'a [u8],
    extensions: &'a [Vec<u8>],
}

fn certificate(issuer_key: &SoftKey, parts: &TbsParts<'_>) -> Result<Vec<u8>, Error> {
    let sig_alg = der::seq(&[&der::oid(oids::ECDSA_WITH_SHA256)]);
    let validity = der::seq(&[
        &der::tlv(der::UTC_TIME, b"240101000000Z"),
        // RFC 5280 §4.1.2.5: dates from 2050 on are GeneralizedTime.
        &der::tlv(der::GENERALIZED_TIME, b"20991231235959Z"),
    ]);
    let extensions: Vec<&[u8]> = parts.extensions.iter().map(Vec::as_slice).collect();
    let tbs = der::seq(&[
        &der::explicit(0, &der::uint(&[2])),
        &der::uint(&parts.serial),
        &sig_alg,
        parts.issuer,
        &validity,
        parts.subject,
        parts.spki,
        &der::explicit(3, &der::seq(&extensions)),
    ]);
    let signature = issuer_key.sign(&tbs)?;
    Ok(der::seq(&[&tbs, &sig_alg, &der::bit_string(&signature)]))
}

fn name(rdns: &[(&[u64], &str)]) -> Vec<u8> {
    let sets: Vec<Vec<u8>> = rdns
        .iter()
        .map(|(oid, value)| {
            // Country is a PrintableString by definition; the rest are UTF8String (RFC 5280).
            let tag = if *oid == oids::COUNTRY {
                der::PRINTABLE_STRING
            } else {
                der::UTF8_STRING
            };
            let atv = der::seq(&[&der::oid(oid), &der::tlv(tag, value.as_bytes())]);
            der::cons(der::SET, &[&atv])
        })
        .collect();
    let parts: Vec<&[u8]> = sets.iter().map(Vec::as_slice).collect();
    der::seq(&parts)
}

fn extension(oid: &[u64], critical: bool, value: &[u8]) -> Vec<u8> {
    let critical_flag: &[u8] = if critical {
        &[der::BOOLEAN, 1, 0xff]
    } else {
        &[]
    };
    der::seq(&[&der::oid(oid), critical_flag, &der::octet_string(value)])
}

/// A 16-byte positive serial derived from a label.
fn serial(label: &str) -> Vec<u8> {
    let mut s = Sha256::new()
        .chain_update(b"countersign-softkey/v1/serial/")
        .chain_update(label.as_bytes())
        .finalize()
        .to_vec();
    s.truncate(16);
    if let Some(first) = s.first_mut() {
        // Positive and without a leading zero byte, so the INTEGER is exactly 16 octets.
        *first = (*first & 0x7f) | 0x40;
    }
    s
}

/// Key identifier: the first 20 bytes of SHA-256 over the SubjectPublicKeyInfo (RFC 5280 allows
/// any stable method; this one needs no SHA-1).
fn key_id(spki: &[u8]) -> Vec<u8> {
    Sha256::digest(spki).get(..20).unwrap_or_default().to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pem_wraps_at_64_columns() {
        let p = pem("CERTIFICATE", &[0u8; 60]);
        let lines: Vec<&str> = p.lines().collect();
        assert_eq!(lines[0], "-----BEGIN CERTIFICATE-----");
        assert_eq!(lines[1].len(), 64);
        assert_eq!(lines[2].len(), 16);
        assert_eq!(lines[3], "-----END CERTIFICATE-----");
    }

    #[test]
    fn serial_is_positive_16_bytes() {
        let s = serial("root");
        assert_eq!(s.len(), 16);
        assert_eq!(s[0] & 0xc0, 0x40);
        assert_ne!(serial("root"), serial("attestation"));
    }
}
