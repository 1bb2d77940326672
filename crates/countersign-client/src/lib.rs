//! The gateway side of the approval_callback: hold a call until a human has decided it.
//!
//! [`Gateway::authorize`] is the whole rule in one call:
//!
//! 1. ask the callback, with a mandatory timeout: no answer in time is DENIED `callback_timeout`;
//! 2. follow the redrive URL (long-polling) until the request is settled or `expires_at` passes,
//!    which is DENIED `expired_unanswered`;
//! 3. verify the evidence with the core verifier against the registry *this gateway* trusts and
//!    its *current* policy — never a registry or an assurance level the answer carries;
//! 4. collect the single-use grant with the fingerprint of the exact call about to run.
//!
//! Every call to the service carries the gateway's bearer token ([`GatewayToken`], a required
//! argument of [`GatewayConfig::new`]): the service shows a gateway only the approvals it created.
//!
//! Every failure is a [`Refusal`] with a reason code; nothing here returns "maybe". The call may
//! run only with a [`Grant`] in hand.
//!
//! The replay state (spent nonces, counters) is a [`ReplayStore`], durable by default: a gateway
//! restarted over the same directory still refuses evidence it already accepted.

mod replay;

pub use replay::{REPLAY_FILE, ReplayStore, ReplayStoreError};

use countersign::{
    Action, ApprovalResult, ApprovalStatus, ApproverPolicy, CredentialRegistry, Decision, Policy,
    ReasonCode, Verdict, b64, verify_evidence,
};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::sync::{Mutex, RwLock};
use std::time::Duration;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use url::Url;

pub use countersign::{MCP_TOOL_CALL_PROFILE, TOOL_CALL_PROFILE};

/// The call a gateway is holding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    pub agent_id: String,
    pub tool_name: String,
    /// The JSON text of the arguments, exactly as the tool will receive them. It is sent to the
    /// service as this text (not re-serialized), so the service admits and the approver sees the
    /// bytes the tool will run.
    pub params_json: String,
    /// Canonicalization profile (default: the generic tool-call profile).
    pub profile: Option<String>,
    pub severity: Option<String>,
    /// The MCP server the call goes to (the MCP tool-call profile signs it; no other does).
    pub server_id: Option<String>,
}

impl ToolCall {
    /// A call relayed to the MCP server `server_id`, under the MCP tool-call profile, whose
    /// arguments are the JSON text `arguments_json` exactly as the server will receive it.
    pub fn mcp(
        agent_id: impl Into<String>,
        server_id: impl Into<String>,
        tool_name: impl Into<String>,
        arguments_json: impl Into<String>,
    ) -> Self {
        Self {
            agent_id: agent_id.into(),
            tool_name: tool_name.into(),
            params_json: arguments_json.into(),
            profile: Some(MCP_TOOL_CALL_PROFILE.to_owned()),
            severity: None,
            server_id: Some(server_id.into()),
        }
    }

    /// A generic tool call.
    pub fn new(
        agent_id: impl Into<String>,
        tool_name: impl Into<String>,
        params: &serde_json::Value,
    ) -> Self {
        Self {
            agent_id: agent_id.into(),
            tool_name: tool_name.into(),
            params_json: params.to_string(),
            profile: None,
            severity: None,
            server_id: None,
        }
    }

    /// A call whose arguments are the JSON text `params_json`, exactly as the tool will receive
    /// it. Prefer this to [`ToolCall::new`] when the arguments arrive as text: re-parsing can
    /// change them (`-0` becomes `-0.0`, large integers lose precision).
    pub fn raw(
        agent_id: impl Into<String>,
        tool_name: impl Into<String>,
        params_json: impl Into<String>,
    ) -> Self {
        Self {
            agent_id: agent_id.into(),
            tool_name: tool_name.into(),
            params_json: params_json.into(),
            profile: None,
            severity: None,
            server_id: None,
        }
    }

    /// The profile this call is signed under.
    pub fn profile(&self) -> &str {
        self.profile.as_deref().unwrap_or(TOOL_CALL_PROFILE)
    }

    /// The action the evidence must bind: the same fields the service derives from the request,
    /// and the tool about to run. The verifier checks the tool against the signed `tool_name`
    /// (tool-call profile), or against the policy's `profile_tools` (a typed profile, which does
    /// not sign it): evidence for one tool never authorizes another.
    pub fn action(&self) -> Action {
        let call = countersign::ToolCallParts {
            agent_id: &self.agent_id,
            server_id: self.server_id.as_deref(),
            tool_name: &self.tool_name,
            params_json: &self.params_json,
        };
        // Built by the core's rule, as the service builds it from the request. A call whose
        // server_id does not fit its profile is refused by the service; its action is left
        // empty, which no admission (and so no evidence) accepts.
        let fields = countersign::call_fields_json(self.profile(), &call).unwrap_or_default();
        Action::new(self.profile(), fields.into_bytes()).with_tool(self.tool_name.clone())
    }

    /// The `POST /v1/approvals` body, with `params` as the exact text of `params_json`.
    fn request_body(&self) -> Result<String, Refusal> {
        #[derive(Serialize)]
        struct Body<'a> {
            agent_id: &'a str,
            tool_name: &'a str,
            params: &'a RawValue,
            #[serde(skip_serializing_if = "Option::is_none")]
            profile: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            severity: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            server_id: Option<&'a str>,
        }
        // RawValue checks the text is one JSON value and keeps it byte for byte.
        let params: &RawValue = serde_json::from_str(&self.params_json)
            .map_err(|e| Refusal::new(ReasonCode::ActionInadmissible, format!("params: {e}")))?;
        serde_json::to_string(&Body {
            agent_id: &self.agent_id,
            tool_name: &self.tool_name,
            params,
            profile: self.profile.as_deref(),
            severity: self.severity.as_deref(),
            server_id: self.server_id.as_deref(),
        })
        .map_err(|e| Refusal::new(ReasonCode::ActionInadmissible, format!("request: {e}")))
    }
}

/// Why the call must not run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{reason_code}: {detail}")]
pub struct Refusal {
    pub reason_code: ReasonCode,
    pub approval_id: Option<String>,
    pub detail: String,
    /// The verifier's verdict, when the refusal came from verification.
    pub verdict: Option<Box<Verdict>>,
}

impl Refusal {
    fn new(reason_code: ReasonCode, detail: impl Into<String>) -> Self {
        Self {
            reason_code,
            approval_id: None,
            detail: detail.into(),
            verdict: None,
        }
    }
    fn for_approval(mut self, id: &str) -> Self {
        self.approval_id = Some(id.to_owned());
        self
    }
}

/// A settled, verified approval (not yet permission: collect the grant).
#[derive(Debug, Clone)]
pub struct Approval {
    pub approval_id: String,
    /// The tool the evidence was verified for; its grant is collected for that tool only.
    pub tool_name: String,
    pub result: ApprovalResult,
    pub verdict: Verdict,
}

/// Permission to run exactly one call, once.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Grant {
    pub approval_id: String,
    pub fingerprint: String,
    pub collected_at: String,
    /// The service's signed checkpoint of its audit log covering this grant and its Decision (a
    /// C2SP signed note). Keep it with the call's record: `countersign audit verify --checkpoint`
    /// proves later that the log still holds them. Absent from services that predate it.
    #[serde(default)]
    pub checkpoint: Option<String>,
    /// A C2SP tlog-proof@v1 of the grant's audit line under `checkpoint`: the proof, alone,
    /// that the grant was logged (`countersign audit prove tlog`). Absent from services that
    /// predate it.
    #[serde(default)]
    pub tlog_proof: Option<String>,
}

/// A gateway's bearer token, as `countersign gateway add NAME` printed it. The service answers
/// every gateway call without it 401, and shows each gateway only its own approvals. `Debug`
/// never prints it.
#[derive(Clone, PartialEq, Eq)]
pub struct GatewayToken(String);

/// A token that cannot be one: empty, or with whitespace or control characters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a gateway token is a non-empty string without whitespace or control characters")]
pub struct InvalidToken;

impl GatewayToken {
    /// The token text (surrounding whitespace, such as a file's final newline, is dropped).
    pub fn new(token: impl Into<String>) -> Result<Self, InvalidToken> {
        let token = token.into();
        let token = token.trim();
        if token.is_empty() || token.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(InvalidToken);
        }
        Ok(Self(token.to_owned()))
    }

    fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for GatewayToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GatewayToken(***)")
    }
}

/// Gateway settings.
#[derive(Debug, Clone)]
pub struct GatewayConfig {
    /// The approval service, e.g. `http://127.0.0.1:8080`.
    pub base_url: Url,
    /// This gateway's bearer token, sent with every call.
    pub token: GatewayToken,
    /// How long the callback may take to answer one request. Mandatory by construction.
    pub callback_timeout: Duration,
    /// How long one long-poll asks the service to hold (`?wait=`).
    pub poll_wait: Duration,
    /// Stop following a request after this long even if it has not expired (withdrawing it).
    pub max_hold: Duration,
}

impl GatewayConfig {
    /// Settings for the service at `base_url`, authenticating with `token`, with a callback
    /// timeout; long polls of 20 s and a one-hour hold limit.
    pub fn new(base_url: Url, token: GatewayToken, callback_timeout: Duration) -> Self {
        Self {
            base_url,
            token,
            callback_timeout,
            poll_wait: Duration::from_secs(20),
            max_hold: Duration::from_secs(3600),
        }
    }
}

/// The policy for approvals made on the approver page of the service at `service`, when that
/// service takes its page from the address it listens on (no `public_url`, `origins` or
/// `rp_id` configured): the origin is `service` as a browser opens it (`localhost` for a
/// loopback address, see [`countersign::browser_url`]) and the relying party id its host.
/// `http://127.0.0.1:8080` and `http://localhost:8080` give the same policy.
///
/// A service whose configuration names its page (`rp_id`, `origins`) needs those values
/// instead: build the [`Policy`] from them. Other settings are the core defaults (user
/// verification required, no minimum assurance); adjust the returned policy as needed.
pub fn service_policy(service: &Url) -> Policy {
    let page = countersign::browser_url(service);
    let rp_id = page.host_str().unwrap_or("localhost").to_owned();
    Policy::new(rp_id, [page.origin().ascii_serialization()])
}

/// Where the gateway reads "now" (the system clock unless a test injects one).
type ClockFn = std::sync::Arc<dyn Fn() -> OffsetDateTime + Send + Sync>;

struct Trust {
    policy: Policy,
    registry: CredentialRegistry,
}

/// A gateway's connection to one approval service.
pub struct Gateway {
    config: GatewayConfig,
    http: reqwest::Client,
    trust: RwLock<Trust>,
    replay: Mutex<ReplayStore>,
    clock: ClockFn,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("base_url", &self.config.base_url.as_str())
            .finish_non_exhaustive()
    }
}

fn short(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// The HTTP client towards the service. The service closes a keep-alive connection that stays
/// idle for `timeouts.header_read_seconds` (10 s by default); a pooled connection kept longer
/// than that can be closed by the service just as a request is written on it, and a POST is not
/// retried, so the pool lets connections go well before.
fn service_client() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_idle_timeout(std::time::Duration::from_secs(5))
        .build()
        .unwrap_or_else(|_| reqwest::Client::new())
}

impl Gateway {
    /// A gateway trusting `registry` and enforcing `policy`, keeping its replay state in
    /// `replay` (normally [`ReplayStore::sqlite`]; [`ReplayStore::memory`] forgets on restart).
    pub fn new(
        config: GatewayConfig,
        policy: Policy,
        registry: CredentialRegistry,
        replay: ReplayStore,
    ) -> Self {
        Self {
            config,
            http: service_client(),
            trust: RwLock::new(Trust { policy, registry }),
            replay: Mutex::new(replay),
            clock: std::sync::Arc::new(OffsetDateTime::now_utc),
        }
    }

    /// Read "now" from `clock` instead of the system clock (tests with a manual clock).
    pub fn with_clock(
        mut self,
        clock: impl Fn() -> OffsetDateTime + Send + Sync + 'static,
    ) -> Self {
        self.clock = std::sync::Arc::new(clock);
        self
    }

    /// Replace the policy; it applies to every verification from now on, including approvals
    /// already granted by the service but not yet verified here.
    pub fn set_policy(&self, policy: Policy) {
        self.trust.write().unwrap_or_else(|p| p.into_inner()).policy = policy;
    }

    /// Replace the trusted registry (e.g. after a revocation).
    pub fn set_registry(&self, registry: CredentialRegistry) {
        self.trust
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .registry = registry;
    }

    /// Request, wait, verify and collect: a [`Grant`] or a [`Refusal`].
    pub async fn authorize(&self, call: &ToolCall) -> Result<Grant, Refusal> {
        let approval = self.request_approval(call).await?;
        self.collect_grant(&approval, call).await
    }

    /// Ask for approval and wait for a verified verdict on this exact call.
    pub async fn request_approval(&self, call: &ToolCall) -> Result<Approval, Refusal> {
        let body = call.request_body()?;
        let url = self.endpoint("v1/approvals")?;
        let request = self
            .authed(self.http.post(url))
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body)
            .send();
        let first = self.answer(request, self.config.callback_timeout).await?;
        let id = first.approval_id.clone();
        let result = match first.status {
            ApprovalStatus::Pending => {
                let id = id.clone().ok_or_else(|| {
                    Refusal::new(ReasonCode::ResultMalformed, "PENDING without approval_id")
                })?;
                self.follow(&id, first).await?
            }
            _ => first,
        };
        if let (Some(asked), Some(got)) = (&id, &result.approval_id)
            && asked != got
        {
            return Err(Refusal::new(
                ReasonCode::ResultMalformed,
                format!("asked about {asked}, the answer is about {got}"),
            ));
        }
        self.verify(call, result, id.as_deref(), None)
    }

    /// Create the approval request for `call` and return the service's first answer at once
    /// (PENDING with an `approval_id`, or an immediate verdict), without waiting for a human.
    /// A caller that cannot block (the MCP interposer) follows it later with [`Gateway::poll`].
    pub async fn submit(&self, call: &ToolCall) -> Result<ApprovalResult, Refusal> {
        let body = call.request_body()?;
        let url = self.endpoint("v1/approvals")?;
        let request = self
            .authed(self.http.post(url))
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body)
            .send();
        self.answer(request, self.config.callback_timeout).await
    }

    /// One long-poll of approval `id`: its current result, after the service held the request
    /// up to `wait` (whole seconds; 0 answers at once) for a verdict.
    pub async fn poll(&self, id: &str, wait: Duration) -> Result<ApprovalResult, Refusal> {
        let mut url = self
            .endpoint(&format!("v1/approvals/{id}"))
            .map_err(|r| r.for_approval(id))?;
        url.query_pairs_mut()
            .append_pair("wait", &wait.as_secs().to_string());
        let request = self.authed(self.http.get(url)).send();
        let result = self
            .answer(request, wait + self.config.callback_timeout)
            .await
            .map_err(|r| r.for_approval(id))?;
        if result.approval_id.as_deref().is_some_and(|got| got != id) {
            return Err(Refusal::new(
                ReasonCode::ResultMalformed,
                format!("asked about {id}, the answer is about another approval"),
            )
            .for_approval(id));
        }
        Ok(result)
    }

    /// The service's credential registry (`GET /v1/registry`, with this gateway's token). Using
    /// it means trusting the service to say who may approve: a registry file the gateway's
    /// operator controls is the stronger setup.
    pub async fn fetch_registry(&self) -> Result<CredentialRegistry, Refusal> {
        let url = self.endpoint("v1/registry")?;
        let send = self.authed(self.http.get(url)).send();
        let read = async {
            let response = send.await?;
            let status = response.status();
            Ok::<_, reqwest::Error>((status, response.bytes().await?))
        };
        let (status, bytes) = match tokio::time::timeout(self.config.callback_timeout, read).await {
            Err(_) => {
                return Err(Refusal::new(
                    ReasonCode::CallbackTimeout,
                    "registry: no answer in time",
                ));
            }
            Ok(Err(e)) => return Err(Refusal::new(ReasonCode::CallbackTimeout, short(&e))),
            Ok(Ok(answer)) => answer,
        };
        if !status.is_success() {
            return Err(error_refusal(&bytes, status));
        }
        CredentialRegistry::from_json(&bytes)
            .map_err(|e| Refusal::new(ReasonCode::ResultMalformed, format!("registry: {e}")))
    }

    /// Verify a settled result received some other way (a webhook push, a stored answer)
    /// against this gateway's trust, for `call`, spending its nonce in the replay store.
    pub fn verify_result(
        &self,
        call: &ToolCall,
        result: ApprovalResult,
    ) -> Result<Approval, Refusal> {
        let id = result.approval_id.clone();
        self.verify(call, result, id.as_deref(), None)
    }

    /// As [`Gateway::verify_result`], with who may approve `call`'s tool and how strongly taken
    /// from `approvers` (that tool's rule, [`countersign::ToolRules::policy_for`]) instead of
    /// the gateway's policy. Everything else (relying party, origins, ages, profiles) stays the
    /// gateway's.
    pub fn verify_result_under(
        &self,
        call: &ToolCall,
        result: ApprovalResult,
        approvers: &ApproverPolicy,
    ) -> Result<Approval, Refusal> {
        let id = result.approval_id.clone();
        self.verify(call, result, id.as_deref(), Some(approvers))
    }

    /// Verify a settled result against this gateway's trust, for `call`, under the tool's
    /// `approvers` when given.
    fn verify(
        &self,
        call: &ToolCall,
        result: ApprovalResult,
        id: Option<&str>,
        approvers: Option<&ApproverPolicy>,
    ) -> Result<Approval, Refusal> {
        let trust = self.trust.read().unwrap_or_else(|p| p.into_inner());
        let tool_policy = approvers.map(|a| a.apply_to(trust.policy.clone()));
        let policy = tool_policy.as_ref().unwrap_or(&trust.policy);
        let mut replay = self.replay.lock().unwrap_or_else(|p| p.into_inner());
        let action = call.action();
        let (verdict, spent) = replay.verify_and_spend(|state| {
            verify_evidence(
                policy,
                &action,
                &result,
                &trust.registry,
                state,
                (self.clock)(),
            )
        });
        let id = id.unwrap_or_default();
        if let (true, Err(detail)) = (verdict.is_allow(), spent) {
            // Verified, but the spend did not stick: another verifier sharing the store spent
            // the nonce first, or the store failed. Either way this evidence is not ours to use.
            return Err(Refusal::new(ReasonCode::Replayed, detail).for_approval(id));
        }
        if !verdict.is_allow() {
            let reason = verdict.reason_code.unwrap_or(ReasonCode::ApproverRefused);
            let mut refusal = Refusal::new(
                reason,
                verdict
                    .detail
                    .clone()
                    .unwrap_or_else(|| format!("verdict DENY ({reason})")),
            )
            .for_approval(id);
            refusal.verdict = Some(Box::new(verdict));
            return Err(refusal);
        }
        Ok(Approval {
            approval_id: id.to_owned(),
            tool_name: call.tool_name.clone(),
            result,
            verdict,
        })
    }

    /// Follow the redrive URL until the request settles or its window closes.
    async fn follow(
        &self,
        id: &str,
        mut result: ApprovalResult,
    ) -> Result<ApprovalResult, Refusal> {
        let started = tokio::time::Instant::now();
        let expires = result
            .expires_at
            .as_deref()
            .and_then(|t| OffsetDateTime::parse(t, &Rfc3339).ok())
            .ok_or_else(|| {
                Refusal::new(
                    ReasonCode::ResultMalformed,
                    "PENDING without a valid expires_at",
                )
                .for_approval(id)
            })?;
        let redrive = self.redrive_url(id, result.redrive_url.as_deref())?;
        loop {
            if result.status != ApprovalStatus::Pending {
                return Ok(result);
            }
            let now = (self.clock)();
            if now >= expires {
                return Err(Refusal::new(
                    ReasonCode::ExpiredUnanswered,
                    "the approval window closed with no verdict",
                )
                .for_approval(id));
            }
            if started.elapsed() >= self.config.max_hold {
                self.withdraw(id).await;
                return Err(Refusal::new(
                    ReasonCode::Cancelled,
                    "gave up waiting (max_hold) and withdrew the request",
                )
                .for_approval(id));
            }
            let left = u64::try_from((expires - now).whole_seconds()).unwrap_or(0);
            let wait = self.config.poll_wait.as_secs().min(left.max(1));
            let mut url = redrive.clone();
            url.query_pairs_mut().append_pair("wait", &wait.to_string());
            let request = self.authed(self.http.get(url)).send();
            let timeout = Duration::from_secs(wait) + self.config.callback_timeout;
            result = self
                .answer(request, timeout)
                .await
                .map_err(|r| r.for_approval(id))?;
        }
    }

    /// The redrive URL, only if it points back at the service we asked (no open redirects).
    ///
    /// A service names itself as a browser opens it (`localhost` for a loopback address, see
    /// [`countersign::browser_url`]), so a gateway configured with `127.0.0.1` gets a redrive
    /// URL on `localhost`, the same port. That is the same service: the poll goes to the host
    /// this gateway was configured with, so the token never goes anywhere else.
    fn redrive_url(&self, id: &str, given: Option<&str>) -> Result<Url, Refusal> {
        let fallback = || self.endpoint(&format!("v1/approvals/{id}"));
        let Some(given) = given else {
            return fallback();
        };
        let mut url = Url::parse(given).map_err(|e| {
            Refusal::new(ReasonCode::ResultMalformed, format!("redrive_url: {e}")).for_approval(id)
        })?;
        let base = &self.config.base_url;
        if url.origin() == base.origin() {
            return Ok(url);
        }
        let same_service = countersign::browser_url(&url).origin()
            == countersign::browser_url(base).origin()
            && url.set_host(base.host_str()).is_ok();
        if !same_service {
            return Err(Refusal::new(
                ReasonCode::ResultMalformed,
                format!("redrive_url {given} is not on the service's origin"),
            )
            .for_approval(id));
        }
        Ok(url)
    }

    /// Best-effort withdrawal when the gateway stops waiting.
    pub async fn withdraw(&self, id: &str) {
        if let Ok(url) = self.endpoint(&format!("v1/approvals/{id}/withdraw")) {
            let send = self.authed(self.http.post(url)).send();
            let _ = tokio::time::timeout(self.config.callback_timeout, send).await;
        }
    }

    /// Collect the grant for `call`, which must be the call about to run.
    pub async fn collect_grant(
        &self,
        approval: &Approval,
        call: &ToolCall,
    ) -> Result<Grant, Refusal> {
        let id = approval.approval_id.as_str();
        // A typed profile's fingerprint does not cover the tool: the same payment has the same
        // fingerprint under any tool name. The approval was verified for one tool; only that
        // tool may run on it.
        if approval.tool_name != call.tool_name {
            return Err(Refusal::new(
                ReasonCode::BindingMismatch,
                format!(
                    "the approval was verified for tool {:?}, not {:?}",
                    approval.tool_name, call.tool_name
                ),
            )
            .for_approval(id));
        }
        let fingerprint = self.fingerprint(call).map_err(|r| r.for_approval(id))?;
        let url = self.endpoint(&format!("v1/approvals/{id}/grant"))?;
        let send = self
            .authed(self.http.post(url))
            .json(&serde_json::json!({ "fingerprint": fingerprint, "tool_name": call.tool_name }))
            .send();
        let response = match tokio::time::timeout(self.config.callback_timeout, send).await {
            Err(_) => {
                return Err(
                    Refusal::new(ReasonCode::CallbackTimeout, "grant: no answer in time")
                        .for_approval(id),
                );
            }
            Ok(Err(e)) => {
                return Err(Refusal::new(ReasonCode::CallbackTimeout, short(&e)).for_approval(id));
            }
            Ok(Ok(r)) => r,
        };
        let status = response.status();
        let bytes = tokio::time::timeout(self.config.callback_timeout, response.bytes())
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default();
        if status.is_success() {
            let grant: Grant = serde_json::from_slice(&bytes).map_err(|e| {
                Refusal::new(ReasonCode::ResultMalformed, format!("grant: {e}")).for_approval(id)
            })?;
            if grant.fingerprint != fingerprint || grant.approval_id != id {
                return Err(Refusal::new(
                    ReasonCode::BindingMismatch,
                    "the grant is for another call",
                )
                .for_approval(id));
            }
            return Ok(grant);
        }
        Err(error_refusal(&bytes, status).for_approval(id))
    }

    /// The call fingerprint: the APPROVED op_hash of the exact call, under the gateway's profiles.
    pub fn fingerprint(&self, call: &ToolCall) -> Result<String, Refusal> {
        let trust = self.trust.read().unwrap_or_else(|p| p.into_inner());
        let action = call.action();
        let profile = trust.policy.profiles.get(&action.profile).ok_or_else(|| {
            Refusal::new(
                ReasonCode::ProfileUnknown,
                format!("profile {:?}", action.profile),
            )
        })?;
        let fields = countersign::admit_fields(profile, &action.fields_json)
            .map_err(|e| Refusal::new(e.reason_code(), e.to_string()))?;
        Ok(b64::encode(
            &countersign::op_hash(profile, Decision::Approved, &fields).0,
        ))
    }

    /// `request` with this gateway's bearer token.
    fn authed(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        request.bearer_auth(self.config.token.expose())
    }

    fn endpoint(&self, path: &str) -> Result<Url, Refusal> {
        let mut base = self.config.base_url.clone();
        if !base.path().ends_with('/') {
            base.set_path(&format!("{}/", base.path()));
        }
        base.join(path)
            .map_err(|e| Refusal::new(ReasonCode::ResultMalformed, format!("url: {e}")))
    }

    /// Await one answer within `timeout` and read it as an ApprovalResult.
    async fn answer(
        &self,
        request: impl std::future::Future<Output = reqwest::Result<reqwest::Response>>,
        timeout: Duration,
    ) -> Result<ApprovalResult, Refusal> {
        let read = async {
            let response = request.await?;
            let status = response.status();
            let bytes = response.bytes().await?;
            Ok::<_, reqwest::Error>((status, bytes))
        };
        let (status, bytes) = match tokio::time::timeout(timeout, read).await {
            Err(_) => {
                return Err(Refusal::new(
                    ReasonCode::CallbackTimeout,
                    format!("no answer within {} ms", timeout.as_millis()),
                ));
            }
            Ok(Err(e)) => return Err(Refusal::new(ReasonCode::CallbackTimeout, short(&e))),
            Ok(Ok(answer)) => answer,
        };
        if !status.is_success() {
            return Err(error_refusal(&bytes, status));
        }
        ApprovalResult::from_json(&bytes)
            .map_err(|e| Refusal::new(ReasonCode::ResultMalformed, e.to_string()))
    }
}

/// A refusal from the service's JSON error envelope.
fn error_refusal(bytes: &[u8], status: reqwest::StatusCode) -> Refusal {
    #[derive(Deserialize)]
    struct Envelope {
        error: ErrorBody,
    }
    #[derive(Deserialize)]
    struct ErrorBody {
        code: String,
        message: String,
        reason_code: Option<String>,
    }
    match serde_json::from_slice::<Envelope>(bytes) {
        Ok(e) => Refusal::new(
            e.error
                .reason_code
                .as_deref()
                .and_then(ReasonCode::from_wire)
                .unwrap_or(ReasonCode::ResultMalformed),
            format!("{status} {}: {}", e.error.code, e.error.message),
        ),
        Err(_) => Refusal::new(ReasonCode::ResultMalformed, format!("HTTP {status}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_call_action_wraps_params_with_agent_and_tool() {
        let call = ToolCall::new(
            "agent-7",
            "payments.transfer",
            &serde_json::json!({"to": "A"}),
        );
        let action = call.action();
        assert_eq!(action.profile, TOOL_CALL_PROFILE);
        let v: serde_json::Value = serde_json::from_slice(&action.fields_json).unwrap();
        assert_eq!(v["agent_id"], "agent-7");
        assert_eq!(v["params"]["to"], "A");
        assert_eq!(action.tool.as_deref(), Some("payments.transfer"));
        let mut typed = call.clone();
        typed.profile = Some("countersign.payment/1".into());
        assert_eq!(typed.action().fields_json, br#"{"to":"A"}"#);
        assert_eq!(typed.action().tool.as_deref(), Some("payments.transfer"));
    }

    #[test]
    fn tokens_are_required_non_blank_and_never_printed() {
        assert_eq!(GatewayToken::new(""), Err(InvalidToken));
        assert_eq!(GatewayToken::new("  \n"), Err(InvalidToken));
        assert_eq!(GatewayToken::new("csg_a b"), Err(InvalidToken));
        let token = GatewayToken::new("csg_secret\n").unwrap();
        assert_eq!(token.expose(), "csg_secret");
        let config = GatewayConfig::new(
            "http://127.0.0.1:1".parse().unwrap(),
            token,
            Duration::from_secs(1),
        );
        let printed = format!("{config:?}");
        assert!(!printed.contains("csg_secret"), "{printed}");
    }

    fn gateway_at(base: &str) -> Gateway {
        let config = GatewayConfig::new(
            base.parse().unwrap(),
            GatewayToken::new("csg_t").unwrap(),
            Duration::from_secs(1),
        );
        let registry = CredentialRegistry::from_json(br#"{"credentials":[]}"#).unwrap();
        Gateway::new(
            config,
            Policy::new("localhost", ["http://localhost:1"]),
            registry,
            ReplayStore::memory(),
        )
    }

    #[test]
    fn a_redrive_url_naming_the_same_loopback_service_as_localhost_is_followed_at_our_host() {
        let gw = gateway_at("http://127.0.0.1:18080");
        let url = gw
            .redrive_url("apv_1", Some("http://localhost:18080/v1/approvals/apv_1"))
            .unwrap();
        assert_eq!(url.as_str(), "http://127.0.0.1:18080/v1/approvals/apv_1");
        let gw = gateway_at("http://localhost:18080/");
        let url = gw
            .redrive_url("apv_1", Some("http://127.0.0.1:18080/v1/approvals/apv_1"))
            .unwrap();
        assert_eq!(url.as_str(), "http://localhost:18080/v1/approvals/apv_1");
    }

    #[test]
    fn a_redrive_url_elsewhere_is_refused() {
        let gw = gateway_at("http://127.0.0.1:18080");
        for elsewhere in [
            "http://localhost:8080/v1/approvals/apv_1",
            "https://localhost:18080/v1/approvals/apv_1",
            "http://attacker.example:18080/v1/approvals/apv_1",
            "http://192.0.2.1:18080/v1/approvals/apv_1",
        ] {
            let r = gw.redrive_url("apv_1", Some(elsewhere)).unwrap_err();
            assert_eq!(r.reason_code, ReasonCode::ResultMalformed, "{elsewhere}");
            assert!(r.detail.contains("not on the service's origin"), "{r:?}");
        }
        let gw = gateway_at("http://countersign.internal:8080");
        let r = gw
            .redrive_url("apv_1", Some("http://localhost:8080/v1/approvals/apv_1"))
            .unwrap_err();
        assert_eq!(r.reason_code, ReasonCode::ResultMalformed);
    }

    #[test]
    fn the_service_policy_follows_the_url_as_a_browser_opens_it() {
        let a = service_policy(&"http://127.0.0.1:18080".parse().unwrap());
        let b = service_policy(&"http://localhost:18080/".parse().unwrap());
        assert_eq!(a.rp_id, "localhost");
        assert_eq!(a.origins, vec!["http://localhost:18080".to_owned()]);
        assert_eq!((a.rp_id, a.origins), (b.rp_id, b.origins));
        let named = service_policy(&"https://approve.example.org/base/".parse().unwrap());
        assert_eq!(named.rp_id, "approve.example.org");
        assert_eq!(
            named.origins,
            vec!["https://approve.example.org".to_owned()]
        );
        // A different port is a different origin: evidence made there does not verify here.
        let other = service_policy(&"http://127.0.0.1:8080".parse().unwrap());
        assert_ne!(other.origins, vec!["http://localhost:18080".to_owned()]);
    }

    #[test]
    fn error_envelopes_map_to_reason_codes() {
        let r = error_refusal(
            br#"{"error":{"code":"grant_already_collected","message":"m","reason_code":"replayed"}}"#,
            reqwest::StatusCode::CONFLICT,
        );
        assert_eq!(r.reason_code, ReasonCode::Replayed);
        let r = error_refusal(b"<html>", reqwest::StatusCode::BAD_GATEWAY);
        assert_eq!(r.reason_code, ReasonCode::ResultMalformed);
    }
}
