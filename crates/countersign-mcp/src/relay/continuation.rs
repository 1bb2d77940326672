//! Floor 6: nested multi round trips (2026-07-28). The upstream of an approved call may itself
//! answer `input_required` with a `requestState` of its own. The client then calls again with
//! that state and its answers; that call is the same approved call going on, not a new one, so
//! it passes once, without a new approval, after the checks below.

use super::interposer::Interposer;
use super::outbox::{Effect, Outbox};
use super::outcome;
use super::release::Refused;
use super::session::{Forwarded, Held};
use super::shared::{Bound, Continuation};
use crate::config::Rule;
use countersign::ReasonCode;
use serde_json::Value;

impl Interposer {
    /// Whether the upstream's answer `frame` to forwarded call `f` asks for input (a held call's
    /// only: an allowed call needs no pass); if so its `requestState` becomes the pass for the
    /// client's answer.
    pub(super) fn asks_for_input(&self, f: &Forwarded, frame: &Value) -> bool {
        let (Some(approval_id), Some(bound)) = (&f.approval_ref, &f.bound) else {
            return false;
        };
        let Some(state) = frame
            .pointer("/result/requestState")
            .and_then(Value::as_str)
            .filter(|_| {
                frame.pointer("/result/resultType") == Some(&Value::from(outcome::INPUT_REQUIRED))
            })
        else {
            return false;
        };
        self.shared.continuations().insert(
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

    /// Whether `state` is a live pass the upstream gave.
    pub(super) fn is_continuation(&self, state: &str) -> bool {
        self.shared.continuations().holds(state)
    }

    /// Held call `h`, which carries the upstream's own `requestState` from an approved call:
    /// forwarded as it came (nothing in it is the interposer's), once, if it is that very call
    /// and the policy still holds rather than refuses it. Audited `continued` with the approval
    /// it continues; the pass is spent either way.
    pub(super) fn continue_call(&self, h: Held, out: &Outbox<'_>) {
        let state = h.request_state.as_deref().unwrap_or_default();
        let Some(pass) = self.shared.continuations().take(state) else {
            return;
        };
        // 1. The same call: the upstream's state must not move onto another call (other
        //    arguments, tool or agent), nor onto another spelling of it (the op_hash reads text
        //    in its NFC form; an upstream given the NFD spelling of an approved path opens
        //    another file). What goes on is the approved call byte for byte.
        if pass.op_hash != h.op_hash || pass.bound != Bound::of(&h.call) {
            let why = Refused::because(ReasonCode::BindingMismatch.as_str());
            out.send(self.refusal(&h, &pass.approval_id, why));
            return;
        }
        // 2. Policy now.
        if self.rule_now(&h.call.tool_name) == Rule::Deny {
            let why = Refused::because(outcome::POLICY_DENIED);
            out.send(self.refusal(&h, &pass.approval_id, why));
            return;
        }
        let forwarded = Forwarded {
            call_id: h.call_id.clone(),
            op_hash: h.op_hash.clone(),
            outcome: outcome::CONTINUED,
            approval_ref: Some(pass.approval_id),
            bound: Some(pass.bound),
        };
        let line = h.line.clone();
        out.send(Effect::forward_held(h, line, forwarded));
    }
}
