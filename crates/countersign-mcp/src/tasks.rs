//! Tasks (protocol revision 2025-11-25, SEP-1686): a held `tools/call` the client sends with
//! `params.task` is answered at once with a task instead of a ticket to retry. The interposer
//! then waits for the verdict itself and, once the approval verifies and its grant is collected,
//! forwards the call exactly once; the client polls `tasks/get`, reads `tasks/result`, and may
//! withdraw the approval with `tasks/cancel` (docs/MCP.md, "Tasks").
//!
//! This module holds the session's task table and the wire shapes; the life cycle (approval,
//! verdict, forward) is the relay's, shared with plain held calls.

use crate::config::Rule;
use serde_json::{Map, Value, json};
use std::collections::HashMap;
use std::time::{Duration, Instant};
use tokio::sync::{oneshot, watch};

/// Every task id the interposer issues starts with this, so a `tasks/*` request for a task it
/// no longer knows (expired, or made before a restart) is answered here, not sent upstream.
pub(crate) const TASK_ID_PREFIX: &str = "countersign-task-";
/// The request ids the interposer gives the calls it forwards for tasks (the client never sees
/// them: their answers complete the task).
pub(crate) const UPSTREAM_ID_PREFIX: &str = "countersign-task-call-";
/// The 2026-07-28 tasks extension (SEP-2663): declared per request in
/// `_meta["io.modelcontextprotocol/clientCapabilities"].extensions`.
pub(crate) const EXTENSION: &str = "io.modelcontextprotocol/tasks";
/// `-32021`: the request needs a client capability it did not declare.
pub(crate) const MISSING_CAPABILITY: i64 = -32021;

/// Which tasks protocol a task speaks: the 2025-11-25 feature (`params.task`, `tasks/result`)
/// or the 2026-07-28 extension (`resultType: "task"`, results inlined in `tasks/get`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flavor {
    Legacy,
    Extension,
}

/// A held call's request to run as a task: its flavor, and the retention asked (2025-11-25
/// `params.task.ttl`; the extension lets the server choose).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ask {
    pub ttl: Option<u64>,
    pub flavor: Flavor,
}

/// Suggested `tasks/get` interval: a human approves in seconds, not milliseconds.
pub(crate) const POLL_INTERVAL_MS: u64 = 2_000;
/// Retention when the client asks for none.
const DEFAULT_TTL_MS: u64 = 60 * 60 * 1000;
/// Longest retention granted, whatever the client asks: the longest approval window a tool may
/// have (seven days, `countersign_server::config::MAX_APPROVAL_SECONDS`) and a day to read its
/// verdict, so a task never ends before the approval it waits for.
const MAX_TTL_MS: u64 = 8 * 24 * 60 * 60 * 1000;
/// A task outlives its approval by at least this much, so its verdict can be read.
const AFTER_EXPIRY_MS: u64 = 10 * 60 * 1000;

/// A task's status (2025-11-25 `TaskStatus`; `input_required` is not used, see [`Status::Working`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    /// Awaiting the verdict, or running upstream. Not `input_required`: in 2025-11-25 that status
    /// tells the client to call `tasks/result`, which blocks until the task ends and would run
    /// into the client's request timeout while a human decides.
    Working,
    /// The extension only: the approved call's upstream asks the client for input (its own
    /// multi round trip); `tasks/get` shows the requests, `tasks/update` answers them.
    InputRequired,
    Completed,
    Failed,
    Cancelled,
}

impl Status {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Working => "working",
            Self::InputRequired => "input_required",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }

    pub(crate) fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Cancelled)
    }
}

/// What `tasks/result` answers once the task ended: the `result` or the `error` member the
/// original `tools/call` would have had.
#[derive(Debug, Clone)]
pub(crate) enum Payload {
    Result(Value),
    Error(Value),
}

impl Payload {
    /// The payload of a response frame (`{"id", "result"}` or `{"id", "error"}`).
    pub(crate) fn of_response(frame: &Value) -> Self {
        match frame.get("error") {
            Some(e) => Self::Error(e.clone()),
            None => Self::Result(frame.get("result").cloned().unwrap_or_else(|| json!({}))),
        }
    }
}

/// The approved call a task runs, as forwarded: what a continuation sends again.
#[derive(Debug, Clone)]
pub(crate) struct Approved {
    pub line: String,
    pub tool: String,
    pub arguments: String,
    pub rule: Rule,
}

/// Input the upstream asked for while the approved call ran (extension tasks): its requests
/// under keys unique over the task's life (`<round>.<upstream key>`), the answers so far, and
/// the upstream's `requestState` to send back with them.
#[derive(Debug, Default)]
struct Input {
    round: u32,
    request_state: String,
    requests: Map<String, Value>,
    responses: Map<String, Value>,
}

/// One task of this session.
#[derive(Debug)]
pub(crate) struct Task {
    pub flavor: Flavor,
    pub approval_id: String,
    pub op_hash: String,
    pub status: Status,
    pub status_message: String,
    created_at: String,
    last_updated_at: String,
    created: Instant,
    ttl_ms: u64,
    /// Set once the task ended.
    pub payload: Option<Payload>,
    /// Fires to stop the task's driver before it forwards (`tasks/cancel`, or the session ended).
    pub stop: Option<oneshot::Sender<()>>,
    /// The id of the call forwarded upstream for it, while that call runs.
    pub upstream_id: Option<String>,
    /// Flips to `true` when the task ends: what a blocked `tasks/result` waits on.
    ended: watch::Sender<bool>,
    /// The approved call, once released.
    pub approved: Option<Approved>,
    /// Outstanding input (status `input_required`), and the round count.
    input: Input,
}

impl Task {
    pub(crate) fn new(
        flavor: Flavor,
        approval_id: String,
        op_hash: String,
        status_message: String,
        ttl_ms: u64,
        now: String,
        stop: oneshot::Sender<()>,
    ) -> Self {
        Self {
            flavor,
            approval_id,
            op_hash,
            status: Status::Working,
            status_message,
            created_at: now.clone(),
            last_updated_at: now,
            created: Instant::now(),
            ttl_ms,
            payload: None,
            stop: Some(stop),
            upstream_id: None,
            ended: watch::channel(false).0,
            approved: None,
            input: Input::default(),
        }
    }

    /// The `Task` object of the task's flavor (2025-11-25 `ttl`/`pollInterval`, or the
    /// extension's `ttlMs`/`pollIntervalMs`).
    pub(crate) fn view(&self, task_id: &str) -> Value {
        if self.flavor == Flavor::Extension {
            return json!({
                "taskId": task_id,
                "status": self.status.as_str(),
                "statusMessage": self.status_message,
                "createdAt": self.created_at,
                "lastUpdatedAt": self.last_updated_at,
                "ttlMs": self.ttl_ms,
                "pollIntervalMs": POLL_INTERVAL_MS,
            });
        }
        json!({
            "taskId": task_id,
            "status": self.status.as_str(),
            "statusMessage": self.status_message,
            "createdAt": self.created_at,
            "lastUpdatedAt": self.last_updated_at,
            "ttl": self.ttl_ms,
            "pollInterval": POLL_INTERVAL_MS,
        })
    }

    /// The extension's `tasks/get` result (`DetailedTask`): the task, with the call's `result`
    /// once completed or its JSON-RPC `error` once failed.
    pub(crate) fn detailed(&self, task_id: &str) -> Value {
        let mut view = self.view(task_id);
        if let Some(v) = view.as_object_mut() {
            v.insert("resultType".into(), json!("complete"));
            match (&self.payload, self.status) {
                (Some(Payload::Result(r)), Status::Completed) => {
                    v.insert("result".into(), r.clone());
                }
                (Some(Payload::Error(e)), Status::Failed) => {
                    v.insert("error".into(), e.clone());
                }
                (_, Status::InputRequired) => {
                    let requests = self.input.requests.clone();
                    v.insert("inputRequests".into(), Value::Object(requests));
                }
                _ => {}
            }
        }
        view
    }

    /// The upstream answered the approved call of an extension task `input_required` (`result`):
    /// the task waits for the client's answers. `false` (nothing changes) for any other answer.
    pub(crate) fn ask_input(&mut self, result: &Value, now: String) -> bool {
        let (Some(state), Some(requests)) = (
            result.get("requestState").and_then(Value::as_str),
            result.get("inputRequests").and_then(Value::as_object),
        ) else {
            return false;
        };
        if self.flavor != Flavor::Extension
            || self.status.is_terminal()
            || result.get("resultType").and_then(Value::as_str) != Some("input_required")
        {
            return false;
        }
        let round = self.input.round.saturating_add(1);
        self.input = Input {
            round,
            request_state: state.to_owned(),
            requests: requests
                .iter()
                .map(|(k, v)| (format!("{round}.{k}"), v.clone()))
                .collect(),
            responses: Map::new(),
        };
        self.status = Status::InputRequired;
        self.update(
            "The approved call asks for input: answer its inputRequests with tasks/update.".into(),
            now,
        );
        true
    }

    /// Take the client's `responses` to outstanding requests (others are ignored, as SEP-2663
    /// says). Once every outstanding request is answered: the upstream's `requestState` and the
    /// answers under the upstream's own keys, and the task works again.
    pub(crate) fn answer(
        &mut self,
        responses: &Map<String, Value>,
        now: String,
    ) -> Option<(String, Map<String, Value>)> {
        if self.status != Status::InputRequired {
            return None;
        }
        for (k, v) in responses {
            if self.input.requests.contains_key(k) {
                self.input.responses.insert(k.clone(), v.clone());
            }
        }
        if self.input.responses.len() < self.input.requests.len() {
            return None;
        }
        let prefix = format!("{}.", self.input.round);
        let answers = std::mem::take(&mut self.input.responses)
            .into_iter()
            .filter_map(|(k, v)| Some((k.strip_prefix(&prefix)?.to_owned(), v)))
            .collect();
        self.input.requests.clear();
        self.status = Status::Working;
        self.update("Input given: the approved call goes on.".into(), now);
        Some((std::mem::take(&mut self.input.request_state), answers))
    }

    /// A new message while the task goes on.
    pub(crate) fn update(&mut self, message: String, now: String) {
        self.status_message = message;
        self.last_updated_at = now;
    }

    /// End the task (once: a task that ended stays as it ended).
    pub(crate) fn end(&mut self, status: Status, message: String, payload: Payload, now: String) {
        if self.status.is_terminal() {
            return;
        }
        self.status = status;
        self.status_message = message;
        self.last_updated_at = now;
        self.payload = Some(payload);
        self.stop = None;
        self.ended.send_replace(true);
    }

    /// Wait for the end of the task (at once if it ended).
    pub(crate) fn ended(&self) -> watch::Receiver<bool> {
        self.ended.subscribe()
    }

    fn expired(&self, now: Instant) -> bool {
        now.duration_since(self.created) > Duration::from_millis(self.ttl_ms)
    }
}

/// The session's tasks by id, and the forwarded calls that will complete them.
#[derive(Debug, Default)]
pub(crate) struct Tasks {
    by_id: HashMap<String, Task>,
    /// Upstream request id (as `id_key`) -> task id.
    by_upstream_id: HashMap<String, String>,
    /// A call was ever forwarded for a task in this session (its answer may still come, even
    /// for a task forgotten since).
    forwarded_any: bool,
}

impl Tasks {
    pub(crate) fn insert(&mut self, task_id: String, task: Task) {
        self.forget_expired();
        self.by_id.insert(task_id, task);
    }

    pub(crate) fn remove(&mut self, task_id: &str) {
        self.by_id.remove(task_id);
    }

    pub(crate) fn get_mut(&mut self, task_id: &str) -> Option<&mut Task> {
        self.forget_expired();
        self.by_id.get_mut(task_id)
    }

    /// The call forwarded as `upstream_key` runs for `task_id`.
    pub(crate) fn running(&mut self, task_id: &str, upstream_key: String) {
        if let Some(t) = self.by_id.get_mut(task_id) {
            t.upstream_id = Some(upstream_key.clone());
        }
        self.by_upstream_id.insert(upstream_key, task_id.to_owned());
        self.forwarded_any = true;
    }

    /// No call was ever forwarded for a task here: the fast path of every upstream answer.
    pub(crate) fn never_forwarded(&self) -> bool {
        !self.forwarded_any
    }

    /// The task the answer with `upstream_key` completes, taken off the running list.
    pub(crate) fn answered(&mut self, upstream_key: &str) -> Option<(String, &mut Task)> {
        let task_id = self.by_upstream_id.remove(upstream_key)?;
        let task = self.by_id.get_mut(&task_id)?;
        task.upstream_id = None;
        Some((task_id, task))
    }

    /// Every live task, oldest first (`tasks/list`).
    pub(crate) fn list(&mut self) -> Vec<Value> {
        self.forget_expired();
        let mut all: Vec<(&String, &Task)> = self.by_id.iter().collect();
        all.sort_by_key(|(_, t)| t.created);
        all.into_iter().map(|(id, t)| t.view(id)).collect()
    }

    /// The session is over: no task's driver goes on (nobody could read its result).
    pub(crate) fn stop_all(&mut self) {
        for t in self.by_id.values_mut() {
            t.stop = None;
        }
    }

    /// Tasks past their retention are dropped, ended or not (a driver still running finds its
    /// task gone and its result is only in the audit log).
    fn forget_expired(&mut self) {
        let now = Instant::now();
        self.by_id.retain(|_, t| !t.expired(now));
        let live = &self.by_id;
        self.by_upstream_id
            .retain(|_, task_id| live.contains_key(task_id));
    }
}

/// The retention granted: what the client asked (or an hour), at least until ten minutes after
/// the approval expires, at most a day.
pub(crate) fn ttl_ms(requested: Option<u64>, approval_left: Option<Duration>) -> u64 {
    let floor = approval_left.map_or(0, |left| {
        u64::try_from(left.as_millis())
            .unwrap_or(MAX_TTL_MS)
            .saturating_add(AFTER_EXPIRY_MS)
    });
    requested
        .unwrap_or(DEFAULT_TTL_MS)
        .max(floor)
        .min(MAX_TTL_MS)
}

/// The `tools/call` line forwarded for a task: `line` with its `id` replaced by `upstream_id`
/// and without `params.task` (the upstream runs a plain call; the task is the interposer's).
/// Members are cut out of the text, never re-serialized, so `arguments` stay the hashed bytes;
/// `None` if the result's `arguments` are not exactly `arguments`.
pub(crate) fn upstream_call(
    line: &str,
    upstream_id: &str,
    arguments: &str,
    flavor: Flavor,
) -> Option<String> {
    let at = crate::splice::member(line, "params")?;
    let mut params = crate::splice::without(line.get(at.clone())?, "task")?;
    if flavor == Flavor::Extension {
        params = without_extension(&params)?;
    }
    let line = format!("{}{params}{}", &line[..at.start], &line[at.end..]);
    let id = crate::splice::member(&line, "id")?;
    let new_id = Value::from(upstream_id).to_string();
    let out = format!("{}{new_id}{}", &line[..id.start], &line[id.end..]);
    let frame: Value = serde_json::from_str(&out).ok()?;
    let same = raw_arguments(&out).as_deref().unwrap_or("{}") == arguments;
    (same && frame.pointer("/params/task").is_none()).then_some(out)
}

/// The approved call `line` sent again to go on from the upstream's `input_required`: under
/// `upstream_id`, with its `requestState` and the client's `responses` in place of any it had.
/// Cut into the text like [`upstream_call`]: `None` if the arguments would not stay `arguments`.
pub(crate) fn continuation_call(
    line: &str,
    upstream_id: &str,
    arguments: &str,
    state: &str,
    responses: &Map<String, Value>,
) -> Option<String> {
    let at = crate::splice::member(line, "params")?;
    let params = crate::splice::without(line.get(at.clone())?, "requestState")?;
    let params = crate::splice::without(&params, "inputResponses")?;
    let close = params.rfind('}')?;
    let head = params.get(..close)?.trim_end();
    let comma = if head.ends_with('{') { "" } else { "," };
    let added = format!(
        "{comma}\"requestState\":{},\"inputResponses\":{}}}",
        Value::from(state),
        Value::Object(responses.clone())
    );
    let params = format!("{head}{added}");
    let line = crate::splice::replace(line, at, &params);
    let id = crate::splice::member(&line, "id")?;
    let out = crate::splice::replace(&line, id, &Value::from(upstream_id).to_string());
    serde_json::from_str::<Value>(&out).ok()?;
    (raw_arguments(&out).as_deref().unwrap_or("{}") == arguments).then_some(out)
}

/// `params` without the tasks extension in its `_meta` client capabilities: the interposer runs
/// the approved call itself, so the upstream must answer it with a result, not a task of its own
/// (SEP-2663: a server returns a task only to a request that declares the extension). `params`
/// as it is when it declares nothing.
fn without_extension(params: &str) -> Option<String> {
    let path = [
        "_meta",
        "io.modelcontextprotocol/clientCapabilities",
        "extensions",
    ];
    let mut at = 0..params.len();
    for key in path {
        let Some(inner) = crate::splice::member(params.get(at.clone())?, key) else {
            return Some(params.to_owned());
        };
        at = at.start + inner.start..at.start + inner.end;
    }
    let cut = crate::splice::without(params.get(at.clone())?, EXTENSION)?;
    Some(crate::splice::replace(params, at, &cut))
}

/// Whether request `params` declare the tasks extension in their own `_meta`.
pub(crate) fn declares_extension(params: &Value) -> bool {
    params.get("_meta").is_some_and(meta_declares_extension)
}

/// [`declares_extension`] given the request's `_meta` itself.
pub(crate) fn meta_declares_extension(meta: &Value) -> bool {
    meta.pointer("/io.modelcontextprotocol~1clientCapabilities/extensions")
        .and_then(|e| e.get(EXTENSION))
        .is_some_and(Value::is_object)
}

/// The exact text of `params.arguments` in `line`.
fn raw_arguments(line: &str) -> Option<String> {
    let at = crate::splice::member(line, "params")?;
    let params = &line[at];
    let args = crate::splice::member(params, "arguments")?;
    params.get(args).map(str::to_owned)
}

/// The task augmentation a request asked for, given its `params.task`: `Some(ttl)` when that
/// is an object.
pub(crate) fn requested(task: &Value) -> Option<Option<u64>> {
    let task = task.as_object()?;
    Some(task.get("ttl").and_then(Value::as_u64))
}

/// The `tasks` capability the interposer adds to a 2025-11-25 `initialize` result, merged into
/// the upstream's own (its `list` and other request kinds stay).
pub(crate) fn add_capability(result: &mut Value) {
    let Some(caps) = result
        .get_mut("capabilities")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    let tasks = caps.entry("tasks").or_insert_with(|| json!({}));
    let Some(tasks) = tasks.as_object_mut() else {
        return;
    };
    tasks.entry("cancel").or_insert_with(|| json!({}));
    tasks.entry("list").or_insert_with(|| json!({}));
    let requests = tasks.entry("requests").or_insert_with(|| json!({}));
    if let Some(requests) = requests.as_object_mut() {
        let tools = requests.entry("tools").or_insert_with(|| json!({}));
        if let Some(tools) = tools.as_object_mut() {
            tools.entry("call").or_insert_with(|| json!({}));
        }
    }
}

/// The tasks extension the interposer adds to a 2026-07-28 `server/discover` result (SEP-2663:
/// `capabilities.extensions["io.modelcontextprotocol/tasks"]`), beside the upstream's own.
pub(crate) fn add_extension(result: &mut Value) {
    let Some(caps) = result
        .as_object_mut()
        .map(|r| r.entry("capabilities").or_insert_with(|| json!({})))
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    let extensions = caps.entry("extensions").or_insert_with(|| json!({}));
    if let Some(extensions) = extensions.as_object_mut() {
        extensions.entry(EXTENSION).or_insert_with(|| json!({}));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_forwarded_call_keeps_the_argument_bytes_and_loses_the_task() {
        let line = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"w","task":{"ttl":5},"arguments":{"b" : 1,"a":2}}}"#;
        let out = upstream_call(
            line,
            "countersign-task-call-1",
            r#"{"b" : 1,"a":2}"#,
            Flavor::Legacy,
        )
        .unwrap();
        assert_eq!(
            out,
            r#"{"jsonrpc":"2.0","id":"countersign-task-call-1","method":"tools/call","params":{"name":"w","arguments":{"b" : 1,"a":2}}}"#
        );
        assert!(upstream_call(line, "x", r#"{"a":2,"b":1}"#, Flavor::Legacy).is_none());
    }

    #[test]
    fn the_extension_call_goes_upstream_without_the_tasks_declaration() {
        let line = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"w","arguments":{"a":1},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"x/y":{},"io.modelcontextprotocol/tasks":{}}}}}}"#;
        let out = upstream_call(line, "u", r#"{"a":1}"#, Flavor::Extension).unwrap();
        assert_eq!(
            out,
            r#"{"jsonrpc":"2.0","id":"u","method":"tools/call","params":{"name":"w","arguments":{"a":1},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"x/y":{}}}}}}"#
        );
        let plain = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"w","arguments":{}}}"#;
        assert!(upstream_call(plain, "u", "{}", Flavor::Extension).is_some());
        let declared: Value = serde_json::from_str(line).unwrap();
        assert!(declares_extension(&declared["params"]));
        assert!(!declares_extension(&json!({"_meta": {}})));
    }

    #[test]
    fn retention_covers_the_approval_and_is_capped() {
        assert_eq!(ttl_ms(None, None), DEFAULT_TTL_MS);
        assert_eq!(ttl_ms(Some(1_000), None), 1_000);
        assert_eq!(
            ttl_ms(Some(1_000), Some(Duration::from_secs(300))),
            300_000 + AFTER_EXPIRY_MS
        );
        assert_eq!(ttl_ms(Some(u64::MAX), None), MAX_TTL_MS);
    }

    #[test]
    fn the_capability_is_merged_into_the_upstreams() {
        let mut r = json!({"capabilities": {"tools": {}, "tasks": {"requests": {"sampling": {}}}}});
        add_capability(&mut r);
        assert_eq!(
            r["capabilities"]["tasks"],
            json!({"requests": {"sampling": {}, "tools": {"call": {}}}, "cancel": {}, "list": {}})
        );
    }

    #[test]
    fn a_continuation_carries_the_upstreams_state_and_the_answers() {
        let line = r#"{"jsonrpc":"2.0","id":"t1","method":"tools/call","params":{"name":"w","arguments":{"a" : 1},"requestState":"old"}}"#;
        let mut answers = Map::new();
        answers.insert("q".into(), json!({"action": "accept"}));
        let out = continuation_call(line, "t2", r#"{"a" : 1}"#, "s-2", &answers).unwrap();
        assert_eq!(
            out,
            r#"{"jsonrpc":"2.0","id":"t2","method":"tools/call","params":{"name":"w","arguments":{"a" : 1},"requestState":"s-2","inputResponses":{"q":{"action":"accept"}}}}"#
        );
    }

    #[test]
    fn input_keys_stay_unique_over_rounds_and_only_outstanding_answers_count() {
        let (stop, _) = oneshot::channel();
        let mut t = Task::new(
            Flavor::Extension,
            "a".into(),
            "h".into(),
            "m".into(),
            10,
            "t".into(),
            stop,
        );
        let asks = json!({"resultType": "input_required", "requestState": "s1", "inputRequests": {"q": {}, "r": {}}});
        assert!(t.ask_input(&asks, "t1".into()));
        assert_eq!(t.status, Status::InputRequired);
        assert_eq!(
            t.detailed("x")["inputRequests"],
            json!({"1.q": {}, "1.r": {}})
        );
        let partial = json!({"1.q": {"action": "accept"}, "0.z": {}});
        assert!(
            t.answer(partial.as_object().unwrap(), "t2".into())
                .is_none()
        );
        let rest = json!({"1.r": {"action": "decline"}});
        let (state, answers) = t.answer(rest.as_object().unwrap(), "t3".into()).unwrap();
        assert_eq!(state, "s1");
        assert_eq!(
            Value::Object(answers),
            json!({"q": {"action": "accept"}, "r": {"action": "decline"}})
        );
        assert_eq!(t.status, Status::Working);
        let again = json!({"resultType": "input_required", "requestState": "s2", "inputRequests": {"q": {}}});
        assert!(t.ask_input(&again, "t4".into()));
        assert_eq!(t.detailed("x")["inputRequests"], json!({"2.q": {}}));
    }

    #[test]
    fn discover_declares_the_extension_beside_the_upstreams() {
        let mut r = json!({"capabilities": {"tools": {}, "extensions": {"x/y": {"a": 1}}}});
        add_extension(&mut r);
        assert_eq!(
            r["capabilities"]["extensions"],
            json!({"x/y": {"a": 1}, EXTENSION: {}})
        );
    }

    #[test]
    fn a_task_ends_once_and_wakes_its_readers() {
        let (stop, _) = oneshot::channel();
        let mut t = Task::new(
            Flavor::Legacy,
            "a".into(),
            "h".into(),
            "held".into(),
            10,
            "t0".into(),
            stop,
        );
        let rx = t.ended();
        t.end(
            Status::Cancelled,
            "c".into(),
            Payload::Result(json!({})),
            "t1".into(),
        );
        t.end(
            Status::Completed,
            "x".into(),
            Payload::Result(json!({})),
            "t2".into(),
        );
        assert_eq!(t.status, Status::Cancelled);
        assert!(*rx.borrow());
        assert_eq!(t.view("id")["lastUpdatedAt"], "t1");
    }
}
