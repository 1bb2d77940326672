//! `countersign auditor`: the bearer tokens auditors read the whole audit log with.

use crate::exit::{EXIT_ALLOW, EXIT_DENY, EXIT_UNUSABLE};
use crate::gateway::{TokenRow, print_rows};
use crate::store::StoreArgs;
use clap::Subcommand;
use countersign_server::clock::system_now_ms;

#[derive(Subcommand, Debug)]
pub(crate) enum AuditorCommand {
    /// Add an auditor and print its bearer token: exactly one line on stdout, shown this once.
    ///
    /// An auditor reads the whole audit log (GET /v1/audit/lines; `countersign audit fetch`)
    /// and the text of any line (GET /v1/audit/proof/inclusion?include=line), with
    /// `Authorization: Bearer TOKEN`. The log holds every gateway's tool arguments, agents,
    /// approvers and enrolled credentials: give this token only to whoever audits all of them.
    /// A gateway token is not an auditor token, and an auditor token is refused on every gateway
    /// call. Proofs and checkpoints need no token at all.
    ///
    /// The database keeps only the token's SHA-256: a lost token cannot be shown again; revoke
    /// the auditor and add one under a new name. A running service (every replica) accepts the
    /// token within about half a second. Keep it in a file only the auditor can read, never on
    /// a command line other users can see.
    ///
    /// NAME is 1 to 64 characters of A-Z a-z 0-9 . _ - and is never reused, even after a
    /// revocation.
    ///
    /// Exit codes: 0 added (the token on stdout), 1 an auditor with that name exists already
    /// (nothing changed), 2 unusable input (bad name, no data directory, database unreachable).
    #[command(after_help = "Example:\n  countersign auditor add compliance \
                            --data-dir /var/lib/countersign > compliance.token\n  \
                            countersign audit fetch --service http://127.0.0.1:8080 \
                            --auditor-token-file compliance.token > audit.jsonl")]
    Add {
        /// The auditor's name (e.g. compliance).
        name: String,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// List the auditors: name, when added, when revoked (`-` while live).
    ///
    /// `--json` prints a JSON array of {name, created_at, revoked_at} (RFC 3339, revoked_at
    /// null while live). Tokens are never shown. Exit 0, or 2 when the data directory or
    /// database cannot be opened.
    List {
        #[command(flatten)]
        store: StoreArgs,
        /// Print a JSON array instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Revoke an auditor: its token stops working.
    ///
    /// A running service (every replica) refuses the token with 401 within about half a
    /// second.
    ///
    /// Exit codes: 0 revoked, 1 already revoked (nothing changed), 2 no auditor of that name or
    /// unusable input (no data directory, database unreachable).
    Revoke {
        /// The auditor's name, as `auditor list` prints it.
        name: String,
        #[command(flatten)]
        store: StoreArgs,
    },
}

pub(crate) fn run(command: AuditorCommand) -> anyhow::Result<u8> {
    match command {
        AuditorCommand::Add { name, store } => add(&name, &store),
        AuditorCommand::List { store, json } => list(&store, json),
        AuditorCommand::Revoke { name, store } => revoke(&name, &store),
    }
}

fn add(name: &str, store: &StoreArgs) -> anyhow::Result<u8> {
    use countersign_server::auditors::{self, AuditorError};
    // A bad name is refused before the database is opened.
    if let Err(e) = auditors::check_name(name) {
        eprintln!("countersign: {e}");
        return Ok(EXIT_UNUSABLE);
    }
    let store = store.open()?;
    match auditors::add(store.as_ref(), name, system_now_ms()) {
        Ok(token) => {
            // The one line on stdout: scripts capture it (`> NAME.token`).
            println!("{token}");
            eprintln!(
                "countersign: auditor {name} added; the token above is shown once (only its \
                 SHA-256 is stored). It reads the whole audit log: keep it secret."
            );
            Ok(EXIT_ALLOW)
        }
        Err(AuditorError::NameTaken(_)) => {
            eprintln!(
                "countersign: an auditor named {name} exists already (see `countersign auditor \
                 list`); nothing changed"
            );
            Ok(EXIT_DENY)
        }
        Err(e) => Err(e.into()),
    }
}

fn list(store: &StoreArgs, json: bool) -> anyhow::Result<u8> {
    let store = store.open()?;
    let rows: Vec<TokenRow> = store
        .auditors()?
        .into_iter()
        .map(|a| TokenRow::new(a.name, a.created_at, a.revoked_at))
        .collect();
    print_rows(
        &rows,
        json,
        "no auditor added (countersign auditor add NAME)",
    )
}

fn revoke(name: &str, store: &StoreArgs) -> anyhow::Result<u8> {
    use countersign_server::store::RevokeOutcome;
    let store = store.open()?;
    Ok(
        match countersign_server::auditors::revoke(store.as_ref(), name, system_now_ms())? {
            RevokeOutcome::Revoked => {
                eprintln!(
                    "countersign: auditor {name} revoked; a running service refuses its token \
                     within a second"
                );
                EXIT_ALLOW
            }
            RevokeOutcome::AlreadyRevoked => {
                eprintln!("countersign: auditor {name} was already revoked; nothing changed");
                EXIT_DENY
            }
            RevokeOutcome::NotFound => {
                eprintln!(
                    "countersign: no auditor is named {name:?} (see `countersign auditor list`)"
                );
                EXIT_UNUSABLE
            }
        },
    )
}
