//! A CASE assembled from its parts: the action, the service's answer, the enrolled keys and the
//! verifier's rules, each from where an operator has it (a file, the service's published
//! registry, the service's own configuration).
//!
//! Nothing here judges anything: the parts are laid into one CASE document, byte for byte where
//! they are JSON already, and that document goes through the same admission as a CASE file.

use crate::store::StoreArgs;
use anyhow::Context as _;
use countersign::{TOOL_CALL_PROFILE, ToolCallParts, call_fields_json};
use countersign_server::config::Config;
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::value::RawValue;
use std::path::{Path, PathBuf};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// The CASE's `action` member, and the tool it names (for the service rule that applies).
#[derive(Debug)]
pub(super) struct Action {
    json: String,
    tool: Option<String>,
}

/// The action as a CASE writes it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ActionDocument<'a> {
    #[allow(
        dead_code,
        reason = "read to tell the two shapes apart; the core reads it again"
    )]
    profile: String,
    #[serde(borrow)]
    fields: &'a RawValue,
    #[serde(default)]
    tool: Option<String>,
}

/// The approval request body a gateway sends (`POST /v1/approvals`, docs/API.md).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RequestBody<'a> {
    agent_id: String,
    tool_name: String,
    #[serde(borrow)]
    params: &'a RawValue,
    #[serde(default)]
    profile: Option<String>,
    #[serde(default)]
    server_id: Option<String>,
    // Not signed: neither changes the action; named so a misspelt member is still refused.
    #[allow(dead_code, reason = "accepted, not used")]
    #[serde(default)]
    severity: Option<IgnoredAny>,
    #[allow(dead_code, reason = "accepted, not used")]
    #[serde(default)]
    revises: Option<IgnoredAny>,
}

/// Read `--action`: a CASE action, or the request body from which the service derived one.
pub(super) fn action(bytes: &[u8]) -> anyhow::Result<Action> {
    let text = std::str::from_utf8(bytes).context("--action is not UTF-8")?;
    if let Ok(doc) = serde_json::from_str::<ActionDocument<'_>>(text) {
        // Passed on as written: the core's admission reads these exact bytes.
        let tool = doc.tool.or_else(|| signed_tool_name(doc.fields));
        return Ok(Action {
            json: text.trim().to_owned(),
            tool,
        });
    }
    let body: RequestBody<'_> = serde_json::from_str(text).context(
        "--action is neither {\"profile\", \"fields\", \"tool\"?} nor an approval request body \
         {\"agent_id\", \"tool_name\", \"params\", \"profile\"?, \"server_id\"?}",
    )?;
    let profile = body.profile.as_deref().unwrap_or(TOOL_CALL_PROFILE);
    let call = ToolCallParts {
        agent_id: &body.agent_id,
        server_id: body.server_id.as_deref(),
        tool_name: &body.tool_name,
        params_json: body.params.get(),
    };
    // The same derivation as the service's and the client library's.
    let fields = call_fields_json(profile, &call).context("--action")?;
    let json = format!(
        "{{\"profile\":{},\"fields\":{fields},\"tool\":{}}}",
        serde_json::Value::from(profile),
        serde_json::Value::from(body.tool_name.as_str()),
    );
    Ok(Action {
        json,
        tool: Some(body.tool_name),
    })
}

/// The `tool_name` a tool-call profile's fields sign, if they carry one.
fn signed_tool_name(fields: &RawValue) -> Option<String> {
    #[derive(Deserialize)]
    struct Named {
        tool_name: String,
    }
    serde_json::from_str::<Named>(fields.get())
        .ok()
        .map(|n| n.tool_name)
}

/// Where the verifier's rules come from.
pub(super) enum Trust {
    /// A policy document, as in a CASE.
    Policy(Vec<u8>),
    /// The service's configuration: the policy it applies to the action's tool.
    Config { path: PathBuf, members: Members },
}

/// Where group memberships granted by invites are read, if anywhere.
pub(super) struct Members {
    pub(super) data_dir: Option<PathBuf>,
    pub(super) database: Option<String>,
}

/// The CASE's `policy` member.
pub(super) fn policy(trust: &Trust, action: &Action) -> anyhow::Result<Vec<u8>> {
    let (path, members) = match trust {
        Trust::Policy(bytes) => return Ok(bytes.clone()),
        Trust::Config { path, members } => (path, members),
    };
    let config = Config::from_file(path)?;
    let rule = config.rule(action.tool.as_deref().unwrap_or_default());
    let mut eligible: Option<Vec<String>> = config
        .eligible_principals(rule)
        .map(|names| names.into_iter().map(str::to_owned).collect());
    if let Some(eligible) = eligible.as_mut() {
        match &members.data_dir {
            Some(data_dir) => {
                let store = StoreArgs {
                    data_dir: data_dir.clone(),
                    database: members.database.clone(),
                }
                .open()?;
                let granted = store.memberships().context("reading group memberships")?;
                eligible.extend(
                    granted
                        .into_iter()
                        .filter(|(_, group)| rule.approvers.contains(group))
                        .map(|(principal, _)| principal),
                );
                eligible.sort_unstable();
                eligible.dedup();
            }
            None => eprintln!(
                "countersign: note: the rule for {} names approver groups; members added by \
                 invites are not counted without --data-dir",
                action.tool.as_deref().unwrap_or("the default tool"),
            ),
        }
    }
    serde_json::to_vec(&config.policy(rule, eligible)).context("writing the derived policy")
}

/// The CASE's `registry` member: a file, or a service's published registry.
pub(super) fn registry(source: &str, token_file: Option<&Path>) -> anyhow::Result<Vec<u8>> {
    if !(source.starts_with("http://") || source.starts_with("https://")) {
        return crate::input::read_input(&PathBuf::from(source));
    }
    let mut url = url::Url::parse(source).with_context(|| format!("--registry {source}"))?;
    if matches!(url.path(), "" | "/") {
        url.set_path("/v1/registry");
    }
    let token = token_file.map(crate::fetch::read_token).transpose()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async {
        let mut request = reqwest::Client::new().get(url.clone());
        if let Some(token) = &token {
            request = request.bearer_auth(token);
        }
        let response = request
            .send()
            .await
            .with_context(|| format!("fetching {url}"))?;
        let status = response.status();
        let body = response
            .bytes()
            .await
            .with_context(|| format!("reading {url}"))?;
        anyhow::ensure!(
            status.is_success(),
            "{url} answered {status}: {}{}",
            String::from_utf8_lossy(&body),
            if status.as_u16() == 401 && token.is_none() {
                " (the registry is not published: give --gateway-token-file)"
            } else {
                ""
            }
        );
        Ok(body.to_vec())
    })
}

/// The verifier's clock, now.
pub(super) fn now_rfc3339() -> anyhow::Result<String> {
    OffsetDateTime::now_utc()
        .format(&Rfc3339)
        .context("formatting the clock")
}

/// Everything a CASE holds.
pub(super) struct Parts {
    pub(super) action: Action,
    pub(super) result: Vec<u8>,
    pub(super) registry: Vec<u8>,
    pub(super) policy: Vec<u8>,
    pub(super) now: String,
}

/// The CASE document of `parts`.
pub(super) fn assemble(parts: &Parts) -> anyhow::Result<Vec<u8>> {
    let json = |name: &str, bytes: &[u8]| -> anyhow::Result<String> {
        let text = std::str::from_utf8(bytes).with_context(|| format!("{name} is not UTF-8"))?;
        // Checked here only so the error names the part; the CASE is admitted whole below.
        serde_json::from_str::<&RawValue>(text).with_context(|| format!("{name} is not JSON"))?;
        Ok(text.trim().to_owned())
    };
    Ok(format!(
        "{{\"action\":{},\"result\":{},\"registry\":{},\"policy\":{},\"now\":{}}}",
        parts.action.json,
        json("--result", &parts.result)?,
        json("--registry", &parts.registry)?,
        json("the policy", &parts.policy)?,
        serde_json::Value::from(parts.now.as_str()),
    )
    .into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_case_action_is_passed_on_byte_for_byte() {
        let text = r#"{"profile":"countersign.payment/1","fields":{"amount":"1.00","a":"x"},"tool":"pay"}"#;
        let a = action(text.as_bytes()).unwrap();
        assert_eq!(a.json, text);
        assert_eq!(a.tool.as_deref(), Some("pay"));
    }

    #[test]
    fn a_tool_call_action_names_the_tool_it_signs() {
        let text = r#"{"profile":"countersign.tool-call/1","fields":{"agent_id":"a","tool_name":"deploy","params":{}}}"#;
        assert_eq!(
            action(text.as_bytes()).unwrap().tool.as_deref(),
            Some("deploy")
        );
    }

    #[test]
    fn a_request_body_gives_the_fields_the_service_derives() {
        let body =
            r#"{"agent_id":"agent-7","tool_name":"deploy","params":{"n": "1"},"severity":"high"}"#;
        let a = action(body.as_bytes()).unwrap();
        assert_eq!(
            a.json,
            r#"{"profile":"countersign.tool-call/1","fields":{"agent_id":"agent-7","tool_name":"deploy","params":{"n": "1"}},"tool":"deploy"}"#
        );
    }

    #[test]
    fn a_request_body_with_a_server_id_the_profile_does_not_sign_is_refused() {
        let body = r#"{"agent_id":"a","tool_name":"t","params":{},"server_id":"s"}"#;
        let e = action(body.as_bytes()).unwrap_err();
        assert!(format!("{e:#}").contains("server_id"), "{e:#}");
    }

    #[test]
    fn neither_shape_is_refused_with_both_named() {
        for text in [
            r#"{"tool_name":"t"}"#,
            "[]",
            "not json",
            r#"{"profile":"p"}"#,
        ] {
            let e = action(text.as_bytes()).unwrap_err();
            assert!(format!("{e:#}").contains("neither"), "{text}: {e:#}");
        }
    }

    #[test]
    fn a_request_body_with_a_duplicate_member_is_refused() {
        let body = r#"{"agent_id":"a","tool_name":"t","tool_name":"u","params":{}}"#;
        assert!(action(body.as_bytes()).is_err());
    }

    #[test]
    fn a_part_that_is_not_json_is_named() {
        let parts = Parts {
            action: action(br#"{"profile":"p","fields":{}}"#).unwrap(),
            result: b"{".to_vec(),
            registry: b"{}".to_vec(),
            policy: b"{}".to_vec(),
            now: "2026-01-01T00:00:00Z".into(),
        };
        let e = assemble(&parts).unwrap_err();
        assert!(format!("{e:#}").contains("--result is not JSON"), "{e:#}");
    }
}
