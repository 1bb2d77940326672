//! Approver-signed standing grants: proposed by a gateway, signed or refused by an approver on
//! the approver page with the same ceremony as any approval, revocable by their signer, and
//! consumed one use at a time by the calls they cover (docs/spec/service.md §11).
//!
//! A proposal is an approval under the `countersign.standing-grant/2` profile whose fields are
//! the grant's scope, so the page shows all of it before anyone signs, and the evidence is an
//! ordinary `webauthn.assertion/1` entry over `nonce || op_hash(scope)`. The scope names the
//! calls it covers: their profile, their MCP server when that profile signs one, and the
//! gateways that may spend it (by default the proposing gateway alone). A later call is approved
//! under a grant only when the grant names the call's gateway (the one check an offline verdict
//! cannot make: it does not know who asks) and the core verifier, run here exactly as a gateway
//! would run it offline, accepts the grant's evidence for that call (signature, eligibility
//! under the call's own tool rule, profile, server, scope, expiry); the use is then consumed in
//! the same transaction as the approval row and its audit lines.

use super::AppState;
use super::gateway::DEFAULT_PROFILE;
use crate::audit::AuditEvent;
use crate::audit::RequestFacts;
use crate::clock::{from_ms, rfc3339};
use crate::config::{ApprovalRule, Severity};
use crate::error::{ApiError, ErrorCode};
use crate::store::standing::{NewStandingGrant, StandingGrantRecord, UseRecords};
use crate::store::{ApprovalRecord, NewApproval, Session};
use countersign::GrantScope;
use countersign::scope::Calls;
use countersign::scope::Scope;
use countersign::{
    Action, ApprovalResult, ApprovalStatus, Decision, EvidenceEntry, MemoryReplayState, Policy,
    ReasonCode, STANDING_GRANT_PROFILE, StandingGrantUse, b64,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::sync::Arc;

/// How many live grants a call is matched against at most (oldest first).
const MAX_CANDIDATE_GRANTS: usize = 256;
/// The fields a profile must declare for a standing grant to cover its calls.
const CALL_FIELDS: [&str; 3] = ["agent_id", "tool_name", "params"];
/// The field of a call profile that names the MCP server.
const SERVER_FIELD: &str = "server_id";
/// How many entries the inbox lists at most, of each kind.
const INBOX_LIMIT: usize = 200;

/// `POST /v1/standing-grants`: the scope a gateway (or operator) asks an approver to sign.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StandingProposal {
    /// The profile of the calls the grant covers; absent: the generic tool-call profile.
    #[serde(default, deserialize_with = "not_null::profile")]
    pub profile: Option<String>,
    /// The MCP server of the calls: required for a profile that signs one, refused otherwise.
    #[serde(default, deserialize_with = "not_null::server_id")]
    pub server_id: Option<String>,
    /// The gateways whose calls the grant covers; absent: the proposing gateway alone.
    #[serde(default, deserialize_with = "not_null::gateways")]
    pub gateways: Option<Vec<String>>,
    /// Which agent ids the grant covers: a pattern (`*` matches any run of characters).
    pub agent_id: String,
    /// Which tool names the grant covers: a pattern.
    pub tool_name: String,
    /// Rules on named arguments (`one_of`, `prefix`, `path`, `max`, `currency`); all must hold.
    #[serde(default)]
    pub constraints: Vec<Value>,
    /// How many calls the grant may approve in total.
    pub max_uses: u64,
    /// RFC 3339 with an explicit offset; the first instant the grant no longer covers.
    pub expires_at: String,
    #[serde(default)]
    pub severity: Option<String>,
}

/// Absent members take their default; `null` is refused, never read as absent.
mod not_null {
    use serde::{Deserialize, Deserializer};
    pub(super) fn profile<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        countersign::present_not_null(d, "profile")
    }
    pub(super) fn server_id<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        countersign::present_not_null(d, "server_id")
    }
    pub(super) fn gateways<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Vec<String>>, D::Error> {
        Option::<Vec<String>>::deserialize(d).and_then(|v| {
            v.map(Some).ok_or_else(|| {
                serde::de::Error::custom(
                    "member \"gateways\" is null: null is refused, omit the member to take its default",
                )
            })
        })
    }
}

/// A standing grant as its signer (and the gateway) sees it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StandingView {
    pub grant_id: String,
    /// `PENDING` until signed or refused, then the proposal's verdict.
    pub status: ApprovalStatus,
    /// The calls it covers (profile, MCP server, gateways), as signed; absent for a grant whose
    /// fields name none (one proposed before they were part of the scope: it covers nothing).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calls: Option<Calls>,
    pub agent_id: String,
    pub tool_name: String,
    pub expires_at: String,
    pub max_uses: u32,
    pub uses: u32,
    /// Whether it approves calls now: signed, unrevoked, unexpired, a use left.
    pub live: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signed_by: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revoked_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revoked_by: Option<String>,
}

/// One pending approval in the inbox (no field values: those are on its review page).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InboxItem {
    pub approval_id: String,
    /// `approval`, or `standing_grant` for a proposed standing grant.
    pub kind: &'static str,
    pub tool_name: String,
    pub severity: String,
    pub created_at: String,
    pub expires_at: String,
}

/// What a signed-in approver may act on.
#[derive(Debug, Clone, Serialize)]
pub struct Inbox {
    pub principal: String,
    /// Pending approvals the principal may decide, newest first.
    pub pending: Vec<InboxItem>,
    /// The principal's own live standing grants (signed by them, uses left), oldest first.
    pub standing_grants: Vec<StandingView>,
}

/// The stored evidence of a call approved under a grant: the result's `standing_grant` member and
/// the grant's evidence, as `result_of` returns them.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct StoredStandingUse {
    pub standing_grant: StandingGrantUse,
    pub approver_evidence: Vec<EvidenceEntry>,
}

fn invalid_scope(message: impl Into<String>) -> ApiError {
    ApiError::unprocessable(ReasonCode::ActionInadmissible, message).code(ErrorCode::InvalidScope)
}

/// The principal whose credential signed a proposal's evidence, by the registry.
fn signer_of(
    record: &ApprovalRecord,
    registry: &countersign::CredentialRegistry,
) -> Option<String> {
    let entries: Vec<EvidenceEntry> =
        serde_json::from_str(record.evidence_json.as_deref()?).ok()?;
    let first = entries.first()?;
    registry
        .get(&first.credential_id)
        .map(|c| c.principal().to_owned())
}

impl AppState {
    /// Record a proposed standing grant: an approval under the standing-grant profile whose
    /// fields are the scope, PENDING for an approver (or DENIED `no_eligible_approver`).
    pub async fn propose_standing(
        &self,
        req: StandingProposal,
        gateway: &str,
    ) -> Result<ApprovalResult, ApiError> {
        let now = self.now_ms();
        let calls = self.proposal_calls(&req, gateway).await?;
        let scope = Scope::from_value(serde_json::json!({
            "agent": req.agent_id,
            "tool": req.tool_name,
            "constraints": req.constraints,
            "max_uses": req.max_uses,
            "expires_at": req.expires_at,
        }))
        .map_err(|e| invalid_scope(e.to_string()))?;
        let expires_at = crate::clock::to_ms(scope.expires_at.instant());
        if expires_at <= now {
            return Err(invalid_scope("expires_at is not in the future"));
        }
        let max_uses = u32::try_from(scope.max_uses.get())
            .map_err(|_| invalid_scope("max_uses is above 4294967295"))?;
        let gateways: Vec<String> = calls.gateways.names().map(str::to_owned).collect();
        let fields = countersign::grant_fields_of_scope(&GrantScope {
            calls,
            scope: scope.clone(),
        })
        .map_err(ApiError::internal)?;
        let fields_json = fields.to_string();
        let profile = self
            .profiles()
            .resolve(STANDING_GRANT_PROFILE)
            .map_err(ApiError::internal)?;
        let admitted = countersign::admit_fields(profile, fields_json.as_bytes())
            .map_err(|e| invalid_scope(e.to_string()))?;
        let config = self.config();
        // Who may sign is the rule of the tool pattern as written (a pattern matching several
        // tools falls to the default rule); each use is checked again under the call's own rule.
        let rule = config.rule(scope.tool.as_str());
        let severity = match req.severity.as_deref() {
            None => Severity::High,
            Some(text) => Severity::from_wire(text).ok_or_else(|| {
                ApiError::bad_request(
                    ErrorCode::InvalidRequest,
                    "severity must be one of low, normal, high, critical",
                )
            })?,
        }
        .as_str()
        .to_owned();
        let (status, reason) = if self.has_eligible_approver(rule) {
            (ApprovalStatus::Pending, None)
        } else {
            (ApprovalStatus::Denied, Some(ReasonCode::NoEligibleApprover))
        };
        let window = rule
            .approval_seconds
            .unwrap_or(config.timeouts.approval_seconds);
        let ttl = crate::clock::secs_to_ms(window);
        let approved = countersign::op_hash(profile, Decision::Approved, &admitted);
        let denied = countersign::op_hash(profile, Decision::Denied, &admitted);
        let approval = NewApproval {
            id: crate::random::approval_id()?,
            created_at: now,
            expires_at: now.saturating_add(ttl),
            agent_id: scope.agent.to_string(),
            tool_name: scope.tool.to_string(),
            profile: STANDING_GRANT_PROFILE.to_owned(),
            fields_json,
            severity: severity.clone(),
            op_hash_approved: approved.0,
            op_hash_denied: denied.0,
            status,
            reason_code: reason,
            grant_expires_at: None,
            gateway: gateway.to_owned(),
            revises: None,
        };
        let grant = NewStandingGrant {
            id: approval.id.clone(),
            expires_at,
            max_uses,
            gateways,
        };
        let ts = rfc3339(from_ms(now));
        let window_end = rfc3339(from_ms(approval.expires_at));
        let submitted = sha256_hex(approval.fields_json.as_bytes());
        let events = [
            AuditEvent::request(&RequestFacts {
                approval_id: &approval.id,
                ts: &ts,
                agent_id: &approval.agent_id,
                tool_name: &approval.tool_name,
                profile: STANDING_GRANT_PROFILE,
                fields: admitted.as_value(),
                submitted_sha256: &submitted,
                submitted_text: None,
                severity: &severity,
                expires_at: &window_end,
                fingerprint: &b64::encode(&approved.0),
            })
            .by_gateway(gateway),
            AuditEvent::outcome(
                &approval.id,
                &ts,
                status.as_str(),
                reason.map(ReasonCode::as_str),
            ),
        ];
        let stored = approval.clone();
        self.committing(move |s| s.create_standing_proposal(&stored, &grant, &events))
            .await?;
        self.metrics().created(&approval.tool_name, status.as_str());
        if status == ApprovalStatus::Pending {
            // Written right after the proposal's own transaction: a failure here loses a
            // notice, never the proposal.
            let deliveries = self.plan_deliveries(&approval);
            if !deliveries.is_empty() {
                match self.blocking(move |s| s.enqueue(&deliveries)).await {
                    Ok(()) => self.wake_notifier(),
                    Err(e) => tracing::error!(error = %e.message, "queuing notifications failed"),
                }
            }
        }
        let record = self.load(&approval.id).await?;
        Ok(self.result_of(&record))
    }

    /// The calls a proposal covers: its profile (default: the generic tool call), which must be
    /// a call profile this service pins; its MCP server, exactly when that profile signs one; its
    /// gateways (default: the proposing one), each registered and not revoked (names are never
    /// reused, so a name in a signed scope cannot later belong to someone else).
    async fn proposal_calls(
        &self,
        req: &StandingProposal,
        gateway: &str,
    ) -> Result<Calls, ApiError> {
        let profile_id = req.profile.as_deref().unwrap_or(DEFAULT_PROFILE);
        let profile = self.profiles().get(profile_id).ok_or_else(|| {
            invalid_scope(format!(
                "profile {profile_id:?} is not pinned by this service"
            ))
        })?;
        if !is_call_profile(profile) {
            return Err(invalid_scope(format!(
                "{profile_id} is not a tool-call profile (agent_id, tool_name, params): a standing \
                 grant cannot cover its calls"
            )));
        }
        match (profile.field(SERVER_FIELD).is_some(), &req.server_id) {
            (true, None) => {
                return Err(invalid_scope(format!(
                    "{profile_id} signs the MCP server: the grant must name its server_id"
                )));
            }
            (false, Some(_)) => {
                return Err(invalid_scope(format!(
                    "{profile_id} signs no server: server_id would cover nothing"
                )));
            }
            _ => {}
        }
        let gateways = req
            .gateways
            .clone()
            .unwrap_or_else(|| vec![gateway.to_owned()]);
        let known = self.blocking(|s| s.gateways()).await?;
        if let Some(unknown) = gateways.iter().find(|name| {
            !known
                .iter()
                .any(|g| &g.name == *name && g.revoked_at.is_none())
        }) {
            return Err(invalid_scope(format!(
                "{unknown:?} is not a gateway of this service (or it is revoked)"
            )));
        }
        let mut calls = Map::new();
        calls.insert("profile".into(), Value::from(profile_id));
        if let Some(server) = &req.server_id {
            calls.insert("server_id".into(), Value::from(server.clone()));
        }
        calls.insert("gateways".into(), Value::from(gateways));
        serde_json::from_value(Value::Object(calls))
            .map_err(|e| invalid_scope(format!("calls: {e}")))
    }

    /// Approve `approval` (a PENDING-bound call) under a live standing grant that covers it, if
    /// there is one: the grant must name the call's gateway, and the core verifier must accept
    /// the grant's evidence for this call under the call's tool policy; then a use is consumed
    /// with the approval row, atomically. `None`: no grant covers the call (it goes to a human).
    pub(crate) async fn approve_under_standing_grant(
        &self,
        approval: &NewApproval,
        request_event: &AuditEvent,
        policy: &Arc<Policy>,
    ) -> Result<Option<ApprovalResult>, ApiError> {
        // A typed call (a payment's fields) names no agent or tool a grant could match.
        if !self
            .profiles()
            .get(&approval.profile)
            .is_some_and(is_call_profile)
        {
            return Ok(None);
        }
        let now = approval.created_at;
        // Only the grants that name this gateway are candidates: another tenant's grants are
        // never read for this call (the signed list is checked again below, and by the store).
        let gateway = approval.gateway.clone();
        let grants = self
            .blocking(move |s| s.live_standing_grants_of(&gateway, now, MAX_CANDIDATE_GRANTS))
            .await?;
        if grants.is_empty() {
            return Ok(None);
        }
        let call: Value =
            serde_json::from_str(&approval.fields_json).map_err(ApiError::internal)?;
        let action = Action::new(approval.profile.clone(), approval.fields_json.clone())
            .with_tool(approval.tool_name.clone());
        // The row a use inserts: APPROVED at once, its single-use grant collectable like any.
        let grant_ttl = crate::clock::secs_to_ms(self.config().timeouts.grant_seconds);
        let approval = &NewApproval {
            status: ApprovalStatus::Approved,
            reason_code: None,
            grant_expires_at: Some(now.saturating_add(grant_ttl)),
            ..approval.clone()
        };
        for grant in grants {
            let Some(standing) = self.covering_use(&grant, approval, &call, &action, policy) else {
                continue;
            };
            let grant_id = grant.proposal.id.clone();
            let records = self.use_records(approval, request_event, &standing)?;
            let stored = approval.clone();
            let id = grant_id.clone();
            let used = self
                .committing(move |s| s.use_standing_grant(&stored, &id, now, records))
                .await?;
            // Another call took the last use (or the grant was revoked) meanwhile: try the next.
            let Some(use_number) = used else { continue };
            self.metrics()
                .created(&approval.tool_name, ApprovalStatus::Approved.as_str());
            self.metrics()
                .settled(ApprovalStatus::Approved.as_str(), None);
            tracing::info!(approval = %approval.id, grant = %grant_id, use_number, "approved under a standing grant");
            let record = self.load(&approval.id).await?;
            return Ok(Some(self.result_of(&record)));
        }
        Ok(None)
    }

    /// The `standing_grant` member this call would carry under `grant`, if the grant names the
    /// call's gateway and the core verifier accepts the grant's evidence for it now (with the
    /// next use number).
    fn covering_use(
        &self,
        grant: &StandingGrantRecord,
        approval: &NewApproval,
        call: &Value,
        action: &Action,
        policy: &Policy,
    ) -> Option<(StandingGrantUse, Vec<EvidenceEntry>)> {
        let fields: Value = serde_json::from_str(&grant.proposal.fields_json).ok()?;
        // A grant whose fields name no calls (proposed before they were signed) covers none.
        let GrantScope { calls, scope } = countersign::scope_of_grant_fields(&fields).ok()?;
        // The gateway is the service's to check: the verdict below cannot (it does not know who
        // asks). The signed list decides, not the index the candidates came from.
        if let Err(e) = calls.covers_gateway(&approval.gateway) {
            tracing::warn!(grant = %grant.proposal.id, reason = %e, "standing grant candidate for another gateway");
            return None;
        }
        // Then the cheap checks, which most grants fail for most calls; the verifier repeats them.
        let server = call.get(SERVER_FIELD).and_then(Value::as_str);
        calls.covers(&approval.profile, server).ok()?;
        scope
            .covers(
                &approval.agent_id,
                &approval.tool_name,
                call.get("params").unwrap_or(&Value::Null),
                from_ms(approval.created_at),
            )
            .ok()?;
        let evidence: Vec<EvidenceEntry> =
            serde_json::from_str(grant.proposal.evidence_json.as_deref()?).ok()?;
        let standing = StandingGrantUse {
            grant_id: grant.proposal.id.clone(),
            fields,
            use_number: u64::from(grant.uses) + 1,
        };
        let mut result = ApprovalResult::bare(ApprovalStatus::Approved);
        result.approver_evidence = evidence.iter().cloned().map(Into::into).collect();
        result.standing_grant = Some(standing.clone());
        let mut replay = MemoryReplayState::new();
        let verdict = countersign::verify_evidence(
            policy,
            action,
            &result,
            &self.registry(),
            &mut replay,
            from_ms(approval.created_at),
        );
        if !verdict.is_allow() {
            tracing::debug!(grant = %grant.proposal.id, reason = ?verdict.reason_code, "standing grant does not cover the call");
            return None;
        }
        Some((standing, evidence))
    }

    /// What the use's transaction writes once it knows the use number: the stored evidence
    /// (`standing_grant` with that number, and the grant's evidence) and the audit lines.
    fn use_records(
        &self,
        approval: &NewApproval,
        request_event: &AuditEvent,
        (standing, evidence): &(StandingGrantUse, Vec<EvidenceEntry>),
    ) -> Result<UseRecords, ApiError> {
        let (standing, evidence) = (standing.clone(), evidence.clone());
        let request = request_event.clone();
        let (id, ts) = (approval.id.clone(), rfc3339(from_ms(approval.created_at)));
        let signer = evidence.first().and_then(|e| {
            self.registry()
                .get(&e.credential_id)
                .map(|c| c.principal().to_owned())
        });
        Ok(Arc::new(move |use_number| {
            let mut standing = standing.clone();
            standing.use_number = u64::from(use_number);
            let stored = StoredStandingUse {
                standing_grant: standing.clone(),
                approver_evidence: evidence.clone(),
            };
            let json = serde_json::to_string(&stored)
                .map_err(|e| crate::store::StoreError::Corrupt(e.to_string()))?;
            let outcome = AuditEvent::outcome(&id, &ts, ApprovalStatus::Approved.as_str(), None);
            let mut body = outcome.body().clone();
            body.insert(
                "standing_grant".into(),
                Value::from(standing.grant_id.clone()),
            );
            body.insert("use".into(), Value::from(use_number));
            if let Some(signer) = &signer {
                body.insert("signed_by".into(), Value::from(signer.clone()));
            }
            Ok((json, vec![request.clone(), AuditEvent::from_body(body)]))
        }))
    }

    /// A grant as its signer sees it.
    fn standing_view(&self, grant: &StandingGrantRecord) -> StandingView {
        let now = self.now_ms();
        let fields: Value =
            serde_json::from_str(&grant.proposal.fields_json).unwrap_or(Value::Null);
        let calls = countersign::scope_of_grant_fields(&fields)
            .ok()
            .map(|g| g.calls);
        StandingView {
            grant_id: grant.proposal.id.clone(),
            status: grant.proposal.status,
            // A grant that names no calls covers nothing: it is not in force, whatever its uses.
            live: grant.is_live(now) && calls.is_some(),
            calls,
            agent_id: grant.proposal.agent_id.clone(),
            tool_name: grant.proposal.tool_name.clone(),
            expires_at: fields
                .get("expires_at")
                .and_then(Value::as_str)
                .map_or_else(|| rfc3339(from_ms(grant.expires_at)), str::to_owned),
            max_uses: grant.max_uses,
            uses: grant.uses,
            signed_by: signer_of(&grant.proposal, &self.registry()),
            revoked_at: grant.revoked_at.map(|t| rfc3339(from_ms(t))),
            revoked_by: grant.revoked_by.clone(),
        }
    }

    /// The standing grant behind proposal `id`, if `id` is one.
    pub async fn standing_grant(&self, id: &str) -> Result<Option<StandingView>, ApiError> {
        let key = id.to_owned();
        let grant = self.blocking(move |s| s.standing_grant(&key)).await?;
        Ok(grant.map(|g| self.standing_view(&g)))
    }

    /// Revoke the standing grant `id`; only its signer may. Uses already given stay given.
    pub async fn revoke_standing(
        &self,
        id: &str,
        session: &Session,
    ) -> Result<StandingView, ApiError> {
        let key = id.to_owned();
        let grant = self
            .blocking(move |s| s.standing_grant(&key))
            .await?
            .ok_or_else(|| ApiError::not_found("standing grant"))?;
        let signer = signer_of(&grant.proposal, &self.registry());
        if grant.proposal.status != ApprovalStatus::Approved || signer.is_none() {
            return Err(ApiError::conflict(
                ErrorCode::NotSigned,
                format!("{id} is not a signed standing grant; nothing to revoke"),
            ));
        }
        if signer.as_deref() != Some(session.principal.as_str()) {
            return Err(ApiError::forbidden(
                ErrorCode::NotYourGrant,
                "only the approver who signed a standing grant may revoke it",
            ));
        }
        let now = self.now_ms();
        let mut body = Map::new();
        body.insert("kind".into(), Value::from("standing_revocation"));
        body.insert("approval_id".into(), Value::from(id));
        body.insert("ts".into(), Value::from(rfc3339(from_ms(now))));
        body.insert("principal".into(), Value::from(session.principal.clone()));
        let event = AuditEvent::from_body(body);
        let (key, principal) = (id.to_owned(), session.principal.clone());
        let revoked = self
            .committing(move |s| s.revoke_standing_grant(&key, &principal, now, &event))
            .await?;
        if !revoked {
            return Err(ApiError::conflict(
                ErrorCode::AlreadyRevoked,
                format!("{id} was already revoked"),
            ));
        }
        self.standing_grant(id)
            .await?
            .ok_or_else(|| ApiError::not_found("standing grant"))
    }

    /// The signed-in approver's inbox: pending approvals they may decide, newest first, and
    /// their own live standing grants.
    pub async fn inbox(&self, session: &Session) -> Result<Inbox, ApiError> {
        let now = self.now_ms();
        let (open, grants) = self
            .blocking(move |s| {
                Ok((
                    s.open_approvals(now, INBOX_LIMIT)?,
                    s.live_standing_grants(now, INBOX_LIMIT)?,
                ))
            })
            .await?;
        let pending = open
            .into_iter()
            .filter(|r| self.may_decide(&r.tool_name, &session.principal))
            .map(|r| InboxItem {
                kind: if r.profile == STANDING_GRANT_PROFILE {
                    "standing_grant"
                } else {
                    "approval"
                },
                created_at: rfc3339(from_ms(r.created_at)),
                expires_at: rfc3339(from_ms(r.expires_at)),
                approval_id: r.id,
                tool_name: r.tool_name,
                severity: r.severity,
            })
            .collect();
        let registry = self.registry();
        let standing_grants = grants
            .iter()
            .filter(|g| signer_of(&g.proposal, &registry).as_deref() == Some(&session.principal))
            .map(|g| self.standing_view(g))
            .collect();
        Ok(Inbox {
            principal: session.principal.clone(),
            pending,
            standing_grants,
        })
    }

    /// Whether `principal` may decide approvals of `tool_name` (the rule's approvers, groups
    /// expanded; every enrolled principal when the rule names none).
    fn may_decide(&self, tool_name: &str, principal: &str) -> bool {
        let rule = self.config().rule(tool_name);
        rule.approval != ApprovalRule::None
            && self
                .eligible_principals(rule)
                .is_none_or(|set| set.iter().any(|p| p == principal))
    }
}

/// Whether a standing grant can cover calls under `profile`: it declares who calls, which tool,
/// with which arguments.
fn is_call_profile(profile: &countersign::Profile) -> bool {
    CALL_FIELDS.iter().all(|f| profile.field(f).is_some())
}

/// Lowercase hex of SHA-256.
fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    use std::fmt::Write as _;
    sha2::Sha256::digest(bytes)
        .iter()
        .fold(String::with_capacity(64), |mut out, b| {
            let _ = write!(out, "{b:02x}");
            out
        })
}
