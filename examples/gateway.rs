//! A gateway that holds one tool call until a human approves it, then runs it exactly once.
//!
//! `countersign gateway add demo --data-dir DIR > demo.token` gives this gateway its token and
//! `countersign registry export --data-dir DIR > registry.json` the keys it trusts; then
//! `COUNTERSIGN_GATEWAY_TOKEN=$(cat demo.token) cargo run -p countersign-client --example gateway -- http://127.0.0.1:8080 registry.json`
//!
//! The approver signs on the service's own page: for a service that takes it from its listen
//! address that is the service URL as a browser opens it (`localhost` for a loopback address),
//! and this gateway derives the origin the same way. A service configured with its own `rp_id`
//! and `origins` (docs/OPERATIONS.md): pass them in COUNTERSIGN_RP_ID and COUNTERSIGN_ORIGIN.
use countersign::{CredentialRegistry, Policy};
use countersign_client::{Gateway, GatewayConfig, GatewayToken, ReplayStore, ToolCall};
use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let service: url::Url = args
        .next()
        .unwrap_or_else(|| "http://127.0.0.1:8080".into())
        .parse()?;
    let registry_file = args.next().unwrap_or_else(|| "registry.json".into());
    // The service answers only the gateway it knows: no token, no approvals.
    let token = GatewayToken::new(std::env::var("COUNTERSIGN_GATEWAY_TOKEN")?)?;
    // Trust only this gateway's own registry and policy, never what an answer carries.
    let registry = CredentialRegistry::from_json(&std::fs::read(registry_file)?)?;
    let policy = match (
        std::env::var("COUNTERSIGN_RP_ID"),
        std::env::var("COUNTERSIGN_ORIGIN"),
    ) {
        (Ok(rp_id), Ok(origin)) => Policy::new(rp_id, [origin]),
        _ => countersign_client::service_policy(&service),
    };
    println!(
        "trusting approvals signed for {} on {:?}",
        policy.rp_id, policy.origins
    );
    // No answer within 5 s is DENIED callback_timeout: the call never proceeds.
    let config = GatewayConfig::new(service, token, Duration::from_secs(5));
    // Spent nonces survive a restart: evidence accepted once is refused for ever.
    let replay = ReplayStore::sqlite("gateway-state")?;
    let gateway = Gateway::new(config, policy, registry, replay);

    // The arguments exactly as the tool will receive them: sent as this text, never re-encoded.
    let params = r#"{"to":"A","amount":"40000.00","currency":"EUR"}"#;
    let call = ToolCall::raw("agent-7", "payments.transfer", params);
    match gateway.authorize(&call).await {
        // The grant is single-use and bound to this exact call's fingerprint.
        Ok(grant) => println!(
            "approved ({}): running {} once",
            grant.approval_id, call.tool_name
        ),
        Err(refusal) => println!("not running {}: {refusal}", call.tool_name),
    }
    Ok(())
}
