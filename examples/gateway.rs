//! A gateway that holds one tool call until a human approves it, then runs it exactly once.
//!
//! `countersign gateway add demo --data-dir DIR` prints this gateway's token; then
//! `COUNTERSIGN_GATEWAY_TOKEN=csg_… cargo run -p countersign-client --example gateway -- http://127.0.0.1:8080 registry.json`
use countersign::{CredentialRegistry, Policy};
use countersign_client::{Gateway, GatewayConfig, GatewayToken, ToolCall};
use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let service = args
        .next()
        .unwrap_or_else(|| "http://127.0.0.1:8080".into());
    let registry_file = args.next().unwrap_or_else(|| "registry.json".into());
    // The service answers only the gateway it knows: no token, no approvals.
    let token = GatewayToken::new(std::env::var("COUNTERSIGN_GATEWAY_TOKEN")?)?;
    // Trust only this gateway's own registry and policy, never what an answer carries.
    let registry = CredentialRegistry::from_json(&std::fs::read(registry_file)?)?;
    let policy = Policy::new("localhost", ["http://localhost:8080"]);
    // No answer within 5 s is DENIED callback_timeout: the call never proceeds.
    let config = GatewayConfig::new(service.parse()?, token, Duration::from_secs(5));
    let gateway = Gateway::new(config, policy, registry);

    let params = serde_json::json!({"to": "A", "amount": "40000.00", "currency": "EUR"});
    let call = ToolCall::new("agent-7", "payments.transfer", &params);
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
