//! The typed refusals of canonicalization.
//!
//! Paths are JSON-pointer-like (`/params/items/3`, RFC 6901 escaping), relative to the document
//! that was admitted (the `fields` object for [`crate::admit_fields`]). Evidence taken from the
//! input (keys, literals, values) is cut to a short excerpt so an error never carries 64 KiB.

use super::profile::FieldKind;
use crate::reason::ReasonCode;

/// Why an input was refused before canonicalization.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CanonError {
    // --- size and shape of the text -------------------------------------------------------
    /// The text is longer than the admission cap.
    #[error("input is {got} bytes, over the {limit}-byte cap")]
    TooLarge {
        /// The cap.
        limit: usize,
        /// The length of the input, in bytes.
        got: usize,
    },
    /// Objects and arrays nest deeper than the cap.
    #[error("nesting deeper than {limit} at {path:?}")]
    TooDeep {
        /// The cap.
        limit: usize,
        /// Where, as a JSON pointer into the admitted document.
        path: String,
    },
    /// The bytes are not UTF-8.
    #[error("invalid UTF-8 at byte {offset}")]
    InvalidUtf8 {
        /// Byte offset into the input text.
        offset: usize,
    },
    /// The text is not JSON.
    #[error("invalid JSON at byte {offset} ({path:?}): expected {expected}")]
    Syntax {
        /// Byte offset into the input text.
        offset: usize,
        /// Where, as a JSON pointer into the admitted document.
        path: String,
        /// What the parser expected there.
        expected: &'static str,
    },
    /// Something other than whitespace follows the one JSON value.
    #[error("trailing data after the JSON value at byte {offset}")]
    TrailingData {
        /// Byte offset into the input text.
        offset: usize,
    },

    // --- strings ----------------------------------------------------------------------------
    /// A string holds a raw control character (below U+0020), which JSON requires escaped.
    #[error(
        "unescaped control character U+{code_point:04X} in a string at byte {offset} ({path:?})"
    )]
    UnescapedControl {
        /// Byte offset into the input text.
        offset: usize,
        /// Where, as a JSON pointer into the admitted document.
        path: String,
        /// The offending code point.
        code_point: u32,
    },
    /// A string has a backslash escape JSON does not define.
    #[error("invalid escape sequence at byte {offset} ({path:?})")]
    InvalidEscape {
        /// Byte offset into the input text.
        offset: usize,
        /// Where, as a JSON pointer into the admitted document.
        path: String,
    },
    /// A `\u` escape names half of a surrogate pair: no Unicode scalar value, so no NFC and no
    /// canonical form.
    #[error("lone surrogate \\u{unit:04X} at byte {offset} ({path:?})")]
    LoneSurrogate {
        /// Byte offset into the input text.
        offset: usize,
        /// Where, as a JSON pointer into the admitted document.
        path: String,
        /// The unpaired UTF-16 code unit.
        unit: u16,
    },
    /// A string holds a code point unassigned in the pinned Unicode version: its NFC could change
    /// when Unicode assigns it, and op_hash with it.
    #[error("code point U+{code_point:04X} is unassigned in Unicode {}.{}.{} ({path:?})",
        super::UNICODE_VERSION.0, super::UNICODE_VERSION.1, super::UNICODE_VERSION.2)]
    UnassignedCodePoint {
        /// Where, as a JSON pointer into the admitted document.
        path: String,
        /// The offending code point.
        code_point: u32,
    },
    /// A string holds a Unicode noncharacter (U+FDD0..U+FDEF, or U+xxFFFE and U+xxFFFF).
    #[error("noncharacter U+{code_point:04X} ({path:?})")]
    Noncharacter {
        /// Where, as a JSON pointer into the admitted document.
        path: String,
        /// The offending code point.
        code_point: u32,
    },

    // --- objects ----------------------------------------------------------------------------
    /// An object names one key twice: two readers could take different values from one text.
    #[error("duplicate object key {key:?} at {path:?}")]
    DuplicateKey {
        /// Where, as a JSON pointer into the admitted document.
        path: String,
        /// The repeated key (an excerpt).
        key: String,
    },
    /// Two keys of one object differ as written but are equal after NFC.
    #[error("object keys {first:?} and {second:?} are equal after NFC at {path:?}")]
    NfcKeyCollision {
        /// Where, as a JSON pointer into the admitted document.
        path: String,
        /// The first key as written (an excerpt).
        first: String,
        /// The second key as written (an excerpt).
        second: String,
    },

    // --- numbers ----------------------------------------------------------------------------
    /// A number spelled in a way JSON does not allow (a leading zero or `+`, a bare `.`, `NaN`,
    /// ...).
    #[error("{found} is not a JSON number, at byte {offset} ({path:?})")]
    NotJsonNumber {
        /// Byte offset into the input text.
        offset: usize,
        /// Where, as a JSON pointer into the admitted document.
        path: String,
        /// What stands where the number should be.
        found: &'static str,
    },
    /// An integer beyond ±(2^53-1): a reader that parses numbers as doubles would see another
    /// value.
    #[error("integer {literal} is outside ±(2^53-1) at {path:?}")]
    IntegerOutOfRange {
        /// Where, as a JSON pointer into the admitted document.
        path: String,
        /// The number as written (an excerpt).
        literal: String,
    },
    /// A number with a fraction or an exponent where the profile admits integers only.
    #[error("non-integer number {literal} at {path:?}, and the profile does not allow floats")]
    FloatNotAllowed {
        /// Where, as a JSON pointer into the admitted document.
        path: String,
        /// The number as written (an excerpt).
        literal: String,
    },
    /// A number too large for an IEEE-754 double, which JCS cannot write.
    #[error("number {literal} is not a finite IEEE-754 double at {path:?}")]
    NonFiniteNumber {
        /// Where, as a JSON pointer into the admitted document.
        path: String,
        /// The number as written (an excerpt).
        literal: String,
    },

    // --- the profile's field rules ----------------------------------------------------------
    /// The fields are not a JSON object.
    #[error("the fields must be a JSON object, found {found}")]
    NotAnObject {
        /// The JSON type found instead.
        found: &'static str,
    },
    /// A field the profile declares is absent.
    #[error("field {field:?} required by the profile is missing")]
    MissingField {
        /// The field's name.
        field: String,
    },
    /// A field the profile does not declare is present: nothing the approver was not shown may ride
    /// along.
    #[error("field {field:?} is not declared by the profile")]
    UnexpectedField {
        /// The field's name.
        field: String,
    },
    /// A field's JSON type is not the one its profile declares.
    #[error("field {field:?} must be {expected:?}, found {found}")]
    FieldType {
        /// The field's name.
        field: String,
        /// The kind the profile declares.
        expected: FieldKind,
        /// The JSON type found instead.
        found: &'static str,
    },
    /// A field has its declared JSON type but not its kind's format (a decimal, currency or
    /// identifier).
    #[error("field {field:?} value {value:?} is not a valid {kind:?}")]
    FieldFormat {
        /// The field's name.
        field: String,
        /// The kind the profile declares.
        kind: FieldKind,
        /// The value as written (an excerpt).
        value: String,
    },
    /// An `exact` field's string is not already in NFC: exact fields are refused, never normalized.
    #[error("field {field:?} is exact and its value is not already in NFC")]
    FieldNotNfc {
        /// The field's name.
        field: String,
    },
    /// A key or string value that NFC would change, refused under [`super::NfcMode::Require`].
    #[error("{0}")]
    NotNfc(super::NonNfc),

    // --- the op-hash document and the registry ----------------------------------------------
    /// The profile id is not in the verifier's registry.
    #[error("unknown canonicalization profile {0:?}")]
    UnknownProfile(String),
    /// The decision is neither `APPROVED` nor `DENIED` (the spelling is case-sensitive).
    #[error("decision must be \"APPROVED\" or \"DENIED\", found {got:?}")]
    InvalidDecision {
        /// The decision as written (an excerpt).
        got: String,
    },
    /// An op-hash document member is missing, unknown or of the wrong type.
    #[error("op-hash document member {member:?}: {problem}")]
    Document {
        /// The member's name (an excerpt).
        member: String,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// The JCS writer refused a value admission had accepted: a bug, reported instead of a panic.
    #[error("the JCS serializer refused the admitted value: {detail}")]
    Jcs {
        /// The writer's message.
        detail: String,
    },
}

impl CanonError {
    /// The wire reason code for this error.
    pub fn reason_code(&self) -> ReasonCode {
        match self {
            Self::UnknownProfile(_) => ReasonCode::ProfileUnknown,
            _ => ReasonCode::ActionInadmissible,
        }
    }

    /// Prefix the error's path with one more segment while the error unwinds out of a container.
    /// Building the path on the way out costs nothing on the success path.
    pub(crate) fn under(mut self, segment: Segment<'_>) -> Self {
        if let Some(path) = self.path_mut() {
            let mut prefixed = String::with_capacity(path.len() + 8);
            prefixed.push('/');
            match segment {
                Segment::Key(k) => push_pointer_token(&mut prefixed, k),
                Segment::Index(i) => prefixed.push_str(&i.to_string()),
            }
            prefixed.push_str(path);
            *path = prefixed;
        }
        self
    }

    fn path_mut(&mut self) -> Option<&mut String> {
        match self {
            Self::TooDeep { path, .. }
            | Self::Syntax { path, .. }
            | Self::UnescapedControl { path, .. }
            | Self::InvalidEscape { path, .. }
            | Self::LoneSurrogate { path, .. }
            | Self::UnassignedCodePoint { path, .. }
            | Self::Noncharacter { path, .. }
            | Self::DuplicateKey { path, .. }
            | Self::NfcKeyCollision { path, .. }
            | Self::NotJsonNumber { path, .. }
            | Self::IntegerOutOfRange { path, .. }
            | Self::FloatNotAllowed { path, .. }
            | Self::NonFiniteNumber { path, .. } => Some(path),
            _ => None,
        }
    }
}

/// One step of a path.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Segment<'a> {
    Key(&'a str),
    Index(usize),
}

/// Longest excerpt of input text carried by an error.
const EXCERPT_CHARS: usize = 64;

/// A short excerpt of input text for error evidence.
pub(crate) fn excerpt(s: &str) -> String {
    match s.char_indices().nth(EXCERPT_CHARS) {
        Some((cut, _)) => format!("{}…", s.get(..cut).unwrap_or_default()),
        None => s.to_owned(),
    }
}

/// RFC 6901 escaping of one reference token (`~` then `/`), on an excerpt of the key.
fn push_pointer_token(out: &mut String, key: &str) {
    for c in excerpt(key).chars() {
        match c {
            '~' => out.push_str("~0"),
            '/' => out.push_str("~1"),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_is_built_outward_with_pointer_escaping() {
        let e = CanonError::DuplicateKey {
            path: String::new(),
            key: "k".into(),
        }
        .under(Segment::Index(3))
        .under(Segment::Key("a/b~c"));
        assert_eq!(
            e,
            CanonError::DuplicateKey {
                path: "/a~1b~0c/3".into(),
                key: "k".into()
            }
        );
    }

    #[test]
    fn errors_without_a_path_are_unchanged() {
        let e = CanonError::TooLarge { limit: 1, got: 2 };
        assert_eq!(e.clone().under(Segment::Key("x")), e);
    }

    #[test]
    fn excerpt_cuts_long_text() {
        assert_eq!(excerpt("short"), "short");
        let long = "é".repeat(100);
        assert_eq!(excerpt(&long).chars().count(), EXCERPT_CHARS + 1);
    }

    #[test]
    fn reason_codes() {
        assert_eq!(
            CanonError::UnknownProfile("x/1".into()).reason_code(),
            ReasonCode::ProfileUnknown
        );
        assert_eq!(
            CanonError::TooLarge { limit: 1, got: 2 }.reason_code(),
            ReasonCode::ActionInadmissible
        );
    }
}
