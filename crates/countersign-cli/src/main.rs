//! `countersign`: check WebAuthn-signed approvals of AI agent actions, offline.
//!
//! One module per subcommand; this file only declares the command line and dispatches.

mod approve;
mod audit;
mod auditor;
mod credential;
mod demo;
mod enroll;
mod exit;
mod fetch;
mod gateway;
mod harness;
mod input;
mod logging;
mod mcp;
mod op_hash;
mod preauth;
mod profiles;
mod proofs;
mod recheck;
mod registry;
mod serve;
mod store;
mod table;
mod verify;
mod witness;

use clap::{Parser, Subcommand};
use exit::EXIT_UNUSABLE;
use input::{BackendChoice, backend};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(
    name = "countersign",
    version,
    about = "Verify that an enrolled human approved (or refused) exactly this action.",
    long_about = "Countersign turns a human's approval of an AI agent's action into evidence anyone can \
check: a WebAuthn signature by the approver's own authenticator over challenge = nonce || op_hash, where \
op_hash = SHA-256(JCS({profile, decision, fields})).\n\nThis tool recomputes op_hash from the action you are \
about to run, checks the signature against the enrolled public keys you trust, and prints a verdict.",
    after_help = "Exit codes: 0 ALLOW, 1 DENY, 2 unusable input (the reason is on stderr).\n\
Examples:\n  countersign verify fixtures/worked-example/approve-account-a.case.json\n  \
echo '{\"profile\":\"countersign.tool-call/1\",\"decision\":\"APPROVED\",\"fields\":{\"agent_id\":\"a\",\"tool_name\":\"t\",\"params\":{}}}' | countersign op-hash"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print the op_hash of {"profile", "decision", "fields"} read from stdin.
    ///
    /// The output is unpadded base64url and a newline (hex with --hex). The input goes through the
    /// same strict admission as verification: duplicate keys, lone surrogates, out-of-range integers,
    /// unassigned code points, unknown profiles and fields outside the profile are refused with exit
    /// code 2 and the reason on stderr. Strings are normalized to NFC, as op_hash is defined; verify
    /// instead refuses an action whose strings are not already NFC, unless its policy has
    /// "nfc": "normalize".
    OpHash(op_hash::OpHashArgs),
    /// Verify a CASE file and print one JSON verdict.
    ///
    /// CASE is {"action": {"profile", "fields", "tool"?}, "result": ApprovalResult or bare status
    /// string, "registry": {"credentials": [...]}, "policy": {...}, "now": RFC 3339}. The verdict is
    /// {"effective": "ALLOW"|"DENY", "decision", "reason_code", "identity_assurance": {"level", ...},
    /// "approvers": [...]}. Exit 0 on ALLOW, 1 on DENY, 2 when the CASE itself is unusable (a
    /// contradictory policy, an unusable result envelope, a malformed member).
    /// Replay state (spent nonces, counters) lives in memory for the one run.
    ///
    /// Without a hand-built CASE: --action (the action, or the request body the gateway sent),
    /// --result (the service's answer), --registry (a file, or the service's published registry
    /// URL) and --policy, or --config (the service's own configuration: the policy it applies to
    /// the action's tool). For example:
    ///
    ///   countersign verify --action request.json --result answer.json \
    ///     --registry http://localhost:8080 --gateway-token-file gw.token --config countersign.toml
    Verify(verify::VerifyArgs),
    /// Check an operator profile definition and print the digest that pins it.
    ///
    /// Prints `<sha256 hex>  <profile id>`. Pass the pin to `--profile FILE=SHA256`.
    ProfileDigest {
        /// The profile definition (JSON).
        file: PathBuf,
    },
    /// Run the reference approval_callback service.
    ///
    /// With no config file it listens on 127.0.0.1:8080 with an embedded SQLite database in
    /// DATA_DIR (created if needed). It stays in the foreground: run the other commands in a
    /// second terminal; SIGTERM or Ctrl-C shuts it down gracefully. What the config leaves unset
    /// follows --listen: the approver page and its origin are the listen address as a browser
    /// opens it (localhost for a loopback address; rp_id localhost). It prints the page, rp_id and
    /// origins, warns about an origin a browser refuses or that names another port, and records
    /// the start in DATA_DIR/serve.json, where `enroll invite` and `audit verify` find them. See
    /// docs/API.md and docs/spec/service.md.
    #[command(
        mut_arg("data_dir", |a| a.help("Directory for the database, the audit log and the service key")),
        mut_arg("database", |a| a.help(
            "Database URL: sqlite://PATH or postgres://USER@HOST:PORT/DB (overrides the config's \
             `database`). Default: SQLite in DATA_DIR. Replicas share one PostgreSQL database and \
             the same service-key file"
        )),
    )]
    Serve(serve::ServeArgs),
    /// Decide an approval from the terminal, signing with a FIDO2 security key.
    ///
    /// Signs in to the service as an approver with the key (as the approver page does), lists
    /// what waits for you when no APPROVAL_ID is given, shows the approval exactly as the page
    /// does (every field, the exact JSON, deceptive characters marked), computes its op_hash
    /// here, and asks Approve / Refuse / Skip. The key signs only a challenge whose op_hash is
    /// the one computed from the fields shown, with an origin the service accepts, and with
    /// user verification (the key's PIN or fingerprint). The service's verdict is printed and
    /// verified here against the enrolled keys. USB keys need a build with
    /// `--features security-key`. Exit codes: 0 recorded as asked (or nothing chosen), 1 the
    /// service refused or the result does not verify, 2 refused before signing (the reason on
    /// stderr). See docs/OPERATIONS.md.
    #[command(after_help = "Examples:
  countersign approve --service https://approvals.example.com
  countersign approve apr_Xb3... --service https://approvals.example.com --origin https://approve.example.com")]
    Approve(approve::ApproveArgs),
    /// Audit log commands.
    Audit {
        #[command(subcommand)]
        command: audit::AuditCommand,
    },
    /// Enrolled-credential registry commands.
    Registry {
        #[command(subcommand)]
        command: registry::RegistryCommand,
    },
    /// Enrolled credentials: list them, revoke a lost or retired one.
    Credential {
        #[command(subcommand)]
        command: credential::CredentialCommand,
    },
    /// Approver enrollment commands.
    Enroll {
        #[command(subcommand)]
        command: enroll::EnrollCommand,
    },
    /// Gateway credentials: the bearer tokens gateways call the service with.
    Gateway {
        #[command(subcommand)]
        command: gateway::GatewayCommand,
    },
    /// Auditor credentials: the bearer tokens that read the whole audit log.
    Auditor {
        #[command(subcommand)]
        command: auditor::AuditorCommand,
    },
    /// A C2SP tlog-witness: cosign audit checkpoints, never two histories of one log.
    Witness {
        #[command(subcommand)]
        command: witness::WitnessCommand,
    },
    /// The MCP interposer: hold an agent's sensitive MCP tool calls for a passkey approval.
    Mcp {
        #[command(subcommand)]
        command: mcp::McpCommand,
    },
    /// See it work: a held MCP call approved by a person and run exactly once, on this machine.
    ///
    /// Starts the approval service (embedded SQLite, a fresh data directory), puts an MCP server
    /// behind the interposer with `write_file` held for approval, and plays the agent: a
    /// `list_directory` call passes, a `write_file` call is held, and the demo prints the
    /// approver link. Approve in the browser with your own passkey (the demo prints a one-time
    /// enrollment link for it), or, without one, run the printed `countersign demo approve` in
    /// another terminal: it signs with the demo software key, which every verdict names as
    /// "demo software key (not a hardware authenticator)", rated AAL1 (user presence only), and
    /// which any service other than the demo's refuses. Once approved, the call runs once; a
    /// third identical call is held again. The demo then stops and prints the commands that
    /// check the approval and both audit logs offline (`countersign verify`, `countersign audit
    /// verify`).
    ///
    /// Ctrl-C stops it cleanly at any point (the interposer and the service close their audit
    /// logs). Exit codes: 0 the call ran once (or Ctrl-C); 1 the approver refused; 2 the demo
    /// could not run (the reason on stderr).
    #[command(after_help = "Examples:
  countersign demo
  countersign demo --listen 127.0.0.1:9000 --data-dir ./demo-data
  countersign demo approve --data-dir ./demo-data      (in another terminal)")]
    Demo(demo::DemoArgs),
    /// Operator preauthorizations: list them with their uses, disable one by hand.
    Preauth {
        #[command(subcommand)]
        command: preauth::PreauthCommand,
    },
    /// Answer conformance vectors on stdin/stdout (the JSON-lines protocol of
    /// conformance/HARNESS.md), for `countersign-conformance run --impl 'countersign harness'`.
    Harness {
        /// Signature backend: the fastest compiled in (default), or a named one.
        #[arg(long, value_enum, default_value_t = BackendChoice::Auto)]
        backend: BackendChoice,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("countersign: {e:#}");
            ExitCode::from(EXIT_UNUSABLE)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<u8> {
    match cli.command {
        Command::OpHash(args) => op_hash::run(&args),
        Command::Verify(args) => verify::run(&args),
        Command::ProfileDigest { file } => profiles::print_digest(&file),
        Command::Serve(args) => serve::run(args),
        Command::Approve(args) => approve::run(&args),
        Command::Audit { command } => audit::run(command),
        Command::Registry { command } => registry::run(command),
        Command::Credential { command } => credential::run(command),
        Command::Enroll { command } => enroll::run(command),
        Command::Gateway { command } => gateway::run(command),
        Command::Auditor { command } => auditor::run(command),
        Command::Witness { command } => witness::run(command),
        Command::Mcp { command } => mcp::run(command),
        Command::Preauth { command } => preauth::run(command),
        Command::Demo(args) => demo::run(args),
        Command::Harness { backend: choice } => harness::serve(backend(choice)?),
    }
}
