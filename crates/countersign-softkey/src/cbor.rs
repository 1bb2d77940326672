//! A tiny CBOR encoder producing CTAP2 canonical form.
//!
//! Only what an authenticator emits is supported: integers, byte and text strings, arrays, maps,
//! booleans and null. Lengths always use the shortest head, and map entries are sorted the CTAP2
//! way (CTAP 2.1 §8: by major type, then by encoded length, then bytewise), so the output of
//! [`Value::encode`] is the one canonical encoding a verifier may compare byte for byte.

/// A CBOR data item.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Value {
    /// An integer in the range `-(2^64)..2^64` (major types 0 and 1).
    Int(i128),
    /// A byte string (major type 2).
    Bytes(Vec<u8>),
    /// A text string (major type 3).
    Text(String),
    /// An array (major type 4).
    Array(Vec<Value>),
    /// A map (major type 5). Entries are sorted canonically when encoded; the order here is free.
    Map(Vec<(Value, Value)>),
    /// `true` or `false` (major type 7).
    Bool(bool),
    /// `null` (major type 7).
    Null,
}

impl Value {
    /// A text-string value.
    pub fn text(s: impl Into<String>) -> Self {
        Self::Text(s.into())
    }

    /// A byte-string value.
    pub fn bytes(b: impl Into<Vec<u8>>) -> Self {
        Self::Bytes(b.into())
    }

    /// The canonical encoding of this item.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode_into(&mut out);
        out
    }

    fn encode_into(&self, out: &mut Vec<u8>) {
        match self {
            Self::Int(n) => encode_int(*n, out),
            Self::Bytes(b) => {
                head(2, b.len() as u64, out);
                out.extend_from_slice(b);
            }
            Self::Text(s) => {
                head(3, s.len() as u64, out);
                out.extend_from_slice(s.as_bytes());
            }
            Self::Array(items) => {
                head(4, items.len() as u64, out);
                for item in items {
                    item.encode_into(out);
                }
            }
            Self::Map(entries) => {
                let mut encoded: Vec<(Vec<u8>, Vec<u8>)> = entries
                    .iter()
                    .map(|(k, v)| (k.encode(), v.encode()))
                    .collect();
                encoded.sort_by(|(a, _), (b, _)| ctap2_key_order(a, b));
                head(5, encoded.len() as u64, out);
                for (k, v) in encoded {
                    out.extend_from_slice(&k);
                    out.extend_from_slice(&v);
                }
            }
            Self::Bool(false) => out.push(0xf4),
            Self::Bool(true) => out.push(0xf5),
            Self::Null => out.push(0xf6),
        }
    }
}

impl From<i64> for Value {
    fn from(n: i64) -> Self {
        Self::Int(i128::from(n))
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Self::Text(s.to_owned())
    }
}

impl From<Vec<u8>> for Value {
    fn from(b: Vec<u8>) -> Self {
        Self::Bytes(b)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Self::Bool(b)
    }
}

/// CTAP2 canonical key order on already-encoded keys: the major type (top three bits of the first
/// byte) first, then shorter encodings, then bytewise. Comparing encodings is equivalent to the
/// spec's value rules because heads are always minimal.
fn ctap2_key_order(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    let major = |k: &[u8]| k.first().map_or(0, |b| b >> 5);
    major(a)
        .cmp(&major(b))
        .then(a.len().cmp(&b.len()))
        .then_with(|| a.cmp(b))
}

fn encode_int(n: i128, out: &mut Vec<u8>) {
    // Out-of-range values saturate; no caller in this crate builds one, and saturating keeps the
    // encoder total instead of panicking.
    if n >= 0 {
        head(0, u64::try_from(n).unwrap_or(u64::MAX), out);
    } else {
        head(1, u64::try_from(-1 - n).unwrap_or(u64::MAX), out);
    }
}

/// Writes an initial byte plus argument in its shortest form.
fn head(major: u8, arg: u64, out: &mut Vec<u8>) {
    let mt = major << 5;
    if arg < 24 {
        out.push(mt | arg as u8);
    } else if let Ok(v) = u8::try_from(arg) {
        out.extend_from_slice(&[mt | 24, v]);
    } else if let Ok(v) = u16::try_from(arg) {
        out.push(mt | 25);
        out.extend_from_slice(&v.to_be_bytes());
    } else if let Ok(v) = u32::try_from(arg) {
        out.push(mt | 26);
        out.extend_from_slice(&v.to_be_bytes());
    } else {
        out.push(mt | 27);
        out.extend_from_slice(&arg.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(v: &Value) -> String {
        v.encode().iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn integers_use_shortest_heads() {
        // RFC 8949 Appendix A examples.
        assert_eq!(hex(&Value::Int(0)), "00");
        assert_eq!(hex(&Value::Int(23)), "17");
        assert_eq!(hex(&Value::Int(24)), "1818");
        assert_eq!(hex(&Value::Int(1000)), "1903e8");
        assert_eq!(hex(&Value::Int(1_000_000)), "1a000f4240");
        assert_eq!(hex(&Value::Int(1_000_000_000_000)), "1b000000e8d4a51000");
        assert_eq!(hex(&Value::Int(-1)), "20");
        assert_eq!(hex(&Value::Int(-7)), "26");
        assert_eq!(hex(&Value::Int(-257)), "390100");
        assert_eq!(hex(&Value::Int(-100)), "3863");
        assert_eq!(hex(&Value::Int(-(1 << 64))), "3bffffffffffffffff");
    }

    #[test]
    fn strings_arrays_and_simple_values() {
        assert_eq!(hex(&Value::text("IETF")), "6449455446");
        assert_eq!(hex(&Value::bytes(vec![1, 2, 3, 4])), "4401020304");
        assert_eq!(
            hex(&Value::Array(vec![1.into(), 2.into(), 3.into()])),
            "83010203"
        );
        assert_eq!(hex(&Value::Bool(false)), "f4");
        assert_eq!(hex(&Value::Bool(true)), "f5");
        assert_eq!(hex(&Value::Null), "f6");
    }

    #[test]
    fn map_keys_sorted_ctap2_style() {
        // Integers before strings, positive before negative, shorter strings before longer.
        let m = Value::Map(vec![
            ("authData".into(), Value::Int(0)),
            (Value::Int(-2), Value::Int(0)),
            ("fmt".into(), Value::Int(0)),
            (Value::Int(3), Value::Int(0)),
            (Value::Int(-1), Value::Int(0)),
            ("attStmt".into(), Value::Int(0)),
            (Value::Int(1), Value::Int(0)),
            (Value::Int(1000), Value::Int(0)),
        ]);
        let expected = concat!(
            "a8",
            "0100",
            "0300",
            "1903e800",
            "2000",
            "2100",
            "63666d7400",
            "6761747453746d7400",
            "68617574684461746100"
        );
        assert_eq!(hex(&m), expected);
    }

    #[test]
    fn map_key_order_negative_case_is_not_insertion_order() {
        let a = Value::Map(vec![("b".into(), 1.into()), ("a".into(), 2.into())]);
        let b = Value::Map(vec![("a".into(), 2.into()), ("b".into(), 1.into())]);
        assert_eq!(a.encode(), b.encode());
        assert_eq!(hex(&a), "a2616102616201");
    }
}
