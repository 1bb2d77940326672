//! The MCP interposer's lines (docs/MCP.md, "Audit log"): every intent gets exactly one
//! outcome, and an intent still without one when the writer closed the log is a violation (seed
//! 000: the record closes at once; only a response may wait).

use super::report::Findings;
use crate::code::{AuditCode, McpOutcome};
use serde_json::{Map, Value};
use sha2::{Digest as _, Sha256};
use std::collections::{HashMap, HashSet};

/// Whether `kind` is one of the interposer's line kinds.
pub(super) fn is_mcp_kind(kind: &str) -> bool {
    matches!(kind, "mcp_call" | "mcp_outcome" | "mcp_close")
}

/// What the walk remembers about calls.
#[derive(Debug, Default)]
pub(super) struct Calls {
    /// Call id -> line of its `mcp_call` (intent) still without an outcome.
    open: HashMap<String, usize>,
    /// SHA-256 of each call id whose outcome is written (a digest: the id itself is on the line
    /// that needs it, and a closed call must cost little).
    done: HashSet<[u8; 32]>,
}

fn digest(id: &str) -> [u8; 32] {
    Sha256::digest(id.as_bytes()).into()
}

impl Calls {
    /// An `mcp_call`, `mcp_outcome` or `mcp_close` line.
    pub(super) fn line(
        &mut self,
        n: usize,
        kind: &str,
        object: &Map<String, Value>,
        f: &mut Findings,
    ) {
        if kind == "mcp_close" {
            self.close(n, f);
            return;
        }
        let Some(id) = object.get("call_id").and_then(Value::as_str) else {
            f.push(
                n,
                AuditCode::NoCallId,
                format!("{kind:?} line without call_id"),
            );
            return;
        };
        if kind == "mcp_call" {
            self.intent(n, id, f);
        } else {
            self.outcome(n, id, object, f);
        }
    }

    /// The close line: every intent still open is a violation.
    fn close(&mut self, n: usize, f: &mut Findings) {
        let mut open: Vec<(usize, String)> =
            self.open.drain().map(|(id, line)| (line, id)).collect();
        open.sort();
        for (line, id) in open {
            f.push(
                line,
                AuditCode::McpIntentWithoutOutcome,
                format!("MCP call {id} has no outcome before the log was closed on line {n}"),
            );
        }
    }

    fn intent(&mut self, n: usize, id: &str, f: &mut Findings) {
        if self.open.contains_key(id) || self.done.contains(&digest(id)) {
            f.push(
                n,
                AuditCode::McpDuplicateCall,
                format!("MCP call {id} logged twice"),
            );
            return;
        }
        self.open.insert(id.to_owned(), n);
    }

    fn outcome(&mut self, n: usize, id: &str, object: &Map<String, Value>, f: &mut Findings) {
        let word = object.get("outcome").and_then(Value::as_str).unwrap_or("");
        let outcome = McpOutcome::from_wire(word);
        if outcome.is_none() {
            f.push(n, AuditCode::BadStatus, format!("MCP outcome {word:?}"));
        }
        // `continued`: the client's answer to the upstream's own input request, passed on for
        // an approved call (a nested multi round trip): it names that approval too.
        if matches!(outcome, Some(McpOutcome::Executed | McpOutcome::Continued))
            && object.get("approval_ref").and_then(Value::as_str).is_none()
        {
            f.push(
                n,
                AuditCode::McpExecutedWithoutApprovalRef,
                format!("MCP call {id} executed as a held call without approval_ref"),
            );
        }
        if !self.done.insert(digest(id)) {
            f.push(
                n,
                AuditCode::McpTwoOutcomes,
                format!("MCP call {id} has two outcomes"),
            );
            return;
        }
        if self.open.remove(id).is_none() {
            f.push(
                n,
                AuditCode::McpOutcomeForUnknownCall,
                format!("MCP call {id} was logged in an earlier file"),
            );
        }
    }

    /// At the end of a log not closed after them: intents still without an outcome (the
    /// interposer was stopped mid-call), in line order.
    pub(super) fn finish(&mut self, f: &mut Findings) {
        let mut in_flight: Vec<(usize, String)> =
            self.open.drain().map(|(id, line)| (line, id)).collect();
        in_flight.sort();
        for (line, id) in in_flight {
            f.push(
                line,
                AuditCode::McpCallInFlight,
                format!("MCP call {id} has no outcome and the log was not closed after it"),
            );
        }
    }
}
