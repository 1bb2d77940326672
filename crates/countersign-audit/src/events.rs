//! The kinds of audit line (seed 000's model: an outcome line closes the request's record at once;
//! a human verdict is a separate `decision` line cross-referenced by `approval_id`).

use countersign::{CredentialRecord, b64};
use serde_json::{Map, Value, json};

/// The body of one audit line before it is sealed (no `seq`, `prev_hash` or `sig`).
#[derive(Debug, Clone, PartialEq)]
pub struct AuditEvent(Map<String, Value>);

/// What a `request` line records.
#[derive(Debug, Clone)]
pub struct RequestFacts<'a> {
    pub approval_id: &'a str,
    pub ts: &'a str,
    pub agent_id: &'a str,
    pub tool_name: &'a str,
    pub profile: &'a str,
    /// The admitted form (every string NFC): what op_hash covers.
    pub fields: &'a Value,
    /// Hex SHA-256 of the fields' JSON text exactly as submitted (for the tool-call profile, the
    /// `{"agent_id","tool_name","params"}` object around the submitted params text).
    pub submitted_sha256: &'a str,
    /// That text itself, when NFC changed a string of it (`nfc = "normalize"`).
    pub submitted_text: Option<&'a str>,
    pub severity: &'a str,
    pub expires_at: &'a str,
    pub fingerprint: &'a str,
}

/// What a `notification` line records.
#[derive(Debug, Clone, Copy)]
pub struct NotificationFacts<'a> {
    pub approval_id: &'a str,
    pub ts: &'a str,
    pub step: &'a str,
    /// The channel's kind: `slack`, `teams`, `email`, `webhook`.
    pub channel: &'a str,
    /// The channel's configured name.
    pub target: &'a str,
    pub attempt: u32,
    pub outcome: &'a str,
    /// No attempt follows this one.
    pub last: bool,
}

/// Where an enrolled credential came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnrollmentSource {
    /// A redeemed invite (the registration ceremony).
    Invite,
    /// A registry file imported at startup, or `AppState::enroll`.
    Registry,
}

impl EnrollmentSource {
    /// The `source` member's value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Invite => "invite",
            Self::Registry => "registry",
        }
    }
}

/// What a `preauthorization` line records about a definition added or changed: its JSON text
/// (`{"slug": …, "scope": …}`) and its digest. The service's stored definition lends these two
/// fields; the log needs nothing else of it.
#[derive(Debug, Clone, Copy)]
pub struct PreauthFacts<'a> {
    pub definition_json: &'a str,
    pub digest: &'a [u8; 32],
}

/// What an `enrollment` line records.
#[derive(Debug, Clone)]
pub struct EnrollmentFacts<'a> {
    pub principal: &'a str,
    /// base64url.
    pub credential_id: &'a str,
    pub aaguid: Option<&'a str>,
    pub attestation_format: &'a str,
    pub chain_verified: bool,
    pub group: Option<&'a str>,
    pub source: EnrollmentSource,
}

/// The `authority` member of a Decision or at-once outcome line: what the verdict grants.
///
/// An APPROVED verdict grants one call whose APPROVED op_hash is `op_hash`, collectable once
/// until `until` (`{"scope": "one_call", …}`), and says on what basis: a human `decision`, a
/// `tool_rule` that needs no human, or a `preauthorization` (with its slug, digest and use
/// number). A DENIED verdict grants nothing (`{"scope": "none"}`). A grant line whose
/// fingerprint or time falls outside the recorded authority is refused by `audit verify`.
pub fn authority(
    op_hash: Option<&[u8; 32]>,
    until: Option<&str>,
    by: &str,
    preauthorization: Option<Value>,
) -> Value {
    let (Some(op_hash), Some(until)) = (op_hash, until) else {
        return json!({ "scope": "none" });
    };
    let mut value = json!({
        "scope": "one_call",
        "op_hash": b64::encode(op_hash),
        "until": until,
        "by": by,
    });
    if let (Some(p), Value::Object(map)) = (preauthorization, &mut value) {
        map.insert("preauthorization".into(), p);
    }
    value
}

impl AuditEvent {
    fn of(value: Value) -> Self {
        match value {
            Value::Object(map) => Self(map),
            _ => Self(Map::new()),
        }
    }

    /// An event from a JSON body as read from a line (`seq`, `prev_hash` and `sig` are replaced
    /// when it is sealed). Re-sealing an edited line is what a holder of the service key can do
    /// anyway; tests use it to forge logs that only evidence re-verification catches.
    pub fn from_body(body: Map<String, Value>) -> Self {
        Self(body)
    }

    /// The JSON body.
    pub fn body(&self) -> &Map<String, Value> {
        &self.0
    }

    /// The `kind` member.
    pub fn kind(&self) -> &str {
        self.0.get("kind").and_then(Value::as_str).unwrap_or("")
    }

    /// A request as the gateway submitted it: the full action, because the record must say what
    /// was asked. (Notifications never carry it; the audit log is not a notification.)
    pub fn request(f: &RequestFacts<'_>) -> Self {
        let mut line = Self::of(json!({
            "kind": "request",
            "approval_id": f.approval_id,
            "ts": f.ts,
            "agent_id": f.agent_id,
            "tool_name": f.tool_name,
            "profile": f.profile,
            "fields": f.fields,
            "submitted_sha256": f.submitted_sha256,
            "severity": f.severity,
            "expires_at": f.expires_at,
            "fingerprint": f.fingerprint,
        }));
        if let Some(text) = f.submitted_text {
            line.0.insert("submitted_text".into(), Value::from(text));
        }
        line
    }

    /// The callback's immediate answer: PENDING, or an at-once APPROVED/DENIED with its reason.
    pub fn outcome(approval_id: &str, ts: &str, status: &str, reason_code: Option<&str>) -> Self {
        Self::of(json!({
            "kind": "outcome",
            "approval_id": approval_id,
            "ts": ts,
            "status": status,
            "reason_code": reason_code,
        }))
    }

    /// A human verdict with the evidence that proves it and the assurance derived from it.
    pub fn decision(
        approval_id: &str,
        ts: &str,
        verdict: &str,
        principal: &str,
        identity_assurance: &Value,
        evidence: &Value,
    ) -> Self {
        Self::of(json!({
            "kind": "decision",
            "approval_id": approval_id,
            "ts": ts,
            "verdict": verdict,
            "principal": principal,
            "identity_assurance": identity_assurance,
            "evidence": evidence,
        }))
    }

    /// A terminal settlement that is not a human verdict: expiry or withdrawal.
    pub fn settlement(approval_id: &str, ts: &str, reason_code: &str) -> Self {
        Self::of(json!({
            "kind": "settlement",
            "approval_id": approval_id,
            "ts": ts,
            "status": "DENIED",
            "reason_code": reason_code,
        }))
    }

    /// A grant collected for the exact call fingerprint.
    pub fn grant(approval_id: &str, ts: &str, fingerprint: &str) -> Self {
        Self::of(json!({
            "kind": "grant",
            "approval_id": approval_id,
            "ts": ts,
            "fingerprint": fingerprint,
        }))
    }

    /// A credential enrolled: through an invite (`source` `"invite"`), or imported from a
    /// registry file / `AppState::enroll` (`"registry"`). Carries no `approval_id`.
    pub fn enrollment(ts: &str, facts: &EnrollmentFacts<'_>) -> Self {
        Self::of(json!({
            "kind": "enrollment",
            "ts": ts,
            "principal": facts.principal,
            "credential_id": facts.credential_id,
            "aaguid": facts.aaguid,
            "attestation_format": facts.attestation_format,
            "chain_verified": facts.chain_verified,
            "group": facts.group,
            "source": facts.source.as_str(),
        }))
    }

    /// The `enrollment` line of a stored credential record.
    pub fn enrollment_of(
        ts: &str,
        record: &CredentialRecord,
        group: Option<&str>,
        source: EnrollmentSource,
    ) -> Self {
        let credential_id = b64::encode(&record.credential_id);
        let aaguid = record.aaguid.map(|a| a.to_string());
        let mut line = Self::enrollment(
            ts,
            &EnrollmentFacts {
                principal: &record.principal,
                credential_id: &credential_id,
                aaguid: aaguid.as_deref(),
                attestation_format: record
                    .attestation
                    .as_ref()
                    .map_or("none", |a| a.format.as_str()),
                chain_verified: record
                    .attestation
                    .as_ref()
                    .is_some_and(|a| a.chain_verified),
                group,
                source,
            },
        );
        // The credential as enrolled (public key, backup eligibility, attestation): what
        // `audit verify` needs to re-verify a Decision's evidence from the log alone. The counter
        // and revocation flag are state, not enrollment facts.
        let mut enrolled = record.clone();
        enrolled.sign_count = 0;
        enrolled.revoked = false;
        if let Ok(value) = serde_json::to_value(&enrolled) {
            line.0.insert("credential".into(), value);
        }
        line
    }

    /// A credential revoked by an operator, with the operator's reason. Carries no
    /// `approval_id`.
    pub fn revocation(ts: &str, principal: &str, credential_id: &[u8], reason: &str) -> Self {
        Self::of(json!({
            "kind": "revocation",
            "ts": ts,
            "principal": principal,
            "credential_id": b64::encode(credential_id),
            "reason": reason,
        }))
    }

    /// A config-owned preauthorization added, changed or removed at startup, or disabled by an
    /// operator (`change`: `added`, `changed`, `removed`, `disabled`). Carries no `approval_id`.
    /// Added and changed lines carry the definition and its digest, so the log alone says what
    /// every later `preauthorization` member of an outcome line referred to.
    pub fn preauthorization(
        ts: &str,
        change: &str,
        slug: &str,
        definition: Option<PreauthFacts<'_>>,
    ) -> Self {
        let mut line = Self::of(json!({
            "kind": "preauthorization",
            "ts": ts,
            "change": change,
            "slug": slug,
        }));
        if let Some(d) = definition {
            let parsed: Value = serde_json::from_str(d.definition_json).unwrap_or(Value::Null);
            line.0.insert("definition".into(), parsed);
            line.0
                .insert("digest".into(), Value::from(b64::encode(d.digest)));
        }
        line
    }

    /// One attempt to deliver a notification: the approval it is about, the step (`new`,
    /// `reminder-N`, `escalation-N`), the channel's kind and configured name (never its URL or
    /// any secret), the attempt number from 1 and its outcome (`delivered`, `no_answer`,
    /// `status_4xx`, `status_5xx`, `refused`). `final` is true when no attempt follows.
    pub fn notification(facts: &NotificationFacts<'_>) -> Self {
        Self::of(json!({
            "kind": "notification",
            "approval_id": facts.approval_id,
            "ts": facts.ts,
            "step": facts.step,
            "channel": facts.channel,
            "target": facts.target,
            "attempt": facts.attempt,
            "outcome": facts.outcome,
            "final": facts.last,
        }))
    }

    /// An approver extended a PENDING approval's window: from `previous` to `expires_at`
    /// (RFC 3339). The grant window of a later approval is unchanged by it.
    pub fn extension(
        approval_id: &str,
        ts: &str,
        principal: &str,
        previous: &str,
        expires_at: &str,
    ) -> Self {
        Self::of(json!({
            "kind": "extension",
            "approval_id": approval_id,
            "ts": ts,
            "principal": principal,
            "previous_expires_at": previous,
            "expires_at": expires_at,
        }))
    }

    /// Set one member (replacing it if present).
    pub fn with_member(mut self, key: &str, value: Value) -> Self {
        self.0.insert(key.into(), value);
        self
    }

    /// Name the gateway that made this happen (`"gateway": NAME`): on `request` lines, on the
    /// `settlement` line of a withdrawal and on `grant` lines.
    pub fn by_gateway(mut self, gateway: &str) -> Self {
        self.0.insert("gateway".into(), Value::from(gateway));
        self
    }

    /// Drop a member (tests build malformed lines with it).
    #[cfg(test)]
    pub(crate) fn remove(&mut self, key: &str) {
        self.0.remove(key);
    }

    /// A PENDING outcome for `approval_id` at a fixed time: the line tests seal when only the
    /// chain matters.
    #[doc(hidden)]
    pub fn test(approval_id: &str) -> Self {
        Self::outcome(approval_id, "2026-01-01T00:00:00Z", "PENDING", None)
    }
}
