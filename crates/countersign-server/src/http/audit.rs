//! `/v1/audit/*`: the audit log as others check it.
//!
//! Who reads what (docs/API.md, docs/THREAT-MODEL.md "Who reads the audit log"):
//! - anyone: the signed checkpoints, the chain head, and inclusion and consistency proofs, which
//!   are hashes only: what a witness, a monitor and `countersign audit prove` need, and nothing
//!   a line says;
//! - the gateway whose approval a line records: that line's text, with its proof
//!   (`include=line`);
//! - an auditor (`countersign auditor add`): any line's text, and the whole log page by page
//!   (`/v1/audit/lines`).
//!
//! A gateway token is not an auditor token: `/v1/audit/lines` refuses it with 401, like no
//! token at all.

use super::QueryArg;
use super::approvals::{Unauthenticated, bearer};
use crate::error::ApiError;
use crate::service::{AUDIT_PAGE_DEFAULT, AppState, LineReader};
use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, header};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/audit/head", get(audit_head))
        .route("/v1/audit/checkpoint", get(audit_checkpoint))
        .route("/v1/audit/checkpoint/witnessed", get(witnessed_checkpoint))
        .route("/v1/audit/proof/inclusion", get(inclusion_proof))
        .route("/v1/audit/proof/consistency", get(consistency_proof))
        .route("/v1/audit/lines", get(lines))
}

/// Not kept by caches along the way: a checkpoint goes stale, and line text is not theirs.
const NO_STORE: (header::HeaderName, &str) = (header::CACHE_CONTROL, "no-store");

/// The auditor a request authenticated as (`Authorization: Bearer TOKEN`, an auditor's token).
pub(super) struct Auditor(pub(super) Arc<str>);

const NEEDS_AUDITOR: &str = "this call needs an auditor token: Authorization: Bearer TOKEN \
                             (countersign auditor add NAME prints one)";
const NOT_AUDITOR: &str =
    "the bearer token is not a live auditor token (a gateway token is not one)";

impl FromRequestParts<AppState> for Auditor {
    type Rejection = Unauthenticated;
    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Unauthenticated> {
        auditor(state, &parts.headers)
    }
}

/// The auditor whose token `headers` carry (for a handler that needs one on some paths only).
pub(super) fn auditor(state: &AppState, headers: &HeaderMap) -> Result<Auditor, Unauthenticated> {
    let token = bearer(headers)?.ok_or_else(|| Unauthenticated::needs(NEEDS_AUDITOR))?;
    let name = state
        .auditor_of_token(token)
        .ok_or_else(|| Unauthenticated::refused(NOT_AUDITOR))?;
    super::trace::record_auditor(&name);
    Ok(Auditor(name))
}

/// Who may read a line: an auditor's token, else a gateway's (their tables are apart, so a
/// token is at most one of the two).
fn line_reader(state: &AppState, headers: &HeaderMap) -> Result<LineReader, Unauthenticated> {
    const NEEDS: &str = "include=line needs the token of the gateway whose approval the line \
                         records, or an auditor token: Authorization: Bearer TOKEN";
    const NEITHER: &str =
        "the bearer token is neither a live gateway token nor a live auditor token";
    let token = bearer(headers)?.ok_or_else(|| Unauthenticated::needs(NEEDS))?;
    if let Some(name) = state.auditor_of_token(token) {
        super::trace::record_auditor(&name);
        return Ok(LineReader::Auditor(name));
    }
    let name = state
        .gateway_of_token(token)
        .ok_or_else(|| Unauthenticated::refused(NEITHER))?;
    super::trace::record_gateway(&name);
    Ok(LineReader::Gateway(name))
}

/// What an inclusion proof carries besides hashes.
#[derive(Debug, Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum Include {
    /// The line's text.
    Line,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct InclusionQuery {
    seq: u64,
    size: u64,
    include: Option<Include>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConsistencyQuery {
    from: u64,
    to: u64,
}

/// An RFC 9162 inclusion proof of line `seq` in the tree of the first `size` lines: to anyone
/// without the line; with it (`include=line`) to the line's gateway or an auditor. Credentials
/// are looked at only when the line is asked for.
async fn inclusion_proof(
    State(state): State<AppState>,
    headers: HeaderMap,
    QueryArg(q): QueryArg<InclusionQuery>,
) -> Result<axum::response::Response, ApiError> {
    match q.include {
        None => Ok(Json(state.inclusion_proof(q.seq, q.size).await?).into_response()),
        Some(Include::Line) => {
            let reader = match line_reader(&state, &headers) {
                Ok(reader) => reader,
                Err(refused) => return Ok(refused.into_response()),
            };
            let proof = state
                .inclusion_proof_with_line(q.seq, q.size, &reader)
                .await?;
            // Who read which line: the span names the gateway or auditor.
            tracing::info!(seq = q.seq, "audit line read");
            Ok(([NO_STORE], Json(proof)).into_response())
        }
    }
}

/// An RFC 9162 consistency proof between the trees of the first `from` and `to` lines.
async fn consistency_proof(
    State(state): State<AppState>,
    QueryArg(q): QueryArg<ConsistencyQuery>,
) -> Result<Json<crate::service::ConsistencyProof>, ApiError> {
    Ok(Json(state.consistency_proof(q.from, q.to).await?))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LinesQuery {
    /// The sequence number the page starts after (0: from the first line).
    #[serde(default)]
    after: u64,
    limit: Option<usize>,
}

/// Up to `limit` lines after line `after`, as JSON lines exactly as the log holds them (each
/// followed by a newline): pages laid end to end are the log file `countersign audit verify`
/// reads. Auditors only. An empty page: nothing after `after` yet.
async fn lines(
    auditor: Auditor,
    State(state): State<AppState>,
    QueryArg(q): QueryArg<LinesQuery>,
) -> Result<impl IntoResponse, ApiError> {
    let page = state
        .audit_page(q.after, q.limit.unwrap_or(AUDIT_PAGE_DEFAULT))
        .await?;
    tracing::info!(auditor = %auditor.0, after = q.after, lines = page.len(), "audit lines read");
    let mut body = String::with_capacity(page.iter().map(|l| l.len() + 1).sum());
    for line in page {
        body.push_str(&line);
        body.push('\n');
    }
    Ok((
        [
            (header::CONTENT_TYPE, "application/jsonl; charset=utf-8"),
            NO_STORE,
        ],
        body,
    ))
}

/// The latest checkpoint sent to the witnesses, with their cosignature lines (404 until one was
/// witnessed, or when no witness is configured).
async fn witnessed_checkpoint(
    State(state): State<AppState>,
) -> Result<impl IntoResponse, ApiError> {
    let note = state
        .witnessed_checkpoint()
        .ok_or_else(|| ApiError::not_found("witnessed checkpoint"))?;
    Ok((
        [
            (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
            NO_STORE,
        ],
        note,
    ))
}

/// The audit chain head: compare with `audit verify`'s `head` to detect a truncated tail.
async fn audit_head(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    let (seq, hash) = state.blocking(|s| s.audit_head()).await?;
    Ok(Json(
        json!({"seq": seq, "head": countersign::b64::encode(&hash)}),
    ))
}

/// The latest signed checkpoint of the audit log: a C2SP signed note, as text.
async fn audit_checkpoint(State(state): State<AppState>) -> Result<impl IntoResponse, ApiError> {
    let note = state.checkpoint().await?;
    Ok((
        [
            (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
            NO_STORE,
        ],
        note,
    ))
}
