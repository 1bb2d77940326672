//! `countersign demo approve`: decide the demo's held call with the demo software key.
//!
//! It does what the approver page does with a passkey, through the same HTTP API: log in with an
//! assertion over a login challenge, show the call, fetch the decision challenge
//! (`nonce || op_hash`) and submit the signed decision. The key is the demo's own (its seed is
//! in the demo's data directory), enrolled as [`countersign_server::demo::DEMO_PRINCIPAL`], and
//! it signs with user presence only: no user is verified, so the verdict says AAL1. Any service
//! but the demo's refuses it (see `countersign_server::demo`).

use super::{DemoKey, DemoState};
use crate::exit::{EXIT_ALLOW, EXIT_DENY};
use anyhow::Context as _;
use countersign::b64;
use serde_json::{Value, json};
use std::path::Path;

/// Log in with the demo key and approve (or refuse) the demo's held call.
pub(crate) fn run(data_dir: &Path, refuse: bool) -> anyhow::Result<u8> {
    let state = DemoState::read(data_dir)?;
    let key = DemoKey::read(data_dir)?;
    let id = state.approval_id.clone().with_context(|| {
        format!(
            "the demo in {} has no held call yet; wait until it prints the approver link",
            data_dir.display()
        )
    })?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(decide(&state, &key, &id, refuse))
}

async fn decide(state: &DemoState, key: &DemoKey, id: &str, refuse: bool) -> anyhow::Result<u8> {
    let api = Api {
        http: reqwest::Client::new(),
        base: state.service.trim_end_matches('/').to_owned(),
    };
    let Some((token, principal)) = log_in(&api, state, key).await? else {
        return Ok(EXIT_DENY);
    };
    let review = api
        .get(&format!("/v1/approver/approvals/{id}"), &token)
        .await?;
    say(&format!("Signed in as: {principal}"));
    show(&review)?;
    if review.get("status").and_then(Value::as_str) != Some("PENDING") {
        eprintln!("countersign demo approve: approval {id} is decided already; nothing to do");
        return Ok(EXIT_DENY);
    }
    let decision = if refuse { "DENIED" } else { "APPROVED" };
    let challenge = api
        .post(
            &format!("/v1/approver/approvals/{id}/challenge"),
            Some(&token),
            &json!({"decision": decision}),
        )
        .await?;
    let signed = key.sign(state, &challenge_bytes(&challenge)?)?;
    match api
        .post_checked(
            &format!("/v1/approver/approvals/{id}/decision"),
            Some(&token),
            &signed,
        )
        .await?
    {
        Ok(result) => {
            decided(id, &result, refuse);
            Ok(EXIT_ALLOW)
        }
        Err(refusal) => {
            eprintln!("countersign demo approve: the decision was refused: {refusal}");
            Ok(EXIT_DENY)
        }
    }
}

/// Log in with an assertion of the demo key over a login challenge: the session token and the
/// principal, or `None` (said on stderr) when the service refuses the key.
async fn log_in(
    api: &Api,
    state: &DemoState,
    key: &DemoKey,
) -> anyhow::Result<Option<(String, String)>> {
    let challenge = api
        .post("/v1/approver/login/challenge", None, &json!({}))
        .await?;
    let signed = key.sign(state, &challenge_bytes(&challenge)?)?;
    let login = match api
        .post_checked("/v1/approver/login", None, &signed)
        .await?
    {
        Ok(login) => login,
        Err(refusal) => {
            eprintln!("countersign demo approve: the service refused the demo key: {refusal}");
            return Ok(None);
        }
    };
    let token = login
        .get("token")
        .and_then(Value::as_str)
        .context("the login answer has no token")?
        .to_owned();
    let principal = login
        .get("principal")
        .and_then(Value::as_str)
        .unwrap_or("?")
        .to_owned();
    Ok(Some((token, principal)))
}

/// The call as the approver page shows it: status, agent, tool, fields.
fn show(review: &Value) -> anyhow::Result<()> {
    let text = |member: &str| review.get(member).and_then(Value::as_str).unwrap_or("?");
    say(&format!(
        "The call waiting for you ({}):\n  agent {}\n  tool  {}\n  fields {}",
        text("status"),
        text("agent_id"),
        text("tool_name"),
        serde_json::to_string_pretty(review.get("fields").unwrap_or(&Value::Null))?
            .replace('\n', "\n  ")
    ));
    Ok(())
}

/// What the decision `result` means, for the person who made it.
fn decided(id: &str, result: &Value, refuse: bool) {
    say(&format!(
        "{} with the demo software key: approval {id} is {}.\n\
         The signature covers nonce || op_hash of exactly this call; the demo key signed \
         with user presence only (no PIN, no biometric), so the verdict rates it AAL1.\n\
         Back in the demo's terminal the call {}.",
        if refuse { "Refused" } else { "Approved" },
        result.get("status").and_then(Value::as_str).unwrap_or("?"),
        if refuse {
            "is reported as refused and does not run"
        } else {
            "runs once"
        },
    ));
}

fn say(text: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stdout(), "{text}");
}

fn challenge_bytes(answer: &Value) -> anyhow::Result<Vec<u8>> {
    let text = answer
        .get("challenge")
        .and_then(Value::as_str)
        .with_context(|| format!("no challenge in {answer}"))?;
    b64::decode(text).map_err(|_| anyhow::anyhow!("the challenge is not base64url"))
}

/// The demo's service, as an approver reaches it.
struct Api {
    http: reqwest::Client,
    base: String,
}

impl Api {
    /// POST, requiring a 2xx answer.
    async fn post(&self, path: &str, token: Option<&str>, body: &Value) -> anyhow::Result<Value> {
        self.post_checked(path, token, body)
            .await?
            .map_err(|refusal| anyhow::anyhow!("POST {path}: {refusal}"))
    }

    /// POST: `Ok(body)` on 2xx, `Err(the service's message)` otherwise; transport errors are
    /// the outer error.
    async fn post_checked(
        &self,
        path: &str,
        token: Option<&str>,
        body: &Value,
    ) -> anyhow::Result<Result<Value, String>> {
        let mut request = self.http.post(format!("{}{path}", self.base)).json(body);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        answer(request.send().await, &self.base).await
    }

    async fn get(&self, path: &str, token: &str) -> anyhow::Result<Value> {
        let request = self
            .http
            .get(format!("{}{path}", self.base))
            .bearer_auth(token);
        answer(request.send().await, &self.base)
            .await?
            .map_err(|refusal| anyhow::anyhow!("GET {path}: {refusal}"))
    }
}

async fn answer(
    sent: reqwest::Result<reqwest::Response>,
    base: &str,
) -> anyhow::Result<Result<Value, String>> {
    let response = sent.with_context(|| {
        format!("the demo's service at {base} does not answer; is `countersign demo` running?")
    })?;
    let status = response.status();
    let body: Value = response.json().await.unwrap_or(Value::Null);
    if status.is_success() {
        return Ok(Ok(body));
    }
    let message = body
        .pointer("/error/message")
        .and_then(Value::as_str)
        .map_or_else(|| body.to_string(), str::to_owned);
    Ok(Err(format!("HTTP {}: {message}", status.as_u16())))
}
