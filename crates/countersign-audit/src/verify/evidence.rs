//! Evidence: every Decision's evidence re-verified by the core, offline (docs/spec/service.md,
//! "Every Decision's evidence is re-verified").
//!
//! A Decision is prepared as the walk reaches it (the action from its request line, the
//! credentials in force at that line, its nonce not seen before) and queued; queued Decisions
//! are judged in batches on every thread, each independent of the others.

use super::report::{AuditIssue, Findings};
use super::structure::{Structure, evidence_entries};
use crate::code::AuditCode;
use countersign::replay::danger::OfflineAudit;
use countersign::{
    ApprovalResult, CredentialRecord, CredentialRegistry, Policy, ReasonCode, RegistryDocument,
};
use serde_json::{Map, Value};
use sha2::{Digest as _, Sha256};
use std::collections::HashMap;

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

/// The action a `request` line recorded: (tool, profile, admitted fields as JSON text).
#[derive(Debug)]
struct Request {
    tool: Box<str>,
    profile: Box<str>,
    fields: Box<str>,
}

/// One Decision to re-verify: independent of every other line, so it runs on any core.
#[derive(Debug)]
struct Job {
    line: usize,
    tool: Box<str>,
    verdict: String,
    principal: String,
    assurance: Option<Value>,
    profile: Box<str>,
    fields: Box<str>,
    result: ApprovalResult,
    registry: Option<CredentialRegistry>,
    now: time::OffsetDateTime,
}

/// The evidence checker of one walk.
#[derive(Debug)]
pub(super) struct Evidence<'a> {
    prepared: &'a Prepared<'a>,
    threads: usize,
    /// By SHA-256 of the approval id: the action its request line recorded.
    requests: HashMap<[u8; 32], Request>,
    /// SHA-256 of each evidence nonce -> the Decision line that used it: each challenge is
    /// signed for one approval, so a nonce seen twice is replayed evidence (offline-audit mode
    /// does not enforce replay within one verification, so the log walk does it across lines).
    nonces: HashMap<[u8; 32], usize>,
    queued: Vec<Job>,
}

fn digest(text: &str) -> [u8; 32] {
    Sha256::digest(text.as_bytes()).into()
}

impl<'a> Evidence<'a> {
    pub(super) fn new(prepared: &'a Prepared<'a>, threads: usize) -> Self {
        Self {
            prepared,
            threads,
            requests: HashMap::new(),
            nonces: HashMap::new(),
            queued: Vec::new(),
        }
    }

    /// A `request` line: the action a later Decision's evidence must sign.
    pub(super) fn request(&mut self, id: &str, object: &Map<String, Value>) {
        let tool = object.get("tool_name").and_then(Value::as_str);
        let profile = object.get("profile").and_then(Value::as_str);
        let fields = object.get("fields").map(Value::to_string);
        if let (Some(tool), Some(profile), Some(fields)) = (tool, profile, fields) {
            let request = Request {
                tool: tool.into(),
                profile: profile.into(),
                fields: fields.into(),
            };
            self.requests.insert(digest(id), request);
        }
    }

    /// Prepare the re-verification of one Decision: the action from its request line, the
    /// result from its evidence, its nonces new, the credentials in force at this line (or the
    /// given registry); queue it when `judge` (not for lines a `--from` checkpoint covers, whose
    /// nonces are still remembered).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn decision(
        &mut self,
        n: usize,
        id: &str,
        verdict: &str,
        object: &Map<String, Value>,
        structure: &Structure,
        judge: bool,
        f: &mut Findings,
    ) {
        let Some(request) = self.requests.get(&digest(id)) else {
            f.push(
                n,
                AuditCode::EvidenceUnverifiable,
                format!("{id} has no request line in this file: its action cannot be rebuilt"),
            );
            return;
        };
        let (tool, profile, fields) = (
            request.tool.clone(),
            request.profile.clone(),
            request.fields.clone(),
        );
        let entries: Vec<Value> = evidence_entries(object.get("evidence"))
            .into_iter()
            .cloned()
            .collect();
        let Some(result) = read_result(n, id, verdict, &entries, f) else {
            return;
        };
        if !self.fresh_nonces(n, id, &entries, f) {
            return;
        }
        let registry = if self.prepared.registry.is_some() {
            None
        } else {
            let Some(registry) = registry_at(n, id, &entries, structure, f) else {
                return;
            };
            Some(registry)
        };
        if !judge {
            return;
        }
        let job = Job {
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
            now: decided_at(object),
        };
        self.queued.push(job);
    }

    /// Each evidence nonce used by no earlier Decision (`evidence_replayed` otherwise); the new
    /// ones remembered up to the first replayed one.
    fn fresh_nonces(&mut self, n: usize, id: &str, entries: &[Value], f: &mut Findings) -> bool {
        for entry in entries {
            let Some(nonce) = entry.get("nonce").and_then(Value::as_str) else {
                continue;
            };
            if let Some(first) = self.nonces.insert(digest(nonce), n) {
                f.push_reason(
                    n,
                    AuditCode::EvidenceReplayed,
                    format!("{id}: the evidence's nonce was already used on line {first}"),
                    ReasonCode::Replayed,
                );
                return false;
            }
        }
        true
    }

    /// The queued Decisions, to judge on any thread ([`JobBatch::judge`]).
    pub(super) fn take(&mut self) -> JobBatch<'a> {
        JobBatch {
            prepared: self.prepared,
            threads: self.threads,
            jobs: std::mem::take(&mut self.queued),
        }
    }
}

/// Decisions taken from the queue.
#[derive(Debug)]
pub(super) struct JobBatch<'a> {
    prepared: &'a Prepared<'a>,
    threads: usize,
    jobs: Vec<Job>,
}

impl JobBatch<'_> {
    /// Judge every Decision, on `threads` threads: a finding for each that fails, in line
    /// order.
    pub(super) fn judge(self) -> Vec<AuditIssue> {
        run_jobs(self.prepared, self.threads, &self.jobs)
    }
}

/// The Decision's time: what its evidence is judged as of (the epoch when it has none).
fn decided_at(object: &Map<String, Value>) -> time::OffsetDateTime {
    object
        .get("ts")
        .and_then(Value::as_str)
        .and_then(|t| {
            time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339).ok()
        })
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH)
}

/// The Decision's evidence as the ApprovalResult the core verifies (`evidence_rejected` when it
/// is unreadable).
fn read_result(
    n: usize,
    id: &str,
    verdict: &str,
    entries: &[Value],
    f: &mut Findings,
) -> Option<ApprovalResult> {
    let envelope = serde_json::json!({
        "status": verdict,
        "approval_id": id,
        "approver_evidence": entries,
    });
    match ApprovalResult::from_value(&envelope) {
        Ok(result) => Some(result),
        Err(e) => {
            f.push_reason(
                n,
                AuditCode::EvidenceRejected,
                format!("{id}: the evidence is unreadable: {e}"),
                ReasonCode::EvidenceMalformed,
            );
            None
        }
    }
}

/// The credentials the log has enrolled, with their public keys, at line `n` for the
/// evidence's entries (`credential_unknown` for one it has not; nothing more for one revoked
/// earlier, already `decision_by_revoked_credential`).
fn registry_at(
    n: usize,
    id: &str,
    entries: &[Value],
    structure: &Structure,
    f: &mut Findings,
) -> Option<CredentialRegistry> {
    let mut credentials: Vec<CredentialRecord> = Vec::new();
    for entry in entries {
        let Some(cred) = entry.get("credential_id").and_then(Value::as_str) else {
            continue;
        };
        let state = structure.credential(cred);
        match state.and_then(|s| s.enrolled.map(|line| (line, s.record.as_ref()))) {
            Some((_, Some(record))) => credentials.push(record.clone()),
            Some((line, None)) => {
                f.push_reason(
                    n,
                    AuditCode::CredentialUnknown,
                    format!(
                        "{id}: credential {cred} was enrolled on line {line} without its \
                         public key (an older writer): pass --registry"
                    ),
                    ReasonCode::CredentialUnknown,
                );
                return None;
            }
            None => {
                if state.is_none_or(|s| s.revoked.is_none()) {
                    f.push_reason(
                        n,
                        AuditCode::CredentialUnknown,
                        format!("{id}: credential {cred} is not enrolled at this point of the log"),
                        ReasonCode::CredentialUnknown,
                    );
                }
                return None;
            }
        }
    }
    match CredentialRegistry::from_document(RegistryDocument { credentials }) {
        Ok(r) => Some(r),
        Err(e) => {
            f.push_reason(
                n,
                AuditCode::CredentialUnknown,
                format!("{id}: the enrolled credentials are unusable: {e}"),
                ReasonCode::CredentialUnknown,
            );
            None
        }
    }
}

/// The policies the evidence is judged under, and the registry when one was given.
#[derive(Debug)]
pub(super) struct Prepared<'a> {
    default: Policy,
    tools: HashMap<&'a str, Policy>,
    registry: Option<&'a CredentialRegistry>,
}

impl<'a> Prepared<'a> {
    /// Built once: a Policy carries the parsed profile registry.
    pub(super) fn new(check: &'a EvidenceCheck) -> Self {
        Self {
            default: audit_policy(&check.policy),
            tools: check
                .tools
                .iter()
                .map(|(name, p)| (name.as_str(), audit_policy(p)))
                .collect(),
            registry: check.registry.as_ref(),
        }
    }
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

/// Judge `jobs` on `threads` threads (each Decision is independent), findings in job order.
fn run_jobs(check: &Prepared<'_>, threads: usize, jobs: &[Job]) -> Vec<AuditIssue> {
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
                        .map(|j| {
                            rejected(
                                j,
                                ReasonCode::EvidenceMalformed,
                                "the evidence check did not complete".into(),
                            )
                        })
                        .collect()
                })
            })
            .collect()
    })
}

fn rejected(job: &Job, reason: ReasonCode, detail: String) -> AuditIssue {
    AuditIssue {
        reason_code: Some(reason),
        ..AuditIssue::new(job.line, AuditCode::EvidenceRejected, detail)
    }
}

/// Re-verify one Decision in offline-audit mode: signature, binding, rp/origin, flags and the
/// decision read from the signature; freshness, replay and counters are reported, not enforced
/// (a Decision is judged as of its own time, long after the fact).
fn judge(check: &Prepared<'_>, job: &Job) -> Option<AuditIssue> {
    let registry = job.registry.as_ref().or(check.registry)?;
    let policy = check.tools.get(&*job.tool).unwrap_or(&check.default);
    let action = countersign::Action::new(job.profile.to_string(), job.fields.as_bytes().to_vec());
    let mut replay = OfflineAudit::new();
    let verdict =
        countersign::verify_evidence(policy, &action, &job.result, registry, &mut replay, job.now);
    let refused = verdict.reason_code == Some(ReasonCode::ApproverRefused);
    let expected_ok = match job.verdict.as_str() {
        "APPROVED" => verdict.is_allow(),
        _ => refused,
    };
    if !expected_ok {
        let reason = verdict.reason_code.unwrap_or(ReasonCode::BindingMismatch);
        let detail = format!(
            "the {} decision's evidence does not verify: {}",
            job.verdict,
            verdict.detail.unwrap_or_else(|| reason.as_str().to_owned())
        );
        return Some(rejected(job, reason, detail));
    }
    let Some(approver) = verdict.approvers.first() else {
        let detail = "the evidence names no approver".into();
        return Some(rejected(job, ReasonCode::EvidenceMalformed, detail));
    };
    if approver.principal != job.principal {
        let detail = format!(
            "the line names {:?} but the evidence was made by {:?}",
            job.principal, approver.principal
        );
        return Some(rejected(job, ReasonCode::BindingMismatch, detail));
    }
    let derived = serde_json::to_value(&approver.identity_assurance).ok();
    if derived != job.assurance {
        let shown = |v: &Option<Value>| v.as_ref().map_or_else(|| "null".into(), Value::to_string);
        let detail = format!(
            "recorded identity_assurance {} but the evidence derives {}",
            shown(&job.assurance),
            shown(&derived)
        );
        return Some(rejected(job, ReasonCode::BindingMismatch, detail));
    }
    None
}
