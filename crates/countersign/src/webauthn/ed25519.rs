//! Ed25519 encoding rules shared by every backend.
//!
//! RFC 8032 leaves room for implementations to disagree on edge cases (non-canonical encodings,
//! small-order points), and `ring` and `ed25519-dalek` do disagree on some of them. So that a
//! signature's fate never depends on the backend, these byte-level checks run before either backend
//! sees the key or the signature, and refuse the union of what either would refuse:
//!
//! - the public key A must be a canonical encoding (y < p) of a point that is not of small order
//!   (checked once, when the COSE key is parsed);
//! - the signature's R must be canonical and not of small order (`verify_strict` refuses small-order
//!   R, `ring` does not);
//! - the signature's S must be reduced (S < L), which both already require.
//!
//! What remains is the cofactorless equation both backends compute identically.

/// The field prime p = 2^255 - 19, little-endian.
const P: [u8; 32] = [
    0xed, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f,
];

/// The group order L = 2^252 + 27742317777372353535851937790883648493, little-endian.
const L: [u8; 32] = [
    0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10,
];

/// The y coordinates (little-endian, sign bit clear) of the eight points of order dividing 8:
/// the identity (y = 1), the point of order 2 (y = -1), the two of order 4 (y = 0) and the four of
/// order 8 (two y values, each with both signs of x). With canonical y, the sign bit is the only
/// other freedom, so masking it makes this list complete.
const SMALL_ORDER_Y: [[u8; 32]; 5] = [
    [0; 32],
    {
        let mut one = [0; 32];
        one[0] = 1;
        one
    },
    {
        let mut minus_one = P;
        minus_one[0] = 0xec;
        minus_one
    },
    [
        0x26, 0xe8, 0x95, 0x8f, 0xc2, 0xb2, 0x27, 0xb0, 0x45, 0xc3, 0xf4, 0x89, 0xf2, 0xef, 0x98,
        0xf0, 0xd5, 0xdf, 0xac, 0x05, 0xd3, 0xc6, 0x33, 0x39, 0xb1, 0x38, 0x02, 0x88, 0x6d, 0x53,
        0xfc, 0x05,
    ],
    [
        0xc7, 0x17, 0x6a, 0x70, 0x3d, 0x4d, 0xd8, 0x4f, 0xba, 0x3c, 0x0b, 0x76, 0x0d, 0x10, 0x67,
        0x0f, 0x2a, 0x20, 0x53, 0xfa, 0x2c, 0x39, 0xcc, 0xc6, 0x4e, 0xc7, 0xfd, 0x77, 0x92, 0xac,
        0x03, 0x7a,
    ],
];

/// `a < b` for little-endian 256-bit numbers.
fn less_than_le(a: &[u8; 32], b: &[u8; 32]) -> bool {
    for (x, y) in a.iter().rev().zip(b.iter().rev()) {
        if x != y {
            return x < y;
        }
    }
    false
}

fn y_coordinate(point: &[u8; 32]) -> [u8; 32] {
    let mut y = *point;
    y[31] &= 0x7f;
    y
}

/// The point encoding's y is reduced modulo p.
pub(crate) fn is_canonical_point(point: &[u8; 32]) -> bool {
    less_than_le(&y_coordinate(point), &P)
}

/// The (canonical) encoding names a point of order 1, 2, 4 or 8.
pub(crate) fn is_small_order_point(point: &[u8; 32]) -> bool {
    let y = y_coordinate(point);
    SMALL_ORDER_Y.contains(&y)
}

/// The scalar S is reduced modulo L.
pub(crate) fn is_canonical_scalar(s: &[u8; 32]) -> bool {
    less_than_le(s, &L)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_sign(mut point: [u8; 32]) -> [u8; 32] {
        point[31] |= 0x80;
        point
    }

    #[test]
    fn small_order_list_agrees_with_dalek() {
        let mut decoded = 0;
        for y in SMALL_ORDER_Y {
            assert!(is_canonical_point(&y));
            for enc in [y, with_sign(y)] {
                assert!(is_small_order_point(&enc));
                // Where dalek decodes an encoding, it must agree the point is weak.
                if let Ok(key) = ed25519_dalek::VerifyingKey::from_bytes(&enc) {
                    assert!(key.is_weak(), "{enc:02x?}");
                    decoded += 1;
                }
            }
        }
        // Every y value is a real curve point (all ten encodings decode in dalek, which maps
        // x = 0 with the sign bit set to the same point).
        assert_eq!(decoded, 10);
    }

    #[test]
    fn basepoint_is_neither_small_order_nor_non_canonical() {
        let basepoint = ed25519_dalek::SigningKey::from_bytes(&[7; 32])
            .verifying_key()
            .to_bytes();
        assert!(is_canonical_point(&basepoint));
        assert!(!is_small_order_point(&basepoint));
    }

    #[test]
    fn canonical_point_boundary() {
        let mut p_minus_one = P;
        p_minus_one[0] = 0xec;
        assert!(is_canonical_point(&p_minus_one));
        assert!(!is_canonical_point(&P));
        assert!(!is_canonical_point(&with_sign(P)));
        let mut p_plus_one = P;
        p_plus_one[0] = 0xee;
        assert!(!is_canonical_point(&p_plus_one));
        assert!(!is_canonical_point(&[0xff; 32]));
    }

    #[test]
    fn canonical_scalar_boundary() {
        let mut l_minus_one = L;
        l_minus_one[0] = 0xec;
        assert!(is_canonical_scalar(&l_minus_one));
        assert!(is_canonical_scalar(&[0; 32]));
        assert!(!is_canonical_scalar(&L));
        assert!(!is_canonical_scalar(&[0xff; 32]));
    }
}
