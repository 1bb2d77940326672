//! A minimal DER writer: just enough for SubjectPublicKeyInfo, ECDSA signatures and the fixture
//! X.509 certificates. Writing DER by hand keeps the crate free of an ASN.1 dependency and makes
//! every byte of the fixture certificates reproducible from this file alone.

pub(crate) const SEQUENCE: u8 = 0x30;
pub(crate) const SET: u8 = 0x31;
pub(crate) const INTEGER: u8 = 0x02;
pub(crate) const BIT_STRING: u8 = 0x03;
pub(crate) const OCTET_STRING: u8 = 0x04;
pub(crate) const NULL: u8 = 0x05;
pub(crate) const OID: u8 = 0x06;
pub(crate) const BOOLEAN: u8 = 0x01;
pub(crate) const UTF8_STRING: u8 = 0x0c;
pub(crate) const PRINTABLE_STRING: u8 = 0x13;
pub(crate) const UTC_TIME: u8 = 0x17;
pub(crate) const GENERALIZED_TIME: u8 = 0x18;

/// Object identifiers used in this crate, as dotted arcs.
pub(crate) mod oids {
    pub(crate) const EC_PUBLIC_KEY: &[u64] = &[1, 2, 840, 10045, 2, 1];
    pub(crate) const PRIME256V1: &[u64] = &[1, 2, 840, 10045, 3, 1, 7];
    pub(crate) const SECP384R1: &[u64] = &[1, 3, 132, 0, 34];
    pub(crate) const ED25519: &[u64] = &[1, 3, 101, 112];
    pub(crate) const RSA_ENCRYPTION: &[u64] = &[1, 2, 840, 113549, 1, 1, 1];
    pub(crate) const ECDSA_WITH_SHA256: &[u64] = &[1, 2, 840, 10045, 4, 3, 2];
    pub(crate) const COUNTRY: &[u64] = &[2, 5, 4, 6];
    pub(crate) const ORGANIZATION: &[u64] = &[2, 5, 4, 10];
    pub(crate) const ORGANIZATIONAL_UNIT: &[u64] = &[2, 5, 4, 11];
    pub(crate) const COMMON_NAME: &[u64] = &[2, 5, 4, 3];
    pub(crate) const BASIC_CONSTRAINTS: &[u64] = &[2, 5, 29, 19];
    pub(crate) const KEY_USAGE: &[u64] = &[2, 5, 29, 15];
    pub(crate) const SUBJECT_KEY_ID: &[u64] = &[2, 5, 29, 14];
    pub(crate) const AUTHORITY_KEY_ID: &[u64] = &[2, 5, 29, 35];
    /// id-fido-gen-ce-aaguid (WebAuthn §8.2.1).
    pub(crate) const FIDO_AAGUID: &[u64] = &[1, 3, 6, 1, 4, 1, 45724, 1, 1, 4];
}

/// Encodes a length in definite form, short when possible.
pub(crate) fn length(len: usize, out: &mut Vec<u8>) {
    if len < 0x80 {
        out.push(len as u8);
        return;
    }
    let bytes = len.to_be_bytes();
    let skip = bytes.iter().take_while(|b| **b == 0).count();
    let significant = bytes.get(skip..).unwrap_or_default();
    out.push(0x80 | significant.len() as u8);
    out.extend_from_slice(significant);
}

/// A TLV with the given tag and content.
pub(crate) fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(content.len() + 4);
    out.push(tag);
    length(content.len(), &mut out);
    out.extend_from_slice(content);
    out
}

/// A constructed TLV whose content is the concatenation of `parts`.
pub(crate) fn cons(tag: u8, parts: &[&[u8]]) -> Vec<u8> {
    tlv(tag, &parts.concat())
}

pub(crate) fn seq(parts: &[&[u8]]) -> Vec<u8> {
    cons(SEQUENCE, parts)
}

/// The minimal content octets of a non-negative big-endian integer: leading zeros stripped, one
/// 0x00 put back when the top bit would otherwise read as a sign.
pub(crate) fn uint_content(be: &[u8]) -> Vec<u8> {
    let skip = be.iter().take_while(|b| **b == 0).count();
    let digits = be.get(skip..).unwrap_or_default();
    match digits.first() {
        None => vec![0],
        Some(b) if b & 0x80 != 0 => [&[0u8][..], digits].concat(),
        Some(_) => digits.to_vec(),
    }
}

/// An INTEGER holding a non-negative big-endian value.
pub(crate) fn uint(be: &[u8]) -> Vec<u8> {
    tlv(INTEGER, &uint_content(be))
}

pub(crate) fn oid(arcs: &[u64]) -> Vec<u8> {
    let mut content = Vec::new();
    if let [first, second, rest @ ..] = arcs {
        base128(first * 40 + second, &mut content);
        for arc in rest {
            base128(*arc, &mut content);
        }
    }
    tlv(OID, &content)
}

fn base128(mut v: u64, out: &mut Vec<u8>) {
    let mut groups = vec![(v & 0x7f) as u8];
    v >>= 7;
    while v > 0 {
        groups.push(0x80 | (v & 0x7f) as u8);
        v >>= 7;
    }
    groups.reverse();
    out.extend_from_slice(&groups);
}

/// A BIT STRING with no unused bits.
pub(crate) fn bit_string(bytes: &[u8]) -> Vec<u8> {
    cons(BIT_STRING, &[&[0], bytes])
}

pub(crate) fn octet_string(bytes: &[u8]) -> Vec<u8> {
    tlv(OCTET_STRING, bytes)
}

/// Context-specific constructed (explicit) tag `[n]`.
pub(crate) fn explicit(n: u8, inner: &[u8]) -> Vec<u8> {
    tlv(0xa0 | n, inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oid_encoding_matches_known_values() {
        // 1.2.840.10045.2.1 is 06 07 2a 86 48 ce 3d 02 01 in every EC SPKI.
        assert_eq!(
            oid(oids::EC_PUBLIC_KEY),
            [0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01]
        );
        // The FIDO AAGUID extension OID: 06 0b 2b 06 01 04 01 82 e5 1c 01 01 04.
        assert_eq!(
            oid(oids::FIDO_AAGUID),
            [
                0x06, 0x0b, 0x2b, 0x06, 0x01, 0x04, 0x01, 0x82, 0xe5, 0x1c, 0x01, 0x01, 0x04
            ]
        );
    }

    #[test]
    fn integers_are_minimal_and_padded() {
        assert_eq!(uint(&[0, 0, 5]), [2, 1, 5]);
        assert_eq!(uint(&[0x80]), [2, 2, 0, 0x80]);
        assert_eq!(uint(&[0, 0]), [2, 1, 0]);
        assert_eq!(uint(&[]), [2, 1, 0]);
    }

    #[test]
    fn long_lengths() {
        let mut out = Vec::new();
        length(0x7f, &mut out);
        assert_eq!(out, [0x7f]);
        out.clear();
        length(0x80, &mut out);
        assert_eq!(out, [0x81, 0x80]);
        out.clear();
        length(0x1234, &mut out);
        assert_eq!(out, [0x82, 0x12, 0x34]);
    }
}
