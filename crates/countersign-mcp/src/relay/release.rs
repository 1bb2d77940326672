//! Floor 5: the release of a held call. [`Interposer::release`] is every check an approval must
//! pass before the call it approves runs, in order, one per line; it returns a value and writes
//! nothing. [`Interposer::settle`] is the one way into it: every path that ends with a verdict (a
//! parked retry, a call decided at once, a task's driver) hands that verdict here, and only here
//! are the results turned into effects for the outbox.

use super::interposer::Interposer;
use super::outbox::{Effect, Outbox, Record};
use super::outcome;
use super::session::{Forwarded, Held};
use super::shared::Bound;
use crate::answer;
use crate::audit::OpenTicket;
use crate::config::Rule;
use countersign::{ApprovalResult, ApprovalStatus, ReasonCode};
use countersign_client::Refusal;
use serde::Deserialize;
use serde_json::value::RawValue;

/// What the release checks decided.
#[derive(Debug)]
pub(super) enum Release {
    /// Every check passed and the grant is spent: forward this line, once.
    Forward(String),
    /// A check failed: the call is refused, and nothing runs.
    Refused(Refused),
    /// The client cancelled the call: nothing was collected, and the approval stays usable.
    Cancelled,
}

/// Why a held call is refused, as its ticket will say.
#[derive(Debug)]
pub(super) struct Refused {
    /// The reason code the client and the log see.
    pub(super) reason: String,
    /// The approval's expiry, when the ticket shows it.
    pub(super) expires_at: Option<String>,
    /// The service's or the verifier's own words, for the operator's log.
    pub(super) detail: Option<String>,
}

impl Refused {
    pub(super) fn because(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            expires_at: None,
            detail: None,
        }
    }

    /// A refusal from the service or the verifier.
    pub(super) fn by(refusal: &Refusal) -> Self {
        Self {
            detail: Some(refusal.detail.clone()),
            ..Self::because(refusal.reason_code.as_str())
        }
    }

    fn until(self, expires_at: Option<String>) -> Self {
        Self { expires_at, ..self }
    }
}

impl Interposer {
    /// The checks a settled approval `result` of held call `h` passes before `h` runs, in order.
    /// Local policy, not the protocol, decides steps 1 and 3's approver rule; the evidence check
    /// is docs/SPEC.md's verification, offline.
    pub(super) async fn release(&self, h: &mut Held, result: ApprovalResult) -> Release {
        let tool = h.call.tool_name.as_str();
        let expires_at = result.expires_at.clone();
        // 1. Policy now: a grant never unblocks a call the policy in force (`set_config`) refuses.
        if self.rule_now(tool) == Rule::Deny {
            return Release::Refused(Refused::because(outcome::POLICY_DENIED).until(expires_at));
        }
        // 2. Approval status: a refusal is final, and its reason is the approver's.
        if result.status == ApprovalStatus::Denied {
            let reason = (result.reason_code.clone())
                .unwrap_or_else(|| ReasonCode::ApproverRefused.as_str().to_owned());
            return Release::Refused(Refused::because(reason).until(expires_at));
        }
        // 3. Evidence, verified before anything is collected (forged or mismatched evidence must
        //    not burn the grant), under the approver rule in force now, not the service's.
        let approvers = self.config().approver_policy(tool);
        let approval = match self
            .shared
            .gateway
            .verify_result_under(&h.call, result, &approvers)
        {
            Ok(approval) => approval,
            Err(refusal) => return Release::Refused(Refused::by(&refusal)),
        };
        // 4. The upstream line, settled before the grant is spent: the hashed bytes, without the
        //    interposer's own multi round-trip members.
        let own_state = h.request_state.is_some();
        let Some(line) = upstream_line(&h.line, own_state, h.own_response, &h.call.params_json)
        else {
            return Release::Refused(Refused::because(ReasonCode::BindingMismatch.as_str()));
        };
        // 5. Not cancelled: a client that cancelled the call does not get it run behind its back.
        if h.cancelled() {
            return Release::Cancelled;
        }
        // 6. Grant: single use, collected last, so nothing above can waste it.
        if let Err(refusal) = self.shared.gateway.collect_grant(&approval, &h.call).await {
            return Release::Refused(Refused::by(&refusal));
        }
        Release::Forward(line)
    }

    /// The end of held call `h` once the service gave its `verdict` on `approval_id`: released
    /// and forwarded once, refused, or (cancelled by its client) left pending for its next try.
    pub(super) async fn settle(
        &self,
        mut h: Held,
        approval_id: &str,
        verdict: Result<ApprovalResult, Refusal>,
        out: &Outbox<'_>,
    ) {
        // Whatever happens next, this ticket is used up: an identical call after this one is a
        // new approval.
        self.drop_ticket(&h.op_hash);
        let result = match verdict {
            Ok(result) => result,
            Err(refusal) => {
                out.send(self.refusal(&h, approval_id, Refused::by(&refusal)));
                return;
            }
        };
        let expires_at = result.expires_at.clone();
        match self.release(&mut h, result).await {
            Release::Forward(line) => {
                let forwarded = Forwarded {
                    call_id: h.call_id.clone(),
                    op_hash: h.op_hash.clone(),
                    outcome: outcome::EXECUTED,
                    approval_ref: Some(approval_id.to_owned()),
                    bound: Some(Bound::of(&h.call)),
                };
                out.send(Effect::forward_held(h, line, forwarded));
            }
            Release::Refused(why) => {
                out.send(self.refusal(&h, approval_id, why));
            }
            Release::Cancelled => {
                // The grant stays uncollected and the ticket open, for the next identical call.
                let open = OpenTicket {
                    approval_id: approval_id.to_owned(),
                    expires_at: expires_at.clone(),
                };
                self.open_ticket(&h.op_hash, open);
                self.held_here(&h.op_hash, approval_id);
                let record = Record::pending(
                    &h.op_hash,
                    approval_id,
                    expires_at.as_deref(),
                    Some(outcome::CLIENT_CANCELLED),
                );
                out.send_all([
                    Effect::Forget { id: h.id },
                    Effect::Record {
                        call_id: h.call_id,
                        record,
                    },
                ]);
            }
        }
    }

    /// The refusal of held call `h` on `approval_id` (empty: no approval was made for it).
    pub(super) fn refusal(&self, h: &Held, approval_id: &str, why: Refused) -> Effect {
        if let Some(detail) = &why.detail {
            tracing::info!(
                approval_id,
                reason = why.reason,
                detail,
                "held call refused"
            );
        }
        let mut ticket = self.ticket(h, approval_id, why.expires_at.as_deref());
        if approval_id.is_empty() {
            ticket.approval_id = None;
            ticket.approve_url = None;
        }
        ticket.denied = Some(why.reason);
        Effect::Refuse {
            call_id: h.call_id.clone(),
            id: h.id.clone(),
            tool: h.call.tool_name.clone(),
            ticket,
        }
    }
}

/// The line to forward for an approved held call: `line` itself, or, when the client answered
/// the interposer's multi round-trip request, `line` without the `requestState` the interposer
/// sealed (`own_state`) and without its `inputResponses` entry (`own_response`; an
/// `inputResponses` left empty goes too); the upstream's own entries stay. Members are cut out
/// of the text, never re-serialized; `None` if the result's `arguments` are not exactly
/// `arguments` (the hashed bytes), which would make forwarding it unsafe.
pub(super) fn upstream_line(
    line: &str,
    own_state: bool,
    own_response: bool,
    arguments: &str,
) -> Option<String> {
    if !own_state && !own_response {
        return Some(line.to_owned());
    }
    let at = crate::splice::member(line, "params")?;
    let mut params = line.get(at.clone())?.to_owned();
    if own_state {
        params = crate::splice::without(&params, "requestState")?;
    }
    if own_response {
        let r = crate::splice::member(&params, "inputResponses")?;
        let rest = crate::splice::without(params.get(r.clone())?, answer::INPUT_REQUEST_KEY)?;
        params = if crate::splice::is_empty_object(&rest) {
            crate::splice::without(&params, "inputResponses")?
        } else {
            format!("{}{rest}{}", params.get(..r.start)?, params.get(r.end..)?)
        };
    }
    let out = format!("{}{params}{}", line.get(..at.start)?, line.get(at.end..)?);
    // The line made here is checked by reading it back: its arguments are the hashed bytes.
    #[derive(Deserialize)]
    struct Check<'a> {
        #[serde(borrow)]
        params: Arguments<'a>,
    }
    #[derive(Deserialize)]
    struct Arguments<'a> {
        #[serde(borrow, default)]
        arguments: Option<&'a RawValue>,
    }
    let Check { params } = serde_json::from_str(&out).ok()?;
    (params.arguments.map_or("{}", RawValue::get) == arguments).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ARGS: &str = r#"{"path" : "a"}"#;

    fn line(params_tail: &str) -> String {
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"write_file","arguments":{ARGS}{params_tail}}}}}"#
        )
    }

    #[test]
    fn the_interposers_own_members_are_cut_and_every_other_byte_stays() {
        let key = answer::INPUT_REQUEST_KEY;
        let sent = line(&format!(
            r#","requestState":"sealed","inputResponses":{{"{key}":{{"ok":true}},"q":{{"a":1}}}}"#
        ));
        let out = upstream_line(&sent, true, true, ARGS).unwrap();
        assert_eq!(out, line(r#","inputResponses":{"q":{"a":1}}"#));
        // Only the interposer's answer: `inputResponses` goes as a whole.
        let sent = line(&format!(r#","inputResponses":{{"{key}":{{}}}}"#));
        assert_eq!(upstream_line(&sent, false, true, ARGS).unwrap(), line(""));
    }

    #[test]
    fn a_line_with_none_of_them_is_forwarded_as_it_came_and_other_arguments_are_refused() {
        let sent = line(r#","requestState":"the-upstreams""#);
        assert_eq!(upstream_line(&sent, false, false, ARGS).unwrap(), sent);
        // The bytes approved are not the bytes in the line: nothing is forwarded.
        let other = line(r#","requestState":"sealed""#);
        assert_eq!(upstream_line(&other, true, false, r#"{"path":"a"}"#), None);
    }
}
