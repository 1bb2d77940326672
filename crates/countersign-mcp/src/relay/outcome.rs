//! Floor 0: the audit words the relay writes, in one place (the `outcome` of an outcome line and
//! the `upstream` word of a forwarded call's answer). The audit log's own vocabulary is
//! [`crate::audit`]'s; these are the only spellings of it in the relay.

use countersign_audit::McpOutcome;

/// `outcome`: a call the policy allows, forwarded with no approval.
pub(super) const ALLOWED: McpOutcome = McpOutcome::Allowed;
/// `outcome`: a call refused (policy, evidence, the approver, the service, its arguments).
pub(super) const DENIED: McpOutcome = McpOutcome::Denied;
/// `outcome`: a held call answered with its ticket, awaiting the approver.
pub(super) const PENDING_APPROVAL: McpOutcome = McpOutcome::PendingApproval;
/// `outcome`: an approved call, forwarded once.
pub(super) const EXECUTED: McpOutcome = McpOutcome::Executed;
/// `outcome`: the next round of an approved call the upstream asked input for.
pub(super) const CONTINUED: McpOutcome = McpOutcome::Continued;

/// `upstream`: the forwarded call was never answered.
pub(super) const NO_ANSWER: &str = "no_answer";
/// `upstream`: the answer asks for input (2026-07-28); also that result's `resultType`.
pub(super) const INPUT_REQUIRED: &str = "input_required";

/// `reason_code` of a pending call whose client cancelled it (its approval stays pending).
pub(super) const CLIENT_CANCELLED: &str = "client_cancelled";
/// `reason_code` of a call the policy refuses.
pub(super) const POLICY_DENIED: &str = "policy_denied";
/// `reason_code` of a `tools/call` sent as a notification.
pub(super) const TOOLS_CALL_WITHOUT_ID: &str = "tools_call_without_id";
