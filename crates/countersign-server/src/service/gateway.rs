//! The gateway's side: create a request, follow it, withdraw it, collect its grant.

use super::AppState;
use crate::audit::AuditEvent;
use crate::audit::RequestFacts;
use crate::clock::{from_ms, rfc3339};
use crate::config::{ApprovalRule, Severity, ToolRule};
use crate::error::{ApiError, ErrorCode, NotNfc};
use crate::store::{
    ApprovalRecord, GrantOutcome, NewApproval, SettleKind, SettleOutcome, Settlement,
};
use countersign::{
    Action, ApprovalResult, ApprovalStatus, CanonError, Decision, NfcMode, Policy, Profile,
    ReasonCode, b64,
};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use sha2::{Digest as _, Sha256};
use std::sync::Arc;
use std::time::Duration;

/// The profile used when a request names none.
pub const DEFAULT_PROFILE: &str = countersign::TOOL_CALL_PROFILE;

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
            ErrorCode::InvalidRequest,
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
                ErrorCode::InvalidRequest,
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
    /// A C2SP tlog-proof@v1 of this grant's audit line under `checkpoint` (the line in its
    /// `extra`): checked offline with `countersign audit prove tlog`, or any tlog-proof
    /// verifier. Absent with `checkpoint`, or when the proof could not be made (logged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tlog_proof: Option<String>,
}

/// The JSON text of the action's fields under `profile`, built by the core's rule
/// ([`countersign::call_fields_json`]) from this request, so that the signed operation is the
/// request's by construction and the gateway's client rebuilds the same document.
fn fields_json(profile: &str, req: &CreateRequest) -> Result<String, ApiError> {
    if let Some(server) = req.server_id.as_deref() {
        check_name("server_id", server)?;
    }
    let call = countersign::ToolCallParts {
        agent_id: &req.agent_id,
        server_id: req.server_id.as_deref(),
        tool_name: &req.tool_name,
        params_json: req.params.get(),
    };
    countersign::call_fields_json(profile, &call)
        .map_err(|e| ApiError::bad_request(ErrorCode::InvalidRequest, e.to_string()))
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
                .code(ErrorCode::ActionInadmissible);
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
        let mut err = ApiError::unprocessable(e.reason_code(), message).code(ErrorCode::NotNfc);
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

/// The request's audit line. What the gateway submitted is kept beside the admitted form: its
/// digest always, and its text when normalization changed a string (the admitted form alone
/// would then hide what the gateway will execute). The text is bounded by the fields' size
/// limit, so it always fits the line.
fn request_line(approval: &NewApproval, admitted: &Admitted<'_>, gateway: &str) -> AuditEvent {
    let submitted_sha256 = sha256_hex(admitted.fields_json.as_bytes());
    let submitted_text = (admitted.rule.nfc == NfcMode::Normalize
        && countersign::nfc_changes(admitted.profile, admitted.fields_json.as_bytes())
            .is_ok_and(|c| !c.is_empty()))
    .then_some(admitted.fields_json.as_str());
    let line = AuditEvent::request(&RequestFacts {
        approval_id: &approval.id,
        ts: &rfc3339(from_ms(approval.created_at)),
        agent_id: &approval.agent_id,
        tool_name: &approval.tool_name,
        profile: &approval.profile,
        fields: admitted.fields.as_value(),
        submitted_sha256: &submitted_sha256,
        submitted_text,
        severity: &approval.severity,
        expires_at: &rfc3339(from_ms(approval.expires_at)),
        fingerprint: &b64::encode(&approval.op_hash_approved),
    })
    .by_gateway(gateway);
    revision_link(line, approval.revises.as_deref())
}

/// The outcome line of a new request: its initial status, and for an at-once approval the
/// authority the tool rule grants (one call with this op_hash, until the grant window closes).
fn outcome_line(approval: &NewApproval) -> AuditEvent {
    let outcome = AuditEvent::outcome(
        &approval.id,
        &rfc3339(from_ms(approval.created_at)),
        approval.status.as_str(),
        approval.reason_code.map(ReasonCode::as_str),
    );
    match approval.grant_expires_at {
        Some(until) => outcome.with_member(
            "authority",
            crate::audit::authority(
                Some(&approval.op_hash_approved),
                Some(&rfc3339(from_ms(until))),
                "tool_rule",
                None,
            ),
        ),
        None => outcome,
    }
}

/// What a preauthorization is matched against: the call's arguments (the `params` of the
/// generic profile, all the fields of a typed one).
fn preauth_candidate<'a>(
    approval: &'a NewApproval,
    request: &'a AuditEvent,
    admitted: &'a Admitted<'_>,
    grant_expires_at: i64,
) -> super::preauth::PreauthCandidate<'a> {
    let args = if admitted.profile_id == DEFAULT_PROFILE {
        admitted
            .fields
            .as_value()
            .get("params")
            .unwrap_or(&serde_json::Value::Null)
    } else {
        admitted.fields.as_value()
    };
    super::preauth::PreauthCandidate {
        approval,
        request,
        args,
        grant_expires_at,
    }
}

/// A request that passed admission: what every later step of `create` reads.
struct Admitted<'a> {
    rule: &'a ToolRule,
    policy: Arc<Policy>,
    severity: String,
    profile_id: String,
    profile: &'a Profile,
    /// The fields as submitted (the gateway will execute these bytes).
    fields_json: String,
    /// The fields as admitted (NFC, canonical): what op_hash covers.
    fields: countersign::CanonicalFields,
}

impl AppState {
    /// Create a request for `gateway`: PENDING, or an at-once answer when no human is needed or
    /// none can answer.
    ///
    /// The steps: admit the request (below); check the approval it revises; build the approval
    /// and what the tool rule answers at once; let a preauthorization, then a signed standing
    /// grant, approve it without a human; else commit it PENDING and notify the approvers.
    pub async fn create(
        &self,
        req: CreateRequest,
        gateway: &str,
    ) -> Result<ApprovalResult, ApiError> {
        let admitted = self.admit_request(&req)?;
        let revises = self.check_revises(req.revises.as_deref(), gateway).await?;
        let now = self.now_ms();
        let approval = self.new_approval(&req, &admitted, gateway, revises, now)?;
        let request = request_line(&approval, &admitted, gateway);
        if admitted.rule.approval == ApprovalRule::Required
            && let Some(record) = self
                .approve_preauthorized(preauth_candidate(
                    &approval,
                    &request,
                    &admitted,
                    now.saturating_add(self.grant_ttl_ms()),
                ))
                .await?
        {
            self.metrics()
                .created(&req.tool_name, record.status.as_str());
            self.metrics().settled(record.status.as_str(), None);
            return Ok(self.result_of(&record));
        }
        let events = [request, outcome_line(&approval)];
        if approval.status == ApprovalStatus::Pending
            && let Some(result) = self
                .approve_under_standing_grant(&approval, &events[0], &admitted.policy)
                .await?
        {
            return Ok(result);
        }
        self.commit_request(approval, events).await
    }

    /// Admission, in order: the request's names and severity; the profile is pinned (and is not
    /// the standing-grant profile, which has its own endpoint); the fields pass the profile and
    /// the tool's NFC rule; the operation is bound (a typed profile that does not sign the tool
    /// name is usable only by the tool configured for it, the check the core verifier makes
    /// offline with the policy's `profile_tools`). Only then is any rule of the tool applied.
    fn admit_request(&self, req: &CreateRequest) -> Result<Admitted<'_>, ApiError> {
        check_name("agent_id", &req.agent_id)?;
        check_name("tool_name", &req.tool_name)?;
        let rule = self.config().rule(&req.tool_name);
        let severity = severity_of(req, rule)?.as_str().to_owned();
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
            .code(ErrorCode::ProfileUnknown)
        })?;
        // A standing grant is proposed through its own endpoint, which builds its fields from a
        // validated scope; here it would be an ordinary approval of arbitrary fields.
        if profile_id == countersign::STANDING_GRANT_PROFILE {
            return Err(ApiError::unprocessable(
                ReasonCode::ActionInadmissible,
                "a standing grant is proposed with POST /v1/standing-grants",
            )
            .code(ErrorCode::ActionInadmissible));
        }
        let fields_json = fields_json(&profile_id, req)?;
        let fields = admit(profile, &fields_json, rule.nfc)?;
        // A profile that signs its operation has its `tool_name` built from this request's
        // tool_name just above, so the binding holds by construction (and the core re-checks it
        // at every verdict); checking it here would only admit the fields a second time.
        if !countersign::signs_operation(profile) {
            let action = Action::new(profile_id.clone(), fields_json.as_bytes().to_vec())
                .with_tool(req.tool_name.clone());
            policy.check_operation(&action, profile).map_err(|e| {
                ApiError::unprocessable(e.reason_code(), e.to_string())
                    .code(ErrorCode::ActionInadmissible)
            })?;
        }
        Ok(Admitted {
            rule,
            policy,
            severity,
            profile_id,
            profile,
            fields_json,
            fields,
        })
    }

    /// The approval an admitted request becomes: its op_hashes, its windows, and the status the
    /// tool rule gives at once (APPROVED when it needs no approval, DENIED when no eligible
    /// approver is enrolled, else PENDING).
    fn new_approval(
        &self,
        req: &CreateRequest,
        admitted: &Admitted<'_>,
        gateway: &str,
        revises: Option<String>,
        now: i64,
    ) -> Result<NewApproval, ApiError> {
        let rule = admitted.rule;
        let approved = countersign::op_hash(admitted.profile, Decision::Approved, &admitted.fields);
        let denied = countersign::op_hash(admitted.profile, Decision::Denied, &admitted.fields);
        let window = rule
            .approval_seconds
            .unwrap_or(self.config().timeouts.approval_seconds);
        let (status, reason) = if rule.approval == ApprovalRule::None {
            (ApprovalStatus::Approved, None)
        } else if !self.has_eligible_approver(rule) {
            (ApprovalStatus::Denied, Some(ReasonCode::NoEligibleApprover))
        } else {
            (ApprovalStatus::Pending, None)
        };
        Ok(NewApproval {
            id: crate::random::approval_id()?,
            created_at: now,
            expires_at: now.saturating_add(crate::clock::secs_to_ms(window)),
            agent_id: req.agent_id.clone(),
            tool_name: req.tool_name.clone(),
            profile: admitted.profile_id.clone(),
            fields_json: admitted.fields_json.clone(),
            severity: admitted.severity.clone(),
            op_hash_approved: approved.0,
            op_hash_denied: denied.0,
            status,
            reason_code: reason,
            grant_expires_at: (status == ApprovalStatus::Approved)
                .then(|| now.saturating_add(self.grant_ttl_ms())),
            gateway: gateway.to_owned(),
            revises,
        })
    }

    /// How long a grant stays collectable once approved, in ms.
    fn grant_ttl_ms(&self) -> i64 {
        crate::clock::secs_to_ms(self.config().timeouts.grant_seconds)
    }

    /// Store a request with its request and outcome lines, count it, notify the approvers of a
    /// PENDING one, and answer from the row as inserted.
    async fn commit_request(
        &self,
        approval: NewApproval,
        events: [AuditEvent; 2],
    ) -> Result<ApprovalResult, ApiError> {
        let stored = approval.clone();
        let deliveries = if approval.status == ApprovalStatus::Pending {
            self.plan_deliveries(&approval)
        } else {
            Vec::new()
        };
        let notify = !deliveries.is_empty();
        self.committing(move |s| s.create_notified(&stored, &events, &deliveries))
            .await?;
        let status = approval.status;
        let reason = approval.reason_code;
        self.metrics().created(&approval.tool_name, status.as_str());
        if status != ApprovalStatus::Pending {
            self.metrics()
                .settled(status.as_str(), reason.map(ReasonCode::as_str));
        }
        if notify {
            self.wake_notifier();
        }
        // The row is exactly what was inserted: answer from it without reading it back.
        Ok(self.result_of(&approval.into_record(None)))
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
            .code(ErrorCode::UnknownRevision)),
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
            SettleOutcome::AlreadySettled(record) => Err(self.already_settled(&record)),
            SettleOutcome::Expired(record) => {
                self.wake_long_polls(&record.id);
                Err(ApiError::conflict(
                    ErrorCode::Expired,
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
                ApiError::bad_request(
                    ErrorCode::InvalidRequest,
                    "fingerprint must be 32 bytes, base64url",
                )
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
                let checkpoint = match head {
                    Some((size, _)) => self
                        .sign_checkpoint(size)
                        .await
                        .inspect_err(|e| tracing::error!(error = ?e, "checkpoint unsigned"))
                        .ok()
                        .map(|note| (size, note)),
                    None => None,
                };
                let tlog_proof = match &checkpoint {
                    Some((size, note)) => self.grant_tlog_proof(id, *size, note.clone()).await,
                    None => None,
                };
                Ok(GrantReceipt {
                    approval_id: id.to_owned(),
                    fingerprint: req.fingerprint,
                    collected_at: rfc3339(from_ms(collected_at)),
                    checkpoint: checkpoint.map(|(_, note)| note),
                    tlog_proof,
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
                    ErrorCode::NotApproved,
                    format!("{id} is {}, nothing to grant", record.status.as_str()),
                )
                .reason(reason)
                .with_result(self.result_of(&record)))
            }
            GrantOutcome::AlreadyCollected { collected_at } => Err(ApiError::conflict(
                ErrorCode::GrantAlreadyCollected,
                format!(
                    "the grant of {id} was collected at {}; a grant is single-use",
                    rfc3339(from_ms(collected_at))
                ),
            )
            .reason(ReasonCode::Replayed)),
            GrantOutcome::FingerprintMismatch => Err(ApiError::conflict(
                ErrorCode::FingerprintMismatch,
                "the call fingerprint (or the named tool) differs from the approved action",
            )
            .reason(ReasonCode::BindingMismatch)),
            GrantOutcome::PreauthorizationWithdrawn => Err(ApiError::conflict(
                ErrorCode::PreauthorizationWithdrawn,
                format!(
                    "{id} was approved by a preauthorization that is now disabled, expired or \
                     changed; the grant is refused"
                ),
            )
            .reason(ReasonCode::Stale)),
            GrantOutcome::Expired => Err(ApiError::conflict(
                ErrorCode::GrantExpired,
                format!("the grant of {id} expired"),
            )
            .reason(ReasonCode::Stale)),
        }
    }
}
