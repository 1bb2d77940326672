//! `/countersign/audit/*`: the audit log as a C2SP tlog-tiles log (docs/spec/c2sp.md).
//!
//! The prefix is the path of the default checkpoint origin (`<host>/countersign/audit`), so the
//! origin is the scheme-less prefix, as tlog-tiles recommends. Who reads what follows
//! `/v1/audit/*`: the checkpoint and the hash tiles are hashes only, for anyone; an entry bundle
//! is 256 audit lines of any gateway, for auditors only (their bearer token).

use crate::error::ApiError;
use crate::service::AppState;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use countersign_audit::tiles::{Tile, TileKind};

/// The tlog-tiles prefix, below the service's public URL.
pub const TILES_PREFIX: &str = "/countersign/audit";

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/countersign/audit/checkpoint", get(checkpoint))
        .route("/countersign/audit/tile/{*path}", get(tile))
}

/// A tile never changes once it exists (a partial tile is named by its width).
const IMMUTABLE: &str = "public, max-age=31536000, immutable";
/// An entry bundle is as immutable, but it holds line text: no shared cache keeps it.
const IMMUTABLE_PRIVATE: &str = "private, max-age=31536000, immutable";
const OCTETS: &str = "application/octet-stream";

/// The latest checkpoint (the witnessed one when witnesses cosigned one, else one signed now).
/// It goes stale at the next line, so nothing caches it.
async fn checkpoint(State(state): State<AppState>) -> Result<Response, ApiError> {
    let note = match state.witnessed_checkpoint() {
        Some(note) => note,
        None => state.checkpoint().await?,
    };
    Ok((
        [
            (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        note,
    )
        .into_response())
}

/// `tile/<L>/<N>[.p/<W>]` for anyone, `tile/entries/<N>[.p/<W>]` for auditors. A path that is
/// not canonical, or a tile the log has not reached, is 404.
async fn tile(
    State(state): State<AppState>,
    Path(path): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let Ok(tile) = Tile::parse(&format!("tile/{path}")) else {
        return Err(ApiError::not_found("tile"));
    };
    let (bytes, cache) = match tile.kind {
        TileKind::Hashes { .. } => (state.hash_tile(tile).await?, IMMUTABLE),
        TileKind::Entries => {
            let auditor = match super::audit::auditor(&state, &headers) {
                Ok(auditor) => auditor,
                Err(refused) => return Ok(refused.into_response()),
            };
            let bytes = state.entry_bundle(tile).await?;
            tracing::info!(auditor = %auditor.0, bundle = %tile.path(), "audit entries read");
            (bytes, IMMUTABLE_PRIVATE)
        }
    };
    Ok((
        [
            (header::CONTENT_TYPE, OCTETS),
            (header::CACHE_CONTROL, cache),
        ],
        bytes,
    )
        .into_response())
}
