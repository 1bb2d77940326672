//! The strict admission parser: JSON bytes to a `serde_json::Value`, refusing everything that two
//! honest implementations could read differently.
//!
//! serde_json cannot be the admission parser: it keeps the last of duplicate keys, accepts lone
//! surrogates in escapes (replacing them) and rounds big integers. This parser is a small
//! recursive descent over RFC 8259 with the extra refusals listed in `docs/spec/canon.md`.
//! Recursion is bounded by the depth cap, which is itself capped by [`MAX_DEPTH`] + 1.
//!
//! Object keys leave the parser in NFC (collisions are detected here, where the raw key is still
//! known). String *values* leave it as decoded, because an `exact` profile field must be checked
//! for NFC before anything normalizes it; the caller normalizes them afterwards.

use super::error::{CanonError, Segment, excerpt};
use super::text::{self, BadCodePoint};
use super::{MAX_DEPTH, MAX_FIELDS_BYTES};
use serde_json::{Map, Number, Value};

/// 2^53 - 1: the largest integer every IEEE-754 double consumer reads exactly.
pub(crate) const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// Limits and number policy for admitting a JSON text.
///
/// Only tightening is possible from outside the crate: the caps cannot be raised above
/// [`MAX_FIELDS_BYTES`] and [`MAX_DEPTH`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CanonLimits {
    max_bytes: usize,
    max_depth: usize,
    allow_floats: bool,
}

impl CanonLimits {
    /// The default: [`MAX_FIELDS_BYTES`], [`MAX_DEPTH`], integers only.
    pub const STRICT: Self = Self {
        max_bytes: MAX_FIELDS_BYTES,
        max_depth: MAX_DEPTH,
        allow_floats: false,
    };

    /// Allow (or refuse) numbers with a fraction or an exponent, read as IEEE-754 doubles.
    pub const fn with_floats(mut self, allow: bool) -> Self {
        self.allow_floats = allow;
        self
    }

    /// Lower the size cap (values above [`MAX_FIELDS_BYTES`] are clamped to it).
    pub const fn with_max_bytes(mut self, max_bytes: usize) -> Self {
        self.max_bytes = if max_bytes < MAX_FIELDS_BYTES {
            max_bytes
        } else {
            MAX_FIELDS_BYTES
        };
        self
    }

    /// Lower the depth cap (values above [`MAX_DEPTH`] are clamped to it).
    pub const fn with_max_depth(mut self, max_depth: usize) -> Self {
        self.max_depth = if max_depth < MAX_DEPTH {
            max_depth
        } else {
            MAX_DEPTH
        };
        self
    }

    /// Whether numbers with a fraction or an exponent are admitted.
    pub const fn allows_floats(&self) -> bool {
        self.allow_floats
    }

    /// An approval result: evidence entries are a few kilobytes each; their caps are not the
    /// action's.
    pub(crate) const ENVELOPE: Self = Self {
        max_bytes: super::MAX_ENVELOPE_BYTES,
        max_depth: MAX_DEPTH,
        allow_floats: true,
    };

    /// The op-hash document wraps `fields` one level down and adds a few short members around it.
    /// The `fields` value itself is still held to the field caps (see [`parse_document`]).
    pub(crate) const DOCUMENT: Self = Self {
        max_bytes: MAX_FIELDS_BYTES + 4096,
        max_depth: MAX_DEPTH + 1,
        allow_floats: true,
    };
}

impl Default for CanonLimits {
    fn default() -> Self {
        Self::STRICT
    }
}

/// Parse one JSON text under `limits`.
pub(crate) fn parse(raw: &[u8], limits: CanonLimits) -> Result<Value, CanonError> {
    let mut p = Parser::new(raw, limits)?;
    let value = p.value(0)?;
    p.finish()?;
    Ok(value)
}

/// Parse one JSON text under `limits`, keeping object keys exactly as decoded (not NFC).
///
/// Used where the strings as submitted matter: the NFC admission rule refuses (or lists) keys
/// that normalization would change, so it must see them before anything normalizes them.
pub(crate) fn parse_raw_keys(raw: &[u8], limits: CanonLimits) -> Result<Value, CanonError> {
    let mut p = Parser::new(raw, limits)?;
    p.raw_keys = true;
    let value = p.value(0)?;
    p.finish()?;
    Ok(value)
}

/// One member of a parsed top-level object, with the length of its raw value text.
#[derive(Debug)]
pub(crate) struct Member {
    pub(crate) key: String,
    pub(crate) value: Value,
    pub(crate) raw_len: usize,
}

/// Parse a top-level object and report its members with the raw byte length of each value, so the
/// op-hash document can hold its `fields` member to the same byte cap as `admit_fields`.
pub(crate) fn parse_document(raw: &[u8], limits: CanonLimits) -> Result<Vec<Member>, CanonError> {
    let mut p = Parser::new(raw, limits)?;
    p.record_members = true;
    match p.peek() {
        Some(b'{') => {
            p.value(0)?;
        }
        _ => return Err(p.syntax("a JSON object")),
    }
    p.finish()?;
    Ok(p.members)
}

struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    limits: CanonLimits,
    record_members: bool,
    members: Vec<Member>,
    /// Keep keys as decoded instead of normalizing them (see [`parse_raw_keys`]).
    raw_keys: bool,
}

impl<'a> Parser<'a> {
    fn new(raw: &'a [u8], limits: CanonLimits) -> Result<Self, CanonError> {
        // Size first: no work proportional to an oversized input.
        if raw.len() > limits.max_bytes {
            return Err(CanonError::TooLarge {
                limit: limits.max_bytes,
                got: raw.len(),
            });
        }
        let text = std::str::from_utf8(raw).map_err(|e| CanonError::InvalidUtf8 {
            offset: e.valid_up_to(),
        })?;
        let mut p = Self {
            text,
            bytes: raw,
            pos: 0,
            limits,
            record_members: false,
            members: Vec::new(),
            raw_keys: false,
        };
        p.skip_ws();
        Ok(p)
    }

    fn finish(&mut self) -> Result<(), CanonError> {
        self.skip_ws();
        if self.pos != self.bytes.len() {
            return Err(CanonError::TrailingData { offset: self.pos });
        }
        Ok(())
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn peek_at(&self, ahead: usize) -> Option<u8> {
        self.bytes.get(self.pos + ahead).copied()
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    fn syntax(&self, expected: &'static str) -> CanonError {
        CanonError::Syntax {
            offset: self.pos,
            path: String::new(),
            expected,
        }
    }

    /// A slice of the input between two positions that the scanner found on ASCII bytes, hence on
    /// character boundaries; `get` keeps even a scanner bug from panicking.
    fn slice(&self, start: usize, end: usize) -> Result<&'a str, CanonError> {
        self.text
            .get(start..end)
            .ok_or_else(|| self.syntax("a character boundary"))
    }

    /// A value; `depth` is the number of containers around it.
    fn value(&mut self, depth: usize) -> Result<Value, CanonError> {
        match self.peek() {
            Some(b'{') => self.object(depth + 1),
            Some(b'[') => self.array(depth + 1),
            Some(b'"') => self.string().map(Value::String),
            Some(b't') => self.literal("true", Value::Bool(true)),
            Some(b'f') => self.literal("false", Value::Bool(false)),
            Some(b'n') => self.literal("null", Value::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            // Not JSON, but common enough from JavaScript and Python emitters to name precisely.
            Some(b'+') => Err(self.not_a_number("a leading '+'")),
            Some(b'N')
                if self
                    .bytes
                    .get(self.pos..)
                    .is_some_and(|r| r.starts_with(b"NaN")) =>
            {
                Err(self.not_a_number("NaN"))
            }
            Some(b'I') if self.rest_starts_with(b"Infinity") => Err(self.not_a_number("Infinity")),
            _ => Err(self.syntax("a JSON value")),
        }
    }

    fn rest_starts_with(&self, word: &[u8]) -> bool {
        self.bytes
            .get(self.pos..)
            .is_some_and(|r| r.starts_with(word))
    }

    fn not_a_number(&self, found: &'static str) -> CanonError {
        CanonError::NotJsonNumber {
            offset: self.pos,
            path: String::new(),
            found,
        }
    }

    fn literal(&mut self, word: &'static str, value: Value) -> Result<Value, CanonError> {
        if !self.rest_starts_with(word.as_bytes()) {
            return Err(self.syntax(word));
        }
        self.pos += word.len();
        Ok(value)
    }

    fn enter(&self, depth: usize) -> Result<(), CanonError> {
        if depth > self.limits.max_depth {
            return Err(CanonError::TooDeep {
                limit: self.limits.max_depth,
                path: String::new(),
            });
        }
        Ok(())
    }

    fn object(&mut self, depth: usize) -> Result<Value, CanonError> {
        self.enter(depth)?;
        self.pos += 1; // '{'
        let mut map = Map::new();
        // Keys whose NFC differs from the decoded text, to tell a duplicate from an NFC collision.
        // Almost always empty: ASCII keys are already NFC.
        let mut renamed: Vec<(String, String)> = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(Value::Object(map));
        }
        loop {
            self.skip_ws();
            if self.peek() != Some(b'"') {
                return Err(self.syntax("a string key"));
            }
            let raw_key = self.string()?;
            let (key, renamed_from) = if self.raw_keys || text::is_nfc(&raw_key) {
                (raw_key, None)
            } else {
                (text::nfc_owned(raw_key.clone()), Some(raw_key))
            };
            if map.contains_key(&key) {
                let earlier = renamed
                    .iter()
                    .find(|(nfc, _)| *nfc == key)
                    .map_or(key.as_str(), |(_, raw)| raw.as_str());
                let current = renamed_from.as_deref().unwrap_or(&key);
                return Err(key_clash(earlier, current));
            }
            if let Some(raw) = renamed_from {
                renamed.push((key.clone(), raw));
            }
            self.skip_ws();
            if self.peek() != Some(b':') {
                return Err(self.syntax("':'"));
            }
            self.pos += 1;
            self.skip_ws();
            let start = self.pos;
            let value = self.value(depth).map_err(|e| e.under(Segment::Key(&key)))?;
            if self.record_members && depth == 1 {
                self.members.push(Member {
                    key: key.clone(),
                    value: value.clone(),
                    raw_len: self.pos - start,
                });
            }
            map.insert(key, value);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(Value::Object(map));
                }
                _ => return Err(self.syntax("',' or '}'")),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<Value, CanonError> {
        self.enter(depth)?;
        self.pos += 1; // '['
        let mut items = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(Value::Array(items));
        }
        loop {
            self.skip_ws();
            let index = items.len();
            let item = self
                .value(depth)
                .map_err(|e| e.under(Segment::Index(index)))?;
            items.push(item);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Value::Array(items));
                }
                _ => return Err(self.syntax("',' or ']'")),
            }
        }
    }

    /// A string, decoded, with its code points checked; not normalized.
    fn string(&mut self) -> Result<String, CanonError> {
        self.pos += 1; // '"'
        // Allocate a buffer only once an escape forces one.
        let mut decoded: Option<String> = None;
        let mut run = self.pos;
        loop {
            match self.peek() {
                None => return Err(self.syntax("a closing '\"'")),
                Some(b'"') => {
                    let tail = self.slice(run, self.pos)?;
                    self.pos += 1;
                    let s = match decoded {
                        Some(mut d) => {
                            d.push_str(tail);
                            d
                        }
                        None => tail.to_owned(),
                    };
                    check_code_points(&s)?;
                    return Ok(s);
                }
                Some(b'\\') => {
                    let d = decoded.get_or_insert_with(String::new);
                    d.push_str(self.slice(run, self.pos)?);
                    self.escape(d)?;
                    run = self.pos;
                }
                Some(b @ 0x00..=0x1F) => {
                    return Err(CanonError::UnescapedControl {
                        offset: self.pos,
                        path: String::new(),
                        code_point: u32::from(b),
                    });
                }
                Some(_) => self.pos += 1,
            }
        }
    }

    /// One escape sequence at `self.pos` (on the backslash), appended to `out`.
    fn escape(&mut self, out: &mut String) -> Result<(), CanonError> {
        let start = self.pos;
        let simple = match self.peek_at(1) {
            Some(b'"') => '"',
            Some(b'\\') => '\\',
            Some(b'/') => '/',
            Some(b'b') => '\u{8}',
            Some(b'f') => '\u{c}',
            Some(b'n') => '\n',
            Some(b'r') => '\r',
            Some(b't') => '\t',
            Some(b'u') => return self.unicode_escape(start, out),
            _ => return Err(self.invalid_escape(start)),
        };
        out.push(simple);
        self.pos += 2;
        Ok(())
    }

    fn unicode_escape(&mut self, start: usize, out: &mut String) -> Result<(), CanonError> {
        let unit = self.hex4(start + 2)?;
        self.pos = start + 6;
        let code_point = match unit {
            0xD800..=0xDBFF => {
                // A high surrogate must be followed at once by an escaped low surrogate.
                let low = if self.peek() == Some(b'\\') && self.peek_at(1) == Some(b'u') {
                    Some(self.hex4(self.pos + 2)?)
                } else {
                    None
                };
                match low {
                    Some(low @ 0xDC00..=0xDFFF) => {
                        self.pos += 6;
                        0x10000 + ((u32::from(unit) - 0xD800) << 10) + (u32::from(low) - 0xDC00)
                    }
                    _ => return Err(lone_surrogate(start, unit)),
                }
            }
            0xDC00..=0xDFFF => return Err(lone_surrogate(start, unit)),
            _ => u32::from(unit),
        };
        let c = char::from_u32(code_point).ok_or_else(|| self.invalid_escape(start))?;
        out.push(c);
        Ok(())
    }

    fn hex4(&self, at: usize) -> Result<u16, CanonError> {
        let digits = self
            .bytes
            .get(at..at + 4)
            .ok_or_else(|| self.invalid_escape(at))?;
        let mut unit: u16 = 0;
        for &d in digits {
            let v = match d {
                b'0'..=b'9' => d - b'0',
                b'a'..=b'f' => d - b'a' + 10,
                b'A'..=b'F' => d - b'A' + 10,
                _ => return Err(self.invalid_escape(at)),
            };
            unit = (unit << 4) | u16::from(v);
        }
        Ok(unit)
    }

    fn invalid_escape(&self, offset: usize) -> CanonError {
        CanonError::InvalidEscape {
            offset,
            path: String::new(),
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.pos;
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
        self.pos - start
    }

    /// A number, by the RFC 8259 grammar, then the range and float policy.
    fn number(&mut self) -> Result<Value, CanonError> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
            if self.peek() == Some(b'I') && self.rest_starts_with(b"Infinity") {
                return Err(self.not_a_number("-Infinity"));
            }
        }
        match self.peek() {
            Some(b'0') => {
                self.pos += 1;
                if let Some(b'0'..=b'9') = self.peek() {
                    return Err(self.not_a_number("a leading zero"));
                }
            }
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return Err(self.syntax("a digit")),
        }
        let mut float = false;
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if self.digits() == 0 {
                return Err(self.syntax("a digit after '.'"));
            }
            float = true;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if self.digits() == 0 {
                return Err(self.syntax("a digit in the exponent"));
            }
            float = true;
        }
        let literal = self.slice(start, self.pos)?;
        if float {
            self.float(literal)
        } else {
            integer(literal)
        }
    }

    fn float(&self, literal: &str) -> Result<Value, CanonError> {
        let evidence = || (String::new(), excerpt(literal));
        if !self.limits.allow_floats {
            let (path, literal) = evidence();
            return Err(CanonError::FloatNotAllowed { path, literal });
        }
        // Rust's parse is correctly rounded, as RFC 8785 expects of the producer's double.
        let v: f64 = literal.parse().map_err(|_| self.syntax("a number"))?;
        if !v.is_finite() {
            let (path, literal) = evidence();
            return Err(CanonError::NonFiniteNumber { path, literal });
        }
        // An integral double past 2^53 no longer names one integer (1e300, 1.0e20): refuse it
        // even where floats are allowed, so every integral value admitted is a safe integer.
        if v.fract() == 0.0 && v.abs() > MAX_SAFE_INTEGER as f64 {
            let (path, literal) = evidence();
            return Err(CanonError::IntegerOutOfRange { path, literal });
        }
        match Number::from_f64(v) {
            Some(n) => Ok(Value::Number(n)),
            None => {
                let (path, literal) = evidence();
                Err(CanonError::NonFiniteNumber { path, literal })
            }
        }
    }
}

fn integer(literal: &str) -> Result<Value, CanonError> {
    match literal.parse::<i64>() {
        Ok(n) if n.unsigned_abs() <= MAX_SAFE_INTEGER => Ok(Value::from(n)),
        _ => Err(CanonError::IntegerOutOfRange {
            path: String::new(),
            literal: excerpt(literal),
        }),
    }
}

fn lone_surrogate(offset: usize, unit: u16) -> CanonError {
    CanonError::LoneSurrogate {
        offset,
        path: String::new(),
        unit,
    }
}

fn check_code_points(s: &str) -> Result<(), CanonError> {
    text::check_code_points(s).map_err(|bad| match bad {
        BadCodePoint::Noncharacter(code_point) => CanonError::Noncharacter {
            path: String::new(),
            code_point,
        },
        BadCodePoint::Unassigned(code_point) => CanonError::UnassignedCodePoint {
            path: String::new(),
            code_point,
        },
    })
}

/// Two keys of one object with the same NFC: a plain duplicate when the decoded texts are
/// identical (`{"a":1,"\u0061":2}`), an NFC collision when only their normal forms are.
fn key_clash(first: &str, second: &str) -> CanonError {
    if first == second {
        CanonError::DuplicateKey {
            path: String::new(),
            key: excerpt(second),
        }
    } else {
        CanonError::NfcKeyCollision {
            path: String::new(),
            first: excerpt(first),
            second: excerpt(second),
        }
    }
}
