//! The audit log in C2SP's formats: tlog-tiles (the static read API standard tooling fetches)
//! and tlog-proof@v1 (the inclusion proof a grant receipt and a settled result carry).
//!
//! Tiles are read from the same stored tree as every inclusion and consistency proof
//! (`proofs`), so a tile and a proof can never disagree; entry bundles are the stored lines,
//! the bytes the tree's leaves hash. Who reads what follows the audit read API: hash tiles and
//! the checkpoint are hashes only and go to anyone, an entry bundle holds 256 lines of any
//! gateway and goes to auditors only (`audit_read`).

use super::AppState;
use crate::audit::merkle::Hash;
use crate::error::{ApiError, ErrorCode};
use axum::http::StatusCode;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use countersign_audit::TlogProof;
use countersign_audit::tiles::{Tile, TileError, TileKind, entry_bundle};

/// How far behind the log's head a settled approval's line is looked for (lines). Past it, the
/// answer carries no `tlog_proof`; the receipt's own proof is made right after its line.
pub const TLOG_PROOF_REACH: u64 = 1024;
/// Lines read per step of that search.
const SEARCH_STEP: u64 = 256;

/// The line kinds a search looks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LineOf {
    /// The `grant` line of a collected grant.
    Grant,
    /// The line that settled the approval: its `decision`, `settlement`, or an `outcome` that
    /// is not PENDING.
    Settlement,
}

impl LineOf {
    fn matches(self, line: &serde_json::Value) -> bool {
        let kind = line.get("kind").and_then(serde_json::Value::as_str);
        match self {
            Self::Grant => kind == Some("grant"),
            Self::Settlement => match kind {
                Some("decision" | "settlement") => true,
                Some("outcome") => {
                    line.get("status").and_then(serde_json::Value::as_str) != Some("PENDING")
                }
                _ => false,
            },
        }
    }
}

fn tile_error(e: TileError) -> ApiError {
    match e {
        TileError::Beyond { .. } | TileError::BadPath { .. } => ApiError::not_found("tile"),
        TileError::EntryTooLarge { index, len } => ApiError::new(
            StatusCode::NOT_IMPLEMENTED,
            ErrorCode::EntryTooLarge,
            format!(
                "entry {index} (audit line {}) is {len} bytes, more than an entry bundle's \
                 16-bit length can say; an auditor reads it at /v1/audit/lines",
                index + 1
            ),
        ),
        other => ApiError::internal(other),
    }
}

impl AppState {
    /// The log's size now (every committed line sealed).
    async fn log_size(&self) -> Result<u64, ApiError> {
        Ok(self.blocking(|s| s.audit_head()).await?.0)
    }

    /// A hash tile: 404 until the log has every leaf it covers.
    pub async fn hash_tile(&self, tile: Tile) -> Result<Vec<u8>, ApiError> {
        tile.check_within(self.log_size().await?)
            .map_err(tile_error)?;
        let needs = tile.needs().unwrap_or(u64::MAX);
        self.with_tree(needs, move |t| t.tile(&tile))
            .await?
            .map_err(tile_error)
    }

    /// An entry bundle (auditors only; the caller checked): the lines of a level-0 tile.
    pub async fn entry_bundle(&self, tile: Tile) -> Result<Vec<u8>, ApiError> {
        debug_assert_eq!(tile.kind, TileKind::Entries);
        tile.check_within(self.log_size().await?)
            .map_err(tile_error)?;
        let (first, width) = tile.entries();
        let lines = self
            .blocking(move |s| s.audit_lines_after(first, usize::from(width)))
            .await?;
        let contiguous = lines.len() == usize::from(width)
            && lines
                .iter()
                .zip(first + 1..)
                .all(|((seq, _), expected)| *seq == expected);
        if !contiguous {
            return Err(ApiError::internal(format!(
                "audit lines {}..={} unreadable",
                first + 1,
                first + u64::from(width)
            )));
        }
        entry_bundle(first, lines.iter().map(|(_, l)| l.as_bytes())).map_err(tile_error)
    }

    /// The sequence number of the last line of `what` for approval `id` among the log's first
    /// `size` lines, looked for at most [`TLOG_PROOF_REACH`] lines back.
    pub(crate) async fn find_line(
        &self,
        id: &str,
        what: LineOf,
        size: u64,
    ) -> Result<Option<u64>, ApiError> {
        // The id as it appears in a line (JSON-quoted), to parse only candidate lines.
        let needle = serde_json::to_string(id).map_err(ApiError::internal)?;
        let floor = size.saturating_sub(TLOG_PROOF_REACH);
        let mut end = size;
        while end > floor {
            let start = end.saturating_sub(SEARCH_STEP).max(floor);
            let count = usize::try_from(end - start).unwrap_or(0);
            let lines = self
                .blocking(move |s| s.audit_lines_after(start, count))
                .await?;
            let found = lines.iter().rev().find(|(seq, line)| {
                *seq <= end
                    && line.contains(&needle)
                    && serde_json::from_str::<serde_json::Value>(line).is_ok_and(|v| {
                        v.get("approval_id").and_then(serde_json::Value::as_str) == Some(id)
                            && what.matches(&v)
                    })
            });
            if let Some((seq, _)) = found {
                return Ok(Some(*seq));
            }
            end = start;
        }
        Ok(None)
    }

    /// A tlog-proof@v1 of line `seq` under `checkpoint`, a note this service signed at `size`:
    /// the line in `extra`, its audit path (checked before it is served), the note verbatim.
    pub(crate) async fn tlog_proof(
        &self,
        seq: u64,
        size: u64,
        checkpoint: String,
    ) -> Result<String, ApiError> {
        let (proof, line) = self.proof_and_line(seq, size).await?;
        let path = proof
            .proof
            .iter()
            .map(|h| {
                STANDARD
                    .decode(h)
                    .ok()
                    .and_then(|b| <Hash>::try_from(b).ok())
                    .ok_or_else(|| ApiError::internal("an audit path hash is not 32 bytes"))
            })
            .collect::<Result<Vec<Hash>, ApiError>>()?;
        Ok(TlogProof {
            extra: Some(line.into_bytes()),
            index: seq - 1,
            path,
            checkpoint,
        }
        .to_text())
    }

    /// The tlog-proof of approval `id`'s grant line under the receipt's `checkpoint` (signed at
    /// `size`, after the grant committed); `None` (logged) when it cannot be made.
    pub(crate) async fn grant_tlog_proof(
        &self,
        id: &str,
        size: u64,
        checkpoint: String,
    ) -> Option<String> {
        logged(
            self.proof_in(id, LineOf::Grant, size, Some(checkpoint))
                .await,
        )
    }

    /// The tlog-proof of approval `id`'s line of `what` in a checkpoint signed now; `None`
    /// when the line is not within reach of the head or anything fails (logged): the proof is
    /// an addition to an answer, never a reason to refuse it.
    pub(crate) async fn tlog_proof_of(&self, id: &str, what: LineOf) -> Option<String> {
        let size = match self.log_size().await {
            Ok(size) => size,
            Err(e) => return logged(Err(e)),
        };
        logged(self.proof_in(id, what, size, None).await)
    }

    /// The proof of `id`'s line of `what` among the first `size` lines, under `checkpoint` (a
    /// note signed at `size`), or one signed now.
    async fn proof_in(
        &self,
        id: &str,
        what: LineOf,
        size: u64,
        checkpoint: Option<String>,
    ) -> Result<Option<String>, ApiError> {
        let Some(seq) = self.find_line(id, what, size).await? else {
            return Ok(None);
        };
        let note = match checkpoint {
            Some(note) => note,
            None => self.sign_checkpoint(size).await?,
        };
        self.tlog_proof(seq, size, note).await.map(Some)
    }
}

/// A proof, or `None` with the failure logged.
fn logged(proof: Result<Option<String>, ApiError>) -> Option<String> {
    proof
        .inspect_err(|e| tracing::error!(error = ?e, "no tlog-proof"))
        .ok()
        .flatten()
}
