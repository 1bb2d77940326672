//! Offline verification of an audit log: chain, signatures, then the cross-line rules.
//!
//! Integrity comes first and is checked on every line, even after a failure, so one edited line
//! reports where it is (its signature) and what it broke (the next line's `prev_hash`). The
//! structural rules follow seed 000: a PENDING outcome with no decision is informational (the
//! human may still answer, or answered in a later file); a decision for an approval id the file
//! does not contain is informational (the request was recorded in an earlier file); two terminal
//! lines (decision or settlement) for one approval is a violation, because a correct writer —
//! whose database settles each approval once, atomically — cannot produce it.
//!
//! Credential lines (`enrollment`, `revocation`) carry no `approval_id`. A revocation of a
//! credential the file never enrolled is informational (enrolled in an earlier file); a second
//! enrollment of a credential id, or a second revocation, without the other in between is a
//! violation; and so is a decision whose evidence names a credential revoked earlier in the file,
//! because the service refuses a revoked credential's assertions.

use crate::seal::{AUDIT_DOMAIN, GENESIS_HASH, SIG_SUFFIX_LEN, line_hash};
use countersign::b64;
use ed25519_dalek::{Signature, VerifyingKey};
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::HashMap;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use countersign::{
    ApprovalResult, CredentialRecord, CredentialRegistry, Policy, ReasonCode, RegistryDocument,
    replay::danger::OfflineAudit,
};

/// Whether an issue breaks the log or is only worth knowing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IssueClass {
    /// Integrity or structure is broken: exit code 1.
    Violation,
    /// Legal, reported for the reader.
    Informational,
}

/// One finding, tied to a line (1-based; 0 for the file as a whole).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditIssue {
    pub line: usize,
    pub class: IssueClass,
    /// A stable code: `not_json`, `bad_signature`, `chain_break`, `seq_gap`, `two_verdicts`, ...
    pub code: &'static str,
    pub detail: String,
    /// For a Decision whose evidence does not verify: the verifier's reason code.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason_code: Option<ReasonCode>,
}

/// The result of [`verify_log`].
#[derive(Debug, Clone, Default, Serialize)]
pub struct AuditReport {
    pub lines: usize,
    /// base64url hash of the last line (compare with the service's published head to detect a
    /// truncated tail, which a chain alone cannot reveal).
    pub head: String,
    pub issues: Vec<AuditIssue>,
}

impl AuditReport {
    /// Compare the log with a checkpoint already verified under the service key, and record the
    /// finding: informational when the log covers it, a violation when it is shorter (lines
    /// were cut from its end, which the chain alone cannot reveal) or diverges.
    pub fn check_checkpoint(&mut self, log: &[u8], checkpoint: &crate::Checkpoint) {
        let size = checkpoint.size;
        let at = usize::try_from(size).unwrap_or(usize::MAX);
        let (class, code, detail) = match checkpoint.compare(log) {
            crate::LogComparison::Covers => (
                IssueClass::Informational,
                "checkpoint_covered",
                format!(
                    "the checkpoint of {} lines signed at {} is a prefix of this log",
                    size, checkpoint.time
                ),
            ),
            crate::LogComparison::Shorter { lines, .. } => (
                IssueClass::Violation,
                "checkpoint_truncated",
                format!(
                    "a checkpoint signed at {} covers {size} lines but the log has {lines}: \
                     lines were cut from its end",
                    checkpoint.time
                ),
            ),
            crate::LogComparison::Diverges {
                expected, found, ..
            } => (
                IssueClass::Violation,
                "checkpoint_diverges",
                match checkpoint.kind {
                    crate::CheckpointHash::ChainHead => format!(
                        "a checkpoint signed at {} says line {size} hashes to {} but it hashes \
                         to {}",
                        checkpoint.time,
                        b64::encode(&expected),
                        b64::encode(&found)
                    ),
                    crate::CheckpointHash::MerkleRoot => format!(
                        "a checkpoint signed at {} says the first {size} lines have Merkle root \
                         {} but they have {}",
                        checkpoint.time,
                        b64::encode(&expected),
                        b64::encode(&found)
                    ),
                },
            ),
        };
        self.issues.push(AuditIssue {
            line: at,
            class,
            code,
            detail,
            reason_code: None,
        });
    }

    /// No violation (informational issues allowed).
    pub fn is_valid(&self) -> bool {
        !self.issues.iter().any(|i| i.class == IssueClass::Violation)
    }
}

#[derive(Default)]
struct Approval {
    requested: bool,
    pending: Option<usize>,
    terminal: Option<(usize, String)>,
    granted: bool,
    /// The `authority` an APPROVED Decision or outcome line recorded: (op_hash, until).
    authority: Option<(String, String)>,
}

/// What the file has said so far about one credential id (base64url).
#[derive(Default)]
struct Credential {
    /// Line of the enrollment that is in force (not followed by a revocation).
    enrolled: Option<usize>,
    /// Line of the revocation that is in force (not followed by a re-enrollment).
    revoked: Option<usize>,
}

struct Checker<'a> {
    report: AuditReport,
    approvals: HashMap<String, Approval>,
    credentials: HashMap<String, Credential>,
    /// Re-verification of Decisions' evidence, when asked for.
    evidence: Option<&'a EvidenceCheck>,
    /// approval id -> (tool, profile, admitted fields as JSON text), from `request` lines.
    requests: HashMap<String, (String, String, String)>,
    /// Credentials enrolled and in force at the current line, as the log recorded them
    /// (`None`: enrolled by a writer that did not record the public key).
    enrolled: HashMap<String, (usize, Option<CredentialRecord>)>,
    jobs: Vec<Job>,
    /// Evidence nonce -> the Decision line that used it: each challenge is signed for one
    /// approval, so a nonce seen twice is replayed evidence (offline-audit mode does not enforce
    /// replay within one verification, so the log walk does it across lines).
    nonces: HashMap<String, usize>,
    /// (line, signed message, seal) of every readable line, verified after the walk.
    seals: Vec<(usize, Vec<u8>, Signature)>,
    /// MCP interposer logs: call id -> line of its `mcp_call` (intent) still without outcome.
    mcp_open: HashMap<String, usize>,
    /// Call ids whose outcome is written.
    mcp_done: std::collections::HashSet<String>,
    /// The first and last unsigned interposer line since the last signed line: covered by the
    /// next signed line through the chain, and a violation if none follows.
    uncovered: Option<(usize, usize)>,
}

/// What re-verifying the Decisions' evidence needs besides the log.
#[derive(Debug)]
pub struct EvidenceCheck {
    /// The policy of tools without their own rule: rp_id, origins, user verification (quorum,
    /// approvers and minimum assurance are not re-judged: see [`judge`]).
    pub policy: Policy,
    /// The policies of tools with their own rule, by tool name (`Config::policy`).
    pub tools: HashMap<String, Policy>,
    /// Judge the evidence against this registry instead of the log's enrollment lines.
    pub registry: Option<CredentialRegistry>,
    /// Threads for the evidence checks (0: every core).
    pub threads: usize,
}

/// One Decision to re-verify: independent of every other line, so it runs on any core.
struct Job {
    line: usize,
    tool: String,
    verdict: String,
    principal: String,
    assurance: Option<Value>,
    profile: String,
    fields: String,
    result: ApprovalResult,
    registry: Option<CredentialRegistry>,
    now: time::OffsetDateTime,
}

impl Checker<'_> {
    fn push(&mut self, line: usize, class: IssueClass, code: &'static str, detail: String) {
        self.report.issues.push(AuditIssue {
            line,
            class,
            code,
            detail,
            reason_code: None,
        });
    }
    fn violation(&mut self, line: usize, code: &'static str, detail: String) {
        self.push(line, IssueClass::Violation, code, detail);
    }
    fn note(&mut self, line: usize, code: &'static str, detail: String) {
        self.push(line, IssueClass::Informational, code, detail);
    }
}

/// Verify a whole log against the service's public key (seals, chain and cross-line rules; no
/// evidence re-verification: see [`verify_log_with`]).
pub fn verify_log(bytes: &[u8], key: &VerifyingKey) -> AuditReport {
    verify_log_with(bytes, key, None)
}

/// Verify a whole log, and with `evidence` re-verify every Decision's evidence (docs/spec/service.md,
/// "audit verify").
pub fn verify_log_with(
    bytes: &[u8],
    key: &VerifyingKey,
    evidence: Option<&EvidenceCheck>,
) -> AuditReport {
    let mut c = Checker {
        report: AuditReport::default(),
        approvals: HashMap::new(),
        credentials: HashMap::new(),
        evidence,
        requests: HashMap::new(),
        enrolled: HashMap::new(),
        jobs: Vec::new(),
        nonces: HashMap::new(),
        seals: Vec::new(),
        mcp_open: HashMap::new(),
        mcp_done: std::collections::HashSet::new(),
        uncovered: None,
    };
    let Ok(text) = std::str::from_utf8(bytes) else {
        c.violation(0, "not_utf8", "the log is not UTF-8 text".into());
        return c.report;
    };
    let body = match text.strip_suffix('\n') {
        Some(body) => body,
        None if text.is_empty() => "",
        None => {
            c.violation(
                0,
                "unterminated",
                "the last line has no newline (a torn write?)".into(),
            );
            text
        }
    };
    let mut prev_hash = GENESIS_HASH;
    let mut expected_seq = 1u64;
    if !body.is_empty() {
        for (i, line) in body.split('\n').enumerate() {
            let n = i + 1;
            c.report.lines = n;
            if let Some(object) = check_integrity(&mut c, n, line, &prev_hash, expected_seq) {
                check_structure(&mut c, n, &object);
            }
            prev_hash = line_hash(line);
            expected_seq = expected_seq.saturating_add(1);
        }
    }
    c.report.head = b64::encode(&prev_hash);
    if let Some((first, last)) = c.uncovered {
        c.violation(
            first,
            "unsigned_tail",
            format!(
                "lines {first} to {last} carry no signature and no signed line follows them \
                 (a write cut short, or lines added without the key)"
            ),
        );
    }
    let threads = match evidence.map_or(1, |e| e.threads) {
        0 => std::thread::available_parallelism().map_or(1, usize::from),
        n => n,
    };
    let seals = std::mem::take(&mut c.seals);
    for n in check_seals(key, &seals, threads) {
        c.violation(
            n,
            "bad_signature",
            "signature does not verify under the key".into(),
        );
    }
    if let Some(check) = c.evidence {
        let jobs = std::mem::take(&mut c.jobs);
        let mut found = run_jobs(check, jobs);
        c.report.issues.append(&mut found);
    }
    c.report.issues.sort_by_key(|i| i.line);
    let mut pending: Vec<(usize, String)> = c
        .approvals
        .iter()
        .filter(|(_, a)| a.terminal.is_none())
        .filter_map(|(id, a)| a.pending.map(|line| (line, id.clone())))
        .collect();
    let mut in_flight: Vec<(usize, String)> =
        c.mcp_open.drain().map(|(id, line)| (line, id)).collect();
    in_flight.sort();
    for (line, id) in in_flight {
        c.note(
            line,
            "mcp_call_in_flight",
            format!("MCP call {id} has no outcome and the log was not closed after it"),
        );
    }
    pending.sort();
    for (line, id) in pending {
        c.note(
            line,
            "pending_without_decision",
            format!("{id} is PENDING and has no decision in this file"),
        );
    }
    c.report
}

/// `seq` and `prev_hash` of one line, its seal queued for [`check_seals`]; the parsed object when
/// the line is readable.
fn check_integrity(
    c: &mut Checker,
    n: usize,
    line: &str,
    prev_hash: &[u8; 32],
    expected_seq: u64,
) -> Option<Map<String, Value>> {
    let Some((unsigned, signature)) = split_signature(line) else {
        // An interposer signs only the last line of each write; the lines before it are
        // authenticated by that signature through the chain (each `prev_hash` is the hash of
        // the whole previous line). The service signs every line.
        let object = unsigned_interposer_line(line);
        if object.is_some() {
            c.uncovered = Some((c.uncovered.map_or(n, |(first, _)| first), n));
        } else {
            c.violation(
                n,
                "no_signature",
                "line does not end with a \"sig\" member".into(),
            );
        }
        return object.map(|o| check_chain(c, n, o, prev_hash, expected_seq));
    };
    // This signature covers the unsigned lines before it (if it verifies: checked below).
    c.uncovered = None;
    let object = match serde_json::from_str::<Value>(&unsigned) {
        Ok(Value::Object(object)) if !object.contains_key("sig") => object,
        Ok(_) => {
            c.violation(
                n,
                "not_object",
                "line is not a JSON object with one sig".into(),
            );
            return None;
        }
        Err(e) => {
            c.violation(n, "not_json", format!("line is not JSON: {e}"));
            return None;
        }
    };
    let mut message = Vec::with_capacity(AUDIT_DOMAIN.len() + unsigned.len());
    message.extend_from_slice(AUDIT_DOMAIN);
    message.extend_from_slice(unsigned.as_bytes());
    // Checked after the walk, in batches (see `check_seals`).
    c.seals.push((n, message, signature));
    Some(check_chain(c, n, object, prev_hash, expected_seq))
}

/// An interposer line written without a signature: a JSON object of an `mcp_` kind with no
/// `sig` member.
fn unsigned_interposer_line(line: &str) -> Option<Map<String, Value>> {
    match serde_json::from_str::<Value>(line) {
        Ok(Value::Object(o))
            if !o.contains_key("sig")
                && matches!(
                    o.get("kind").and_then(Value::as_str),
                    Some("mcp_call" | "mcp_outcome" | "mcp_close")
                ) =>
        {
            Some(o)
        }
        _ => None,
    }
}

/// `seq` and `prev_hash` of line `n`: the chain.
fn check_chain(
    c: &mut Checker,
    n: usize,
    object: Map<String, Value>,
    prev_hash: &[u8; 32],
    expected_seq: u64,
) -> Map<String, Value> {
    let seq = object.get("seq").and_then(Value::as_u64);
    if seq != Some(expected_seq) {
        c.violation(
            n,
            "seq_gap",
            format!(
                "seq is {seq:?}, expected {expected_seq} (line removed, inserted or reordered)"
            ),
        );
    }
    let expected = b64::encode(prev_hash);
    let got = object.get("prev_hash").and_then(Value::as_str);
    if got != Some(expected.as_str()) {
        c.violation(
            n,
            "chain_break",
            format!("prev_hash is {got:?}, the previous line hashes to {expected}"),
        );
    }
    object
}

/// Lines per batch verification: large enough to amortize, small enough that a failed batch
/// (re-checked line by line to name the bad lines) costs little.
const SEAL_BATCH: usize = 256;

/// The lines whose seal does not verify. Batches use ed25519-dalek's batch verification (one
/// multiscalar multiplication per batch); a batch that fails, and every batch under a weak key,
/// is re-checked line by line with `verify_strict`, which therefore has the last word on every
/// rejected line. Batches run on `threads` threads.
fn check_seals(
    key: &VerifyingKey,
    seals: &[(usize, Vec<u8>, Signature)],
    threads: usize,
) -> Vec<usize> {
    let one_by_one = |batch: &[(usize, Vec<u8>, Signature)]| -> Vec<usize> {
        batch
            .iter()
            .filter(|(_, m, s)| key.verify_strict(m, s).is_err())
            .map(|(n, _, _)| *n)
            .collect()
    };
    let check_batch = |batch: &[(usize, Vec<u8>, Signature)]| -> Vec<usize> {
        if key.is_weak() {
            return one_by_one(batch);
        }
        let messages: Vec<&[u8]> = batch.iter().map(|(_, m, _)| m.as_slice()).collect();
        let signatures: Vec<Signature> = batch.iter().map(|(_, _, s)| *s).collect();
        let keys = vec![*key; batch.len()];
        match ed25519_dalek::verify_batch(&messages, &signatures, &keys) {
            Ok(()) => Vec::new(),
            Err(_) => one_by_one(batch),
        }
    };
    let batches: Vec<&[(usize, Vec<u8>, Signature)]> = seals.chunks(SEAL_BATCH).collect();
    if threads <= 1 || batches.len() < 2 {
        return batches.into_iter().flat_map(check_batch).collect();
    }
    let per_thread = batches.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let handles: Vec<_> = batches
            .chunks(per_thread)
            .map(|group| {
                let handle = scope.spawn(move || {
                    group
                        .iter()
                        .flat_map(|b| check_batch(b))
                        .collect::<Vec<_>>()
                });
                (group, handle)
            })
            .collect();
        // A thread that did not finish proved nothing: every line of its group fails (closed).
        handles
            .into_iter()
            .flat_map(|(group, h)| {
                h.join().unwrap_or_else(|_| {
                    group
                        .iter()
                        .flat_map(|b| b.iter().map(|(n, _, _)| *n))
                        .collect()
                })
            })
            .collect()
    })
}

/// Split `...,"sig":"<86 chars>"}` into the signed text (`...}`) and the signature.
fn split_signature(line: &str) -> Option<(String, Signature)> {
    let cut = line.len().checked_sub(SIG_SUFFIX_LEN)?;
    let head = line.get(..cut)?;
    let suffix = line.get(cut..)?;
    let encoded = suffix.strip_prefix(",\"sig\":\"")?.strip_suffix("\"}")?;
    let bytes = b64::decode(encoded).ok()?;
    let signature = Signature::from_slice(&bytes).ok()?;
    Some((format!("{head}}}"), signature))
}

/// The cross-line rules for one readable line.
fn check_structure(c: &mut Checker, n: usize, object: &Map<String, Value>) {
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
    if matches!(kind, "enrollment" | "revocation") {
        credential_line(c, n, kind, object);
        return;
    }
    if matches!(kind, "mcp_call" | "mcp_outcome" | "mcp_close") {
        mcp_line(c, n, kind, object);
        return;
    }
    if kind == "preauthorization" {
        // Operator configuration changes: recorded for the reader (and `audit recheck`), no
        // cross-line rule of their own.
        return;
    }
    let Some(id) = object.get("approval_id").and_then(Value::as_str) else {
        c.violation(
            n,
            "no_approval_id",
            format!("{kind:?} line without approval_id"),
        );
        return;
    };
    let id = id.to_owned();
    let status = object.get("status").and_then(Value::as_str).unwrap_or("");
    match kind {
        "request" => {
            if c.evidence.is_some() {
                let tool = object.get("tool_name").and_then(Value::as_str);
                let profile = object.get("profile").and_then(Value::as_str);
                let fields = object.get("fields").map(Value::to_string);
                if let (Some(tool), Some(profile), Some(fields)) = (tool, profile, fields) {
                    c.requests
                        .insert(id.clone(), (tool.to_owned(), profile.to_owned(), fields));
                }
            }
            let a = c.approvals.entry(id.clone()).or_default();
            if std::mem::replace(&mut a.requested, true) {
                c.violation(n, "duplicate_request", format!("{id} requested twice"));
            }
        }
        "outcome" => match status {
            "PENDING" => {
                c.approvals.entry(id).or_default().pending = Some(n);
            }
            "APPROVED" | "DENIED" => {
                record_authority(c, &id, object);
                terminal(c, n, id, status);
            }
            other => c.violation(n, "bad_status", format!("outcome status {other:?}")),
        },
        "decision" => {
            let verdict = object.get("verdict").and_then(Value::as_str).unwrap_or("");
            if !matches!(verdict, "APPROVED" | "DENIED") {
                c.violation(n, "bad_status", format!("decision verdict {verdict:?}"));
                return;
            }
            if !c.approvals.get(&id).is_some_and(|a| a.requested) {
                c.note(
                    n,
                    "decision_for_unknown_approval",
                    format!("{id} was requested in an earlier file"),
                );
            }
            revoked_signer(c, n, &id, object.get("evidence"));
            record_authority(c, &id, object);
            if c.evidence.is_some() {
                queue_evidence(c, n, &id, verdict, object);
            }
            terminal(c, n, id, verdict);
        }
        "settlement" => terminal(c, n, id, "DENIED"),
        "grant" => {
            grant_in_scope(c, n, &id, object);
            grant(c, n, id);
        }
        // The signer of a standing grant revoked it: later uses stop, earlier ones stand. It
        // changes no approval's verdict, so it carries no rule of its own here.
        "standing_revocation" => {}
        other => c.violation(n, "unknown_kind", format!("unknown line kind {other:?}")),
    }
}

/// A line of the MCP interposer's log (docs/MCP.md, "Audit log"): every intent gets exactly one
/// outcome, and an intent still without one when the writer closed the log is a violation (seed
/// 000: the record closes at once; only a response may wait).
fn mcp_line(c: &mut Checker, n: usize, kind: &str, object: &Map<String, Value>) {
    if kind == "mcp_close" {
        let mut open: Vec<(usize, String)> =
            c.mcp_open.drain().map(|(id, line)| (line, id)).collect();
        open.sort();
        for (line, id) in open {
            c.violation(
                line,
                "mcp_intent_without_outcome",
                format!("MCP call {id} has no outcome before the log was closed on line {n}"),
            );
        }
        return;
    }
    let Some(id) = object.get("call_id").and_then(Value::as_str) else {
        c.violation(n, "no_call_id", format!("{kind:?} line without call_id"));
        return;
    };
    let id = id.to_owned();
    if kind == "mcp_call" {
        if c.mcp_open.contains_key(&id) || c.mcp_done.contains(&id) {
            c.violation(
                n,
                "mcp_duplicate_call",
                format!("MCP call {id} logged twice"),
            );
            return;
        }
        c.mcp_open.insert(id, n);
        return;
    }
    let outcome = object.get("outcome").and_then(Value::as_str).unwrap_or("");
    if !matches!(
        outcome,
        "allowed" | "pending_approval" | "denied" | "executed" | "continued"
    ) {
        c.violation(n, "bad_status", format!("MCP outcome {outcome:?}"));
    }
    // `continued`: the client's answer to the upstream's own input request, passed on for an
    // approved call (a nested multi round trip): it names that approval too.
    if matches!(outcome, "executed" | "continued")
        && object.get("approval_ref").and_then(Value::as_str).is_none()
    {
        c.violation(
            n,
            "mcp_executed_without_approval_ref",
            format!("MCP call {id} executed as a held call without approval_ref"),
        );
    }
    if c.mcp_done.contains(&id) {
        c.violation(
            n,
            "mcp_two_outcomes",
            format!("MCP call {id} has two outcomes"),
        );
        return;
    }
    if c.mcp_open.remove(&id).is_none() {
        c.note(
            n,
            "mcp_outcome_for_unknown_call",
            format!("MCP call {id} was logged in an earlier file"),
        );
    }
    c.mcp_done.insert(id);
}

/// An `enrollment` or `revocation` line.
fn credential_line(c: &mut Checker, n: usize, kind: &str, object: &Map<String, Value>) {
    let Some(id) = object.get("credential_id").and_then(Value::as_str) else {
        c.violation(
            n,
            "no_credential_id",
            format!("{kind:?} line without credential_id"),
        );
        return;
    };
    let id = id.to_owned();
    let state = c.credentials.entry(id.clone()).or_default();
    if kind == "enrollment" {
        if let Some(first) = state.enrolled {
            c.violation(
                n,
                "duplicate_enrollment",
                format!("credential {id} already enrolled on line {first} and not revoked since"),
            );
            return;
        }
        state.enrolled = Some(n);
        state.revoked = None;
        let record = object
            .get("credential")
            .and_then(|v| serde_json::from_value::<CredentialRecord>(v.clone()).ok())
            .filter(|r| b64::encode(&r.credential_id) == id);
        c.enrolled.insert(id, (n, record));
        return;
    }
    c.enrolled.remove(&id);
    if let Some(first) = state.revoked {
        c.violation(
            n,
            "duplicate_revocation",
            format!("credential {id} already revoked on line {first}"),
        );
        return;
    }
    let enrolled = state.enrolled.take();
    state.revoked = Some(n);
    if enrolled.is_none() {
        c.note(
            n,
            "revocation_for_unknown_credential",
            format!("credential {id} was enrolled in an earlier file"),
        );
    }
}

/// A decision whose evidence names a credential revoked earlier in the file.
fn revoked_signer(c: &mut Checker, n: usize, approval: &str, evidence: Option<&Value>) {
    let entries: Vec<&Value> = match evidence {
        Some(Value::Array(entries)) => entries.iter().collect(),
        Some(entry @ Value::Object(_)) => vec![entry],
        _ => Vec::new(),
    };
    for entry in entries {
        let Some(id) = entry.get("credential_id").and_then(Value::as_str) else {
            continue;
        };
        if let Some(line) = c.credentials.get(id).and_then(|s| s.revoked) {
            c.violation(
                n,
                "decision_by_revoked_credential",
                format!("{approval} decided with credential {id}, revoked on line {line}"),
            );
        }
    }
}

/// Prepare the re-verification of one Decision: the action from its request line, the result
/// from its evidence, the credentials in force at this line (or the given registry).
fn queue_evidence(
    c: &mut Checker<'_>,
    n: usize,
    id: &str,
    verdict: &str,
    object: &Map<String, Value>,
) {
    let Some(check) = c.evidence else { return };
    let Some((tool, profile, fields)) = c.requests.get(id).cloned() else {
        c.violation(
            n,
            "evidence_unverifiable",
            format!("{id} has no request line in this file: its action cannot be rebuilt"),
        );
        return;
    };
    let entries: Vec<Value> = match object.get("evidence") {
        Some(Value::Array(entries)) => entries.clone(),
        Some(entry @ Value::Object(_)) => vec![entry.clone()],
        _ => Vec::new(),
    };
    let envelope = serde_json::json!({
        "status": verdict,
        "approval_id": id,
        "approver_evidence": entries,
    });
    let result = match ApprovalResult::from_value(&envelope) {
        Ok(result) => result,
        Err(e) => {
            c.report.issues.push(AuditIssue {
                line: n,
                class: IssueClass::Violation,
                code: "evidence_rejected",
                detail: format!("{id}: the evidence is unreadable: {e}"),
                reason_code: Some(ReasonCode::EvidenceMalformed),
            });
            return;
        }
    };
    for entry in &entries {
        let Some(nonce) = entry.get("nonce").and_then(Value::as_str) else {
            continue;
        };
        if let Some(first) = c.nonces.insert(nonce.to_owned(), n) {
            c.report.issues.push(AuditIssue {
                line: n,
                class: IssueClass::Violation,
                code: "evidence_replayed",
                detail: format!("{id}: the evidence's nonce was already used on line {first}"),
                reason_code: Some(ReasonCode::Replayed),
            });
            return;
        }
    }
    let registry = if check.registry.is_some() {
        None
    } else {
        let mut credentials = Vec::new();
        for entry in &entries {
            let Some(cred) = entry.get("credential_id").and_then(Value::as_str) else {
                continue;
            };
            match c.enrolled.get(cred) {
                Some((_, Some(record))) => credentials.push(record.clone()),
                Some((line, None)) => {
                    let line = *line;
                    c.report.issues.push(AuditIssue {
                        line: n,
                        class: IssueClass::Violation,
                        code: "credential_unknown",
                        detail: format!(
                            "{id}: credential {cred} was enrolled on line {line} without its \
                             public key (an older writer): pass --registry"
                        ),
                        reason_code: Some(ReasonCode::CredentialUnknown),
                    });
                    return;
                }
                None => {
                    // A revoked credential is already reported (decision_by_revoked_credential).
                    if c.credentials.get(cred).is_some_and(|s| s.revoked.is_some()) {
                        return;
                    }
                    c.report.issues.push(AuditIssue {
                        line: n,
                        class: IssueClass::Violation,
                        code: "credential_unknown",
                        detail: format!(
                            "{id}: credential {cred} is not enrolled at this point of the log"
                        ),
                        reason_code: Some(ReasonCode::CredentialUnknown),
                    });
                    return;
                }
            }
        }
        match CredentialRegistry::from_document(RegistryDocument { credentials }) {
            Ok(r) => Some(r),
            Err(e) => {
                c.report.issues.push(AuditIssue {
                    line: n,
                    class: IssueClass::Violation,
                    code: "credential_unknown",
                    detail: format!("{id}: the enrolled credentials are unusable: {e}"),
                    reason_code: Some(ReasonCode::CredentialUnknown),
                });
                return;
            }
        }
    };
    let now = object
        .get("ts")
        .and_then(Value::as_str)
        .and_then(|t| {
            time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339).ok()
        })
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    c.jobs.push(Job {
        line: n,
        tool,
        verdict: verdict.to_owned(),
        principal: object
            .get("principal")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
        assurance: object.get("identity_assurance").cloned(),
        profile,
        fields,
        result,
        registry,
        now,
    });
}

/// The policies the evidence is judged under, and the registry when one was given.
struct Prepared<'a> {
    default: Policy,
    tools: HashMap<&'a str, Policy>,
    registry: Option<&'a CredentialRegistry>,
    threads: usize,
}

/// The service's policy as an audit applies it. Kept: rp_id, origins, cross-origin rules, user
/// verification, the profiles. Relaxed, because the log records them or they are state, not
/// evidence: NFC (the recorded fields are the admitted form op_hash covers), the approver list
/// (it changes with group membership), minimum assurance and quorum (the recorded assurance is
/// compared with the derived one instead), operation binding (a service configuration).
fn audit_policy(service: &Policy) -> Policy {
    let mut policy = service.clone();
    policy.nfc = countersign::NfcMode::Normalize;
    policy.approvers = None;
    policy.min_assurance = None;
    policy.quorum = 1;
    policy.require_evidence = true;
    policy.profile_tools = std::collections::BTreeMap::new();
    policy
}

/// Run the evidence checks on `check.threads` threads (each Decision is independent).
fn run_jobs(check: &EvidenceCheck, jobs: Vec<Job>) -> Vec<AuditIssue> {
    // Built once: a Policy carries the parsed profile registry.
    let default = audit_policy(&check.policy);
    let tools: HashMap<&str, Policy> = check
        .tools
        .iter()
        .map(|(name, p)| (name.as_str(), audit_policy(p)))
        .collect();
    let check = &Prepared {
        default,
        tools,
        registry: check.registry.as_ref(),
        threads: check.threads,
    };
    let threads = match check.threads {
        0 => std::thread::available_parallelism().map_or(1, usize::from),
        n => n,
    };
    if threads <= 1 || jobs.len() < 2 {
        return jobs.iter().filter_map(|j| judge(check, j)).collect();
    }
    let size = jobs.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let handles: Vec<_> = jobs
            .chunks(size)
            .map(|chunk| {
                let handle = scope.spawn(move || {
                    chunk
                        .iter()
                        .filter_map(|j| judge(check, j))
                        .collect::<Vec<_>>()
                });
                (chunk, handle)
            })
            .collect();
        // A thread that did not finish proved nothing: each of its Decisions fails (closed).
        handles
            .into_iter()
            .flat_map(|(chunk, h)| {
                h.join().unwrap_or_else(|_| {
                    chunk
                        .iter()
                        .map(|j| AuditIssue {
                            line: j.line,
                            class: IssueClass::Violation,
                            code: "evidence_rejected",
                            detail: "the evidence check did not complete".into(),
                            reason_code: Some(ReasonCode::EvidenceMalformed),
                        })
                        .collect()
                })
            })
            .collect()
    })
}

/// Re-verify one Decision in offline-audit mode: signature, binding, rp/origin, flags and the
/// decision read from the signature; freshness, replay and counters are reported, not enforced
/// (a Decision is judged as of its own time, long after the fact).
fn judge(check: &Prepared<'_>, job: &Job) -> Option<AuditIssue> {
    let registry = job.registry.as_ref().or(check.registry)?;
    let policy = check.tools.get(job.tool.as_str()).unwrap_or(&check.default);
    let action = countersign::Action::new(job.profile.clone(), job.fields.clone().into_bytes());
    let mut replay = OfflineAudit::new();
    let verdict =
        countersign::verify_evidence(policy, &action, &job.result, registry, &mut replay, job.now);
    let refused = verdict.reason_code == Some(ReasonCode::ApproverRefused);
    let fail = |reason: ReasonCode, detail: String| {
        Some(AuditIssue {
            line: job.line,
            class: IssueClass::Violation,
            code: "evidence_rejected",
            detail,
            reason_code: Some(reason),
        })
    };
    let expected_ok = match job.verdict.as_str() {
        "APPROVED" => verdict.is_allow(),
        _ => refused,
    };
    if !expected_ok {
        let reason = verdict.reason_code.unwrap_or(ReasonCode::BindingMismatch);
        return fail(
            reason,
            format!(
                "the {} decision's evidence does not verify: {}",
                job.verdict,
                verdict.detail.unwrap_or_else(|| reason.as_str().to_owned())
            ),
        );
    }
    let Some(approver) = verdict.approvers.first() else {
        return fail(
            ReasonCode::EvidenceMalformed,
            "the evidence names no approver".into(),
        );
    };
    if approver.principal != job.principal {
        return fail(
            ReasonCode::BindingMismatch,
            format!(
                "the line names {:?} but the evidence was made by {:?}",
                job.principal, approver.principal
            ),
        );
    }
    let derived = serde_json::to_value(&approver.identity_assurance).ok();
    if derived != job.assurance {
        return fail(
            ReasonCode::BindingMismatch,
            format!(
                "recorded identity_assurance {} but the evidence derives {}",
                job.assurance
                    .as_ref()
                    .map_or_else(|| "null".into(), Value::to_string),
                derived
                    .as_ref()
                    .map_or_else(|| "null".into(), Value::to_string)
            ),
        );
    }
    None
}

fn terminal(c: &mut Checker, n: usize, id: String, status: &str) {
    let a = c.approvals.entry(id.clone()).or_default();
    if let Some((first, _)) = &a.terminal {
        let first = *first;
        c.violation(
            n,
            "two_verdicts",
            format!("{id} already settled on line {first}"),
        );
        return;
    }
    a.terminal = Some((n, status.to_owned()));
}

/// Remember what an APPROVED verdict line says it grants (lines written before the `authority`
/// member existed record none, and their grants are checked only as before).
fn record_authority(c: &mut Checker, id: &str, object: &Map<String, Value>) {
    let Some(Value::Object(a)) = object.get("authority") else {
        return;
    };
    if a.get("scope").and_then(Value::as_str) != Some("one_call") {
        return;
    }
    let op_hash = a.get("op_hash").and_then(Value::as_str).unwrap_or_default();
    let until = a.get("until").and_then(Value::as_str).unwrap_or_default();
    let entry = c.approvals.entry(id.to_owned()).or_default();
    if entry.terminal.is_none() {
        entry.authority = Some((op_hash.to_owned(), until.to_owned()));
    }
}

/// A grant must fall inside the authority its verdict recorded: the same op_hash, before
/// `until`. Approval without recorded scope would be a blank check in the evidence.
fn grant_in_scope(c: &mut Checker, n: usize, id: &str, object: &Map<String, Value>) {
    let Some((op_hash, until)) = c.approvals.get(id).and_then(|a| a.authority.clone()) else {
        return;
    };
    let fingerprint = object.get("fingerprint").and_then(Value::as_str);
    if fingerprint != Some(op_hash.as_str()) {
        c.violation(
            n,
            "grant_outside_scope",
            format!("{id} granted for {fingerprint:?}, the verdict granted {op_hash}"),
        );
        return;
    }
    let at = object
        .get("ts")
        .and_then(Value::as_str)
        .and_then(|t| OffsetDateTime::parse(t, &Rfc3339).ok());
    let end = OffsetDateTime::parse(&until, &Rfc3339).ok();
    if !matches!((at, end), (Some(at), Some(end)) if at < end) {
        c.violation(
            n,
            "grant_outside_scope",
            format!("{id} granted after (or without a time inside) its authority, until {until}"),
        );
    }
}

fn grant(c: &mut Checker, n: usize, id: String) {
    let Some(a) = c.approvals.get_mut(&id) else {
        c.note(
            n,
            "grant_for_unknown_approval",
            format!("{id} was decided in an earlier file"),
        );
        return;
    };
    if std::mem::replace(&mut a.granted, true) {
        c.violation(n, "grant_collected_twice", format!("{id} granted twice"));
        return;
    }
    match a.terminal.as_ref().map(|(_, s)| s.as_str()) {
        Some("APPROVED") => {}
        Some(other) => {
            let other = other.to_owned();
            c.violation(n, "grant_without_approval", format!("{id} settled {other}"));
        }
        None if a.requested => {
            c.violation(n, "grant_without_approval", format!("{id} is not settled"));
        }
        None => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AuditEvent, AuditSealer};

    fn log(events: &[AuditEvent]) -> (AuditSealer, Vec<String>) {
        log_signed_at(events, |_| true)
    }

    fn verify(sealer: &AuditSealer, lines: &[String]) -> AuditReport {
        let mut text = lines.join("\n");
        text.push('\n');
        verify_log(text.as_bytes(), &sealer.public_key())
    }

    fn codes(r: &AuditReport, class: IssueClass) -> Vec<&'static str> {
        r.issues
            .iter()
            .filter(|i| i.class == class)
            .map(|i| i.code)
            .collect()
    }

    const T: &str = "2026-01-01T00:00:00Z";

    /// An approval whose outcome records `one_call` authority for op_hash [1; 32] until `until`,
    /// and a grant for `fingerprint` at `at`.
    fn scoped(fingerprint: &[u8; 32], at: &str, until: &str) -> Vec<AuditEvent> {
        let granted = crate::authority(Some(&[1; 32]), Some(until), "tool_rule", None);
        vec![
            AuditEvent::outcome("s", T, "APPROVED", None).with_member("authority", granted),
            AuditEvent::grant("s", at, &b64::encode(fingerprint)),
        ]
    }

    #[test]
    fn a_grant_outside_the_recorded_authority_is_a_violation() {
        let later = "2026-01-01T00:01:00Z";
        let (sealer, lines) = log(&scoped(&[1; 32], T, later));
        assert!(codes(&verify(&sealer, &lines), IssueClass::Violation).is_empty());
        let (sealer, lines) = log(&scoped(&[2; 32], T, later));
        assert_eq!(
            codes(&verify(&sealer, &lines), IssueClass::Violation),
            ["grant_outside_scope"]
        );
        let (sealer, lines) = log(&scoped(&[1; 32], later, later));
        assert_eq!(
            codes(&verify(&sealer, &lines), IssueClass::Violation),
            ["grant_outside_scope"]
        );
    }

    fn lifecycle(id: &str) -> Vec<AuditEvent> {
        let fields = serde_json::json!({"a": 1});
        vec![
            AuditEvent::request(&crate::events::RequestFacts {
                approval_id: id,
                ts: T,
                agent_id: "agent",
                tool_name: "tool",
                profile: "p",
                fields: &fields,
                submitted_sha256: "00",
                submitted_text: None,
                severity: "high",
                expires_at: T,
                fingerprint: "fp",
            }),
            AuditEvent::outcome(id, T, "PENDING", None),
            AuditEvent::decision(id, T, "APPROVED", "alice", &Value::Null, &Value::Null),
            AuditEvent::grant(id, T, "fp"),
        ]
    }

    fn mcp(kind: &str, call: &str, outcome: Option<&str>) -> AuditEvent {
        let mut body = serde_json::json!({"kind": kind, "ts": "2026-12-03T13:00:00Z"});
        if kind != "mcp_close" {
            body["call_id"] = call.into();
        }
        if let Some(o) = outcome {
            body["outcome"] = o.into();
        }
        if matches!(outcome, Some("executed" | "continued")) {
            body["approval_ref"] = "apr_1".into();
        }
        match body {
            Value::Object(map) => AuditEvent::from_body(map),
            _ => unreachable!(),
        }
    }

    #[test]
    fn a_continued_call_names_its_approval() {
        let (sealer, lines) = log(&[
            mcp("mcp_call", "c1", None),
            mcp("mcp_outcome", "c1", Some("continued")),
            mcp("mcp_close", "", None),
        ]);
        let r = verify(&sealer, &lines);
        assert!(r.is_valid() && r.issues.is_empty(), "{r:?}");
        let body = serde_json::json!({"kind": "mcp_outcome", "ts": "2026-12-03T13:00:00Z",
                                      "call_id": "c1", "outcome": "continued"});
        let Value::Object(body) = body else {
            unreachable!()
        };
        let outcome = AuditEvent::from_body(body);
        let (sealer, lines) = log(&[mcp("mcp_call", "c1", None), outcome]);
        let r = verify(&sealer, &lines);
        assert_eq!(
            codes(&r, IssueClass::Violation),
            ["mcp_executed_without_approval_ref"]
        );
    }

    #[test]
    fn mcp_intents_need_one_outcome_before_the_log_closes() {
        let (sealer, lines) = log(&[
            mcp("mcp_call", "c1", None),
            mcp("mcp_outcome", "c1", Some("pending_approval")),
            mcp("mcp_call", "c2", None),
            mcp("mcp_outcome", "c2", Some("executed")),
            mcp("mcp_close", "", None),
        ]);
        let r = verify(&sealer, &lines);
        assert!(r.is_valid(), "{r:?}");
        assert!(r.issues.is_empty(), "{r:?}");

        let (sealer, lines) = log(&[mcp("mcp_call", "c1", None), mcp("mcp_close", "", None)]);
        let r = verify(&sealer, &lines);
        assert_eq!(
            codes(&r, IssueClass::Violation),
            ["mcp_intent_without_outcome"]
        );

        // Not closed (the interposer was killed mid-call): informational only.
        let (sealer, lines) = log(&[mcp("mcp_call", "c1", None)]);
        let r = verify(&sealer, &lines);
        assert!(r.is_valid(), "{r:?}");
        assert_eq!(codes(&r, IssueClass::Informational), ["mcp_call_in_flight"]);

        let (sealer, lines) = log(&[
            mcp("mcp_call", "c1", None),
            mcp("mcp_outcome", "c1", Some("allowed")),
            mcp("mcp_outcome", "c1", Some("denied")),
        ]);
        let r = verify(&sealer, &lines);
        assert_eq!(codes(&r, IssueClass::Violation), ["mcp_two_outcomes"]);
    }

    /// `events` chained, with a signature only on the lines whose 1-based number `signed` accepts
    /// (every line: as the service writes; the last of each write: as the interposer does).
    fn log_signed_at(
        events: &[AuditEvent],
        signed: impl Fn(usize) -> bool,
    ) -> (AuditSealer, Vec<String>) {
        let sealer = AuditSealer::from_seed([9; 32]);
        let mut prev = GENESIS_HASH;
        let lines = events
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let seq = i as u64 + 1;
                let text = crate::unsigned_line(seq, &prev, e);
                let line = if signed(i + 1) {
                    sealer.sign(seq, &text).line
                } else {
                    text
                };
                prev = line_hash(&line);
                line
            })
            .collect();
        (sealer, lines)
    }

    fn calls(n: usize) -> Vec<AuditEvent> {
        (0..n)
            .flat_map(|i| {
                let id = format!("c{i}");
                [
                    mcp("mcp_call", &id, None),
                    mcp("mcp_outcome", &id, Some("executed")),
                ]
            })
            .collect()
    }

    #[test]
    fn a_signed_interposer_line_covers_the_unsigned_lines_before_it() {
        // Two writes: lines 1-3 (3 signed), lines 4-6 (6 signed).
        let (sealer, lines) = log_signed_at(&calls(3), |n| [3, 6].contains(&n));
        assert!(!lines[0].contains("\"sig\""));
        let r = verify(&sealer, &lines);
        assert!(r.is_valid(), "{r:?}");
        assert!(r.issues.is_empty(), "{r:?}");
        // Sealing every line is the same log to the verifier.
        let (sealer, every) = log(&calls(3));
        assert!(verify(&sealer, &every).issues.is_empty());
    }

    #[test]
    fn unsigned_lines_that_no_signature_covers_are_violations() {
        // The last write lost its signed line (or someone appended without the key).
        let (sealer, lines) = log_signed_at(&calls(3), |n| n == 3);
        let r = verify(&sealer, &lines);
        assert_eq!(codes(&r, IssueClass::Violation), ["unsigned_tail"], "{r:?}");
        assert_eq!(r.issues[0].line, 4);
        assert!(r.issues[0].detail.contains("lines 4 to 6"), "{r:?}");
        // An unsigned line edited: the next line's prev_hash no longer matches, and it is the
        // signed line's chain that says so.
        let (sealer, mut lines) = log_signed_at(&calls(2), |n| n == 4);
        lines[1] = lines[1].replace("executed", "denied");
        let r = verify(&sealer, &lines);
        assert_eq!(codes(&r, IssueClass::Violation), ["chain_break"], "{r:?}");
        assert_eq!(r.issues[0].line, 3);
        // A signature stripped from a signed line changes that line's hash: the chain breaks.
        let (sealer, mut lines) = log_signed_at(&calls(2), |n| [2, 4].contains(&n));
        let cut = lines[1].rfind(",\"sig\":").unwrap();
        lines[1] = format!("{}}}", &lines[1][..cut]);
        let r = verify(&sealer, &lines);
        assert_eq!(codes(&r, IssueClass::Violation), ["chain_break"], "{r:?}");
        // The service signs every line: an unsigned service line is a violation wherever it is.
        let mut events = lifecycle("a");
        events.extend(calls(1));
        let last = events.len();
        let (sealer, lines) = log_signed_at(&events, |n| n == last);
        let r = verify(&sealer, &lines);
        assert!(
            codes(&r, IssueClass::Violation)
                .iter()
                .all(|c| *c == "no_signature"),
            "{r:?}"
        );
        assert_eq!(codes(&r, IssueClass::Violation).len(), last - 2, "{r:?}");
    }

    #[test]
    fn a_clean_lifecycle_verifies() {
        let (s, lines) = log(&lifecycle("a"));
        let r = verify(&s, &lines);
        assert!(r.is_valid(), "{r:?}");
        assert_eq!(r.lines, 4);
        assert!(r.issues.is_empty());
    }

    #[test]
    fn edited_removed_and_reordered_lines_are_violations() {
        let (s, lines) = log(&lifecycle("a"));
        let mut edited = lines.clone();
        edited[2] = edited[2].replace("alice", "mallory");
        assert_eq!(
            codes(&verify(&s, &edited), IssueClass::Violation),
            ["bad_signature", "chain_break"]
        );
        let mut removed = lines.clone();
        removed.remove(1);
        let r = verify(&s, &removed);
        assert!(codes(&r, IssueClass::Violation).contains(&"chain_break"));
        assert!(codes(&r, IssueClass::Violation).contains(&"seq_gap"));
        let mut reordered = lines.clone();
        reordered.swap(1, 2);
        assert!(!verify(&s, &reordered).is_valid());
        let other = AuditSealer::from_seed([1; 32]);
        assert!(!verify(&other, &lines).is_valid());
        let unterminated = lines.join("\n");
        assert!(!verify_log(unterminated.as_bytes(), &s.public_key()).is_valid());
    }

    #[test]
    fn seed_rules_pending_and_unknown_are_informational_two_verdicts_violate() {
        let (s, lines) = log(&[AuditEvent::outcome("p", T, "PENDING", None)]);
        let r = verify(&s, &lines);
        assert!(r.is_valid());
        assert_eq!(
            codes(&r, IssueClass::Informational),
            ["pending_without_decision"]
        );

        let (s, lines) = log(&[AuditEvent::decision(
            "x",
            T,
            "DENIED",
            "bob",
            &Value::Null,
            &Value::Null,
        )]);
        let r = verify(&s, &lines);
        assert!(r.is_valid());
        assert_eq!(
            codes(&r, IssueClass::Informational),
            ["decision_for_unknown_approval"]
        );

        let mut events = lifecycle("a");
        events.insert(
            3,
            AuditEvent::decision("a", T, "DENIED", "bob", &Value::Null, &Value::Null),
        );
        let (s, lines) = log(&events);
        assert_eq!(
            codes(&verify(&s, &lines), IssueClass::Violation),
            ["two_verdicts"]
        );

        let mut events = lifecycle("a");
        events.insert(2, AuditEvent::settlement("a", T, "expired_unanswered"));
        let (s, lines) = log(&events);
        let r = verify(&s, &lines);
        assert_eq!(
            codes(&r, IssueClass::Violation),
            ["two_verdicts", "grant_without_approval"]
        );

        let mut events = lifecycle("a");
        events.push(AuditEvent::grant("a", T, "fp"));
        let (s, lines) = log(&events);
        assert_eq!(
            codes(&verify(&s, &lines), IssueClass::Violation),
            ["grant_collected_twice"]
        );
    }

    fn decided_by(id: &str, credential: &str) -> AuditEvent {
        let evidence = serde_json::json!({"credential_id": credential, "format": "webauthn"});
        AuditEvent::decision(id, T, "APPROVED", "alice", &Value::Null, &evidence)
    }

    fn enrolled(credential: &[u8]) -> AuditEvent {
        let record = countersign::CredentialRecord {
            credential_id: credential.to_vec(),
            principal: "alice".into(),
            public_key: vec![1],
            aaguid: None,
            backup_eligible: None,
            attestation: None,
            sign_count: 0,
            revoked: false,
        };
        AuditEvent::enrollment_of(T, &record, Some("ops"), crate::EnrollmentSource::Invite)
    }

    fn revoked(credential: &[u8]) -> AuditEvent {
        AuditEvent::revocation(T, "alice", credential, "lost")
    }

    #[test]
    fn credential_lines_need_no_approval_id_and_say_what_they_record() {
        let (s, lines) = log(&[enrolled(b"k1"), revoked(b"k1")]);
        let r = verify(&s, &lines);
        assert!(r.is_valid(), "{r:?}");
        assert!(r.issues.is_empty(), "{r:?}");
        let line: Value = serde_json::from_str(&lines[0]).unwrap_or_default();
        assert_eq!(line["kind"], "enrollment");
        assert_eq!(line["credential_id"], countersign::b64::encode(b"k1"));
        assert_eq!(line["aaguid"], Value::Null);
        assert_eq!(line["attestation_format"], "none");
        assert_eq!(line["chain_verified"], false);
        assert_eq!(line["group"], "ops");
        assert_eq!(line["source"], "invite");
        assert!(line.get("approval_id").is_none());
        let line: Value = serde_json::from_str(&lines[1]).unwrap_or_default();
        assert_eq!(line["kind"], "revocation");
        assert_eq!(line["reason"], "lost");
        // Without a credential id the line says nothing checkable.
        let mut bare = revoked(b"k1");
        bare.remove("credential_id");
        let (s, lines) = log(&[bare]);
        assert_eq!(
            codes(&verify(&s, &lines), IssueClass::Violation),
            ["no_credential_id"]
        );
        // Other kinds still need their approval id.
        let mut outcome = AuditEvent::outcome("a", T, "PENDING", None);
        outcome.remove("approval_id");
        let (s, lines) = log(&[outcome]);
        assert_eq!(
            codes(&verify(&s, &lines), IssueClass::Violation),
            ["no_approval_id"]
        );
    }

    #[test]
    fn a_revocation_without_enrollment_in_the_file_is_informational() {
        let (s, lines) = log(&[revoked(b"k1")]);
        let r = verify(&s, &lines);
        assert!(r.is_valid());
        assert_eq!(
            codes(&r, IssueClass::Informational),
            ["revocation_for_unknown_credential"]
        );
        // Negative: enrolled in this file, nothing to report.
        let (s, lines) = log(&[enrolled(b"k1"), revoked(b"k1")]);
        assert!(verify(&s, &lines).issues.is_empty());
    }

    #[test]
    fn a_second_enrollment_needs_a_revocation_in_between() {
        let (s, lines) = log(&[enrolled(b"k1"), enrolled(b"k2"), enrolled(b"k1")]);
        let r = verify(&s, &lines);
        assert_eq!(codes(&r, IssueClass::Violation), ["duplicate_enrollment"]);
        assert_eq!(r.issues.first().map(|i| i.line), Some(3));
        // Negative: revoked in between, the same id may be enrolled again.
        let (s, lines) = log(&[enrolled(b"k1"), revoked(b"k1"), enrolled(b"k1")]);
        let r = verify(&s, &lines);
        assert!(r.is_valid() && r.issues.is_empty(), "{r:?}");
    }

    #[test]
    fn a_second_revocation_needs_an_enrollment_in_between() {
        let (s, lines) = log(&[enrolled(b"k1"), revoked(b"k1"), revoked(b"k1")]);
        assert_eq!(
            codes(&verify(&s, &lines), IssueClass::Violation),
            ["duplicate_revocation"]
        );
        let (s, lines) = log(&[revoked(b"k1"), enrolled(b"k1"), revoked(b"k1")]);
        assert!(verify(&s, &lines).is_valid());
    }

    #[test]
    fn a_decision_by_a_revoked_credential_is_a_violation() {
        let k1 = countersign::b64::encode(b"k1");
        let mut events = vec![enrolled(b"k1"), revoked(b"k1")];
        events.extend(lifecycle("a"));
        events[4] = decided_by("a", &k1);
        let (s, lines) = log(&events);
        let r = verify(&s, &lines);
        assert_eq!(
            codes(&r, IssueClass::Violation),
            ["decision_by_revoked_credential"]
        );
        assert_eq!(r.issues.first().map(|i| i.line), Some(5));
        // Evidence as an array is read the same way.
        let array = AuditEvent::decision(
            "a",
            T,
            "DENIED",
            "alice",
            &Value::Null,
            &serde_json::json!([{"credential_id": k1}]),
        );
        let (s, lines) = log(&[revoked(b"k1"), array]);
        assert_eq!(
            codes(&verify(&s, &lines), IssueClass::Violation),
            ["decision_by_revoked_credential"]
        );
        // Negative: decided before the revocation, or by another credential, or after a
        // re-enrollment.
        let mut events = vec![enrolled(b"k1")];
        events.extend(lifecycle("a"));
        events[3] = decided_by("a", &k1);
        events.push(revoked(b"k1"));
        let (s, lines) = log(&events);
        let r = verify(&s, &lines);
        assert!(r.is_valid() && r.issues.is_empty(), "{r:?}");
        let mut events = vec![enrolled(b"k1"), revoked(b"k1")];
        events.extend(lifecycle("a"));
        events[4] = decided_by("a", &countersign::b64::encode(b"k2"));
        let (s, lines) = log(&events);
        assert!(verify(&s, &lines).is_valid());
        let mut events = vec![enrolled(b"k1"), revoked(b"k1"), enrolled(b"k1")];
        events.extend(lifecycle("a"));
        events[5] = decided_by("a", &k1);
        let (s, lines) = log(&events);
        assert!(verify(&s, &lines).is_valid());
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..400)) {
            let key = AuditSealer::from_seed([3; 32]).public_key();
            let r = verify_log(&bytes, &key);
            proptest::prop_assert!(bytes.is_empty() || !r.is_valid() || r.lines == 0);
        }
    }
}
