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
        /// The interposer's TOML configuration: allow / hold / deny patterns, trust
        /// (rp_id, origins, registry), held_as, park_seconds, audit_log.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// The upstream MCP server's command line.
        #[arg(last = true, required = true, value_name = "COMMAND [ARGS]...")]
        command: Vec<String>,
    },
}

/// Run a `countersign mcp` subcommand; the exit code per the help text.
pub(crate) fn run(command: McpCommand) -> anyhow::Result<u8> {
    match command {
        McpCommand::Stdio {
            service,
            gateway_token_file,
            agent_id,
            server_id,
            config,
            command,
        } => {
            let config = match config {
                Some(path) => countersign_mcp::Config::from_file(&path)?,
                None => countersign_mcp::Config::default(),
            };
            let mut command = command.into_iter();
            let program = command.next().context("no upstream COMMAND after --")?;
            let options = countersign_mcp::relay_options(
                service,
                gateway_token_file,
                agent_id,
                server_id,
                config,
                program,
                command.collect(),
            );
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()?;
            match runtime.block_on(countersign_mcp::run_stdio(options)) {
                Ok(()) => Ok(0),
                Err(e) => {
                    eprintln!("countersign mcp: {e:#}");
                    Ok(1)
                }
            }
        }
    }
}
