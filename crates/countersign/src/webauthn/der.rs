//! The ECDSA signature encoding policy: DER `Ecdsa-Sig-Value` to fixed-width `r || s`.
//!
//! WebAuthn ECDSA signatures are DER-encoded `SEQUENCE { r INTEGER, s INTEGER }` (WebAuthn §6.5.6,
//! RFC 3279). We parse that ourselves and give every backend the same fixed-width pair, so that the
//! backends cannot disagree on encoding questions — only on arithmetic, which they share.
//!
//! [`DerPolicy::Strict`] (the default) accepts exactly one encoding per (r, s): minimal definite
//! lengths, minimal two's-complement INTEGERs (a single 0x00 only where the high bit would otherwise
//! be set), no bytes after the sequence. [`DerPolicy::DangerLenient`] additionally tolerates the two
//! integer mistakes seen from real authenticators: extra leading zero bytes, and a missing 0x00 pad
//! (a "negative" integer read as unsigned). Either way r and s must lie in [1, n-1].
//!
//! High S is accepted: unlike Bitcoin, WebAuthn does not require low-S, and an authenticator that
//! signs with high S is behaving correctly. The malleability that permits is harmless here because
//! a replay is recognised by its nonce, never by its signature bytes.

/// How strictly ECDSA signature DER is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
#[non_exhaustive]
pub enum DerPolicy {
    /// Exactly canonical DER (the default).
    #[default]
    Strict,
    /// DANGER: also accept INTEGERs with superfluous leading zero bytes or without the 0x00 pad
    /// before a high bit. Weakens encoding uniqueness (not the signature check itself); use only
    /// for a known authenticator model that emits such signatures.
    DangerLenient,
}

/// Why an ECDSA signature's DER was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DerError {
    /// The input ended inside an element.
    #[error("DER signature truncated")]
    Truncated,
    /// An element had another tag than the one required (SEQUENCE 0x30, INTEGER 0x02).
    #[error("DER tag {got:#04x} where {expected:#04x} was required")]
    UnexpectedTag {
        /// The tag required.
        expected: u8,
        /// The tag found.
        got: u8,
    },
    /// A length in long form where the short form fits, or a form longer than one byte.
    #[error("DER length not minimally encoded")]
    NonMinimalLength,
    /// Bytes after the SEQUENCE.
    #[error("{count} trailing byte(s) after the DER signature")]
    TrailingBytes {
        /// How many bytes were left.
        count: usize,
    },
    /// Bytes inside the SEQUENCE after `s`.
    #[error("{count} extra byte(s) inside the DER SEQUENCE")]
    ExtraContent {
        /// How many bytes were left inside.
        count: usize,
    },
    /// An INTEGER with no content octets.
    #[error("DER INTEGER {component} is empty")]
    EmptyInteger {
        /// `"r"` or `"s"`.
        component: &'static str,
    },
    /// A leading 0x00 that is not needed (strict policy).
    #[error("DER INTEGER {component} has a superfluous leading zero")]
    NonMinimalInteger {
        /// `"r"` or `"s"`.
        component: &'static str,
    },
    /// The high bit set without a 0x00 pad: a negative number (strict policy).
    #[error("DER INTEGER {component} is negative")]
    NegativeInteger {
        /// `"r"` or `"s"`.
        component: &'static str,
    },
    /// More significant bytes than the curve's scalar width.
    #[error("DER INTEGER {component} is {len} bytes, wider than the curve's {width}")]
    IntegerTooWide {
        /// `"r"` or `"s"`.
        component: &'static str,
        /// Significant bytes found.
        len: usize,
        /// The curve's scalar width.
        width: usize,
    },
    /// r or s is 0 or at least the group order: a well-formed but impossible signature.
    #[error("ECDSA {component} is outside [1, n-1]")]
    ScalarOutOfRange {
        /// `"r"` or `"s"`.
        component: &'static str,
    },
}

/// The order n of the P-256 group, big-endian.
pub(crate) const P256_ORDER: [u8; 32] = [
    0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xbc, 0xe6, 0xfa, 0xad, 0xa7, 0x17, 0x9e, 0x84, 0xf3, 0xb9, 0xca, 0xc2, 0xfc, 0x63, 0x25, 0x51,
];

/// The order n of the P-384 group, big-endian.
pub(crate) const P384_ORDER: [u8; 48] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xc7, 0x63, 0x4d, 0x81, 0xf4, 0x37, 0x2d, 0xdf,
    0x58, 0x1a, 0x0d, 0xb2, 0x48, 0xb0, 0xa7, 0x7a, 0xec, 0xec, 0x19, 0x6a, 0xcc, 0xc5, 0x29, 0x73,
];

const TAG_SEQUENCE: u8 = 0x30;
const TAG_INTEGER: u8 = 0x02;

/// A P-256 signature as fixed-width `r || s`.
pub(crate) fn p256_fixed(der: &[u8], policy: DerPolicy) -> Result<[u8; 64], DerError> {
    let mut out = [0; 64];
    parse_into(der, &P256_ORDER, policy, &mut out)?;
    Ok(out)
}

/// A P-384 signature as fixed-width `r || s`.
pub(crate) fn p384_fixed(der: &[u8], policy: DerPolicy) -> Result<[u8; 96], DerError> {
    let mut out = [0; 96];
    parse_into(der, &P384_ORDER, policy, &mut out)?;
    Ok(out)
}

/// Parse `der` and write `r || s`, each left-padded to `order.len()`, into `out`.
fn parse_into(der: &[u8], order: &[u8], policy: DerPolicy, out: &mut [u8]) -> Result<(), DerError> {
    let mut outer = Cursor { buf: der };
    let body = outer.element(TAG_SEQUENCE)?;
    if !outer.buf.is_empty() {
        return Err(DerError::TrailingBytes {
            count: outer.buf.len(),
        });
    }
    let mut inner = Cursor { buf: body };
    let r = inner.element(TAG_INTEGER)?;
    let s = inner.element(TAG_INTEGER)?;
    if !inner.buf.is_empty() {
        return Err(DerError::ExtraContent {
            count: inner.buf.len(),
        });
    }
    let (r_out, s_out) = out.split_at_mut(order.len());
    scalar_into(r, "r", order, policy, r_out)?;
    scalar_into(s, "s", order, policy, s_out)
}

/// Check one INTEGER's encoding and range and write it big-endian, left-padded, into `out`.
fn scalar_into(
    content: &[u8],
    component: &'static str,
    order: &[u8],
    policy: DerPolicy,
    out: &mut [u8],
) -> Result<(), DerError> {
    let (&first, rest) = content
        .split_first()
        .ok_or(DerError::EmptyInteger { component })?;
    if policy == DerPolicy::Strict {
        // X.690 §8.3.2: the first nine bits must not be all zero or all one.
        let second_high = rest.first().map(|b| b & 0x80 != 0);
        if first == 0x00 && second_high == Some(false) {
            return Err(DerError::NonMinimalInteger { component });
        }
        if first & 0x80 != 0 {
            return Err(DerError::NegativeInteger { component });
        }
    }
    // Both policies read the magnitude without its leading zeros (strict allowed at most one).
    let start = content
        .iter()
        .position(|&b| b != 0)
        .unwrap_or(content.len());
    let magnitude = content.get(start..).unwrap_or_default();
    let width = order.len();
    let pad = width
        .checked_sub(magnitude.len())
        .ok_or(DerError::IntegerTooWide {
            component,
            len: magnitude.len(),
            width,
        })?;
    out.fill(0);
    out.get_mut(pad..)
        .ok_or(DerError::Truncated)?
        .copy_from_slice(magnitude);
    // Big-endian slices of equal length compare like the numbers they hold.
    if magnitude.is_empty() || *out >= *order {
        return Err(DerError::ScalarOutOfRange { component });
    }
    Ok(())
}

/// A forward-only reader of DER TLVs.
struct Cursor<'a> {
    buf: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn byte(&mut self) -> Result<u8, DerError> {
        let (&b, rest) = self.buf.split_first().ok_or(DerError::Truncated)?;
        self.buf = rest;
        Ok(b)
    }

    /// Read one element with the given tag and return its content octets.
    fn element(&mut self, expected: u8) -> Result<&'a [u8], DerError> {
        let got = self.byte()?;
        if got != expected {
            return Err(DerError::UnexpectedTag { expected, got });
        }
        let len = match self.byte()? {
            short @ 0..=0x7f => usize::from(short),
            // One length byte is enough for any curve we support (and for P-521); the long form
            // is only minimal when the short form could not hold the value.
            0x81 => match self.byte()? {
                long @ 0x80..=0xff => usize::from(long),
                _ => return Err(DerError::NonMinimalLength),
            },
            _ => return Err(DerError::NonMinimalLength),
        };
        if len > self.buf.len() {
            return Err(DerError::Truncated);
        }
        let (content, rest) = self.buf.split_at(len);
        self.buf = rest;
        Ok(content)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// DER of (r, s) from raw INTEGER content octets, with the given sequence length bytes.
    fn der(r: &[u8], s: &[u8]) -> Vec<u8> {
        let mut body = vec![TAG_INTEGER, r.len() as u8];
        body.extend_from_slice(r);
        body.extend_from_slice(&[TAG_INTEGER, s.len() as u8]);
        body.extend_from_slice(s);
        let mut out = vec![TAG_SEQUENCE, body.len() as u8];
        out.extend_from_slice(&body);
        out
    }

    fn fixed(r: &[u8], s: &[u8]) -> [u8; 64] {
        let mut out = [0; 64];
        out[32 - r.len()..32].copy_from_slice(r);
        out[64 - s.len()..].copy_from_slice(s);
        out
    }

    const BOTH: [DerPolicy; 2] = [DerPolicy::Strict, DerPolicy::DangerLenient];

    #[test]
    fn canonical_forms_parse_under_both_policies() {
        let high = [0x80; 32];
        let mut padded = vec![0x00];
        padded.extend_from_slice(&high);
        for policy in BOTH {
            assert_eq!(p256_fixed(&der(&[1], &[2]), policy), Ok(fixed(&[1], &[2])));
            assert_eq!(
                p256_fixed(&der(&padded, &[0x7f]), policy),
                Ok(fixed(&high, &[0x7f]))
            );
        }
    }

    #[test]
    fn superfluous_leading_zero_only_under_lenient() {
        let sig = der(&[0x00, 0x01], &[0x05]);
        assert_eq!(
            p256_fixed(&sig, DerPolicy::Strict),
            Err(DerError::NonMinimalInteger { component: "r" })
        );
        assert_eq!(
            p256_fixed(&sig, DerPolicy::DangerLenient),
            Ok(fixed(&[1], &[5]))
        );
        // Two zero bytes before a high bit: strict refuses, lenient strips both.
        let mut r = vec![0x00, 0x00];
        r.extend_from_slice(&[0x80; 32]);
        let sig = der(&[0x01], &r);
        assert_eq!(
            p256_fixed(&sig, DerPolicy::Strict),
            Err(DerError::NonMinimalInteger { component: "s" })
        );
        assert_eq!(
            p256_fixed(&sig, DerPolicy::DangerLenient),
            Ok(fixed(&[1], &[0x80; 32]))
        );
    }

    #[test]
    fn missing_pad_only_under_lenient() {
        let sig = der(&[0x80; 32], &[0x01]);
        assert_eq!(
            p256_fixed(&sig, DerPolicy::Strict),
            Err(DerError::NegativeInteger { component: "r" })
        );
        assert_eq!(
            p256_fixed(&sig, DerPolicy::DangerLenient),
            Ok(fixed(&[0x80; 32], &[1]))
        );
    }

    #[test]
    fn scalars_must_lie_in_range() {
        let mut n = vec![0x00];
        n.extend_from_slice(&P256_ORDER);
        let mut n_minus_one = n.clone();
        *n_minus_one.last_mut().unwrap() -= 1;
        for policy in BOTH {
            assert_eq!(
                p256_fixed(&der(&[0], &[1]), policy),
                Err(DerError::ScalarOutOfRange { component: "r" })
            );
            assert_eq!(
                p256_fixed(&der(&[1], &n), policy),
                Err(DerError::ScalarOutOfRange { component: "s" })
            );
            assert!(p256_fixed(&der(&[1], &n_minus_one), policy).is_ok());
            let mut wide = vec![0x01];
            wide.extend_from_slice(&[0; 32]);
            assert_eq!(
                p256_fixed(&der(&wide, &[1]), policy),
                Err(DerError::IntegerTooWide {
                    component: "r",
                    len: 33,
                    width: 32
                })
            );
        }
        // An all-zero INTEGER is still zero however it is spelled.
        assert_eq!(
            p256_fixed(&der(&[0, 0], &[1]), DerPolicy::DangerLenient),
            Err(DerError::ScalarOutOfRange { component: "r" })
        );
    }

    #[test]
    fn structure_errors() {
        let good = der(&[1], &[2]);
        for policy in BOTH {
            let mut trailing = good.clone();
            trailing.push(0);
            assert_eq!(
                p256_fixed(&trailing, policy),
                Err(DerError::TrailingBytes { count: 1 })
            );
            let mut extra = good.clone();
            extra[1] += 1;
            extra.push(0);
            assert_eq!(
                p256_fixed(&extra, policy),
                Err(DerError::ExtraContent { count: 1 })
            );
            let mut wrong_tag = good.clone();
            wrong_tag[0] = 0x31;
            assert_eq!(
                p256_fixed(&wrong_tag, policy),
                Err(DerError::UnexpectedTag {
                    expected: 0x30,
                    got: 0x31
                })
            );
            let mut long_form = vec![0x30, 0x81, good[1]];
            long_form.extend_from_slice(&good[2..]);
            assert_eq!(
                p256_fixed(&long_form, policy),
                Err(DerError::NonMinimalLength)
            );
            assert_eq!(
                p256_fixed(&der(&[], &[1]), policy),
                Err(DerError::EmptyInteger { component: "r" })
            );
            for cut in 0..good.len() {
                assert!(p256_fixed(&good[..cut], policy).is_err());
            }
            assert_eq!(
                p256_fixed(&[0x30, 0x80], policy),
                Err(DerError::NonMinimalLength)
            );
        }
    }

    #[test]
    fn p384_width_and_order() {
        let mut n = vec![0x00];
        n.extend_from_slice(&P384_ORDER);
        assert_eq!(
            p384_fixed(&der(&[1], &n), DerPolicy::Strict),
            Err(DerError::ScalarOutOfRange { component: "s" })
        );
        let sig = p384_fixed(&der(&[1], &[2]), DerPolicy::Strict).unwrap();
        assert_eq!((sig[47], sig[95]), (1, 2));
    }
}
