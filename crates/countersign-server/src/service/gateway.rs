//! The gateway's side: create a request, follow it, withdraw it, collect its grant.

use super::AppState;
use crate::audit::AuditEvent;
use crate::audit::events::RequestFacts;
use crate::clock::{from_ms, rfc3339};
use crate::config::ApprovalRule;
use crate::error::ApiError;
use crate::store::{
    ApprovalRecord, GrantOutcome, NewApproval, SettleKind, SettleOutcome, Settlement,
};
use countersign::{ApprovalResult, ApprovalStatus, Decision, ReasonCode, b64};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::time::Duration;

/// The profile used when a request names none.
pub const DEFAULT_PROFILE: &str = "countersign.tool-call/1";

/// `POST /v1/approvals`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateRequest {
    pub agent_id: String,
    pub tool_name: String,
    /// Kept as raw text so admission sees the exact bytes (duplicate keys, number ranges).
    pub params: Box<RawValue>,
    #[serde(default)]
    pub profile: Option<String>,
    #[serde(default)]
    pub severity: Option<String>,
}

/// `POST /v1/approvals/{id}/grant`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GrantRequest {
    /// base64url of the call fingerprint: the APPROVED op_hash of the exact call about to run.
    pub fingerprint: String,
}

/// A collected grant.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct GrantReceipt {
    pub approval_id: String,
    pub fingerprint: String,
    pub collected_at: String,
    /// A signed checkpoint of the audit log (C2SP signed note) whose size covers this grant's
    /// line and so the Decision before it: kept by the gateway, it proves later that both are
    /// in the log (`countersign audit verify --checkpoint`). Absent only when the log head could
    /// not be read after the grant committed (logged): the grant is the gateway's either way,
    /// and any later checkpoint (`GET /v1/audit/checkpoint`) covers it too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<String>,
}

/// The JSON text of the action's fields under `profile`.
///
/// The generic tool-call profile signs `{agent_id, tool_name, params}`; a typed profile (such as
/// `countersign.payment/1`) signs the tool's own arguments, so `params` are its fields.
fn fields_json(profile: &str, req: &CreateRequest) -> Result<String, ApiError> {
    if profile != DEFAULT_PROFILE {
        return Ok(req.params.get().to_owned());
    }
    let agent = serde_json::to_string(&req.agent_id).map_err(ApiError::internal)?;
    let tool = serde_json::to_string(&req.tool_name).map_err(ApiError::internal)?;
    Ok(format!(
        "{{\"agent_id\":{agent},\"tool_name\":{tool},\"params\":{}}}",
        req.params.get()
    ))
}

impl AppState {
    /// Create a request: PENDING, or an at-once answer when no human is needed or none can answer.
    pub async fn create(&self, req: CreateRequest) -> Result<ApprovalResult, ApiError> {
        if req.agent_id.is_empty() || req.tool_name.is_empty() {
            return Err(ApiError::bad_request(
                "invalid_request",
                "agent_id and tool_name must be non-empty",
            ));
        }
        let config = self.config();
        let rule = config.rule(&req.tool_name);
        let policy = self.policy(&req.tool_name);
        let profile_id = req
            .profile
            .clone()
            .unwrap_or_else(|| DEFAULT_PROFILE.into());
        let profile = policy.profiles.get(&profile_id).ok_or_else(|| {
            ApiError::unprocessable(
                ReasonCode::ProfileUnknown,
                format!("profile {profile_id:?} is not pinned by this service"),
            )
            .code("profile_unknown")
        })?;
        let fields_json = fields_json(&profile_id, &req)?;
        let fields = countersign::admit_fields(profile, fields_json.as_bytes()).map_err(|e| {
            ApiError::unprocessable(e.reason_code(), e.to_string()).code("action_inadmissible")
        })?;
        let approved = countersign::op_hash(profile, Decision::Approved, &fields);
        let denied = countersign::op_hash(profile, Decision::Denied, &fields);

        let now = self.now_ms();
        let window = rule
            .approval_seconds
            .unwrap_or(config.timeouts.approval_seconds);
        let ttl = i64::try_from(window.saturating_mul(1000)).unwrap_or(i64::MAX);
        let grant_ttl =
            i64::try_from(config.timeouts.grant_seconds.saturating_mul(1000)).unwrap_or(i64::MAX);
        let (status, reason) = if rule.approval == ApprovalRule::None {
            (ApprovalStatus::Approved, None)
        } else if !self.has_eligible_approver(rule) {
            (ApprovalStatus::Denied, Some(ReasonCode::NoEligibleApprover))
        } else {
            (ApprovalStatus::Pending, None)
        };
        let severity = req
            .severity
            .clone()
            .or_else(|| rule.severity.clone())
            .unwrap_or_else(|| "normal".to_owned());
        let approval = NewApproval {
            id: crate::random::approval_id()?,
            created_at: now,
            expires_at: now.saturating_add(ttl),
            agent_id: req.agent_id.clone(),
            tool_name: req.tool_name.clone(),
            profile: profile_id.clone(),
            fields_json,
            severity: severity.clone(),
            op_hash_approved: approved.0,
            op_hash_denied: denied.0,
            status,
            reason_code: reason,
            grant_expires_at: (status == ApprovalStatus::Approved)
                .then(|| now.saturating_add(grant_ttl)),
        };
        let ts = rfc3339(from_ms(now));
        let expires_at = rfc3339(from_ms(approval.expires_at));
        let fingerprint = b64::encode(&approved.0);
        let events = [
            AuditEvent::request(&RequestFacts {
                approval_id: &approval.id,
                ts: &ts,
                agent_id: &approval.agent_id,
                tool_name: &approval.tool_name,
                profile: &profile_id,
                fields: fields.as_value(),
                severity: &severity,
                expires_at: &expires_at,
                fingerprint: &fingerprint,
            }),
            AuditEvent::outcome(
                &approval.id,
                &ts,
                status.as_str(),
                reason.map(ReasonCode::as_str),
            ),
        ];
        let stored = approval.clone();
        self.committing(move |s| s.create(&stored, &events)).await?;
        if status == ApprovalStatus::Pending
            && let Some(notifier) = self.notifier()
        {
            let window = u64::try_from(approval.expires_at.saturating_sub(now)).unwrap_or(0);
            notifier.send(
                notifier.notification(&approval.id, &severity, &expires_at),
                Duration::from_millis(window),
            );
        }
        // The row is exactly what was inserted: answer from it without reading it back.
        Ok(self.result_of(&ApprovalRecord {
            decided_at: (status != ApprovalStatus::Pending).then_some(now),
            reason_code: reason.map(|r| r.as_str().to_owned()),
            evidence_json: None,
            grant_collected_at: None,
            id: approval.id,
            created_at: approval.created_at,
            expires_at: approval.expires_at,
            agent_id: approval.agent_id,
            tool_name: approval.tool_name,
            profile: approval.profile,
            fields_json: approval.fields_json,
            severity: approval.severity,
            op_hash_approved: approval.op_hash_approved,
            op_hash_denied: approval.op_hash_denied,
            status: approval.status,
            grant_expires_at: approval.grant_expires_at,
        }))
    }

    /// Whether at least one enrolled, unrevoked credential belongs to an eligible principal.
    fn has_eligible_approver(&self, rule: &crate::config::ToolRule) -> bool {
        let eligible = self.eligible_principals(rule);
        self.registry().iter().any(|c| {
            !c.record().revoked
                && eligible
                    .as_ref()
                    .is_none_or(|set| set.iter().any(|p| p == c.principal()))
        })
    }

    /// The current result; with `wait`, hold the request until it is settled or `wait` passes.
    ///
    /// A waiting poll registers on its approval's own wake-up channel (at most
    /// `limits.long_poll_waiters` at once, else 429 `too_many_waiters`): only that approval's
    /// settlement wakes it.
    pub async fn redrive(&self, id: &str, wait: Option<u64>) -> Result<ApprovalResult, ApiError> {
        let max = self.config().timeouts.long_poll_max_seconds;
        let wait = Duration::from_secs(wait.unwrap_or(0).min(max));
        if wait.is_zero() {
            let record = self.load(id).await?;
            return Ok(self.result_of(&record));
        }
        let deadline = tokio::time::Instant::now() + wait;
        let guard = self.wait_on(id)?;
        loop {
            // Armed before reading, so a settlement between the read and the wait is not missed.
            let notified = guard.notify().notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let record = self.load(id).await?;
            let now = tokio::time::Instant::now();
            if record.status != ApprovalStatus::Pending || now >= deadline {
                return Ok(self.result_of(&record));
            }
            // Wake at the expiry too, so an unanswered request is reported DENIED promptly.
            let to_expiry = u64::try_from(record.expires_at - self.now_ms()).unwrap_or(0);
            let wake = deadline.min(now + Duration::from_millis(to_expiry.saturating_add(1)));
            tokio::select! {
                () = &mut notified => {}
                () = tokio::time::sleep_until(wake) => {}
            }
        }
    }

    /// Withdraw a PENDING request: DENIED `cancelled`, a settlement, not a human verdict.
    pub async fn withdraw(&self, id: &str) -> Result<ApprovalResult, ApiError> {
        let now = self.now_ms();
        let settlement = Settlement {
            approval_id: id.to_owned(),
            now,
            status: ApprovalStatus::Denied,
            reason_code: Some(ReasonCode::Cancelled),
            kind: SettleKind::Withdrawn,
            grant_expires_at: None,
            event: AuditEvent::settlement(
                id,
                &rfc3339(from_ms(now)),
                ReasonCode::Cancelled.as_str(),
            ),
        };
        let outcome = self.committing(move |s| s.settle(&settlement)).await?;
        self.settled_outcome(outcome)
    }

    /// Turn a settlement outcome into the answer: the settled result, or a 409 with the winner.
    pub(crate) fn settled_outcome(
        &self,
        outcome: SettleOutcome,
    ) -> Result<ApprovalResult, ApiError> {
        match outcome {
            SettleOutcome::Settled(record) => {
                self.wake_long_polls(&record.id);
                Ok(self.result_of(&record))
            }
            SettleOutcome::AlreadySettled(record) => Err(ApiError::conflict(
                "already_settled",
                format!(
                    "{} was already settled {}",
                    record.id,
                    record.status.as_str()
                ),
            )
            .with_result(self.result_of(&record))),
            SettleOutcome::Expired(record) => {
                self.wake_long_polls(&record.id);
                Err(ApiError::conflict(
                    "expired",
                    format!("{} expired before this arrived", record.id),
                )
                .reason(ReasonCode::ExpiredUnanswered)
                .with_result(self.result_of(&record)))
            }
            SettleOutcome::Replayed => Err(ApiError::unprocessable(
                ReasonCode::Replayed,
                "the assertion's nonce was already spent",
            )),
            SettleOutcome::CounterRegression { stored, got } => Err(ApiError::unprocessable(
                ReasonCode::CounterRegression,
                format!("signature counter {got} is not above the stored {stored}"),
            )),
            SettleOutcome::NotFound => Err(ApiError::not_found("approval")),
        }
    }

    /// Collect the single-use grant for the exact call fingerprint.
    pub async fn collect_grant(
        &self,
        id: &str,
        req: GrantRequest,
    ) -> Result<GrantReceipt, ApiError> {
        let fingerprint = b64::decode(&req.fingerprint)
            .ok()
            .and_then(|v| <[u8; 32]>::try_from(v).ok())
            .ok_or_else(|| {
                ApiError::bad_request("invalid_request", "fingerprint must be 32 bytes, base64url")
            })?;
        let now = self.now_ms();
        let ts = rfc3339(from_ms(now));
        let event = AuditEvent::grant(id, &ts, &req.fingerprint);
        let key = id.to_owned();
        let (outcome, head) = self
            .committing(move |s| {
                let outcome = s.collect_grant(&key, &fingerprint, now, &event)?;
                // The log head after the grant committed (in the same blocking task): its size is
                // at least the grant line's seq. The grant is spent by now, so a failure to read
                // the head must not turn its receipt into an error: logged, and no checkpoint.
                let head = matches!(outcome, GrantOutcome::Granted { .. })
                    .then(|| s.audit_head())
                    .and_then(|r| {
                        r.inspect_err(|e| tracing::error!(error = %e, "audit head unreadable"))
                            .ok()
                    });
                Ok((outcome, head))
            })
            .await?;
        match outcome {
            GrantOutcome::Granted { collected_at } => Ok(GrantReceipt {
                approval_id: id.to_owned(),
                fingerprint: req.fingerprint,
                collected_at: rfc3339(from_ms(collected_at)),
                checkpoint: head.and_then(|h| self.sign_checkpoint(h).ok()),
            }),
            GrantOutcome::NotFound => Err(ApiError::not_found("approval")),
            GrantOutcome::NotApproved(record) => {
                // A request whose window closed unanswered is settled first, so the refusal
                // names expiry rather than a pending state that no longer holds.
                let record = self.settle_if_overdue(*record).await?;
                let reason = record
                    .reason_code
                    .as_deref()
                    .and_then(ReasonCode::from_wire)
                    .unwrap_or(ReasonCode::Pending);
                Err(ApiError::conflict(
                    "not_approved",
                    format!("{id} is {}, nothing to grant", record.status.as_str()),
                )
                .reason(reason)
                .with_result(self.result_of(&record)))
            }
            GrantOutcome::AlreadyCollected { collected_at } => Err(ApiError::conflict(
                "grant_already_collected",
                format!(
                    "the grant of {id} was collected at {}; a grant is single-use",
                    rfc3339(from_ms(collected_at))
                ),
            )
            .reason(ReasonCode::Replayed)),
            GrantOutcome::FingerprintMismatch => Err(ApiError::conflict(
                "fingerprint_mismatch",
                "the call fingerprint differs from the approved action",
            )
            .reason(ReasonCode::BindingMismatch)),
            GrantOutcome::Expired => Err(ApiError::conflict(
                "grant_expired",
                format!("the grant of {id} expired"),
            )
            .reason(ReasonCode::Stale)),
        }
    }
}
