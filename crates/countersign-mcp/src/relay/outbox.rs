//! Floor 4: the outbox. Every effect of the relay is a value ([`Effect`]) that the deciding code
//! hands here: a line upstream, an answer to the client, a refusal, an audit line. Deciding and
//! doing stay apart, and each effect's bookkeeping (the id map of a forward, the cancelled check
//! of an answer, the flush of an outcome that is not `allowed`) is written once, here.

use super::interposer::{Interposer, Lines};
use super::outcome;
pub(super) use super::record::Record;
use super::session::{Forwarded, Track};
use super::upstream_reader::id_key;
use crate::answer::{self, Moment, Ticket};
use crate::audit::Outcome;
use crate::config::Rule;
use serde_json::Value;
use std::ops::Range;

/// One thing the relay does.
#[derive(Debug)]
pub(super) enum Effect {
    /// A line to the upstream exactly as it is.
    Upstream(String),
    /// A frame to the client that answers no call being decided (an admission error, a task's
    /// view, an answer the interposer makes to a request it does not forward).
    Client(String),
    /// The interposer's own answer to call `id`: not sent if the client cancelled the call (a
    /// cancelled request gets no answer); on 2026-07-28 its result says it is complete.
    Answer { id: Value, frame: Value },
    /// The approval block of call `id`, as this session's client is shown it at `moment`.
    Ticket {
        id: Value,
        tool: String,
        ticket: Ticket,
        moment: Moment,
    },
    /// A refusal of call `id`: its `denied` outcome line, then the answer that says why.
    Refuse {
        call_id: String,
        id: Value,
        tool: String,
        ticket: Ticket,
    },
    /// Client request `id` forwarded under an id of the interposer's own (`id_at`: where its
    /// id is in `line`, if known), its answer read as `track` says.
    Forward {
        line: String,
        id: Value,
        id_at: Option<Range<usize>>,
        track: Track,
    },
    /// A task's call, whose line already carries the interposer's own id `key`.
    ForwardOwn {
        line: String,
        key: String,
        forwarded: Forwarded,
    },
    /// The intent line of a call, written before anything is done with it.
    Intent {
        call_id: String,
        tool: String,
        op_hash: String,
        rule: Rule,
    },
    /// An outcome line.
    Record { call_id: String, record: Record },
    /// Forget call `id` without answering it (the client cancelled it).
    Forget { id: Value },
    /// The client stopped waiting for call `id` without a word (HTTP: it closed its request):
    /// as for its cancel, no answer reaches it and its task is told; its approval stays pending.
    Abandon { id: Value },
    /// The request sent upstream under id key `key` gets no answer (the upstream could not be
    /// reached, its answer broke off, or the session ended): a forwarded call's outcome line
    /// says `no_answer`.
    NoAnswer { key: String },
}

/// Where effects are done: this session's state and log, and its two directions (an upstream
/// answer read for the HTTP transport has no channel here: its caller sends the line).
pub(super) struct Outbox<'a> {
    relay: &'a Interposer,
    client: Option<&'a Lines>,
    upstream: Option<&'a Lines>,
}

impl<'a> Outbox<'a> {
    pub(super) fn new(relay: &'a Interposer, client: &'a Lines, upstream: &'a Lines) -> Self {
        Self {
            relay,
            client: Some(client),
            upstream: Some(upstream),
        }
    }

    /// An outbox towards the client only (an admission error; a late answer).
    pub(super) fn client(relay: &'a Interposer, client: &'a Lines) -> Self {
        Self {
            relay,
            client: Some(client),
            upstream: None,
        }
    }

    /// An outbox for audit lines and session state only.
    pub(super) fn log(relay: &'a Interposer) -> Self {
        Self {
            relay,
            client: None,
            upstream: None,
        }
    }

    /// Do `effect`. Whether what it sent went out (an answer to a cancelled call does not).
    pub(super) fn send(&self, effect: Effect) -> bool {
        match effect {
            Effect::Upstream(line) => to(self.upstream, line),
            Effect::Client(line) => to(self.client, line),
            Effect::Answer { id, frame } => self.answer(&id, frame),
            Effect::Ticket {
                id,
                tool,
                ticket,
                moment,
            } => self.ticket(&id, &tool, &ticket, moment),
            Effect::Refuse {
                call_id,
                id,
                tool,
                ticket,
            } => {
                self.record(&call_id, &Record::denied(&ticket));
                self.ticket(&id, &tool, &ticket, Moment::Denied)
            }
            Effect::Forward {
                line,
                id,
                id_at,
                track,
            } => self.forward(line, &id, id_at, track),
            Effect::ForwardOwn {
                line,
                key,
                forwarded,
            } => {
                self.relay.session().forwarded.insert(key, forwarded);
                to(self.upstream, line)
            }
            Effect::Intent {
                call_id,
                tool,
                op_hash,
                rule,
            } => {
                self.intent(&call_id, &tool, &op_hash, rule);
                true
            }
            Effect::Record { call_id, record } => {
                self.record(&call_id, &record);
                true
            }
            Effect::Forget { id } => {
                self.relay.session().calls.remove(&id_key(&id));
                true
            }
            Effect::Abandon { id } => self.abandon(&id),
            Effect::NoAnswer { key } => self.no_answer(&key),
        }
    }

    /// Do each of `effects`, in order.
    pub(super) fn send_all(&self, effects: impl IntoIterator<Item = Effect>) {
        for effect in effects {
            self.send(effect);
        }
    }

    /// Write the intent line of a call.
    fn intent(&self, call_id: &str, tool: &str, op_hash: &str, rule: Rule) {
        let shared = &self.relay.shared;
        let (agent, server) = (&self.relay.agent_id, &shared.server_id);
        shared
            .audit
            .call(call_id, agent, server, tool, op_hash, rule.as_str());
        if rule != Rule::Allow {
            // A held or refused call's record is never left in the queue (see `record`).
            shared.audit.flush();
        }
    }

    /// Write an outcome line. Only the outcome of an allowed call may wait in the writer's
    /// queue (a crash loses at most the record of calls that needed no approval); every other
    /// outcome is written before the client, the service or a restarted interposer can act on
    /// it: the open tickets a restart finds are read back from these lines.
    fn record(&self, call_id: &str, r: &Record) {
        let audit = &self.relay.shared.audit;
        audit.outcome(
            call_id,
            &Outcome {
                outcome: r.outcome,
                op_hash: &r.op_hash,
                approval_id: r.approval_id.as_deref(),
                approval_ref: r.approval_ref.as_deref(),
                reason_code: r.reason_code.as_deref(),
                expires_at: r.expires_at.as_deref(),
                upstream: r.upstream,
            },
        );
        if r.outcome != outcome::ALLOWED {
            audit.flush();
        }
    }

    /// Call `id` is cancelled as a `notifications/cancelled` would (no answer reaches the
    /// client, its task is told), with no cancel line to pass on.
    fn abandon(&self, id: &Value) -> bool {
        if let Some(call) = self.relay.session().calls.get_mut(&id_key(id)) {
            call.cancel();
        }
        true
    }

    /// Forget the request sent upstream as `key`; a call's outcome line says it got no answer.
    fn no_answer(&self, key: &str) -> bool {
        let forwarded = {
            let mut s = self.relay.session();
            s.answered(key);
            s.initialize_ids.retain(|i| i != key);
            s.list_ids.retain(|i| i != key);
            s.discover_ids.retain(|i| i != key);
            s.forwarded.remove(key)
        };
        if let Some(f) = forwarded {
            let call_id = f.call_id.clone();
            self.record(&call_id, &Record::answered(f, outcome::NO_ANSWER));
        }
        true
    }

    fn ticket(&self, id: &Value, tool: &str, ticket: &Ticket, moment: Moment) -> bool {
        let client = self.relay.session().client.clone();
        let held_as = self.relay.config().held_as;
        let frame = answer::respond(id, tool, ticket, moment, &client, held_as);
        self.answer(id, frame)
    }

    fn answer(&self, id: &Value, mut frame: Value) -> bool {
        let call = self.relay.session().calls.remove(&id_key(id));
        if let Some(call) = call {
            if call.cancelled {
                tracing::debug!(id = %id, "answer dropped: the client cancelled the call");
                return false;
            }
            if call.modern {
                answer::mark_complete(&mut frame);
            }
        }
        to(self.client, frame.to_string())
    }

    /// Forward client request `id` under a fresh id of the interposer's own, remembering whose
    /// it is: the upstream's answer goes back under the client's id, exactly as the client wrote
    /// it. Only the id's bytes change; every other byte of the line is the client's.
    fn forward(&self, line: String, id: &Value, id_at: Option<Range<usize>>, track: Track) -> bool {
        let Some((id_at, raw)) = id_at
            .or_else(|| crate::splice::member(&line, "id"))
            .and_then(|at| Some((at.clone(), line.get(at)?.to_owned())))
        else {
            // An admitted request has its id: this does not happen.
            tracing::error!("a request without a readable id was not forwarded");
            return false;
        };
        let upstream = self.relay.shared.next_upstream_id();
        let client = super::session::ClientId {
            key: id_key(id),
            raw,
        };
        let line = crate::splice::replace(&line, id_at, &upstream);
        let mut s = self.relay.session();
        let call = s.calls.remove(&client.key);
        s.outbound_by_client
            .insert(client.key.clone(), upstream.clone());
        s.outbound.insert(upstream.clone(), client);
        match track {
            Track::Plain => {}
            Track::Initialize => s.initialize_ids.push(upstream.clone()),
            Track::List => s.list_ids.push(upstream.clone()),
            Track::Discover => s.discover_ids.push(upstream.clone()),
            Track::Call(f) => {
                s.forwarded.insert(upstream.clone(), f);
            }
        }
        // Under the lock: a cancel read from now on is forwarded after the call, never before.
        let sent = to(self.upstream, line);
        if let Some(cancel) = call.and_then(|c| c.cancel_line)
            && let Some(cancel) = crate::splice::with_request_id(&cancel, &upstream)
        {
            to(self.upstream, cancel);
        }
        sent
    }
}

/// Send `line` on `lines`; a direction this outbox has no channel for sends nothing.
fn to(lines: Option<&Lines>, line: String) -> bool {
    match lines {
        Some(lines) => lines.send(line).is_ok(),
        None => {
            tracing::debug!("a line for a direction this outbox does not hold: not sent");
            false
        }
    }
}

impl Effect {
    /// Held call `h` forwarded as `line`, its answer awaited for `forwarded`'s outcome: under a
    /// fresh id of the interposer's, or (a task's call) under the id its line already carries.
    pub(super) fn forward_held(
        h: super::session::Held,
        line: String,
        forwarded: Forwarded,
    ) -> Self {
        if h.own_id {
            return Self::ForwardOwn {
                line,
                key: h.key(),
                forwarded,
            };
        }
        Self::Forward {
            line,
            id: h.id,
            id_at: None,
            track: Track::Call(forwarded),
        }
    }
}

/// The interposer's own JSON-RPC error for request `id`.
pub(super) fn rpc_error(id: &Value, code: i64, message: &str) -> Value {
    serde_json::json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}
