//! Structure: the service's line kinds and the cross-line rules (docs/spec/service.md, "audit
//! verify").
//!
//! Seed 000's rules: a PENDING outcome with no decision is informational (the human may still
//! answer, or answered in a later file); a decision for an approval id the file does not contain
//! is informational (the request was recorded in an earlier file); two terminal lines (decision
//! or settlement) for one approval is a violation, because a correct writer — whose database
//! settles each approval once, atomically — cannot produce it.
//!
//! Credential lines (`enrollment`, `revocation`) carry no `approval_id`. A revocation of a
//! credential the file never enrolled is informational (enrolled in an earlier file); a second
//! enrollment of a credential id, or a second revocation, without the other in between is a
//! violation; and so is a decision whose evidence names a credential revoked earlier in the file,
//! because the service refuses a revoked credential's assertions.

use super::evidence::Evidence;
use super::report::Findings;
use crate::code::AuditCode;
use countersign::{CredentialRecord, b64};
use serde_json::{Map, Value};
use sha2::{Digest as _, Sha256};
use std::collections::HashMap;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// What the file has said so far about one approval. Kept for every approval the file names
/// (a later line may still break a rule about it); the id itself is kept only while it is
/// pending, for the end-of-log note.
#[derive(Debug, Default)]
struct Approval {
    requested: bool,
    /// The PENDING outcome's line, and the id the end-of-log note names.
    pending: Option<(usize, Box<str>)>,
    /// The terminal line, and whether it approved.
    terminal: Option<(usize, bool)>,
    granted: bool,
    /// The `authority` an APPROVED Decision or outcome line recorded: (op_hash, until).
    authority: Option<Box<(String, String)>>,
}

/// What the file has said so far about one credential id (base64url).
#[derive(Debug, Default)]
pub(super) struct Credential {
    /// Line of the enrollment that is in force (not followed by a revocation).
    pub(super) enrolled: Option<usize>,
    /// Line of the revocation that is in force (not followed by a re-enrollment).
    pub(super) revoked: Option<usize>,
    /// The record the enrollment in force carried (`None`: a writer that did not record the
    /// public key, or evidence is not re-verified).
    pub(super) record: Option<CredentialRecord>,
}

/// The approvals and credentials of the walk.
#[derive(Debug)]
pub(super) struct Structure {
    /// By SHA-256 of the approval id.
    approvals: HashMap<[u8; 32], Approval>,
    credentials: HashMap<String, Credential>,
    /// Keep the enrolled credential records (for the evidence check).
    keep_records: bool,
}

fn key(id: &str) -> [u8; 32] {
    Sha256::digest(id.as_bytes()).into()
}

impl Structure {
    pub(super) fn new(keep_records: bool) -> Self {
        Self {
            approvals: HashMap::new(),
            credentials: HashMap::new(),
            keep_records,
        }
    }

    /// What the file says about credential `id` at this point.
    pub(super) fn credential(&self, id: &str) -> Option<&Credential> {
        self.credentials.get(id)
    }

    /// One readable line that is not the interposer's. `evidence`: the evidence checker, and
    /// whether this line's evidence is to be judged (not for lines a `--from` checkpoint covers).
    pub(super) fn line(
        &mut self,
        n: usize,
        kind: &str,
        object: &Map<String, Value>,
        evidence: Option<(&mut Evidence<'_>, bool)>,
        f: &mut Findings,
    ) {
        if matches!(kind, "enrollment" | "revocation") {
            self.credential_line(n, kind, object, f);
            return;
        }
        if kind == "preauthorization" {
            // Operator configuration changes: recorded for the reader (and `audit recheck`), no
            // cross-line rule of their own.
            return;
        }
        let Some(id) = object.get("approval_id").and_then(Value::as_str) else {
            f.push(
                n,
                AuditCode::NoApprovalId,
                format!("{kind:?} line without approval_id"),
            );
            return;
        };
        match kind {
            "request" => {
                if let Some((evidence, _)) = evidence {
                    evidence.request(id, object);
                }
                self.request(n, id, f);
            }
            "outcome" => self.outcome(n, id, object, f),
            "decision" => self.decision(n, id, object, evidence, f),
            "settlement" => self.terminal(n, id, false, f),
            "grant" => {
                self.grant_in_scope(n, id, object, f);
                self.grant(n, id, f);
            }
            // The signer of a standing grant revoked it: later uses stop, earlier ones stand.
            // It changes no approval's verdict, so it carries no rule of its own here.
            "standing_revocation" => {}
            // A notification attempt and an extension of a PENDING approval's window: recorded
            // for the reader; neither decides anything, so no cross-line rule.
            "notification" | "extension" => {}
            other => f.push(
                n,
                AuditCode::UnknownKind,
                format!("unknown line kind {other:?}"),
            ),
        }
    }

    fn request(&mut self, n: usize, id: &str, f: &mut Findings) {
        let a = self.approvals.entry(key(id)).or_default();
        if std::mem::replace(&mut a.requested, true) {
            f.push(
                n,
                AuditCode::DuplicateRequest,
                format!("{id} requested twice"),
            );
        }
    }

    fn outcome(&mut self, n: usize, id: &str, object: &Map<String, Value>, f: &mut Findings) {
        match object.get("status").and_then(Value::as_str).unwrap_or("") {
            "PENDING" => {
                self.approvals.entry(key(id)).or_default().pending = Some((n, id.into()));
            }
            status @ ("APPROVED" | "DENIED") => {
                self.record_authority(id, object);
                self.terminal(n, id, status == "APPROVED", f);
            }
            other => f.push(n, AuditCode::BadStatus, format!("outcome status {other:?}")),
        }
    }

    /// A human verdict: the approval known, its signers not revoked, its authority recorded,
    /// its evidence queued for re-verification, and it is the approval's one terminal line.
    fn decision(
        &mut self,
        n: usize,
        id: &str,
        object: &Map<String, Value>,
        evidence: Option<(&mut Evidence<'_>, bool)>,
        f: &mut Findings,
    ) {
        let verdict = object.get("verdict").and_then(Value::as_str).unwrap_or("");
        if !matches!(verdict, "APPROVED" | "DENIED") {
            f.push(
                n,
                AuditCode::BadStatus,
                format!("decision verdict {verdict:?}"),
            );
            return;
        }
        if !self.approvals.get(&key(id)).is_some_and(|a| a.requested) {
            f.push(
                n,
                AuditCode::DecisionForUnknownApproval,
                format!("{id} was requested in an earlier file"),
            );
        }
        self.revoked_signer(n, id, object.get("evidence"), f);
        self.record_authority(id, object);
        if let Some((evidence, judge)) = evidence {
            evidence.decision(n, id, verdict, object, self, judge, f);
        }
        self.terminal(n, id, verdict == "APPROVED", f);
    }

    fn terminal(&mut self, n: usize, id: &str, approved: bool, f: &mut Findings) {
        let a = self.approvals.entry(key(id)).or_default();
        if let Some((first, _)) = a.terminal {
            f.push(
                n,
                AuditCode::TwoVerdicts,
                format!("{id} already settled on line {first}"),
            );
            return;
        }
        a.terminal = Some((n, approved));
        // Settled: the end-of-log note about a pending approval no longer applies.
        a.pending = None;
    }

    /// Remember what an APPROVED verdict line says it grants (lines written before the
    /// `authority` member existed record none, and their grants are checked only as before).
    fn record_authority(&mut self, id: &str, object: &Map<String, Value>) {
        let Some(Value::Object(a)) = object.get("authority") else {
            return;
        };
        if a.get("scope").and_then(Value::as_str) != Some("one_call") {
            return;
        }
        let op_hash = a.get("op_hash").and_then(Value::as_str).unwrap_or_default();
        let until = a.get("until").and_then(Value::as_str).unwrap_or_default();
        let entry = self.approvals.entry(key(id)).or_default();
        if entry.terminal.is_none() {
            entry.authority = Some(Box::new((op_hash.to_owned(), until.to_owned())));
        }
    }

    /// A grant must fall inside the authority its verdict recorded: the same op_hash, before
    /// `until`. Approval without recorded scope would be a blank check in the evidence.
    fn grant_in_scope(&self, n: usize, id: &str, object: &Map<String, Value>, f: &mut Findings) {
        let Some(authority) = self
            .approvals
            .get(&key(id))
            .and_then(|a| a.authority.as_ref())
        else {
            return;
        };
        let (op_hash, until) = authority.as_ref();
        let fingerprint = object.get("fingerprint").and_then(Value::as_str);
        if fingerprint != Some(op_hash.as_str()) {
            f.push(
                n,
                AuditCode::GrantOutsideScope,
                format!("{id} granted for {fingerprint:?}, the verdict granted {op_hash}"),
            );
            return;
        }
        let at = object
            .get("ts")
            .and_then(Value::as_str)
            .and_then(|t| OffsetDateTime::parse(t, &Rfc3339).ok());
        let end = OffsetDateTime::parse(until, &Rfc3339).ok();
        if !matches!((at, end), (Some(at), Some(end)) if at < end) {
            f.push(
                n,
                AuditCode::GrantOutsideScope,
                format!(
                    "{id} granted after (or without a time inside) its authority, until {until}"
                ),
            );
        }
    }

    fn grant(&mut self, n: usize, id: &str, f: &mut Findings) {
        let Some(a) = self.approvals.get_mut(&key(id)) else {
            f.push(
                n,
                AuditCode::GrantForUnknownApproval,
                format!("{id} was decided in an earlier file"),
            );
            return;
        };
        if std::mem::replace(&mut a.granted, true) {
            f.push(
                n,
                AuditCode::GrantCollectedTwice,
                format!("{id} granted twice"),
            );
            return;
        }
        match a.terminal {
            Some((_, true)) => {}
            Some((_, false)) => f.push(
                n,
                AuditCode::GrantWithoutApproval,
                format!("{id} settled DENIED"),
            ),
            None if a.requested => f.push(
                n,
                AuditCode::GrantWithoutApproval,
                format!("{id} is not settled"),
            ),
            None => {}
        }
    }

    /// An `enrollment` or `revocation` line.
    fn credential_line(
        &mut self,
        n: usize,
        kind: &str,
        object: &Map<String, Value>,
        f: &mut Findings,
    ) {
        let Some(id) = object.get("credential_id").and_then(Value::as_str) else {
            f.push(
                n,
                AuditCode::NoCredentialId,
                format!("{kind:?} line without credential_id"),
            );
            return;
        };
        let keep_records = self.keep_records;
        let state = self.credentials.entry(id.to_owned()).or_default();
        if kind == "enrollment" {
            if let Some(first) = state.enrolled {
                f.push(
                    n,
                    AuditCode::DuplicateEnrollment,
                    format!(
                        "credential {id} already enrolled on line {first} and not revoked since"
                    ),
                );
                return;
            }
            state.enrolled = Some(n);
            state.revoked = None;
            state.record = object
                .get("credential")
                .filter(|_| keep_records)
                .and_then(|v| serde_json::from_value::<CredentialRecord>(v.clone()).ok())
                .filter(|r| b64::encode(&r.credential_id) == id);
            return;
        }
        state.record = None;
        if let Some(first) = state.revoked {
            f.push(
                n,
                AuditCode::DuplicateRevocation,
                format!("credential {id} already revoked on line {first}"),
            );
            return;
        }
        let enrolled = state.enrolled.take();
        state.revoked = Some(n);
        if enrolled.is_none() {
            f.push(
                n,
                AuditCode::RevocationForUnknownCredential,
                format!("credential {id} was enrolled in an earlier file"),
            );
        }
    }

    /// A decision whose evidence names a credential revoked earlier in the file.
    fn revoked_signer(&self, n: usize, approval: &str, evidence: Option<&Value>, f: &mut Findings) {
        for entry in evidence_entries(evidence) {
            let Some(id) = entry.get("credential_id").and_then(Value::as_str) else {
                continue;
            };
            if let Some(line) = self.credentials.get(id).and_then(|s| s.revoked) {
                f.push(
                    n,
                    AuditCode::DecisionByRevokedCredential,
                    format!("{approval} decided with credential {id}, revoked on line {line}"),
                );
            }
        }
    }

    /// At the end of the log: approvals PENDING with no terminal line, in line order.
    pub(super) fn finish(&mut self, f: &mut Findings) {
        let mut pending: Vec<(usize, Box<str>)> = self
            .approvals
            .drain()
            .filter(|(_, a)| a.terminal.is_none())
            .filter_map(|(_, a)| a.pending)
            .collect();
        pending.sort();
        for (line, id) in pending {
            f.push(
                line,
                AuditCode::PendingWithoutDecision,
                format!("{id} is PENDING and has no decision in this file"),
            );
        }
    }
}

/// A decision's evidence entries: an array of them, or one.
pub(super) fn evidence_entries(evidence: Option<&Value>) -> Vec<&Value> {
    match evidence {
        Some(Value::Array(entries)) => entries.iter().collect(),
        Some(entry @ Value::Object(_)) => vec![entry],
        _ => Vec::new(),
    }
}
