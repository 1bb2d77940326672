//! What a client receives for a held or refused call (docs/MCP.md, "What the client sees").

use crate::config::HeldAs;
use serde_json::{Value, json};

/// The namespaced key of the approval block (in `_meta`, or beside `elicitations`).
pub const APPROVAL_KEY: &str = "io.countersign/approval";
/// URL elicitation required (protocol revision 2025-11-25 only).
pub const URL_ELICITATION_REQUIRED: i64 = -32042;
/// `held_as = "jsonrpc_error"`: the call is held (pending).
pub const HELD_CODE: i64 = -32010;
/// `held_as = "jsonrpc_error"`: the call was refused.
pub const DENIED_CODE: i64 = -32011;
/// The protocol revision whose URL-elicitation clients get `-32042`.
pub const REVISION_2025_11_25: &str = "2025-11-25";
/// The first revision whose results must say what they are (`resultType`).
pub const REVISION_2026_07_28: &str = "2026-07-28";

/// Tag a response frame's result as final (`"resultType": "complete"`), as 2026-07-28 requires
/// of every result: without it that revision's SDKs refuse to parse the answer, and the model
/// sees a protocol failure instead of the ticket. A result that already says what it is
/// (`input_required`) and error frames are left alone.
pub fn mark_complete(frame: &mut Value) {
    if let Some(result) = frame.get_mut("result").and_then(Value::as_object_mut) {
        result
            .entry("resultType")
            .or_insert_with(|| Value::from("complete"));
    }
}

/// The ticket of one held or refused call: the approval block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ticket {
    pub approval_id: Option<String>,
    pub op_hash: String,
    pub expires_at: Option<String>,
    pub approve_url: Option<String>,
    /// `None` while pending; the reason code once refused.
    pub denied: Option<String>,
}

impl Ticket {
    /// The ticket of a call refused before any approval exists for it (policy, inadmissible
    /// arguments, an invalid state): its op_hash and why.
    pub fn refused(op_hash: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            approval_id: None,
            op_hash: op_hash.into(),
            expires_at: None,
            approve_url: None,
            denied: Some(reason.into()),
        }
    }

    /// The block: ids, hash, status and times only, never the arguments.
    pub fn block(&self) -> Value {
        let mut b = json!({
            "op_hash": self.op_hash,
            "status": if self.denied.is_some() { "DENIED" } else { "PENDING" },
        });
        let put = |b: &mut Value, k: &str, v: &Option<String>| {
            if let (Some(v), Some(map)) = (v, b.as_object_mut()) {
                map.insert(k.to_owned(), Value::from(v.as_str()));
            }
        };
        put(&mut b, "approval_id", &self.approval_id);
        put(&mut b, "expires_at", &self.expires_at);
        put(&mut b, "approve_url", &self.approve_url);
        put(&mut b, "reason_code", &self.denied);
        b
    }
}

/// What the client negotiated, as far as the answer depends on it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientKind {
    /// The negotiated protocol revision (`initialize`), if seen.
    pub revision: Option<String>,
    /// The client declared `capabilities.elicitation.url`.
    pub url_elicitation: bool,
}

/// The key of the interposer's input request in a multi round-trip answer.
pub const INPUT_REQUEST_KEY: &str = "countersign.approval";

/// A 2026-07-28 multi round-trip answer (`resultType: "input_required"`): a URL elicitation of
/// the approver page and the sealed `requestState` the client echoes when it calls again.
pub fn input_required(id: &Value, tool: &str, ticket: &Ticket, request_state: &str) -> Value {
    let url = ticket.approve_url.as_deref().unwrap_or_default();
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "result": {
            "resultType": "input_required",
            "inputRequests": {
                INPUT_REQUEST_KEY: {
                    "method": "elicitation/create",
                    "params": {
                        "mode": "url",
                        "url": url,
                        "message": format!("Approve this call of {tool}; it runs when the client calls again."),
                    }
                }
            },
            "requestState": request_state,
            "_meta": { APPROVAL_KEY: ticket.block() },
        }
    })
}

/// The status message of a held call run as a task (2025-11-25): where to approve. The task
/// runs the call itself once approved, so the client waits instead of calling again.
pub fn task_message(tool: &str, ticket: &Ticket) -> String {
    let url = ticket.approve_url.as_deref().unwrap_or("the approver page");
    let approval = ticket.approval_id.as_deref().unwrap_or("none");
    let expires = ticket.expires_at.as_deref().unwrap_or("unknown");
    format!(
        "Held for human approval (approval {approval}, expires {expires}). Ask the user to approve at {url}; this task runs {tool} once approved, with no need to call it again."
    )
}

/// Which moment of a held call is being answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Moment {
    /// The approval was just created.
    FirstArrival,
    /// A retry found it still pending after the park budget.
    StillPending,
    /// Refused (by a human, by expiry, by policy or by verification).
    Denied,
}

/// The JSON-RPC response (a whole frame) for request `id` of tool `tool`.
pub fn respond(
    id: &Value,
    tool: &str,
    ticket: &Ticket,
    moment: Moment,
    client: &ClientKind,
    held_as: HeldAs,
) -> Value {
    let url = ticket.approve_url.as_deref().unwrap_or("the approver page");
    let approval = ticket.approval_id.as_deref().unwrap_or("none");
    let expires = ticket.expires_at.as_deref().unwrap_or("unknown");
    let retry = format!(
        "Ask the user to approve at {url}, then call {tool} again with identical arguments."
    );
    let (text, message) = match (moment, &ticket.denied) {
        (_, Some(reason)) => (
            format!(
                "Not run: refused ({reason}). Approval {approval}. The call was not executed; do not retry it unchanged."
            ),
            "Refused",
        ),
        (Moment::StillPending, None) => (
            format!(
                "Still awaiting human approval (approval {approval}, expires {expires}). {retry}"
            ),
            "Still awaiting human approval",
        ),
        _ => (
            format!("Held for human approval (approval {approval}, expires {expires}). {retry}"),
            "Held for human approval",
        ),
    };
    let denied = ticket.denied.is_some();
    if moment == Moment::FirstArrival
        && !denied
        && client.url_elicitation
        && client.revision.as_deref() == Some(REVISION_2025_11_25)
    {
        return json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {
                "code": URL_ELICITATION_REQUIRED,
                "message": message,
                "data": {
                    "elicitations": [{
                        "mode": "url",
                        "elicitationId": approval,
                        "url": url,
                        "message": format!("Approve this call of {tool}; it runs when the client calls again."),
                    }],
                    APPROVAL_KEY: ticket.block(),
                }
            }
        });
    }
    match held_as {
        HeldAs::JsonrpcError => json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {
                "code": if denied { DENIED_CODE } else { HELD_CODE },
                "message": message,
                "data": ticket.block(),
            }
        }),
        HeldAs::ToolError => json!({
            "jsonrpc": "2.0",
            "id": id,
            "result": {
                "isError": true,
                "content": [{ "type": "text", "text": text }],
                "_meta": { APPROVAL_KEY: ticket.block() },
            }
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending() -> Ticket {
        Ticket {
            approval_id: Some("apr_1".into()),
            op_hash: "H".into(),
            expires_at: Some("2026-12-03T14:00:00Z".into()),
            approve_url: Some("http://svc/approve/apr_1".into()),
            denied: None,
        }
    }

    fn modern_url() -> ClientKind {
        ClientKind {
            revision: Some(REVISION_2025_11_25.into()),
            url_elicitation: true,
        }
    }

    #[test]
    fn url_elicitation_clients_on_2025_11_25_get_32042_first() {
        let r = respond(
            &json!(7),
            "write_file",
            &pending(),
            Moment::FirstArrival,
            &modern_url(),
            HeldAs::ToolError,
        );
        assert_eq!(r["id"], 7);
        assert_eq!(r["error"]["code"], -32042);
        let e = &r["error"]["data"]["elicitations"][0];
        assert_eq!(e["mode"], "url");
        assert_eq!(e["elicitationId"], "apr_1");
        assert_eq!(e["url"], "http://svc/approve/apr_1");
        assert_eq!(r["error"]["data"][APPROVAL_KEY]["status"], "PENDING");
        assert_eq!(r["error"]["data"][APPROVAL_KEY]["op_hash"], "H");
    }

    #[test]
    fn a_retry_never_gets_a_second_32042() {
        let r = respond(
            &json!("a"),
            "write_file",
            &pending(),
            Moment::StillPending,
            &modern_url(),
            HeldAs::ToolError,
        );
        assert_eq!(r["result"]["isError"], true);
        let text = r["result"]["content"][0]["text"].as_str().unwrap();
        assert!(text.starts_with("Still awaiting human approval (approval apr_1"));
    }

    #[test]
    fn other_clients_get_a_model_readable_tool_error() {
        for client in [
            ClientKind::default(),
            ClientKind {
                revision: Some("2025-06-18".into()),
                url_elicitation: true,
            },
            ClientKind {
                revision: Some(REVISION_2025_11_25.into()),
                url_elicitation: false,
            },
        ] {
            let r = respond(
                &json!(1),
                "write_file",
                &pending(),
                Moment::FirstArrival,
                &client,
                HeldAs::ToolError,
            );
            assert_eq!(r["result"]["isError"], true, "{client:?}");
            let text = r["result"]["content"][0]["text"].as_str().unwrap();
            assert!(text.starts_with("Held for human approval (approval apr_1"));
            assert!(text.contains("http://svc/approve/apr_1"));
            assert!(text.contains("expires 2026-12-03T14:00:00Z"));
            assert!(text.contains("call write_file again with identical arguments"));
            assert_eq!(r["result"]["_meta"][APPROVAL_KEY]["approval_id"], "apr_1");
        }
    }

    #[test]
    fn jsonrpc_error_mode_uses_codes_outside_the_sdk_range() {
        let held = respond(
            &json!(1),
            "t",
            &pending(),
            Moment::FirstArrival,
            &ClientKind::default(),
            HeldAs::JsonrpcError,
        );
        assert_eq!(held["error"]["code"], HELD_CODE);
        assert_eq!(held["error"]["data"]["approval_id"], "apr_1");
        let mut denied = pending();
        denied.denied = Some("approver_refused".into());
        let refused = respond(
            &json!(1),
            "t",
            &denied,
            Moment::Denied,
            &ClientKind::default(),
            HeldAs::JsonrpcError,
        );
        assert_eq!(refused["error"]["code"], DENIED_CODE);
        assert_eq!(refused["error"]["data"]["status"], "DENIED");
        assert_eq!(refused["error"]["data"]["reason_code"], "approver_refused");
        for code in [HELD_CODE, DENIED_CODE] {
            assert!(!(-32004..=-32000).contains(&code));
        }
    }

    #[test]
    fn refusals_are_tool_errors_even_for_url_clients() {
        let mut t = pending();
        t.denied = Some("expired_unanswered".into());
        let r = respond(
            &json!(1),
            "t",
            &t,
            Moment::Denied,
            &modern_url(),
            HeldAs::ToolError,
        );
        let text = r["result"]["content"][0]["text"].as_str().unwrap();
        assert!(text.starts_with("Not run: refused (expired_unanswered)"));
        assert_eq!(r["result"]["_meta"][APPROVAL_KEY]["status"], "DENIED");
    }

    #[test]
    fn mrtr_answers_carry_a_url_elicitation_and_the_state() {
        let r = input_required(&json!(3), "write_file", &pending(), "S.M");
        assert_eq!(r["result"]["resultType"], "input_required");
        let req = &r["result"]["inputRequests"][INPUT_REQUEST_KEY];
        assert_eq!(req["method"], "elicitation/create");
        assert_eq!(req["params"]["mode"], "url");
        assert_eq!(req["params"]["url"], "http://svc/approve/apr_1");
        assert_eq!(r["result"]["requestState"], "S.M");
    }

    #[test]
    fn modern_results_say_they_are_complete_and_nothing_else_changes() {
        let mut r = respond(
            &json!(1),
            "t",
            &pending(),
            Moment::FirstArrival,
            &ClientKind::default(),
            HeldAs::ToolError,
        );
        let before = r.clone();
        mark_complete(&mut r);
        assert_eq!(r["result"]["resultType"], "complete");
        r["result"].as_object_mut().unwrap().remove("resultType");
        assert_eq!(r, before);
        let mut mrtr = input_required(&json!(3), "t", &pending(), "S.M");
        mark_complete(&mut mrtr);
        assert_eq!(mrtr["result"]["resultType"], "input_required");
        let mut error = respond(
            &json!(1),
            "t",
            &pending(),
            Moment::FirstArrival,
            &ClientKind::default(),
            HeldAs::JsonrpcError,
        );
        let before = error.clone();
        mark_complete(&mut error);
        assert_eq!(error, before, "errors carry no resultType");
    }

    #[test]
    fn the_block_never_carries_arguments() {
        let b = pending().block();
        let keys: Vec<_> = b.as_object().unwrap().keys().cloned().collect();
        assert_eq!(
            keys,
            [
                "approval_id",
                "approve_url",
                "expires_at",
                "op_hash",
                "status"
            ]
        );
    }
}
