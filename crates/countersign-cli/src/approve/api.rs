//! The service's bearer approver API (`/v1/approver/...`), the calls the approver page makes
//! through its cookie session: sign-in challenge and assertion, inbox, review, decision
//! challenge, decision. Synchronous calls on a small runtime of their own, so the security key
//! can be driven from the main thread between them.

use super::error::ApproveError;
use countersign::ApprovalResult;
use countersign_server::{
    AssertionBody, DecisionChallenge, LoginChallenge, LoginResponse, ReviewView,
};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// What waits for the signed-in approver (`GET /v1/approver/inbox`; the standing grants it also
/// lists are not read here).
#[derive(Debug, Deserialize)]
pub(super) struct Inbox {
    pub(super) pending: Vec<Pending>,
}

/// One approval the approver may decide.
#[derive(Debug, Deserialize)]
pub(super) struct Pending {
    pub(super) approval_id: String,
    /// `approval`, or `standing_grant` for a proposed standing grant.
    pub(super) kind: String,
    pub(super) tool_name: String,
    pub(super) severity: String,
    pub(super) expires_at: String,
}

/// One service, reached as an approver.
pub(super) struct Api {
    runtime: tokio::runtime::Runtime,
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

impl std::fmt::Debug for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Api").field("base", &self.base).finish()
    }
}

impl Api {
    pub(super) fn new(service: &str) -> Result<Self, ApproveError> {
        let transport = |reason: String| ApproveError::Transport {
            what: "starting the HTTP client".to_owned(),
            reason,
        };
        // Multi-threaded with one worker: the worker drives the I/O and timers the USB
        // transport waits on while the main thread blocks on the key (see `key`).
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .map_err(|e| transport(e.to_string()))?;
        let http = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(60))
            .build()
            .map_err(|e| transport(e.to_string()))?;
        Ok(Self {
            runtime,
            http,
            base: service.trim_end_matches('/').to_owned(),
            token: None,
        })
    }

    /// The runtime, for a transport that needs one (the USB key).
    pub(super) fn runtime(&self) -> &tokio::runtime::Handle {
        self.runtime.handle()
    }

    pub(super) fn login_challenge(&self) -> Result<LoginChallenge, ApproveError> {
        self.post("/v1/approver/login/challenge", &json!({}))
    }

    /// Sign in; the session's bearer token is kept for the calls that follow.
    pub(super) fn login(&mut self, body: &AssertionBody) -> Result<LoginResponse, ApproveError> {
        let login: LoginResponse = self.post("/v1/approver/login", &to_value(body)?)?;
        self.token = Some(login.token.clone());
        Ok(login)
    }

    pub(super) fn inbox(&self) -> Result<Inbox, ApproveError> {
        self.get("/v1/approver/inbox")
    }

    pub(super) fn review(&self, id: &str) -> Result<ReviewView, ApproveError> {
        self.get(&format!("/v1/approver/approvals/{}", segment(id)))
    }

    pub(super) fn challenge(
        &self,
        id: &str,
        decision: countersign::Decision,
    ) -> Result<DecisionChallenge, ApproveError> {
        self.post(
            &format!("/v1/approver/approvals/{}/challenge", segment(id)),
            &json!({ "decision": decision }),
        )
    }

    /// Submit the signed decision: the recorded result, as admitted by the core, and as sent
    /// (what the local check verifies).
    pub(super) fn decide(
        &self,
        id: &str,
        body: &AssertionBody,
    ) -> Result<(ApprovalResult, Value), ApproveError> {
        let path = format!("/v1/approver/approvals/{}/decision", segment(id));
        let sent: Value = self.post(&path, &to_value(body)?)?;
        let result = ApprovalResult::from_value(&sent).map_err(|e| ApproveError::Transport {
            what: format!("POST {path}"),
            reason: format!("the answer is not an ApprovalResult: {e}"),
        })?;
        Ok((result, sent))
    }

    /// The registry document at `url` (the service's `/v1/registry` when it publishes it).
    pub(super) fn fetch(&self, url: &str) -> Result<Vec<u8>, ApproveError> {
        let what = format!("GET {url}");
        let response = self
            .runtime
            .block_on(async {
                self.http
                    .get(url)
                    .send()
                    .await?
                    .error_for_status()?
                    .bytes()
                    .await
            })
            .map_err(|e| ApproveError::Transport {
                what,
                reason: e.to_string(),
            })?;
        Ok(response.to_vec())
    }

    /// The service's base URL.
    pub(super) fn base(&self) -> &str {
        &self.base
    }

    fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, ApproveError> {
        self.call(reqwest::Method::GET, path, None)
    }

    fn post<T: DeserializeOwned>(&self, path: &str, body: &Value) -> Result<T, ApproveError> {
        self.call(reqwest::Method::POST, path, Some(body))
    }

    fn call<T: DeserializeOwned>(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<T, ApproveError> {
        let what = format!("{method} {path}");
        let mut request = self.http.request(method, format!("{}{path}", self.base));
        if let Some(body) = body {
            request = request.json(body);
        }
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        let transport = |reason: String| ApproveError::Transport {
            what: what.clone(),
            reason,
        };
        let (status, bytes) = self
            .runtime
            .block_on(async {
                let response = request.send().await?;
                let status = response.status();
                Ok::<_, reqwest::Error>((status, response.bytes().await?))
            })
            .map_err(|e| transport(format!("the service at {} does not answer: {e}", self.base)))?;
        if !status.is_success() {
            let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            let message = body
                .pointer("/error/message")
                .and_then(Value::as_str)
                .map_or_else(
                    || String::from_utf8_lossy(&bytes).into_owned(),
                    str::to_owned,
                );
            return Err(ApproveError::Service {
                what: what.clone(),
                status: status.as_u16(),
                message,
            });
        }
        serde_json::from_slice(&bytes)
            .map_err(|e| transport(format!("the answer is not what the API describes: {e}")))
    }
}

fn to_value(body: &AssertionBody) -> Result<Value, ApproveError> {
    serde_json::to_value(body).map_err(|e| ApproveError::Transport {
        what: "encoding the assertion".to_owned(),
        reason: e.to_string(),
    })
}

/// An approval id as one path segment: ids are `apr_` and base64url, but one typed by hand
/// must not reach another route.
fn segment(id: &str) -> String {
    id.chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
        .collect()
}
