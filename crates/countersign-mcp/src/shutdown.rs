//! When `countersign mcp http` stops: Ctrl-C, or SIGTERM on Unix (what a service manager sends).

/// Resolves on the first Ctrl-C or (Unix) SIGTERM. A signal handler that cannot be installed
/// never resolves, so the other one still stops the relay.
pub(crate) async fn shutdown_signal() {
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
