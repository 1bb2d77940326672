//! `countersign demo`: watch an agent's held call be approved by a person and run exactly once.
//!
//! One process runs the whole loop a deployment has, on this machine:
//!
//! 1. the approval service (in this process, embedded SQLite in the demo's data directory), its
//!    configuration written by the demo so that the approver origin and rp_id are the address it
//!    listens on (`localhost` for a loopback address: WebAuthn needs a domain);
//! 2. a gateway credential, the demo software key enrolled as a clearly named demo approver, and
//!    an enrollment invite for the person's own passkey;
//! 3. `countersign mcp stdio` (a child process) in front of an MCP server: the reference
//!    filesystem server when Node and the package are here, else the built-in tool server;
//! 4. the agent: an MCP client (this process) that lists a directory (relayed) and writes a file
//!    (held), then waits for the verdict and calls again: the write runs once;
//! 5. a CASE file and the commands that check the approval and both audit logs offline.
//!
//! The demo key is refused by every service but this one (`countersign_server::demo`).

mod approve;
mod client;
mod key;
mod tool_server;
mod upstream;

use key::{DemoKey, DemoState, write_private};
use upstream::Upstream;

use crate::logging;
use anyhow::Context as _;
use clap::{Args, Subcommand, ValueEnum};
use countersign::b64;
use serde_json::{Value, json};
use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

// No doc comment here: the subcommand's help is the doc comment of `Command::Demo`.
#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub(crate) struct DemoArgs {
    #[command(subcommand)]
    command: Option<DemoCommand>,
    /// Address to listen on: a loopback address (the approver page's origin is then
    /// http://localhost:PORT; port 0 picks a free one). Default: 127.0.0.1:8080 if free, else a
    /// free port.
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,
    /// Where the demo keeps everything (database, audit logs, keys, configs, the files the
    /// tool writes). It must be new or empty. Default: a new directory under the system's
    /// temporary directory. Kept after the demo, for the offline checks it prints.
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// The MCP server behind the interposer: `filesystem` (the reference server,
    /// @modelcontextprotocol/server-filesystem, run with Node from ./node_modules or
    /// ./tests/mcp/node_modules), `builtin` (a small tool server in this binary), or `auto`
    /// (filesystem when Node and the package are found, else builtin).
    #[arg(long, value_enum, default_value_t = McpServer::Auto)]
    mcp_server: McpServer,
}

#[derive(Subcommand, Debug)]
enum DemoCommand {
    /// Approve the demo's held call with the demo software key (run it in another terminal).
    ///
    /// The key is a software key whose seed is in the demo's data directory, enrolled as
    /// "demo software key (not a hardware authenticator)", which is the approver every verdict
    /// names. It signs with user presence only, so the verdict's identity_assurance is AAL1.
    /// Only the demo's own service accepts it: any other service refuses it at enrollment,
    /// login and decision.
    ///
    /// Exit codes: 0 the decision was recorded; 1 the service refused it (decided already, not
    /// the demo's service); 2 no demo in DIR.
    Approve {
        /// The demo's data directory, as `countersign demo` printed it.
        #[arg(long, value_name = "DIR")]
        data_dir: PathBuf,
        /// Refuse the call instead: a refusal is signed evidence too, and the call does not run.
        #[arg(long)]
        deny: bool,
    },
    /// The built-in MCP tool server (the demo starts it behind the interposer): MCP over stdio,
    /// `list_directory` and `write_file` for the files of one directory.
    #[command(hide = true)]
    ToolServer {
        /// The one directory it serves.
        #[arg(long, value_name = "DIR")]
        root: PathBuf,
    },
}

/// Which MCP server the interposer fronts.
#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum McpServer {
    /// The reference filesystem server if Node and the package are found, else the built-in one.
    Auto,
    /// @modelcontextprotocol/server-filesystem under Node.
    Filesystem,
    /// The tool server built into this binary.
    Builtin,
}

/// The gateway name the interposer calls the service as.
const GATEWAY: &str = "demo-mcp-interposer";
/// Who the agent is, as the held call is signed.
const AGENT_ID: &str = "demo-agent";
/// The MCP server's stable name, as the held call is signed.
const SERVER_ID: &str = "demo-files";
/// The tool the interposer holds, and the one it relays.
const HELD_TOOL: &str = "write_file";
const RELAYED_TOOL: &str = "list_directory";
/// The principal the enrollment invite is for (the person's own passkey).
const PASSKEY_PRINCIPAL: &str = "you (your own passkey)";
/// How long the held call waits for a verdict: long enough to enroll a passkey first.
const APPROVAL_SECONDS: u64 = 900;

/// Files in the demo's data directory, besides the service's own (`countersign_server::files`).
mod files {
    pub(super) const SERVICE_CONFIG: &str = "config.toml";
    pub(super) const MCP_CONFIG: &str = "mcp.toml";
    pub(super) const GATEWAY_TOKEN: &str = "gateway.token";
    pub(super) const STATE: &str = "demo.json";
    pub(super) const KEY: &str = "demo-key.json";
    pub(super) const MCP_AUDIT: &str = "mcp-audit.jsonl";
    pub(super) const MCP_AUDIT_KEY: &str = "mcp-audit.key";
    pub(super) const WORKSPACE: &str = "workspace";
    pub(super) const CASE: &str = "held-call.case.json";
}

pub(crate) fn run(args: DemoArgs) -> anyhow::Result<u8> {
    match args.command {
        Some(DemoCommand::Approve { data_dir, deny }) => approve::run(&data_dir, deny),
        Some(DemoCommand::ToolServer { root }) => tool_server::run(&root),
        None => {
            logging::install_with_default(logging::LogFormat::Text, "warn")?;
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .context("starting the async runtime")?;
            runtime.block_on(demo(args.listen, args.data_dir, args.mcp_server))
        }
    }
}

/// Print a line of the demo's narrative; a closed stdout is no reason to stop.
fn say(text: &str) {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{text}");
    let _ = out.flush();
}

/// A TOML (and JSON) string literal.
fn quoted(text: &str) -> String {
    Value::from(text).to_string()
}

/// The data directory: the given one (new or empty), or a new one under the temporary directory.
fn data_dir(given: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    let dir = match given {
        Some(dir) => {
            if dir.exists() {
                let mut entries = std::fs::read_dir(&dir)
                    .with_context(|| format!("reading {}", dir.display()))?;
                anyhow::ensure!(
                    entries.next().is_none(),
                    "{} is not empty: give the demo a new or empty directory (it writes a \
                     database, keys and logs there)",
                    dir.display()
                );
            }
            dir
        }
        None => {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or_default();
            std::env::temp_dir().join(format!("countersign-demo-{}-{nanos}", std::process::id()))
        }
    };
    std::fs::create_dir_all(dir.join(files::WORKSPACE))
        .with_context(|| format!("creating {}", dir.display()))?;
    // Something for the relayed call to list.
    std::fs::write(
        dir.join(files::WORKSPACE).join("notes.txt"),
        "The directory the demo's MCP server serves.\n",
    )?;
    dir.canonicalize()
        .with_context(|| format!("resolving {}", dir.display()))
}

/// Bind `listen`, or 127.0.0.1:8080 if free, else a free loopback port.
async fn bind(listen: Option<SocketAddr>) -> anyhow::Result<tokio::net::TcpListener> {
    let addr = match listen {
        Some(addr) => addr,
        None => match tokio::net::TcpListener::bind(("127.0.0.1", 8080)).await {
            Ok(listener) => return Ok(listener),
            Err(_) => SocketAddr::from(([127, 0, 0, 1], 0)),
        },
    };
    anyhow::ensure!(
        addr.ip().is_loopback(),
        "--listen {addr}: the demo listens on a loopback address only (127.0.0.1:PORT or \
         [::1]:PORT). Its approver page is then http://localhost:PORT: WebAuthn needs a domain \
         name, and browsers treat localhost as a secure origin without TLS"
    );
    tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding {addr}"))
}

/// The demo's address book: where the service listens and the origin approvers sign for.
struct Site {
    /// `http://127.0.0.1:PORT`: the socket, for the processes of the demo.
    service: String,
    /// `http://localhost:PORT`: the approver page's origin and the links.
    origin: String,
    rp_id: String,
}

impl Site {
    fn of(local: SocketAddr) -> Self {
        Self {
            service: format!("http://{local}"),
            origin: format!("http://localhost:{}", local.port()),
            rp_id: "localhost".to_owned(),
        }
    }
}

/// The service's configuration: this address's origin, and the held tool's rule.
fn service_config(site: &Site) -> String {
    format!(
        "# Written by `countersign demo`: the approval service of this demo.\n\
         rp_id = {rp_id}\n\
         origins = [{origin}]\n\
         public_url = {origin}\n\
         \n\
         [[tools]]\n\
         name = {tool}\n\
         approval_seconds = {APPROVAL_SECONDS}\n\
         # The demo software key signs with user presence only: its approvals are AAL1, and a\n\
         # passkey's AAL2. Outside a demo, keep the default (true).\n\
         require_user_verification = false\n",
        rp_id = quoted(&site.rp_id),
        origin = quoted(&site.origin),
        tool = quoted(HELD_TOOL),
    )
}

/// The interposer's configuration: which tool it holds, its own trust and its audit log.
fn mcp_config(site: &Site, dir: &Path) -> String {
    let path = |name: &str| quoted(&dir.join(name).to_string_lossy());
    format!(
        "# Written by `countersign demo`: the MCP interposer of this demo.\n\
         rp_id = {rp_id}\n\
         origins = [{origin}]\n\
         approver_url = {origin}\n\
         allow = [{relayed}]\n\
         hold = [{held}]\n\
         audit_log = {log}\n\
         audit_key = {key}\n\
         # The demo's agent leaves when the demo stops: what it still waits for is withdrawn.\n\
         cancel_on_disconnect = true\n\
         \n\
         [[tools]]\n\
         name = {held}\n\
         require_user_verification = false\n",
        rp_id = quoted(&site.rp_id),
        origin = quoted(&site.origin),
        relayed = quoted(RELAYED_TOOL),
        held = quoted(HELD_TOOL),
        log = path(files::MCP_AUDIT),
        key = path(files::MCP_AUDIT_KEY),
    )
}

/// Everything the scenario needs.
struct Demo {
    dir: PathBuf,
    site: Site,
    state: countersign_server::AppState,
    upstream: Upstream,
}

impl Demo {
    /// `countersign mcp stdio …` for this demo.
    fn interposer(&self) -> anyhow::Result<(PathBuf, Vec<OsString>)> {
        let me = std::env::current_exe().context("locating this binary")?;
        let mut args: Vec<OsString> = ["mcp", "stdio", "--service", &self.site.service]
            .iter()
            .map(OsString::from)
            .collect();
        args.push("--gateway-token-file".into());
        args.push(self.dir.join(files::GATEWAY_TOKEN).into_os_string());
        args.extend(["--agent-id", AGENT_ID, "--server-id", SERVER_ID].map(OsString::from));
        args.push("--config".into());
        args.push(self.dir.join(files::MCP_CONFIG).into_os_string());
        args.push("--".into());
        args.extend(self.upstream.command.iter().cloned());
        Ok((me, args))
    }

    async fn session(&self) -> anyhow::Result<client::Session> {
        let (program, args) = self.interposer()?;
        client::Session::start(&program, &args).await
    }

    fn workspace(&self) -> PathBuf {
        self.dir.join(files::WORKSPACE)
    }
}

/// How the scenario ended.
enum Ending {
    /// The held call ran once: the verification commands apply.
    Ran,
    /// The approver refused (or the approval expired): nothing ran.
    Refused(String),
}

async fn demo(
    listen: Option<SocketAddr>,
    given_dir: Option<PathBuf>,
    wanted: McpServer,
) -> anyhow::Result<u8> {
    let listener = bind(listen).await?;
    let site = Site::of(listener.local_addr()?);
    let dir = data_dir(given_dir)?;
    let upstream = Upstream::choose(wanted, &dir.join(files::WORKSPACE))?;
    let state = start_service(&dir, &site).await?;
    let invite = set_up(&dir, &site, &state).await?;

    let (stop, stopped) = tokio::sync::watch::channel(false);
    let header_read = Duration::from_secs(state.config().timeouts.header_read_seconds);
    let server = tokio::spawn(countersign_server::serve_http(
        listener,
        countersign_server::build_router(state.clone()),
        header_read,
        until_stopped(stopped),
    ));
    let sweeper = tokio::spawn(sweep(state.clone()));

    say(&format!(
        "countersign demo\n\
         \n\
         The approval service is up at {origin} (rp_id {rp_id}, embedded SQLite).\n\
         Everything is in {dir}\n\
         The agent's MCP server: {upstream}, behind `countersign mcp stdio`,\n\
         which relays {RELAYED_TOOL} and holds {HELD_TOOL} for a person's approval.\n",
        origin = site.origin,
        rp_id = site.rp_id,
        dir = dir.display(),
        upstream = upstream.name,
    ));
    let demo = Demo {
        dir,
        site,
        state,
        upstream,
    };
    let mut session = None;
    let ending = tokio::select! {
        ending = scenario(&demo, &invite, &mut session) => Some(ending),
        () = countersign_server::shutdown_signal() => None,
    };
    // Stop in order: the interposer (its close line), then the service (its last lines sealed).
    let closed = match session.take() {
        Some(s) => client::Session::close(s).await,
        None => Ok(()),
    };
    let _ = stop.send(true);
    let _ = server.await;
    sweeper.abort();
    let store = demo.state.store().clone();
    tokio::task::spawn_blocking(move || store.seal_audit())
        .await
        .context("sealing the audit log")?
        .context("sealing the audit log")?;
    demo.state.catch_up_audit_file().await;
    closed?;
    match ending {
        None => {
            say(&format!(
                "\nStopped (Ctrl-C). Everything so far is in {}",
                demo.dir.display()
            ));
            Ok(crate::exit::EXIT_ALLOW)
        }
        Some(Err(e)) => Err(e),
        Some(Ok(Ending::Refused(why))) => {
            say(&format!("\nThe held call did not run: {why}."));
            print_checks(&demo, false);
            Ok(crate::exit::EXIT_DENY)
        }
        Some(Ok(Ending::Ran)) => {
            print_checks(&demo, true);
            Ok(crate::exit::EXIT_ALLOW)
        }
    }
}

/// Write the service's configuration and open the service on it, accepting the demo key.
async fn start_service(dir: &Path, site: &Site) -> anyhow::Result<countersign_server::AppState> {
    let config_path = dir.join(files::SERVICE_CONFIG);
    std::fs::write(&config_path, service_config(site))
        .with_context(|| format!("writing {}", config_path.display()))?;
    let mut config = countersign_server::Config::from_file(&config_path)?;
    // The one place the demo key is accepted (countersign_server::demo).
    config.danger_accept_demo_key = true;
    countersign_server::open_state(dir, config, site.origin.clone())
}

/// Enroll the demo key, add the interposer's gateway, write the interposer's configuration and
/// the demo's state; the invite link for a passkey.
async fn set_up(
    dir: &Path,
    site: &Site,
    state: &countersign_server::AppState,
) -> anyhow::Result<String> {
    let key = DemoKey::create(dir)?;
    state.enroll(vec![key.record()]).await?;
    let now = countersign_server::clock::system_now_ms();
    let token = countersign_server::gateways::add(state.store().as_ref(), GATEWAY, now)?;
    write_private(&dir.join(files::GATEWAY_TOKEN), token.as_bytes())?;
    state
        .reload_credentials()
        .await
        .map_err(|e| anyhow::anyhow!("loading the gateway: {}", e.message))?;
    std::fs::write(dir.join(files::MCP_CONFIG), mcp_config(site, dir))?;
    let ttl = countersign_server::clock::secs_to_ms(APPROVAL_SECONDS);
    let invite = countersign_server::enroll::create_invite(
        state.store().as_ref(),
        &site.origin,
        PASSKEY_PRINCIPAL,
        None,
        now,
        ttl,
    )?;
    DemoState {
        service: site.service.clone(),
        rp_id: site.rp_id.clone(),
        origin: site.origin.clone(),
        approval_id: None,
    }
    .write(dir)?;
    Ok(invite.url)
}

/// Resolves once `stopped` says so.
async fn until_stopped(mut stopped: tokio::sync::watch::Receiver<bool>) {
    let _ = stopped.wait_for(|s| *s).await;
}

/// What `countersign serve` does in the background: settle expired approvals, pick up what
/// another process enrolled, keep the audit file current.
async fn sweep(state: countersign_server::AppState) {
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    loop {
        tick.tick().await;
        if let Err(e) = state.expire_overdue().await {
            tracing::error!(error = %e.message, "expiry sweep failed");
        }
        if let Err(e) = state.refresh_registry().await {
            tracing::error!(error = %e.message, "registry refresh failed");
        }
        state.catch_up_audit_file().await;
    }
}

/// The agent's side: one relayed call, one held call, the wait, the retry that runs it.
async fn scenario(
    demo: &Demo,
    invite: &str,
    session: &mut Option<client::Session>,
) -> anyhow::Result<Ending> {
    let workspace = demo.workspace();
    let file = workspace.join("hello.txt");
    let write_args = json!({
        "path": file.to_string_lossy(),
        "content": "Hello from an agent: a person approved this exact write.\n",
    });
    let agent = session.insert(demo.session().await?);
    relayed_call(agent, &workspace).await?;
    let approval_id = held_call(demo, agent, invite, &file, &write_args).await?;
    let result = wait_for_verdict(demo, &approval_id).await?;
    let (status, registry) = verdict(demo, &result).await?;

    // The interposer reads the registry when it starts: a new one sees a passkey enrolled after
    // the first started. It finds the open ticket in its audit log.
    if let Some(first) = session.take() {
        first.close().await?;
    }
    let agent = session.insert(demo.session().await?);
    let again = agent.call_tool(HELD_TOOL, &write_args).await?;
    write_case(demo, &write_args, &result, &registry)?;
    if status != "APPROVED" || !client::succeeded(&again) {
        say(&format!(
            "4. The agent calls {HELD_TOOL} again, with identical arguments:\n   {}",
            one_line(&client::result_text(&again))
        ));
        return Ok(Ending::Refused(format!("the approval is {status}")));
    }
    ran_once(agent, &file, &again, &write_args).await?;
    Ok(Ending::Ran)
}

/// Step 1: a call the policy allows is relayed at once.
async fn relayed_call(agent: &mut client::Session, workspace: &Path) -> anyhow::Result<()> {
    let list_args = json!({"path": workspace.to_string_lossy()});
    let listed = agent.call_tool(RELAYED_TOOL, &list_args).await?;
    say(&format!(
        "1. The agent calls {RELAYED_TOOL}: relayed at once, no approval needed.\n   {}\n",
        one_line(&client::result_text(&listed))
    ));
    Ok(())
}

/// Step 2: the held call; its approval id (kept in the demo's state for `demo approve`) and
/// the ways to decide it, printed.
async fn held_call(
    demo: &Demo,
    agent: &mut client::Session,
    invite: &str,
    file: &Path,
    write_args: &Value,
) -> anyhow::Result<String> {
    let held = agent.call_tool(HELD_TOOL, write_args).await?;
    let block = held
        .pointer("/result/_meta/io.countersign~1approval")
        .or_else(|| held.pointer("/error/data"))
        .with_context(|| format!("{HELD_TOOL} was not held: {held}"))?;
    let approval_id = block
        .get("approval_id")
        .and_then(Value::as_str)
        .with_context(|| format!("the held answer names no approval: {held}"))?
        .to_owned();
    let approve_url = block
        .get("approve_url")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let mut state = DemoState::read(&demo.dir)?;
    state.approval_id = Some(approval_id.clone());
    state.write(&demo.dir)?;
    say(&format!(
        "2. The agent calls {HELD_TOOL} ({}): held. The agent is told:\n   {}\n\
         \n\
         Approve it — open this link (the approver page shows the held call):\n\
         \n    {approve_url}\n\
         \n\
         With your own passkey: enroll it first at {invite}\n\
         (a one-time link), then open the link above and sign in with it.\n\
         Without a passkey, in another terminal:\n\
         \n    {me} demo approve --data-dir {dir}\n\
         \n\
         (it signs with the demo software key: a key in a file, accepted only by this demo).\n\
         Waiting for the decision (Ctrl-C stops the demo)…",
        file.display(),
        one_line(&client::result_text(&held)),
        dir = shell_word(&demo.dir.to_string_lossy()),
        me = command_name(),
    ));
    Ok(approval_id)
}

/// Step 3: the decision and who signed it; its status and the registry it was checked with.
async fn verdict(
    demo: &Demo,
    result: &Value,
) -> anyhow::Result<(String, countersign::RegistryDocument)> {
    let status = result
        .get("status")
        .and_then(Value::as_str)
        .unwrap_or("?")
        .to_owned();
    let registry = demo
        .state
        .registry_document()
        .await
        .map_err(|e| anyhow::anyhow!("reading the registry: {}", e.message))?;
    let signer = result
        .pointer("/approver_evidence/0/credential_id")
        .and_then(Value::as_str)
        .and_then(|id| b64::decode(id).ok());
    let approver = registry
        .credentials
        .iter()
        .find(|c| Some(&c.credential_id) == signer.as_ref())
        .map_or("nobody", |c| c.principal.as_str());
    say(&format!("\n3. Decided: {status}, signed by {approver}.\n"));
    Ok((status, registry))
}

/// Steps 4 and 5: the approved retry ran once (`again`); a third identical call is held anew.
async fn ran_once(
    agent: &mut client::Session,
    file: &Path,
    again: &Value,
    write_args: &Value,
) -> anyhow::Result<()> {
    let written = std::fs::read_to_string(file).unwrap_or_default();
    say(&format!(
        "4. The agent calls {HELD_TOOL} again, with identical arguments: the interposer checked \
         the signature offline, collected the single-use grant and forwarded the call once.\n   \
         {}\n   {} now holds: {}",
        one_line(&client::result_text(again)),
        file.display(),
        one_line(&written),
    ));
    let third = agent.call_tool(HELD_TOOL, write_args).await?;
    say(&format!(
        "5. A third identical call does not run again (the grant is spent); it is held anew:\n   \
         {}\n",
        one_line(&client::result_text(&third))
    ));
    Ok(())
}

/// Follow the approval until it is decided (long polls, as a gateway does).
async fn wait_for_verdict(demo: &Demo, id: &str) -> anyhow::Result<Value> {
    loop {
        let result = demo
            .state
            .redrive(id, Some(30), GATEWAY)
            .await
            .map_err(|e| anyhow::anyhow!("following approval {id}: {}", e.message))?;
        let value = serde_json::to_value(&result)?;
        if value.get("status").and_then(Value::as_str) != Some("PENDING") {
            return Ok(value);
        }
    }
}

/// `DIR/held-call.case.json`: the held call, the service's answer, the registry and the
/// service's policy for the tool, for `countersign verify`.
fn write_case(
    demo: &Demo,
    arguments: &Value,
    result: &Value,
    registry: &countersign::RegistryDocument,
) -> anyhow::Result<()> {
    let params = arguments.to_string();
    let fields = countersign::call_fields_json(
        countersign::MCP_TOOL_CALL_PROFILE,
        &countersign::ToolCallParts {
            agent_id: AGENT_ID,
            server_id: Some(SERVER_ID),
            tool_name: HELD_TOOL,
            params_json: &params,
        },
    )?;
    let config = demo.state.config();
    let policy = config.policy(config.rule(HELD_TOOL), None);
    let case = json!({
        "action": {
            "profile": countersign::MCP_TOOL_CALL_PROFILE,
            "fields": serde_json::from_str::<Value>(&fields)?,
        },
        "result": result,
        "registry": registry,
        "policy": policy,
        "now": countersign_server::clock::rfc3339(time::OffsetDateTime::now_utc()),
    });
    let path = demo.dir.join(files::CASE);
    std::fs::write(&path, serde_json::to_vec_pretty(&case)?)
        .with_context(|| format!("writing {}", path.display()))
}

/// The offline checks, as commands to copy.
fn print_checks(demo: &Demo, ran: bool) {
    let file = |name: &str| shell_word(&demo.dir.join(name).to_string_lossy());
    let verdict = if ran { "ALLOW, exit 0" } else { "DENY, exit 1" };
    say(&format!(
        "Check it offline, with nothing but these files (the demo has stopped; everything is \
         in {dir}):\n\
         \n  # the approval: who signed exactly this call, and how strong the evidence is \
         ({verdict})\n\
         \n    {me} verify {case} --pretty\n\
         \n  # both signed audit logs, and that every executed call had one approval and one \
         grant\n\
         \n    {me} audit verify {log} --key {key} --config {config} --interposer-log {mcp_log} \
         --interposer-key {mcp_key}\n",
        dir = demo.dir.display(),
        me = command_name(),
        case = file(files::CASE),
        log = file(countersign_server::files::AUDIT_LOG),
        key = file(countersign_server::files::SERVICE_PUBLIC_KEY),
        config = file(files::SERVICE_CONFIG),
        mcp_log = file(files::MCP_AUDIT),
        mcp_key = file(&format!("{}.pub", files::MCP_AUDIT_KEY)),
    ));
}

/// How a printed command names this binary: `countersign` when that is what PATH finds, else
/// its full path (after `cargo run` it is not on PATH, and the command must still paste).
fn command_name() -> String {
    let me = std::env::current_exe().and_then(|p| p.canonicalize()).ok();
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("countersign"))
            .find(|p| p.is_file())
            .and_then(|p| p.canonicalize().ok())
    });
    match me {
        Some(me) if on_path.as_ref() != Some(&me) => shell_word(&me.to_string_lossy()),
        _ => "countersign".to_owned(),
    }
}

/// `text` as one shell word: as it is when it holds only characters no shell reads specially,
/// else in single quotes.
fn shell_word(text: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._-+:,=@%".contains(c);
    if !text.is_empty() && text.chars().all(plain) {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

/// `text` on one line, for the narrative.
fn one_line(text: &str) -> String {
    text.trim().replace('\n', " / ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printed_paths_paste_into_a_shell() {
        assert_eq!(
            shell_word("/tmp/countersign-demo-1/x.json"),
            "/tmp/countersign-demo-1/x.json"
        );
        assert_eq!(shell_word("/home/a b/it's"), r"'/home/a b/it'\''s'");
        assert_eq!(shell_word(""), "''");
    }

    #[test]
    fn the_written_configurations_hold_the_tool_and_name_the_address_listened_on() {
        let site = Site::of(SocketAddr::from(([127, 0, 0, 1], 9000)));
        let service = countersign_server::Config::from_toml(&service_config(&site)).unwrap();
        assert_eq!(service.rp_id, "localhost");
        assert_eq!(service.origins, ["http://localhost:9000"]);
        assert_eq!(service.public_url.as_deref(), Some("http://localhost:9000"));
        // The file cannot accept the demo key; only `demo` sets that, in code.
        assert!(!service.danger_accept_demo_key);
        assert_eq!(
            service.rule(HELD_TOOL).require_user_verification,
            Some(false)
        );
        assert_eq!(
            service.rule("anything_else").require_user_verification,
            None
        );

        let dir = Path::new("/tmp/a \"quoted\" dir");
        let mcp = countersign_mcp::Config::from_toml(&mcp_config(&site, dir)).unwrap();
        assert_eq!(mcp.hold, [HELD_TOOL]);
        assert_eq!(mcp.allow, [RELAYED_TOOL]);
        assert_eq!(mcp.audit_log, Some(dir.join(files::MCP_AUDIT)));
        assert!(mcp.cancel_on_disconnect);
    }
}
