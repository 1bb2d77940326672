//! Floor 9: the dispatcher of the client direction. Every client frame is admitted first
//! ([`crate::admission`]): one that is not is answered with its error and nothing of it goes
//! upstream. The admitted frame is decoded once ([`super::client_reader`]) and dispatched: passed
//! on, forwarded under an id of the interposer's own, answered here, or (a `tools/call` the
//! policy does not simply allow) handed to its own task to be refused or held.

use super::client_reader::{self, CallFrame, ClientFrame, Request};
use super::hold::Arrival;
use super::interposer::{Interposer, Lines};
use super::outbox::{Effect, Outbox, Record, rpc_error};
use super::outcome;
use super::session::{Forwarded, Track};
use super::task_request::TaskAsk;
use super::upstream_reader::id_key;
use crate::admission::{self, INVALID_REQUEST, Message, Rejection};
use crate::answer::Ticket;
use crate::config::Rule;
use countersign_client::ToolCall;
use serde_json::{Value, json};
use std::ops::Range;
use std::sync::Arc;
use tokio::io::AsyncBufRead;

/// The error for a request whose id the client is still awaiting an answer under.
const ID_IN_FLIGHT: &str = "this request id is already in flight in this session: a client's \
     requests awaiting an answer must have distinct ids";

impl Interposer {
    pub(super) async fn client_loop<R: AsyncBufRead + Unpin>(
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

    /// One frame from the client: admitted (docs/MCP.md, "What the interposer admits"), decoded
    /// once, then dispatched; or answered with the error that says why not.
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

    /// A client frame admission took as `message` (the HTTP transport admits a body itself):
    /// decoded once, then dispatched.
    pub(crate) fn client_message(
        self: Arc<Self>,
        line: String,
        message: Message,
        to_client: &Lines,
        to_upstream: &Lines,
    ) {
        match client_reader::read(&line, &message) {
            Ok(frame) => self.dispatch(line, frame, to_client, to_upstream),
            Err(why) => self.inadmissible(line.as_bytes(), &why, to_client),
        }
    }

    /// A client frame that failed admission: answered with its JSON-RPC error, under its id when
    /// one can be read (else `null`, as JSON-RPC answers a parse error), and never relayed.
    pub(crate) fn inadmissible(&self, frame: &[u8], why: &Rejection, to_client: &Lines) {
        let answer = if *why == Rejection::Batch {
            batch_refused(frame)
        } else {
            let id = admission::recover_id(frame).unwrap_or(Value::Null);
            tracing::warn!(
                reason = why.reason(),
                error = %why,
                id = %id,
                "client frame not admitted: answered, not relayed"
            );
            Some(inadmissible_error(&id, why))
        };
        if let Some(answer) = answer {
            Outbox::client(self, to_client).send(Effect::Client(answer.to_string()));
        }
    }

    /// One admitted client message: a request is judged here (`tools/call`, the interposer's own
    /// tasks) or forwarded under an id of the interposer's; a notification or a response to the
    /// upstream's own request passes as it came (but a `tools/call` notification, never).
    fn dispatch(
        self: Arc<Self>,
        line: String,
        frame: ClientFrame,
        to_client: &Lines,
        to_upstream: &Lines,
    ) {
        let out = Outbox::new(&self, to_client, to_upstream);
        match frame {
            ClientFrame::Pass => {
                out.send(Effect::Upstream(line));
            }
            ClientFrame::Cancelled { target } => self.client_cancelled(line, &target, &out),
            ClientFrame::CallWithoutId { tool } => self.call_without_id(tool, &out),
            ClientFrame::Request { id, id_at, body } => {
                let request = Call {
                    line,
                    id,
                    id_at,
                    call: body,
                };
                self.clone().request(request, to_client, to_upstream);
            }
        }
    }

    /// A client request: judged here, or forwarded under an id of the interposer's own.
    fn request(self: Arc<Self>, r: Call<Request>, to_client: &Lines, to_upstream: &Lines) {
        let out = Outbox::new(&self, to_client, to_upstream);
        let Call {
            line,
            id,
            id_at,
            call: body,
        } = r;
        if self.session().in_flight(&id_key(&id)) {
            // Two requests under one id would make one of them get the other's answer.
            let error = rpc_error(&id, INVALID_REQUEST, ID_IN_FLIGHT);
            out.send(Effect::Client(error.to_string()));
            return;
        }
        let track = match body {
            Request::Call(call) => {
                let call = Call {
                    line,
                    id,
                    id_at,
                    call,
                };
                return self.clone().call(call, &out, to_client, to_upstream);
            }
            Request::List => Track::List,
            Request::Discover => Track::Discover,
            Request::Initialize {
                revision,
                url_elicitation,
            } => {
                let mut s = self.session();
                s.client.revision = revision;
                s.client.url_elicitation = url_elicitation;
                Track::Initialize
            }
            Request::Task {
                method,
                ours: Some(task_id),
                declares,
                responses,
            } => {
                let ask = TaskAsk {
                    method,
                    id,
                    task_id,
                    declares,
                    responses,
                };
                return self.clone().task_request(ask, to_client, to_upstream);
            }
            Request::TaskList if self.answers_task_list() => {
                let list = self.session().tasks.list();
                let frame = json!({"jsonrpc": "2.0", "id": id, "result": {"tasks": list}});
                out.send(Effect::Client(frame.to_string()));
                return;
            }
            Request::Task { ours: None, .. } | Request::TaskList | Request::Other => Track::Plain,
        };
        out.send(Effect::Forward {
            line,
            id,
            id_at: Some(id_at),
            track,
        });
    }

    /// A `tools/call` request: allowed calls are decided and forwarded right here, in arrival
    /// order, with no task; any other is registered before its task is spawned (see
    /// [`super::session::Pending`]), then refused or held by [`Interposer::decide`].
    fn call(self: Arc<Self>, c: Call, out: &Outbox<'_>, to_client: &Lines, to_upstream: &Lines) {
        let Some(call) = c.call else {
            let message = "tools/call needs params.name and object arguments";
            let frame = rpc_error(&c.id, -32602, message);
            out.send(Effect::Answer { id: c.id, frame });
            return;
        };
        let rule = self.rule_now(&call.tool);
        if rule == Rule::Allow {
            return self.allow(c.line, c.id, c.id_at, call, out);
        }
        let cancel = {
            let mut s = self.session();
            let modern = call.modern(s.client.revision.as_deref());
            s.pending(id_key(&c.id), modern)
        };
        let arrival = Arrival {
            line: c.line,
            id: c.id,
            call,
            rule,
            cancel,
        };
        tokio::spawn(self.decide(arrival, to_client.clone(), to_upstream.clone()));
    }

    /// An allowed call: its intent line, then the original line to the upstream.
    fn allow(
        &self,
        line: String,
        id: Value,
        id_at: Range<usize>,
        call: CallFrame,
        out: &Outbox<'_>,
    ) {
        let call_id = self.shared.next_call_id();
        // The op_hash only goes into the audit log: without one, it is not computed.
        let op_hash = if self.shared.audit.enabled() {
            let server = self.shared.server_id.clone();
            let call = ToolCall::mcp(
                self.agent_id.clone(),
                server,
                call.tool.clone(),
                call.arguments,
            );
            self.shared.gateway.fingerprint(&call).unwrap_or_default()
        } else {
            String::new()
        };
        out.send(Effect::Intent {
            call_id: call_id.clone(),
            tool: call.tool,
            op_hash: op_hash.clone(),
            rule: Rule::Allow,
        });
        let f = Forwarded {
            call_id,
            op_hash,
            outcome: outcome::ALLOWED,
            approval_ref: None,
            bound: None,
        };
        out.send(Effect::Forward {
            line,
            id,
            id_at: Some(id_at),
            track: Track::Call(f),
        });
    }

    /// The client's `notifications/cancelled` of request `target`. A call not forwarded yet is
    /// cancelled here: the upstream never saw it; only its answer is dropped (a parked retry
    /// stops parking, and its approval stays pending: a client timeout is not a withdrawal). A
    /// forwarded request's cancel goes upstream under the id the upstream knows it by. Any other
    /// cancel names no request in flight and goes nowhere.
    fn client_cancelled(&self, line: String, target: &str, out: &Outbox<'_>) {
        let mut s = self.session();
        if let Some(call) = s.calls.get_mut(target) {
            call.cancel();
            call.cancel_line = Some(line);
            return;
        }
        match s.outbound_by_client.get(target) {
            // Sent under the session lock, so it cannot overtake the request it cancels.
            Some(upstream) => match crate::splice::with_request_id(&line, upstream) {
                Some(line) => {
                    out.send(Effect::Upstream(line));
                }
                None => tracing::debug!("a cancel whose requestId cannot be rewritten: dropped"),
            },
            None => tracing::debug!(request = target, "cancel of no request in flight: dropped"),
        }
    }

    /// A `tools/call` sent as a notification (no `id`). MCP defines `tools/call` as a request
    /// only, and a notification cannot be answered, so it could neither be held nor refused to
    /// the client: relaying it would let a server that runs such calls execute a held tool with
    /// no approval. It is never forwarded; the log says it was refused, whatever the policy.
    fn call_without_id(&self, tool: String, out: &Outbox<'_>) {
        let call_id = self.shared.next_call_id();
        tracing::warn!(tool, "tools/call without an id refused: not relayed");
        let ticket = Ticket::refused("", outcome::TOOLS_CALL_WITHOUT_ID);
        out.send_all([
            Effect::Intent {
                call_id: call_id.clone(),
                tool,
                op_hash: String::new(),
                rule: Rule::Deny,
            },
            Effect::Record {
                call_id,
                record: Record::denied(&ticket),
            },
        ]);
    }
}

/// A request as the dispatcher read it: the line, its id and where that is, and what it asks
/// (for a `tools/call`, the call if its params read as one).
struct Call<T = Option<CallFrame>> {
    line: String,
    id: Value,
    id_at: Range<usize>,
    call: T,
}

/// A batch (JSON text admitted whole, but no single message): each request in it is answered
/// with the refusal under its own id, in one array, as JSON-RPC answers a batch; a batch of
/// notifications only gets no answer.
fn batch_refused(frame: &[u8]) -> Option<Value> {
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
    (!errors.is_empty()).then_some(Value::Array(errors))
}

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
