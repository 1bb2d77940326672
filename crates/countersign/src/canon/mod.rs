//! Canonicalization: strict JSON admission, NFC, JCS, profiles and op_hash.
//!
//! The pipeline, in order (each step's rules are in `docs/spec/canon.md`):
//!
//! 1. **Admission** ([`json`]): the raw bytes are parsed by a strict parser that refuses anything
//!    two JSON implementations could read differently (duplicate keys, lone surrogates, unsafe
//!    integers, floats unless the profile allows them, oversize or overdeep input, code points the
//!    pinned Unicode version does not assign).
//! 2. **Profile** ([`fields`]): the fields must be exactly the profile's declared set, each of its
//!    declared type; `exact` strings must already be NFC.
//! 3. **NFC** ([`text`]): every other string, keys and values, is normalized to NFC.
//! 4. **JCS** ([`jcs`]): the admitted value is serialized per RFC 8785 by a small writer that
//!    relies on admission having removed what JCS finds hard; floats are formatted by `serde_jcs`,
//!    and the whole output is differential-tested against `serde_jcs` and
//!    `serde_json_canonicalizer` (`serde_jcs` alone would silently keep the last duplicate key).
//! 5. **op_hash** = SHA-256 of the JCS form of `{"decision", "fields", "profile"}`.

mod error;
mod fields;
pub(crate) mod jcs;
mod json;
mod nfc;
mod profile;
mod text;

pub use error::CanonError;
pub use json::CanonLimits;
pub use nfc::{NfcMode, NonNfc};
pub use profile::{
    FieldKind, FieldSpec, MCP_TOOL_CALL_DEFINITION, PAYMENT_DEFINITION, Profile, ProfileError,
    ProfileRegistry, STANDING_GRANT_DEFINITION, STANDING_GRANT_PROFILE, TOOL_CALL_DEFINITION,
};
pub use text::UNICODE_VERSION;

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Maximum size in bytes of the `fields` JSON text admitted for one action.
pub const MAX_FIELDS_BYTES: usize = 64 * 1024;
/// Maximum nesting depth (objects and arrays) of admitted JSON.
pub const MAX_DEPTH: usize = 32;

/// The decision an approver signs. It is inside the hashed structure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Decision {
    /// The approver lets the action run.
    #[serde(rename = "APPROVED")]
    Approved,
    /// The approver refuses it: a verified refusal is a veto.
    #[serde(rename = "DENIED")]
    Denied,
}

impl Decision {
    /// The wire spelling, as hashed into op_hash.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Approved => "APPROVED",
            Self::Denied => "DENIED",
        }
    }

    /// Parse the exact wire spelling (case-sensitive).
    pub fn from_wire(s: &str) -> Option<Self> {
        match s {
            "APPROVED" => Some(Self::Approved),
            "DENIED" => Some(Self::Denied),
            _ => None,
        }
    }
}

/// op_hash = SHA-256(JCS({"profile", "decision", "fields"})).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OpHash(pub [u8; 32]);

impl OpHash {
    /// The 32 digest bytes, as they appear in the second half of the signed challenge.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// Unpadded base64url, the wire form in evidence.
    pub fn to_b64url(&self) -> String {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(self.0)
    }
}

/// Action fields that passed admission under a profile, with every string in NFC.
///
/// Only [`admit_fields`] and [`op_hash_document`] make one, so holding one proves admission ran.
/// It keeps the JCS bytes computed at admission: hashing is then infallible and costs one SHA-256.
#[derive(Debug, Clone, PartialEq)]
pub struct CanonicalFields {
    value: Value,
    jcs: Vec<u8>,
    profile_digest: [u8; 32],
}

impl CanonicalFields {
    /// The admitted fields object, strings in NFC: what the gateway should act on.
    pub fn as_value(&self) -> &Value {
        &self.value
    }

    /// The RFC 8785 form of the fields object.
    pub fn jcs(&self) -> &[u8] {
        &self.jcs
    }

    /// Whether these fields were admitted under `profile` (same definition digest). op_hash covers
    /// the profile id it is given; callers holding fields from elsewhere can check this first.
    pub fn admitted_under(&self, profile: &Profile) -> bool {
        self.profile_digest == profile.digest
    }
}

/// Largest approval result envelope read by [`parse_envelope`].
pub(crate) const MAX_ENVELOPE_BYTES: usize = 1024 * 1024;

/// Parse an approval-result envelope with the strict parser: no duplicate member anywhere, keys
/// kept as sent (not normalized), floats allowed, at most [`MAX_ENVELOPE_BYTES`].
pub(crate) fn parse_envelope(raw: &[u8]) -> Result<Value, CanonError> {
    json::parse_raw_keys(raw, CanonLimits::ENVELOPE)
}

/// Strictly admit any JSON text (no profile): parse under `limits`, then NFC every string.
pub fn admit_json(raw: &[u8], limits: CanonLimits) -> Result<Value, CanonError> {
    let mut value = json::parse(raw, limits)?;
    text::nfc_values(&mut value);
    Ok(value)
}

/// Admit the raw JSON text of an action's `fields` under `profile`, normalizing every string that
/// is not `exact` to NFC (what `op-hash` computes over).
///
/// A verifier that authorizes the action itself uses [`admit_fields_with`], whose default
/// ([`NfcMode::Require`]) refuses strings that normalization would change.
pub fn admit_fields(profile: &Profile, raw: &[u8]) -> Result<CanonicalFields, CanonError> {
    admit_fields_with(profile, raw, NfcMode::Normalize)
}

/// Admit the raw JSON text of an action's `fields` under `profile` with an NFC admission rule.
///
/// Under [`NfcMode::Require`], any decoded key or string value that NFC would change is refused
/// with [`CanonError::NotNfc`] (the first one in the fields' key order, named by its JSON pointer
/// and the code points that NFC changes); the admitted fields are then byte for byte the strings
/// the gateway submitted. Under [`NfcMode::Normalize`] they are normalized, as [`admit_fields`].
pub fn admit_fields_with(
    profile: &Profile,
    raw: &[u8],
    mode: NfcMode,
) -> Result<CanonicalFields, CanonError> {
    let limits = CanonLimits::STRICT.with_floats(profile.allow_floats);
    let value = match mode {
        NfcMode::Normalize => json::parse(raw, limits)?,
        NfcMode::Require => {
            // Keys must be seen as submitted: the normalizing parser would have fixed them.
            let value = json::parse_raw_keys(raw, limits)?;
            if let Some(first) = nfc::find(&value, true).into_iter().next() {
                return Err(CanonError::NotNfc(first));
            }
            value
        }
    };
    admit_parsed(profile, value)
}

/// Every key and string value of an action's `fields` that NFC would change, with its JSON pointer
/// and the code points that change, keys in code point order (as the admitted object holds them).
///
/// For an approver page under [`NfcMode::Normalize`], which must mark what normalization changed
/// on the value as submitted. Fields that are inadmissible even when normalized are refused with
/// the error [`admit_fields`] gives.
pub fn nfc_changes(profile: &Profile, raw: &[u8]) -> Result<Vec<NonNfc>, CanonError> {
    admit_fields(profile, raw)?;
    let limits = CanonLimits::STRICT.with_floats(profile.allow_floats);
    let value = json::parse_raw_keys(raw, limits)?;
    Ok(nfc::find(&value, false))
}

fn admit_parsed(profile: &Profile, mut value: Value) -> Result<CanonicalFields, CanonError> {
    fields::check(profile, &mut value)?;
    // JCS fails only on non-finite numbers, which admission never produces; the error is kept
    // typed rather than assumed away.
    let jcs = jcs::to_vec(&value)?;
    Ok(CanonicalFields {
        value,
        jcs,
        profile_digest: profile.digest,
    })
}

/// The exact bytes op_hash covers: `{"decision":D,"fields":F,"profile":P}` in JCS.
///
/// The three outer keys are written in their JCS order (UTF-16 order: decision < fields <
/// profile) around the fields' own JCS bytes; the tests check this against `serde_jcs` on the
/// whole document.
pub fn canonical_bytes(profile: &Profile, decision: Decision, fields: &CanonicalFields) -> Vec<u8> {
    let mut out = Vec::with_capacity(fields.jcs.len() + profile.id.len() + 48);
    write_canonical(profile, decision, fields, |part| {
        out.extend_from_slice(part)
    });
    out
}

fn write_canonical(
    profile: &Profile,
    decision: Decision,
    fields: &CanonicalFields,
    mut sink: impl FnMut(&[u8]),
) {
    let mut id = Vec::with_capacity(profile.id.len() + 2);
    text::push_jcs_string(&mut id, &profile.id);
    sink(b"{\"decision\":\"");
    sink(decision.as_str().as_bytes());
    sink(b"\",\"fields\":");
    sink(&fields.jcs);
    sink(b",\"profile\":");
    sink(&id);
    sink(b"}");
}

/// op_hash of admitted fields with a decision.
pub fn op_hash(profile: &Profile, decision: Decision, fields: &CanonicalFields) -> OpHash {
    let mut hasher = Sha256::new();
    write_canonical(profile, decision, fields, |part| hasher.update(part));
    OpHash(hasher.finalize().into())
}

/// Parse and hash an op-hash document `{"profile", "decision", "fields"}` (the `op-hash` CLI input).
pub fn op_hash_document(registry: &ProfileRegistry, raw: &[u8]) -> Result<OpHash, CanonError> {
    let (profile, decision, fields) = admit_document(registry, raw)?;
    Ok(op_hash(profile, decision, &fields))
}

/// The admitted parts of an op-hash document: its resolved profile, decision and fields.
pub fn admit_document<'r>(
    registry: &'r ProfileRegistry,
    raw: &[u8],
) -> Result<(&'r Profile, Decision, CanonicalFields), CanonError> {
    // Floats are let through the first pass: the profile, and so its float policy, is not known
    // until the document is parsed. They are checked against the profile below.
    let members = json::parse_document(raw, CanonLimits::DOCUMENT)?;
    let (mut profile_id, mut decision, mut fields) = (None, None, None);
    for member in members {
        let slot = match member.key.as_str() {
            "profile" => &mut profile_id,
            "decision" => &mut decision,
            "fields" => &mut fields,
            _ => {
                return Err(CanonError::Document {
                    member: error::excerpt(&member.key),
                    problem: "is not a member of an op-hash document",
                });
            }
        };
        *slot = Some(member);
    }
    let missing = |member: &str| CanonError::Document {
        member: member.into(),
        problem: "is missing",
    };
    let profile_id = profile_id.ok_or_else(|| missing("profile"))?;
    let decision = decision.ok_or_else(|| missing("decision"))?;
    let fields = fields.ok_or_else(|| missing("fields"))?;

    let Value::String(id) = &profile_id.value else {
        return Err(CanonError::Document {
            member: "profile".into(),
            problem: "must be a string",
        });
    };
    let profile = registry.resolve(id)?;
    let decision = match &decision.value {
        Value::String(d) => Decision::from_wire(d).ok_or_else(|| CanonError::InvalidDecision {
            got: error::excerpt(d),
        })?,
        other => {
            return Err(CanonError::InvalidDecision {
                got: fields::kind_of(other).into(),
            });
        }
    };
    // The same caps as admit_fields, applied to the fields' own text and nesting (the document
    // parser allowed one extra level for the wrapper).
    if fields.raw_len > MAX_FIELDS_BYTES {
        return Err(CanonError::TooLarge {
            limit: MAX_FIELDS_BYTES,
            got: fields.raw_len,
        });
    }
    if !profile.allow_floats
        && let Some((path, literal)) = fields::find_float(&fields.value)
    {
        return Err(CanonError::FloatNotAllowed {
            path: format!("/fields{path}"),
            literal,
        });
    }
    let admitted = admit_parsed(profile, fields.value)?;
    Ok((profile, decision, admitted))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool_call() -> Profile {
        ProfileRegistry::builtin()
            .get("countersign.tool-call/1")
            .cloned()
            .unwrap_or_else(|| Profile {
                id: String::new(),
                version: 0,
                title: String::new(),
                fields: Vec::new(),
                allow_floats: false,
                digest: [0; 32],
            })
    }

    #[test]
    fn canonical_bytes_are_the_jcs_of_the_whole_document() {
        let p = tool_call();
        let raw = br#"{"agent_id":"a","tool_name":"t","params":{"z":1,"\u00e9":"x","a":[true]}}"#;
        let f = admit_fields(&p, raw);
        assert!(f.is_ok(), "{f:?}");
        let Ok(f) = f else { return };
        for d in [Decision::Approved, Decision::Denied] {
            let whole = serde_json::json!({"profile": p.id, "decision": d.as_str(), "fields": f.as_value()});
            let expected = serde_jcs::to_vec(&whole).unwrap_or_default();
            assert_eq!(canonical_bytes(&p, d, &f), expected);
            assert_eq!(
                op_hash(&p, d, &f).0,
                <[u8; 32]>::from(Sha256::digest(&expected))
            );
        }
    }

    #[test]
    fn admitted_under_tracks_the_profile() {
        let r = ProfileRegistry::builtin();
        let (Some(tool), Some(pay)) = (
            r.get("countersign.tool-call/1"),
            r.get("countersign.payment/1"),
        ) else {
            panic!("built-ins missing");
        };
        let f = admit_fields(tool, br#"{"agent_id":"a","tool_name":"t","params":{}}"#);
        assert!(
            f.as_ref()
                .is_ok_and(|f| f.admitted_under(tool) && !f.admitted_under(pay))
        );
    }

    #[test]
    fn op_hash_b64url_is_unpadded_url_safe() {
        let h = OpHash([0xFB; 32]);
        assert_eq!(h.to_b64url().len(), 43);
        assert!(!h.to_b64url().contains(['+', '/', '=']));
        assert_eq!(h.as_bytes(), &[0xFB; 32]);
    }
}
