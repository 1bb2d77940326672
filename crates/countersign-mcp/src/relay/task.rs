//! Floor 7: the task driver (2025-11-25 tasks, [`crate::tasks`]). A held call the client sent
//! with `params.task` gets a task at once; the driver awaits the verdict and hands it to
//! [`Interposer::settle`], the same release as a retry's (policy now, status, evidence, the
//! upstream line, not cancelled, grant, one forward). `tasks/*` requests are
//! [`super::task_request`]'s.

use super::interposer::{Interposer, Lines};
use super::outbox::{Effect, Outbox};
use super::outcome;
use super::release::Refused;
use super::session::{Forwarded, Held};
use super::shared::Bound;
use super::shared::now_rfc3339;
use super::ticket::Opened;
use super::upstream_reader::id_key;
use crate::answer;
use crate::config::Rule;
use crate::tasks::{self, Payload, Status, Task};
use countersign::{ApprovalResult, ApprovalStatus, ReasonCode};
use countersign_client::Refusal;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use tokio::sync::{mpsc, oneshot};

/// How long one poll of a task's approval waits at the service for a verdict.
const TASK_POLL_WAIT: Duration = Duration::from_secs(20);

impl Interposer {
    /// First arrival (or a repeat) of a held call sent as a task: the approval (this call's open
    /// ticket, or a new one), the task answered at once, and the driver that runs it once.
    pub(super) async fn start_task(
        self: &Arc<Self>,
        mut h: Held,
        ask: tasks::Ask,
        out: &Outbox<'_>,
        to_upstream: &Lines,
    ) {
        // What the task will forward, settled first: a call that cannot be sent as hashed opens
        // no approval (and its record gets one outcome).
        let upstream_id = self.shared.new_id(tasks::UPSTREAM_ID_PREFIX);
        let Some(line) =
            tasks::upstream_call(&h.line, &upstream_id, &h.call.params_json, ask.flavor)
        else {
            let why = Refused::because(ReasonCode::BindingMismatch.as_str());
            out.send(self.refusal(&h, "", why));
            return;
        };
        let open = self.shared.tickets().get(&h.op_hash).cloned();
        let (approval_id, expires_at) = match open {
            Some(t) => (t.approval_id, t.expires_at),
            None => match self.open_approval(&h, out).await {
                None => return,
                Some(Opened::Pending(t)) => (t.approval_id, t.expires_at),
                // Decided at once: the driver's first poll reads the verdict.
                Some(Opened::Decided(approval_id, result)) => (approval_id, result.expires_at),
            },
        };
        out.send(self.waits(&h, &approval_id, expires_at.as_deref()));
        let (stop, stopped) = oneshot::channel();
        let (task_id, frame) = self.new_task(&h, &approval_id, expires_at.as_deref(), ask, stop);
        // From here on `h` is the call the driver forwards: its own id, no `task`, and the
        // task's stop signal in place of the client's request (answered now).
        let client_id = std::mem::replace(&mut h.id, Value::from(upstream_id));
        h.line = line;
        h.own_id = true;
        h.cancel = stopped;
        if !out.send(Effect::Answer {
            id: client_id,
            frame,
        }) {
            // The client cancelled its call before it learnt of the task: nobody would ever
            // read it, so it is not started. The approval stays pending, as for any cancel.
            self.session().tasks.remove(&task_id);
            return;
        }
        let me = self.clone();
        let to_upstream = self.task_upstream().unwrap_or_else(|| to_upstream.clone());
        tokio::spawn(async move { me.drive_task(task_id, h, approval_id, to_upstream).await });
    }

    /// A new task for held call `h` awaiting `approval_id`: its id, and the answer that gives it
    /// to the client.
    fn new_task(
        &self,
        h: &Held,
        approval_id: &str,
        expires_at: Option<&str>,
        ask: tasks::Ask,
        stop: oneshot::Sender<()>,
    ) -> (String, Value) {
        let ticket = self.ticket(h, approval_id, expires_at);
        let message = answer::task_message(&h.call.tool_name, &ticket);
        let left = expires_at
            .and_then(|t| OffsetDateTime::parse(t, &Rfc3339).ok())
            .map(|t| (t - OffsetDateTime::now_utc()).unsigned_abs());
        let task = Task::new(
            ask.flavor,
            approval_id.to_owned(),
            h.op_hash.clone(),
            message.clone(),
            tasks::ttl_ms(ask.ttl, left),
            now_rfc3339(),
            stop,
        );
        let task_id = self.shared.new_secret_id(tasks::TASK_ID_PREFIX);
        let view = task.view(&task_id);
        self.session().tasks.insert(task_id.clone(), task);
        let meta = json!({
            answer::APPROVAL_KEY: ticket.block(),
            "io.modelcontextprotocol/model-immediate-response": message,
        });
        let result = match ask.flavor {
            // 2026-07-28 extension: `CreateTaskResult` is the task itself, marked `"task"`.
            tasks::Flavor::Extension => {
                let mut result = view;
                if let Some(r) = result.as_object_mut() {
                    r.insert("resultType".into(), json!("task"));
                    r.insert("_meta".into(), meta);
                }
                result
            }
            tasks::Flavor::Legacy => json!({"task": view, "_meta": meta}),
        };
        let frame = json!({"jsonrpc": "2.0", "id": h.id, "result": result});
        (task_id, frame)
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
        let Some(verdict) = self.await_verdict(&approval_id, &mut h.cancel).await else {
            // `tasks/cancel` (which withdrew the approval), or the session ended.
            return;
        };
        // The execution is a call of its own in the audit log, as an approved retry is.
        h.call_id = self.shared.next_call_id();
        let (answers, mut answered) = mpsc::unbounded_channel();
        let out = Outbox::new(&self, &answers, &to_upstream);
        out.send(Effect::Intent {
            call_id: h.call_id.clone(),
            tool: h.call.tool_name.clone(),
            op_hash: h.op_hash.clone(),
            rule: h.rule,
        });
        let upstream_key = h.key();
        {
            let mut s = self.session();
            if let Some(t) = s.tasks.get_mut(&task_id) {
                t.update("Approved: running the call.".into(), now_rfc3339());
                t.approved = Some(tasks::Approved {
                    line: h.line.clone(),
                    tool: h.call.tool_name.clone(),
                    arguments: h.call.params_json.clone(),
                    rule: h.rule,
                });
            }
            // Before the forward: the upstream may answer at once.
            s.tasks.running(&task_id, upstream_key.clone());
        }
        self.settle(h, &approval_id, verdict, &out).await;
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
            let payload = Payload::of_response(&frame);
            // The extension keeps `failed` for JSON-RPC errors: a refusal answered as a tool
            // error is a `completed` task whose result says it did not run (SEP-2663).
            let status = match (t.flavor, &payload) {
                (tasks::Flavor::Extension, Payload::Result(_)) => Status::Completed,
                _ => Status::Failed,
            };
            t.end(status, message, payload, now_rfc3339());
        }
    }

    /// `tasks/update` of extension task `task_id` with the client's `responses`: once every
    /// request the upstream made is answered, the approved call goes on, sent again once with the
    /// upstream's `requestState` and the answers, if the policy does not deny the tool now. Its
    /// own intent line, and a `continued` outcome naming the approval, as for a client's own
    /// continuation (docs/MCP.md, "When the upstream itself asks for input").
    pub(super) fn update_task(
        &self,
        task_id: &str,
        responses: &serde_json::Map<String, Value>,
        out: &Outbox<'_>,
    ) {
        let (approved, approval_id, op_hash, state, answers) = {
            let mut s = self.session();
            let Some(t) = s.tasks.get_mut(task_id) else {
                return;
            };
            let Some(approved) = t.approved.clone() else {
                return;
            };
            let Some((state, answers)) = t.answer(responses, now_rfc3339()) else {
                return;
            };
            (
                approved,
                t.approval_id.clone(),
                t.op_hash.clone(),
                state,
                answers,
            )
        };
        let upstream_id = self.shared.new_id(tasks::UPSTREAM_ID_PREFIX);
        let line = tasks::continuation_call(
            &approved.line,
            &upstream_id,
            &approved.arguments,
            &state,
            &answers,
        );
        let denied = self.rule_now(&approved.tool) == Rule::Deny;
        let refused = if denied {
            "Not continued: the policy now denies this tool."
        } else {
            "Not continued: the call could not be sent as approved."
        };
        let Some(line) = line.filter(|_| !denied) else {
            let result = json!({"content": [{"type": "text", "text": refused}], "isError": true});
            if let Some(t) = self.session().tasks.get_mut(task_id) {
                t.end(
                    Status::Completed,
                    refused.into(),
                    Payload::Result(result),
                    now_rfc3339(),
                );
            }
            return;
        };
        let call_id = self.shared.next_call_id();
        let key = id_key(&Value::from(upstream_id));
        out.send(Effect::Intent {
            call_id: call_id.clone(),
            tool: approved.tool.clone(),
            op_hash: op_hash.clone(),
            rule: approved.rule,
        });
        self.session().tasks.running(task_id, key.clone());
        let forwarded = Forwarded {
            call_id,
            op_hash,
            outcome: outcome::CONTINUED,
            approval_ref: Some(approval_id),
            bound: Some(Bound {
                tool: approved.tool,
                arguments: approved.arguments,
            }),
        };
        let upstream = self.task_upstream();
        let forward = Effect::ForwardOwn {
            line,
            key,
            forwarded,
        };
        match upstream {
            Some(lines) => {
                Outbox::new(self, &lines, &lines).send(forward);
            }
            None => {
                out.send(forward);
            }
        }
    }

    /// Poll `approval_id` until it is settled; `None` if `stop` fires first.
    async fn await_verdict(
        &self,
        approval_id: &str,
        stop: &mut oneshot::Receiver<()>,
    ) -> Option<Result<ApprovalResult, Refusal>> {
        loop {
            let asked = tokio::time::Instant::now();
            let poll = self.shared.gateway.poll(approval_id, TASK_POLL_WAIT);
            tokio::select! {
                answer = poll => match answer {
                    Ok(r) if r.status == ApprovalStatus::Pending => {
                        // A service that answers a long-poll at once must not make this spin.
                        tokio::time::sleep_until(asked + Duration::from_secs(1)).await;
                    }
                    verdict => return Some(verdict),
                },
                _ = &mut *stop => return None,
            }
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
            // The upstream asks for input (extension tasks): the task waits for the client.
            if frame.get("error").is_none()
                && let Some(result) = frame.get("result")
                && task.ask_input(result, now_rfc3339())
            {
                return None;
            }
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
    pub(super) fn task_unanswered(&self, id: &Value) {
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
}

/// The text a refusal or tool answer leads with (its first text content, or the error message).
fn summary(frame: &Value) -> Option<&str> {
    frame
        .pointer("/result/content/0/text")
        .or_else(|| frame.pointer("/error/message"))
        .and_then(Value::as_str)
}
