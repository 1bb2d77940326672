//! `countersign serve`: boot the service from a data directory and an optional config file.

use crate::address::LastStart;
use crate::audit::{AuditMirror, AuditSealer};
use crate::clock::{Clock, DatabaseTime, SteadyClock, SystemClock};
use crate::config::Config;
use crate::files;
use crate::service::{AppState, StateParts};
use crate::store::DatabaseUrl;
use anyhow::Context as _;
use countersign::RegistryDocument;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// How often overdue approvals are settled in the background (reads settle them too).
const SWEEP_INTERVAL: Duration = Duration::from_millis(500);

/// Options of `countersign serve`.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Address to listen on (default 127.0.0.1:8080; port 0 picks a free port).
    pub listen: SocketAddr,
    pub data_dir: PathBuf,
    pub config: Option<PathBuf>,
    /// `--database URL`, overriding the config file's `database`.
    pub database: Option<String>,
}

/// Open the state of a data directory: key, database, audit file, registry import.
pub fn open_state(data_dir: &Path, config: Config, public_url: String) -> anyhow::Result<AppState> {
    Ok(open(data_dir, config, public_url)?.0)
}

/// [`open_state`], and the database's clock when the service runs on it (PostgreSQL), for
/// `serve` to read again every sweep.
fn open(
    data_dir: &Path,
    mut config: Config,
    public_url: String,
) -> anyhow::Result<(AppState, Option<Arc<DatabaseTime>>)> {
    // Origins left unset are the page's own (what `serve` settles; here for library callers).
    if config.origins.is_empty()
        && let Ok(url) = url::Url::parse(&public_url)
    {
        config.origins = vec![url.origin().ascii_serialization()];
    }
    std::fs::create_dir_all(data_dir)
        .with_context(|| format!("creating {}", data_dir.display()))?;
    let sealer = AuditSealer::load_or_create(&data_dir.join(files::SERVICE_KEY))?;
    std::fs::write(
        data_dir.join(files::SERVICE_PUBLIC_KEY),
        format!("{}\n", sealer.public_key_b64()),
    )?;
    let database = match &config.database {
        Some(url) => DatabaseUrl::parse(url)?,
        None => DatabaseUrl::default_in(data_dir),
    };
    let store = database.open(sealer.clone(), config.durability)?;
    if let Some(path) = &config.registry {
        let text =
            std::fs::read(path).with_context(|| format!("reading registry {}", path.display()))?;
        let doc: RegistryDocument = serde_json::from_slice(&text)
            .with_context(|| format!("parsing registry {}", path.display()))?;
        countersign::CredentialRegistry::from_document(doc.clone())
            .with_context(|| format!("loading registry {}", path.display()))?;
        // Only new or changed records are written (and audited): importing the same file at
        // every start adds nothing.
        let now = crate::clock::system_now_ms();
        store.put_credentials(&doc.credentials, now)?;
    }
    let mirror = AuditMirror::open(&data_dir.join(files::AUDIT_LOG), store.as_ref())?;
    // Time never runs backward (SteadyClock). Replicas of one PostgreSQL database all follow its
    // clock, so that none decides expiry by a wall clock of its own; one SQLite process has only
    // its host's clock, which is also its database's.
    let (clock, database_time): (Arc<dyn Clock>, _) = match database {
        DatabaseUrl::Postgres(_) => {
            let time = Arc::new(
                DatabaseTime::read(|| store.database_now_ms())
                    .context("reading the database's clock")?,
            );
            (Arc::new(SteadyClock::new(time.clone())), Some(time))
        }
        DatabaseUrl::Sqlite(_) => (Arc::new(SteadyClock::new(SystemClock)), None),
    };
    let state = AppState::new(StateParts {
        config,
        public_url,
        store,
        clock,
        sealer,
        mirror: Some(mirror),
    })?;
    Ok((state, database_time))
}

/// Print a status line; a closed stdout is not a reason to stop serving.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

/// Run the service until SIGTERM or Ctrl-C.
pub async fn serve(opts: ServeOptions) -> anyhow::Result<()> {
    let mut config = match &opts.config {
        Some(path) => Config::from_file(path)?,
        None => Config::default(),
    };
    if opts.database.is_some() {
        config.database.clone_from(&opts.database);
    }
    let listener = tokio::net::TcpListener::bind(opts.listen)
        .await
        .with_context(|| format!("binding {}", opts.listen))?;
    let local = listener.local_addr()?;
    let settled = crate::address::settle(&mut config, local);
    let (state, database_time) = open(&opts.data_dir, config, settled.public_url.clone())?;
    // Later commands (`enroll invite`, `audit verify`) find the address and origins here.
    let record = LastStart::new(local, opts.config.as_deref(), state.config());
    record.write(&opts.data_dir).with_context(|| {
        format!(
            "recording the start in {}",
            opts.data_dir.join(crate::address::LAST_START).display()
        )
    })?;
    // Whatever expired while the process was down is settled before the first request.
    let expired = state
        .expire_overdue()
        .await
        .map_err(|e| anyhow::anyhow!(e.message))?;
    announce(&state, &opts.data_dir, &settled, &record, expired);
    let sweep = spawn_sweeper(state.clone(), database_time);
    let witness = spawn_witness(&state);
    let header_read = Duration::from_secs(state.config().timeouts.header_read_seconds);
    let state_for_exit = state.clone();
    serve_http(
        listener,
        crate::build_router(state),
        header_read,
        shutdown_signal(),
    )
    .await;
    sweep.abort();
    if let Some(w) = witness {
        w.abort();
    }
    // Everything committed is chained and in the file before the process ends.
    if let Err(e) = state_for_exit.blocking(|s| s.seal_audit()).await {
        tracing::error!(error = %e.message, "sealing the audit log at exit failed");
    }
    state_for_exit.catch_up_audit_file().await;
    say!("countersign: stopped");
    Ok(())
}

/// The status lines of a start: where the service listens and for whom, where its data and
/// keys are, and what an operator does next.
fn announce(
    state: &AppState,
    data_dir: &Path,
    settled: &crate::address::Settled,
    record: &LastStart,
    expired: usize,
) {
    let public_url = &settled.public_url;
    say!("countersign: listening on http://{}", record.listen);
    say!(
        "countersign: approver page {public_url}/approve (public_url {})",
        settled.public_url_from.describe()
    );
    say!(
        "countersign: WebAuthn rp_id {}, origins {} ({})",
        record.rp_id,
        record.origins.join(" "),
        settled.origins_from.describe()
    );
    for warning in &settled.warnings {
        tracing::warn!("{warning}");
    }
    say!("countersign: data directory {}", data_dir.display());
    if let Some(url) = &state.config().database {
        say!("countersign: database {}", crate::store::redacted(url));
    }
    say!("countersign: audit key {}", state.service_key());
    say!(
        "countersign: signed audit checkpoints at {public_url}/v1/audit/checkpoint (origin {})",
        state.audit_origin()
    );
    if expired > 0 {
        say!("countersign: settled {expired} approval(s) that expired while stopped");
    }
    let enrolled = state.registry().len();
    if enrolled == 0 {
        say!(
            "countersign: no approver enrolled yet; invite one with `countersign enroll invite \
             --principal NAME --data-dir {}` and open the printed link. Until then every request \
             answers DENIED no_eligible_approver.",
            data_dir.display()
        );
    } else {
        say!("countersign: {enrolled} credential(s) enrolled");
    }
    say!("countersign: API at {public_url}/openapi.json");
}

/// The background sweep: the database's clock read again (PostgreSQL), overdue approvals
/// settled, the registry reloaded, the audit file caught up.
fn spawn_sweeper(
    sweeper: AppState,
    database_time: Option<Arc<DatabaseTime>>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(SWEEP_INTERVAL);
        loop {
            tick.tick().await;
            if let Some(time) = &database_time {
                refresh_database_time(&sweeper, time.clone()).await;
            }
            if let Err(e) = sweeper.expire_overdue().await {
                tracing::error!(error = %e.message, "expiry sweep failed");
            }
            // Enrollments and revocations written by another process (the CLI, a replica).
            match sweeper.refresh_registry().await {
                Ok(true) => {
                    tracing::info!("credentials changed in the database; registry reloaded")
                }
                Ok(false) => {}
                Err(e) => tracing::error!(error = %e.message, "registry refresh failed"),
            }
            // Lines sealed since the last commit here (PostgreSQL seals just after commits,
            // and other replicas' lines arrive without one of ours).
            sweeper.catch_up_audit_file().await;
        }
    })
}

/// Read the database's clock again; until a reading succeeds the clock runs on from the last.
async fn refresh_database_time(state: &AppState, time: Arc<DatabaseTime>) {
    let store = state.store().clone();
    let read = tokio::task::spawn_blocking(move || time.refresh(|| store.database_now_ms()))
        .await
        .map_err(|e| e.to_string())
        .and_then(|r| r.map_err(|e| e.to_string()));
    if let Err(error) = read {
        tracing::warn!(error, "reading the database's clock failed");
    }
}

/// With witnesses configured: a task that has them cosign a new checkpoint whenever the log has
/// grown since the last one sent.
fn spawn_witness(state: &AppState) -> Option<tokio::task::JoinHandle<()>> {
    if state.config().witnesses.is_empty() {
        return None;
    }
    let state = state.clone();
    let every = Duration::from_secs(state.config().witness_interval_seconds.max(1));
    Some(tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        let mut sent = None;
        loop {
            tick.tick().await;
            let size = state.blocking(|s| s.audit_head()).await.ok().map(|h| h.0);
            if size.is_none() || size == sent {
                continue;
            }
            match state.witness_checkpoint().await {
                Ok((_, n)) => {
                    sent = size;
                    tracing::info!(size = ?size, cosigned_by = n, "checkpoint witnessed");
                }
                Err(e) => tracing::error!(error = %e.message, "witnessing failed"),
            }
        }
    }))
}

/// Serve `router` over HTTP/1.1 on every connection `listener` accepts until `shutdown`
/// resolves; then stop accepting, let requests in flight finish and close idle connections.
///
/// `axum::serve` has no header read timeout, so a client could hold a connection (and a file
/// descriptor) open for ever by sending nothing, or one header byte at a time. Here every
/// connection must deliver each request's headers within `header_read` of opening or of its
/// previous response, or it is closed (hyper's header read timeout, which starts as soon as
/// the connection waits for a request). Long polls are unaffected: the timeout does not run
/// while a request is being answered.
pub async fn serve_http(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    header_read: Duration,
    shutdown: impl std::future::Future<Output = ()>,
) {
    use hyper_util::rt::{TokioIo, TokioTimer};
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(header_read)
        .keep_alive(true);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, remote) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors (EMFILE) and the like: pause instead of spinning;
                    // connections already open keep being served.
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let router = router.clone();
        // Connect info gives the approver page's rate limiter the client address.
        let service = hyper::service::service_fn(move |mut request: hyper::Request<_>| {
            request
                .extensions_mut()
                .insert(axum::extract::ConnectInfo(remote));
            let mut router = router.clone();
            async move { tower_service::Service::call(&mut router, request).await }
        });
        let connection = graceful.watch(http.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                // Header read timeouts, resets, malformed requests: the client's business.
                tracing::debug!(error = %e, %remote, "connection closed");
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
}

/// Resolves on SIGTERM or Ctrl-C: the one shutdown signal of every long-running command
/// (`serve`, `witness serve`, `mcp http`).
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}
