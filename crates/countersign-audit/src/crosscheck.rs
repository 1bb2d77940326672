//! The two-log cross-check (docs/SPEC.md, "Audit: the interposer's log against the service's"):
//! every held call the MCP interposer says it executed must be backed, in the service's log, by
//! exactly one verdict and exactly one collected grant for that approval and that op_hash; and
//! every grant the service handed out for an approval of this interposer must have been executed.
//!
//! Each log's own integrity (seals, chain, per-log rules) is [`crate::verify_log`]'s job and is
//! checked first by the CLI; this walk reads whatever lines parse as JSON and judges only what
//! the two logs say about each other.

use crate::code::{AuditCode, McpOutcome};
use crate::verify::IssueClass;
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, HashSet};

/// One cross-check finding. `interposer_line` and `service_line` are 1-based lines of each log
/// (absent when the finding is about the absence of a line there).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CrossIssue {
    pub class: IssueClass,
    /// A stable code (docs/spec/service.md, "Audit issue codes"): `mcp_executed_twice`, ...
    pub code: AuditCode,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interposer_line: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_line: Option<usize>,
    pub detail: String,
}

/// The result of [`cross_check`].
#[derive(Debug, Clone, Default, Serialize)]
pub struct CrossReport {
    /// Executed held calls (interposer `executed` lines) examined.
    pub executed: usize,
    /// Grants in the service log attributed to this interposer.
    pub grants: usize,
    pub issues: Vec<CrossIssue>,
}

impl CrossReport {
    /// No violation (informational findings allowed).
    pub fn is_valid(&self) -> bool {
        !self.issues.iter().any(|i| i.class == IssueClass::Violation)
    }

    /// A finding about approval `id`, at these lines of each log.
    fn push(
        &mut self,
        code: AuditCode,
        id: &str,
        interposer_line: Option<usize>,
        service_line: Option<usize>,
        detail: String,
    ) {
        self.issues.push(CrossIssue {
            class: code.class(),
            code,
            approval_id: Some(id.to_owned()),
            interposer_line,
            service_line,
            detail,
        });
    }
}

/// A verdict line of the service log: a human `decision`, an at-once APPROVED/DENIED `outcome`,
/// or a `settlement` (expiry, withdrawal).
struct Verdict {
    line: usize,
    kind: String,
    status: String,
    /// The op_hash its `authority` granted, if it recorded one.
    op_hash: Option<String>,
}

#[derive(Default)]
struct ServiceApproval {
    /// (agent_id, server_id) of its request line, for an MCP tool call.
    caller: Option<(String, String)>,
    verdicts: Vec<Verdict>,
    /// (line, fingerprint) of each grant line.
    grants: Vec<(usize, String)>,
}

/// What the interposer's log says.
#[derive(Default)]
struct InterposerLog {
    /// approval_ref -> (line, op_hash) of each `executed` outcome, by approval.
    executed: BTreeMap<String, Vec<(usize, String)>>,
    /// (line, approval_ref, op_hash) of the answers passed on to an approved call's upstream.
    continued: Vec<(usize, String, String)>,
    /// Every approval id an outcome line names.
    referenced: HashSet<String>,
    /// (agent_id, server_id) of every intent.
    callers: HashSet<(String, String)>,
    /// call_id -> (line, op_hash) of intents still without an outcome.
    open: HashMap<String, (usize, String)>,
}

fn objects(bytes: &[u8]) -> impl Iterator<Item = (usize, serde_json::Map<String, Value>)> + '_ {
    String::from_utf8_lossy(bytes)
        .lines()
        .enumerate()
        .filter_map(|(i, l)| match serde_json::from_str::<Value>(l) {
            Ok(Value::Object(o)) => Some((i + 1, o)),
            _ => None,
        })
        .collect::<Vec<_>>()
        .into_iter()
}

fn text(o: &serde_json::Map<String, Value>, key: &str) -> Option<String> {
    o.get(key).and_then(Value::as_str).map(str::to_owned)
}

/// Cross-check the interposer's log against the service's (both as bytes of JSON lines).
pub fn cross_check(service: &[u8], interposer: &[u8]) -> CrossReport {
    let approvals = read_service(service);
    let log = read_interposer(interposer);
    let mut report = CrossReport::default();
    check_executions(&mut report, &approvals, &log);
    check_continuations(&mut report, &log);
    check_unexecuted_grants(&mut report, &approvals, &log);
    report
        .issues
        .sort_by_key(|i| (i.interposer_line.unwrap_or(usize::MAX), i.service_line));
    report
}

/// The service's side: each approval's caller, verdict lines and grants.
fn read_service(service: &[u8]) -> HashMap<String, ServiceApproval> {
    let mut approvals: HashMap<String, ServiceApproval> = HashMap::new();
    for (n, o) in objects(service) {
        let Some(id) = text(&o, "approval_id") else {
            continue;
        };
        let kind = text(&o, "kind").unwrap_or_default();
        let a = approvals.entry(id).or_default();
        let authority = || {
            o.get("authority")
                .and_then(|a| a.get("op_hash"))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        match kind.as_str() {
            "request" => {
                let agent = text(&o, "agent_id");
                let server = o
                    .get("fields")
                    .and_then(|f| f.get("server_id"))
                    .and_then(Value::as_str);
                if let (Some(agent), Some(server)) = (agent, server) {
                    a.caller = Some((agent, server.to_owned()));
                }
            }
            "decision" => a.verdicts.push(Verdict {
                line: n,
                kind,
                status: text(&o, "verdict").unwrap_or_default(),
                op_hash: authority(),
            }),
            "outcome" | "settlement" => {
                let status = text(&o, "status").unwrap_or_default();
                if matches!(status.as_str(), "APPROVED" | "DENIED") {
                    a.verdicts.push(Verdict {
                        line: n,
                        kind,
                        status,
                        op_hash: authority(),
                    });
                }
            }
            "grant" => a
                .grants
                .push((n, text(&o, "fingerprint").unwrap_or_default())),
            _ => {}
        }
    }
    approvals
}

/// The interposer's side: executions, continuations, the approvals and callers it names, and
/// the intents still open.
fn read_interposer(interposer: &[u8]) -> InterposerLog {
    let mut log = InterposerLog::default();
    for (n, o) in objects(interposer) {
        match text(&o, "kind").as_deref() {
            Some("mcp_call") => {
                if let (Some(agent), Some(server)) = (text(&o, "agent_id"), text(&o, "server_id")) {
                    log.callers.insert((agent, server));
                }
                if let Some(call) = text(&o, "call_id") {
                    log.open
                        .insert(call, (n, text(&o, "op_hash").unwrap_or_default()));
                }
            }
            Some("mcp_outcome") => read_outcome(&mut log, n, &o),
            _ => {}
        }
    }
    log
}

fn read_outcome(log: &mut InterposerLog, n: usize, o: &serde_json::Map<String, Value>) {
    if let Some(call) = text(o, "call_id") {
        log.open.remove(&call);
    }
    if let Some(id) = text(o, "approval_id") {
        log.referenced.insert(id);
    }
    let outcome = text(o, "outcome")
        .as_deref()
        .and_then(McpOutcome::from_wire);
    if outcome == Some(McpOutcome::Continued)
        && let Some(id) = text(o, "approval_ref")
    {
        log.referenced.insert(id.clone());
        log.continued
            .push((n, id, text(o, "op_hash").unwrap_or_default()));
    }
    // An executed line without approval_ref is the single-log verifier's violation
    // (mcp_executed_without_approval_ref); nothing to match here.
    if outcome == Some(McpOutcome::Executed)
        && let Some(id) = text(o, "approval_ref")
    {
        log.referenced.insert(id.clone());
        log.executed
            .entry(id)
            .or_default()
            .push((n, text(o, "op_hash").unwrap_or_default()));
    }
}

/// Every execution: once per approval, after exactly one APPROVED verdict and exactly one
/// grant, both for the op_hash it executed.
fn check_executions(
    report: &mut CrossReport,
    approvals: &HashMap<String, ServiceApproval>,
    log: &InterposerLog,
) {
    let empty = ServiceApproval::default();
    for (id, runs) in &log.executed {
        report.executed += runs.len();
        let Some((line, op_hash)) = runs.first() else {
            continue;
        };
        for (again, _) in runs.iter().skip(1) {
            report.push(
                AuditCode::McpExecutedTwice,
                id,
                Some(*again),
                None,
                format!(
                    "{id} was executed again (first on interposer line {line}): one approval \
                     grants one execution"
                ),
            );
        }
        let a = approvals.get(id).unwrap_or(&empty);
        check_verdict(report, id, *line, op_hash, &a.verdicts);
        check_grant(report, id, *line, op_hash, &a.grants);
    }
}

/// An execution's verdict: exactly one, APPROVED, for the op_hash executed.
fn check_verdict(
    report: &mut CrossReport,
    id: &str,
    line: usize,
    op_hash: &str,
    verdicts: &[Verdict],
) {
    match verdicts {
        [] => report.push(
            AuditCode::McpExecutedWithoutDecision,
            id,
            Some(line),
            None,
            format!("{id} was executed but the service log records no verdict for it"),
        ),
        [v] if v.status != "APPROVED" => report.push(
            AuditCode::McpExecutedDenied,
            id,
            Some(line),
            Some(v.line),
            format!("{id} was executed but its {} says {}", v.kind, v.status),
        ),
        [v] => {
            if let Some(granted) = v.op_hash.as_deref().filter(|g| *g != op_hash) {
                report.push(
                    AuditCode::McpOpHashMismatch,
                    id,
                    Some(line),
                    Some(v.line),
                    format!(
                        "{id} was executed for op_hash {op_hash} but its {} granted {granted}",
                        v.kind
                    ),
                );
            }
        }
        [first, rest @ ..] => report.push(
            AuditCode::McpTwoDecisions,
            id,
            Some(line),
            rest.first().map(|v| v.line),
            format!(
                "{id} has {} verdict lines (first on service line {})",
                rest.len() + 1,
                first.line
            ),
        ),
    }
}

/// An execution's grant: exactly one, collected for the op_hash executed.
fn check_grant(
    report: &mut CrossReport,
    id: &str,
    line: usize,
    op_hash: &str,
    grants: &[(usize, String)],
) {
    match grants {
        [] => report.push(
            AuditCode::McpExecutedWithoutGrant,
            id,
            Some(line),
            None,
            format!("{id} was executed but the service log records no collected grant"),
        ),
        [(g, fingerprint)] if fingerprint != op_hash => report.push(
            AuditCode::McpOpHashMismatch,
            id,
            Some(line),
            Some(*g),
            format!(
                "{id} was executed for op_hash {op_hash} but its grant was collected for \
                 {fingerprint}"
            ),
        ),
        [_] => {}
        [(first, _), (second, _), ..] => report.push(
            AuditCode::McpTwoGrants,
            id,
            Some(line),
            Some(*second),
            format!(
                "{id} has {} collected grants (first on service line {first})",
                grants.len()
            ),
        ),
    }
}

/// A continuation goes on with an execution this log recorded before it, of the same call.
fn check_continuations(report: &mut CrossReport, log: &InterposerLog) {
    for (line, id, op_hash) in &log.continued {
        report.executed += 1;
        match log.executed.get(id).and_then(|runs| runs.first()) {
            Some((first, executed_hash)) if first < line => {
                if executed_hash != op_hash {
                    report.push(
                        AuditCode::McpOpHashMismatch,
                        id,
                        Some(*line),
                        None,
                        format!(
                            "{id} was continued for op_hash {op_hash} but executed \
                             (interposer line {first}) for {executed_hash}"
                        ),
                    );
                }
            }
            _ => report.push(
                AuditCode::McpContinuedWithoutExecution,
                id,
                Some(*line),
                None,
                format!(
                    "{id} was continued but this log records no earlier execution of it: only \
                     an approved call's upstream can ask for more input"
                ),
            ),
        }
    }
}

/// The converse: every grant collected for an approval of this interposer (one it names, or one
/// its agent and server requested) was executed, or is explained.
fn check_unexecuted_grants(
    report: &mut CrossReport,
    approvals: &HashMap<String, ServiceApproval>,
    log: &InterposerLog,
) {
    let in_flight: HashMap<&str, usize> = log
        .open
        .values()
        .map(|(line, op_hash)| (op_hash.as_str(), *line))
        .collect();
    let mut grants: Vec<(&String, &ServiceApproval)> = approvals
        .iter()
        .filter(|(id, a)| {
            !a.grants.is_empty()
                && (log.referenced.contains(*id)
                    || a.caller.as_ref().is_some_and(|c| log.callers.contains(c)))
        })
        .collect();
    grants.sort_by_key(|(_, a)| a.grants.first().map(|g| g.0));
    for (id, a) in grants {
        report.grants += a.grants.len();
        if log.executed.contains_key(id) {
            continue;
        }
        let Some((g, fingerprint)) = a.grants.first() else {
            continue;
        };
        if let Some(intent) = in_flight.get(fingerprint.as_str()) {
            report.push(
                AuditCode::McpGrantInFlight,
                id,
                Some(*intent),
                Some(*g),
                format!(
                    "{id}'s grant was collected and the interposer's intent for that op_hash \
                     has no outcome (it stopped before the upstream answered): whether the call \
                     ran is not provable from these logs"
                ),
            );
        } else if log.referenced.contains(id) {
            report.push(
                AuditCode::McpGrantNotExecuted,
                id,
                None,
                Some(*g),
                format!(
                    "{id}'s grant was collected but the interposer log records no execution of \
                     it: a grant spent outside this interposer's record (its gateway \
                     credential used elsewhere), or an execution it did not log"
                ),
            );
        } else {
            report.push(
                AuditCode::McpGrantUnattributed,
                id,
                None,
                Some(*g),
                format!(
                    "{id} is a call by this interposer's agent and server whose grant was \
                     collected, but this interposer log never mentions it (another interposer \
                     instance, or another log file)"
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lines(values: &[Value]) -> Vec<u8> {
        let mut out = String::new();
        for v in values {
            out.push_str(&v.to_string());
            out.push('\n');
        }
        out.into_bytes()
    }

    fn request(id: &str) -> Value {
        json!({"kind": "request", "approval_id": id, "agent_id": "agent-7",
               "fields": {"agent_id": "agent-7", "server_id": "fs", "tool_name": "w", "params": {}}})
    }
    fn decision(id: &str, verdict: &str, op_hash: &str) -> Value {
        json!({"kind": "decision", "approval_id": id, "verdict": verdict,
               "authority": {"scope": "one_call", "op_hash": op_hash, "until": "2099-01-01T00:00:00Z"}})
    }
    fn grant(id: &str, fingerprint: &str) -> Value {
        json!({"kind": "grant", "approval_id": id, "fingerprint": fingerprint})
    }
    fn call(call: &str, op_hash: &str) -> Value {
        json!({"kind": "mcp_call", "call_id": call, "agent_id": "agent-7", "server_id": "fs",
               "tool_name": "w", "op_hash": op_hash, "rule": "hold"})
    }
    fn pending(call: &str, id: &str, op_hash: &str) -> Value {
        json!({"kind": "mcp_outcome", "call_id": call, "outcome": "pending_approval",
               "op_hash": op_hash, "approval_id": id})
    }
    fn executed(call: &str, id: &str, op_hash: &str) -> Value {
        json!({"kind": "mcp_outcome", "call_id": call, "outcome": "executed",
               "op_hash": op_hash, "approval_ref": id, "upstream": "ok"})
    }

    fn clean() -> (Vec<Value>, Vec<Value>) {
        (
            vec![
                request("a"),
                json!({"kind": "outcome", "approval_id": "a", "status": "PENDING"}),
                decision("a", "APPROVED", "H"),
                grant("a", "H"),
            ],
            vec![
                call("c1", "H"),
                pending("c1", "a", "H"),
                call("c2", "H"),
                executed("c2", "a", "H"),
                json!({"kind": "mcp_close"}),
            ],
        )
    }

    fn codes(r: &CrossReport) -> Vec<(&'static str, IssueClass)> {
        r.issues
            .iter()
            .map(|i| (i.code.as_str(), i.class))
            .collect()
    }

    #[test]
    fn a_clean_pair_passes() {
        let (s, i) = clean();
        let r = cross_check(&lines(&s), &lines(&i));
        assert!(r.is_valid() && r.issues.is_empty(), "{r:?}");
        assert_eq!((r.executed, r.grants), (1, 1));
    }

    #[test]
    fn an_execution_without_grant_or_decision_fails_by_name() {
        let (mut s, i) = clean();
        s.pop();
        let r = cross_check(&lines(&s), &lines(&i));
        assert_eq!(
            codes(&r),
            [("mcp_executed_without_grant", IssueClass::Violation)]
        );
        assert_eq!(r.issues[0].interposer_line, Some(4));
        let r = cross_check(&lines(&[request("a")]), &lines(&i));
        assert_eq!(
            codes(&r),
            [
                ("mcp_executed_without_decision", IssueClass::Violation),
                ("mcp_executed_without_grant", IssueClass::Violation)
            ]
        );
    }

    #[test]
    fn two_executions_for_one_grant_fail() {
        let (s, mut i) = clean();
        i.insert(4, call("c3", "H"));
        i.insert(5, executed("c3", "a", "H"));
        let r = cross_check(&lines(&s), &lines(&i));
        assert_eq!(codes(&r), [("mcp_executed_twice", IssueClass::Violation)]);
        assert_eq!(r.issues[0].interposer_line, Some(6));
    }

    fn continued(call: &str, id: &str, op_hash: &str) -> Value {
        json!({"kind": "mcp_outcome", "call_id": call, "outcome": "continued",
               "op_hash": op_hash, "approval_ref": id, "upstream": "ok"})
    }

    #[test]
    fn a_continuation_after_its_execution_passes_and_one_without_fails() {
        // The upstream asked for input on the approved call; the client's answer went on.
        let (s, mut i) = clean();
        i.insert(4, call("c3", "H"));
        i.insert(5, continued("c3", "a", "H"));
        let r = cross_check(&lines(&s), &lines(&i));
        assert!(r.is_valid() && r.issues.is_empty(), "{r:?}");
        assert_eq!(r.executed, 2);
        // Before any execution (or for an approval never executed): nothing to continue.
        let (s, mut i) = clean();
        i.insert(2, call("c0", "H"));
        i.insert(3, continued("c0", "a", "H"));
        let r = cross_check(&lines(&s), &lines(&i));
        assert_eq!(
            codes(&r),
            [("mcp_continued_without_execution", IssueClass::Violation)]
        );
        assert_eq!(r.issues[0].interposer_line, Some(4));
        // Another call under the approval's name.
        let (s, mut i) = clean();
        i.insert(4, call("c3", "OTHER"));
        i.insert(5, continued("c3", "a", "OTHER"));
        let r = cross_check(&lines(&s), &lines(&i));
        assert_eq!(codes(&r), [("mcp_op_hash_mismatch", IssueClass::Violation)]);
    }

    #[test]
    fn a_mismatched_op_hash_fails() {
        let (mut s, i) = clean();
        s[3] = grant("a", "OTHER");
        let r = cross_check(&lines(&s), &lines(&i));
        assert_eq!(codes(&r), [("mcp_op_hash_mismatch", IssueClass::Violation)]);
        assert_eq!(r.issues[0].service_line, Some(4));
        let (mut s, i) = clean();
        s[2] = decision("a", "APPROVED", "OTHER");
        let r = cross_check(&lines(&s), &lines(&i));
        assert_eq!(codes(&r), [("mcp_op_hash_mismatch", IssueClass::Violation)]);
        assert_eq!(r.issues[0].service_line, Some(3));
    }

    #[test]
    fn a_denied_or_doubly_decided_execution_fails() {
        let (mut s, i) = clean();
        s[2] = decision("a", "DENIED", "H");
        let r = cross_check(&lines(&s), &lines(&i));
        assert_eq!(codes(&r), [("mcp_executed_denied", IssueClass::Violation)]);
        let (mut s, i) = clean();
        s.insert(3, decision("a", "APPROVED", "H"));
        let r = cross_check(&lines(&s), &lines(&i));
        assert_eq!(codes(&r), [("mcp_two_decisions", IssueClass::Violation)]);
    }

    #[test]
    fn a_grant_never_executed_is_reported_by_what_can_be_proven() {
        // The interposer created the approval (its pending line) and never executed it.
        let (s, mut i) = clean();
        i.drain(2..4);
        let r = cross_check(&lines(&s), &lines(&i));
        assert_eq!(
            codes(&r),
            [("mcp_grant_not_executed", IssueClass::Violation)]
        );
        assert_eq!(r.issues[0].service_line, Some(4));
        // Killed after forwarding: the intent has no outcome; not provable either way.
        let (s, mut i) = clean();
        i.drain(3..);
        let r = cross_check(&lines(&s), &lines(&i));
        assert_eq!(
            codes(&r),
            [("mcp_grant_in_flight", IssueClass::Informational)]
        );
        assert!(r.is_valid());
        // A grant for this agent and server that this log never mentions.
        let (s, _) = clean();
        let i = vec![call("c9", "Z"), pending("c9", "zz", "Z")];
        let r = cross_check(&lines(&s), &lines(&i));
        assert_eq!(
            codes(&r),
            [("mcp_grant_unattributed", IssueClass::Informational)]
        );
        // Grants of other agents are none of this interposer's business.
        let mut s = s;
        s[0] = json!({"kind": "request", "approval_id": "a", "agent_id": "other",
                      "fields": {"server_id": "fs"}});
        assert!(cross_check(&lines(&s), &lines(&i)).issues.is_empty());
    }
}
