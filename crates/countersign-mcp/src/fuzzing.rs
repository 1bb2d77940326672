//! An in-process entry to the stdio relay's client side for the fuzz target `mcp_relay`
//! (fuzz/, docs/RELIABILITY.md "Fuzzing"); built only with the `fuzzing` feature.
//!
//! [`relay_client_bytes`] runs the real [`Interposer::run`] over in-memory pipes: the upstream
//! lists `read_file` (allowed by the policy) and `write_file` (held), then the client's bytes
//! follow as they would on stdin. The service is a closed port on 127.0.0.1, so every held call
//! is refused when its approval cannot be asked for: no approval is ever given. What the upstream
//! was sent is returned, for the target to read the way real MCP servers do.

use crate::audit::AuditLog;
use crate::{Config, Interposer, Settings};
use countersign::{CredentialRegistry, Policy};
use countersign_client::{Gateway, GatewayConfig, GatewayToken, ReplayStore};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};

/// The tool the policy allows and the one it holds.
pub const ALLOWED_TOOL: &str = "read_file";
pub const HELD_TOOL: &str = "write_file";

const LIST_REQUEST: &str = r#"{"jsonrpc":"2.0","id":"list","method":"tools/list"}"#;
const LIST_RESULT: &str = r#""result":{"tools":[{"name":"read_file","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}},{"name":"write_file","inputSchema":{"type":"object"}}]}"#;

/// The id of a `tools/list` request, as JSON text.
fn listing_id(line: &str) -> Option<String> {
    let frame: serde_json::Value = serde_json::from_str(line).ok()?;
    if frame.get("method")? != "tools/list" {
        return None;
    }
    frame.get("id").map(ToString::to_string)
}

fn base() -> &'static Interposer {
    static BASE: OnceLock<Interposer> = OnceLock::new();
    BASE.get_or_init(|| {
        let config = Config::from_toml(&format!(
            "allow = [\"{ALLOWED_TOOL}\"]\nhold = [\"{HELD_TOOL}\"]\npark_seconds = 1\n"
        ))
        .unwrap_or_else(|e| unreachable!("fixed configuration: {e}"));
        let service = url::Url::parse("http://127.0.0.1:1/")
            .unwrap_or_else(|e| unreachable!("fixed URL: {e}"));
        let token = GatewayToken::new("fuzzing").unwrap_or_else(|e| unreachable!("{e}"));
        let registry = CredentialRegistry::from_json(br#"{"credentials":[]}"#)
            .unwrap_or_else(|e| unreachable!("empty registry: {e}"));
        let gateway = Gateway::new(
            GatewayConfig::new(service.clone(), token, Duration::from_secs(5)),
            Policy::new("localhost", [service.origin().ascii_serialization()]),
            registry,
            ReplayStore::memory(),
        );
        let settings = Settings {
            agent_id: "agent-fuzz".into(),
            server_id: "fuzz".into(),
            approver_url: service.as_str().into(),
            config,
        };
        Interposer::new(settings, gateway, AuditLog::disabled(), Default::default())
    })
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap_or_else(|e| unreachable!("a current-thread runtime: {e}"))
    })
}

/// Relay `bytes` from the client after a `tools/list` round trip, in a fresh session; the lines
/// the upstream was sent after that round trip, in order.
pub fn relay_client_bytes(bytes: &[u8]) -> Vec<String> {
    let session = Arc::new(base().session_for("agent-fuzz".into()));
    let bytes = bytes.to_vec();
    runtime().block_on(async move {
        let (client, client_side) = tokio::io::duplex(1 << 16);
        let (client_in, client_out) = tokio::io::split(client_side);
        let (upstream, upstream_side) = tokio::io::duplex(1 << 16);
        let (upstream_in, upstream_out) = tokio::io::split(upstream_side);
        let relay = tokio::spawn(session.run(
            BufReader::new(client_in),
            client_out,
            BufReader::new(upstream_in),
            upstream_out,
        ));
        let (from_upstream, mut to_relay) = tokio::io::split(upstream);
        // The upstream: answers the listing, keeps every other line it is sent (as sent: only
        // the "\n" the relay ends each line with is taken off).
        let upstream = tokio::spawn(async move {
            let mut from_upstream = BufReader::new(from_upstream);
            let mut sent = Vec::new();
            let mut line = Vec::new();
            while matches!(from_upstream.read_until(b'\n', &mut line).await, Ok(n) if n > 0) {
                if line.last() == Some(&b'\n') {
                    line.pop();
                }
                let text = String::from_utf8_lossy(&line).into_owned();
                match listing_id(&text) {
                    // The first listing is the set-up's: answered under the id it came with (a
                    // relay may forward requests under ids of its own).
                    Some(id) if sent.is_empty() => {
                        let answer = format!(r#"{{"jsonrpc":"2.0","id":{id},{LIST_RESULT}}}"#);
                        let _ = to_relay.write_all(format!("{answer}\n").as_bytes()).await;
                    }
                    _ => sent.push(text),
                }
                line.clear();
            }
            drop(to_relay);
            sent
        });
        let (answers, mut to_client) = tokio::io::split(client);
        let _ = to_client
            .write_all(format!("{LIST_REQUEST}\n").as_bytes())
            .await;
        // The client's bytes only once the listing went through (the catalog is then known).
        let mut answers = BufReader::new(answers).lines();
        while let Ok(Some(line)) = answers.next_line().await {
            if line.contains(r#""id":"list""#) {
                break;
            }
        }
        let drain =
            tokio::spawn(async move { while let Ok(Some(_)) = answers.next_line().await {} });
        let _ = to_client.write_all(&bytes).await;
        let _ = to_client.shutdown().await;
        drop(to_client);
        let _ = relay.await;
        let _ = drain.await;
        upstream.await.unwrap_or_default()
    })
}
