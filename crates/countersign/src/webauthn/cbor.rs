//! A minimal, strict CBOR (RFC 8949) reader: only what COSE_Key and attested credential data need.
//!
//! WebAuthn authenticators must emit CTAP2 canonical CBOR, so the reader refuses everything that
//! canonical form excludes and that we would otherwise have to reason about: indefinite lengths,
//! non-minimal argument encodings, reserved additional-information values. Every length is checked
//! against the bytes that remain before anything is read, and nesting is bounded, so hostile input
//! costs at most a linear scan and never panics.

/// Maximum nesting of arrays, maps and tags. A COSE_Key is depth 1 (2 with `key_ops`); extension
/// maps seen in practice are depth 2–3. Anything deeper is not a credential.
pub(crate) const MAX_DEPTH: usize = 16;

/// Why a byte string is not the CBOR we accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CborError {
    /// The input ended inside an item.
    #[error("CBOR item truncated at offset {offset}")]
    Truncated {
        /// Where the reader was when the input ran out.
        offset: usize,
    },
    /// Additional information 28–30 (reserved) or 31 (indefinite length / break).
    #[error("CBOR indefinite length or reserved encoding at offset {offset}")]
    Unsupported {
        /// Offset of the offending initial byte.
        offset: usize,
    },
    /// An argument was encoded in more bytes than its value needs (not canonical).
    #[error("CBOR non-minimal argument encoding at offset {offset}")]
    NonMinimal {
        /// Offset of the offending initial byte.
        offset: usize,
    },
    /// Arrays, maps and tags nested deeper than [`MAX_DEPTH`].
    #[error("CBOR nesting deeper than {MAX_DEPTH}")]
    TooDeep,
    /// A text string that is not UTF-8.
    #[error("CBOR text string at offset {offset} is not UTF-8")]
    InvalidUtf8 {
        /// Offset of the string's initial byte.
        offset: usize,
    },
    /// An item of another major type than the one required here.
    #[error("CBOR item at offset {offset} has major type {got}, expected {expected}")]
    UnexpectedType {
        /// Offset of the item's initial byte.
        offset: usize,
        /// The major type required.
        expected: u8,
        /// The major type found.
        got: u8,
    },
    /// An integer outside the range of `i64`.
    #[error("CBOR integer at offset {offset} does not fit in 64-bit signed")]
    IntegerOutOfRange {
        /// Offset of the integer's initial byte.
        offset: usize,
    },
    /// Bytes left over after the single item the input should hold.
    #[error("{count} trailing byte(s) after the CBOR item")]
    TrailingBytes {
        /// How many bytes were left.
        count: usize,
    },
}

/// Major types (RFC 8949 §3.1).
pub(crate) const MAJOR_UNSIGNED: u8 = 0;
pub(crate) const MAJOR_NEGATIVE: u8 = 1;
pub(crate) const MAJOR_BYTES: u8 = 2;
pub(crate) const MAJOR_TEXT: u8 = 3;
pub(crate) const MAJOR_ARRAY: u8 = 4;
pub(crate) const MAJOR_MAP: u8 = 5;
pub(crate) const MAJOR_TAG: u8 = 6;
pub(crate) const MAJOR_SIMPLE: u8 = 7;

/// The initial byte and argument of one data item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Head {
    pub(crate) major: u8,
    /// The argument: a value, a length, a count, a tag number or a simple value / float bits.
    pub(crate) arg: u64,
    /// Offset of the initial byte, for error reports.
    pub(crate) offset: usize,
}

/// A key or value small enough to compare: the COSE parser only needs integers and strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Value<'a> {
    Int(i64),
    Bytes(&'a [u8]),
    Text(&'a str),
    /// Anything else (arrays, maps, tags, simple values, floats), kept as its raw encoding.
    Other(&'a [u8]),
}

/// A cursor over a byte slice. Reading never panics: every slice access is checked.
#[derive(Debug, Clone)]
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    pub(crate) fn position(&self) -> usize {
        self.pos
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    /// Fail unless every byte has been consumed.
    pub(crate) fn finish(&self) -> Result<(), CborError> {
        match self.remaining() {
            0 => Ok(()),
            count => Err(CborError::TrailingBytes { count }),
        }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], CborError> {
        let end = self.pos.checked_add(n);
        match end.and_then(|end| self.buf.get(self.pos..end)) {
            Some(bytes) => {
                self.pos += n;
                Ok(bytes)
            }
            None => Err(CborError::Truncated { offset: self.pos }),
        }
    }

    fn byte(&mut self) -> Result<u8, CborError> {
        let [b] = self.take(1)? else {
            return Err(CborError::Truncated { offset: self.pos });
        };
        Ok(*b)
    }

    /// Read an initial byte and its argument, insisting on the shortest encoding.
    pub(crate) fn head(&mut self) -> Result<Head, CborError> {
        let offset = self.pos;
        let initial = self.byte()?;
        let major = initial >> 5;
        let info = initial & 0x1f;
        let arg = match info {
            0..=23 => u64::from(info),
            24 => u64::from(self.byte()?),
            25 => u64::from(u16::from_be_bytes(self.array::<2>()?)),
            26 => u64::from(u32::from_be_bytes(self.array::<4>()?)),
            27 => u64::from_be_bytes(self.array::<8>()?),
            _ => return Err(CborError::Unsupported { offset }),
        };
        // Floats (major 7, info 25–27) carry bit patterns, not values, so minimality does not
        // apply to them; simple values below 32 must use the one-byte form (RFC 8949 §3.3).
        let minimal = match (major, info) {
            (MAJOR_SIMPLE, 24) => arg >= 32,
            (MAJOR_SIMPLE, 25..=27) => true,
            (_, 24) => arg >= 24,
            (_, 25) => arg > 0xff,
            (_, 26) => arg > 0xffff,
            (_, 27) => arg > 0xffff_ffff,
            _ => true,
        };
        if !minimal {
            return Err(CborError::NonMinimal { offset });
        }
        Ok(Head { major, arg, offset })
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], CborError> {
        let offset = self.pos;
        self.take(N)?
            .try_into()
            .map_err(|_| CborError::Truncated { offset })
    }

    /// A length argument as `usize`, refused if it exceeds what is left (so no huge loops or
    /// allocations can follow from a forged length).
    fn length(&self, head: Head) -> Result<usize, CborError> {
        usize::try_from(head.arg)
            .ok()
            .filter(|&len| len <= self.remaining())
            .ok_or(CborError::Truncated {
                offset: head.offset,
            })
    }

    fn expect_major(head: Head, expected: u8) -> Result<(), CborError> {
        if head.major == expected {
            Ok(())
        } else {
            Err(CborError::UnexpectedType {
                offset: head.offset,
                expected,
                got: head.major,
            })
        }
    }

    /// Read a map header and return its number of entries.
    pub(crate) fn map_len(&mut self) -> Result<usize, CborError> {
        let head = self.head()?;
        Self::expect_major(head, MAJOR_MAP)?;
        // Each entry needs at least two bytes; a larger count is a forged length.
        usize::try_from(head.arg)
            .ok()
            .filter(|&n| n <= self.remaining() / 2)
            .ok_or(CborError::Truncated {
                offset: head.offset,
            })
    }

    /// Read one key or value, decoding integers and strings and skipping anything else.
    pub(crate) fn value(&mut self, depth: usize) -> Result<Value<'a>, CborError> {
        let start = self.pos;
        let mut peek = self.clone();
        let head = peek.head()?;
        match head.major {
            MAJOR_UNSIGNED => {
                *self = peek;
                i64::try_from(head.arg)
                    .map(Value::Int)
                    .map_err(|_| CborError::IntegerOutOfRange {
                        offset: head.offset,
                    })
            }
            MAJOR_NEGATIVE => {
                *self = peek;
                // -1 - arg, computed without overflow: arg must be at most i64::MAX.
                i64::try_from(head.arg)
                    .map(|n| Value::Int(-1 - n))
                    .map_err(|_| CborError::IntegerOutOfRange {
                        offset: head.offset,
                    })
            }
            MAJOR_BYTES => {
                *self = peek;
                let len = self.length(head)?;
                self.take(len).map(Value::Bytes)
            }
            MAJOR_TEXT => {
                *self = peek;
                let len = self.length(head)?;
                let bytes = self.take(len)?;
                std::str::from_utf8(bytes)
                    .map(Value::Text)
                    .map_err(|_| CborError::InvalidUtf8 {
                        offset: head.offset,
                    })
            }
            _ => {
                self.skip(depth)?;
                let raw = self.buf.get(start..self.pos).unwrap_or_default();
                Ok(Value::Other(raw))
            }
        }
    }

    /// Skip exactly one well-formed item (and everything nested in it).
    pub(crate) fn skip(&mut self, depth: usize) -> Result<(), CborError> {
        if depth >= MAX_DEPTH {
            return Err(CborError::TooDeep);
        }
        let head = self.head()?;
        match head.major {
            MAJOR_UNSIGNED | MAJOR_NEGATIVE | MAJOR_SIMPLE => Ok(()),
            MAJOR_BYTES => {
                let len = self.length(head)?;
                self.take(len).map(drop)
            }
            MAJOR_TEXT => {
                let len = self.length(head)?;
                let bytes = self.take(len)?;
                std::str::from_utf8(bytes)
                    .map(drop)
                    .map_err(|_| CborError::InvalidUtf8 {
                        offset: head.offset,
                    })
            }
            MAJOR_ARRAY | MAJOR_MAP => {
                // A count larger than the remaining bytes cannot be satisfied; refusing it up
                // front bounds the loop by the input length.
                let count = self.length(head)?;
                let items = if head.major == MAJOR_MAP {
                    count.checked_mul(2)
                } else {
                    Some(count)
                }
                .ok_or(CborError::Truncated {
                    offset: head.offset,
                })?;
                for _ in 0..items {
                    self.skip(depth + 1)?;
                }
                Ok(())
            }
            MAJOR_TAG => self.skip(depth + 1),
            _ => Err(CborError::Unsupported {
                offset: head.offset,
            }),
        }
    }
}

/// The length of the single CBOR item at the start of `bytes` (which may continue after it).
pub(crate) fn item_len(bytes: &[u8]) -> Result<usize, CborError> {
    let mut reader = Reader::new(bytes);
    reader.skip(0)?;
    Ok(reader.position())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_integers_strings_and_skips_nested_items() {
        // {1: 2, 3: -7, -1: h'0102', "k": [1, {2: "x"}], 4: 1.5f16}
        let bytes = [
            0xa5, 0x01, 0x02, 0x03, 0x26, 0x20, 0x42, 0x01, 0x02, 0x61, b'k', 0x82, 0x01, 0xa1,
            0x02, 0x61, b'x', 0x04, 0xf9, 0x3e, 0x00,
        ];
        let mut r = Reader::new(&bytes);
        assert_eq!(r.map_len(), Ok(5));
        assert_eq!(r.value(1), Ok(Value::Int(1)));
        assert_eq!(r.value(1), Ok(Value::Int(2)));
        assert_eq!(r.value(1), Ok(Value::Int(3)));
        assert_eq!(r.value(1), Ok(Value::Int(-7)));
        assert_eq!(r.value(1), Ok(Value::Int(-1)));
        assert_eq!(r.value(1), Ok(Value::Bytes(&[1, 2])));
        assert_eq!(r.value(1), Ok(Value::Text("k")));
        assert_eq!(
            r.value(1),
            Ok(Value::Other(&[0x82, 0x01, 0xa1, 0x02, 0x61, b'x']))
        );
        assert_eq!(r.value(1), Ok(Value::Int(4)));
        assert_eq!(r.value(1), Ok(Value::Other(&[0xf9, 0x3e, 0x00])));
        assert_eq!(r.finish(), Ok(()));
        assert_eq!(item_len(&bytes), Ok(bytes.len()));
    }

    #[test]
    fn integer_extremes() {
        let max = [0x1b, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff];
        assert_eq!(Reader::new(&max).value(0), Ok(Value::Int(i64::MAX)));
        let min = [0x3b, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff];
        assert_eq!(Reader::new(&min).value(0), Ok(Value::Int(i64::MIN)));
        let too_big = [0x1b, 0x80, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(
            Reader::new(&too_big).value(0),
            Err(CborError::IntegerOutOfRange { offset: 0 })
        );
        let too_small = [0x3b, 0x80, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(
            Reader::new(&too_small).value(0),
            Err(CborError::IntegerOutOfRange { offset: 0 })
        );
    }

    #[test]
    fn refuses_non_minimal_arguments() {
        assert_eq!(
            item_len(&[0x18, 0x17]),
            Err(CborError::NonMinimal { offset: 0 })
        );
        assert_eq!(item_len(&[0x18, 0x18]), Ok(2));
        assert_eq!(
            item_len(&[0x19, 0x00, 0xff]),
            Err(CborError::NonMinimal { offset: 0 })
        );
        assert_eq!(item_len(&[0x19, 0x01, 0x00]), Ok(3));
        assert_eq!(
            item_len(&[0x1a, 0x00, 0x00, 0xff, 0xff]),
            Err(CborError::NonMinimal { offset: 0 })
        );
        assert_eq!(
            item_len(&[0x1b, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]),
            Err(CborError::NonMinimal { offset: 0 })
        );
        // A byte-string length spelled long.
        assert_eq!(
            item_len(&[0x58, 0x01, 0xaa]),
            Err(CborError::NonMinimal { offset: 0 })
        );
        // Simple value 20 (false) in the two-byte form.
        assert_eq!(
            item_len(&[0xf8, 0x14]),
            Err(CborError::NonMinimal { offset: 0 })
        );
        assert_eq!(item_len(&[0xf4]), Ok(1));
    }

    #[test]
    fn refuses_indefinite_lengths_and_reserved_values() {
        for initial in [0x5f, 0x7f, 0x9f, 0xbf, 0xff, 0x1c, 0x3d, 0xfe] {
            assert_eq!(
                item_len(&[initial, 0x00, 0xff]),
                Err(CborError::Unsupported { offset: 0 }),
                "initial byte {initial:#04x}"
            );
        }
    }

    #[test]
    fn refuses_truncation_and_forged_lengths() {
        assert_eq!(item_len(&[]), Err(CborError::Truncated { offset: 0 }));
        assert_eq!(
            item_len(&[0x19, 0x01]),
            Err(CborError::Truncated { offset: 1 })
        );
        assert_eq!(
            item_len(&[0x43, 1, 2]),
            Err(CborError::Truncated { offset: 0 })
        );
        // An array claiming 2^32 items in 6 bytes is refused before any loop runs.
        assert_eq!(
            item_len(&[0x9a, 0xff, 0xff, 0xff, 0xff, 0x00]),
            Err(CborError::Truncated { offset: 0 })
        );
        let mut r = Reader::new(&[0xb8, 0x20, 0x01]);
        assert_eq!(r.map_len(), Err(CborError::Truncated { offset: 0 }));
    }

    #[test]
    fn bounds_depth() {
        let mut deep = vec![0x81; MAX_DEPTH];
        deep.push(0x00);
        assert_eq!(item_len(&deep), Err(CborError::TooDeep));
        let ok = &deep[1..];
        assert_eq!(item_len(ok), Ok(ok.len()));
        let tags = vec![0xc1; MAX_DEPTH + 1];
        assert_eq!(item_len(&tags), Err(CborError::TooDeep));
    }

    #[test]
    fn refuses_invalid_utf8_text() {
        assert_eq!(
            item_len(&[0x62, 0xc3, 0x28]),
            Err(CborError::InvalidUtf8 { offset: 0 })
        );
        assert_eq!(item_len(&[0x62, 0xc3, 0xa9]), Ok(3));
    }

    #[test]
    fn finish_reports_trailing_bytes() {
        let mut r = Reader::new(&[0x01, 0x02]);
        assert_eq!(r.value(0), Ok(Value::Int(1)));
        assert_eq!(r.finish(), Err(CborError::TrailingBytes { count: 1 }));
    }

    #[test]
    fn map_len_requires_a_map() {
        let mut r = Reader::new(&[0x80]);
        assert_eq!(
            r.map_len(),
            Err(CborError::UnexpectedType {
                offset: 0,
                expected: MAJOR_MAP,
                got: MAJOR_ARRAY
            })
        );
    }
}
