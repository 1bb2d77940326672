//! Profiles as data: which fields an action has, their types and display labels, pinned by digest.
//!
//! A profile definition is a small JSON document. It is admitted with the same strict parser as
//! action fields, every string in it must already be NFC (so its digest is the same whatever JCS
//! implementation computes it), and its digest is SHA-256 over its JCS form. The verifier resolves
//! the profile named by the evidence in its own pinned registry, never from the evidence itself.

use super::error::CanonError;
use super::json::{self, CanonLimits};
use super::text;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The type of one profile field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FieldKind {
    /// Any string; normalized to NFC unless the field is `exact`.
    String,
    /// A decimal number carried as a string: `-?(0|[1-9][0-9]*)(\.[0-9]+)?`, at most 64 characters,
    /// no negative zero. Compared as text: `"40000.00"` and `"40000"` are different values.
    Decimal,
    /// An integer JSON number within ±(2^53-1).
    Integer,
    /// `true` or `false`.
    Boolean,
    /// Any JSON object, admitted and normalized recursively.
    Object,
    /// Any JSON value, admitted and normalized recursively.
    Any,
    /// An ISO 4217-shaped code: exactly three ASCII capital letters.
    Currency,
    /// 1 to 256 printable ASCII characters (U+0021..U+007E), no spaces.
    Identifier,
}

impl FieldKind {
    /// Whether `exact` means something for this type (it does for strings only).
    fn is_textual(self) -> bool {
        matches!(
            self,
            Self::String | Self::Decimal | Self::Currency | Self::Identifier
        )
    }
}

/// One declared field of a profile.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FieldSpec {
    /// The key in the `fields` object: `[a-z][a-z0-9_]*`, at most 64 characters.
    pub name: String,
    /// The JSON type the value must have (`"type"` in the definition).
    #[serde(rename = "type")]
    pub kind: FieldKind,
    /// What the approver page shows next to the value.
    pub label: String,
    /// The value must already be NFC; it is refused, not normalized, otherwise.
    #[serde(default)]
    pub exact: bool,
}

/// A validated, digested profile definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    /// `name/N`, e.g. `countersign.payment/1`. This string is what op_hash covers.
    pub id: String,
    /// `N` from the id.
    pub version: u32,
    /// What the approver page shows as the heading of the request.
    pub title: String,
    /// In declaration order (which is also the display order).
    pub fields: Vec<FieldSpec>,
    /// Whether numbers with a fraction or exponent are admitted anywhere in the fields.
    pub allow_floats: bool,
    /// SHA-256 of the JCS form of the definition document.
    pub digest: [u8; 32],
}

/// The on-disk shape of a definition. Unknown members are refused: a typo must not silently drop
/// a rule (a misspelt `"exact"` would otherwise weaken the field).
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Definition {
    id: String,
    title: String,
    #[serde(default)]
    allow_floats: bool,
    fields: Vec<FieldSpec>,
}

/// Longest title or label accepted, in characters.
const MAX_TEXT_CHARS: usize = 200;
/// Most fields one profile may declare.
const MAX_FIELDS: usize = 64;

/// Why a profile definition was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProfileError {
    /// The definition is not JSON the strict parser admits.
    #[error("profile definition is not admissible JSON: {0}")]
    Inadmissible(#[from] CanonError),
    /// A string in the definition is not in NFC: the digest would depend on the editor.
    #[error("profile definition string at {path} is not in NFC")]
    NotNfc {
        /// Where the string is in the definition.
        path: String,
    },
    /// The definition does not have the profile shape (an unknown or missing member, a wrong type).
    #[error("profile definition has the wrong shape: {detail}")]
    Shape {
        /// The parser's message.
        detail: String,
    },
    /// The id is not `name/N`.
    #[error("profile id {id:?} is not of the form name/N")]
    InvalidId {
        /// The id as written.
        id: String,
    },
    /// The title is empty, longer than 200 characters or holds control characters.
    #[error("profile title is empty, too long or contains control characters")]
    InvalidTitle,
    /// The definition declares no field, or more than 64.
    #[error("a profile declares 1 to {MAX_FIELDS} fields, this one declares {count}")]
    FieldCount {
        /// How many fields were declared.
        count: usize,
    },
    /// A field name is not `[a-z][a-z0-9_]*` of at most 64 characters.
    #[error("field name {name:?} is not [a-z][a-z0-9_]* (at most 64 characters)")]
    InvalidFieldName {
        /// The field's name.
        name: String,
    },
    /// A field is declared twice.
    #[error("field {name:?} is declared twice")]
    DuplicateField {
        /// The field's name.
        name: String,
    },
    /// A field's label is empty, longer than 200 characters or holds control characters.
    #[error("field {field:?} has an empty, too long or control-character label")]
    InvalidLabel {
        /// The field's name.
        field: String,
    },
    /// `exact` is set on a field whose values are not strings.
    #[error("field {field:?} is marked exact but {kind:?} values are not strings")]
    ExactNotApplicable {
        /// The field's name.
        field: String,
        /// The kind the field declares.
        kind: FieldKind,
    },
    /// The definition's digest is not the one it was pinned with: the definition changed.
    #[error(
        "profile digest {} does not match the pinned {}",
        hex(got),
        hex(expected)
    )]
    DigestMismatch {
        /// The pinned SHA-256.
        expected: [u8; 32],
        /// The SHA-256 of the definition's JCS form.
        got: [u8; 32],
    },
    /// Another definition is already registered under this id.
    #[error("profile id {id:?} is already registered with a different definition")]
    IdCollision {
        /// The id as written.
        id: String,
    },
}

impl ProfileError {
    /// A definition that cannot be pinned leaves its id unknown to the registry.
    pub fn reason_code(&self) -> crate::ReasonCode {
        crate::ReasonCode::ProfileUnknown
    }
}

fn hex(bytes: &[u8; 32]) -> String {
    bytes.iter().fold(String::with_capacity(64), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

impl Profile {
    /// Parse, validate and digest a profile definition document.
    pub fn from_definition(raw: &[u8]) -> Result<Self, ProfileError> {
        let value = json::parse(raw, CanonLimits::STRICT)?;
        require_nfc(&value, &mut String::new())?;
        // The digest covers the document as written (all strings NFC, checked just above), so any
        // RFC 8785 implementation reproduces it from the file.
        let jcs = serde_jcs::to_vec(&value).map_err(|e| CanonError::Jcs {
            detail: e.to_string(),
        })?;
        let digest: [u8; 32] = Sha256::digest(&jcs).into();
        let def: Definition = serde_json::from_value(value).map_err(|e| ProfileError::Shape {
            detail: e.to_string(),
        })?;
        let version =
            parse_id(&def.id).ok_or_else(|| ProfileError::InvalidId { id: def.id.clone() })?;
        if !valid_text(&def.title) {
            return Err(ProfileError::InvalidTitle);
        }
        if def.fields.is_empty() || def.fields.len() > MAX_FIELDS {
            return Err(ProfileError::FieldCount {
                count: def.fields.len(),
            });
        }
        for (i, spec) in def.fields.iter().enumerate() {
            check_field(spec)?;
            if def
                .fields
                .iter()
                .take(i)
                .any(|earlier| earlier.name == spec.name)
            {
                return Err(ProfileError::DuplicateField {
                    name: spec.name.clone(),
                });
            }
        }
        Ok(Self {
            id: def.id,
            version,
            title: def.title,
            fields: def.fields,
            allow_floats: def.allow_floats,
            digest,
        })
    }

    /// The declared field called `name`.
    pub fn field(&self, name: &str) -> Option<&FieldSpec> {
        self.fields.iter().find(|f| f.name == name)
    }
}

fn check_field(spec: &FieldSpec) -> Result<(), ProfileError> {
    if !valid_field_name(&spec.name) {
        return Err(ProfileError::InvalidFieldName {
            name: spec.name.clone(),
        });
    }
    if !valid_text(&spec.label) {
        return Err(ProfileError::InvalidLabel {
            field: spec.name.clone(),
        });
    }
    if spec.exact && !spec.kind.is_textual() {
        return Err(ProfileError::ExactNotApplicable {
            field: spec.name.clone(),
            kind: spec.kind,
        });
    }
    Ok(())
}

/// Every string (keys are NFC already) of a definition must be NFC as written.
fn require_nfc(value: &Value, path: &mut String) -> Result<(), ProfileError> {
    match value {
        Value::String(s) if !text::is_nfc(s) => Err(ProfileError::NotNfc { path: path.clone() }),
        Value::Array(items) => items.iter().enumerate().try_for_each(|(i, v)| {
            let len = path.len();
            let _ = write!(path, "/{i}");
            let r = require_nfc(v, path);
            path.truncate(len);
            r
        }),
        Value::Object(map) => map.iter().try_for_each(|(k, v)| {
            let len = path.len();
            let _ = write!(path, "/{k}");
            let r = require_nfc(v, path);
            path.truncate(len);
            r
        }),
        _ => Ok(()),
    }
}

/// `name/N`: a name of lowercase ASCII words joined by single `.` or `-`, at most 64 characters,
/// and a version `N` in 1..=999999999 without leading zeros. Returns `N`.
fn parse_id(id: &str) -> Option<u32> {
    let (name, version) = id.split_once('/')?;
    let name_ok = !name.is_empty()
        && name.len() <= 64
        && name.split(['.', '-']).all(|word| {
            !word.is_empty()
                && word
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        });
    let version_ok = !version.is_empty()
        && version.len() <= 9
        && !version.starts_with('0')
        && version.bytes().all(|b| b.is_ascii_digit());
    if !(name_ok && version_ok) {
        return None;
    }
    version.parse().ok()
}

fn valid_field_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    name.len() <= 64
        && bytes.next().is_some_and(|b| b.is_ascii_lowercase())
        && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// Titles and labels are shown to approvers: non-empty, bounded, no control characters (which
/// could reorder or hide what follows).
fn valid_text(s: &str) -> bool {
    let count = s.chars().count();
    count > 0 && count <= MAX_TEXT_CHARS && !s.chars().any(char::is_control)
}

/// The generic profile for MCP-style tool calls.
pub const TOOL_CALL_DEFINITION: &str = include_str!("profiles/countersign.tool-call.1.json");
/// The profile of a tool call relayed by the MCP interposer: the generic tool call plus the
/// upstream server's id, so two MCP servers exposing a tool of the same name never share evidence.
pub const MCP_TOOL_CALL_DEFINITION: &str =
    include_str!("profiles/countersign.mcp-tool-call.1.json");
/// The typed profile for a payment transfer.
pub const PAYMENT_DEFINITION: &str = include_str!("profiles/countersign.payment.1.json");
/// The profile an approver signs to give a standing grant: the grant's scope (the calls it covers
/// — profile, MCP server, gateways —, agent and tool patterns, argument constraints, `max_uses`,
/// `expires_at`) is its fields (docs/SPEC.md §14). Version 1, whose scope named no profile,
/// server or gateway, is withdrawn: it is not registered, so nothing signed under it verifies.
pub const STANDING_GRANT_DEFINITION: &str =
    include_str!("profiles/countersign.standing-grant.2.json");
/// The id of [`STANDING_GRANT_DEFINITION`].
pub const STANDING_GRANT_PROFILE: &str = "countersign.standing-grant/2";

/// The profiles a verifier accepts, keyed by id, each pinned by digest.
#[derive(Debug, Clone, Default)]
pub struct ProfileRegistry {
    profiles: BTreeMap<String, Profile>,
}

impl ProfileRegistry {
    /// An empty registry (no profile resolves).
    pub fn empty() -> Self {
        Self::default()
    }

    /// The built-in profiles: `countersign.tool-call/1`, `countersign.mcp-tool-call/1`,
    /// `countersign.payment/1` and `countersign.standing-grant/2`.
    pub fn builtin() -> Self {
        let mut registry = Self::default();
        // The definitions are compiled in and covered by tests; a failure here cannot depend on
        // input, and skipping is the fail-closed outcome (the id then resolves to nothing).
        for def in [
            TOOL_CALL_DEFINITION,
            MCP_TOOL_CALL_DEFINITION,
            PAYMENT_DEFINITION,
            STANDING_GRANT_DEFINITION,
        ] {
            if let Ok(profile) = Profile::from_definition(def.as_bytes()) {
                registry.profiles.insert(profile.id.clone(), profile);
            }
        }
        registry
    }

    /// The profile registered under `id`, if any.
    pub fn get(&self, id: &str) -> Option<&Profile> {
        self.profiles.get(id)
    }

    /// Resolve `id` or refuse with [`CanonError::UnknownProfile`] (never a fallback profile).
    pub fn resolve(&self, id: &str) -> Result<&Profile, CanonError> {
        self.get(id)
            .ok_or_else(|| CanonError::UnknownProfile(super::error::excerpt(id)))
    }

    /// Add an operator profile from its definition bytes, which must hash to `expected_digest`.
    /// Re-inserting the identical definition is a no-op; the same id with another definition is
    /// refused.
    pub fn insert_pinned(
        &mut self,
        definition: &[u8],
        expected_digest: [u8; 32],
    ) -> Result<&Profile, ProfileError> {
        let profile = Profile::from_definition(definition)?;
        if profile.digest != expected_digest {
            return Err(ProfileError::DigestMismatch {
                expected: expected_digest,
                got: profile.digest,
            });
        }
        use std::collections::btree_map::Entry;
        match self.profiles.entry(profile.id.clone()) {
            Entry::Vacant(slot) => Ok(slot.insert(profile)),
            Entry::Occupied(slot) if slot.get().digest == profile.digest => Ok(slot.into_mut()),
            Entry::Occupied(_) => Err(ProfileError::IdCollision { id: profile.id }),
        }
    }

    /// Every registered profile, ordered by id.
    pub fn iter(&self) -> impl Iterator<Item = &Profile> {
        self.profiles.values()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids() {
        assert_eq!(parse_id("countersign.payment/1"), Some(1));
        assert_eq!(parse_id("acme-bank.wire/12"), Some(12));
        for bad in [
            "payment",
            "payment/",
            "payment/0",
            "payment/01",
            "Payment/1",
            "a..b/1",
            ".a/1",
            "a/1/2",
            "a/1x",
            "a/1234567890",
            "/1",
        ] {
            assert_eq!(parse_id(bad), None, "{bad}");
        }
    }

    #[test]
    fn field_names() {
        assert!(valid_field_name("source_account"));
        assert!(valid_field_name("a1"));
        for bad in ["", "1a", "A", "a-b", "a b", &"a".repeat(65)] {
            assert!(!valid_field_name(bad), "{bad}");
        }
    }

    #[test]
    fn builtins_parse() {
        let r = ProfileRegistry::builtin();
        let ids: Vec<_> = r.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "countersign.mcp-tool-call/1",
                "countersign.payment/1",
                "countersign.standing-grant/2",
                "countersign.tool-call/1"
            ]
        );
    }
}
