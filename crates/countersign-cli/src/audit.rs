//! `countersign audit`: verify a log, download it as an auditor, check Merkle proofs, replay a
//! log under a new config.

use crate::exit::{EXIT_ALLOW, EXIT_DENY, EXIT_UNUSABLE};
use crate::input::read_input;
use crate::{proofs, recheck};
use anyhow::Context as _;
use clap::Subcommand;
use std::io::Write as _;
use std::path::PathBuf;

#[derive(Subcommand, Debug)]
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
                            curl -s http://127.0.0.1:8080/v1/audit/checkpoint > today.cp\n  \
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
        after_help = "Example:\n  curl -s 'https://approvals.example/v1/audit/proof/inclusion?seq=42&size=100' \
                            > p.json\n  countersign audit prove inclusion --proof p.json \
                            --line line42.json --checkpoint cp100.txt --key service-key.pub\n\
                            With the line in the proof (the line's gateway, or an auditor):\n  \
                            curl -s -H \"Authorization: Bearer $(cat billing-agent.token)\" \
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

/// What `audit verify` re-verifies the Decisions' evidence under.
fn evidence_check(
    config: Option<PathBuf>,
    rp_id: Option<String>,
    origins: Vec<String>,
    registry: Option<PathBuf>,
    threads: usize,
) -> anyhow::Result<countersign_server::audit::EvidenceCheck> {
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

/// `audit verify --interposer-log`: the interposer's log verified under its own key, then the
/// two logs cross-checked (SPEC §12.2). Exit 0 all three hold, 1 any violation.
fn cross_checked(
    out: &mut impl std::io::Write,
    json: bool,
    bytes: &[u8],
    report: &countersign_server::audit::AuditReport,
    ibytes: &[u8],
    ikey: &ed25519_dalek::VerifyingKey,
) -> anyhow::Result<u8> {
    let ireport = countersign_server::audit::verify_log(ibytes, ikey);
    let cross = countersign_server::audit::cross_check(bytes, ibytes);
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

fn class_word(class: countersign_server::audit::IssueClass) -> &'static str {
    match class {
        countersign_server::audit::IssueClass::Violation => "VIOLATION",
        countersign_server::audit::IssueClass::Informational => "info",
    }
}

/// The issues of one log, each prefixed with which log it is (empty for a lone log).
fn print_issues(
    out: &mut impl std::io::Write,
    which: &str,
    report: &countersign_server::audit::AuditReport,
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
