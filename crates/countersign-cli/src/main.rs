//! `countersign`: check WebAuthn-signed approvals of AI agent actions, offline.

mod harness;
mod profiles;

use anyhow::Context as _;
use clap::{Parser, Subcommand, ValueEnum};
use countersign::{
    Case, MemoryReplayState, ProfileRegistry, ReplayState, Verdict, replay::danger::OfflineAudit,
};
use profiles::ProfileArgs;
use std::io::{Read as _, Write as _};
use std::path::PathBuf;
use std::process::ExitCode;

/// Exit codes are part of the contract (docs/SPEC.md §9).
const EXIT_ALLOW: u8 = 0;
const EXIT_DENY: u8 = 1;
const EXIT_UNUSABLE: u8 = 2;

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
    /// code 2 and the reason on stderr.
    OpHash {
        /// Print lowercase hex instead of base64url.
        #[arg(long)]
        hex: bool,
        #[command(flatten)]
        profiles: ProfileArgs,
    },
    /// Verify a CASE file and print one JSON verdict.
    ///
    /// CASE is {"action": {"profile", "fields"}, "result": ApprovalResult or bare status string,
    /// "registry": {"credentials": [...]}, "policy": {...}, "now": RFC 3339}. The verdict is
    /// {"effective": "ALLOW"|"DENY", "decision", "reason_code", "identity_assurance": {"level", ...},
    /// "approvers": [...]}. Exit 0 on ALLOW, 1 on DENY, 2 when the CASE itself is unusable.
    /// Replay state (spent nonces, counters) lives in memory for the one run.
    Verify {
        /// The CASE file, or - for stdin.
        case: PathBuf,
        /// Signature backend: the fastest compiled in (default), or a named one.
        #[arg(long, value_enum, default_value_t = BackendChoice::Auto)]
        backend: BackendChoice,
        /// Offline audit: report replay, freshness and counter findings instead of enforcing them.
        /// For verifying old records; never use it to decide whether an action may run.
        #[arg(long)]
        audit: bool,
        /// Pretty-print the verdict.
        #[arg(long)]
        pretty: bool,
        #[command(flatten)]
        profiles: ProfileArgs,
    },
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
    /// DATA_DIR (created if needed) and prints where it listens. SIGTERM or Ctrl-C shuts it down
    /// gracefully. See docs/API.md and docs/spec/service.md.
    Serve {
        /// Address and port to listen on (port 0 picks a free one).
        #[arg(long, default_value = "127.0.0.1:8080")]
        listen: std::net::SocketAddr,
        /// Directory for the database, the audit log and the service key.
        #[arg(long, default_value = "countersign-data")]
        data_dir: PathBuf,
        /// TOML configuration (rp_id, origins, tools, groups, timeouts, webhook).
        #[arg(long)]
        config: Option<PathBuf>,
        /// Database URL: sqlite://PATH or postgres://USER@HOST:PORT/DB (overrides the config's
        /// `database`). Default: SQLite in DATA_DIR. Replicas share one PostgreSQL database and
        /// the same service-key file.
        #[arg(long, value_name = "URL")]
        database: Option<String>,
    },
    /// Audit log commands.
    Audit {
        #[command(subcommand)]
        command: AuditCommand,
    },
    /// Enrolled-credential registry commands.
    Registry {
        #[command(subcommand)]
        command: RegistryCommand,
    },
    /// Approver enrollment commands.
    Enroll {
        #[command(subcommand)]
        command: EnrollCommand,
    },
    /// Answer conformance vectors on stdin/stdout (the JSON-lines protocol of
    /// conformance/HARNESS.md), for `countersign-conformance run --impl 'countersign harness'`.
    Harness {
        /// Signature backend: the fastest compiled in (default), or a named one.
        #[arg(long, value_enum, default_value_t = BackendChoice::Auto)]
        backend: BackendChoice,
    },
}

#[derive(Subcommand, Debug)]
enum AuditCommand {
    /// Check an audit log's hash chain, signatures and cross-line rules.
    ///
    /// Exit codes: 0 valid (informational findings are printed), 1 a violation (an edited,
    /// removed, inserted or reordered line, a bad signature, two verdicts for one approval, a
    /// grant collected twice or without approval), 2 unusable input (unreadable file or key).
    Verify {
        /// The audit log (JSON lines), or - for stdin.
        file: PathBuf,
        /// The service's Ed25519 public key: base64url, or a file containing it
        /// (DATA_DIR/service-key.pub).
        #[arg(long)]
        key: String,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
enum RegistryCommand {
    /// Print the registry document of a service's data directory (what verifiers should trust).
    Export {
        /// The service's data directory.
        #[arg(long, default_value = "countersign-data")]
        data_dir: PathBuf,
        /// The service's database URL, when it is not the SQLite database in DATA_DIR.
        #[arg(long, value_name = "URL")]
        database: Option<String>,
    },
}

#[derive(Subcommand, Debug)]
enum EnrollCommand {
    /// Print a one-time, expiring link that enrolls a security key for PRINCIPAL.
    ///
    /// The invite is written into the data directory's database, so it works whether the
    /// service is running or stopped. Give the link to the approver over a channel you trust:
    /// whoever opens it first enrolls a key that can approve as PRINCIPAL. See docs/OPERATIONS.md.
    Invite {
        /// The approver's name as it appears in verdicts and [groups] (e.g. alice@example.com).
        #[arg(long)]
        principal: String,
        /// An approver group (defined in the config's [groups]) the approver joins on enrollment.
        #[arg(long)]
        group: Option<String>,
        /// The service's data directory.
        #[arg(long, default_value = "countersign-data")]
        data_dir: PathBuf,
        /// The service's TOML configuration (origins, public_url, groups, invite lifetime).
        #[arg(long)]
        config: Option<PathBuf>,
        /// Invite lifetime in seconds (default: [enrollment] invite_seconds, 86400).
        #[arg(long)]
        expires_in: Option<u64>,
        /// Base URL of the approver page (default: public_url, else the first origin).
        #[arg(long)]
        public_url: Option<String>,
    },
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum BackendChoice {
    /// The fastest backend compiled in.
    Auto,
    /// Pure Rust (p256, p384, ed25519-dalek, rsa).
    Rustcrypto,
    /// ring (C and assembly).
    Ring,
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
        Command::OpHash { hex, profiles } => op_hash(hex, &profiles.registry()?),
        Command::Verify {
            case,
            backend,
            audit,
            pretty,
            profiles,
        } => verify(&case, backend, audit, pretty, profiles.registry()?),
        Command::ProfileDigest { file } => profiles::print_digest(&file),
        Command::Harness { backend: choice } => harness::serve(backend(choice)?),
        Command::Serve {
            listen,
            data_dir,
            config,
            database,
        } => serve(listen, data_dir, config, database),
        Command::Audit {
            command: AuditCommand::Verify { file, key, json },
        } => audit_verify(&file, &key, json),
        Command::Registry {
            command: RegistryCommand::Export { data_dir, database },
        } => registry_export(&data_dir, database.as_deref()),
        Command::Enroll {
            command:
                EnrollCommand::Invite {
                    principal,
                    group,
                    data_dir,
                    config,
                    expires_in,
                    public_url,
                },
        } => {
            let config = match config {
                Some(path) => countersign_server::Config::from_file(&path)?,
                None => countersign_server::Config::default(),
            };
            let created = countersign_server::enroll::invite_in_data_dir(
                &countersign_server::enroll::InviteOptions {
                    data_dir,
                    config,
                    principal,
                    group,
                    expires_in_seconds: expires_in,
                    public_url,
                },
            )?;
            println!("{}", created.url);
            eprintln!(
                "countersign: one-time invite for {} expires at {}",
                created.invite.principal, created.expires_at
            );
            Ok(EXIT_ALLOW)
        }
    }
}

fn serve(
    listen: std::net::SocketAddr,
    data_dir: PathBuf,
    config: Option<PathBuf>,
    database: Option<String>,
) -> anyhow::Result<u8> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(countersign_server::serve(
        countersign_server::ServeOptions {
            listen,
            data_dir,
            config,
            database,
        },
    ))?;
    Ok(EXIT_ALLOW)
}

fn audit_verify(path: &PathBuf, key: &str, json: bool) -> anyhow::Result<u8> {
    let key_text = match std::fs::read_to_string(key) {
        Ok(text) => text,
        Err(_) => key.to_owned(),
    };
    let key = countersign::b64::decode(key_text.trim())
        .ok()
        .and_then(|b| <[u8; 32]>::try_from(b).ok())
        .and_then(|b| ed25519_dalek::VerifyingKey::from_bytes(&b).ok());
    let Some(key) = key else {
        eprintln!(
            "countersign: --key is not a base64url Ed25519 public key (or a file holding one)"
        );
        return Ok(EXIT_UNUSABLE);
    };
    let bytes = match read_input(path) {
        Ok(bytes) => bytes,
        Err(e) => {
            eprintln!("countersign: {e:#}");
            return Ok(EXIT_UNUSABLE);
        }
    };
    let report = countersign_server::audit::verify_log(&bytes, &key);
    let mut out = std::io::stdout().lock();
    if json {
        writeln!(out, "{}", serde_json::to_string(&report)?)?;
    } else {
        for issue in &report.issues {
            let class = match issue.class {
                countersign_server::audit::IssueClass::Violation => "VIOLATION",
                countersign_server::audit::IssueClass::Informational => "info",
            };
            writeln!(
                out,
                "line {}: {class} {}: {}",
                issue.line, issue.code, issue.detail
            )?;
        }
        let verdict = if report.is_valid() {
            "valid"
        } else {
            "INVALID"
        };
        writeln!(
            out,
            "{verdict}: {} line(s), head {}",
            report.lines, report.head
        )?;
    }
    Ok(if report.is_valid() {
        EXIT_ALLOW
    } else {
        EXIT_DENY
    })
}

fn registry_export(data_dir: &std::path::Path, database: Option<&str>) -> anyhow::Result<u8> {
    use countersign_server::store::DatabaseUrl;
    let key = data_dir.join(countersign_server::files::SERVICE_KEY);
    anyhow::ensure!(
        key.exists(),
        "{} is not a countersign data directory (no service key)",
        data_dir.display()
    );
    let sealer = countersign_server::audit::AuditSealer::load_or_create(&key)?;
    let url = match database {
        Some(url) => DatabaseUrl::parse(url)?,
        None => DatabaseUrl::default_in(data_dir),
    };
    let store = url.open(sealer, countersign_server::config::Durability::Normal)?;
    let doc = countersign::RegistryDocument {
        credentials: store.credentials()?,
    };
    println!("{}", serde_json::to_string_pretty(&doc)?);
    Ok(EXIT_ALLOW)
}

fn read_input(path: &PathBuf) -> anyhow::Result<Vec<u8>> {
    if path.as_os_str() == "-" {
        let mut buf = Vec::new();
        std::io::stdin()
            .read_to_end(&mut buf)
            .context("reading stdin")?;
        Ok(buf)
    } else {
        std::fs::read(path).with_context(|| format!("reading {}", path.display()))
    }
}

fn op_hash(hex: bool, registry: &ProfileRegistry) -> anyhow::Result<u8> {
    let mut input = Vec::new();
    std::io::stdin()
        .read_to_end(&mut input)
        .context("reading stdin")?;
    match countersign::op_hash_document(registry, &input) {
        Ok(h) => {
            let text = if hex {
                h.0.iter().map(|b| format!("{b:02x}")).collect()
            } else {
                countersign::b64::encode(&h.0)
            };
            println!("{text}");
            Ok(EXIT_ALLOW)
        }
        Err(e) => {
            eprintln!("countersign: inadmissible ({}): {e}", e.reason_code());
            Ok(EXIT_UNUSABLE)
        }
    }
}

fn backend(
    choice: BackendChoice,
) -> anyhow::Result<&'static dyn countersign::webauthn::SignatureBackend> {
    let wanted = match choice {
        BackendChoice::Auto => return Ok(countersign::webauthn::default_backend()),
        BackendChoice::Rustcrypto => "rustcrypto",
        BackendChoice::Ring => "ring",
    };
    countersign::webauthn::all_backends()
        .into_iter()
        .find(|b| b.name() == wanted)
        .with_context(|| format!("backend {wanted} is not compiled into this binary"))
}

fn verify(
    path: &PathBuf,
    choice: BackendChoice,
    audit: bool,
    pretty: bool,
    profiles: ProfileRegistry,
) -> anyhow::Result<u8> {
    let bytes = read_input(path)?;
    let case = match Case::from_json(&bytes) {
        Ok(mut case) => {
            // The CASE's policy trusts the built-in profiles plus the operator's pinned ones.
            case.policy.profiles = profiles;
            case
        }
        Err(e) => {
            eprintln!("countersign: unusable CASE: {e}");
            return Ok(EXIT_UNUSABLE);
        }
    };
    let backend = backend(choice)?;
    let mut enforcing = MemoryReplayState::new();
    let mut auditing = OfflineAudit::new();
    let replay: &mut dyn ReplayState = if audit { &mut auditing } else { &mut enforcing };
    let verdict: Verdict = case.verify_with(backend, replay);
    let json = if pretty {
        serde_json::to_string_pretty(&verdict)
    } else {
        serde_json::to_string(&verdict)
    }
    .context("serializing the verdict")?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{json}").context("writing the verdict")?;
    Ok(if verdict.is_allow() {
        EXIT_ALLOW
    } else {
        EXIT_DENY
    })
}
