//! Where a long-running command's logs go: stderr, as text for people or as JSON lines for a
//! log pipeline. Standard output stays for what the command prints on purpose (the listening
//! address), so scripts that read it are not disturbed by logs.

use clap::ValueEnum;
use tracing_subscriber::EnvFilter;

/// The variable that sets which events are logged, in `tracing`'s filter syntax
/// (`info`, `warn`, `countersign_server=debug`, …). Default: `info`.
pub(crate) const FILTER_VAR: &str = "COUNTERSIGN_LOG";

/// How log lines are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub(crate) enum LogFormat {
    /// One human-readable line per event.
    #[default]
    Text,
    /// One JSON object per line: `timestamp`, `level`, `message`, `target`, the event's fields,
    /// and, for a line a request caused, `span` with `method`, `route`, `gateway`, `approval_id`.
    Json,
}

/// Install the process-wide subscriber. Fails only when the filter variable does not parse,
/// which is an operator error worth stopping on rather than logging nothing.
pub(crate) fn install(format: LogFormat) -> anyhow::Result<()> {
    install_with_default(format, "info")
}

/// [`install`], logging what `default` selects when the filter variable is unset (`demo` keeps
/// its own narrative on stdout readable with `warn`).
pub(crate) fn install_with_default(format: LogFormat, default: &str) -> anyhow::Result<()> {
    let filter = match std::env::var(FILTER_VAR) {
        Ok(spec) => EnvFilter::try_new(&spec)
            .map_err(|e| anyhow::anyhow!("{FILTER_VAR}={spec:?} is not a log filter: {e}"))?,
        Err(_) => EnvFilter::new(default),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let installed = match format {
        LogFormat::Text => builder.with_ansi(false).try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .try_init(),
    };
    installed.map_err(|e| anyhow::anyhow!("installing the log subscriber: {e}"))
}
