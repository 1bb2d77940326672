//! Floor 8: a `tools/call` the policy does not simply allow, from its decision to its verdict:
//! refused at once, or held; a held call opens its ticket on first arrival (or is given a task),
//! and a retry parks for at most the budget before its verdict goes to
//! [`Interposer::settle`].

use super::client_reader::CallFrame;
use super::interposer::{Interposer, Lines};
use super::outbox::{Effect, Outbox, Record};
use super::outcome;
use super::release::Refused;
use super::session::Held;
use super::shared::STATE_TTL_SECONDS;
use super::ticket::Opened;
use crate::answer::{self, Moment, Ticket};
use crate::audit::OpenTicket;
use crate::config::Rule;
use crate::state::RequestState;
use countersign::ApprovalStatus;
use countersign_client::ToolCall;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use tokio::sync::oneshot;

/// A call the client dispatcher did not forward at once, with what it was decoded to.
pub(super) struct Arrival {
    pub(super) line: String,
    pub(super) id: Value,
    pub(super) call: CallFrame,
    /// `Deny` or `Hold` (an allowed call never gets here; any other rule is held).
    pub(super) rule: Rule,
    /// Fires if the client cancels the call.
    pub(super) cancel: oneshot::Receiver<()>,
}

impl Interposer {
    /// Decide call `a`: its intent line, then refused or held.
    pub(super) async fn decide(self: Arc<Self>, a: Arrival, to_client: Lines, to_upstream: Lines) {
        let out = Outbox::new(&self, &to_client, &to_upstream);
        let call_id = self.shared.next_call_id();
        let task = self.task_ask(&a.call);
        let tool = a.call.tool.clone();
        let call = ToolCall::mcp(
            self.agent_id.clone(),
            self.shared.server_id.clone(),
            a.call.tool,
            a.call.arguments,
        );
        let op_hash = self.shared.gateway.fingerprint(&call);
        out.send(Effect::Intent {
            call_id: call_id.clone(),
            tool: tool.clone(),
            op_hash: op_hash.as_deref().unwrap_or_default().to_owned(),
            rule: a.rule,
        });
        let refuse = |op_hash: String, reason: &str| Effect::Refuse {
            call_id: call_id.clone(),
            id: a.id.clone(),
            tool: tool.clone(),
            ticket: Ticket::refused(op_hash, reason),
        };
        let op_hash = match (a.rule, op_hash) {
            (Rule::Deny, op_hash) => {
                let op_hash = op_hash.unwrap_or_default();
                out.send(refuse(op_hash, outcome::POLICY_DENIED));
                return;
            }
            // Arguments the profile cannot admit (floats, non-NFC text, too deep): no human can
            // be shown them faithfully, so the call cannot be approved.
            (_, Err(refusal)) => {
                out.send(refuse(String::new(), refusal.reason_code.as_str()));
                return;
            }
            (_, Ok(op_hash)) => op_hash,
        };
        let held = Held {
            call_id,
            id: a.id,
            line: a.line,
            call,
            op_hash,
            rule: a.rule,
            mrtr: a.call.mrtr,
            request_state: a.call.request_state,
            own_response: a.call.own_response,
            task,
            cancel: a.cancel,
            own_id: false,
        };
        self.hold(held, &out, &to_upstream).await;
    }

    /// A held call: a task, a new approval on first arrival, a continuation, or a retry that
    /// parks until its verdict.
    async fn hold(self: &Arc<Self>, h: Held, out: &Outbox<'_>, to_upstream: &Lines) {
        if let Some(ask) = h.task {
            return self.start_task(h, ask, out, to_upstream).await;
        }
        let open = match &h.request_state {
            // A multi round-trip retry: the state names the approval, once it is proven ours
            // and for this very call.
            Some(text) => {
                let now = OffsetDateTime::now_utc().unix_timestamp();
                match self.shared.states.open(text, &h.op_hash, now) {
                    Ok(state) => Some(OpenTicket {
                        approval_id: state.approval_id,
                        expires_at: None,
                    }),
                    Err(_) if self.is_continuation(text) => return self.continue_call(h, out),
                    Err(e) => {
                        tracing::info!(error = %e, "requestState refused");
                        out.send(self.refusal(&h, "", Refused::because(e.reason_code())));
                        return;
                    }
                }
            }
            None => self.shared.tickets().get(&h.op_hash).cloned(),
        };
        let Some(open) = open else {
            return self.first_arrival(h, out).await;
        };
        // This session's client is waiting on it too (a ticket from an earlier session or
        // process): `cancel_on_disconnect` covers it.
        self.held_here(&h.op_hash, &open.approval_id);
        self.park(h, open, out).await;
    }

    /// A new approval for held call `h`: its ticket answered (as a multi round-trip result to a
    /// client that declared URL elicitation), or, decided at once, settled.
    async fn first_arrival(&self, h: Held, out: &Outbox<'_>) {
        let open = match self.open_approval(&h, out).await {
            None => return,
            Some(Opened::Decided(approval_id, result)) => {
                return self.settle(h, &approval_id, Ok(*result), out).await;
            }
            Some(Opened::Pending(open)) => open,
        };
        let expires_at = open.expires_at.as_deref();
        out.send(self.waits(&h, &open.approval_id, expires_at));
        let ticket = self.ticket(&h, &open.approval_id, expires_at);
        let effect = if h.mrtr {
            let state = self.shared.states.seal(&RequestState {
                approval_id: open.approval_id.clone(),
                op_hash: h.op_hash.clone(),
                exp: state_expiry(expires_at),
            });
            let frame = answer::input_required(&h.id, &h.call.tool_name, &ticket, &state);
            Effect::Answer { id: h.id, frame }
        } else {
            Effect::Ticket {
                id: h.id,
                tool: h.call.tool_name,
                ticket,
                moment: Moment::FirstArrival,
            }
        };
        out.send(effect);
    }

    /// A retry of a call with an open ticket: park only this response, for at most the budget,
    /// then settle the verdict or answer that it is still pending. A cancel that came before
    /// this point is already in `h.cancel` and ends the park at once.
    async fn park(&self, mut h: Held, open: OpenTicket, out: &Outbox<'_>) {
        let deadline = tokio::time::Instant::now() + self.config().park();
        let mut wait = Duration::ZERO;
        let expires_at = open.expires_at.as_deref();
        let verdict = loop {
            let poll = self.shared.gateway.poll(&open.approval_id, wait);
            let answer = tokio::select! {
                a = poll => a,
                // Fired, or its sender gone (the client left): either way nobody awaits this.
                _ = &mut h.cancel => {
                    let reason = Some(outcome::CLIENT_CANCELLED);
                    let record = Record::pending(&h.op_hash, &open.approval_id, expires_at, reason);
                    out.send_all([
                        Effect::Forget { id: h.id.clone() },
                        Effect::Record { call_id: h.call_id.clone(), record },
                    ]);
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
                verdict => break Some(verdict),
            }
        };
        if let Some(verdict) = verdict {
            return self.settle(h, &open.approval_id, verdict, out).await;
        }
        let ticket = self.ticket(&h, &open.approval_id, expires_at);
        let record = Record::pending(&h.op_hash, &open.approval_id, expires_at, None);
        out.send_all([
            Effect::Record {
                call_id: h.call_id,
                record,
            },
            Effect::Ticket {
                id: h.id,
                tool: h.call.tool_name,
                ticket,
                moment: Moment::StillPending,
            },
        ]);
    }
}

/// When a state expires: at the approval's own expiry, and at most [`STATE_TTL_SECONDS`] from now.
fn state_expiry(expires_at: Option<&str>) -> i64 {
    let cap = OffsetDateTime::now_utc().unix_timestamp() + STATE_TTL_SECONDS;
    expires_at
        .and_then(|t| OffsetDateTime::parse(t, &Rfc3339).ok())
        .map_or(cap, |t| t.unix_timestamp().min(cap))
}
