//! OpenID AuthZEN Access Request and Approval Profile (ARAP, Draft 1): the service as an Access
//! Request Service (docs/spec/arap.md).
//!
//! A PDP or gateway, authenticated by its gateway token, submits an access request; it becomes
//! an ordinary approval (subject → `agent_id`, action name → `tool_name`, the whole request →
//! `params`), so the approver sees exactly what is asked and the tool's policy applies. The
//! task is the approval; once a human approved, the result carries `approval.state`: a compact
//! JWS (EdDSA, the service key) with the op_hash, the approver's evidence and the audit
//! inclusion proof of the Decision, verifiable with the key at `jwks_uri`.

use super::AppState;
use super::tlog::LineOf;
use crate::clock::{from_ms, rfc3339, to_ms};
use crate::error::ApiError;
use crate::service::CreateRequest;
use countersign::{ApprovalResult, ApprovalStatus, b64};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use sha2::{Digest as _, Sha256};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// Where the routes live, below the public URL.
pub(crate) const ARAP_REQUESTS_PATH: &str = "/authzen/access/v1/requests";
/// The JWK Set of the key that signs `approval.state`.
pub(crate) const ARAP_JWKS_PATH: &str = "/authzen/access/v1/jwks";
/// The capability a PDP supporting the profile lists in its metadata.
pub(crate) const ARAP_CAPABILITY: &str = "urn:openid:authzen:capability:access-request";
/// The `typ` of an `approval.state` JWS.
const STATE_TYP: &str = "countersign-approval-state+jwt";
/// Clock-skew tolerance on `denial.expires_at` (the profile: 30 s typical, above 60 s not
/// recommended).
const SKEW_MS: i64 = 30_000;

/// An AuthZEN Subject, Resource or Action: kept as the PEP sent it (it is echoed into the
/// approval and into `approval.state`), with the members this service reads.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub(crate) struct Entity(pub(crate) Map<String, Value>);

impl Entity {
    fn text(&self, member: &str) -> Option<&str> {
        self.0
            .get(member)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    }
}

/// The submission's `denial` object.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub(crate) struct Denial {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) evaluation_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) evaluated_at: Option<String>,
    pub(crate) expires_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) binding_token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) template: Option<String>,
}

/// `POST /authzen/access/v1/requests`. Unknown members are ignored, as the profile's forward
/// compatibility rule asks (so `callback`, which this service does not deliver, is too).
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct AccessRequest {
    pub(crate) subject: Entity,
    pub(crate) resource: Option<Entity>,
    pub(crate) action: Option<Entity>,
    pub(crate) items: Option<Value>,
    pub(crate) context: Option<Value>,
    pub(crate) denial: Option<Denial>,
    pub(crate) requested_access: Option<Value>,
    pub(crate) client: Option<Value>,
}

/// Why a submission or a task operation was refused: each maps to one of the profile's
/// problem types (docs/spec/arap.md §Errors).
#[derive(Debug, thiserror::Error)]
pub(crate) enum ArapError {
    #[error("the submission is not for a requestable denial: {0}")]
    NotRequestable(&'static str),
    #[error("the denial binding does not hold: {0}")]
    InvalidDenialBinding(&'static str),
    #[error("the requestable denial expired at {0}")]
    ExpiredDenial(String),
    #[error("the task handle is unknown")]
    UnknownTask,
    #[error("the task is already {0}")]
    InvalidTaskState(&'static str),
    #[error("{}", .0.message)]
    Service(ApiError),
}

impl From<ApiError> for ArapError {
    fn from(e: ApiError) -> Self {
        match e.status.as_u16() {
            404 => Self::UnknownTask,
            _ => Self::Service(e),
        }
    }
}

/// A task handle and, once approved, its result: the body of a submission's or a poll's answer.
#[derive(Debug, Serialize)]
pub(crate) struct TaskView {
    pub(crate) task: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) result: Option<Value>,
}

impl TaskView {
    /// Whether the task has reached a terminal status (a submission answers 201, not 202).
    pub(crate) fn is_terminal(&self) -> bool {
        self.task.get("status").and_then(Value::as_str) != Some("pending")
    }
}

/// The canonical status of a result (the profile's §Mapping Backend States, docs/spec/arap.md).
fn status_of(result: &ApprovalResult) -> &'static str {
    match (result.status, result.reason_code.as_deref()) {
        (ApprovalStatus::Pending, _) => "pending",
        (ApprovalStatus::Approved, _) => "approved",
        (ApprovalStatus::Denied, Some("cancelled")) => "cancelled",
        (ApprovalStatus::Denied, Some("expired_unanswered")) => "expired",
        (ApprovalStatus::Denied, _) => "denied",
    }
}

fn parse_time(text: &str) -> Option<i64> {
    OffsetDateTime::parse(text, &Rfc3339).ok().map(to_ms)
}

impl AppState {
    /// The JWK Set `approval.state` verifies against (RFC 7517; OKP, RFC 8037).
    pub(crate) fn arap_jwks(&self) -> Value {
        json!({"keys": [{
            "kty": "OKP",
            "crv": "Ed25519",
            "x": self.service_key(),
            "kid": self.arap_kid(),
            "use": "sig",
            "alg": "EdDSA",
        }]})
    }

    /// The key's RFC 7638 thumbprint: SHA-256 of its required members in lexicographic order.
    fn arap_kid(&self) -> String {
        let members = format!(
            r#"{{"crv":"Ed25519","kty":"OKP","x":"{}"}}"#,
            self.service_key()
        );
        b64::encode(&Sha256::digest(members.as_bytes()))
    }

    /// The PDP metadata members of this profile (served at `/.well-known/authzen-configuration`).
    pub(crate) fn arap_metadata(&self) -> Value {
        let base = self.public_url();
        json!({
            "policy_decision_point": base,
            "access_request_endpoint": format!("{base}{ARAP_REQUESTS_PATH}"),
            "jwks_uri": format!("{base}{ARAP_JWKS_PATH}"),
            "capabilities": [ARAP_CAPABILITY],
        })
    }

    /// Accept an access request from `gateway`: checked, then created as an approval.
    pub(crate) async fn arap_submit(
        &self,
        req: AccessRequest,
        gateway: &str,
    ) -> Result<TaskView, ArapError> {
        self.check_denial(&req)?;
        let create = into_create(&req)?;
        let result = self.create(create, gateway).await?;
        let id = result
            .approval_id
            .clone()
            .ok_or_else(|| ArapError::Service(ApiError::internal("no approval id")))?;
        self.arap_view(&id, result, gateway).await
    }

    /// The task as `gateway` may see it now.
    pub(crate) async fn arap_status(&self, id: &str, gateway: &str) -> Result<TaskView, ArapError> {
        let result = self.redrive(id, None, gateway).await?;
        self.arap_view(id, result, gateway).await
    }

    /// Cancel a pending task of `gateway` (the approval is withdrawn).
    pub(crate) async fn arap_cancel(&self, id: &str, gateway: &str) -> Result<TaskView, ArapError> {
        let current = self.redrive(id, None, gateway).await?;
        if current.status != ApprovalStatus::Pending {
            return Err(ArapError::InvalidTaskState(status_of(&current)));
        }
        let result = match self.withdraw(id, gateway).await {
            Ok(result) => result,
            // Settled between the read and the withdrawal: report what settled it.
            Err(e) if e.status.as_u16() == 409 => {
                let now = self.redrive(id, None, gateway).await?;
                return Err(ArapError::InvalidTaskState(status_of(&now)));
            }
            Err(e) => return Err(e.into()),
        };
        self.arap_view(id, result, gateway).await
    }

    /// Binding material present, denial not expired (the freshness rule of §Access Request
    /// Service Processing Rules, with the skew tolerance).
    fn check_denial(&self, req: &AccessRequest) -> Result<(), ArapError> {
        if req.items.is_some() {
            return Err(ArapError::NotRequestable(
                "bundled `items` submissions are not supported; submit one request per item",
            ));
        }
        let denial = req.denial.as_ref().ok_or(ArapError::InvalidDenialBinding(
            "`denial` is required for a single-item submission",
        ))?;
        if denial.evaluation_id.as_deref().is_none_or(str::is_empty)
            && denial.binding_token.as_deref().is_none_or(str::is_empty)
        {
            return Err(ArapError::InvalidDenialBinding(
                "`denial` carries neither `evaluation_id` nor `binding_token`",
            ));
        }
        let expires = parse_time(&denial.expires_at).ok_or(ArapError::InvalidDenialBinding(
            "`denial.expires_at` is not an RFC 3339 timestamp",
        ))?;
        if self.now_ms() > expires.saturating_add(SKEW_MS) {
            return Err(ArapError::ExpiredDenial(denial.expires_at.clone()));
        }
        Ok(())
    }

    /// The task handle, and the result once the task is terminal.
    async fn arap_view(
        &self,
        id: &str,
        result: ApprovalResult,
        gateway: &str,
    ) -> Result<TaskView, ArapError> {
        let status = status_of(&result);
        let endpoint = format!("{}{ARAP_REQUESTS_PATH}/{id}", self.public_url());
        let mut task = json!({"id": id, "status": status, "status_endpoint": endpoint});
        if let (Some(map), Some(expires)) = (task.as_object_mut(), &result.expires_at) {
            map.insert("expires_at".to_owned(), json!(expires));
            if status == "pending" {
                map.insert(
                    "links".to_owned(),
                    json!({"cancel": format!("{endpoint}/cancel")}),
                );
            }
        }
        let result = match result.status {
            ApprovalStatus::Approved => Some(self.approval_result(id, gateway).await?),
            _ => None,
        };
        Ok(TaskView { task, result })
    }

    /// The `reevaluate` result of an approved task, with its signed `approval.state`.
    async fn approval_result(&self, id: &str, gateway: &str) -> Result<Value, ArapError> {
        let record = self.load(id).await?;
        let approved_at = rfc3339(from_ms(record.decided_at.unwrap_or(record.created_at)));
        let until_ms = record.grant_expires_at.unwrap_or(record.expires_at);
        let approved_until = rfc3339(from_ms(until_ms));
        let request: Value = serde_json::from_str(&record.fields_json)
            .map(|f: Value| f.get("params").cloned().unwrap_or(f))
            .unwrap_or(Value::Null);
        let evidence = record.evidence_json.as_deref().unwrap_or("[]");
        let claims = json!({
            "iss": self.public_url(),
            "aud": gateway,
            "iat": self.now_ms() / 1000,
            "exp": until_ms / 1000,
            "approval_id": id,
            "task_id": id,
            "status": "approved",
            "approved_at": approved_at,
            "approved_until": approved_until,
            "sub": record.agent_id,
            "subject": request.get("subject"),
            "resource": request.get("resource"),
            "action": request.get("action"),
            "evaluation_id": request.pointer("/denial/evaluation_id"),
            "binding_context_members": [],
            "requester": gateway,
            "tool_name": record.tool_name,
            "profile": record.profile,
            "op_hash": b64::encode(&record.op_hash_approved),
            "evidence": serde_json::from_str::<Value>(evidence).unwrap_or(Value::Null),
            "evidence_sha256": b64::encode(&Sha256::digest(evidence.as_bytes())),
            "evidence_uri": format!("{}/v1/approvals/{id}", self.public_url()),
            "tlog_proof": self.tlog_proof_of(id, LineOf::Settlement).await,
        });
        let state = self.sign_state(&claims)?;
        Ok(json!({
            "mode": "reevaluate",
            "approval": {
                "id": id,
                "approved_at": approved_at,
                "approved_until": approved_until,
                "state": state,
            },
        }))
    }

    /// `claims` as a compact JWS signed with the service key.
    fn sign_state(&self, claims: &Value) -> Result<String, ArapError> {
        let header = json!({"alg": "EdDSA", "kid": self.arap_kid(), "typ": STATE_TYP});
        let encode = |v: &Value| {
            serde_json::to_vec(v)
                .map(|bytes| b64::encode(&bytes))
                .map_err(|e| ArapError::Service(ApiError::internal(e)))
        };
        let input = format!("{}.{}", encode(&header)?, encode(claims)?);
        let signature = self
            .inner
            .sealer
            .sign_jws(&input)
            .ok_or_else(|| ArapError::Service(ApiError::internal("JWS input not base64url")))?;
        Ok(format!("{input}.{}", b64::encode(&signature)))
    }
}

/// The approval an access request becomes: the subject's id is the `agent_id` (so the
/// separation-of-duties rule keeps the subject from approving), the action's name the tool
/// (its `[[tools]]` rule decides who may approve), and the request itself the parameters, so
/// the approver reads what is asked and the op_hash covers it.
fn into_create(req: &AccessRequest) -> Result<CreateRequest, ArapError> {
    let missing = ArapError::NotRequestable;
    let subject_id = req
        .subject
        .text("id")
        .ok_or(missing("`subject.id` is required"))?;
    let resource = req
        .resource
        .as_ref()
        .ok_or(missing("`resource` is required"))?;
    let action = req.action.as_ref().ok_or(missing("`action` is required"))?;
    let name = action
        .text("name")
        .ok_or(missing("`action.name` is required"))?;
    let denial = req.denial.as_ref().map(|d| {
        json!({
            "evaluation_id": d.evaluation_id,
            "reason": d.reason,
            "template": d.template,
        })
    });
    let mut params = Map::new();
    params.insert("subject".to_owned(), json!(req.subject));
    params.insert("resource".to_owned(), json!(resource));
    params.insert("action".to_owned(), json!(action));
    for (member, value) in [
        ("context", req.context.clone()),
        ("requested_access", req.requested_access.clone()),
        ("client", req.client.clone()),
        ("denial", denial),
    ] {
        if let Some(value) = value {
            params.insert(member.to_owned(), value);
        }
    }
    let text = serde_json::to_string(&Value::Object(params))
        .map_err(|e| ArapError::Service(ApiError::internal(e)))?;
    let params = serde_json::value::RawValue::from_string(text)
        .map_err(|e| ArapError::Service(ApiError::internal(e)))?;
    Ok(CreateRequest {
        agent_id: subject_id.to_owned(),
        tool_name: name.to_owned(),
        params,
        profile: None,
        severity: None,
        server_id: None,
        revises: None,
    })
}
