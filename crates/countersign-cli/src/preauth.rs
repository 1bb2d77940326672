//! `countersign preauth`: the operator preauthorizations a service has stored.
//!
//! The definitions live in the service config (`[[preauthorizations]]`) and are reconciled into
//! the database at every start; these commands read that stored state (with uses consumed so
//! far) and disable an entry by hand, which a restart does not undo.

use crate::exit::{EXIT_ALLOW, EXIT_DENY, EXIT_UNUSABLE};
use crate::store::StoreArgs;
use crate::table::{self, Column};
use clap::Subcommand;
use countersign_server::clock::system_now_ms;
use countersign_server::clock::{from_ms, rfc3339};
use countersign_server::store::DisableOutcome;

#[derive(Subcommand, Debug)]
pub(crate) enum PreauthCommand {
    /// List the stored preauthorizations: slug, state, uses, expiry, digest.
    ///
    /// STATE is `active` (in the config and not disabled: it approves the calls it covers until
    /// it expires or runs out of uses), `disabled` (by `preauth disable`; kept across restarts),
    /// or `removed` (no longer in the config). The digest (base64url SHA-256 of the definition)
    /// is what approval results and audit lines carry. `--json` prints an array of {slug, state,
    /// uses, max_uses, expires_at, digest, definition}. Exit 0, or 2 when the data directory or
    /// database cannot be opened.
    List {
        #[command(flatten)]
        store: StoreArgs,
        /// Print a JSON array instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Disable a preauthorization now, on every replica, until an operator removes the mark.
    ///
    /// Calls it would have covered go to a human again at once; a call it already approved
    /// whose grant is not yet collected is refused at collection (`preauthorization_withdrawn`).
    /// The disable is recorded in the audit log and survives restarts, even with the entry
    /// still in the config (rename the slug to start afresh).
    ///
    /// Exit codes: 0 disabled, 1 already disabled (nothing changed), 2 no preauthorization of
    /// that slug or unusable input (no data directory, database unreachable).
    #[command(
        after_help = "Example:\n  countersign preauth disable small-eur-payments \
                            --data-dir /var/lib/countersign"
    )]
    Disable {
        /// The slug, as `preauth list` prints it.
        slug: String,
        #[command(flatten)]
        store: StoreArgs,
    },
}

/// One row of `preauth list`.
#[derive(serde::Serialize)]
struct Row {
    slug: String,
    state: &'static str,
    uses: i64,
    max_uses: i64,
    expires_at: String,
    digest: String,
    definition: serde_json::Value,
}

pub(crate) fn run(command: PreauthCommand) -> anyhow::Result<u8> {
    match command {
        PreauthCommand::List { store, json } => list(&store, json),
        PreauthCommand::Disable { slug, store } => disable(&slug, &store),
    }
}

fn list(store: &StoreArgs, json: bool) -> anyhow::Result<u8> {
    let store = store.open()?;
    let rows: Vec<Row> = store
        .preauthorizations()?
        .into_iter()
        .map(|p| Row {
            state: match (p.in_config, p.disabled_at) {
                (_, Some(_)) => "disabled",
                (false, None) => "removed",
                (true, None) => "active",
            },
            uses: p.uses,
            max_uses: p.max_uses,
            expires_at: rfc3339(from_ms(p.expires_at)),
            digest: countersign::b64::encode(&p.digest),
            definition: serde_json::from_str(&p.definition_json).unwrap_or(serde_json::Value::Null),
            slug: p.slug,
        })
        .collect();
    let columns = [
        Column::left("SLUG"),
        Column::left("STATE"),
        Column::right("USES"),
        Column::left("EXPIRES"),
        Column::left("DIGEST"),
    ];
    let empty = "no preauthorization stored ([[preauthorizations]] in the config)";
    table::print(&rows, json, empty, columns, |r| {
        [
            r.slug.clone(),
            r.state.to_owned(),
            format!("{}/{}", r.uses, r.max_uses),
            r.expires_at.clone(),
            r.digest.clone(),
        ]
    })
}

fn disable(slug: &str, store: &StoreArgs) -> anyhow::Result<u8> {
    let store = store.open()?;
    let now = system_now_ms();
    Ok(match store.disable_preauthorization(slug, now)? {
        DisableOutcome::Disabled => {
            eprintln!(
                "countersign: preauthorization {slug} disabled; calls it covered now wait for a \
                 human"
            );
            EXIT_ALLOW
        }
        DisableOutcome::AlreadyDisabled => {
            eprintln!("countersign: preauthorization {slug} was already disabled; nothing changed");
            EXIT_DENY
        }
        DisableOutcome::NotFound => {
            eprintln!("countersign: no preauthorization {slug:?} (see `countersign preauth list`)");
            EXIT_UNUSABLE
        }
    })
}
