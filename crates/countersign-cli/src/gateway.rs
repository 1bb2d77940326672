//! `countersign gateway`: the bearer tokens gateways call the service with.

use crate::exit::{EXIT_ALLOW, EXIT_DENY, EXIT_UNUSABLE};
use crate::store::StoreArgs;
use crate::table::{self, Column};
use clap::Subcommand;
use countersign_server::clock::system_now_ms;

#[derive(Subcommand, Debug)]
pub(crate) enum GatewayCommand {
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
        #[command(flatten)]
        store: StoreArgs,
    },
    /// List the gateways: name, when added, when revoked (`-` while live).
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
        #[command(flatten)]
        store: StoreArgs,
    },
}

pub(crate) fn run(command: GatewayCommand) -> anyhow::Result<u8> {
    match command {
        GatewayCommand::Add { name, store } => add(&name, &store),
        GatewayCommand::List { store, json } => list(&store, json),
        GatewayCommand::Revoke { name, store } => revoke(&name, &store),
    }
}

fn add(name: &str, store: &StoreArgs) -> anyhow::Result<u8> {
    use countersign_server::gateways::{self, GatewayError};
    // A bad name is refused before the database is opened.
    if let Err(e) = gateways::check_name(name) {
        eprintln!("countersign: {e}");
        return Ok(EXIT_UNUSABLE);
    }
    let store = store.open()?;
    match gateways::add(store.as_ref(), name, system_now_ms()) {
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

/// One row of `gateway list` (and `auditor list`).
#[derive(serde::Serialize)]
pub(crate) struct TokenRow {
    pub(crate) name: String,
    pub(crate) created_at: String,
    pub(crate) revoked_at: Option<String>,
}

impl TokenRow {
    /// A row from stored times (ms since the epoch).
    pub(crate) fn new(name: String, created_at: i64, revoked_at: Option<i64>) -> Self {
        use countersign_server::clock::{from_ms, rfc3339};
        Self {
            name,
            created_at: rfc3339(from_ms(created_at)),
            revoked_at: revoked_at.map(|t| rfc3339(from_ms(t))),
        }
    }
}

fn list(store: &StoreArgs, json: bool) -> anyhow::Result<u8> {
    let store = store.open()?;
    let rows: Vec<TokenRow> = store
        .gateways()?
        .into_iter()
        .map(|g| TokenRow::new(g.name, g.created_at, g.revoked_at))
        .collect();
    print_rows(
        &rows,
        json,
        "no gateway added (countersign gateway add NAME)",
    )
}

/// Print token rows (`gateway list`, `auditor list`) as a table (NAME, CREATED, REVOKED) or a
/// JSON array; `empty` goes to stderr when there is no row.
pub(crate) fn print_rows(rows: &[TokenRow], json: bool, empty: &str) -> anyhow::Result<u8> {
    let columns = [
        Column::left("NAME"),
        Column::left("CREATED"),
        Column::left("REVOKED"),
    ];
    table::print(rows, json, empty, columns, |r| {
        [
            r.name.clone(),
            r.created_at.clone(),
            r.revoked_at.clone().unwrap_or_else(|| "-".to_owned()),
        ]
    })
}

fn revoke(name: &str, store: &StoreArgs) -> anyhow::Result<u8> {
    use countersign_server::store::RevokeOutcome;
    let store = store.open()?;
    Ok(
        match countersign_server::gateways::revoke(store.as_ref(), name, system_now_ms())? {
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
