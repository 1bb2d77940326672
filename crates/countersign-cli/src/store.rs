//! The store arguments every command that opens a service's database shares.

use clap::Args;
use countersign_server::store::{DatabaseUrl, Store};
use std::path::PathBuf;
use std::sync::Arc;

/// `--data-dir` and `--database`: where a service keeps its state.
///
/// Declared once and flattened into each command, so the flags read the same everywhere. `serve`
/// and `enroll invite` reword the help (their `--database` falls back to the config's).
#[derive(Args, Debug, Clone)]
pub(crate) struct StoreArgs {
    /// The service's data directory.
    #[arg(long, default_value = "countersign-data")]
    pub(crate) data_dir: PathBuf,
    /// The service's database URL, when it is not the SQLite database in DATA_DIR.
    #[arg(long, value_name = "URL")]
    pub(crate) database: Option<String>,
}

impl StoreArgs {
    /// Open the store of the data directory (its service key seals any audit line written).
    pub(crate) fn open(&self) -> anyhow::Result<Arc<dyn Store>> {
        let key = self.data_dir.join(countersign_server::files::SERVICE_KEY);
        anyhow::ensure!(
            key.exists(),
            "{} is not a countersign data directory (no service key)",
            self.data_dir.display()
        );
        let sealer = countersign_audit::AuditSealer::load_or_create(&key)?;
        let url = match &self.database {
            Some(url) => DatabaseUrl::parse(url)?,
            None => DatabaseUrl::default_in(&self.data_dir),
        };
        Ok(url.open(sealer, countersign_server::config::Durability::Normal)?)
    }
}
