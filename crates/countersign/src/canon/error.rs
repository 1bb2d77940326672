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
    #[error("input is {got} bytes, over the {limit}-byte cap")]
    TooLarge { limit: usize, got: usize },
    #[error("nesting deeper than {limit} at {path:?}")]
    TooDeep { limit: usize, path: String },
    #[error("invalid UTF-8 at byte {offset}")]
    InvalidUtf8 { offset: usize },
    #[error("invalid JSON at byte {offset} ({path:?}): expected {expected}")]
    Syntax {
        offset: usize,
        path: String,
        expected: &'static str,
    },
    #[error("trailing data after the JSON value at byte {offset}")]
    TrailingData { offset: usize },

    // --- strings ----------------------------------------------------------------------------
    #[error(
        "unescaped control character U+{code_point:04X} in a string at byte {offset} ({path:?})"
    )]
    UnescapedControl {
        offset: usize,
        path: String,
        code_point: u32,
    },
    #[error("invalid escape sequence at byte {offset} ({path:?})")]
    InvalidEscape { offset: usize, path: String },
    #[error("lone surrogate \\u{unit:04X} at byte {offset} ({path:?})")]
    LoneSurrogate {
        offset: usize,
        path: String,
        unit: u16,
    },
    #[error("code point U+{code_point:04X} is unassigned in Unicode {}.{}.{} ({path:?})",
        super::UNICODE_VERSION.0, super::UNICODE_VERSION.1, super::UNICODE_VERSION.2)]
    UnassignedCodePoint { path: String, code_point: u32 },
    #[error("noncharacter U+{code_point:04X} ({path:?})")]
    Noncharacter { path: String, code_point: u32 },

    // --- objects ----------------------------------------------------------------------------
    #[error("duplicate object key {key:?} at {path:?}")]
    DuplicateKey { path: String, key: String },
    #[error("object keys {first:?} and {second:?} are equal after NFC at {path:?}")]
    NfcKeyCollision {
        path: String,
        first: String,
        second: String,
    },

    // --- numbers ----------------------------------------------------------------------------
    #[error("{found} is not a JSON number, at byte {offset} ({path:?})")]
    NotJsonNumber {
        offset: usize,
        path: String,
        found: &'static str,
    },
    #[error("integer {literal} is outside ±(2^53-1) at {path:?}")]
    IntegerOutOfRange { path: String, literal: String },
    #[error("non-integer number {literal} at {path:?}, and the profile does not allow floats")]
    FloatNotAllowed { path: String, literal: String },
    #[error("number {literal} is not a finite IEEE-754 double at {path:?}")]
    NonFiniteNumber { path: String, literal: String },

    // --- the profile's field rules ----------------------------------------------------------
    #[error("the fields must be a JSON object, found {found}")]
    NotAnObject { found: &'static str },
    #[error("field {field:?} required by the profile is missing")]
    MissingField { field: String },
    #[error("field {field:?} is not declared by the profile")]
    UnexpectedField { field: String },
    #[error("field {field:?} must be {expected:?}, found {found}")]
    FieldType {
        field: String,
        expected: FieldKind,
        found: &'static str,
    },
    #[error("field {field:?} value {value:?} is not a valid {kind:?}")]
    FieldFormat {
        field: String,
        kind: FieldKind,
        value: String,
    },
    #[error("field {field:?} is exact and its value is not already in NFC")]
    FieldNotNfc { field: String },
    /// A key or string value that NFC would change, refused under [`super::NfcMode::Require`].
    #[error("{0}")]
    NotNfc(super::NonNfc),

    // --- the op-hash document and the registry ----------------------------------------------
    #[error("unknown canonicalization profile {0:?}")]
    UnknownProfile(String),
    #[error("decision must be \"APPROVED\" or \"DENIED\", found {got:?}")]
    InvalidDecision { got: String },
    #[error("op-hash document member {member:?}: {problem}")]
    Document {
        member: String,
        problem: &'static str,
    },
    #[error("the JCS serializer refused the admitted value: {detail}")]
    Jcs { detail: String },
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
