//! `countersign op-hash`: the op_hash of a `{profile, decision, fields}` document.

use crate::exit::{EXIT_ALLOW, EXIT_UNUSABLE};
use crate::profiles::ProfileArgs;
use anyhow::Context as _;
use clap::Args;
use std::io::Read as _;

// No doc comment here: the subcommand's help is the doc comment of `Command::OpHash`.
#[derive(Args, Debug)]
pub(crate) struct OpHashArgs {
    /// Print lowercase hex instead of base64url.
    #[arg(long)]
    hex: bool,
    #[command(flatten)]
    profiles: ProfileArgs,
}

pub(crate) fn run(args: &OpHashArgs) -> anyhow::Result<u8> {
    let registry = args.profiles.registry()?;
    let mut input = Vec::new();
    std::io::stdin()
        .read_to_end(&mut input)
        .context("reading stdin")?;
    match countersign::op_hash_document(&registry, &input) {
        Ok(h) => {
            let text = if args.hex {
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
