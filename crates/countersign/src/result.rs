//! The wire objects an approval callback returns: `ApprovalResult` and its evidence entries.
//!
//! Parsing is split in two on purpose. A result whose *envelope* is unusable (not JSON, unknown
//! status, a duplicate member anywhere, `approver_evidence` not an array, `null` where a member
//! carries meaning) is a [`ResultError`]. An evidence entry that is malformed does not make the envelope
//! unusable: it is kept as [`EvidenceSlot::Malformed`] so the verifier can answer a specific
//! `evidence_malformed` DENY instead of refusing to look at the result at all.

use crate::b64;
use crate::canon::{self, CanonError, Decision};
use crate::registry::Aaguid;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The evidence format this verifier implements.
pub const WEBAUTHN_ASSERTION_FORMAT: &str = "webauthn.assertion/1";

/// `APPROVED | DENIED | PENDING`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ApprovalStatus {
    /// The callback says a human approved; the evidence must prove it before anything runs.
    #[serde(rename = "APPROVED")]
    Approved,
    /// The callback says the action was refused (by a human, or by expiry); a DENY either way.
    #[serde(rename = "DENIED")]
    Denied,
    /// Nobody has decided yet; `approval_id` names the request to ask about again.
    #[serde(rename = "PENDING")]
    Pending,
}

impl ApprovalStatus {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Approved => "APPROVED",
            Self::Denied => "DENIED",
            Self::Pending => "PENDING",
        }
    }
}

impl From<Decision> for ApprovalStatus {
    fn from(d: Decision) -> Self {
        match d {
            Decision::Approved => Self::Approved,
            Decision::Denied => Self::Denied,
        }
    }
}

/// What `approval_callback` returns. A bare status string reads as `{"status": ...}`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ApprovalResult {
    /// What the callback claims; a claim of APPROVED counts only with evidence that verifies.
    pub status: ApprovalStatus,
    /// The callback's id for the request; required when `status` is PENDING.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval_id: Option<String>,
    /// When the request stops waiting for a decision (RFC 3339, as sent; not signed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    /// Where to ask again for the outcome of a PENDING request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redrive_url: Option<String>,
    /// The transport's reason; informational except where the SPEC says otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason_code: Option<String>,
    /// A transport-asserted assurance claim. Recorded, never trusted: when evidence verifies, the
    /// verifier derives the level from the evidence and ignores this value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identity_assurance: Option<Value>,
    /// One slot per evidence entry, in the order sent; a malformed entry is kept so that the
    /// verdict can say which one failed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub approver_evidence: Vec<EvidenceSlot>,
    /// Present when the call was approved under an approver-signed standing grant: then
    /// `approver_evidence` is the grant's evidence, not evidence about this call (docs/SPEC.md
    /// §14).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub standing_grant: Option<StandingGrantUse>,
    /// The authority an APPROVED result grants, as the service recorded it in its Decision or
    /// outcome line: one call with this op_hash until a time, or the preauthorization that
    /// approved it. Informational to a verifier, which checks the evidence, never this member.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub authority: Option<Value>,
    /// The approval this one revises, when the gateway said so. A revision is a new proposal:
    /// nothing passes to it from the one it revises.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revises: Option<String>,
}

/// The `standing_grant` member of a result: which grant approved the call, the grant's signed
/// fields (its scope, what the evidence's op_hash covers) and which use of it this call is.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StandingGrantUse {
    /// The service's reference of the grant (the approval id of its proposal).
    pub grant_id: String,
    /// The grant's fields under [`STANDING_GRANT_PROFILE`](crate::STANDING_GRANT_PROFILE)
    /// (`countersign.standing-grant/2`), as signed.
    pub fields: Value,
    /// This call's use of the grant, counted from 1 by the service.
    #[serde(rename = "use")]
    pub use_number: u64,
}

impl StandingGrantUse {
    fn from_value(value: &Value) -> Result<Self, ResultError> {
        let bad = |detail: String| ResultError::InvalidField {
            field: "standing_grant",
            detail,
        };
        let parsed = Self::deserialize(value).map_err(|e| bad(e.to_string()))?;
        if !parsed.fields.is_object() {
            return Err(bad("fields must be an object".into()));
        }
        if parsed.use_number == 0 {
            return Err(bad("use counts from 1".into()));
        }
        Ok(parsed)
    }
}

/// Why an approval result could not be read at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ResultError {
    /// The text is not JSON.
    #[error("approval result is not valid JSON: {0}")]
    NotJson(String),
    /// Valid JSON that the strict parser refuses: a duplicate member (in the envelope or inside
    /// an evidence entry), a lone surrogate, an integer beyond ±(2^53-1), and the like.
    #[error("approval result is refused by strict JSON admission: {0}")]
    Inadmissible(CanonError),
    /// The JSON is neither a status string nor an object.
    #[error("approval result must be a status string or an object, got {0}")]
    WrongShape(&'static str),
    /// The status is not `APPROVED`, `DENIED` or `PENDING` (the spelling is case-sensitive).
    #[error("unknown approval status {0:?} (expected APPROVED, DENIED or PENDING)")]
    UnknownStatus(String),
    /// A member is written as `null`, or has the wrong type or form.
    #[error("approval result field {field:?} is invalid: {detail}")]
    InvalidField {
        /// The member's name.
        field: &'static str,
        /// What is wrong with it.
        detail: String,
    },
    /// A PENDING result without an `approval_id` gives nothing to ask about again.
    #[error("PENDING result without approval_id")]
    PendingWithoutId,
}

impl ApprovalResult {
    /// A result with only a status (what a legacy callback returns).
    pub fn bare(status: ApprovalStatus) -> Self {
        Self {
            status,
            approval_id: None,
            expires_at: None,
            redrive_url: None,
            reason_code: None,
            identity_assurance: None,
            approver_evidence: Vec::new(),
            standing_grant: None,
            authority: None,
            revises: None,
        }
    }

    /// Parse JSON text.
    ///
    /// The text is read by the same strict parser as the action's fields (keys kept as sent), so
    /// a duplicate member is refused wherever it is: a first-wins parser in a gateway and this
    /// last-wins one would otherwise read two different results from one text.
    pub fn from_json(bytes: &[u8]) -> Result<Self, ResultError> {
        let value = canon::parse_envelope(bytes).map_err(|e| match e {
            CanonError::Syntax { .. }
            | CanonError::TrailingData { .. }
            | CanonError::InvalidUtf8 { .. }
            | CanonError::TooLarge { .. } => ResultError::NotJson(e.to_string()),
            other => ResultError::Inadmissible(other),
        })?;
        Self::from_value(&value)
    }

    /// Read an already-parsed JSON value.
    pub fn from_value(value: &Value) -> Result<Self, ResultError> {
        let object = match value {
            Value::String(status) => {
                // A bare string reads as {"status": ...}, so a bare "PENDING" lacks its
                // approval_id exactly like {"status": "PENDING"} does (docs/SPEC.md §2.1).
                return match parse_status(status)? {
                    ApprovalStatus::Pending => Err(ResultError::PendingWithoutId),
                    status => Ok(Self::bare(status)),
                };
            }
            Value::Object(object) => object,
            Value::Null => return Err(ResultError::WrongShape("null")),
            Value::Bool(_) => return Err(ResultError::WrongShape("a boolean")),
            Value::Number(_) => return Err(ResultError::WrongShape("a number")),
            Value::Array(_) => return Err(ResultError::WrongShape("an array")),
        };
        let status = match object.get("status") {
            Some(Value::String(s)) => parse_status(s)?,
            Some(_) => return Err(invalid("status", "must be a string")),
            None => return Err(invalid("status", "is missing")),
        };
        // `null` is not an array: it is refused like any other non-array, not read as "none".
        let approver_evidence = match object.get("approver_evidence") {
            None => Vec::new(),
            Some(Value::Array(entries)) => entries.iter().map(EvidenceSlot::from_value).collect(),
            Some(_) => return Err(invalid("approver_evidence", "must be an array")),
        };
        // A PENDING result's approval_id is what the gateway asks about again: `null` there is
        // refused. On any other status it only names the request, like the three members below.
        let approval_id = match status {
            ApprovalStatus::Pending => optional_string(object, "approval_id")?,
            _ => informational_string(object, "approval_id")?,
        };
        let result = Self {
            status,
            approval_id,
            expires_at: informational_string(object, "expires_at")?,
            redrive_url: informational_string(object, "redrive_url")?,
            reason_code: informational_string(object, "reason_code")?,
            identity_assurance: match object.get("identity_assurance") {
                Some(Value::Null) => return Err(null_member("identity_assurance")),
                other => other.cloned(),
            },
            approver_evidence,
            // Absent means no standing grant; `null` or any non-object is refused rather than
            // read as absent, like `approver_evidence`.
            standing_grant: object
                .get("standing_grant")
                .map(StandingGrantUse::from_value)
                .transpose()?,
            // Informational to a verifier, but it states what the approval grants (§12.1), and
            // `null` could be read as "no bound": refused, not absent.
            authority: match object.get("authority") {
                None => None,
                Some(Value::Null) => return Err(null_member("authority")),
                Some(v) => Some(v.clone()),
            },
            revises: optional_string(object, "revises")?,
        };
        if result.status == ApprovalStatus::Pending && result.approval_id.is_none() {
            return Err(ResultError::PendingWithoutId);
        }
        Ok(result)
    }
}

fn parse_status(s: &str) -> Result<ApprovalStatus, ResultError> {
    match s {
        "APPROVED" => Ok(ApprovalStatus::Approved),
        "DENIED" => Ok(ApprovalStatus::Denied),
        "PENDING" => Ok(ApprovalStatus::Pending),
        other => Err(ResultError::UnknownStatus(other.chars().take(64).collect())),
    }
}

fn invalid(field: &'static str, detail: &str) -> ResultError {
    ResultError::InvalidField {
        field,
        detail: detail.to_owned(),
    }
}

/// An optional envelope member written as `null`. Absent is the only way to say "none": a
/// `null` read as absent would give a second spelling that some readers take differently (the
/// rule of `crate::absent_or_value`, applied to the envelope's hand-written reader). The
/// transport's informational strings are the exception ([`informational_string`]).
fn null_member(field: &'static str) -> ResultError {
    invalid(field, "is null: null is refused, omit the member instead")
}

fn optional_string(
    object: &serde_json::Map<String, Value>,
    field: &'static str,
) -> Result<Option<String>, ResultError> {
    match object.get(field) {
        None => Ok(None),
        Some(Value::Null) => Err(null_member(field)),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(invalid(field, "must be a string")),
    }
}

/// A transport member that no check reads as a restriction (`reason_code`, `expires_at`,
/// `redrive_url`, and `approval_id` unless the status is PENDING): `null` reads as absent.
///
/// The exception to `null_member`, and why it is safe here: the rule against `null` exists
/// because absence can mean "no restriction" where `null` may mean "none". None of these members
/// restricts or widens anything a verifier decides — an absent `reason_code` on a DENIED result
/// already gives `approver_refused` — while many callback implementations write every optional
/// member, `null` when unset, and refusing them made a whole result unusable for a field nobody
/// reads (docs/SPEC.md §2.1). Any other type is still refused.
fn informational_string(
    object: &serde_json::Map<String, Value>,
    field: &'static str,
) -> Result<Option<String>, ResultError> {
    match object.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(invalid(field, "must be a string")),
    }
}

/// One entry of `approver_evidence`: decoded, or kept raw with the reason it could not be decoded.
#[derive(Clone, Debug, PartialEq)]
pub enum EvidenceSlot {
    /// An entry of the implemented format that decoded.
    Decoded(Box<EvidenceEntry>),
    /// An entry that could not be decoded, kept so that the verdict can name it
    /// (`evidence_malformed`, or `unsupported_format` for another format).
    Malformed {
        /// The entry exactly as received.
        raw: Value,
        /// Why it could not be decoded.
        reason: String,
    },
}

/// The entry, or the raw value exactly as received. A malformed entry need not be an object
/// (`"x"`, `null`), so it is written as itself: a flattened map could not hold it, and a parsed
/// result must serialize back (found by the `envelope` fuzz target).
impl Serialize for EvidenceSlot {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Decoded(entry) => entry.serialize(serializer),
            Self::Malformed { raw, .. } => raw.serialize(serializer),
        }
    }
}

impl EvidenceSlot {
    fn from_value(value: &Value) -> Self {
        match EvidenceEntry::deserialize(value) {
            Ok(entry) => Self::Decoded(Box::new(entry)),
            Err(e) => Self::Malformed {
                raw: value.clone(),
                reason: e.to_string(),
            },
        }
    }
}

impl From<EvidenceEntry> for EvidenceSlot {
    fn from(entry: EvidenceEntry) -> Self {
        Self::Decoded(Box::new(entry))
    }
}

/// A `webauthn.assertion/1` evidence entry with its byte strings decoded.
///
/// Only the fields the signature covers (clientDataJSON and authenticatorData) are trusted by the
/// verifier; `decision`, `nonce` and `op_hash` beside them are cross-checked against the signed
/// challenge, and `aaguid`/`attestation_ref` are informational (the registry is authoritative).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvidenceEntry {
    /// The evidence format; only [`WEBAUTHN_ASSERTION_FORMAT`] is verified.
    pub format: String,
    /// The decision the approver meant; it must equal the decision the signed op_hash commits to.
    pub decision: Decision,
    /// The profile the signed op_hash was computed under; it must be the action's.
    pub canonicalization_profile: String,
    /// The key that signed, looked up in the verifier's registry.
    #[serde(with = "b64::bytes")]
    pub credential_id: Vec<u8>,
    /// The exact bytes the client produced (signed through their SHA-256).
    #[serde(with = "b64::bytes")]
    pub client_data_json: Vec<u8>,
    /// The exact bytes the authenticator produced (signed).
    #[serde(with = "b64::bytes")]
    pub authenticator_data: Vec<u8>,
    /// The signature over `authenticator_data || SHA-256(client_data_json)`, in the encoding of
    /// the key's algorithm (DER for ECDSA).
    #[serde(with = "b64::bytes")]
    pub signature: Vec<u8>,
    /// Absent, or an AAGUID in its 8-4-4-4-12 form (`null` and other strings are malformed).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "aaguid_text"
    )]
    pub aaguid: Option<String>,
    /// A string, `null` or absent: SPEC §2.2 gives `null` a meaning here (no attestation
    /// reference), so this is the one optional member where `null` is read, not refused.
    #[serde(default)]
    pub attestation_ref: Option<String>,
    /// 32 bytes that must equal the first half of the signed challenge; spent once verified.
    #[serde(with = "b64::bytes")]
    pub nonce: Vec<u8>,
    /// 32 bytes that must equal the second half of the signed challenge.
    #[serde(with = "b64::bytes")]
    pub op_hash: Vec<u8>,
    /// When the service received the assertion (RFC 3339). Not signed: freshness is judged on it.
    pub assertion_at: String,
    /// Reserved: carried through, not verified in format /1.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub co_signatures: Vec<Value>,
}

/// `aaguid` when present: a string that parses as an AAGUID, kept as written.
fn aaguid_text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let text = String::deserialize(d)?;
    match Aaguid::parse(&text) {
        Some(_) => Ok(Some(text)),
        None => Err(serde::de::Error::custom(format!(
            "aaguid {:?} is not an 8-4-4-4-12 hexadecimal UUID",
            text.chars().take(64).collect::<String>()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn bare_status_string_reads_as_object() {
        let r = ApprovalResult::from_json(br#""APPROVED""#);
        assert_eq!(r, Ok(ApprovalResult::bare(ApprovalStatus::Approved)));
        let r = ApprovalResult::from_value(
            &json!({"status": "DENIED", "reason_code": "expired_unanswered"}),
        );
        assert_eq!(
            r.map(|r| (r.status, r.reason_code)),
            Ok((ApprovalStatus::Denied, Some("expired_unanswered".into())))
        );
    }

    #[test]
    fn unusable_envelopes_are_typed_errors() {
        assert_eq!(
            ApprovalResult::from_json(b"\"MAYBE\""),
            Err(ResultError::UnknownStatus("MAYBE".into()))
        );
        assert_eq!(
            ApprovalResult::from_json(b"42"),
            Err(ResultError::WrongShape("a number"))
        );
        assert!(matches!(
            ApprovalResult::from_json(b"{"),
            Err(ResultError::NotJson(_))
        ));
        assert_eq!(
            ApprovalResult::from_json(br#"{"status":"PENDING"}"#),
            Err(ResultError::PendingWithoutId)
        );
        assert_eq!(
            ApprovalResult::from_json(br#""PENDING""#),
            Err(ResultError::PendingWithoutId)
        );
        assert!(matches!(
            ApprovalResult::from_json(br#"{"status":"APPROVED","approver_evidence":{}}"#),
            Err(ResultError::InvalidField {
                field: "approver_evidence",
                ..
            })
        ));
    }

    #[test]
    fn null_evidence_and_duplicate_members_make_the_envelope_unusable() {
        assert!(matches!(
            ApprovalResult::from_json(br#"{"status":"APPROVED","approver_evidence":null}"#),
            Err(ResultError::InvalidField {
                field: "approver_evidence",
                ..
            })
        ));
        assert!(
            ApprovalResult::from_json(br#"{"status":"APPROVED","approver_evidence":[]}"#).is_ok()
        );
        assert!(matches!(
            ApprovalResult::from_json(br#"{"status":"DENIED","status":"APPROVED"}"#),
            Err(ResultError::Inadmissible(CanonError::DuplicateKey { .. }))
        ));
        assert!(matches!(
            ApprovalResult::from_json(
                br#"{"status":"APPROVED","approver_evidence":[{"decision":"DENIED","decision":"APPROVED"}]}"#
            ),
            Err(ResultError::Inadmissible(CanonError::DuplicateKey { path, .. })) if path == "/approver_evidence/0"
        ));
    }

    #[test]
    fn null_informational_transport_members_read_as_absent() {
        // What a callback that writes every optional member sends on a plain approval.
        let r = ApprovalResult::from_json(
            br#"{"status":"APPROVED","approval_id":null,"expires_at":null,"redrive_url":null,"reason_code":null}"#,
        );
        assert_eq!(r, Ok(ApprovalResult::bare(ApprovalStatus::Approved)));
        for status in ["APPROVED", "DENIED"] {
            for member in ["approval_id", "expires_at", "redrive_url", "reason_code"] {
                let text = format!(r#"{{"status":"{status}","{member}":null}}"#);
                let r = ApprovalResult::from_json(text.as_bytes());
                assert_eq!(
                    r,
                    Ok(ApprovalResult::bare(
                        parse_status(status).unwrap_or(ApprovalStatus::Pending)
                    )),
                    "{status} {member}"
                );
            }
        }
        // A wrong type is not null: still refused.
        assert!(matches!(
            ApprovalResult::from_json(br#"{"status":"APPROVED","reason_code":7}"#),
            Err(ResultError::InvalidField {
                field: "reason_code",
                ..
            })
        ));
    }

    #[test]
    fn null_members_that_carry_meaning_are_still_refused() {
        assert!(ApprovalResult::from_json(br#"{"status":"DENIED"}"#).is_ok());
        for member in [
            "identity_assurance",
            "authority",
            "revises",
            "standing_grant",
            "approver_evidence",
        ] {
            let text = format!(r#"{{"status":"APPROVED","{member}":null}}"#);
            assert!(
                matches!(
                    ApprovalResult::from_json(text.as_bytes()),
                    Err(ResultError::InvalidField { field, .. }) if field == member
                ),
                "{member}"
            );
        }
        assert!(matches!(
            ApprovalResult::from_json(br#"{"status":null}"#),
            Err(ResultError::InvalidField {
                field: "status",
                ..
            })
        ));
        // The one approval_id a gateway needs: a PENDING result's.
        assert!(matches!(
            ApprovalResult::from_json(br#"{"status":"PENDING","approval_id":null}"#),
            Err(ResultError::InvalidField {
                field: "approval_id",
                ..
            })
        ));
    }

    #[test]
    fn aaguid_and_attestation_ref_are_type_checked() {
        let entry = |extra: Value| {
            let mut v = json!({"format": WEBAUTHN_ASSERTION_FORMAT, "decision": "APPROVED",
                "canonicalization_profile": "p", "credential_id": "AA", "client_data_json": "AA",
                "authenticator_data": "AA", "signature": "AA", "nonce": "AA", "op_hash": "AA",
                "assertion_at": "2026-01-01T00:00:00Z"});
            if let (Some(o), Value::Object(e)) = (v.as_object_mut(), extra) {
                o.extend(e);
            }
            matches!(EvidenceSlot::from_value(&v), EvidenceSlot::Decoded(_))
        };
        assert!(entry(json!({})));
        assert!(entry(
            json!({"aaguid": "adce0002-35bc-c60a-648b-0b25f1f05503"})
        ));
        assert!(entry(json!({"attestation_ref": null})));
        assert!(entry(json!({"attestation_ref": "att_1"})));
        for bad in [
            json!({"aaguid": null}),
            json!({"aaguid": 7}),
            json!({"aaguid": "not-a-uuid"}),
            json!({"aaguid": "adce000235bcc60a648b0b25f1f05503"}),
            json!({"attestation_ref": 7}),
            json!({"attestation_ref": {}}),
        ] {
            assert!(!entry(bad.clone()), "{bad}");
        }
    }

    #[test]
    fn malformed_evidence_entry_is_kept_not_fatal() {
        let r = ApprovalResult::from_value(
            &json!({"status": "APPROVED", "approver_evidence": [{"format": 1}]}),
        );
        let slots = r.map(|r| r.approver_evidence).unwrap_or_default();
        assert!(matches!(slots.as_slice(), [EvidenceSlot::Malformed { .. }]));
    }
}
