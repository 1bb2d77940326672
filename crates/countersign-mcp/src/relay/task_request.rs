//! Floor 8: `tasks/get`, `tasks/result`, `tasks/update` and `tasks/cancel` about a task the
//! interposer issued (2025-11-25 tasks, or the 2026-07-28 extension, as the task was made; the
//! task itself is [`super::task`]'s).

use super::client_reader::TaskMethod;
use super::interposer::{Interposer, Lines};
use super::outbox::{Effect, Outbox, rpc_error};
use super::shared::now_rfc3339;
use super::upstream_reader::id_key;
use crate::tasks::{self, Flavor, Payload, Status};
use serde_json::{Value, json};
use std::sync::Arc;

/// A `tasks/*` request about a task id the interposer issued.
pub(super) struct TaskAsk {
    pub(super) method: TaskMethod,
    pub(super) id: Value,
    pub(super) task_id: String,
    /// The request declares the 2026-07-28 tasks extension.
    pub(super) declares: bool,
    /// `params.inputResponses` (`tasks/update`).
    pub(super) responses: Option<Value>,
}

impl Interposer {
    /// `tasks/get`, `tasks/result`, `tasks/update` or `tasks/cancel` about task `task_id`, an id
    /// the interposer issued (known to it or not).
    pub(super) fn task_request(
        self: Arc<Self>,
        ask: TaskAsk,
        to_client: &Lines,
        to_upstream: &Lines,
    ) {
        let out = Outbox::new(&self, to_client, to_upstream);
        let mut s = self.session();
        let Some(task) = s.tasks.get_mut(&ask.task_id) else {
            drop(s);
            out.send(Effect::Client(unknown_task(&ask.id).to_string()));
            return;
        };
        if task.flavor == Flavor::Extension {
            drop(s);
            return self.clone().extension_request(ask, to_client, &out);
        }
        let TaskAsk {
            method,
            id,
            task_id,
            ..
        } = ask;
        match method {
            TaskMethod::Update => {
                drop(s);
                let error = rpc_error(&id, -32601, "tasks/update is not a 2025-11-25 method");
                out.send(Effect::Client(error.to_string()));
            }
            TaskMethod::Get => {
                let frame = json!({"jsonrpc": "2.0", "id": id, "result": task.view(&task_id)});
                drop(s);
                out.send(Effect::Client(frame.to_string()));
            }
            TaskMethod::Result => {
                let mut ended = task.ended();
                // Registered like a parked call, so the client's cancel drops the answer.
                let mut cancelled = s.pending(id_key(&id), false);
                drop(s);
                let (to_client, to_upstream) = (to_client.clone(), to_upstream.clone());
                let me = self.clone();
                tokio::spawn(async move {
                    let out = Outbox::new(&me, &to_client, &to_upstream);
                    tokio::select! {
                        _ = ended.wait_for(|e| *e) => {}
                        _ = &mut cancelled => {
                            out.send(Effect::Forget { id });
                            return;
                        }
                    }
                    let frame = me.task_payload(&id, &task_id);
                    out.send(Effect::Answer { id, frame });
                });
            }
            TaskMethod::Cancel => {
                drop(s);
                self.clone()
                    .cancel_task(id, &task_id, None, to_client, &out);
            }
        }
    }

    /// A `tasks/*` request about a task of the 2026-07-28 extension (SEP-2663): only from a
    /// request that declares the extension (`-32021` otherwise); `tasks/get` answers the
    /// `DetailedTask`; `tasks/update` and `tasks/cancel` answer an empty acknowledgement;
    /// `tasks/result` is no method of the extension.
    fn extension_request(self: Arc<Self>, ask: TaskAsk, to_client: &Lines, out: &Outbox<'_>) {
        let TaskAsk {
            method,
            id,
            task_id,
            declares,
            responses,
        } = ask;
        let task_id = task_id.as_str();
        if method == TaskMethod::Result {
            let error = rpc_error(
                &id,
                -32601,
                "tasks/result is not a method of the tasks extension: read the result with tasks/get",
            );
            out.send(Effect::Client(error.to_string()));
            return;
        }
        if !declares {
            let error = json!({
                "jsonrpc": "2.0",
                "id": id,
                "error": {
                    "code": tasks::MISSING_CAPABILITY,
                    "message": "Missing required client capability: the request does not declare the tasks extension",
                    "data": {"requiredCapabilities": {"extensions": {tasks::EXTENSION: {}}}},
                },
            });
            out.send(Effect::Client(error.to_string()));
            return;
        }
        let ack = json!({"jsonrpc": "2.0", "id": id, "result": {"resultType": "complete"}});
        match method {
            TaskMethod::Get => {
                let detailed = self
                    .session()
                    .tasks
                    .get_mut(task_id)
                    .map(|t| t.detailed(task_id));
                let frame = match detailed {
                    Some(task) => json!({"jsonrpc": "2.0", "id": id, "result": task}),
                    None => unknown_task(&id),
                };
                out.send(Effect::Client(frame.to_string()));
            }
            // Answers to what the approved call's upstream asked; the approval itself never
            // asks the client (a person decides it elsewhere, with a key).
            TaskMethod::Update => {
                let responses = responses.as_ref().and_then(Value::as_object);
                if let Some(responses) = responses {
                    self.update_task(task_id, responses, out);
                }
                out.send(Effect::Client(ack.to_string()));
            }
            TaskMethod::Result => {}
            TaskMethod::Cancel => self.cancel_task(id, task_id, Some(ack), to_client, out),
        }
    }

    /// `tasks/cancel`: a task still waiting is ended and its approval withdrawn (answered once
    /// the service settled it); one whose call already runs asks the upstream to stop it. The
    /// answer is `ack` when given (the extension's), else the task as it ended.
    fn cancel_task(
        self: Arc<Self>,
        id: Value,
        task_id: &str,
        ack: Option<Value>,
        to_client: &Lines,
        out: &Outbox<'_>,
    ) {
        let mut s = self.session();
        let Some(task) = s.tasks.get_mut(task_id) else {
            // Gone since the request was read (it expired meanwhile): as for any unknown task.
            drop(s);
            out.send(Effect::Client(unknown_task(&id).to_string()));
            return;
        };
        if let (Some(ack), true) = (&ack, task.status.is_terminal()) {
            // The extension acknowledges a cancel whatever comes of it.
            drop(s);
            out.send(Effect::Client(ack.to_string()));
            return;
        }
        if task.status.is_terminal() {
            let message = format!("the task is already {}", task.status.as_str());
            drop(s);
            out.send(Effect::Client(rpc_error(&id, -32602, &message).to_string()));
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
        let not_run = json!({"content": [{"type": "text", "text": message}], "isError": true});
        task.end(
            Status::Cancelled,
            message.into(),
            Payload::Result(not_run),
            now_rfc3339(),
        );
        let answer = ack
            .unwrap_or_else(|| json!({"jsonrpc": "2.0", "id": id, "result": task.view(task_id)}));
        drop(s);
        if let Some(running) = running {
            // Too late to withdraw: ask the upstream to stop, as the client would have.
            let request_id = serde_json::from_str::<Value>(&running).unwrap_or_default();
            let note = json!({
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": request_id, "reason": "the client cancelled the task"},
            });
            out.send(Effect::Upstream(note.to_string()));
            out.send(Effect::Client(answer.to_string()));
            return;
        }
        // An explicit cancel is a withdrawal (unlike a client's timeout): the service settles
        // the approval DENIED `cancelled`; answered once that is done.
        let to_client = to_client.clone();
        tokio::spawn(async move {
            self.shared.gateway.withdraw(&approval_id).await;
            if self.shared.ticket_open(&op_hash, &approval_id) {
                self.drop_ticket(&op_hash);
            }
            tracing::info!(approval_id, "task cancelled: approval withdrawn");
            Outbox::client(&self, &to_client).send(Effect::Client(answer.to_string()));
        });
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

/// A task id the interposer issued but no longer knows.
fn unknown_task(id: &Value) -> Value {
    rpc_error(
        id,
        -32602,
        "unknown task: it expired, or the interposer restarted since; call the tool again \
         (a pending approval is found again by the call's arguments)",
    )
}
