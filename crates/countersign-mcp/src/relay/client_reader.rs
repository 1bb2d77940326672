//! Floor 0: the reader of the client direction. A frame reaches it only once admission
//! ([`crate::admission`], the one strict reading) has admitted it; this reader then decodes what
//! the relay decides on, once: a `tools/call` into a typed [`CallFrame`], a few small requests
//! into their members, and nothing at all for the frames that pass as they came (the fast path).

use super::upstream_reader::id_key;
use crate::admission::{Kind, Message, Rejection};
use crate::answer;
use crate::tasks;
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::ops::Range;

/// An admitted client frame, decoded as far as the relay needs it.
pub(super) enum ClientFrame {
    /// A notification or a response to the upstream's own request: it passes as it came.
    Pass,
    /// `notifications/cancelled`, with the key of the request it names (empty if none).
    Cancelled { target: String },
    /// A `tools/call` sent as a notification, and the tool it names (empty if none).
    CallWithoutId { tool: String },
    /// A request: its id, where the id is in the line, and what it asks.
    Request {
        id: Value,
        id_at: Range<usize>,
        body: Request,
    },
}

/// What a client request asks, as far as the relay judges it.
pub(super) enum Request {
    /// `tools/call`: `None` when its params are no call (no string `name`).
    Call(Option<CallFrame>),
    /// `tools/list`: its answer is the catalog.
    List,
    /// `server/discover` (2026-07-28): its answer declares the extensions.
    Discover,
    /// `initialize`: the revision and capabilities the client offers.
    Initialize {
        revision: Option<String>,
        url_elicitation: bool,
    },
    /// `tasks/get`, `tasks/result`, `tasks/update` or `tasks/cancel`; `ours` names the task when
    /// its id is one the interposer issues; `declares`: the request declares the 2026-07-28
    /// tasks extension in its own `_meta`.
    Task {
        method: TaskMethod,
        ours: Option<String>,
        declares: bool,
        /// `params.inputResponses` (`tasks/update`).
        responses: Option<Value>,
    },
    /// `tasks/list`.
    TaskList,
    /// Any other request: forwarded under an id of the interposer's own.
    Other,
}

/// The `tasks/*` requests about one task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TaskMethod {
    Get,
    Result,
    Update,
    Cancel,
}

/// A `tools/call` decoded once: everything the relay decides, hashes and forwards by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct CallFrame {
    pub(super) tool: String,
    /// `params.arguments` exactly as the client wrote them (`{}` when absent): the bytes hashed.
    pub(super) arguments: String,
    /// The `requestState` the client echoed (a string), if any.
    pub(super) request_state: Option<String>,
    /// The request declares URL elicitation in its own `_meta` (2026-07-28): a held call is
    /// answered with a multi round-trip result.
    pub(super) mrtr: bool,
    /// The task augmentation asked for (`params.task` an object), with its `ttl` if any.
    pub(super) task: Option<Option<u64>>,
    /// The protocol revision the request's own `_meta` names.
    pub(super) revision: Option<String>,
    /// The request declares the 2026-07-28 tasks extension in its own `_meta`.
    pub(super) tasks_extension: bool,
    /// `params.inputResponses` holds the answer to the interposer's own input request.
    pub(super) own_response: bool,
}

/// The members of a `tools/call`'s params the relay reads. Admission has already refused
/// duplicate and case-variant members, so this reading and any tree reading agree.
#[derive(Deserialize)]
struct WireCall<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(borrow, default)]
    arguments: Option<&'a RawValue>,
    #[serde(default, rename = "requestState")]
    request_state: Option<Value>,
    #[serde(default)]
    task: Option<Value>,
    #[serde(default, rename = "_meta")]
    meta: Option<Value>,
    #[serde(default, rename = "inputResponses")]
    input_responses: Option<Value>,
}

impl CallFrame {
    /// The call in `params` (the text of an admitted `params` object), or `None`.
    pub(super) fn decode(params: &str) -> Option<Self> {
        let wire: WireCall<'_> = serde_json::from_str(params).ok()?;
        let meta = wire.meta.as_ref();
        let mrtr = meta
            .and_then(|m| m.get("io.modelcontextprotocol/clientCapabilities"))
            .and_then(|c| c.pointer("/elicitation/url"))
            .is_some_and(Value::is_object);
        let revision = meta
            .and_then(|m| m.get("io.modelcontextprotocol/protocolVersion"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        let tasks_extension = meta.is_some_and(tasks::meta_declares_extension);
        let own_response = wire
            .input_responses
            .as_ref()
            .and_then(Value::as_object)
            .is_some_and(|r| r.contains_key(answer::INPUT_REQUEST_KEY));
        Some(Self {
            tool: wire.name.into_owned(),
            arguments: wire.arguments.map_or("{}", RawValue::get).to_owned(),
            request_state: wire
                .request_state
                .as_ref()
                .and_then(Value::as_str)
                .map(str::to_owned),
            mrtr,
            task: wire.task.as_ref().and_then(tasks::requested),
            revision,
            tasks_extension,
            own_response,
        })
    }

    /// Whether the request is on protocol revision 2026-07-28 or later: its own `_meta` says so
    /// (2026-07-28 has no `initialize`; every request names its revision), or the session
    /// negotiated such a revision. Revisions are dates, so they compare as text.
    pub(super) fn modern(&self, session_revision: Option<&str>) -> bool {
        self.revision
            .as_deref()
            .or(session_revision)
            .is_some_and(|v| v >= answer::REVISION_2026_07_28)
    }
}

/// Decode admitted frame `line` (admission's reading `m`). Only a request id that does not read
/// fails, which admission's id rule makes impossible.
pub(super) fn read(line: &str, m: &Message) -> Result<ClientFrame, Rejection> {
    let params = m.params.clone().and_then(|p| line.get(p));
    let method = m.method.as_deref().unwrap_or_default();
    let Some(id_at) = m.id.clone().filter(|_| m.kind == Kind::Request) else {
        return Ok(match method {
            "notifications/cancelled" => ClientFrame::Cancelled {
                target: tree(params)
                    .get("requestId")
                    .map(id_key)
                    .unwrap_or_default(),
            },
            "tools/call" => ClientFrame::CallWithoutId {
                tool: params
                    .and_then(CallFrame::decode)
                    .map(|c| c.tool)
                    .unwrap_or_default(),
            },
            _ => ClientFrame::Pass,
        });
    };
    let id = line
        .get(id_at.clone())
        .and_then(|raw| serde_json::from_str::<Value>(raw).ok())
        .ok_or(Rejection::NotAMessage("bad id"))?;
    let body = match method {
        "tools/call" => Request::Call(params.and_then(CallFrame::decode)),
        "tools/list" => Request::List,
        "server/discover" => Request::Discover,
        "initialize" => {
            let params = tree(params);
            Request::Initialize {
                revision: params
                    .get("protocolVersion")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                url_elicitation: params
                    .pointer("/capabilities/elicitation/url")
                    .is_some_and(Value::is_object),
            }
        }
        "tasks/get" => task(TaskMethod::Get, params),
        "tasks/result" => task(TaskMethod::Result, params),
        "tasks/update" => task(TaskMethod::Update, params),
        "tasks/cancel" => task(TaskMethod::Cancel, params),
        "tasks/list" => Request::TaskList,
        _ => Request::Other,
    };
    Ok(ClientFrame::Request { id, id_at, body })
}

/// A small `params` object as a tree (`null` when absent): only rare, small requests take it.
fn tree(params: Option<&str>) -> Value {
    params
        .and_then(|p| serde_json::from_str(p).ok())
        .unwrap_or_default()
}

/// A `tasks/*` request: the task it names, if the id is one the interposer issues.
fn task(method: TaskMethod, params: Option<&str>) -> Request {
    let params = tree(params);
    let ours = params
        .get("taskId")
        .and_then(Value::as_str)
        .filter(|t| t.starts_with(tasks::TASK_ID_PREFIX))
        .map(str::to_owned);
    let declares = tasks::declares_extension(&params);
    let responses = params.get("inputResponses").cloned();
    Request::Task {
        method,
        ours,
        declares,
        responses,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::admit;

    fn call(line: &str) -> Option<CallFrame> {
        let m = admit(line).unwrap();
        match read(line, &m).unwrap() {
            ClientFrame::Request {
                body: Request::Call(c),
                ..
            } => c,
            _ => panic!("not a call: {line}"),
        }
    }

    #[test]
    fn a_call_is_decoded_once_with_everything_the_relay_decides_by() {
        let line = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"write_file","arguments":{ "path" : "a" },"requestState":"s","task":{"ttl":5},"inputResponses":{"countersign.approval":{}},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"url":{}}}}}}"#;
        let c = call(line).unwrap();
        assert_eq!(c.tool, "write_file");
        assert_eq!(c.arguments, r#"{ "path" : "a" }"#, "the bytes as written");
        assert_eq!(c.request_state.as_deref(), Some("s"));
        assert_eq!(c.task, Some(Some(5)));
        assert!(c.mrtr && c.own_response);
        assert!(c.modern(None));
        assert!(!c.tasks_extension);
    }

    #[test]
    fn members_of_the_wrong_type_read_as_absent_and_a_call_without_a_name_is_none() {
        let c = call(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","requestState":5,"task":true,"arguments":null}}"#).unwrap();
        assert_eq!(c.arguments, "{}");
        assert!(!c.modern(Some("2025-11-25")) && c.modern(Some("2026-07-28")));
        assert_eq!((c.request_state, c.task, c.mrtr), (None, None, false));
        assert_eq!(
            call(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":7}}"#),
            None
        );
        assert_eq!(
            call(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#),
            None
        );
    }

    #[test]
    fn other_frames_are_read_only_as_far_as_the_relay_needs() {
        let read_line = |line: &str| read(line, &admit(line).unwrap()).unwrap();
        assert!(matches!(
            read_line(r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{}}"#),
            ClientFrame::Pass
        ));
        assert!(matches!(
            read_line(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a"}}"#),
            ClientFrame::Cancelled { target } if target == r#""a""#
        ));
        assert!(matches!(
            read_line(r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"rm"}}"#),
            ClientFrame::CallWithoutId { tool } if tool == "rm"
        ));
        let theirs = read_line(
            r#"{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"up-1"}}"#,
        );
        assert!(matches!(
            theirs,
            ClientFrame::Request {
                body: Request::Task { ours: None, .. },
                ..
            }
        ));
        let ours = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tasks/cancel","params":{{"taskId":"{}x"}}}}"#,
            tasks::TASK_ID_PREFIX
        );
        assert!(matches!(
            read_line(&ours),
            ClientFrame::Request {
                body: Request::Task {
                    method: TaskMethod::Cancel,
                    ours: Some(_),
                    declares: false,
                    ..
                },
                ..
            }
        ));
    }
}
