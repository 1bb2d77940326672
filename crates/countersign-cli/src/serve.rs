//! `countersign serve`: run the reference approval_callback service.

use crate::exit::EXIT_ALLOW;
use crate::logging;
use crate::store::StoreArgs;
use anyhow::Context as _;
use clap::Args;
use std::path::PathBuf;

// No doc comment here: the subcommand's help is the doc comment of `Command::Serve`.
#[derive(Args, Debug)]
pub(crate) struct ServeArgs {
    /// Address and port to listen on (port 0 picks a free one).
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: std::net::SocketAddr,
    #[command(flatten)]
    store: StoreArgs,
    /// TOML configuration (rp_id, origins, tools, groups, timeouts, webhook).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Log format on stderr: `text`, or `json` (one object per line, with the request's
    /// route, gateway and approval id on every line a request causes). Which events are
    /// logged: COUNTERSIGN_LOG (e.g. `warn`, `info`, `countersign_server=debug`; default info).
    #[arg(long, value_enum, default_value_t = logging::LogFormat::Text)]
    log_format: logging::LogFormat,
}

pub(crate) fn run(args: ServeArgs) -> anyhow::Result<u8> {
    logging::install(args.log_format)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(countersign_server::serve(
        countersign_server::ServeOptions {
            listen: args.listen,
            data_dir: args.store.data_dir,
            config: args.config,
            database: args.store.database,
        },
    ))?;
    Ok(EXIT_ALLOW)
}
