//! `countersign registry`: the registry document verifiers trust.

use crate::exit::EXIT_ALLOW;
use crate::store::StoreArgs;
use clap::Subcommand;

#[derive(Subcommand, Debug)]
pub(crate) enum RegistryCommand {
    /// Print the registry document of a service's data directory (what verifiers should trust).
    Export {
        #[command(flatten)]
        store: StoreArgs,
    },
}

pub(crate) fn run(command: RegistryCommand) -> anyhow::Result<u8> {
    match command {
        RegistryCommand::Export { store } => export(&store),
    }
}

fn export(store: &StoreArgs) -> anyhow::Result<u8> {
    let store = store.open()?;
    let doc = countersign::RegistryDocument {
        credentials: store.credentials()?,
    };
    println!("{}", serde_json::to_string_pretty(&doc)?);
    Ok(EXIT_ALLOW)
}
