//! `countersign verify`: one JSON verdict for a CASE file.

use crate::exit::{EXIT_ALLOW, EXIT_DENY, EXIT_UNUSABLE};
use crate::input::{BackendChoice, backend, read_input};
use crate::profiles::ProfileArgs;
use anyhow::Context as _;
use clap::Args;
use countersign::{Case, MemoryReplayState, ReplayState, Verdict, replay::danger::OfflineAudit};
use std::io::Write as _;
use std::path::PathBuf;

// No doc comment here: the subcommand's help is the doc comment of `Command::Verify`.
#[derive(Args, Debug)]
pub(crate) struct VerifyArgs {
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
}

pub(crate) fn run(args: &VerifyArgs) -> anyhow::Result<u8> {
    let profiles = args.profiles.registry()?;
    let bytes = read_input(&args.case)?;
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
