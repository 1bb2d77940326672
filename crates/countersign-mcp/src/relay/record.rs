//! Floor 4, beside the outbox: an outcome line as a value ([`Record`]). Each outcome word is
//! chosen in one of its constructors; the outbox writes it.

use super::outcome;
use super::session::Forwarded;
use crate::answer::Ticket;
use countersign_audit::McpOutcome;

/// An outcome line's members (see [`crate::audit::Outcome`]); built by the constructors below,
/// so each outcome word is chosen in one place.
#[derive(Debug)]
pub(super) struct Record {
    pub(super) outcome: McpOutcome,
    pub(super) op_hash: String,
    pub(super) approval_id: Option<String>,
    pub(super) approval_ref: Option<String>,
    pub(super) reason_code: Option<String>,
    pub(super) expires_at: Option<String>,
    pub(super) upstream: Option<&'static str>,
}

impl Record {
    /// The line's outcome word and op_hash, every other member absent.
    fn of(outcome: McpOutcome, op_hash: String) -> Self {
        Self {
            outcome,
            op_hash,
            approval_id: None,
            approval_ref: None,
            reason_code: None,
            expires_at: None,
            upstream: None,
        }
    }

    /// A held call answered with its ticket (or, with `reason`, dropped while pending).
    pub(super) fn pending(
        op_hash: &str,
        approval_id: &str,
        expires_at: Option<&str>,
        reason: Option<&str>,
    ) -> Self {
        Self {
            approval_id: Some(approval_id.to_owned()),
            expires_at: expires_at.map(str::to_owned),
            reason_code: reason.map(str::to_owned),
            ..Self::of(outcome::PENDING_APPROVAL, op_hash.to_owned())
        }
    }

    /// A refused call, with its ticket's reason.
    pub(super) fn denied(ticket: &Ticket) -> Self {
        Self {
            approval_id: ticket.approval_id.clone(),
            reason_code: ticket.denied.clone(),
            ..Self::of(outcome::DENIED, ticket.op_hash.clone())
        }
    }

    /// Forwarded call `f`, now that the upstream answered it `upstream`.
    pub(super) fn answered(f: Forwarded, upstream: &'static str) -> Self {
        Self {
            approval_ref: f.approval_ref,
            upstream: Some(upstream),
            ..Self::of(f.outcome, f.op_hash)
        }
    }
}
