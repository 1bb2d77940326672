//! Authenticator data (WebAuthn §6.1), flags, and the post-signing tools for negative cases:
//! signature encoding quirks and bit-flip tamper hooks.

use sha2::{Digest as _, Sha256};

use crate::error::Error;
use crate::keys::Alg;

/// The authenticator data flags byte. Written verbatim: nothing here keeps the flags consistent
/// with the rest of the structure, so mismatches (ED without extensions, BS without BE) are easy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Flags {
    /// User present (bit 0).
    pub up: bool,
    /// User verified (bit 2).
    pub uv: bool,
    /// Backup eligible (bit 3).
    pub be: bool,
    /// Backed up (bit 4).
    pub bs: bool,
    /// Attested credential data included (bit 6).
    pub at: bool,
    /// Extension data included (bit 7).
    pub ed: bool,
    /// Extra bits ORed in as they are, for the reserved bits (RFU1 = 0x02, RFU2 = 0x20).
    pub reserved: u8,
}

impl Flags {
    /// Nothing set.
    pub const NONE: Self = Self {
        up: false,
        uv: false,
        be: false,
        bs: false,
        at: false,
        ed: false,
        reserved: 0,
    };

    /// UP and UV: what a security key with a PIN or biometric produces on assertion.
    pub const UP_UV: Self = Self {
        up: true,
        uv: true,
        ..Self::NONE
    };

    /// UP, UV and AT: what a registration produces.
    pub const UP_UV_AT: Self = Self {
        at: true,
        ..Self::UP_UV
    };

    /// UP, UV, BE and BS: a synced passkey.
    pub const SYNCED_PASSKEY: Self = Self {
        be: true,
        bs: true,
        ..Self::UP_UV
    };

    /// The byte as it appears in authenticator data.
    pub fn to_byte(self) -> u8 {
        let bit = |on: bool, mask: u8| if on { mask } else { 0 };
        bit(self.up, 0x01)
            | bit(self.uv, 0x04)
            | bit(self.be, 0x08)
            | bit(self.bs, 0x10)
            | bit(self.at, 0x40)
            | bit(self.ed, 0x80)
            | self.reserved
    }

    /// Reads a flags byte; reserved bits land in `reserved`.
    pub fn from_byte(b: u8) -> Self {
        Self {
            up: b & 0x01 != 0,
            uv: b & 0x04 != 0,
            be: b & 0x08 != 0,
            bs: b & 0x10 != 0,
            at: b & 0x40 != 0,
            ed: b & 0x80 != 0,
            reserved: b & 0x22,
        }
    }
}

/// `SHA-256(rp_id) || flags || sign_count (u32 BE) || attested_credential_data? || extensions?`.
///
/// The optional parts are appended when given, regardless of the AT/ED flags.
pub fn build_authenticator_data(
    rp_id: &str,
    flags: Flags,
    sign_count: u32,
    attested_credential_data: Option<&[u8]>,
    extensions: Option<&[u8]>,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(37);
    out.extend_from_slice(&Sha256::digest(rp_id.as_bytes()));
    out.push(flags.to_byte());
    out.extend_from_slice(&sign_count.to_be_bytes());
    out.extend_from_slice(attested_credential_data.unwrap_or_default());
    out.extend_from_slice(extensions.unwrap_or_default());
    out
}

/// Ways to encode an ECDSA signature that real authenticators have been seen to get wrong.
/// Each is a deterministic rewrite of the canonical DER signature.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SignatureQuirk {
    /// Canonical encoding.
    #[default]
    None,
    /// `r || s` as fixed-width big-endian integers instead of DER (the COSE / WebCrypto form).
    EcdsaRaw,
    /// An extra 0x00 before `r`'s minimal content: a non-minimal INTEGER BER accepts.
    DerExtraLeadingZero,
    /// The 0x00 pad dropped from the first of `r`, `s` that needs one, so the INTEGER reads as
    /// negative. Not applicable (an error) when neither has its top bit set; pick another input.
    DerMissingPad,
    /// The outer SEQUENCE length in long form (`0x81 len`) although it fits in short form.
    DerLongFormLength,
    /// `s` replaced by `n - s`: the other, equally valid ECDSA signature of the same message,
    /// canonical DER. Flips a low-S signature to high-S and back (malleability cases).
    EcdsaNegateS,
}

impl SignatureQuirk {
    fn name(self) -> &'static str {
        match self {
            Self::None => "None",
            Self::EcdsaRaw => "EcdsaRaw",
            Self::DerExtraLeadingZero => "DerExtraLeadingZero",
            Self::DerMissingPad => "DerMissingPad",
            Self::DerLongFormLength => "DerLongFormLength",
            Self::EcdsaNegateS => "EcdsaNegateS",
        }
    }

    /// Rewrites a canonical signature from [`crate::SoftKey::sign`] made with `alg`.
    pub fn apply(self, alg: Alg, signature: &[u8]) -> Result<Vec<u8>, Error> {
        if self == Self::None {
            return Ok(signature.to_vec());
        }
        let not_applicable = |reason| Error::QuirkNotApplicable {
            quirk: self.name(),
            reason,
        };
        let width = match alg {
            Alg::Es256 => 32,
            Alg::Es384 => 48,
            _ => return Err(not_applicable("only ECDSA signatures are DER")),
        };
        let (r, s) = split_der(signature).ok_or(not_applicable("input is not a DER signature"))?;
        match self {
            Self::EcdsaRaw => {
                let (r, s) = (fixed_width(r, width), fixed_width(s, width));
                match (r, s) {
                    (Some(r), Some(s)) => Ok([r, s].concat()),
                    _ => Err(not_applicable("integer wider than the curve")),
                }
            }
            Self::DerExtraLeadingZero => Ok(der_sig(&[&[0u8][..], r].concat(), s, false)),
            Self::DerMissingPad => {
                let padded = |v: &[u8]| matches!(v, [0, next, ..] if next & 0x80 != 0);
                if padded(r) {
                    Ok(der_sig(r.get(1..).unwrap_or_default(), s, false))
                } else if padded(s) {
                    Ok(der_sig(r, s.get(1..).unwrap_or_default(), false))
                } else {
                    Err(not_applicable("neither r nor s has a pad byte"))
                }
            }
            Self::DerLongFormLength => Ok(der_sig(r, s, true)),
            Self::EcdsaNegateS => negate_s(alg, signature)
                .ok_or(not_applicable("input is not a valid ECDSA signature")),
            Self::None => Ok(signature.to_vec()),
        }
    }
}

/// Re-encodes `(r, n - s)` as canonical DER.
fn negate_s(alg: Alg, der: &[u8]) -> Option<Vec<u8>> {
    match alg {
        Alg::Es256 => {
            let sig = p256::ecdsa::Signature::from_der(der).ok()?;
            let s = -*sig.s();
            let out =
                p256::ecdsa::Signature::from_scalars(sig.r().to_bytes(), s.to_bytes()).ok()?;
            Some(out.to_der().as_bytes().to_vec())
        }
        Alg::Es384 => {
            let sig = p384::ecdsa::Signature::from_der(der).ok()?;
            let s = -*sig.s();
            let out =
                p384::ecdsa::Signature::from_scalars(sig.r().to_bytes(), s.to_bytes()).ok()?;
            Some(out.to_der().as_bytes().to_vec())
        }
        _ => None,
    }
}

/// The content octets of the two INTEGERs of a short-form DER `SEQUENCE { r, s }`.
fn split_der(sig: &[u8]) -> Option<(&[u8], &[u8])> {
    let [0x30, len, body @ ..] = sig else {
        return None;
    };
    if usize::from(*len) != body.len() {
        return None;
    }
    let [0x02, rlen, rest @ ..] = body else {
        return None;
    };
    let (r, rest) = rest.split_at_checked(usize::from(*rlen))?;
    let [0x02, slen, s @ ..] = rest else {
        return None;
    };
    (usize::from(*slen) == s.len()).then_some((r, s))
}

fn fixed_width(v: &[u8], width: usize) -> Option<Vec<u8>> {
    let skip = v.iter().take_while(|b| **b == 0).count();
    let digits = v.get(skip..)?;
    let pad = width.checked_sub(digits.len())?;
    Some([vec![0; pad], digits.to_vec()].concat())
}

/// `SEQUENCE { INTEGER r, INTEGER s }` with the given contents taken verbatim.
fn der_sig(r: &[u8], s: &[u8], long_form: bool) -> Vec<u8> {
    let body = [
        crate::der::tlv(crate::der::INTEGER, r),
        crate::der::tlv(crate::der::INTEGER, s),
    ]
    .concat();
    let mut out = vec![crate::der::SEQUENCE];
    if long_form && body.len() < 0x80 {
        out.extend_from_slice(&[0x81, body.len() as u8]);
    } else {
        crate::der::length(body.len(), &mut out);
    }
    out.extend_from_slice(&body);
    out
}

/// Which field of a response a tamper hook changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Part {
    /// The signature.
    Signature,
    /// The authenticator data.
    AuthenticatorData,
    /// The clientDataJSON.
    ClientDataJson,
}

impl Part {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Signature => "signature",
            Self::AuthenticatorData => "authenticator_data",
            Self::ClientDataJson => "client_data_json",
        }
    }
}

/// Flips bit `bit` of `bytes`, counting from the most significant bit of byte 0.
pub(crate) fn flip_bit(part: Part, bytes: &mut [u8], bit: usize) -> Result<(), Error> {
    let len = bytes.len();
    let byte = bytes.get_mut(bit / 8).ok_or(Error::BitOutOfRange {
        part: part.name(),
        bit,
        len,
    })?;
    *byte ^= 0x80 >> (bit % 8);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_round_trip_and_bits() {
        assert_eq!(Flags::UP_UV.to_byte(), 0x05);
        assert_eq!(Flags::UP_UV_AT.to_byte(), 0x45);
        assert_eq!(Flags::SYNCED_PASSKEY.to_byte(), 0x1d);
        let bs_only = Flags {
            bs: true,
            ..Flags::UP_UV
        };
        assert_eq!(bs_only.to_byte(), 0x15);
        for b in 0..=255u8 {
            assert_eq!(Flags::from_byte(b).to_byte(), b);
        }
    }

    #[test]
    fn authenticator_data_layout() {
        let ad = build_authenticator_data("example.com", Flags::UP_UV, 0x0102_0304, None, None);
        assert_eq!(ad.len(), 37);
        assert_eq!(&ad[..32], &Sha256::digest(b"example.com")[..]);
        assert_eq!(ad[32], 0x05);
        assert_eq!(&ad[33..], [1, 2, 3, 4]);
        let with = build_authenticator_data("x", Flags::NONE, 0, Some(&[9, 9]), Some(&[0xa0]));
        assert_eq!(&with[37..], [9, 9, 0xa0]);
    }

    #[test]
    fn flip_bit_counts_msb_first_and_rejects_out_of_range() {
        let mut v = vec![0u8, 0];
        flip_bit(Part::Signature, &mut v, 0).unwrap();
        flip_bit(Part::Signature, &mut v, 15).unwrap();
        assert_eq!(v, [0x80, 0x01]);
        assert!(matches!(
            flip_bit(Part::Signature, &mut v, 16),
            Err(Error::BitOutOfRange {
                bit: 16,
                len: 2,
                ..
            })
        ));
    }

    #[test]
    fn quirks_rewrite_a_known_signature() {
        // r = 0x80.., needs a pad; s = 0x01.
        let canonical = [0x30, 0x08, 0x02, 0x02, 0x00, 0x80, 0x02, 0x02, 0x01, 0x02];
        let q = |quirk: SignatureQuirk| quirk.apply(Alg::Es256, &canonical).unwrap();
        assert_eq!(q(SignatureQuirk::None), canonical);
        assert_eq!(
            q(SignatureQuirk::DerExtraLeadingZero),
            [
                0x30, 0x09, 0x02, 0x03, 0x00, 0x00, 0x80, 0x02, 0x02, 0x01, 0x02
            ]
        );
        assert_eq!(
            q(SignatureQuirk::DerMissingPad),
            [0x30, 0x07, 0x02, 0x01, 0x80, 0x02, 0x02, 0x01, 0x02]
        );
        assert_eq!(
            q(SignatureQuirk::DerLongFormLength),
            [
                0x30, 0x81, 0x08, 0x02, 0x02, 0x00, 0x80, 0x02, 0x02, 0x01, 0x02
            ]
        );
        let raw = q(SignatureQuirk::EcdsaRaw);
        assert_eq!(raw.len(), 64);
        assert_eq!(raw[31], 0x80);
        assert_eq!(&raw[62..], [1, 2]);
    }

    #[test]
    fn quirks_not_applicable() {
        let unpadded = [0x30, 0x06, 0x02, 0x01, 0x01, 0x02, 0x01, 0x02];
        assert!(matches!(
            SignatureQuirk::DerMissingPad.apply(Alg::Es256, &unpadded),
            Err(Error::QuirkNotApplicable { .. })
        ));
        assert!(matches!(
            SignatureQuirk::EcdsaRaw.apply(Alg::EdDsa, &[0; 64]),
            Err(Error::QuirkNotApplicable { .. })
        ));
        assert!(matches!(
            SignatureQuirk::EcdsaRaw.apply(Alg::Es256, &[0x30, 0x01]),
            Err(Error::QuirkNotApplicable { .. })
        ));
        // None is always applicable, whatever the algorithm.
        assert_eq!(
            SignatureQuirk::None.apply(Alg::Rs256, &[1, 2]).unwrap(),
            [1, 2]
        );
    }
}
