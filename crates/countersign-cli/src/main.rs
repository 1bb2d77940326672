//! `countersign`: check WebAuthn-signed approvals of AI agent actions, offline.

mod harness;
mod logging;
mod mcp;
mod preauth;
mod profiles;
mod proofs;
mod recheck;

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
    /// code 2 and the reason on stderr. Strings are normalized to NFC, as op_hash is defined; verify
    /// instead refuses an action whose strings are not already NFC, unless its policy has
    /// "nfc": "normalize".
    OpHash {
        /// Print lowercase hex instead of base64url.
        #[arg(long)]
        hex: bool,
        #[command(flatten)]
        profiles: ProfileArgs,
    },
    /// Verify a CASE file and print one JSON verdict.
    ///
    /// CASE is {"action": {"profile", "fields", "tool"?}, "result": ApprovalResult or bare status
    /// string, "registry": {"credentials": [...]}, "policy": {...}, "now": RFC 3339}. The verdict is
    /// {"effective": "ALLOW"|"DENY", "decision", "reason_code", "identity_assurance": {"level", ...},
    /// "approvers": [...]}. Exit 0 on ALLOW, 1 on DENY, 2 when the CASE itself is unusable (a
    /// contradictory policy, an unusable result envelope, a malformed member).
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
        /// Log format on stderr: `text`, or `json` (one object per line, with the request's
        /// route, gateway and approval id on every line a request causes). Which events are
        /// logged: COUNTERSIGN_LOG (e.g. `warn`, `info`, `countersign_server=debug`; default info).
        #[arg(long, value_enum, default_value_t = logging::LogFormat::Text)]
        log_format: logging::LogFormat,
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
    /// Enrolled credentials: list them, revoke a lost or retired one.
    Credential {
        #[command(subcommand)]
        command: CredentialCommand,
    },
    /// Approver enrollment commands.
    Enroll {
        #[command(subcommand)]
        command: EnrollCommand,
    },
    /// Gateway credentials: the bearer tokens gateways call the service with.
    Gateway {
        #[command(subcommand)]
        command: GatewayCommand,
    },
    /// A C2SP tlog-witness: cosign audit checkpoints, never two histories of one log.
    Witness {
        #[command(subcommand)]
        command: WitnessCommand,
    },
    /// The MCP interposer: hold an agent's sensitive MCP tool calls for a passkey approval.
    Mcp {
        #[command(subcommand)]
        command: mcp::McpCommand,
    },
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

#[derive(Subcommand, Debug)]
enum AuditCommand {
    /// Check an audit log's hash chain, signatures and cross-line rules, and that it contains
    /// every signed checkpoint given.
    ///
    /// A checkpoint (GET /v1/audit/checkpoint, or the `checkpoint` of a grant response) is the
    /// service's signed statement of the log's size and Merkle root at a moment; a log shorter
    /// than a checkpoint, or whose first SIZE lines have another root, is not the log the
    /// service kept, which the file alone cannot show. With --witness-key and --quorum, each
    /// checkpoint must also carry that many witness cosignatures (GET
    /// /v1/audit/checkpoint/witnessed): then the service cannot have shown another history to
    /// those witnesses.
    ///
    /// Exit codes: 0 valid (informational findings are printed), 1 a violation (an edited,
    /// removed, inserted or reordered line, a bad signature, two verdicts for one approval, a
    /// grant collected twice or without approval, a log shorter than or diverging from a
    /// checkpoint, a checkpoint without its witness quorum), 2 unusable input (unreadable file
    /// or key; a checkpoint that is malformed or not signed by KEY; a bad witness key; a quorum
    /// above the keys given).
    Verify {
        /// The audit log (JSON lines), or - for stdin.
        file: PathBuf,
        /// The service's Ed25519 public key: base64url, or a file containing it
        /// (DATA_DIR/service-key.pub).
        #[arg(long)]
        key: String,
        /// A signed checkpoint file (the note text) the log must contain; repeatable.
        #[arg(long, value_name = "CP")]
        checkpoint: Vec<PathBuf>,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        /// The service's TOML configuration: rp_id, origins and each tool's user-verification
        /// rule, under which every Decision's evidence is re-verified.
        #[arg(long, value_name = "TOML")]
        config: Option<PathBuf>,
        /// The relying party id (overrides --config; default: the service default, localhost).
        #[arg(long)]
        rp_id: Option<String>,
        /// An allowed origin; repeatable (overrides --config's origins).
        #[arg(long)]
        origin: Vec<String>,
        /// Judge the evidence against this registry document instead of the credentials the
        /// log's enrollment lines carry.
        #[arg(long, value_name = "FILE")]
        registry: Option<PathBuf>,
        /// Threads for the evidence checks (default: every core).
        #[arg(long, default_value_t = 0)]
        threads: usize,
        /// A witness's C2SP vkey (`name+keyid+base64`, as `witness serve` prints it), or a file
        /// holding one; repeatable. Each --checkpoint must then carry QUORUM valid cosignatures.
        #[arg(long, value_name = "W")]
        witness_key: Vec<String>,
        /// How many of the --witness-key witnesses must have cosigned each checkpoint (default:
        /// all of them). A checkpoint with fewer is a violation (exit 1).
        #[arg(long, value_name = "K")]
        quorum: Option<usize>,
        /// Also print the crypto floor: the time of the raw signature verifications this log
        /// requires (every seal one by one, every Decision's evidence signature), measured in
        /// the same run, beside the time `audit verify` took.
        #[arg(long)]
        floor: bool,
        /// The MCP interposer's audit log (its `audit_log`). It is verified under
        /// --interposer-key like FILE, then the two are cross-checked: every held call it
        /// executed must have exactly one verdict and exactly one collected grant in FILE for
        /// that approval id and op_hash (violations: mcp_executed_without_decision,
        /// mcp_executed_without_grant, mcp_executed_twice, mcp_op_hash_mismatch,
        /// mcp_executed_denied, mcp_two_decisions, mcp_two_grants), and every grant collected
        /// for an approval it created must have been executed by it (mcp_grant_not_executed; a
        /// grant whose call was still in flight when the interposer stopped is informational).
        #[arg(long, value_name = "LOG", requires = "interposer_key")]
        interposer_log: Option<PathBuf>,
        /// The interposer log's Ed25519 public key: base64url, or a file containing it (the
        /// interposer writes it to AUDIT_KEY.pub beside its `audit_key` seed).
        #[arg(long, value_name = "KEY", requires = "interposer_log")]
        interposer_key: Option<String>,
    },
    /// Check a Merkle proof offline against signed checkpoints (exit 0 it holds, 1 it does not,
    /// 2 unusable input).
    Prove {
        #[command(subcommand)]
        command: ProveCommand,
    },
    /// Replay every request of a log against a new configuration: one verdict per approval.
    ///
    /// The log must verify under KEY first. For each approval the new config's rules are applied
    /// in the service's order (a tool rule that needs no approval, then [[preauthorizations]]
    /// at the request's time, else a human) and the recorded human evidence is held to the new
    /// rule (eligible approvers, min_assurance, quorum). Verdicts: unchanged, newly_denied (the
    /// new policy refuses the tool or the approver), newly_parked (approved without a human
    /// before, a human is asked now: a human might still approve), newly_allowed (approved
    /// without a human now), insufficient_assurance, quorum_not_met. Preauthorization use counts
    /// are not replayed.
    ///
    /// Exit codes: 0 nothing would change, 1 something would, 2 unusable input (unreadable log,
    /// key or config; a log that does not verify).
    #[command(after_help = "Example:\n  countersign audit recheck audit.log \
                            --key countersign-data/service-key.pub --config new.toml --json")]
    Recheck {
        /// The audit log (JSON lines), or - for stdin.
        file: PathBuf,
        /// The service's Ed25519 public key: base64url, or a file containing it.
        #[arg(long)]
        key: String,
        /// The new service configuration (TOML) to judge the log by.
        #[arg(long, value_name = "NEW.toml")]
        config: PathBuf,
        /// Print a JSON array of {approval_id, tool_name, was, verdict, detail, granted}.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
enum ProveCommand {
    /// Check that a line is in the log a checkpoint signed.
    ///
    /// PROOF is the JSON of GET /v1/audit/proof/inclusion?seq=N&size=S (S the checkpoint's
    /// size). The line's leaf hash, SHA-256(0x00 || line), is walked up the audit path to a root
    /// that must equal the checkpoint's. With --line, the line is read from that file (the copy
    /// you kept, e.g. your Decision's line) instead of the proof.
    #[command(
        after_help = "Example:\n  curl -s 'https://approvals.example/v1/audit/proof/inclusion?seq=42&size=100' \
                            > p.json\n  countersign audit prove inclusion --proof p.json \
                            --checkpoint cp100.txt --key service-key.pub"
    )]
    Inclusion {
        /// The inclusion proof (JSON).
        #[arg(long)]
        proof: PathBuf,
        /// The signed checkpoint (version 2) the proof is for.
        #[arg(long, value_name = "CP")]
        checkpoint: PathBuf,
        /// The service's Ed25519 public key (base64url, or a file holding it).
        #[arg(long)]
        key: String,
        /// The line to prove (a file holding it); default: the proof's `line`.
        #[arg(long)]
        line: Option<PathBuf>,
    },
    /// Check that the log an older checkpoint signed is a prefix of the one a newer signed.
    ///
    /// PROOF is the JSON of GET /v1/audit/proof/consistency?from=A&to=B with A and B the two
    /// checkpoints' sizes. Exit 1 means the service showed two histories that cannot both be
    /// true: lines were changed, removed or reordered between the two checkpoints.
    Consistency {
        /// The consistency proof (JSON).
        #[arg(long)]
        proof: PathBuf,
        /// The older signed checkpoint.
        #[arg(long, value_name = "CP")]
        old: PathBuf,
        /// The newer signed checkpoint.
        #[arg(long, value_name = "CP")]
        new: PathBuf,
        /// The service's Ed25519 public key (base64url, or a file holding it).
        #[arg(long)]
        key: String,
    },
}

#[derive(Subcommand, Debug)]
enum WitnessCommand {
    /// Serve C2SP tlog-witness `POST /add-checkpoint` for the given logs.
    ///
    /// For each log (by its checkpoint origin) the witness keeps the last checkpoint it
    /// cosigned in STATE_DIR and cosigns a new one only with a consistency proof from it: it
    /// answers 409 (with the size it holds) to a stale or rolled-back size or a second root at
    /// the same size, 422 to a proof that does not verify (a fork), 403 to a checkpoint not
    /// signed by the log's key, 404 to an unknown log. Prints its own vkey on start: give it
    /// to the service (`[[witnesses]]` in its config) and to auditors (`audit verify
    /// --witness-key`). Runs until SIGTERM or Ctrl-C.
    #[command(
        after_help = "Example:\n  countersign witness keygen --name witness.example/w1 \
                            --out w1.key\n  countersign witness serve --listen 127.0.0.1:7380 \
                            --key w1.key --log-key \"$(curl -s https://approvals.example/v1/service-key \
                            | jq -r .checkpoint_vkey)\""
    )]
    Serve {
        /// Address and port to listen on (port 0 picks a free one; the address is printed).
        #[arg(long, default_value = "127.0.0.1:7380")]
        listen: std::net::SocketAddr,
        /// The witness's signer key file (PRIVATE+KEY+..., from `witness keygen`).
        #[arg(long, value_name = "FILE")]
        key: PathBuf,
        /// A log's C2SP vkey (origin+keyid+base64(0x01 || key)): GET /v1/service-key's
        /// checkpoint_vkey. Repeatable.
        #[arg(long, value_name = "PUB", required = true)]
        log_key: Vec<String>,
        /// Where the last cosigned checkpoint of each log is kept (survives restarts; losing
        /// it lets the witness be rolled back, so back it up or retire the witness key).
        #[arg(long, default_value = "countersign-witness")]
        state_dir: PathBuf,
    },
    /// Create a witness signer key file and print its vkey.
    Keygen {
        /// The witness's name (a schema-less URL, e.g. witness.example/w1).
        #[arg(long)]
        name: String,
        /// The key file to create (owner-only; never overwritten).
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
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
enum CredentialCommand {
    /// List the enrolled credentials of a service's data directory (or database).
    ///
    /// One line per credential: principal, credential id (base64url, what `credential revoke`
    /// takes), algorithm, AAGUID (the authenticator model, `-` when unknown), attestation
    /// (format, and `verified` when its chain verified at enrollment) and whether it is revoked.
    /// `--json` prints the same as a JSON array. Exit 0, or 2 when the data directory or
    /// database cannot be opened.
    List {
        /// The service's data directory.
        #[arg(long, default_value = "countersign-data")]
        data_dir: PathBuf,
        /// The service's database URL, when it is not the SQLite database in DATA_DIR.
        #[arg(long, value_name = "URL")]
        database: Option<String>,
        /// Print a JSON array instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Revoke a credential: its key can no longer log in or decide.
    ///
    /// Marks the credential `revoked: true` in the database and appends a `revocation` line
    /// (principal, credential id, your --reason) to the signed audit log, in one transaction.
    /// It works whether the service is running or stopped: a running service (every replica)
    /// notices within about half a second and from then on refuses the key's logins, its open
    /// sessions and its decisions with `credential_revoked`. `registry export` shows the record
    /// with `revoked: true`, so offline verifiers refuse it too once they take the new export.
    ///
    /// A revocation is final: a registry file that still lists the key does not bring it back at
    /// the next start. To let the person approve again, invite them to enroll a new key
    /// (`countersign enroll invite`). Find CREDENTIAL_ID with `countersign credential list`.
    ///
    /// Exit codes: 0 revoked, 1 already revoked (nothing changed), 2 unknown credential or
    /// unusable input (not base64url, empty reason, no data directory, database unreachable).
    #[command(after_help = "Example:\n  countersign credential revoke \
                            AbC123-_xyz --reason 'YubiKey lost on 2026-12-01' \
                            --data-dir /var/lib/countersign")]
    Revoke {
        /// The credential id, base64url (as `credential list` and `registry export` print it).
        credential_id: String,
        /// Why, in a few words; recorded in the signed audit log for auditors.
        #[arg(long)]
        reason: String,
        /// The service's data directory.
        #[arg(long, default_value = "countersign-data")]
        data_dir: PathBuf,
        /// The service's database URL, when it is not the SQLite database in DATA_DIR.
        #[arg(long, value_name = "URL")]
        database: Option<String>,
    },
}

#[derive(Subcommand, Debug)]
enum GatewayCommand {
    /// Add a gateway and print its bearer token: exactly one line on stdout, shown this once.
    ///
    /// Every gateway call (POST /v1/approvals, the redrive URL, withdraw, grant) must carry
    /// `Authorization: Bearer TOKEN`, and a gateway sees only the approvals it created. The
    /// database keeps only the token's SHA-256: a lost token cannot be shown again; revoke the
    /// gateway and add one under a new name. A running service (every replica) accepts the token
    /// within about half a second. Give the token to the gateway as a secret (an environment
    /// variable or a file only it can read), never on a command line other users can see.
    ///
    /// NAME is 1 to 64 characters of A-Z a-z 0-9 . _ - and is recorded as `"gateway": NAME` in
    /// the audit log's request, withdrawal and grant lines. Names are never reused, even after
    /// a revocation.
    ///
    /// Exit codes: 0 added (the token on stdout), 1 a gateway with that name exists already
    /// (nothing changed), 2 unusable input (bad name, no data directory, database unreachable).
    #[command(after_help = "Example:\n  countersign gateway add billing-agent \
                            --data-dir /var/lib/countersign > billing-agent.token")]
    Add {
        /// The gateway's name (e.g. billing-agent).
        name: String,
        /// The service's data directory.
        #[arg(long, default_value = "countersign-data")]
        data_dir: PathBuf,
        /// The service's database URL, when it is not the SQLite database in DATA_DIR.
        #[arg(long, value_name = "URL")]
        database: Option<String>,
    },
    /// List the gateways: name, when added, when revoked (`-` while live).
    ///
    /// `--json` prints a JSON array of {name, created_at, revoked_at} (RFC 3339, revoked_at
    /// null while live). Tokens are never shown. Exit 0, or 2 when the data directory or
    /// database cannot be opened.
    List {
        /// The service's data directory.
        #[arg(long, default_value = "countersign-data")]
        data_dir: PathBuf,
        /// The service's database URL, when it is not the SQLite database in DATA_DIR.
        #[arg(long, value_name = "URL")]
        database: Option<String>,
        /// Print a JSON array instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Revoke a gateway: its token stops working.
    ///
    /// A running service (every replica) refuses the token with 401 within about half a
    /// second. The approvals the gateway created stay its own: no other gateway can read them.
    ///
    /// Exit codes: 0 revoked, 1 already revoked (nothing changed), 2 no gateway of that name or
    /// unusable input (no data directory, database unreachable).
    Revoke {
        /// The gateway's name, as `gateway list` prints it.
        name: String,
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
    /// The invite is written into the service's database (--database, else the config's
    /// `database`, else the SQLite database in DATA_DIR), so it works whether the service is
    /// running or stopped, and every replica sharing a PostgreSQL database finds it. Give the
    /// link to the approver over a channel you trust: whoever opens it first enrolls a key that
    /// can approve as PRINCIPAL. See docs/OPERATIONS.md.
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
        /// The service's database URL (default: the config's `database`, else the SQLite
        /// database in DATA_DIR). Replicas on PostgreSQL need the invite there.
        #[arg(long, value_name = "URL")]
        database: Option<String>,
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
        Command::Mcp { command } => mcp::run(command),
        Command::Serve {
            listen,
            data_dir,
            config,
            database,
            log_format,
        } => {
            logging::install(log_format)?;
            serve(listen, data_dir, config, database)
        }
        Command::Audit {
            command:
                AuditCommand::Verify {
                    file,
                    key,
                    checkpoint,
                    json,
                    config,
                    rp_id,
                    origin,
                    registry,
                    threads,
                    witness_key,
                    quorum,
                    floor,
                    interposer_log,
                    interposer_key,
                },
        } => match evidence_check(config, rp_id, origin, registry, threads) {
            Ok(check) => audit_verify(
                &file,
                &key,
                &checkpoint,
                json,
                &check,
                &Witnessing {
                    keys: witness_key,
                    quorum,
                },
                floor,
                interposer_log.zip(interposer_key),
            ),
            Err(e) => {
                eprintln!("countersign: {e:#}");
                Ok(EXIT_UNUSABLE)
            }
        },
        Command::Audit {
            command: AuditCommand::Prove { command },
        } => Ok(proofs::prove(command)),
        Command::Witness {
            command:
                WitnessCommand::Serve {
                    listen,
                    key,
                    log_key,
                    state_dir,
                },
        } => proofs::witness_serve(listen, &key, &log_key, &state_dir),
        Command::Witness {
            command: WitnessCommand::Keygen { name, out },
        } => proofs::witness_keygen(&name, &out),
        Command::Audit {
            command:
                AuditCommand::Recheck {
                    file,
                    key,
                    config,
                    json,
                },
        } => recheck::run(&file, &key, &config, json),
        Command::Registry {
            command: RegistryCommand::Export { data_dir, database },
        } => registry_export(&data_dir, database.as_deref()),
        Command::Credential {
            command:
                CredentialCommand::List {
                    data_dir,
                    database,
                    json,
                },
        } => credential_list(&data_dir, database.as_deref(), json),
        Command::Credential {
            command:
                CredentialCommand::Revoke {
                    credential_id,
                    reason,
                    data_dir,
                    database,
                },
        } => credential_revoke(&credential_id, &reason, &data_dir, database.as_deref()),
        Command::Preauth { command } => preauth::run(command),
        Command::Gateway {
            command:
                GatewayCommand::Add {
                    name,
                    data_dir,
                    database,
                },
        } => gateway_add(&name, &data_dir, database.as_deref()),
        Command::Gateway {
            command:
                GatewayCommand::List {
                    data_dir,
                    database,
                    json,
                },
        } => gateway_list(&data_dir, database.as_deref(), json),
        Command::Gateway {
            command:
                GatewayCommand::Revoke {
                    name,
                    data_dir,
                    database,
                },
        } => gateway_revoke(&name, &data_dir, database.as_deref()),
        Command::Enroll {
            command:
                EnrollCommand::Invite {
                    principal,
                    group,
                    data_dir,
                    config,
                    expires_in,
                    public_url,
                    database,
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
                    database,
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

/// What `audit verify` re-verifies the Decisions' evidence under.
fn evidence_check(
    config: Option<PathBuf>,
    rp_id: Option<String>,
    origins: Vec<String>,
    registry: Option<PathBuf>,
    threads: usize,
) -> anyhow::Result<countersign_server::audit::EvidenceCheck> {
    use anyhow::Context as _;
    let mut config = match config {
        Some(path) => countersign_server::config::Config::from_file(&path)
            .with_context(|| format!("reading {}", path.display()))?,
        None => countersign_server::config::Config::default(),
    };
    if let Some(rp_id) = rp_id {
        config.rp_id = rp_id;
    }
    if !origins.is_empty() {
        config.origins = origins;
    }
    let registry = match registry {
        Some(path) => {
            let bytes =
                std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
            Some(
                countersign::CredentialRegistry::from_json(&bytes)
                    .with_context(|| format!("registry {}", path.display()))?,
            )
        }
        None => None,
    };
    Ok(countersign_server::audit::EvidenceCheck {
        policy: config.policy(&config.default_tool, None),
        tools: config
            .tools
            .iter()
            .map(|rule| (rule.name.clone(), config.policy(rule, None)))
            .collect(),
        registry,
        threads,
    })
}

/// `audit verify --witness-key W... --quorum K`.
struct Witnessing {
    keys: Vec<String>,
    quorum: Option<usize>,
}

#[allow(clippy::too_many_arguments)]
fn audit_verify(
    path: &PathBuf,
    key: &str,
    checkpoints: &[PathBuf],
    json: bool,
    check: &countersign_server::audit::EvidenceCheck,
    witnessing: &Witnessing,
    floor: bool,
    interposer: Option<(PathBuf, String)>,
) -> anyhow::Result<u8> {
    let witnesses = match proofs::witness_keys(&witnessing.keys) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("countersign: {e:#}");
            return Ok(EXIT_UNUSABLE);
        }
    };
    let quorum = witnessing.quorum.unwrap_or(witnesses.len());
    if quorum > witnesses.len() || (quorum > 0 && checkpoints.is_empty()) {
        eprintln!(
            "countersign: --quorum {quorum} needs at least {quorum} --witness-key and a --checkpoint"
        );
        return Ok(EXIT_UNUSABLE);
    }
    let Some(key) = proofs::service_key(key) else {
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
    // Every checkpoint must verify before the log is judged: a forged or unreadable checkpoint
    // is unusable input, not evidence against the log.
    let mut verified = Vec::with_capacity(checkpoints.len());
    let mut cosigned = Vec::with_capacity(checkpoints.len());
    for cp in checkpoints {
        let text = match std::fs::read_to_string(cp) {
            Ok(text) => text,
            Err(e) => {
                eprintln!("countersign: reading checkpoint {}: {e}", cp.display());
                return Ok(EXIT_UNUSABLE);
            }
        };
        match countersign_server::audit::Checkpoint::verify(&text, &key, None) {
            Ok(c) => {
                let found = countersign_server::audit::note::valid_cosignatures(&text, &witnesses)
                    .unwrap_or_default();
                cosigned.push((cp.clone(), c.size, found));
                verified.push(c);
            }
            Err(e) => {
                eprintln!("countersign: checkpoint {} is unusable: {e}", cp.display());
                return Ok(EXIT_UNUSABLE);
            }
        }
    }
    // The interposer's log, read and keyed before anything is judged (unusable input is exit 2).
    let interposer = match interposer {
        None => None,
        Some((path, ikey)) => {
            let Some(ikey) = proofs::service_key(&ikey) else {
                eprintln!(
                    "countersign: --interposer-key is not a base64url Ed25519 public key (or a \
                     file holding one)"
                );
                return Ok(EXIT_UNUSABLE);
            };
            match read_input(&path) {
                Ok(ibytes) => Some((ibytes, ikey)),
                Err(e) => {
                    eprintln!("countersign: {e:#}");
                    return Ok(EXIT_UNUSABLE);
                }
            }
        }
    };
    let started = std::time::Instant::now();
    let mut report = countersign_server::audit::verify_log_with(&bytes, &key, Some(check));
    let took = started.elapsed();
    for c in &verified {
        report.check_checkpoint(&bytes, c);
    }
    for (cp, size, found) in &cosigned {
        if witnesses.is_empty() {
            continue;
        }
        let names: Vec<&str> = found.iter().map(|(n, _)| n.as_str()).collect();
        let (class, code) = if found.len() >= quorum {
            (
                countersign_server::audit::IssueClass::Informational,
                "checkpoint_witnessed",
            )
        } else {
            (
                countersign_server::audit::IssueClass::Violation,
                "checkpoint_no_quorum",
            )
        };
        report.issues.push(countersign_server::audit::AuditIssue {
            line: usize::try_from(*size).unwrap_or(usize::MAX),
            class,
            code,
            detail: format!(
                "checkpoint {} carries {} valid cosignature(s) of the {} witness key(s) given \
                 ({}), quorum {quorum}",
                cp.display(),
                found.len(),
                witnesses.len(),
                if names.is_empty() {
                    "none".to_owned()
                } else {
                    names.join(", ")
                }
            ),
            reason_code: None,
        });
    }
    if floor {
        proofs::print_floor(&bytes, &key, check, took);
    }
    let mut out = std::io::stdout().lock();
    if let Some((ibytes, ikey)) = interposer {
        let ireport = countersign_server::audit::verify_log(&ibytes, &ikey);
        let cross = countersign_server::audit::cross_check(&bytes, &ibytes);
        let valid = report.is_valid() && ireport.is_valid() && cross.is_valid();
        if json {
            let all = serde_json::json!({
                "valid": valid,
                "service": report,
                "interposer": ireport,
                "cross_check": cross,
            });
            writeln!(out, "{all}")?;
        } else {
            print_issues(&mut out, "service ", &report)?;
            print_issues(&mut out, "interposer ", &ireport)?;
            for i in &cross.issues {
                let class = match i.class {
                    countersign_server::audit::IssueClass::Violation => "VIOLATION",
                    countersign_server::audit::IssueClass::Informational => "info",
                };
                let at = |n: Option<usize>| n.map_or_else(|| "-".to_owned(), |n| n.to_string());
                writeln!(
                    out,
                    "cross-check: {class} {} (approval {}, interposer line {}, service line {}): {}",
                    i.code,
                    i.approval_id.as_deref().unwrap_or("-"),
                    at(i.interposer_line),
                    at(i.service_line),
                    i.detail
                )?;
            }
            let word = |ok: bool| if ok { "valid" } else { "INVALID" };
            writeln!(
                out,
                "service log {}: {} line(s), head {}",
                word(report.is_valid()),
                report.lines,
                report.head
            )?;
            writeln!(
                out,
                "interposer log {}: {} line(s), head {}",
                word(ireport.is_valid()),
                ireport.lines,
                ireport.head
            )?;
            writeln!(
                out,
                "cross-check {}: {} executed held call(s), {} grant(s) of this interposer",
                word(cross.is_valid()),
                cross.executed,
                cross.grants
            )?;
            writeln!(out, "{}", word(valid))?;
        }
        return Ok(if valid { EXIT_ALLOW } else { EXIT_DENY });
    }
    if json {
        writeln!(out, "{}", serde_json::to_string(&report)?)?;
    } else {
        for issue in &report.issues {
            let class = match issue.class {
                countersign_server::audit::IssueClass::Violation => "VIOLATION",
                countersign_server::audit::IssueClass::Informational => "info",
            };
            match issue.reason_code {
                Some(reason) => writeln!(
                    out,
                    "line {}: {class} {} ({reason}): {}",
                    issue.line, issue.code, issue.detail
                )?,
                None => writeln!(
                    out,
                    "line {}: {class} {}: {}",
                    issue.line, issue.code, issue.detail
                )?,
            }
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

/// The issues of one log, each prefixed with which log it is (`audit verify --interposer-log`).
fn print_issues(
    out: &mut impl std::io::Write,
    which: &str,
    report: &countersign_server::audit::AuditReport,
) -> std::io::Result<()> {
    for issue in &report.issues {
        let class = match issue.class {
            countersign_server::audit::IssueClass::Violation => "VIOLATION",
            countersign_server::audit::IssueClass::Informational => "info",
        };
        let reason = issue
            .reason_code
            .map(|r| format!(" ({r})"))
            .unwrap_or_default();
        writeln!(
            out,
            "{which}line {}: {class} {}{reason}: {}",
            issue.line, issue.code, issue.detail
        )?;
    }
    Ok(())
}

/// Open the store of a data directory (its service key seals any audit line written).
fn open_store(
    data_dir: &std::path::Path,
    database: Option<&str>,
) -> anyhow::Result<std::sync::Arc<dyn countersign_server::store::Store>> {
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
    Ok(url.open(sealer, countersign_server::config::Durability::Normal)?)
}

fn registry_export(data_dir: &std::path::Path, database: Option<&str>) -> anyhow::Result<u8> {
    let store = open_store(data_dir, database)?;
    let doc = countersign::RegistryDocument {
        credentials: store.credentials()?,
    };
    println!("{}", serde_json::to_string_pretty(&doc)?);
    Ok(EXIT_ALLOW)
}

/// One row of `credential list`.
#[derive(serde::Serialize)]
struct CredentialRow {
    principal: String,
    credential_id: String,
    algorithm: &'static str,
    aaguid: Option<String>,
    attestation_format: Option<String>,
    chain_verified: bool,
    revoked: bool,
}

fn algorithm_name(public_key: &[u8]) -> &'static str {
    use countersign::webauthn::{CoseAlgorithm, CosePublicKey};
    match CosePublicKey::from_cose(public_key).map(|k| k.algorithm()) {
        Ok(CoseAlgorithm::Es256) => "ES256",
        Ok(CoseAlgorithm::Es384) => "ES384",
        Ok(CoseAlgorithm::EdDsa) => "EdDSA",
        Ok(CoseAlgorithm::Rs256) => "RS256",
        Ok(_) => "other",
        Err(_) => "unsupported",
    }
}

fn credential_list(
    data_dir: &std::path::Path,
    database: Option<&str>,
    json: bool,
) -> anyhow::Result<u8> {
    let store = open_store(data_dir, database)?;
    let rows: Vec<CredentialRow> = store
        .credentials()?
        .into_iter()
        .map(|c| CredentialRow {
            algorithm: algorithm_name(&c.public_key),
            credential_id: countersign::b64::encode(&c.credential_id),
            aaguid: c.aaguid.map(|a| a.to_string()),
            attestation_format: c.attestation.as_ref().map(|a| a.format.clone()),
            chain_verified: c.attestation.as_ref().is_some_and(|a| a.chain_verified),
            revoked: c.revoked,
            principal: c.principal,
        })
        .collect();
    let mut out = std::io::stdout().lock();
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&rows)?)?;
        return Ok(EXIT_ALLOW);
    }
    if rows.is_empty() {
        eprintln!("countersign: no credential enrolled");
        return Ok(EXIT_ALLOW);
    }
    let table: Vec<[String; 6]> = rows
        .iter()
        .map(|r| {
            let attestation = match (&r.attestation_format, r.chain_verified) {
                (Some(format), true) => format!("{format} verified"),
                (Some(format), false) => format.clone(),
                (None, _) => "-".to_owned(),
            };
            [
                r.principal.clone(),
                r.credential_id.clone(),
                r.algorithm.to_owned(),
                r.aaguid.clone().unwrap_or_else(|| "-".to_owned()),
                attestation,
                if r.revoked { "REVOKED" } else { "active" }.to_owned(),
            ]
        })
        .collect();
    let header = [
        "PRINCIPAL",
        "CREDENTIAL ID",
        "ALG",
        "AAGUID",
        "ATTESTATION",
        "STATUS",
    ];
    let mut widths = header.map(str::len);
    for row in &table {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: [&str; 6]| {
        let padded: Vec<String> = cells
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        padded.join("  ").trim_end().to_owned()
    };
    writeln!(out, "{}", line(header))?;
    for row in &table {
        writeln!(out, "{}", line(row.each_ref().map(String::as_str)))?;
    }
    Ok(EXIT_ALLOW)
}

fn credential_revoke(
    credential_id: &str,
    reason: &str,
    data_dir: &std::path::Path,
    database: Option<&str>,
) -> anyhow::Result<u8> {
    use countersign_server::store::RevokeOutcome;
    let Ok(id) = countersign::b64::decode(credential_id.trim()) else {
        eprintln!(
            "countersign: {credential_id:?} is not a base64url credential id (see `countersign \
             credential list`)"
        );
        return Ok(EXIT_UNUSABLE);
    };
    let reason = reason.trim();
    if reason.is_empty() {
        eprintln!("countersign: --reason must say why (it is recorded in the audit log)");
        return Ok(EXIT_UNUSABLE);
    }
    let store = open_store(data_dir, database)?;
    let now = countersign_server::clock::to_ms(countersign_server::Clock::now(
        &countersign_server::SystemClock,
    ));
    let encoded = countersign::b64::encode(&id);
    Ok(
        match countersign_server::store::revoke(store.as_ref(), &id, reason, now)? {
            RevokeOutcome::Revoked => {
                eprintln!(
                    "countersign: revoked {encoded}; a running service refuses it within a \
                     second, and the audit log records the revocation"
                );
                EXIT_ALLOW
            }
            RevokeOutcome::AlreadyRevoked => {
                eprintln!("countersign: {encoded} was already revoked; nothing changed");
                EXIT_DENY
            }
            RevokeOutcome::NotFound => {
                eprintln!(
                    "countersign: no enrolled credential has id {encoded} (see `countersign \
                     credential list`)"
                );
                EXIT_UNUSABLE
            }
        },
    )
}

/// The system clock, in ms since the epoch (what the service stores).
fn now_ms() -> i64 {
    countersign_server::clock::to_ms(countersign_server::Clock::now(
        &countersign_server::SystemClock,
    ))
}

fn gateway_add(
    name: &str,
    data_dir: &std::path::Path,
    database: Option<&str>,
) -> anyhow::Result<u8> {
    use countersign_server::gateways::{self, GatewayError};
    // A bad name is refused before the database is opened.
    if let Err(e) = gateways::check_name(name) {
        eprintln!("countersign: {e}");
        return Ok(EXIT_UNUSABLE);
    }
    let store = open_store(data_dir, database)?;
    match gateways::add(store.as_ref(), name, now_ms()) {
        Ok(token) => {
            // The one line on stdout: scripts capture it (`> NAME.token`).
            println!("{token}");
            eprintln!(
                "countersign: gateway {name} added; the token above is shown once (only its \
                 SHA-256 is stored). Send it as Authorization: Bearer TOKEN."
            );
            Ok(EXIT_ALLOW)
        }
        Err(GatewayError::NameTaken(_)) => {
            eprintln!(
                "countersign: a gateway named {name} exists already (see `countersign gateway \
                 list`); nothing changed"
            );
            Ok(EXIT_DENY)
        }
        Err(e) => Err(e.into()),
    }
}

/// One row of `gateway list`.
#[derive(serde::Serialize)]
struct GatewayRow {
    name: String,
    created_at: String,
    revoked_at: Option<String>,
}

fn gateway_list(
    data_dir: &std::path::Path,
    database: Option<&str>,
    json: bool,
) -> anyhow::Result<u8> {
    use countersign_server::clock::{from_ms, rfc3339};
    let store = open_store(data_dir, database)?;
    let rows: Vec<GatewayRow> = store
        .gateways()?
        .into_iter()
        .map(|g| GatewayRow {
            name: g.name,
            created_at: rfc3339(from_ms(g.created_at)),
            revoked_at: g.revoked_at.map(|t| rfc3339(from_ms(t))),
        })
        .collect();
    let mut out = std::io::stdout().lock();
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&rows)?)?;
        return Ok(EXIT_ALLOW);
    }
    if rows.is_empty() {
        eprintln!("countersign: no gateway added (countersign gateway add NAME)");
        return Ok(EXIT_ALLOW);
    }
    let width = rows.iter().map(|r| r.name.len()).max().unwrap_or(0).max(4);
    let created = rows
        .iter()
        .map(|r| r.created_at.len())
        .max()
        .unwrap_or(0)
        .max(7);
    writeln!(out, "{:<width$}  {:<created$}  REVOKED", "NAME", "CREATED")?;
    for r in &rows {
        writeln!(
            out,
            "{:<width$}  {:<created$}  {}",
            r.name,
            r.created_at,
            r.revoked_at.as_deref().unwrap_or("-")
        )?;
    }
    Ok(EXIT_ALLOW)
}

fn gateway_revoke(
    name: &str,
    data_dir: &std::path::Path,
    database: Option<&str>,
) -> anyhow::Result<u8> {
    use countersign_server::store::RevokeOutcome;
    let store = open_store(data_dir, database)?;
    Ok(
        match countersign_server::gateways::revoke(store.as_ref(), name, now_ms())? {
            RevokeOutcome::Revoked => {
                eprintln!(
                    "countersign: gateway {name} revoked; a running service refuses its token \
                     within a second"
                );
                EXIT_ALLOW
            }
            RevokeOutcome::AlreadyRevoked => {
                eprintln!("countersign: gateway {name} was already revoked; nothing changed");
                EXIT_DENY
            }
            RevokeOutcome::NotFound => {
                eprintln!(
                    "countersign: no gateway is named {name:?} (see `countersign gateway list`)"
                );
                EXIT_UNUSABLE
            }
        },
    )
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
