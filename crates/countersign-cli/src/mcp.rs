//! `countersign mcp`: the MCP interposer (docs/MCP.md).

use anyhow::Context as _;
use clap::Subcommand;
use std::path::PathBuf;

/// The interposer's modes.
#[derive(Subcommand, Debug)]
pub(crate) enum McpCommand {
    /// Relay stdio between the MCP client that launched this process and an upstream MCP server
    /// it launches (COMMAND after `--`), holding sensitive tool calls for a passkey approval.
    ///
    /// Calls the config allows (or trusted read-only tools) pass through untouched. A held call is
    /// answered at once with a ticket (the approver link carries only the approval id); the client
    /// calls again with identical arguments, and once an enrolled approver has signed, the
    /// interposer verifies the evidence itself, collects the single-use grant and forwards the
    /// original request exactly once. See docs/MCP.md for what each kind of client sees.
    #[command(after_help = "Example (in an MCP client's mcpServers entry):\n  \
countersign mcp stdio --service http://127.0.0.1:8080 --gateway-token-file mcp.token \\\n    \
--agent-id alice-claude --server-id filesystem --config mcp.toml \\\n    \
-- npx -y @modelcontextprotocol/server-filesystem /srv/data\n\n\
Exit codes: 0 the client closed stdin; 1 the upstream or the relay failed; 2 a usage or \
configuration error.")]
    Stdio {
        /// The approval service's base URL (`countersign serve`).
        #[arg(long, value_name = "URL")]
        service: url::Url,
        /// File holding this interposer's gateway token (`countersign gateway add NAME`).
        #[arg(long, value_name = "FILE")]
        gateway_token_file: PathBuf,
        /// The agent's identity, signed with every held call (from this launch configuration,
        /// never from what the client says about itself).
        #[arg(long, value_name = "ID")]
        agent_id: String,
        /// A stable name for the upstream server, signed with every held call.
        #[arg(long, value_name = "ID")]
        server_id: String,
        /// The interposer's TOML configuration: allow / hold / deny patterns, who may approve
        /// each held tool ([groups], [default_tool], [[tools]]), trust (rp_id, origins,
        /// registry), held_as, park_seconds, audit_log.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// The upstream MCP server's command line.
        #[arg(last = true, required = true, value_name = "COMMAND [ARGS]...")]
        command: Vec<String>,
    },
    /// Serve Streamable HTTP at http://LISTEN/mcp in front of an upstream MCP server's
    /// Streamable HTTP endpoint, holding sensitive tool calls for a passkey approval.
    ///
    /// Each agent presents its own bearer credential (`Authorization: Bearer TOKEN`), configured
    /// under `[[agents]]` in --config; the agent id signed with a held call is the one its
    /// credential names, never what the client says about itself. A request without a known
    /// credential gets HTTP 401 and nothing is forwarded. POST, GET (the server's event stream)
    /// and DELETE are relayed; the interposer gives the client its own session id and maps it to
    /// the upstream's. Held calls behave as in stdio mode (docs/MCP.md).
    #[command(after_help = "Example:
  countersign mcp http --listen 127.0.0.1:7300 --upstream http://127.0.0.1:3001/mcp \
    --service http://127.0.0.1:8080 --gateway-token-file mcp.token --server-id everything \
    --config mcp.toml

with, in mcp.toml:
  [[agents]]
  id = \"alice-laptop-claude\"
  token_file = \"alice-agent.token\"

Exit codes: 0 stopped by SIGINT or SIGTERM; 1 the listener or the service failed; 2 a usage or configuration error.")]
    Http {
        /// Address to listen on (keep it on loopback: 127.0.0.1:PORT).
        #[arg(long, value_name = "ADDR")]
        listen: std::net::SocketAddr,
        /// The upstream MCP server's Streamable HTTP endpoint, e.g. http://127.0.0.1:3001/mcp.
        #[arg(long, value_name = "URL")]
        upstream: url::Url,
        /// The approval service's base URL (`countersign serve`).
        #[arg(long, value_name = "URL")]
        service: url::Url,
        /// File holding this interposer's gateway token (`countersign gateway add NAME`).
        #[arg(long, value_name = "FILE")]
        gateway_token_file: PathBuf,
        /// A stable name for the upstream server, signed with every held call.
        #[arg(long, value_name = "ID")]
        server_id: String,
        /// The interposer's TOML configuration: `[[agents]]` (required in this mode), allow /
        /// hold / deny patterns, who may approve each held tool ([groups], [default_tool],
        /// [[tools]]), trust (rp_id, origins, registry), held_as, park_seconds, audit_log.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
}

/// Run a `countersign mcp` subcommand; the exit code per the help text.
pub(crate) fn run(command: McpCommand) -> anyhow::Result<u8> {
    let config = |path: Option<PathBuf>| match path {
        Some(path) => countersign_mcp::Config::from_file(&path),
        None => Ok(countersign_mcp::Config::default()),
    };
    let relay = match command {
        McpCommand::Stdio {
            service,
            gateway_token_file,
            agent_id,
            server_id,
            config: path,
            command,
        } => {
            let mut command = command.into_iter();
            let program = command.next().context("no upstream COMMAND after --")?;
            Relay::Stdio(countersign_mcp::relay_options(
                service,
                gateway_token_file,
                agent_id,
                server_id,
                config(path)?,
                program,
                command.collect(),
            ))
        }
        McpCommand::Http {
            listen,
            upstream,
            service,
            gateway_token_file,
            server_id,
            config: path,
        } => {
            let config = config(path)?;
            // Checked before anything starts: a missing or weak credential is a usage error.
            let agents = countersign_mcp::http::Agents::from_entries(&config.agents)?;
            // A long-running server: its warnings (an unreachable upstream) go to stderr.
            crate::logging::install(crate::logging::LogFormat::Text)?;
            Relay::Http(countersign_mcp::HttpOptions {
                listen,
                upstream,
                service,
                gateway_token_file,
                server_id,
                config,
                agents,
            })
        }
    };
    let runtime = match relay {
        // One client, one upstream: one thread relays both ways (no cross-thread wake-up per
        // frame); the audit log signs on its own thread.
        Relay::Stdio(_) => tokio::runtime::Builder::new_current_thread(),
        Relay::Http(ref options) => {
            let mut builder = tokio::runtime::Builder::new_multi_thread();
            builder.worker_threads(options.config.http_threads);
            builder
        }
    }
    .enable_all()
    .build()?;
    let result = runtime.block_on(async move {
        match relay {
            Relay::Stdio(options) => countersign_mcp::run_stdio(options).await,
            Relay::Http(options) => {
                countersign_mcp::run_http(options, countersign_server::shutdown_signal()).await
            }
        }
    });
    match result {
        Ok(()) => Ok(0),
        Err(e) => {
            eprintln!("countersign mcp: {e:#}");
            Ok(1)
        }
    }
}

/// What `countersign mcp` runs, its options checked.
enum Relay {
    Stdio(countersign_mcp::StdioOptions),
    Http(countersign_mcp::HttpOptions),
}
