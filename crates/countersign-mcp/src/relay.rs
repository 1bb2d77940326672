//! The relay: newline-delimited JSON-RPC between one client and one server. Every client frame is
//! admitted first ([`crate::admission`]): one that is not is answered with its error and nothing
//! of it goes upstream. An admitted frame the relay does not decode is forwarded as the line it
//! arrived as, a request under an id of the interposer's own (the client's comes back on the
//! answer); a `tools/call` that is forwarded is its original line too, so the upstream receives
//! the bytes that were hashed (an approved 2026-07-28 retry loses only the interposer's own
//! `requestState` and `inputResponses` entry, cut out of the line: see [`crate::splice`]).

use crate::admission::{self, INVALID_REQUEST, Kind, Message, Rejection};
use crate::answer::{self, ClientKind, Moment, Ticket};
use crate::audit::{AuditLog, OpenTicket, Outcome};
use crate::config::{Config, ListedTool, Rule};
use crate::tasks::{self, Payload, Status, Task, Tasks};
use countersign::{ApprovalResult, ApprovalStatus, ReasonCode};
use countersign_audit::McpOutcome;
use countersign_client::{Gateway, Refusal, ToolCall};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use tokio::io::{AsyncBufRead, AsyncBufReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::sync::{mpsc, oneshot};

/// Who is calling which server, and under which rules.
#[derive(Debug, Clone)]
pub struct Settings {
    pub agent_id: String,
    pub server_id: String,
    /// Base of the approver page link (`<approver_url>/approve/<id>`).
    pub approver_url: String,
    pub config: Config,
}

/// A forwarded `tools/call` whose answer is awaited for the audit outcome.
#[derive(Debug, Clone)]
struct Forwarded {
    call_id: String,
    op_hash: String,
    /// `allowed`, `executed` or `continued`.
    outcome: McpOutcome,
    approval_ref: Option<String>,
    /// For an approved call: the tool and argument bytes that ran, which a continuation of it
    /// must repeat exactly.
    bound: Option<Bound>,
}

/// The exact call an approval released: its tool name and its `arguments` text, byte for byte.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Bound {
    tool: String,
    arguments: String,
}

impl Bound {
    fn of(call: &ToolCall) -> Self {
        Self {
            tool: call.tool_name.clone(),
            arguments: call.params_json.clone(),
        }
    }
}

/// What the interposer keeps about a request it forwards, to read the upstream's answer.
enum Track {
    /// Nothing: the answer goes back to the client as it is (but for its id).
    Plain,
    /// `initialize`: the negotiated revision and capabilities.
    Initialize,
    /// `tools/list`: the catalog.
    List,
    /// A `tools/call`: its audit outcome.
    Call(Forwarded),
}

#[derive(Debug, Default)]
struct Session {
    client: ClientKind,
    /// `None` until the upstream answered a `tools/list`.
    catalog: Option<HashMap<String, ListedTool>>,
    initialize_ids: Vec<String>,
    list_ids: Vec<String>,
    forwarded: HashMap<String, Forwarded>,
    /// `tools/call`s neither answered nor forwarded yet, by request id.
    calls: HashMap<String, Pending>,
    /// op_hash -> approval id of the calls this session left pending at the service (until
    /// their ticket closes): what `cancel_on_disconnect` withdraws.
    held: HashMap<String, String>,
    /// The tasks this session's client was given (2025-11-25 task-augmented held calls).
    tasks: Tasks,
    /// The upstream declared `tasks.list`: `tasks/list` is its to answer.
    upstream_lists_tasks: bool,
    /// Requests forwarded under the interposer's own ids, by that id's key: the client's id.
    /// Two client requests never share an upstream id, so no answer is ever booked to the
    /// wrong call (see [`Interposer::forward_request`]).
    outbound: HashMap<String, ClientId>,
    /// The reverse: the upstream id key of each forwarded request, by the client id's key.
    outbound_by_client: HashMap<String, String>,
}

/// A client's request id: its key, and its JSON text exactly as the client wrote it (what its
/// answer carries back).
#[derive(Debug, Clone)]
struct ClientId {
    key: String,
    raw: String,
}

impl Session {
    /// Whether a request with this client id is being decided or awaits the upstream's answer.
    fn in_flight(&self, key: &str) -> bool {
        self.calls.contains_key(key) || self.outbound_by_client.contains_key(key)
    }

    /// Forget forwarded request `upstream_key`: the client id it was sent for, if it was one.
    fn answered(&mut self, upstream_key: &str) -> Option<ClientId> {
        let client = self.outbound.remove(upstream_key)?;
        self.outbound_by_client.remove(&client.key);
        Some(client)
    }
}

impl Session {
    /// The client is gone: no pending call is answered or collected for it any more (parked
    /// responses are dropped; their approvals stay pending at the service).
    fn drop_pending_answers(&mut self) {
        self.tasks.stop_all();
        for call in self.calls.values_mut() {
            call.cancelled = true;
            if let Some(cancel) = call.cancel.take() {
                let _ = cancel.send(());
            }
        }
    }
}

/// A `tools/call` the interposer has not answered or forwarded yet. It is registered the moment
/// its frame is read, before anything awaits, so a `notifications/cancelled` that overtakes the
/// call's own task (before it parks, or while it talks to the service) is never lost.
#[derive(Debug)]
struct Pending {
    /// Fires the call's cancellation; its receiver travels with the call.
    cancel: Option<oneshot::Sender<()>>,
    /// The client cancelled: no answer may reach it.
    cancelled: bool,
    /// The client's cancel line, forwarded right after the call if the call is forwarded after
    /// all (what a transparent relay would have done).
    cancel_line: Option<String>,
    /// The request is on protocol revision 2026-07-28 or later: results carry `resultType`.
    modern: bool,
}

/// The interposer: policy, the service connection, the audit log and the session's view.
///
/// Everything but the session (and the agent in `settings`) is shared by the sessions
/// [`Interposer::session_for`] makes (HTTP mode: one per upstream session).
pub struct Interposer {
    settings: Settings,
    /// The policy in force: replaced as a whole, read at every decision.
    config: Arc<std::sync::RwLock<Arc<Config>>>,
    gateway: Arc<Gateway>,
    audit: Arc<AuditLog>,
    tickets: Arc<Mutex<HashMap<String, OpenTicket>>>,
    session: Mutex<Session>,
    run_id: String,
    counter: Arc<AtomicU64>,
    states: Arc<crate::state::StateCodec>,
    /// Where a task's call goes when its verdict lands, if not on the channel of the request that
    /// made the task: HTTP answers each request on its own, so its sessions get a way of their own
    /// to the upstream ([`Interposer::set_task_upstream`]).
    task_upstream: Mutex<Option<Lines>>,
    /// The upstream's own `requestState`s from answers to approved calls, each the single-use
    /// pass for the client's answer to that upstream's input request (nested multi round trips).
    continuations: Arc<Mutex<Continuations>>,
}

impl std::fmt::Debug for Interposer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Interposer")
            .field("agent_id", &self.settings.agent_id)
            .field("server_id", &self.settings.server_id)
            .finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
struct CallFrame<'a> {
    #[serde(borrow)]
    params: CallParams<'a>,
}

#[derive(Deserialize)]
struct CallParams<'a> {
    #[serde(borrow)]
    name: std::borrow::Cow<'a, str>,
    #[serde(borrow, default)]
    arguments: Option<&'a RawValue>,
}

/// An upstream frame as the relay first reads it: borrowed, no tree built. Presence is what
/// counts (`"id": null` is an id, as in a `Value`), so members are kept raw.
#[derive(Deserialize)]
struct Reply<'a> {
    #[serde(borrow, default, deserialize_with = "present")]
    method: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    error: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    result: Option<&'a RawValue>,
}

/// The one member of a result the audit outcome needs.
#[derive(Deserialize)]
struct ResultFlags<'a> {
    #[serde(borrow, default, rename = "isError", deserialize_with = "present")]
    is_error: Option<&'a RawValue>,
}

/// A member that is there, whatever its value (`null` included).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

/// Whether `text` is an object: a struct would also accept an array, which is no single
/// JSON-RPC message.
fn is_object(text: &str) -> bool {
    text.trim_start().starts_with('{')
}

/// `text` read as `T` if it is an object that reading takes.
fn read_object<'a, T: Deserialize<'a>>(text: &'a str) -> Option<T> {
    if is_object(text) {
        serde_json::from_str(text).ok()
    } else {
        None
    }
}

impl<'a> Reply<'a> {
    fn read(line: &'a str) -> Option<Self> {
        read_object(line)
    }

    /// The audit word for this answer, as [`upstream_status`] says it; `None` when the result
    /// needs the general reading.
    fn status(&self) -> Option<&'static str> {
        if self.error.is_some() {
            return Some("error");
        }
        let Some(result) = self.result else {
            return Some("ok");
        };
        if !is_object(result.get()) {
            return Some("ok");
        }
        let flags: ResultFlags<'_> = read_object(result.get())?;
        Some(match flags.is_error.map(RawValue::get) {
            Some("true") => "tool_error",
            _ => "ok",
        })
    }
}

impl<'a> CallParams<'a> {
    fn read(params: &'a str) -> Option<Self> {
        read_object(params)
    }
}

/// A raw JSON-RPC id as a value: keys are made from the value, as the general reading makes
/// them, so both readings agree on every id.
fn raw_id(id: &RawValue) -> Option<Value> {
    serde_json::from_str(id.get()).ok()
}

/// The audit word for an upstream answer: a JSON-RPC error, a tool error, or ok.
fn upstream_status(frame: &Value) -> &'static str {
    if frame.get("error").is_some() {
        "error"
    } else if frame.pointer("/result/isError") == Some(&Value::Bool(true)) {
        "tool_error"
    } else {
        "ok"
    }
}

/// Most bytes a relay writer gathers into one write.
const WRITE_BATCH_BYTES: usize = 1 << 20;

/// A key from the clock and the process id, used only if the system RNG fails (it does not on
/// supported platforms); states sealed under it are still checked for the call they name.
fn random_fallback() -> Vec<u8> {
    let t = OffsetDateTime::now_utc().unix_timestamp_nanos();
    format!("{t}:{}", std::process::id()).into_bytes()
}

/// The key of a JSON-RPC id (its JSON text: `1` and `"1"` stay distinct).
fn id_key(id: &Value) -> String {
    id.to_string()
}

pub(crate) type Lines = mpsc::UnboundedSender<String>;

impl Interposer {
    /// An interposer with the tickets its audit log still had open.
    pub fn new(
        settings: Settings,
        gateway: Gateway,
        audit: AuditLog,
        tickets: HashMap<String, OpenTicket>,
    ) -> Self {
        let run_id = format!(
            "{:x}",
            OffsetDateTime::now_utc().unix_timestamp_nanos() & 0xffff_ffff_ffff
        );
        Self {
            config: Arc::new(std::sync::RwLock::new(Arc::new(settings.config.clone()))),
            settings,
            gateway: Arc::new(gateway),
            audit: Arc::new(audit),
            tickets: Arc::new(Mutex::new(tickets)),
            session: Mutex::new(Session::default()),
            run_id,
            counter: Arc::new(AtomicU64::new(0)),
            // A key that cannot be generated leaves the interposer unable to seal states; a
            // fixed key would be worse (forgeable), so refuse to start instead (see `new`'s doc).
            states: Arc::new(
                crate::state::StateCodec::random()
                    .unwrap_or_else(|_| crate::state::StateCodec::with_key(&random_fallback())),
            ),
            task_upstream: Mutex::new(None),
            continuations: Arc::default(),
        }
    }

    /// The session's own way to the upstream for the calls its tasks run (HTTP).
    pub(crate) fn set_task_upstream(&self, lines: Lines) {
        *self.task_upstream.lock().unwrap_or_else(|p| p.into_inner()) = Some(lines);
    }

    /// The revision this session negotiated, if known.
    pub(crate) fn revision(&self) -> Option<String> {
        self.session().client.revision.clone()
    }

    /// Replace the configuration (policy, held_as, park budget); it applies to every decision
    /// from now on, including retries of calls held under the old one.
    pub fn set_config(&self, config: Config) {
        *self.config.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(config);
    }

    pub(crate) fn config(&self) -> Arc<Config> {
        self.config
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn session(&self) -> std::sync::MutexGuard<'_, Session> {
        self.session.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn tickets(&self) -> std::sync::MutexGuard<'_, HashMap<String, OpenTicket>> {
        self.tickets.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Relay until the client closes its side; then close the upstream's input, wait for its
    /// output to end, and close the audit record.
    pub async fn run<CR, CW, UR, UW>(
        self: Arc<Self>,
        client_in: CR,
        client_out: CW,
        upstream_in: UR,
        upstream_out: UW,
    ) -> std::io::Result<()>
    where
        CR: AsyncBufRead + Unpin + Send + 'static,
        CW: AsyncWrite + Unpin + Send + 'static,
        UR: AsyncBufRead + Unpin + Send + 'static,
        UW: AsyncWrite + Unpin + Send + 'static,
    {
        let (to_client, client_rx) = mpsc::unbounded_channel::<String>();
        let (to_upstream, upstream_rx) = mpsc::unbounded_channel::<String>();
        let client_writer = tokio::spawn(write_lines(client_rx, client_out));
        let upstream_writer = tokio::spawn(write_lines(upstream_rx, upstream_out));
        let from_upstream = {
            let me = self.clone();
            let to_client = to_client.clone();
            tokio::spawn(async move { me.upstream_loop(upstream_in, to_client).await })
        };
        let result = self
            .clone()
            .client_loop(client_in, to_client.clone(), to_upstream.clone())
            .await;
        // The client is gone: parked responses have nobody to go to (their approvals stay
        // pending at the service), and no held call is collected for it any more; closing the
        // upstream's input asks it to exit.
        self.session().drop_pending_answers();
        self.withdraw_on_disconnect().await;
        drop(to_upstream);
        let _ = upstream_writer.await;
        let _ = from_upstream.await;
        drop(to_client);
        let _ = client_writer.await;
        let in_flight: Vec<Forwarded> = self.session().forwarded.drain().map(|(_, f)| f).collect();
        for f in in_flight {
            self.record(
                &f.call_id,
                &Outcome {
                    outcome: f.outcome,
                    op_hash: &f.op_hash,
                    approval_ref: f.approval_ref.as_deref(),
                    upstream: Some("no_answer"),
                    ..Outcome::default()
                },
            );
        }
        self.audit.close();
        result
    }

    /// With `cancel_on_disconnect`, when the client has left (stdio: it closed its side; HTTP:
    /// it ended its session with DELETE), withdraw the approvals it left pending whose ticket is
    /// still open here (one decided or collected meanwhile is left alone). The service settles
    /// each DENIED `cancelled` and logs it; the ticket is closed, so a later identical call opens
    /// a new approval. Best effort: an unreachable service leaves the approval to expire.
    pub(crate) async fn withdraw_on_disconnect(&self) {
        if !self.config().cancel_on_disconnect {
            return;
        }
        let held = std::mem::take(&mut self.session().held);
        for (op_hash, approval_id) in held {
            let open = self
                .tickets()
                .get(&op_hash)
                .is_some_and(|t| t.approval_id == approval_id);
            if !open {
                continue;
            }
            self.gateway.withdraw(&approval_id).await;
            self.drop_ticket(&op_hash);
            tracing::info!(approval_id, "client disconnected: approval withdrawn");
        }
    }

    /// This session's client waits on `approval_id` for the call `op_hash`.
    fn held_here(&self, op_hash: &str, approval_id: &str) {
        self.session()
            .held
            .insert(op_hash.to_owned(), approval_id.to_owned());
    }

    async fn client_loop<R: AsyncBufRead + Unpin>(
        self: Arc<Self>,
        mut input: R,
        to_client: Lines,
        to_upstream: Lines,
    ) -> std::io::Result<()> {
        let mut frame = Vec::new();
        while let Some(read) = crate::stdio::read_frame(&mut input, &mut frame).await? {
            if let Err(too_large) = read {
                self.inadmissible(&[], &too_large, &to_client);
                continue;
            }
            if frame.iter().all(|b| matches!(b, b' ' | b'\t')) {
                // A blank line carries no message: nothing to answer, nothing to relay.
                continue;
            }
            match String::from_utf8(std::mem::take(&mut frame)) {
                Ok(line) => self.clone().client_frame(line, &to_client, &to_upstream),
                Err(e) => {
                    let why = Rejection::NotUtf8 {
                        at: e.utf8_error().valid_up_to(),
                    };
                    self.inadmissible(e.as_bytes(), &why, &to_client);
                }
            }
        }
        Ok(())
    }

    /// One frame from the client: admitted (docs/MCP.md, "What the interposer admits") and then
    /// judged, or answered with the error that says why not. Nothing unadmitted goes upstream.
    pub(crate) fn client_frame(
        self: Arc<Self>,
        line: String,
        to_client: &Lines,
        to_upstream: &Lines,
    ) {
        match admission::admit(&line) {
            Ok(message) => self.client_message(line, message, to_client, to_upstream),
            Err(why) => self.inadmissible(line.as_bytes(), &why, to_client),
        }
    }

    /// A client frame that failed admission: answered with its JSON-RPC error, under its id when
    /// one can be read (else `null`, as JSON-RPC answers a parse error), and never relayed.
    pub(crate) fn inadmissible(&self, frame: &[u8], why: &Rejection, to_client: &Lines) {
        if *why == Rejection::Batch {
            return self.batch_refused(frame, to_client);
        }
        let id = admission::recover_id(frame).unwrap_or(Value::Null);
        tracing::warn!(
            reason = why.reason(),
            error = %why,
            id = %id,
            "client frame not admitted: answered, not relayed"
        );
        let _ = to_client.send(inadmissible_error(&id, why).to_string());
    }

    /// A batch (JSON text admitted whole, but no single message): each request in it is
    /// answered with the refusal under its own id, in one array, as JSON-RPC answers a batch;
    /// a batch of notifications only gets no answer.
    fn batch_refused(&self, frame: &[u8], to_client: &Lines) {
        let items: Vec<Value> = serde_json::from_slice(frame).unwrap_or_default();
        tracing::warn!(
            items = items.len(),
            "batch not admitted: answered, not relayed"
        );
        let errors: Vec<Value> = items
            .iter()
            .filter_map(|i| i.get("id").filter(|_| i.get("method").is_some()))
            .map(|id| inadmissible_error(id, &Rejection::Batch))
            .collect();
        if !errors.is_empty() {
            let _ = to_client.send(Value::Array(errors).to_string());
        }
    }

    /// One admitted client message: a request is judged here (`tools/call`, the interposer's
    /// own tasks) or forwarded under an id of the interposer's; a notification or a response to
    /// the upstream's own request passes as it came (but a `tools/call` notification, never).
    pub(crate) fn client_message(
        self: Arc<Self>,
        line: String,
        m: Message,
        to_client: &Lines,
        to_upstream: &Lines,
    ) {
        let Some(id_at) = m.id.clone().filter(|_| m.kind == Kind::Request) else {
            return match m.method.as_deref() {
                Some("notifications/cancelled") => self.client_cancelled(line, to_upstream),
                Some("tools/call") => self.drop_call_without_id(&line),
                _ => {
                    let _ = to_upstream.send(line);
                }
            };
        };
        let Ok(id) = serde_json::from_str::<Value>(&line[id_at.clone()]) else {
            // Admission took it as a string or an integer: this does not happen.
            return self.inadmissible(
                line.as_bytes(),
                &Rejection::NotAMessage("bad id"),
                to_client,
            );
        };
        if self.session().in_flight(&id_key(&id)) {
            // Two requests under one id would make one of them get the other's answer.
            return self.reply_error(&id, INVALID_REQUEST, ID_IN_FLIGHT, to_client);
        }
        let params = m.params.clone().map(|p| &line[p]);
        match m.method.as_deref().unwrap_or_default() {
            "tools/call" => {
                // Allowed: decided and forwarded right here, in arrival order, with no task.
                if let Some(call) = params.and_then(CallParams::read)
                    && self.rule_now(&call.name) == Rule::Allow
                {
                    let tool = call.name.into_owned();
                    let arguments = call.arguments.map_or("{}", RawValue::get).to_owned();
                    return self.allow(line, id, id_at, tool, arguments, to_upstream);
                }
                self.call_arrived(line, id, to_client, to_upstream);
            }
            "tools/list" => {
                self.forward_request(line, &id, Some(id_at), Track::List, to_upstream);
            }
            "initialize" => {
                let params: Value = params
                    .and_then(|p| serde_json::from_str(p).ok())
                    .unwrap_or_default();
                {
                    let mut s = self.session();
                    s.client.revision = params
                        .get("protocolVersion")
                        .and_then(Value::as_str)
                        .map(str::to_owned);
                    s.client.url_elicitation = params
                        .pointer("/capabilities/elicitation/url")
                        .is_some_and(Value::is_object);
                }
                self.forward_request(line, &id, Some(id_at), Track::Initialize, to_upstream);
            }
            method @ ("tasks/get" | "tasks/result" | "tasks/cancel") => {
                let frame: Value = serde_json::from_str(&line).unwrap_or_default();
                if ours(&frame) {
                    let method = method.to_owned();
                    return self.task_request(&method, id, &frame, to_client, to_upstream);
                }
                self.forward_request(line, &id, Some(id_at), Track::Plain, to_upstream);
            }
            "tasks/list" if self.answers_task_list() => {
                let list = self.session().tasks.list();
                let frame = json!({"jsonrpc": "2.0", "id": id, "result": {"tasks": list}});
                let _ = to_client.send(frame.to_string());
            }
            _ => self.forward_request(line, &id, Some(id_at), Track::Plain, to_upstream),
        }
    }

    /// A held or refused `tools/call` (or one whose params do not read): registered before its
    /// task is spawned (see [`Pending`]), then decided by [`Self::tools_call`].
    fn call_arrived(
        self: Arc<Self>,
        line: String,
        id: Value,
        to_client: &Lines,
        to_upstream: &Lines,
    ) {
        let (cancel_tx, cancel_rx) = oneshot::channel();
        {
            let mut s = self.session();
            let frame: Value = serde_json::from_str(&line).unwrap_or_default();
            let modern = modern(&frame, &s.client);
            s.calls.insert(
                id_key(&id),
                Pending {
                    cancel: Some(cancel_tx),
                    cancelled: false,
                    cancel_line: None,
                    modern,
                },
            );
        }
        let to_client = to_client.clone();
        let to_upstream = to_upstream.clone();
        tokio::spawn(async move {
            self.tools_call(line, id, cancel_rx, &to_client, &to_upstream)
                .await;
        });
    }

    /// The client's `notifications/cancelled`. A call not forwarded yet is cancelled here: the
    /// upstream never saw it; only its answer is dropped (a parked retry stops parking, and its
    /// approval stays pending: a client timeout is not a withdrawal). A forwarded request's
    /// cancel goes upstream under the id the upstream knows it by. Any other cancel names no
    /// request in flight and goes nowhere.
    fn client_cancelled(&self, line: String, to_upstream: &Lines) {
        let frame: Value = serde_json::from_str(&line).unwrap_or_default();
        let target = frame
            .pointer("/params/requestId")
            .map(id_key)
            .unwrap_or_default();
        let mut s = self.session();
        if let Some(call) = s.calls.get_mut(&target) {
            call.cancelled = true;
            call.cancel_line = Some(line);
            if let Some(cancel) = call.cancel.take() {
                let _ = cancel.send(());
            }
            return;
        }
        match s.outbound_by_client.get(&target) {
            // Sent under the session lock, so it cannot overtake the request it cancels.
            Some(upstream) => match crate::splice::with_request_id(&line, upstream) {
                Some(line) => {
                    let _ = to_upstream.send(line);
                }
                None => tracing::debug!("a cancel whose requestId cannot be rewritten: dropped"),
            },
            None => tracing::debug!(request = target, "cancel of no request in flight: dropped"),
        }
    }

    /// The interposer's own JSON-RPC error for request `id`.
    fn reply_error(&self, id: &Value, code: i64, message: &str, to_client: &Lines) {
        let _ = to_client.send(rpc_error(id, code, message).to_string());
    }

    /// A `tools/call` sent as a notification (no `id`). MCP defines `tools/call` as a request
    /// only, and a notification cannot be answered, so it could neither be held nor refused to
    /// the client: relaying it would let a server that runs such calls execute a held tool with
    /// no approval. It is never forwarded; the log says it was refused, whatever the policy.
    fn drop_call_without_id(&self, line: &str) {
        let frame: Value = serde_json::from_str(line).unwrap_or_default();
        let tool = frame
            .pointer("/params/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let call_id = self.next_call_id();
        tracing::warn!(tool, "tools/call without an id refused: not relayed");
        self.audit.call(
            &call_id,
            &self.settings.agent_id,
            &self.settings.server_id,
            tool,
            "",
            Rule::Deny.as_str(),
        );
        self.record(
            &call_id,
            &Outcome {
                outcome: McpOutcome::Denied,
                op_hash: "",
                reason_code: Some("tools_call_without_id"),
                ..Outcome::default()
            },
        );
    }

    /// The rule for a call of `tool` under the policy in force and the last `tools/list`.
    fn rule_now(&self, tool: &str) -> Rule {
        let listed = self
            .session()
            .catalog
            .as_ref()
            .and_then(|c| c.get(tool).cloned());
        self.config().rule(tool, listed.as_ref())
    }

    fn next_call_id(&self) -> String {
        format!(
            "{}-{}",
            self.run_id,
            self.counter.fetch_add(1, Ordering::Relaxed) + 1
        )
    }

    /// An allowed call: its intent line, then the original line to the upstream.
    fn allow(
        &self,
        line: String,
        id: Value,
        id_at: Range<usize>,
        tool: String,
        arguments: String,
        to_upstream: &Lines,
    ) {
        let call_id = self.next_call_id();
        // The op_hash only goes into the audit log: without one, it is not computed.
        let op_hash = if self.audit.enabled() {
            let call = ToolCall::mcp(
                self.settings.agent_id.clone(),
                self.settings.server_id.clone(),
                tool.clone(),
                arguments,
            );
            self.gateway.fingerprint(&call).unwrap_or_default()
        } else {
            String::new()
        };
        self.audit.call(
            &call_id,
            &self.settings.agent_id,
            &self.settings.server_id,
            &tool,
            &op_hash,
            Rule::Allow.as_str(),
        );
        let track = Track::Call(Forwarded {
            call_id,
            op_hash,
            outcome: McpOutcome::Allowed,
            approval_ref: None,
            bound: None,
        });
        self.forward_request(line, &id, Some(id_at), track, to_upstream);
    }

    async fn upstream_loop<R: AsyncBufRead + Unpin>(
        self: Arc<Self>,
        input: R,
        to_client: Lines,
    ) -> std::io::Result<()> {
        let mut lines = input.lines();
        while let Some(line) = lines.next_line().await? {
            let line = self.upstream_frame(line);
            if let Some(line) = self.task_answer(line) {
                let _ = to_client.send(line);
            }
        }
        Ok(())
    }

    /// One frame from the upstream. An answer to a request the interposer forwarded goes back
    /// under the client's own id; on the way, the answers the interposer tracks are read (a
    /// `tools/list` result may get the description suffix). Everything else passes as it is.
    pub(crate) fn upstream_frame(&self, line: String) -> String {
        // Most frames are answers to relayed calls: read without building a tree, and only the
        // ids the interposer tracks matter.
        let Some(reply) = Reply::read(&line) else {
            return self.upstream_frame_general(line);
        };
        if reply.method.is_some() {
            return line;
        }
        let Some(raw) = reply.id else {
            return line;
        };
        let Some(id) = raw_id(raw) else {
            return line;
        };
        let key = id_key(&id);
        let id_at = crate::splice::range_of(&line, raw.get());
        let (client, forwarded) = {
            let mut s = self.session();
            if s.initialize_ids.contains(&key) || s.list_ids.contains(&key) {
                drop(s);
                return self.upstream_frame_general(line);
            }
            (s.answered(&key), s.forwarded.remove(&key))
        };
        if let Some(f) = forwarded {
            let upstream = match reply.status() {
                _ if self.asks_for_input(&f, &line) => INPUT_REQUIRED,
                Some(status) => status,
                None => serde_json::from_str::<Value>(&line).map_or("ok", |v| upstream_status(&v)),
            };
            self.record_answer(&f, upstream);
        }
        match (client, id_at) {
            (Some(client), Some(at)) => crate::splice::replace(&line, at, &client.raw),
            _ => line,
        }
    }

    /// An upstream frame read as a whole tree.
    fn upstream_frame_general(&self, line: String) -> String {
        let Ok(mut frame) = serde_json::from_str::<Value>(&line) else {
            return line;
        };
        if frame.get("method").is_some() {
            return line;
        }
        let Some(key) = frame.get("id").map(id_key) else {
            return line;
        };
        let mut s = self.session();
        let client = s.answered(&key);
        // The line itself with the client's id back, for an answer passed on unchanged.
        let unchanged = |line: String| match &client {
            Some(c) => crate::splice::with_id(&line, &c.raw).unwrap_or(line),
            None => line,
        };
        // A frame rewritten as a tree carries the client's id too.
        let rewritten = |mut frame: Value| {
            if let Some(c) = &client
                && let Ok(id) = serde_json::from_str::<Value>(&c.raw)
                && let Some(o) = frame.as_object_mut()
            {
                o.insert("id".into(), id);
            }
            frame.to_string()
        };
        if let Some(at) = s.initialize_ids.iter().position(|i| *i == key) {
            s.initialize_ids.swap_remove(at);
            if let Some(v) = frame
                .pointer("/result/protocolVersion")
                .and_then(Value::as_str)
            {
                s.client.revision = Some(v.to_owned());
            }
            s.upstream_lists_tasks = frame.pointer("/result/capabilities/tasks/list").is_some();
            drop(s);
            if self.session_takes_tasks()
                && let Some(result) = frame.get_mut("result")
            {
                tasks::add_capability(result);
                return rewritten(frame);
            }
            return unchanged(line);
        }
        if let Some(at) = s.list_ids.iter().position(|i| *i == key) {
            s.list_ids.swap_remove(at);
            drop(s);
            return match self.tools_listed(&mut frame) {
                true => rewritten(frame),
                false => unchanged(line),
            };
        }
        if let Some(f) = s.forwarded.remove(&key) {
            drop(s);
            let upstream = if self.asks_for_input(&f, &line) {
                INPUT_REQUIRED
            } else {
                upstream_status(&frame)
            };
            self.record_answer(&f, upstream);
        }
        unchanged(line)
    }

    /// The audit outcome of forwarded call `f`, now that the upstream answered it `upstream`.
    fn record_answer(&self, f: &Forwarded, upstream: &str) {
        self.record(
            &f.call_id,
            &Outcome {
                outcome: f.outcome,
                op_hash: &f.op_hash,
                approval_ref: f.approval_ref.as_deref(),
                upstream: Some(upstream),
                ..Outcome::default()
            },
        );
    }

    /// Remember a `tools/list` result; with a description suffix configured, append it to every
    /// tool that would be held (and offer tasks for them). Whether `frame` was changed.
    fn tools_listed(&self, frame: &mut Value) -> bool {
        self.list_read(frame).is_some()
    }

    /// [`Self::tools_listed`]; `Some` when the frame was changed.
    fn list_read(&self, frame: &mut Value) -> Option<()> {
        let tools = frame.pointer("/result/tools")?.as_array()?;
        let mut catalog = HashMap::new();
        for t in tools {
            if let Some(name) = t.get("name").and_then(Value::as_str) {
                let read_only_hint =
                    t.pointer("/annotations/readOnlyHint") == Some(&Value::Bool(true));
                catalog.insert(name.to_owned(), ListedTool { read_only_hint });
            }
        }
        // A paginated list is merged into what the earlier pages said.
        let paginated = frame.pointer("/result/nextCursor").is_some();
        {
            let mut s = self.session();
            match (&mut s.catalog, paginated) {
                (Some(existing), true) => existing.extend(catalog.clone()),
                _ => s.catalog = Some(catalog.clone()),
            }
        }
        let config = self.config();
        let suffix = config.hold_description_suffix.as_deref();
        let offer_tasks = self.session_takes_tasks();
        if suffix.is_none() && !offer_tasks {
            return None;
        }
        let tools = frame.pointer_mut("/result/tools")?.as_array_mut()?;
        for t in tools {
            let Some(name) = t.get("name").and_then(Value::as_str) else {
                continue;
            };
            if !matches!(config.rule(name, catalog.get(name)), Rule::Hold(_)) {
                continue;
            }
            let description =
                suffix.map(
                    |suffix| match t.get("description").and_then(Value::as_str) {
                        Some(d) if !d.is_empty() => format!("{d} {suffix}"),
                        _ => suffix.to_owned(),
                    },
                );
            let Some(o) = t.as_object_mut() else {
                continue;
            };
            if let Some(description) = description {
                o.insert("description".into(), description.into());
            }
            if offer_tasks {
                // The interposer can run a held call as a task, whatever the upstream can; a
                // tool whose upstream requires tasks keeps saying so (docs/MCP.md, "Tasks").
                let execution = o.entry("execution").or_insert_with(|| json!({}));
                if let Some(e) = execution.as_object_mut()
                    && e.get("taskSupport").and_then(Value::as_str) != Some("required")
                {
                    e.insert("taskSupport".into(), "optional".into());
                }
            }
        }
        Some(())
    }

    /// Decide one `tools/call`: relay, refuse, or hold. `cancel` fires if the client cancels it.
    async fn tools_call(
        self: &Arc<Self>,
        line: String,
        id: Value,
        cancel: oneshot::Receiver<()>,
        to_client: &Lines,
        to_upstream: &Lines,
    ) {
        let call_id = self.next_call_id();
        let parsed = serde_json::from_str::<CallFrame<'_>>(&line);
        let Ok(CallFrame { params }) = parsed else {
            let error = rpc_error(
                &id,
                -32602,
                "tools/call needs params.name and object arguments",
            );
            self.reply(&id, error, to_client);
            return;
        };
        let tool = params.name.into_owned();
        let arguments = params.arguments.map_or("{}", RawValue::get).to_owned();
        let rule = self.rule_now(&tool);
        let call = ToolCall::mcp(
            self.settings.agent_id.clone(),
            self.settings.server_id.clone(),
            tool.clone(),
            arguments,
        );
        let op_hash = self.gateway.fingerprint(&call);
        let op_hash_text = op_hash.as_deref().unwrap_or_default().to_owned();
        self.audit.call(
            &call_id,
            &self.settings.agent_id,
            &self.settings.server_id,
            &tool,
            &op_hash_text,
            rule.as_str(),
        );
        if rule != Rule::Allow {
            // A held or refused call's record is never left in the queue (see `record`).
            self.audit.flush();
        }
        match rule {
            Rule::Allow => {
                let f = Forwarded {
                    call_id,
                    op_hash: op_hash_text,
                    outcome: McpOutcome::Allowed,
                    approval_ref: None,
                    bound: None,
                };
                self.forward(line, &id, false, f, to_upstream);
            }
            Rule::Deny => {
                let ticket = Ticket::refused(op_hash_text.clone(), "policy_denied");
                self.refuse(&call_id, &id, &tool, ticket, to_client);
            }
            Rule::Hold(_) => match op_hash {
                Err(refusal) => {
                    // Arguments the profile cannot admit (floats, non-NFC text, too deep):
                    // no human can be shown them faithfully, so the call cannot be approved.
                    let ticket = Ticket::refused(String::new(), refusal.reason_code.as_str());
                    self.refuse(&call_id, &id, &tool, ticket, to_client);
                }
                Ok(op_hash) => {
                    let frame: Value = serde_json::from_str(&line).unwrap_or_default();
                    let mrtr = frame
                        .pointer("/params/_meta")
                        .and_then(|m| m.get("io.modelcontextprotocol/clientCapabilities"))
                        .and_then(|c| c.pointer("/elicitation/url"))
                        .is_some_and(Value::is_object);
                    let request_state = frame
                        .pointer("/params/requestState")
                        .and_then(Value::as_str)
                        .map(str::to_owned);
                    let task = if self.session_takes_tasks() {
                        tasks::requested(&frame)
                    } else {
                        None
                    };
                    let held = Held {
                        call_id,
                        id,
                        line,
                        call,
                        op_hash,
                        mrtr,
                        request_state,
                        task,
                        cancel,
                        own_id: false,
                    };
                    self.hold(held, to_client, to_upstream).await;
                }
            },
        }
    }

    /// Forward client request `id` to the upstream under an id of the interposer's own
    /// ([`Self::next_upstream_id`]), remembering whose it is: the upstream's answer goes back under
    /// the client's id, exactly as the client wrote it. `id_at` is where the id is in `line`, if
    /// known. Only the id's bytes change; every other byte of the line is the client's.
    fn forward_request(
        &self,
        line: String,
        id: &Value,
        id_at: Option<Range<usize>>,
        track: Track,
        to_upstream: &Lines,
    ) {
        let Some(id_at) = id_at.or_else(|| crate::splice::member(&line, "id")) else {
            // An admitted request has its id: this does not happen.
            tracing::error!("a request without a readable id was not forwarded");
            return;
        };
        let upstream = self.next_upstream_id();
        let client = ClientId {
            key: id_key(id),
            raw: line[id_at.clone()].to_owned(),
        };
        let line = crate::splice::replace(&line, id_at, &upstream);
        let mut s = self.session();
        let call = s.calls.remove(&client.key);
        s.outbound_by_client
            .insert(client.key.clone(), upstream.clone());
        s.outbound.insert(upstream.clone(), client);
        match track {
            Track::Plain => {}
            Track::Initialize => s.initialize_ids.push(upstream.clone()),
            Track::List => s.list_ids.push(upstream.clone()),
            Track::Call(f) => {
                s.forwarded.insert(upstream.clone(), f);
            }
        }
        // Under the lock: a cancel read from now on is forwarded after the call, never before.
        let _ = to_upstream.send(line);
        if let Some(cancel) = call.and_then(|c| c.cancel_line)
            && let Some(cancel) = crate::splice::with_request_id(&cancel, &upstream)
        {
            let _ = to_upstream.send(cancel);
        }
    }

    /// Forward a `tools/call` the interposer decided to run: the client's under a new id of the
    /// interposer's, or a task's, whose line already carries the interposer's own id.
    fn forward(&self, line: String, id: &Value, own_id: bool, f: Forwarded, to_upstream: &Lines) {
        if !own_id {
            return self.forward_request(line, id, None, Track::Call(f), to_upstream);
        }
        let mut s = self.session();
        s.forwarded.insert(id_key(id), f);
        let _ = to_upstream.send(line);
    }

    /// A fresh id for a request the interposer forwards: never one a client chose, never one
    /// given before in this process. Its JSON text, which is also its key.
    fn next_upstream_id(&self) -> String {
        format!(
            "\"{UPSTREAM_ID_PREFIX}{}\"",
            self.counter.fetch_add(1, Ordering::Relaxed) + 1
        )
    }

    /// Send the interposer's own answer to call `id`, unless the client cancelled the call (it
    /// wants no answer: the spec says a cancelled request gets none). On 2026-07-28 every result
    /// carries the `resultType` that revision requires.
    /// Whether the answer went out.
    fn reply(&self, id: &Value, mut frame: Value, to_client: &Lines) -> bool {
        let call = self.session().calls.remove(&id_key(id));
        if let Some(call) = call {
            if call.cancelled {
                tracing::debug!(id = %id, "answer dropped: the client cancelled the call");
                return false;
            }
            if call.modern {
                answer::mark_complete(&mut frame);
            }
        }
        to_client.send(frame.to_string()).is_ok()
    }

    /// Forget call `id` without answering it (the client cancelled it).
    fn dropped(&self, id: &Value) {
        self.session().calls.remove(&id_key(id));
    }

    fn refuse(&self, call_id: &str, id: &Value, tool: &str, ticket: Ticket, to_client: &Lines) {
        self.record(
            call_id,
            &Outcome {
                outcome: McpOutcome::Denied,
                op_hash: &ticket.op_hash,
                approval_id: ticket.approval_id.as_deref(),
                reason_code: ticket.denied.as_deref(),
                ..Outcome::default()
            },
        );
        self.answer(id, tool, &ticket, Moment::Denied, to_client);
    }

    fn answer(&self, id: &Value, tool: &str, ticket: &Ticket, moment: Moment, to_client: &Lines) {
        let client = self.session().client.clone();
        let frame = answer::respond(id, tool, ticket, moment, &client, self.config().held_as);
        self.reply(id, frame, to_client);
    }

    fn approve_url(&self, approval_id: &str) -> String {
        format!(
            "{}/approve/{approval_id}",
            self.settings.approver_url.trim_end_matches('/')
        )
    }

    fn ticket(&self, h: &Held, approval_id: &str, expires_at: Option<&str>) -> Ticket {
        Ticket {
            approval_id: Some(approval_id.to_owned()),
            op_hash: h.op_hash.clone(),
            expires_at: expires_at.map(str::to_owned),
            approve_url: Some(self.approve_url(approval_id)),
            denied: None,
        }
    }

    /// A held call: a new approval on first arrival, else park, release or refuse.
    async fn hold(self: &Arc<Self>, mut h: Held, to_client: &Lines, to_upstream: &Lines) {
        if let Some(ttl) = h.task {
            return self.start_task(h, ttl, to_client, to_upstream).await;
        }
        let open = match &h.request_state {
            // A multi round-trip retry: the state names the approval, once it is proven ours
            // and for this very call.
            Some(text) => {
                let now = OffsetDateTime::now_utc().unix_timestamp();
                match self.states.open(text, &h.op_hash, now) {
                    Ok(state) => Some(OpenTicket {
                        approval_id: state.approval_id,
                        expires_at: None,
                    }),
                    Err(_) if self.continuation_for(text).is_some() => {
                        return self.continue_call(h, to_client, to_upstream);
                    }
                    Err(e) => {
                        let ticket = Ticket::refused(h.op_hash.clone(), e.reason_code());
                        tracing::info!(error = %e, "requestState refused");
                        return self.refuse(
                            &h.call_id,
                            &h.id,
                            &h.call.tool_name,
                            ticket,
                            to_client,
                        );
                    }
                }
            }
            None => self.tickets().get(&h.op_hash).cloned(),
        };
        let Some(open) = open else {
            return self.first_arrival(h, to_client, to_upstream).await;
        };
        // This session's client is waiting on it too (a ticket from an earlier session or
        // process): `cancel_on_disconnect` covers it.
        self.held_here(&h.op_hash, &open.approval_id);
        // A retry: park only this response, for at most the budget. A cancel that came before
        // this point is already in `h.cancel` and ends the park at once.
        let deadline = tokio::time::Instant::now() + self.config().park();
        let mut wait = Duration::ZERO;
        let settled = loop {
            let poll = self.gateway.poll(&open.approval_id, wait);
            let answer = tokio::select! {
                a = poll => a,
                // Fired, or its sender gone (the client left): either way nobody awaits this.
                _ = &mut h.cancel => {
                    self.dropped(&h.id);
                    self.record(&h.call_id, &Outcome {
                        outcome: McpOutcome::PendingApproval,
                        op_hash: &h.op_hash,
                        approval_id: Some(&open.approval_id),
                        expires_at: open.expires_at.as_deref(),
                        reason_code: Some("client_cancelled"),
                        ..Outcome::default()
                    });
                    return;
                }
            };
            match answer {
                Ok(r) if r.status == ApprovalStatus::Pending => {
                    let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                    if left.is_zero() {
                        break None;
                    }
                    // Whole seconds (the service's `wait`), at least one, never past the budget.
                    wait = Duration::from_secs(left.as_secs().clamp(1, 20));
                    if left < Duration::from_secs(1) {
                        tokio::time::sleep(left).await;
                        break None;
                    }
                }
                Ok(r) => break Some(Ok(r)),
                Err(refusal) => break Some(Err(refusal)),
            }
        };
        match settled {
            None => {
                let ticket = self.ticket(&h, &open.approval_id, open.expires_at.as_deref());
                self.record(
                    &h.call_id,
                    &Outcome {
                        outcome: McpOutcome::PendingApproval,
                        op_hash: &h.op_hash,
                        approval_id: Some(&open.approval_id),
                        expires_at: open.expires_at.as_deref(),
                        ..Outcome::default()
                    },
                );
                self.answer(
                    &h.id,
                    &h.call.tool_name,
                    &ticket,
                    Moment::StillPending,
                    to_client,
                );
            }
            Some(Ok(result)) => {
                self.settled(h, &open.approval_id, result, to_client, to_upstream)
                    .await;
            }
            Some(Err(refusal)) => {
                self.drop_ticket(&h.op_hash);
                self.refuse_held(&h, &open.approval_id, &refusal, to_client);
            }
        }
    }

    /// Ask the service for an approval of held call `h`: its id and first result, or `None`
    /// once the client was told why there is none.
    async fn open_approval(&self, h: &Held, to_client: &Lines) -> Option<(String, ApprovalResult)> {
        let result = match self.gateway.submit(&h.call).await {
            Ok(r) => r,
            Err(refusal) => {
                let id = refusal.approval_id.clone().unwrap_or_default();
                self.refuse_held(h, &id, &refusal, to_client);
                return None;
            }
        };
        let Some(approval_id) = result.approval_id.clone() else {
            let ticket = Ticket::refused(h.op_hash.clone(), ReasonCode::ResultMalformed.as_str());
            self.refuse(&h.call_id, &h.id, &h.call.tool_name, ticket, to_client);
            return None;
        };
        Some((approval_id, result))
    }

    async fn first_arrival(&self, h: Held, to_client: &Lines, to_upstream: &Lines) {
        let Some((approval_id, result)) = self.open_approval(&h, to_client).await else {
            return;
        };
        if result.status != ApprovalStatus::Pending {
            // Decided at once (a tool the service does not require approval for, or no
            // eligible approver): the same checks as a decided retry.
            return self
                .settled(h, &approval_id, result, to_client, to_upstream)
                .await;
        }
        self.tickets().insert(
            h.op_hash.clone(),
            OpenTicket {
                approval_id: approval_id.clone(),
                expires_at: result.expires_at.clone(),
            },
        );
        self.held_here(&h.op_hash, &approval_id);
        self.record(
            &h.call_id,
            &Outcome {
                outcome: McpOutcome::PendingApproval,
                op_hash: &h.op_hash,
                approval_id: Some(&approval_id),
                expires_at: result.expires_at.as_deref(),
                ..Outcome::default()
            },
        );
        let ticket = self.ticket(&h, &approval_id, result.expires_at.as_deref());
        if h.mrtr {
            let state = self.states.seal(&crate::state::RequestState {
                approval_id: approval_id.clone(),
                op_hash: h.op_hash.clone(),
                exp: state_expiry(result.expires_at.as_deref()),
            });
            let frame = answer::input_required(&h.id, &h.call.tool_name, &ticket, &state);
            self.reply(&h.id, frame, to_client);
            return;
        }
        self.answer(
            &h.id,
            &h.call.tool_name,
            &ticket,
            Moment::FirstArrival,
            to_client,
        );
    }

    /// A settled approval for this exact call: policy now, offline verification, then the
    /// single-use grant, then the one forward.
    async fn settled(
        &self,
        mut h: Held,
        approval_id: &str,
        result: ApprovalResult,
        to_client: &Lines,
        to_upstream: &Lines,
    ) {
        // Whatever happens next, this ticket is used up: an identical call after this one is a
        // new approval.
        self.drop_ticket(&h.op_hash);
        // A grant never unblocks a call the current policy refuses.
        // The policy in force now (`set_config`), not the one the interposer started with.
        if self.rule_now(&h.call.tool_name) == Rule::Deny {
            let mut ticket = self.ticket(&h, approval_id, result.expires_at.as_deref());
            ticket.denied = Some("policy_denied".into());
            return self.refuse(&h.call_id, &h.id, &h.call.tool_name, ticket, to_client);
        }
        if result.status == ApprovalStatus::Denied {
            let reason = result
                .reason_code
                .clone()
                .unwrap_or_else(|| ReasonCode::ApproverRefused.as_str().to_owned());
            let mut ticket = self.ticket(&h, approval_id, result.expires_at.as_deref());
            ticket.denied = Some(reason);
            return self.refuse(&h.call_id, &h.id, &h.call.tool_name, ticket, to_client);
        }
        // Verify before collecting: forged or mismatched evidence must not burn the grant. Who
        // may approve this tool is the interposer's own rule in force now, not the service's.
        let expires_at = result.expires_at.clone();
        let approvers = self.config().approver_policy(&h.call.tool_name);
        let approval = match self
            .gateway
            .verify_result_under(&h.call, result, &approvers)
        {
            Ok(a) => a,
            Err(refusal) => return self.refuse_held(&h, approval_id, &refusal, to_client),
        };
        // What goes upstream, settled before the grant is spent: the original line without the
        // interposer's own multi round-trip members, `arguments` still the hashed bytes.
        let Some(line) = upstream_line(&h.line, h.request_state.is_some(), &h.call.params_json)
        else {
            let mut ticket = self.ticket(&h, approval_id, None);
            ticket.denied = Some(ReasonCode::BindingMismatch.as_str().into());
            return self.refuse(&h.call_id, &h.id, &h.call.tool_name, ticket, to_client);
        };
        // A client that cancelled the call does not get it run behind its back: the grant stays
        // uncollected and the ticket open, for its next identical call.
        if !matches!(
            h.cancel.try_recv(),
            Err(oneshot::error::TryRecvError::Empty)
        ) {
            self.dropped(&h.id);
            self.tickets().insert(
                h.op_hash.clone(),
                OpenTicket {
                    approval_id: approval_id.to_owned(),
                    expires_at: expires_at.clone(),
                },
            );
            self.held_here(&h.op_hash, approval_id);
            self.record(
                &h.call_id,
                &Outcome {
                    outcome: McpOutcome::PendingApproval,
                    op_hash: &h.op_hash,
                    approval_id: Some(approval_id),
                    expires_at: expires_at.as_deref(),
                    reason_code: Some("client_cancelled"),
                    ..Outcome::default()
                },
            );
            return;
        }
        if let Err(refusal) = self.gateway.collect_grant(&approval, &h.call).await {
            return self.refuse_held(&h, approval_id, &refusal, to_client);
        }
        let bound = Bound::of(&h.call);
        let Held {
            call_id,
            id,
            op_hash,
            own_id,
            ..
        } = h;
        let f = Forwarded {
            call_id,
            op_hash,
            outcome: McpOutcome::Executed,
            approval_ref: Some(approval_id.to_owned()),
            bound: Some(bound),
        };
        self.forward(line, &id, own_id, f, to_upstream);
    }

    /// Write an outcome line. Only the outcome of an allowed call may wait in the writer's
    /// queue (a crash loses at most the record of calls that needed no approval); every other
    /// outcome is written before the client, the service or a restarted interposer can act on
    /// it: the open tickets a restart finds are read back from these lines.
    fn record(&self, call_id: &str, o: &Outcome<'_>) {
        self.audit.outcome(call_id, o);
        if o.outcome != McpOutcome::Allowed {
            self.audit.flush();
        }
    }

    /// The ticket of `op_hash` is closed (executed, refused, withdrawn).
    fn drop_ticket(&self, op_hash: &str) {
        self.tickets().remove(op_hash);
        self.session().held.remove(op_hash);
    }

    fn refuse_held(&self, h: &Held, approval_id: &str, refusal: &Refusal, to_client: &Lines) {
        tracing::info!(
            approval_id,
            reason = refusal.reason_code.as_str(),
            detail = %refusal.detail,
            "held call refused"
        );
        let mut ticket = self.ticket(h, approval_id, None);
        if approval_id.is_empty() {
            ticket.approval_id = None;
            ticket.approve_url = None;
        }
        ticket.denied = Some(refusal.reason_code.as_str().to_owned());
        self.refuse(&h.call_id, &h.id, &h.call.tool_name, ticket, to_client);
    }
}

/// What the HTTP transport needs beyond the stdio relay: sessions sharing one interposer.
impl Interposer {
    /// Another session of this interposer for `agent_id` (HTTP mode: one per upstream session,
    /// the agent taken from its bearer credential): its own view of the client and the catalog,
    /// the same policy, service connection, audit log, tickets and `requestState` key.
    pub fn session_for(&self, agent_id: String) -> Self {
        Self {
            settings: Settings {
                agent_id,
                ..self.settings.clone()
            },
            config: self.config.clone(),
            gateway: self.gateway.clone(),
            audit: self.audit.clone(),
            tickets: self.tickets.clone(),
            session: Mutex::new(Session::default()),
            run_id: self.run_id.clone(),
            counter: self.counter.clone(),
            states: self.states.clone(),
            task_upstream: Mutex::new(None),
            continuations: self.continuations.clone(),
        }
    }

    /// The agent this session acts for.
    pub fn agent_id(&self) -> &str {
        &self.settings.agent_id
    }

    /// A forwarded request whose answer will never come (the upstream could not be reached, or
    /// the session ended): its audit outcome says so.
    /// `id` is the client's: the id the request went upstream under is looked up.
    pub(crate) fn no_answer(&self, id: &Value) {
        let upstream = {
            let mut s = self.session();
            let Some(upstream) = s.outbound_by_client.get(&id_key(id)).cloned() else {
                return;
            };
            s.answered(&upstream);
            upstream
        };
        self.no_answer_upstream(&upstream);
    }

    /// [`Self::no_answer`] for a request sent under an id of the interposer's own (a task's call).
    pub(crate) fn no_answer_own(&self, id: &Value) {
        self.no_answer_upstream(&id_key(id));
    }

    fn no_answer_upstream(&self, key: &str) {
        let forwarded = {
            let mut s = self.session();
            s.answered(key);
            s.initialize_ids.retain(|i| i != key);
            s.list_ids.retain(|i| i != key);
            s.forwarded.remove(key)
        };
        if let Some(f) = forwarded {
            self.record_answer(&f, "no_answer");
        }
    }

    /// The session is over: parked responses are dropped (their approvals stay pending) and
    /// forwarded calls still unanswered are audited `no_answer`.
    pub(crate) fn end_session(&self) {
        let keys: Vec<String> = {
            let mut s = self.session();
            s.drop_pending_answers();
            s.forwarded.keys().cloned().collect()
        };
        for key in keys {
            self.no_answer_upstream(&key);
        }
    }

    /// The clean end of the interposer: the audit log's close line.
    pub(crate) fn close_audit(&self) {
        self.audit.close();
    }
}

/// Tasks (2025-11-25): a held call the client sent with `params.task` gets a task at
/// once; the interposer awaits the verdict and runs the call once, with the same checks as a
/// retry (policy now, offline verification, grant, one forward).
impl Interposer {
    /// Tasks are offered at all.
    fn offers_tasks(&self) -> bool {
        self.config().tasks
    }

    /// This session's client negotiated 2025-11-25, the revision whose tasks the interposer
    /// speaks (2026-07-28's tasks extension is another protocol: not offered).
    fn session_takes_tasks(&self) -> bool {
        self.offers_tasks()
            && self.session().client.revision.as_deref() == Some(answer::REVISION_2025_11_25)
    }

    /// `tasks/list` is answered here (the interposer's tasks) unless the upstream lists its own.
    fn answers_task_list(&self) -> bool {
        self.session_takes_tasks() && !self.session().upstream_lists_tasks
    }

    fn new_id(&self, prefix: &str) -> String {
        format!(
            "{prefix}{}-{}",
            self.run_id,
            self.counter.fetch_add(1, Ordering::Relaxed) + 1
        )
    }

    /// First arrival (or a repeat) of a held call sent as a task: the approval (this call's open
    /// ticket, or a new one), the task answered at once, and the driver that runs it once.
    async fn start_task(
        self: &Arc<Self>,
        mut h: Held,
        ttl: Option<u64>,
        to_client: &Lines,
        to_upstream: &Lines,
    ) {
        // What the task will forward, settled first: a call that cannot be sent as hashed opens
        // no approval (and its record gets one outcome).
        let upstream_id = self.new_id(tasks::UPSTREAM_ID_PREFIX);
        let Some(line) = tasks::upstream_call(&h.line, &upstream_id, &h.call.params_json) else {
            let ticket = Ticket::refused(h.op_hash.clone(), ReasonCode::BindingMismatch.as_str());
            return self.refuse(&h.call_id, &h.id, &h.call.tool_name, ticket, to_client);
        };
        let open = self.tickets().get(&h.op_hash).cloned();
        let (approval_id, expires_at) = match open {
            Some(t) => (t.approval_id, t.expires_at),
            None => {
                let Some((approval_id, result)) = self.open_approval(&h, to_client).await else {
                    return;
                };
                if result.status == ApprovalStatus::Pending {
                    self.tickets().insert(
                        h.op_hash.clone(),
                        OpenTicket {
                            approval_id: approval_id.clone(),
                            expires_at: result.expires_at.clone(),
                        },
                    );
                }
                (approval_id, result.expires_at)
            }
        };
        self.held_here(&h.op_hash, &approval_id);
        self.record(
            &h.call_id,
            &Outcome {
                outcome: McpOutcome::PendingApproval,
                op_hash: &h.op_hash,
                approval_id: Some(&approval_id),
                expires_at: expires_at.as_deref(),
                ..Outcome::default()
            },
        );
        let ticket = self.ticket(&h, &approval_id, expires_at.as_deref());
        let message = answer::task_message(&h.call.tool_name, &ticket);
        let left = expires_at
            .as_deref()
            .and_then(|t| OffsetDateTime::parse(t, &Rfc3339).ok())
            .map(|t| (t - OffsetDateTime::now_utc()).unsigned_abs());
        let (stop, stopped) = oneshot::channel();
        let task = Task::new(
            approval_id.clone(),
            h.op_hash.clone(),
            message.clone(),
            tasks::ttl_ms(ttl, left),
            now_rfc3339(),
            stop,
        );
        let task_id = self.new_id(tasks::TASK_ID_PREFIX);
        let view = task.view(&task_id);
        self.session().tasks.insert(task_id.clone(), task);
        let frame = json!({
            "jsonrpc": "2.0",
            "id": h.id,
            "result": {
                "task": view,
                "_meta": {
                    answer::APPROVAL_KEY: ticket.block(),
                    "io.modelcontextprotocol/model-immediate-response": message,
                },
            },
        });
        // From here on `h` is the call the driver forwards: its own id, no `task`, and the
        // task's stop signal in place of the client's request (answered now).
        let client_id = std::mem::replace(&mut h.id, Value::from(upstream_id));
        h.line = line;
        h.own_id = true;
        h.cancel = stopped;
        if !self.reply(&client_id, frame, to_client) {
            // The client cancelled its call before it learnt of the task: nobody would ever
            // read it, so it is not started. The approval stays pending, as for any cancel.
            self.session().tasks.remove(&task_id);
            return;
        }
        let me = self.clone();
        let to_upstream = self
            .task_upstream
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .unwrap_or_else(|| to_upstream.clone());
        tokio::spawn(async move { me.drive_task(task_id, h, approval_id, to_upstream).await });
    }

    /// Wait for the verdict on `approval_id`, then settle task `task_id` as a retry would be
    /// settled: refused (the task fails) or forwarded once (its answer ends the task).
    async fn drive_task(
        self: Arc<Self>,
        task_id: String,
        mut h: Held,
        approval_id: String,
        to_upstream: Lines,
    ) {
        let verdict = loop {
            let asked = tokio::time::Instant::now();
            let poll = self.gateway.poll(&approval_id, TASK_POLL_WAIT);
            tokio::select! {
                answer = poll => match answer {
                    Ok(r) if r.status == ApprovalStatus::Pending => {
                        // A service that answers a long-poll at once must not make this spin.
                        tokio::time::sleep_until(asked + Duration::from_secs(1)).await;
                    }
                    Ok(r) => break Ok(r),
                    Err(refusal) => break Err(refusal),
                },
                // `tasks/cancel` (which withdrew the approval), or the session ended.
                _ = &mut h.cancel => return,
            }
        };
        // The execution is a call of its own in the audit log, as an approved retry is.
        h.call_id = self.next_call_id();
        self.audit.call(
            &h.call_id,
            &self.settings.agent_id,
            &self.settings.server_id,
            &h.call.tool_name,
            &h.op_hash,
            "hold",
        );
        self.audit.flush();
        let upstream_key = id_key(&h.id);
        {
            let mut s = self.session();
            if let Some(t) = s.tasks.get_mut(&task_id) {
                t.update("Approved: running the call.".into(), now_rfc3339());
            }
            // Before the forward: the upstream may answer at once.
            s.tasks.running(&task_id, upstream_key.clone());
        }
        let (answers, mut answered) = mpsc::unbounded_channel();
        match verdict {
            Ok(result) => {
                self.settled(h, &approval_id, result, &answers, &to_upstream)
                    .await;
            }
            Err(refusal) => self.refuse_held(&h, &approval_id, &refusal, &answers),
        }
        let mut s = self.session();
        if !s.forwarded.contains_key(&upstream_key) {
            // Nothing runs upstream for it (refused, or cancelled on the way).
            s.tasks.answered(&upstream_key);
        }
        // An answer instead of a forward is a refusal: the task failed, and `tasks/result`
        // gives the refusal the call would have got.
        if let Ok(frame) = answered.try_recv()
            && let Ok(frame) = serde_json::from_str::<Value>(&frame)
            && let Some(t) = s.tasks.get_mut(&task_id)
        {
            let message = summary(&frame).unwrap_or("Not run: refused.").to_owned();
            t.end(
                Status::Failed,
                message,
                Payload::of_response(&frame),
                now_rfc3339(),
            );
        }
    }

    /// An upstream answer to a call forwarded for a task ends the task and goes no further (the
    /// client never sent that request); every other frame is the client's.
    pub(crate) fn task_answer(&self, line: String) -> Option<String> {
        let mut s = self.session();
        if s.tasks.never_forwarded() || !line.contains(tasks::UPSTREAM_ID_PREFIX) {
            return Some(line);
        }
        let Ok(frame) = serde_json::from_str::<Value>(&line) else {
            return Some(line);
        };
        let Some(key) = frame
            .get("id")
            .filter(|_| frame.get("method").is_none())
            .map(id_key)
        else {
            return Some(line);
        };
        if let Some((_, task)) = s.tasks.answered(&key) {
            let (status, message) = if frame.get("error").is_some() {
                (
                    Status::Failed,
                    "The approved call ran; the upstream answered an error.",
                )
            } else {
                (Status::Completed, "The approved call ran.")
            };
            task.end(
                status,
                message.into(),
                Payload::of_response(&frame),
                now_rfc3339(),
            );
            return None;
        }
        // Ours (a task that expired while its call ran): never the client's to see.
        (!key.contains(tasks::UPSTREAM_ID_PREFIX)).then_some(line)
    }

    /// The call forwarded as `id` for a task got no JSON-RPC answer (the upstream could not be
    /// reached, or answered something else): its task fails rather than wait for nothing.
    pub(crate) fn task_unanswered(&self, id: &Value) {
        let mut s = self.session();
        if let Some((_, task)) = s.tasks.answered(&id_key(id)) {
            let error =
                json!({"code": -32603, "message": "the upstream MCP server gave no answer"});
            task.end(
                Status::Failed,
                "The approved call was sent, but the upstream gave no answer.".into(),
                Payload::Error(error),
                now_rfc3339(),
            );
        }
    }

    /// `tasks/get`, `tasks/result` or `tasks/cancel` about a task id the interposer issued.
    fn task_request(
        self: Arc<Self>,
        method: &str,
        id: Value,
        frame: &Value,
        to_client: &Lines,
        to_upstream: &Lines,
    ) {
        let task_id = frame
            .pointer("/params/taskId")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let mut s = self.session();
        let Some(task) = s.tasks.get_mut(&task_id) else {
            drop(s);
            let _ = to_client.send(unknown_task(&id).to_string());
            return;
        };
        match method {
            "tasks/get" => {
                let frame = json!({"jsonrpc": "2.0", "id": id, "result": task.view(&task_id)});
                drop(s);
                let _ = to_client.send(frame.to_string());
            }
            "tasks/result" => {
                let mut ended = task.ended();
                // Registered like a parked call, so the client's cancel drops the answer.
                let (cancel, mut cancelled) = oneshot::channel();
                s.calls.insert(
                    id_key(&id),
                    Pending {
                        cancel: Some(cancel),
                        cancelled: false,
                        cancel_line: None,
                        modern: false,
                    },
                );
                drop(s);
                let to_client = to_client.clone();
                tokio::spawn(async move {
                    tokio::select! {
                        _ = ended.wait_for(|e| *e) => {}
                        _ = &mut cancelled => return self.dropped(&id),
                    }
                    let frame = self.task_payload(&id, &task_id);
                    self.reply(&id, frame, &to_client);
                });
            }
            _ => {
                if task.status.is_terminal() {
                    let message = format!("the task is already {}", task.status.as_str());
                    drop(s);
                    let _ = to_client.send(rpc_error(&id, -32602, &message).to_string());
                    return;
                }
                let running = task.upstream_id.clone();
                let (approval_id, op_hash) = (task.approval_id.clone(), task.op_hash.clone());
                if let Some(stop) = task.stop.take() {
                    let _ = stop.send(());
                }
                let message = if running.is_some() {
                    "Cancelled by the client while the approved call ran upstream."
                } else {
                    "Cancelled by the client: the approval was withdrawn."
                };
                let not_run = json!({
                    "content": [{"type": "text", "text": message}],
                    "isError": true,
                });
                task.end(
                    Status::Cancelled,
                    message.into(),
                    Payload::Result(not_run),
                    now_rfc3339(),
                );
                let answer = json!({"jsonrpc": "2.0", "id": id, "result": task.view(&task_id)});
                drop(s);
                if let Some(running) = running {
                    // Too late to withdraw: ask the upstream to stop, as the client would have.
                    let request_id = serde_json::from_str::<Value>(&running).unwrap_or_default();
                    let note = json!({
                        "jsonrpc": "2.0",
                        "method": "notifications/cancelled",
                        "params": {"requestId": request_id, "reason": "the client cancelled the task"},
                    });
                    let _ = to_upstream.send(note.to_string());
                    let _ = to_client.send(answer.to_string());
                    return;
                }
                // An explicit cancel is a withdrawal (unlike a client's timeout): the service
                // settles the approval DENIED `cancelled`; answered once that is done.
                let to_client = to_client.clone();
                tokio::spawn(async move {
                    self.gateway.withdraw(&approval_id).await;
                    let open = self
                        .tickets()
                        .get(&op_hash)
                        .is_some_and(|t| t.approval_id == approval_id);
                    if open {
                        self.drop_ticket(&op_hash);
                    }
                    tracing::info!(approval_id, "task cancelled: approval withdrawn");
                    let _ = to_client.send(answer.to_string());
                });
            }
        }
    }

    /// What `tasks/result` answers for an ended task: the `tools/call` answer, tagged with the
    /// task it belongs to.
    fn task_payload(&self, id: &Value, task_id: &str) -> Value {
        let payload = self
            .session()
            .tasks
            .get_mut(task_id)
            .and_then(|t| t.payload.clone());
        match payload {
            Some(Payload::Result(mut result)) => {
                if let Some(r) = result.as_object_mut() {
                    let meta = r.entry("_meta").or_insert_with(|| json!({}));
                    if let Some(meta) = meta.as_object_mut() {
                        meta.insert(
                            "io.modelcontextprotocol/related-task".into(),
                            json!({"taskId": task_id}),
                        );
                    }
                }
                json!({"jsonrpc": "2.0", "id": id, "result": result})
            }
            Some(Payload::Error(error)) => json!({"jsonrpc": "2.0", "id": id, "error": error}),
            None => unknown_task(id),
        }
    }
}

/// How long one poll of a task's approval waits at the service for a verdict.
const TASK_POLL_WAIT: Duration = Duration::from_secs(20);

/// A task id the interposer issued but no longer knows.
fn unknown_task(id: &Value) -> Value {
    rpc_error(
        id,
        -32602,
        "unknown task: it expired, or the interposer restarted since; call the tool again \
         (a pending approval is found again by the call's arguments)",
    )
}

/// The text a refusal or tool answer leads with (its first text content, or the error message).
fn summary(frame: &Value) -> Option<&str> {
    frame
        .pointer("/result/content/0/text")
        .or_else(|| frame.pointer("/error/message"))
        .and_then(Value::as_str)
}

/// Nested multi round trips (2026-07-28): the upstream of an approved call may itself answer
/// `input_required` with a `requestState` of its own. The client then calls again with that state
/// and its answers; that call is the same approved call going on, not a new one, so it passes
/// once, without a new approval.
impl Interposer {
    /// Whether the upstream's answer to forwarded call `f` asks for input (a held call's only:
    /// an allowed call needs no pass); if so its `requestState` becomes the pass for the answer.
    fn asks_for_input(&self, f: &Forwarded, line: &str) -> bool {
        let (Some(approval_id), Some(bound)) = (&f.approval_ref, &f.bound) else {
            return false;
        };
        let Ok(frame) = serde_json::from_str::<Value>(line) else {
            return false;
        };
        let Some(state) = frame
            .pointer("/result/requestState")
            .and_then(Value::as_str)
            .filter(|_| frame.pointer("/result/resultType") == Some(&Value::from(INPUT_REQUIRED)))
        else {
            return false;
        };
        self.continuations().insert(
            state.to_owned(),
            Continuation {
                op_hash: f.op_hash.clone(),
                bound: bound.clone(),
                approval_id: approval_id.clone(),
                at: std::time::Instant::now(),
            },
        );
        true
    }

    fn continuations(&self) -> std::sync::MutexGuard<'_, Continuations> {
        self.continuations.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The pass the upstream's `state` is, if it is one.
    fn continuation_for(&self, state: &str) -> Option<Continuation> {
        self.continuations().get(state)
    }

    /// A held call carrying the upstream's own `requestState` from an approved call: forwarded
    /// as it came (nothing in it is the interposer's), once, if it is that very call and the
    /// policy still holds rather than refuses it. Audited `continued` with the approval it
    /// continues; the pass is spent either way.
    fn continue_call(&self, h: Held, to_client: &Lines, to_upstream: &Lines) {
        let state = h.request_state.as_deref().unwrap_or_default();
        let Some(pass) = self.continuations().take(state) else {
            return;
        };
        let mut ticket = self.ticket(&h, &pass.approval_id, None);
        if pass.op_hash != h.op_hash || pass.bound != Bound::of(&h.call) {
            // The upstream's state moved onto another call (other arguments, tool or agent), or
            // onto another spelling of it: the op_hash reads text in its NFC form, and an upstream
            // given the NFD spelling of an approved path opens another file. What goes on is the
            // approved call byte for byte, as an approved retry is.
            ticket.denied = Some(ReasonCode::BindingMismatch.as_str().into());
            return self.refuse(&h.call_id, &h.id, &h.call.tool_name, ticket, to_client);
        }
        if self.rule_now(&h.call.tool_name) == Rule::Deny {
            ticket.denied = Some("policy_denied".into());
            return self.refuse(&h.call_id, &h.id, &h.call.tool_name, ticket, to_client);
        }
        let Held {
            call_id,
            id,
            line,
            op_hash,
            own_id,
            ..
        } = h;
        let f = Forwarded {
            call_id,
            op_hash,
            outcome: McpOutcome::Continued,
            approval_ref: Some(pass.approval_id),
            bound: Some(pass.bound),
        };
        self.forward(line, &id, own_id, f, to_upstream);
    }
}

/// The `resultType` of a result that asks for input, and the audit word for such an answer.
const INPUT_REQUIRED: &str = "input_required";

/// How long the upstream's state stays a pass: as long as the interposer's own states live.
const CONTINUATION_TTL: Duration = Duration::from_secs(STATE_TTL_SECONDS.unsigned_abs());
/// Most passes kept at once (the oldest go first): a bound on what an upstream can make us hold.
const MAX_CONTINUATIONS: usize = 4096;

/// One pass: the approved call an upstream `requestState` continues.
#[derive(Debug, Clone)]
struct Continuation {
    op_hash: String,
    /// The approved call's tool and argument bytes: the continuation must repeat them.
    bound: Bound,
    approval_id: String,
    at: std::time::Instant,
}

/// The passes by the upstream's `requestState` text.
#[derive(Debug, Default)]
struct Continuations(HashMap<String, Continuation>);

impl Continuations {
    fn insert(&mut self, state: String, pass: Continuation) {
        let now = std::time::Instant::now();
        self.0
            .retain(|_, c| now.duration_since(c.at) < CONTINUATION_TTL);
        if self.0.len() >= MAX_CONTINUATIONS
            && let Some(oldest) = self
                .0
                .iter()
                .min_by_key(|(_, c)| c.at)
                .map(|(k, _)| k.clone())
        {
            self.0.remove(&oldest);
        }
        self.0.insert(state, pass);
    }

    fn live(&self, state: &str) -> Option<&Continuation> {
        self.0
            .get(state)
            .filter(|c| c.at.elapsed() < CONTINUATION_TTL)
    }

    fn get(&self, state: &str) -> Option<Continuation> {
        self.live(state).cloned()
    }

    fn take(&mut self, state: &str) -> Option<Continuation> {
        self.live(state)?;
        self.0.remove(state)
    }
}

/// A held `tools/call`: the original line is kept to be forwarded as is.
struct Held {
    call_id: String,
    id: Value,
    line: String,
    call: ToolCall,
    op_hash: String,
    /// The client declared URL elicitation in a 2026-07-28 request (`_meta`): answer with a
    /// multi round-trip result.
    mrtr: bool,
    /// The `requestState` the client echoed, if any.
    request_state: Option<String>,
    /// The client asked for a task (2025-11-25 `params.task`), with this retention if any.
    task: Option<Option<u64>>,
    /// Fires when the client cancels this call (or leaves).
    cancel: oneshot::Receiver<()>,
    /// `line` carries an id of the interposer's own (a task's call), not the client's.
    own_id: bool,
}

/// The line to forward for an approved held call: `line` itself, or, when the client answered
/// the interposer's multi round-trip request, `line` without the `requestState` the interposer
/// sealed (`own_state`) and without its `inputResponses` entry (an `inputResponses` left empty
/// goes too); the upstream's own entries stay. Members are cut out of the text, never
/// re-serialized; `None` if the result's `arguments` are not exactly `arguments` (the hashed
/// bytes), which would make forwarding it unsafe.
fn upstream_line(line: &str, own_state: bool, arguments: &str) -> Option<String> {
    let frame: Value = serde_json::from_str(line).ok()?;
    let own_response = frame
        .pointer("/params/inputResponses")
        .and_then(Value::as_object)
        .is_some_and(|r| r.contains_key(answer::INPUT_REQUEST_KEY));
    if !own_state && !own_response {
        return Some(line.to_owned());
    }
    let at = crate::splice::member(line, "params")?;
    let mut params = line[at.clone()].to_owned();
    if own_state {
        params = crate::splice::without(&params, "requestState")?;
    }
    if own_response {
        let r = crate::splice::member(&params, "inputResponses")?;
        let rest = crate::splice::without(&params[r.clone()], answer::INPUT_REQUEST_KEY)?;
        params = if crate::splice::is_empty_object(&rest) {
            crate::splice::without(&params, "inputResponses")?
        } else {
            format!("{}{rest}{}", &params[..r.start], &params[r.end..])
        };
    }
    let out = format!("{}{params}{}", &line[..at.start], &line[at.end..]);
    let CallFrame { params } = serde_json::from_str(&out).ok()?;
    (params.arguments.map_or("{}", RawValue::get) == arguments).then_some(out)
}

/// Whether request `frame` is on protocol revision 2026-07-28 or later: its own `_meta` says so
/// (2026-07-28 has no `initialize`; every request names its revision), or the session
/// negotiated such a revision. Revisions are dates, so they compare as text.
fn modern(frame: &Value, client: &ClientKind) -> bool {
    let stated = frame
        .pointer("/params/_meta")
        .and_then(|m| m.get("io.modelcontextprotocol/protocolVersion"))
        .and_then(Value::as_str)
        .or(client.revision.as_deref());
    stated.is_some_and(|v| v >= answer::REVISION_2026_07_28)
}

/// Longest life of a `requestState`: short, so a leaked state is soon worthless; a client whose
/// state expired calls again without it and is matched by op_hash.
const STATE_TTL_SECONDS: i64 = 600;

/// When a state expires: at the approval's own expiry, and at most [`STATE_TTL_SECONDS`] from now.
fn state_expiry(expires_at: Option<&str>) -> i64 {
    let cap = OffsetDateTime::now_utc().unix_timestamp() + STATE_TTL_SECONDS;
    expires_at
        .and_then(|t| OffsetDateTime::parse(t, &Rfc3339).ok())
        .map_or(cap, |t| t.unix_timestamp().min(cap))
}

/// A `tasks/*` request about a task id the interposer issued (known to it or not).
fn ours(frame: &Value) -> bool {
    frame
        .pointer("/params/taskId")
        .and_then(Value::as_str)
        .is_some_and(|t| t.starts_with(tasks::TASK_ID_PREFIX))
}

fn rpc_error(id: &Value, code: i64, message: &str) -> Value {
    serde_json::json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

async fn write_lines<W: AsyncWrite + Unpin>(
    mut rx: mpsc::UnboundedReceiver<String>,
    mut out: W,
) -> std::io::Result<()> {
    // Every line queued by the time the writer wakes goes out in one write: one syscall per
    // burst, and no added latency for a line alone.
    let mut buf = Vec::new();
    while let Some(line) = rx.recv().await {
        buf.extend_from_slice(line.as_bytes());
        buf.push(b'\n');
        while buf.len() < WRITE_BATCH_BYTES {
            let Ok(line) = rx.try_recv() else { break };
            buf.extend_from_slice(line.as_bytes());
            buf.push(b'\n');
        }
        out.write_all(&buf).await?;
        out.flush().await?;
        buf.clear();
        if buf.capacity() > WRITE_BATCH_BYTES {
            buf.shrink_to(WRITE_BATCH_BYTES);
        }
    }
    out.flush().await?;
    out.shutdown().await
}

/// The prefix of the ids the interposer forwards client requests under.
const UPSTREAM_ID_PREFIX: &str = "cs-";

/// The error for a request whose id the client is still awaiting an answer under.
const ID_IN_FLIGHT: &str = "this request id is already in flight in this session: a client's \
     requests awaiting an answer must have distinct ids";

/// The answer to a frame that failed admission: its code, what broke, and the reason word in
/// `data` for tools.
pub(crate) fn inadmissible_error(id: &Value, why: &Rejection) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {
            "code": why.code(),
            "message": format!("not relayed: {why}"),
            "data": {"reason": why.reason()},
        },
    })
}

/// RFC 3339 of now (for tests and logs).
pub fn now_rfc3339() -> String {
    OffsetDateTime::now_utc()
        .format(&Rfc3339)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_quick_reading_of_an_answer_agrees_with_the_full_one() {
        for frame in [
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"isError":true}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"isError":false}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"isError":"true"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{ "isError" : true }}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":[true]}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":null}"#,
            r#"{"jsonrpc":"2.0","id":1,"error":null}"#,
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no"}}"#,
            r#"{"jsonrpc":"2.0","id":1}"#,
        ] {
            let quick = Reply::read(frame).and_then(|r| r.status());
            let full = upstream_status(&serde_json::from_str(frame).unwrap());
            assert_eq!(quick, Some(full), "{frame}");
        }
    }

    #[test]
    fn what_the_quick_reading_cannot_settle_goes_to_the_full_one() {
        // A duplicated member: a tree keeps the last, the quick reading declines.
        let twice = r#"{"jsonrpc":"2.0","id":1,"result":{"isError":false,"isError":true}}"#;
        assert_eq!(Reply::read(twice).and_then(|r| r.status()), None);
        assert_eq!(
            upstream_status(&serde_json::from_str(twice).unwrap()),
            "tool_error"
        );
        // A batch is no single message, even where a struct reader would take an array.
        assert!(Reply::read(r#"[{"id":1,"result":{}}]"#).is_none());
        assert!(Reply::read("not json").is_none());
    }

    #[test]
    fn a_present_null_id_is_an_id() {
        let r = Reply::read(r#"{"jsonrpc":"2.0","id":null,"error":{}}"#).unwrap();
        assert_eq!(r.id.and_then(raw_id), Some(Value::Null));
        let r = Reply::read(r#"{"method":"notifications/initialized"}"#).unwrap();
        assert!(r.id.is_none());
        // Ids are keyed by value: spacing does not make another id.
        let spaced = Reply::read(r#"{"id" : "a" ,"result":{}}"#).unwrap();
        assert_eq!(
            spaced.id.and_then(raw_id).map(|v| id_key(&v)),
            Some(id_key(&Value::from("a")))
        );
    }
}
