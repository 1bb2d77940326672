//! The gateway's side: create a request, follow it, withdraw it, collect its grant.

use super::AppState;
use crate::audit::AuditEvent;
use crate::audit::events::RequestFacts;
use crate::clock::{from_ms, rfc3339};
use crate::config::{ApprovalRule, Severity};
use crate::error::ApiError;
use crate::store::{
    ApprovalRecord, GrantOutcome, NewApproval, SettleKind, SettleOutcome, Settlement,
};
use countersign::{
    Action, ApprovalResult, ApprovalStatus, CanonError, Decision, NfcMode, NonNfc, Profile,
    ReasonCode, b64,
};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use sha2::{Digest as _, Sha256};
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
    #[serde(default, deserialize_with = "not_null::profile")]
    pub profile: Option<String>,
    #[serde(default, deserialize_with = "not_null::severity")]
    pub severity: Option<String>,
    /// The MCP server the call goes to: required by, and only allowed with, the MCP tool-call
    /// profile, which signs it beside the agent and the tool.
    #[serde(default, deserialize_with = "not_null::server_id")]
    pub server_id: Option<String>,
    /// The approval this request revises (the same gateway's): recorded and linked, never
    /// inherited — the revision is decided on its own.
    #[serde(default, deserialize_with = "not_null::revises")]
    pub revises: Option<String>,
}

/// The MCP interposer's profile: `{agent_id, server_id, tool_name, params}`.
pub(crate) const MCP_PROFILE: &str = "countersign.mcp-tool-call/1";

/// Optional request members: absent takes the default, `null` is refused (the core's rule,
/// docs/SPEC.md §2). For `tool_name` of a grant, a `null` read as absent would skip the check
/// that the grant is spent on the approved tool.
mod not_null {
    use serde::Deserializer;

    pub(super) fn profile<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        countersign::present_not_null(d, "profile")
    }
    pub(super) fn severity<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        countersign::present_not_null(d, "severity")
    }
    pub(super) fn tool_name<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        countersign::present_not_null(d, "tool_name")
    }
    pub(super) fn server_id<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        countersign::present_not_null(d, "server_id")
    }
    pub(super) fn revises<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        countersign::present_not_null(d, "revises")
    }
}

/// Longest `agent_id` and `tool_name`, in bytes (UTF-8). Both are shown to the approver and
/// written into every audit line of the request; 256 bytes is far above any real tool or agent
/// name and far below what would make a request a storage or display attack.
pub const MAX_AGENT_TOOL_BYTES: usize = 256;

/// Check `agent_id` / `tool_name`: non-empty, at most [`MAX_AGENT_TOOL_BYTES`], no control characters.
fn check_name(member: &str, value: &str) -> Result<(), ApiError> {
    let problem = if value.is_empty() {
        Some("must not be empty".to_owned())
    } else if value.len() > MAX_AGENT_TOOL_BYTES {
        Some(format!(
            "is {} bytes, more than the {MAX_AGENT_TOOL_BYTES} allowed",
            value.len()
        ))
    } else {
        value
            .chars()
            .find(|c| c.is_control())
            .map(|c| format!("contains the control character U+{:04X}", u32::from(c)))
    };
    match problem {
        None => Ok(()),
        Some(problem) => Err(ApiError::bad_request(
            "invalid_request",
            format!("{member} {problem}"),
        )),
    }
}

/// The request's severity, else its tool rule's, else `normal`; a request naming anything but
/// `low`, `normal`, `high` or `critical` is refused.
fn severity_of(req: &CreateRequest, rule: &crate::config::ToolRule) -> Result<Severity, ApiError> {
    match req.severity.as_deref() {
        None => Ok(rule.severity.unwrap_or_default()),
        Some(text) => Severity::from_wire(text).ok_or_else(|| {
            ApiError::bad_request(
                "invalid_request",
                "severity must be one of low, normal, high, critical",
            )
        }),
    }
}

/// Whether `gateway` created this approval. Anything else is answered exactly like an unknown
/// id, so a gateway cannot even learn that another gateway's approval exists.
fn owned_by(record: &ApprovalRecord, gateway: &str) -> Result<(), ApiError> {
    if record.gateway.as_deref() == Some(gateway) {
        Ok(())
    } else {
        Err(ApiError::not_found("approval"))
    }
}

/// `POST /v1/approvals/{id}/grant`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GrantRequest {
    /// base64url of the call fingerprint: the APPROVED op_hash of the exact call about to run.
    pub fingerprint: String,
    /// The tool about to run. When given, it must be the approval's tool: a typed profile's
    /// fingerprint does not cover the tool, so this is what stops its grant from being spent on
    /// another tool with the same arguments. The reference client always sends it.
    #[serde(default, deserialize_with = "not_null::tool_name")]
    pub tool_name: Option<String>,
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
///
/// The MCP tool-call profile signs `{agent_id, server_id, tool_name, params}`, all but `params`
/// taken from this request, so (like the generic profile) the signed operation is the request's
/// by construction. `server_id` is refused with any other profile: it would be signed by none.
fn fields_json(profile: &str, req: &CreateRequest) -> Result<String, ApiError> {
    let agent = serde_json::to_string(&req.agent_id).map_err(ApiError::internal)?;
    let tool = serde_json::to_string(&req.tool_name).map_err(ApiError::internal)?;
    match (profile, req.server_id.as_deref()) {
        (MCP_PROFILE, Some(server)) => {
            check_name("server_id", server)?;
            let server = serde_json::to_string(server).map_err(ApiError::internal)?;
            Ok(format!(
                "{{\"agent_id\":{agent},\"server_id\":{server},\"tool_name\":{tool},\"params\":{}}}",
                req.params.get()
            ))
        }
        (MCP_PROFILE, None) => Err(ApiError::bad_request(
            "invalid_request",
            "server_id is required with the MCP tool-call profile",
        )),
        (_, Some(_)) => Err(ApiError::bad_request(
            "invalid_request",
            format!("server_id is signed only by {MCP_PROFILE}, not by {profile}"),
        )),
        (DEFAULT_PROFILE, None) => Ok(format!(
            "{{\"agent_id\":{agent},\"tool_name\":{tool},\"params\":{}}}",
            req.params.get()
        )),
        (_, None) => Ok(req.params.get().to_owned()),
    }
}

/// One string of a request that is not in NFC, as the service reports it: the JSON pointer into
/// the fields and the code points NFC changes, as `U+212A`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotNfc {
    pub path: String,
    pub code_points: Vec<String>,
}

impl From<&NonNfc> for NotNfc {
    fn from(n: &NonNfc) -> Self {
        Self {
            path: n.path.clone(),
            code_points: n
                .code_points
                .iter()
                .map(|c| format!("U+{:04X}", u32::from(*c)))
                .collect(),
        }
    }
}

/// Admit the submitted fields under `profile` and the tool's NFC rule.
///
/// A string NFC would change is refused under `require` with 422 `not_nfc`, naming every such
/// string (not only the first the core stops at), so the gateway can fix them all at once.
fn admit(
    profile: &Profile,
    fields_json: &str,
    nfc: NfcMode,
) -> Result<countersign::CanonicalFields, ApiError> {
    countersign::admit_fields_with(profile, fields_json.as_bytes(), nfc).map_err(|e| {
        let CanonError::NotNfc(first) = &e else {
            return ApiError::unprocessable(e.reason_code(), e.to_string())
                .code("action_inadmissible");
        };
        let all = countersign::nfc_changes(profile, fields_json.as_bytes())
            .ok()
            .filter(|all| !all.is_empty())
            .unwrap_or_else(|| vec![first.clone()]);
        let message = all
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ");
        let mut err = ApiError::unprocessable(e.reason_code(), message).code("not_nfc");
        err.not_nfc = Some(all.iter().map(NotNfc::from).collect());
        err
    })
}

/// Add the `revises` member to a request line when the request names the approval it revises.
fn revision_link(line: AuditEvent, revises: Option<&str>) -> AuditEvent {
    match revises {
        Some(id) => line.with_member("revises", serde_json::Value::from(id)),
        None => line,
    }
}

/// Lowercase hex of SHA-256.
fn sha256_hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    Sha256::digest(bytes)
        .iter()
        .fold(String::with_capacity(64), |mut out, b| {
            let _ = write!(out, "{b:02x}");
            out
        })
}

impl AppState {
    /// Create a request for `gateway`: PENDING, or an at-once answer when no human is needed or
    /// none can answer.
    ///
    /// Admission, in order: the profile is pinned; the fields pass the profile and the tool's NFC
    /// rule; the operation is bound (a typed profile that does not sign the tool name is usable
    /// only by the tool configured for it, the same check the core verifier makes offline with the
    /// policy's `profile_tools`). Only then is any rule of the tool applied.
    pub async fn create(
        &self,
        req: CreateRequest,
        gateway: &str,
    ) -> Result<ApprovalResult, ApiError> {
        check_name("agent_id", &req.agent_id)?;
        check_name("tool_name", &req.tool_name)?;
        let config = self.config();
        let rule = config.rule(&req.tool_name);
        let severity = severity_of(&req, rule)?.as_str().to_owned();
        let policy = self.policy(&req.tool_name);
        let profile_id = req
            .profile
            .clone()
            .unwrap_or_else(|| DEFAULT_PROFILE.into());
        let profile = self.profiles().get(&profile_id).ok_or_else(|| {
            ApiError::unprocessable(
                ReasonCode::ProfileUnknown,
                format!("profile {profile_id:?} is not pinned by this service"),
            )
            .code("profile_unknown")
        })?;
        // A standing grant is proposed through its own endpoint, which builds its fields from a
        // validated scope; here it would be an ordinary approval of arbitrary fields.
        if profile_id == countersign::STANDING_GRANT_PROFILE {
            return Err(ApiError::unprocessable(
                ReasonCode::ActionInadmissible,
                "a standing grant is proposed with POST /v1/standing-grants",
            )
            .code("action_inadmissible"));
        }
        let fields_json = fields_json(&profile_id, &req)?;
        let fields = admit(profile, &fields_json, rule.nfc)?;
        // A profile that signs its operation has its `tool_name` built from this request's
        // tool_name just above, so the binding holds by construction (and the core re-checks it
        // at every verdict); checking it here would only admit the fields a second time.
        if !countersign::signs_operation(profile) {
            let action = Action::new(profile_id.clone(), fields_json.as_bytes().to_vec())
                .with_tool(req.tool_name.clone());
            policy.check_operation(&action, profile).map_err(|e| {
                ApiError::unprocessable(e.reason_code(), e.to_string()).code("action_inadmissible")
            })?;
        }
        // What the gateway submitted, kept beside the admitted form in the audit line: its
        // digest always, and its text when normalization changed a string (the admitted form
        // alone would then hide what the gateway will execute). The text is bounded by the
        // fields' size limit, so it always fits the line.
        let submitted_sha256 = sha256_hex(fields_json.as_bytes());
        let submitted_text = (rule.nfc == NfcMode::Normalize
            && countersign::nfc_changes(profile, fields_json.as_bytes())
                .is_ok_and(|c| !c.is_empty()))
        .then(|| fields_json.clone());
        let revises = self.check_revises(req.revises.as_deref(), gateway).await?;
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
            gateway: gateway.to_owned(),
            revises,
        };
        let ts = rfc3339(from_ms(now));
        let expires_at = rfc3339(from_ms(approval.expires_at));
        let fingerprint = b64::encode(&approved.0);
        let request = revision_link(
            AuditEvent::request(&RequestFacts {
                approval_id: &approval.id,
                ts: &ts,
                agent_id: &approval.agent_id,
                tool_name: &approval.tool_name,
                profile: &profile_id,
                fields: fields.as_value(),
                submitted_sha256: &submitted_sha256,
                submitted_text: submitted_text.as_deref(),
                severity: &severity,
                expires_at: &expires_at,
                fingerprint: &fingerprint,
            })
            .by_gateway(gateway),
            approval.revises.as_deref(),
        );
        if rule.approval == ApprovalRule::Required {
            let args = if profile_id == DEFAULT_PROFILE {
                fields
                    .as_value()
                    .get("params")
                    .unwrap_or(&serde_json::Value::Null)
            } else {
                fields.as_value()
            };
            let candidate = super::preauth::PreauthCandidate {
                approval: &approval,
                request: &request,
                args,
                grant_expires_at: now.saturating_add(grant_ttl),
            };
            if let Some(record) = self.approve_preauthorized(candidate).await? {
                self.metrics()
                    .created(&req.tool_name, record.status.as_str());
                self.metrics().settled(record.status.as_str(), None);
                return Ok(self.result_of(&record));
            }
        }
        let mut outcome = AuditEvent::outcome(
            &approval.id,
            &ts,
            status.as_str(),
            reason.map(ReasonCode::as_str),
        );
        if let Some(until) = approval.grant_expires_at {
            let until = rfc3339(from_ms(until));
            let granted = crate::audit::authority(
                Some(&approval.op_hash_approved),
                Some(&until),
                "tool_rule",
                None,
            );
            outcome = outcome.with_member("authority", granted);
        }
        let events = [request, outcome];
        // A call a signed standing grant covers is approved under it, with its evidence.
        if status == ApprovalStatus::Pending
            && let Some(result) = self
                .approve_under_standing_grant(&approval, &events[0], &policy)
                .await?
        {
            return Ok(result);
        }
        let stored = approval.clone();
        self.committing(move |s| s.create(&stored, &events)).await?;
        self.metrics().created(&req.tool_name, status.as_str());
        if status != ApprovalStatus::Pending {
            self.metrics()
                .settled(status.as_str(), reason.map(ReasonCode::as_str));
        }
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
            gateway: Some(approval.gateway),
            preauthorization: None,
            revises: approval.revises,
        }))
    }

    /// The approval a request says it revises: it must exist and belong to the same gateway
    /// (another gateway's approval is answered like an unknown one). Only the link is taken
    /// from it — never its status, evidence or grant.
    async fn check_revises(
        &self,
        revises: Option<&str>,
        gateway: &str,
    ) -> Result<Option<String>, ApiError> {
        let Some(id) = revises else {
            return Ok(None);
        };
        let key = id.to_owned();
        let found = self.blocking(move |s| s.get(&key)).await?;
        match found {
            Some(r) if r.gateway.as_deref() == Some(gateway) => Ok(Some(r.id)),
            _ => Err(ApiError::unprocessable(
                ReasonCode::ResultMalformed,
                format!("revises names {id:?}, which is not an approval of this gateway"),
            )
            .code("unknown_revision")),
        }
    }

    /// Whether at least one enrolled, unrevoked credential belongs to an eligible principal.
    pub(crate) fn has_eligible_approver(&self, rule: &crate::config::ToolRule) -> bool {
        let eligible = self.eligible_principals(rule);
        self.registry().iter().any(|c| {
            !c.record().revoked
                && eligible
                    .as_ref()
                    .is_none_or(|set| set.iter().any(|p| p == c.principal()))
        })
    }

    /// Read an approval for the gateway that created it (404 for any other), settling it as
    /// expired first if its window has closed. Ownership is checked before anything else: another
    /// gateway's read changes nothing.
    async fn load_owned(&self, id: &str, gateway: &str) -> Result<ApprovalRecord, ApiError> {
        let key = id.to_owned();
        let record = self
            .blocking(move |s| s.get(&key))
            .await?
            .ok_or_else(|| ApiError::not_found("approval"))?;
        owned_by(&record, gateway)?;
        self.settle_if_overdue(record).await
    }

    /// The current result for `gateway`; with `wait`, hold the request until it is settled or
    /// `wait` passes.
    ///
    /// A waiting poll registers on its approval's own wake-up channel (at most
    /// `limits.long_poll_waiters` at once, else 429 `too_many_waiters`): only that approval's
    /// settlement wakes it.
    pub async fn redrive(
        &self,
        id: &str,
        wait: Option<u64>,
        gateway: &str,
    ) -> Result<ApprovalResult, ApiError> {
        let max = self.config().timeouts.long_poll_max_seconds;
        let wait = Duration::from_secs(wait.unwrap_or(0).min(max));
        if wait.is_zero() {
            let record = self.load_owned(id, gateway).await?;
            return Ok(self.result_of(&record));
        }
        let deadline = tokio::time::Instant::now() + wait;
        let guard = self.wait_on(id)?;
        loop {
            // Armed before reading, so a settlement between the read and the wait is not missed.
            let notified = guard.notify().notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let record = self.load_owned(id, gateway).await?;
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

    /// Withdraw a PENDING request of `gateway`: DENIED `cancelled`, a settlement, not a human
    /// verdict. The store checks the owner inside the settlement's transaction.
    pub async fn withdraw(&self, id: &str, gateway: &str) -> Result<ApprovalResult, ApiError> {
        let now = self.now_ms();
        let settlement = Settlement {
            approval_id: id.to_owned(),
            now,
            status: ApprovalStatus::Denied,
            reason_code: Some(ReasonCode::Cancelled),
            kind: SettleKind::Withdrawn {
                gateway: gateway.to_owned(),
            },
            grant_expires_at: None,
            event: AuditEvent::settlement(
                id,
                &rfc3339(from_ms(now)),
                ReasonCode::Cancelled.as_str(),
            )
            .by_gateway(gateway),
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
                self.metrics().settled(
                    record.status.as_str(),
                    // Parsed back to a reason code: a stored string that is not one is "none"
                    // rather than a new label value.
                    record
                        .reason_code
                        .as_deref()
                        .and_then(ReasonCode::from_wire)
                        .map(ReasonCode::as_str),
                );
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

    /// Collect the single-use grant of `gateway`'s approval for the exact call fingerprint (the
    /// store checks the owner inside the grant's transaction).
    pub async fn collect_grant(
        &self,
        id: &str,
        req: GrantRequest,
        gateway: &str,
    ) -> Result<GrantReceipt, ApiError> {
        let fingerprint = b64::decode(&req.fingerprint)
            .ok()
            .and_then(|v| <[u8; 32]>::try_from(v).ok())
            .ok_or_else(|| {
                ApiError::bad_request("invalid_request", "fingerprint must be 32 bytes, base64url")
            })?;
        let now = self.now_ms();
        let ts = rfc3339(from_ms(now));
        let event = AuditEvent::grant(id, &ts, &req.fingerprint).by_gateway(gateway);
        let (key, owner, tool) = (id.to_owned(), gateway.to_owned(), req.tool_name.clone());
        let (outcome, head) = self
            .committing(move |s| {
                let outcome =
                    s.collect_grant(&key, &owner, &fingerprint, tool.as_deref(), now, &event)?;
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
            GrantOutcome::Granted { collected_at } => {
                self.metrics().grant_collected();
                Ok(GrantReceipt {
                    approval_id: id.to_owned(),
                    fingerprint: req.fingerprint,
                    collected_at: rfc3339(from_ms(collected_at)),
                    checkpoint: match head {
                        Some((size, _)) => self
                            .sign_checkpoint(size)
                            .await
                            .inspect_err(|e| tracing::error!(error = ?e, "checkpoint unsigned"))
                            .ok(),
                        None => None,
                    },
                })
            }
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
                "the call fingerprint (or the named tool) differs from the approved action",
            )
            .reason(ReasonCode::BindingMismatch)),
            GrantOutcome::PreauthorizationWithdrawn => Err(ApiError::conflict(
                "preauthorization_withdrawn",
                format!(
                    "{id} was approved by a preauthorization that is now disabled, expired or \
                     changed; the grant is refused"
                ),
            )
            .reason(ReasonCode::Stale)),
            GrantOutcome::Expired => Err(ApiError::conflict(
                "grant_expired",
                format!("the grant of {id} expired"),
            )
            .reason(ReasonCode::Stale)),
        }
    }
}
