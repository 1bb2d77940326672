//! Floor 6: the one ticket opener. A held call's first arrival (plain or as a task) asks the
//! service for an approval here; a pending approval becomes the call's open ticket, which every
//! identical call (this session's, another's, or after a restart) then finds by op_hash.

use super::interposer::Interposer;
use super::outbox::{Effect, Outbox, Record};
use super::release::Refused;
use super::session::Held;
use crate::audit::OpenTicket;
use countersign::{ApprovalResult, ApprovalStatus, ReasonCode};

/// What the service made of a new approval request.
pub(super) enum Opened {
    /// Pending: the ticket is open.
    Pending(OpenTicket),
    /// Decided at once (a tool the service does not require approval for, or no eligible
    /// approver): no ticket; the verdict goes through the same checks as a decided retry.
    Decided(String, Box<ApprovalResult>),
}

impl Interposer {
    /// Ask the service for an approval of held call `h`. `None` once the client was told why
    /// there is none.
    pub(super) async fn open_approval(&self, h: &Held, out: &Outbox<'_>) -> Option<Opened> {
        let result = match self.shared.gateway.submit(&h.call).await {
            Ok(result) => result,
            Err(refusal) => {
                let approval_id = refusal.approval_id.clone().unwrap_or_default();
                out.send(self.refusal(h, &approval_id, Refused::by(&refusal)));
                return None;
            }
        };
        let Some(approval_id) = result.approval_id.clone() else {
            let why = Refused::because(ReasonCode::ResultMalformed.as_str());
            out.send(self.refusal(h, "", why));
            return None;
        };
        if result.status != ApprovalStatus::Pending {
            return Some(Opened::Decided(approval_id, Box::new(result)));
        }
        let open = OpenTicket {
            approval_id,
            expires_at: result.expires_at,
        };
        self.open_ticket(&h.op_hash, open.clone());
        Some(Opened::Pending(open))
    }

    /// This session's client waits on `approval_id` for held call `h` (`cancel_on_disconnect`
    /// covers it), and the log says the call is pending: the effect to record that.
    pub(super) fn waits(&self, h: &Held, approval_id: &str, expires_at: Option<&str>) -> Effect {
        self.held_here(&h.op_hash, approval_id);
        Effect::Record {
            call_id: h.call_id.clone(),
            record: Record::pending(&h.op_hash, approval_id, expires_at, None),
        }
    }
}
