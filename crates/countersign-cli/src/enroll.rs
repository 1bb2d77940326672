//! `countersign enroll`: invite an approver to enroll a security key.

use crate::exit::EXIT_ALLOW;
use crate::store::StoreArgs;
use clap::Subcommand;
use std::path::PathBuf;

#[derive(Subcommand, Debug)]
pub(crate) enum EnrollCommand {
    /// Print a one-time, expiring link that enrolls a security key for PRINCIPAL.
    ///
    /// The invite is written into the service's database (--database, else the config's
    /// `database`, else the SQLite database in DATA_DIR), so it works whether the service is
    /// running or stopped, and every replica sharing a PostgreSQL database finds it. Give the
    /// link to the approver over a channel you trust: whoever opens it first enrolls a key that
    /// can approve as PRINCIPAL. See docs/OPERATIONS.md.
    #[command(mut_arg("database", |a| a.help(
        "The service's database URL (default: the config's `database`, else the SQLite \
         database in DATA_DIR). Replicas on PostgreSQL need the invite there"
    )))]
    Invite {
        /// The approver's name as it appears in verdicts and [groups] (e.g. alice@example.com).
        #[arg(long)]
        principal: String,
        /// An approver group (defined in the config's [groups]) the approver joins on enrollment.
        #[arg(long)]
        group: Option<String>,
        #[command(flatten)]
        store: StoreArgs,
        /// The service's TOML configuration (origins, public_url, groups, invite lifetime).
        /// Default: the one `countersign serve` last started with in DATA_DIR, and the address
        /// it listened on (DATA_DIR/serve.json); without either the command refuses.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Invite lifetime in seconds (default: [enrollment] invite_seconds, 86400).
        #[arg(long)]
        expires_in: Option<u64>,
        /// Base URL of the approver page (default: the service's public_url, as recorded or
        /// configured, else its first origin).
        #[arg(long)]
        public_url: Option<String>,
    },
}

pub(crate) fn run(command: EnrollCommand) -> anyhow::Result<u8> {
    match command {
        EnrollCommand::Invite {
            principal,
            group,
            store,
            config,
            expires_in,
            public_url,
        } => invite(principal, group, store, config, expires_in, public_url),
    }
}

fn invite(
    principal: String,
    group: Option<String>,
    store: StoreArgs,
    config: Option<PathBuf>,
    expires_in: Option<u64>,
    public_url: Option<String>,
) -> anyhow::Result<u8> {
    // Not a data directory at all: say that first, before anything about its settings.
    anyhow::ensure!(
        store
            .data_dir
            .join(countersign_server::files::SERVICE_KEY)
            .exists(),
        "{} is not a countersign data directory (no service key); start `countersign serve \
         --data-dir {}` once, or pass the right --data-dir",
        store.data_dir.display(),
        store.data_dir.display()
    );
    // The link must point where the service runs: its recorded start, an explicit config, or
    // an explicit --public-url (then only the config's groups and invite lifetime are missing).
    let (config, source) =
        match countersign_server::address::service_config(&store.data_dir, config.as_deref()) {
            Err(countersign_server::address::AddressError::NoRecord { .. })
                if public_url.is_some() =>
            {
                (
                    countersign_server::Config::default(),
                    "--public-url".to_owned(),
                )
            }
            settings => settings?,
        };
    let created = countersign_server::enroll::invite_in_data_dir(
        &countersign_server::enroll::InviteOptions {
            data_dir: store.data_dir,
            config,
            principal,
            group,
            expires_in_seconds: expires_in,
            public_url,
            database: store.database,
        },
    )?;
    println!("{}", created.url);
    eprintln!(
        "countersign: one-time invite for {} expires at {} (service settings: {source})",
        created.invite.principal, created.expires_at
    );
    Ok(EXIT_ALLOW)
}
