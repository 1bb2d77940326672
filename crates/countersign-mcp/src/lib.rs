//! The MCP interposer (docs/MCP.md): a transparent JSON-RPC relay in front of one MCP server that
//! holds sensitive `tools/call`s until an enrolled human approves them with a passkey, then
//! forwards each approved call exactly once.
//!
//! - [`config`]: the per-upstream TOML, the allow / hold / deny rule and who may approve each
//!   held tool;
//! - [`admission`]: the strict reading a client frame must pass before anything else happens;
//! - [`answer`]: what a client sees when a call is held or refused;
//! - [`audit`]: the interposer's own signed, hash-chained log;
//! - [`relay`]: the relay and the held-call life cycle, built in floors (its module docs list
//!   them: readers, shared and session state, outbox, release, dispatchers);
//! - [`http`]: the Streamable HTTP transport (`countersign mcp http`) around the relay;
//! - `splice`: cutting members out of a frame's text without re-serializing it;
//! - `stdio`: the interposer's own stdin and stdout, read and written without a thread hop;
//! - [`state`]: the HMAC-protected `requestState` of 2026-07-28 multi round-trip answers;
//! - `tasks`: 2025-11-25 tasks, a held call answered with a task that runs once approved.
//! - `fuzzing` (feature `fuzzing`, doc-hidden): the client side run in process for the fuzz
//!   target `mcp_relay` (fuzz/).

pub mod admission;
pub mod answer;
pub mod audit;
pub mod config;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod http;
pub mod relay;
mod splice;
pub mod state;
mod stdio;
mod tasks;

pub use config::{Config, HeldAs};
pub use relay::{Interposer, Settings};

use countersign::{CredentialRegistry, Policy};
use countersign_client::{Gateway, GatewayConfig, GatewayToken, ReplayStore};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;
use url::Url;

/// Everything `countersign mcp stdio` is given.
#[derive(Debug, Clone)]
pub struct StdioOptions {
    pub service: Url,
    pub gateway_token_file: PathBuf,
    pub agent_id: String,
    pub server_id: String,
    pub config: Config,
    pub command: String,
    pub args: Vec<String>,
}

/// The options of `countersign mcp stdio`, in the CLI's order.
pub fn relay_options(
    service: Url,
    gateway_token_file: PathBuf,
    agent_id: String,
    server_id: String,
    config: Config,
    command: String,
    args: Vec<String>,
) -> StdioOptions {
    StdioOptions {
        service,
        gateway_token_file,
        agent_id,
        server_id,
        config,
        command,
        args,
    }
}

/// How long one call to the service may take (create, grant); long-polls add their wait.
const SERVICE_TIMEOUT: Duration = Duration::from_secs(10);

/// Build the interposer: the gateway connection with its own trust (registry, policy and the
/// per-tool approver rules, checked here against the registry) and the audit log with the
/// tickets it still has open.
pub async fn interposer(
    service: Url,
    token: GatewayToken,
    agent_id: String,
    server_id: String,
    config: Config,
) -> anyhow::Result<Interposer> {
    use anyhow::Context as _;
    // A configuration assembled in code gets the checks a file gets.
    config.check().context("config")?;
    let gateway_config = GatewayConfig::new(service.clone(), token, SERVICE_TIMEOUT);
    // No origins configured: the service's own page, as a browser opens it (`localhost` for a
    // loopback service URL: the origin the service itself derives from its listen address).
    let page = countersign::browser_url(&service);
    let mut policy = Policy::new(config.rp_id.clone(), config.origins.iter().cloned());
    if config.origins.is_empty() {
        policy = Policy::new(config.rp_id.clone(), [page.origin().ascii_serialization()]);
    }
    let registry = match &config.registry {
        Some(path) => {
            let bytes =
                std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
            Some(
                CredentialRegistry::from_json(&bytes)
                    .with_context(|| format!("registry {}", path.display()))?,
            )
        }
        None => None,
    };
    if let Some(registry) = &registry {
        check_enrolled(&config, registry)?;
    }
    let replay = match &config.state_dir {
        Some(dir) => ReplayStore::sqlite(dir).context("opening the replay store")?,
        None => ReplayStore::memory(),
    };
    let empty = CredentialRegistry::from_json(br#"{"credentials":[]}"#)?;
    let fetch = registry.is_none();
    let gateway = Gateway::new(gateway_config, policy, registry.unwrap_or(empty), replay);
    if fetch {
        // No registry file: trust the service's (docs/MCP.md says why a file is stronger).
        let fetched = gateway
            .fetch_registry()
            .await
            .map_err(|r| anyhow::anyhow!("fetching the registry from the service: {r}"))?;
        check_enrolled(&config, &fetched)?;
        gateway.set_registry(fetched);
    }
    let (audit, tickets) = match &config.audit_log {
        Some(path) => {
            let key = config
                .audit_key
                .clone()
                .unwrap_or_else(|| path.with_extension("key"));
            audit::AuditLog::open(path, &key)?
        }
        None => (audit::AuditLog::disabled(), Default::default()),
    };
    let approver_url = config
        .approver_url
        .clone()
        .unwrap_or_else(|| page.as_str().trim_end_matches('/').to_owned());
    let settings = Settings {
        agent_id,
        server_id,
        approver_url,
        config,
    };
    Ok(Interposer::new(settings, gateway, audit, tickets))
}

/// Refuse approver rules whose quorum the trusted registry cannot meet.
fn check_enrolled(config: &Config, registry: &CredentialRegistry) -> anyhow::Result<()> {
    config
        .approver_rules()
        .check_enrolled(registry)
        .map_err(|e| anyhow::anyhow!("config: approver rules against the registry: {e}"))
}

/// The gateway token in `path`.
fn gateway_token(path: &std::path::Path) -> anyhow::Result<GatewayToken> {
    use anyhow::Context as _;
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    GatewayToken::new(text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// Run `countersign mcp stdio`: start the upstream and relay between this process's stdio and
/// it until the client closes stdin.
pub async fn run_stdio(options: StdioOptions) -> anyhow::Result<()> {
    use anyhow::Context as _;
    let token = gateway_token(&options.gateway_token_file)?;
    let interposer = interposer(
        options.service,
        token,
        options.agent_id,
        options.server_id,
        options.config,
    )
    .await?;
    let mut child = tokio::process::Command::new(&options.command)
        .args(&options.args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", options.command))?;
    let upstream_in = child.stdin.take().context("upstream stdin")?;
    let upstream_out = child.stdout.take().context("upstream stdout")?;
    Arc::new(interposer)
        .run(
            tokio::io::BufReader::new(stdio::input()),
            stdio::output(),
            tokio::io::BufReader::new(upstream_out),
            upstream_in,
        )
        .await?;
    let _ = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
    Ok(())
}

/// Everything `countersign mcp http` is given.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    pub listen: std::net::SocketAddr,
    /// The upstream's Streamable HTTP endpoint (e.g. `http://127.0.0.1:3001/mcp`).
    pub upstream: Url,
    pub service: Url,
    pub gateway_token_file: PathBuf,
    pub server_id: String,
    pub config: Config,
    /// The checked `[[agents]]` of `config`.
    pub agents: http::Agents,
}

/// Run `countersign mcp http`: listen on `options.listen` and relay to the upstream until
/// `shutdown` resolves (the CLI passes SIGINT or SIGTERM); then end the sessions and close the
/// audit log.
pub async fn run_http(
    options: HttpOptions,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    use anyhow::Context as _;
    let token = gateway_token(&options.gateway_token_file)?;
    // The template's agent id is never used: every session gets the one its bearer names.
    let base = interposer(
        options.service,
        token,
        String::new(),
        options.server_id,
        options.config,
    )
    .await?;
    let listener = tokio::net::TcpListener::bind(options.listen)
        .await
        .with_context(|| format!("listening on {}", options.listen))?;
    if !options.listen.ip().is_loopback() {
        tracing::warn!(
            listen = %options.listen,
            "listening beyond loopback: bearer tokens travel in clear unless a TLS proxy is in front"
        );
    }
    tracing::info!(listen = %options.listen, upstream = %options.upstream, "mcp http relay ready");
    let relay = http::HttpRelay::new(base, options.agents, options.upstream);
    relay.serve(listener, shutdown).await?;
    Ok(())
}
