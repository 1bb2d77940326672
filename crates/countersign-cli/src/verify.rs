//! `countersign verify`: one JSON verdict for a CASE file, or for a service's answer checked
//! against the action, the enrolled keys and the policy given one by one.

use crate::exit::{EXIT_ALLOW, EXIT_DENY, EXIT_UNUSABLE};
use crate::input::{BackendChoice, backend, read_input};
use crate::profiles::ProfileArgs;
use anyhow::Context as _;
use clap::Args;
use countersign::{Case, MemoryReplayState, ReplayState, Verdict, replay::danger::OfflineAudit};
use std::io::Write as _;
use std::path::PathBuf;

mod parts;

// No doc comment here: the subcommand's help is the doc comment of `Command::Verify`.
#[derive(Args, Debug)]
pub(crate) struct VerifyArgs {
    /// The CASE file, or - for stdin. Instead of a CASE, give --action, --result, --registry
    /// and --policy or --config.
    #[arg(required_unless_present = "action", conflicts_with_all = ["action", "result", "registry", "policy", "config", "now"])]
    case: Option<PathBuf>,
    /// The action about to run: {"profile", "fields", "tool"?}, or the approval request body
    /// the gateway sent ({"agent_id", "tool_name", "params", "profile"?, "server_id"?}), from
    /// which the fields are derived as the service derives them.
    #[arg(long, value_name = "FILE", requires_all = ["result", "registry"])]
    action: Option<PathBuf>,
    /// The service's answer for it: the ApprovalResult JSON of `GET /v1/approvals/{id}`
    /// (- for stdin).
    #[arg(long, value_name = "FILE")]
    result: Option<PathBuf>,
    /// The enrolled keys: a registry document ({"credentials": [...]}), or the URL of a
    /// service's published registry (`http://HOST:PORT/v1/registry`; a bare service URL means
    /// that path).
    #[arg(long, value_name = "FILE|URL")]
    registry: Option<String>,
    /// A gateway token file, when the service's registry is not published (401 without it).
    #[arg(long, value_name = "FILE", requires = "registry")]
    gateway_token_file: Option<PathBuf>,
    /// The verifier policy (JSON), as in a CASE.
    #[arg(long, value_name = "FILE", group = "trust")]
    policy: Option<PathBuf>,
    /// The service's configuration (TOML): the policy is the one the service applies to the
    /// action's tool (its rp_id, origins, approvers, assurance, ages and NFC rule).
    #[arg(long, value_name = "FILE", group = "trust")]
    config: Option<PathBuf>,
    /// With --config: the service's data directory, for group memberships granted by invites
    /// (read from its database, never written). Without it only the config's groups count.
    #[arg(long, value_name = "DIR", requires = "config")]
    data_dir: Option<PathBuf>,
    /// With --config and --data-dir: the database URL, when it is not the SQLite one in DIR.
    #[arg(long, value_name = "URL", requires = "data_dir")]
    database: Option<String>,
    /// The verifier's clock (RFC 3339). Default: now. Freshness and expiry are judged against
    /// it; to look at an old answer, prefer --audit.
    #[arg(long, value_name = "RFC3339")]
    now: Option<String>,
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
}

pub(crate) fn run(args: &VerifyArgs) -> anyhow::Result<u8> {
    let profiles = args.profiles.registry()?;
    let bytes = match case_document(args) {
        Ok(bytes) => bytes,
        Err(e) => {
            eprintln!("countersign: {e:#}");
            return Ok(EXIT_UNUSABLE);
        }
    };
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
    let backend = backend(args.backend)?;
    let mut enforcing = MemoryReplayState::new();
    let mut auditing = OfflineAudit::new();
    let replay: &mut dyn ReplayState = if args.audit {
        &mut auditing
    } else {
        &mut enforcing
    };
    let verdict: Verdict = case.verify_with(backend, replay);
    let json = if args.pretty {
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

/// The CASE document: the file given, or one assembled from the parts given one by one (so
/// both go through the same admission, [`Case::from_json`]).
fn case_document(args: &VerifyArgs) -> anyhow::Result<Vec<u8>> {
    if let Some(case) = &args.case {
        return read_input(case);
    }
    let (Some(action), Some(result), Some(registry)) = (&args.action, &args.result, &args.registry)
    else {
        anyhow::bail!("give a CASE file, or --action, --result and --registry");
    };
    let trust = match (&args.policy, &args.config) {
        (Some(policy), None) => parts::Trust::Policy(read_input(policy)?),
        (None, Some(config)) => parts::Trust::Config {
            path: config.clone(),
            members: parts::Members {
                data_dir: args.data_dir.clone(),
                database: args.database.clone(),
            },
        },
        _ => anyhow::bail!(
            "--action needs the verifier's rules: --policy FILE, or --config FILE (the service's)"
        ),
    };
    let action = parts::action(&read_input(action)?)?;
    let now = match &args.now {
        Some(now) => now.clone(),
        None => parts::now_rfc3339()?,
    };
    parts::assemble(&parts::Parts {
        policy: parts::policy(&trust, &action)?,
        result: read_input(result)?,
        registry: parts::registry(registry, args.gateway_token_file.as_deref())?,
        action,
        now,
    })
}
