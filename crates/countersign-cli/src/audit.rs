//! `countersign audit`: verify a log, download it as an auditor, check Merkle proofs, replay a
//! log under a new config.

use crate::exit::{EXIT_ALLOW, EXIT_DENY, EXIT_UNUSABLE};
use crate::input::read_input;
use crate::{proofs, recheck};
use anyhow::Context as _;
use clap::Subcommand;
use std::io::Write as _;
use std::path::{Path, PathBuf};

#[derive(Subcommand, Debug)]
#[allow(
    clippy::large_enum_variant,
    reason = "parsed once per process: boxing the flags buys nothing"
)]
pub(crate) enum AuditCommand {
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
        /// The audit log (JSON lines), or - for stdin: the service's audit file, or what
        /// `countersign audit fetch` downloads with an auditor token.
        file: PathBuf,
        /// The service's Ed25519 public key: base64url, or a file containing it
        /// (DATA_DIR/service-key.pub).
        #[arg(long)]
        key: String,
        /// A signed checkpoint file (the note text) the log must contain; repeatable.
        #[arg(long, value_name = "CP")]
        checkpoint: Vec<PathBuf>,
        /// Verify incrementally from a signed checkpoint (the note text) of this log that an
        /// earlier `audit verify` already checked: the log must begin with exactly the lines
        /// the checkpoint signed (else the violation checkpoint_inconsistent: a line before it
        /// was changed, or the checkpoint is another log's or another size's). Those lines are
        /// read again for the state later lines refer to, but their signatures and evidence are
        /// not re-verified and their findings are not reported; every line after them is
        /// verified in full.
        #[arg(long, value_name = "CP")]
        from: Option<PathBuf>,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        /// The service's TOML configuration: rp_id, origins and each tool's user-verification
        /// rule, under which every Decision's evidence is re-verified. Default: the one the
        /// service last started with, and the origins it took from its listen address, as
        /// recorded in its data directory (see --data-dir).
        #[arg(long, value_name = "TOML")]
        config: Option<PathBuf>,
        /// The relying party id (overrides --config; default: the service's, else localhost).
        #[arg(long)]
        rp_id: Option<String>,
        /// An allowed origin; repeatable (overrides --config's origins).
        #[arg(long)]
        origin: Vec<String>,
        /// The service's data directory, whose DATA_DIR/serve.json (written by `countersign
        /// serve`) gives the config and origins the evidence is judged under. Default: the
        /// directory of --key, else of FILE, when it holds that record. A log with Decisions and
        /// no settings from any of these is unusable input (exit 2), never judged under a guess.
        #[arg(long, value_name = "DIR")]
        data_dir: Option<PathBuf>,
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
        /// A C2SP tlog-policy file (`log`, `witness`, `group` and `quorum` lines), instead of
        /// --witness-key and --quorum: each --checkpoint must be signed by one of its logs (when
        /// it lists any; KEY must sign it too) and carry cosignatures meeting its quorum
        /// (checkpoint_witnessed, else the violation checkpoint_no_quorum). A malformed policy,
        /// or a checkpoint none of its logs signed, is unusable input (exit 2).
        #[arg(long, value_name = "FILE", conflicts_with_all = ["witness_key", "quorum"])]
        policy: Option<PathBuf>,
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
    /// Download the whole audit log with an auditor token (GET /v1/audit/lines, page by page).
    ///
    /// The log names every gateway's tool arguments, agents, approvers and enrolled
    /// credentials, so the service hands it only to auditors: `countersign auditor add NAME`
    /// prints a token; put it in a file only you can read. A gateway token is refused. The
    /// lines are written exactly as the service holds them, so the output is the log file that
    /// `audit verify` and `audit recheck` read; verify it against a checkpoint you fetched
    /// earlier (or one a gateway kept) to know it is the log the service signed.
    ///
    /// Exit codes: 0 downloaded (the count on stderr), 2 unusable (unreadable token file,
    /// service unreachable, token refused).
    #[command(after_help = "Example:\n  \
                            curl -sS --fail-with-body http://127.0.0.1:8080/v1/audit/checkpoint > today.cp\n  \
                            countersign audit fetch --service http://127.0.0.1:8080 \
                            --auditor-token-file compliance.token --out audit.jsonl\n  \
                            countersign audit verify audit.jsonl --key service-key.pub \
                            --checkpoint today.cp")]
    Fetch {
        /// The service's base URL (as `countersign mcp --service`; plain HTTP: reach a remote
        /// service through a TLS tunnel).
        #[arg(long, value_name = "URL")]
        service: String,
        /// A file holding the auditor token `countersign auditor add NAME` printed.
        #[arg(long, value_name = "FILE")]
        auditor_token_file: PathBuf,
        /// Start after this line (to extend a copy of the first N lines); default: the first.
        #[arg(long, value_name = "N", default_value_t = 0)]
        after: u64,
        /// Write to this file instead of stdout.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
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
pub(crate) enum ProveCommand {
    /// Check that a line is in the log a checkpoint signed.
    ///
    /// PROOF is the JSON of GET /v1/audit/proof/inclusion?seq=N&size=S (S the checkpoint's
    /// size). The line's leaf hash, SHA-256(0x00 || line), is walked up the audit path to a root
    /// that must equal the checkpoint's, and must equal the proof's `leaf_hash`.
    ///
    /// The proof anyone may fetch carries hashes only, never the line: pass the line with
    /// --line (the copy you kept, or one `audit fetch` downloaded). A proof fetched with
    /// &include=line carries the line; the service gives it to the gateway whose approval the
    /// line records (its gateway token) and to auditors (an auditor token), and --line then
    /// defaults to it.
    #[command(
        after_help = "Example:\n  curl -sS --fail-with-body 'https://approvals.example/v1/audit/proof/inclusion?seq=42&size=100' \
                            > p.json\n  countersign audit prove inclusion --proof p.json \
                            --line line42.json --checkpoint cp100.txt --key service-key.pub\n\
                            With the line in the proof (the line's gateway, or an auditor):\n  \
                            curl -sS --fail-with-body -H \"Authorization: Bearer $(cat billing-agent.token)\" \
                            'https://approvals.example/v1/audit/proof/inclusion?seq=42&size=100&include=line' \
                            > p.json"
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
        /// The line to prove (a file holding it); default: the proof's `line`, which only a
        /// proof fetched with &include=line has.
        #[arg(long)]
        line: Option<PathBuf>,
    },
    /// Check a C2SP tlog-proof@v1 offline: the `tlog_proof` of a grant receipt or of a settled
    /// GET /v1/approvals/{id}, or any tlog-proof of this log.
    ///
    /// The steps of the spec, in order: the leaf is the audit line (--line, else the proof's
    /// `extra`, which is believed only through the checks that follow); the checkpoint must be
    /// signed by a log of --policy (or, when it lists none, by --key); the policy's witnesses
    /// must meet its quorum; the audit path must lead from the line's leaf hash to the
    /// checkpoint's root. With --approval, the line must also record that approval.
    #[command(after_help = "Example:
  jq -r .tlog_proof receipt.json > grant.tlog-proof
                              countersign audit prove tlog grant.tlog-proof --policy audit.policy                             --approval apv_...")]
    Tlog {
        /// The tlog-proof file.
        proof: PathBuf,
        /// A C2SP tlog-policy file: trusted logs (the service's `checkpoint_vkey`), witnesses
        /// and quorum. Without it, --key is the log and no cosignature is required.
        #[arg(long, value_name = "FILE", required_unless_present = "key")]
        policy: Option<PathBuf>,
        /// The service's Ed25519 public key (base64url, or a file holding it), for a policy
        /// that lists no log (or instead of a policy).
        #[arg(long)]
        key: Option<String>,
        /// The line to prove (a file holding it); default: the proof's `extra`.
        #[arg(long)]
        line: Option<PathBuf>,
        /// The approval id the line must record.
        #[arg(long, value_name = "ID")]
        approval: Option<String>,
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

pub(crate) fn run(command: AuditCommand) -> anyhow::Result<u8> {
    match command {
        AuditCommand::Verify {
            file,
            key,
            checkpoint,
            from,
            json,
            config,
            rp_id,
            origin,
            data_dir,
            registry,
            threads,
            witness_key,
            quorum,
            policy,
            floor,
            interposer_log,
            interposer_key,
        } => match evidence_check(
            Settings {
                config,
                rp_id,
                origins: origin,
                data_dir: settings_dir(data_dir, &key, &file),
            },
            registry,
            threads,
        ) {
            Ok(check) => audit_verify(
                &file,
                &key,
                &Checkpoints {
                    contained: checkpoint,
                    from,
                },
                json,
                check.as_ref(),
                &Witnessing {
                    keys: witness_key,
                    quorum,
                    policy,
                },
                floor,
                interposer_log.zip(interposer_key),
            ),
            Err(e) => {
                eprintln!("countersign: {e:#}");
                Ok(EXIT_UNUSABLE)
            }
        },
        AuditCommand::Fetch {
            service,
            auditor_token_file,
            after,
            out,
        } => crate::fetch::run(&service, &auditor_token_file, after, out.as_deref()),
        AuditCommand::Prove { command } => Ok(proofs::prove(command)),
        AuditCommand::Recheck {
            file,
            key,
            config,
            json,
        } => recheck::run(&file, &key, &config, json),
    }
}

/// Where `audit verify` takes the service's settings from.
struct Settings {
    config: Option<PathBuf>,
    rp_id: Option<String>,
    origins: Vec<String>,
    /// A data directory holding the record of the service's start, if one was given or found.
    data_dir: Option<PathBuf>,
}

/// `--data-dir`, else the directory of the key file or of the log when it holds the record
/// `countersign serve` writes (the usual `audit verify DATA/audit.jsonl --key DATA/…pub`).
fn settings_dir(explicit: Option<PathBuf>, key: &str, file: &Path) -> Option<PathBuf> {
    if explicit.is_some() {
        return explicit;
    }
    let key = Path::new(key);
    let beside_key = key.is_file().then(|| key.parent()).flatten();
    let beside_log = (file != Path::new("-")).then(|| file.parent()).flatten();
    [beside_key, beside_log]
        .into_iter()
        .flatten()
        .map(|dir| {
            if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                dir
            }
        })
        .find(|dir| dir.join(countersign_server::address::LAST_START).is_file())
        .map(Path::to_owned)
}

/// What `audit verify` re-verifies the Decisions' evidence under; `None` when nothing says what
/// the service's origins are (then only a log without Decisions can be verified).
fn evidence_check(
    settings: Settings,
    registry: Option<PathBuf>,
    threads: usize,
) -> anyhow::Result<Option<countersign_audit::EvidenceCheck>> {
    let Settings {
        config,
        rp_id,
        origins,
        data_dir,
    } = settings;
    let mut config = match (config, &data_dir, origins.is_empty()) {
        // Origins given on the command line: nothing else is needed to judge them.
        (config, _, false) => match config {
            Some(path) => countersign_server::config::Config::from_file(&path)
                .with_context(|| format!("reading {}", path.display()))?,
            None => countersign_server::config::Config::default(),
        },
        (config, Some(dir), true) => {
            let (config, source) =
                countersign_server::address::service_config(dir, config.as_deref())?;
            eprintln!(
                "countersign: evidence judged under rp_id {}, origins {} (from {source})",
                config.rp_id,
                config.origins.join(" ")
            );
            config
        }
        (Some(path), None, true) => {
            countersign_server::address::service_config(Path::new("."), Some(&path))?.0
        }
        (None, None, true) => return Ok(None),
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
    Ok(Some(countersign_audit::EvidenceCheck {
        policy: config.policy(&config.default_tool, None),
        tools: config
            .tools
            .iter()
            .map(|rule| (rule.name.clone(), config.policy(rule, None)))
            .collect(),
        registry,
        threads,
    }))
}

/// `audit verify --checkpoint CP... --from CP`.
struct Checkpoints {
    contained: Vec<PathBuf>,
    from: Option<PathBuf>,
}

/// `audit verify --witness-key W... --quorum K`, or `--policy FILE`.
struct Witnessing {
    keys: Vec<String>,
    quorum: Option<usize>,
    policy: Option<PathBuf>,
}

#[allow(clippy::too_many_arguments)]
fn audit_verify(
    path: &PathBuf,
    key: &str,
    checkpoints: &Checkpoints,
    json: bool,
    check: Option<&countersign_audit::EvidenceCheck>,
    witnessing: &Witnessing,
    floor: bool,
    interposer: Option<(PathBuf, String)>,
) -> anyhow::Result<u8> {
    // Everything is read and checked as input before the log is judged: unusable input is
    // exit 2 (said on stderr), never evidence against the log.
    let Ok(input) = VerifyInput::read(path, key, checkpoints, check, witnessing, floor, interposer)
    else {
        return Ok(EXIT_UNUSABLE);
    };
    let options = countersign_audit::VerifyOptions {
        evidence: check,
        checkpoints: &input.checkpoints,
        from: input.from.as_ref(),
    };
    let started = std::time::Instant::now();
    let (report, bytes) = match input.log {
        Log::Whole(bytes) => (
            countersign_audit::verify_reader(bytes.as_slice(), &input.key, &options),
            bytes,
        ),
        Log::Stream(reader) => (
            countersign_audit::verify_reader(reader, &input.key, &options),
            Vec::new(),
        ),
    };
    let took = started.elapsed();
    let mut report = match report {
        Ok(report) => report,
        Err(e) => {
            eprintln!("countersign: reading {}: {e}", path.display());
            return Ok(EXIT_UNUSABLE);
        }
    };
    report.issues.extend(input.witnessed.findings());
    if floor {
        proofs::print_floor(&bytes, &input.key, check.map_or(0, |c| c.threads), took);
    }
    let mut out = std::io::stdout().lock();
    if let Some((ibytes, ikey)) = input.interposer {
        return cross_checked(&mut out, json, &bytes, &report, &ibytes, &ikey);
    }
    if json {
        writeln!(out, "{}", serde_json::to_string(&report)?)?;
    } else {
        print_issues(&mut out, "", &report)?;
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

/// Input `audit verify` could not use; the reason is already on stderr.
struct Unusable;

/// Say why on stderr.
fn unusable(why: impl std::fmt::Display) -> Unusable {
    eprintln!("countersign: {why}");
    Unusable
}

/// What `audit verify` judges, every part of it read and checked as input.
struct VerifyInput {
    key: ed25519_dalek::VerifyingKey,
    log: Log,
    /// `--checkpoint`s, each verified under the key.
    checkpoints: Vec<countersign_audit::Checkpoint>,
    /// `--from`, verified under the key.
    from: Option<countersign_audit::Checkpoint>,
    witnessed: Witnessed,
    /// `--interposer-log` and its key.
    interposer: Option<(Vec<u8>, ed25519_dalek::VerifyingKey)>,
}

impl VerifyInput {
    #[allow(clippy::too_many_arguments)]
    fn read(
        path: &PathBuf,
        key: &str,
        checkpoints: &Checkpoints,
        check: Option<&countersign_audit::EvidenceCheck>,
        witnessing: &Witnessing,
        floor: bool,
        interposer: Option<(PathBuf, String)>,
    ) -> Result<Self, Unusable> {
        let rule = WitnessRule::read(witnessing, checkpoints.contained.is_empty())?;
        let key = proofs::service_key(key).ok_or_else(|| {
            unusable("--key is not a base64url Ed25519 public key (or a file holding one)")
        })?;
        // The log is read as it is verified (memory grows with its approvals, not its bytes),
        // except for --floor and --interposer-log, which read it whole, and when the service's
        // origins are unknown (it is searched for Decisions first).
        let log = open_log(path, floor || interposer.is_some() || check.is_none())
            .map_err(|e| unusable(format!("{e:#}")))?;
        // A forged or unreadable checkpoint is unusable input, not evidence against the log.
        let mut witnessed = Witnessed {
            found: Vec::with_capacity(checkpoints.contained.len()),
            rule,
        };
        let mut verified = Vec::with_capacity(checkpoints.contained.len());
        for cp in &checkpoints.contained {
            let (c, text) = read_checkpoint(cp, &key).ok_or(Unusable)?;
            let found = witnessed.rule.judge(cp, &text)?;
            witnessed.found.push((cp.clone(), c.size, found));
            verified.push(c);
        }
        let from = match &checkpoints.from {
            None => None,
            Some(cp) => Some(read_checkpoint(cp, &key).ok_or(Unusable)?.0),
        };
        let interposer = match interposer {
            None => None,
            Some((path, ikey)) => {
                let ikey = proofs::service_key(&ikey).ok_or_else(|| {
                    unusable(
                        "--interposer-key is not a base64url Ed25519 public key (or a file \
                         holding one)",
                    )
                })?;
                let ibytes = read_input(&path).map_err(|e| unusable(format!("{e:#}")))?;
                Some((ibytes, ikey))
            }
        };
        // Without the service's origins, a log holding Decisions cannot be judged: say what to
        // give.
        if let (None, Log::Whole(bytes)) = (check, &log)
            && has_decisions(bytes)
        {
            return Err(unusable(
                "the log holds Decisions, whose evidence is re-verified under the service's \
                 rp_id and origins, and nothing says what they are: pass --data-dir (the \
                 service's data directory, where `countersign serve` records them), --config, or \
                 --rp-id and --origin",
            ));
        }
        Ok(Self {
            key,
            log,
            checkpoints: verified,
            from,
            witnessed,
            interposer,
        })
    }
}

/// What each `--checkpoint` must carry: `--quorum` of the `--witness-key`s, or a tlog-policy.
enum WitnessRule {
    /// No witness flag: nothing is required.
    None,
    /// `--witness-key W...` and `--quorum K`.
    Count {
        witnesses: Vec<countersign_audit::note::NoteVerifier>,
        quorum: usize,
    },
    /// `--policy FILE`.
    Policy(PathBuf, Box<countersign_audit::Policy>),
}

impl WitnessRule {
    fn read(witnessing: &Witnessing, no_checkpoint: bool) -> Result<Self, Unusable> {
        if let Some(path) = &witnessing.policy {
            let bytes = std::fs::read(path)
                .map_err(|e| unusable(format!("reading {}: {e}", path.display())))?;
            let policy = countersign_audit::Policy::parse(&bytes)
                .map_err(|e| unusable(format!("--policy {}: {e}", path.display())))?;
            if no_checkpoint {
                return Err(unusable("--policy needs a --checkpoint to judge"));
            }
            return Ok(Self::Policy(path.clone(), Box::new(policy)));
        }
        let witnesses =
            proofs::witness_keys(&witnessing.keys).map_err(|e| unusable(format!("{e:#}")))?;
        let quorum = witnessing.quorum.unwrap_or(witnesses.len());
        if quorum > witnesses.len() || (quorum > 0 && no_checkpoint) {
            return Err(unusable(format!(
                "--quorum {quorum} needs at least {quorum} --witness-key and a --checkpoint"
            )));
        }
        Ok(if witnesses.is_empty() {
            Self::None
        } else {
            Self::Count { witnesses, quorum }
        })
    }

    /// The witnesses whose cosignature on checkpoint `text` verifies, and whether they meet the
    /// rule. Under a policy that lists logs, a checkpoint none of them signed is unusable.
    fn judge(&self, cp: &Path, text: &str) -> Result<(Cosigners, bool), Unusable> {
        match self {
            Self::None => Ok((Vec::new(), true)),
            Self::Count { witnesses, quorum } => {
                let found = countersign_audit::note::valid_cosignatures(text, witnesses)
                    .unwrap_or_default();
                let met = found.len() >= *quorum;
                Ok((found, met))
            }
            Self::Policy(path, policy) => {
                if !policy.logs.is_empty() {
                    policy.check_log(text).map_err(|e| {
                        unusable(format!(
                            "checkpoint {} is not signed by a log of {}: {e}",
                            cp.display(),
                            path.display()
                        ))
                    })?;
                }
                let w = policy
                    .witnessing(text)
                    .map_err(|e| unusable(format!("checkpoint {}: {e}", cp.display())))?;
                Ok((w.cosigned, w.quorum_met))
            }
        }
    }

    /// The rule in words, for a finding.
    fn describe(&self) -> String {
        match self {
            Self::None => String::new(),
            Self::Count { witnesses, quorum } => {
                format!(
                    "of the {} witness key(s) given, quorum {quorum}",
                    witnesses.len()
                )
            }
            Self::Policy(path, _) => format!("under the policy {}", path.display()),
        }
    }
}

/// The witnesses' cosignatures found on each `--checkpoint`, against the rule.
struct Witnessed {
    rule: WitnessRule,
    /// Each checkpoint, its size, the witnesses whose cosignature on it verifies and whether
    /// they meet the rule.
    found: Vec<(PathBuf, u64, (Cosigners, bool))>,
}

/// The witnesses (name, cosignature timestamp) whose cosignature on a checkpoint verifies.
type Cosigners = Vec<(String, u64)>;

impl Witnessed {
    /// One finding per checkpoint: witnessed (quorum met) or not; none without a rule.
    fn findings(&self) -> Vec<countersign_audit::AuditIssue> {
        if matches!(self.rule, WitnessRule::None) {
            return Vec::new();
        }
        let rule = self.rule.describe();
        self.found
            .iter()
            .map(|(cp, size, (found, met))| {
                let names: Vec<&str> = found.iter().map(|(n, _)| n.as_str()).collect();
                let code = if *met {
                    countersign_audit::AuditCode::CheckpointWitnessed
                } else {
                    countersign_audit::AuditCode::CheckpointNoQuorum
                };
                countersign_audit::AuditIssue::new(
                    usize::try_from(*size).unwrap_or(usize::MAX),
                    code,
                    format!(
                        "checkpoint {} carries {} valid cosignature(s) ({}), {rule}",
                        cp.display(),
                        found.len(),
                        if names.is_empty() {
                            "none".to_owned()
                        } else {
                            names.join(", ")
                        }
                    ),
                )
            })
            .collect()
    }
}

/// The log to verify: read whole, or read line by line as it is verified.
enum Log {
    Whole(Vec<u8>),
    Stream(Box<dyn std::io::BufRead>),
}

/// Open the log at `path` (`-`: stdin), reading it whole when `whole`.
fn open_log(path: &PathBuf, whole: bool) -> anyhow::Result<Log> {
    if whole {
        return read_input(path).map(Log::Whole);
    }
    if path.as_os_str() == "-" {
        return Ok(Log::Stream(Box::new(std::io::stdin().lock())));
    }
    let file = std::fs::File::open(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(Log::Stream(Box::new(std::io::BufReader::with_capacity(
        1 << 16,
        file,
    ))))
}

/// A checkpoint file verified under `key`, and its text; `None` (after saying why on stderr)
/// when it is unreadable or not signed by `key`: unusable input, not evidence against the log.
fn read_checkpoint(
    cp: &PathBuf,
    key: &ed25519_dalek::VerifyingKey,
) -> Option<(countersign_audit::Checkpoint, String)> {
    let text = match std::fs::read_to_string(cp) {
        Ok(text) => text,
        Err(e) => {
            eprintln!("countersign: reading checkpoint {}: {e}", cp.display());
            return None;
        }
    };
    match countersign_audit::Checkpoint::verify(&text, key, None) {
        Ok(c) => Some((c, text)),
        Err(e) => {
            eprintln!("countersign: checkpoint {} is unusable: {e}", cp.display());
            None
        }
    }
}

/// `audit verify --interposer-log`: the interposer's log verified under its own key, then the
/// two logs cross-checked (SPEC §12.2). Exit 0 all three hold, 1 any violation.
fn cross_checked(
    out: &mut impl std::io::Write,
    json: bool,
    bytes: &[u8],
    report: &countersign_audit::AuditReport,
    ibytes: &[u8],
    ikey: &ed25519_dalek::VerifyingKey,
) -> anyhow::Result<u8> {
    let ireport = countersign_audit::verify_log(ibytes, ikey);
    let cross = countersign_audit::cross_check(bytes, ibytes);
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
        print_issues(out, "service ", report)?;
        print_issues(out, "interposer ", &ireport)?;
        for i in &cross.issues {
            let at = |n: Option<usize>| n.map_or_else(|| "-".to_owned(), |n| n.to_string());
            writeln!(
                out,
                "cross-check: {} {} (approval {}, interposer line {}, service line {}): {}",
                class_word(i.class),
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
    Ok(if valid { EXIT_ALLOW } else { EXIT_DENY })
}

fn class_word(class: countersign_audit::IssueClass) -> &'static str {
    match class {
        countersign_audit::IssueClass::Violation => "VIOLATION",
        countersign_audit::IssueClass::Informational => "info",
    }
}

/// The issues of one log, each prefixed with which log it is (empty for a lone log).
fn print_issues(
    out: &mut impl std::io::Write,
    which: &str,
    report: &countersign_audit::AuditReport,
) -> std::io::Result<()> {
    for issue in &report.issues {
        let reason = issue
            .reason_code
            .map(|r| format!(" ({r})"))
            .unwrap_or_default();
        writeln!(
            out,
            "{which}line {}: {} {}{reason}: {}",
            issue.line,
            class_word(issue.class),
            issue.code,
            issue.detail
        )?;
    }
    Ok(())
}

/// Whether any line of `log` is a Decision (`"kind": "decision"`), the one kind whose evidence
/// needs the service's settings. Only lines that mention the word are parsed.
fn has_decisions(log: &[u8]) -> bool {
    const WORD: &[u8] = b"\"decision\"";
    log.split(|b| *b == b'\n')
        .filter(|line| line.windows(WORD.len()).any(|w| w == WORD))
        .any(|line| {
            serde_json::from_slice::<serde_json::Value>(line)
                .ok()
                .is_some_and(|v| {
                    v.get("kind").and_then(serde_json::Value::as_str) == Some("decision")
                })
        })
}
