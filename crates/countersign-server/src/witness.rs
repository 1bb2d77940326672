//! The witness's HTTP interface: `POST /add-checkpoint` around [`Witness::add_checkpoint`]
//! (the witness itself is in `countersign_audit::witness`).

pub use countersign_audit::witness::{Answer, MAX_BODY, Witness};

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use std::sync::Arc;

/// The witness as an axum router.
pub trait WitnessRouter {
    /// The witness's HTTP interface.
    fn router(self: Arc<Self>) -> axum::Router;
}

impl WitnessRouter for Witness {
    fn router(self: Arc<Self>) -> axum::Router {
        axum::Router::new()
            .route("/add-checkpoint", post(add_checkpoint))
            .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY))
            .with_state(self)
    }
}

async fn add_checkpoint(State(witness): State<Arc<Witness>>, body: String) -> Response {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let started = std::time::Instant::now();
    let a = match tokio::task::spawn_blocking(move || witness.add_checkpoint(&body, now)).await {
        Ok(a) => a,
        Err(_) => Answer {
            status: 500,
            content_type: "text/plain; charset=utf-8",
            body: "witness task failed\n".into(),
        },
    };
    tracing::info!(
        status = a.status,
        micros = started.elapsed().as_micros() as u64,
        "add-checkpoint"
    );
    let status = StatusCode::from_u16(a.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, [(header::CONTENT_TYPE, a.content_type)], a.body).into_response()
}
