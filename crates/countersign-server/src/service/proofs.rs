//! Merkle proofs over the audit log, and the witnessing of its checkpoints.
//!
//! The tree is recomputed from the stored lines, never taken on trust: the lines are in the
//! store (SQLite or PostgreSQL), a leaf hash is one SHA-256 of bytes the store returns, and so
//! the tree needs no schema change, no migration and no second thing to keep consistent inside
//! each audit transaction. Each process grows its tree lazily, on the first proof or checkpoint
//! that needs more lines, by reading the lines after the last one it hashed (every replica sees
//! the same lines, so every replica computes the same roots). Its subtree hashes go to the hash
//! file beside the process's audit file (`audit.merkle`, or an unnamed temporary file without
//! one), so memory stays flat: only the right edge is held. After a restart the first growth
//! replays the whole log (about a second per few hundred thousand lines) and checks the file's
//! hashes against it, rewriting any that differ. Every proof is verified before it is served,
//! which catches a file edited while the process runs; the tree is then rebuilt.

use super::AppState;
use crate::audit::hashfile::StoredTree;
use crate::audit::merkle::{Hash, leaf_hash, verify_consistency, verify_inclusion};
use crate::audit::note::NoteVerifier;
use crate::error::{ApiError, ErrorCode};
use crate::store::StoreError;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::Serialize;
use std::path::PathBuf;

/// Lines read from the store per batch while the tree grows.
const GROW_BATCH: usize = 4096;

/// `GET /v1/audit/proof/inclusion?seq=N&size=S`: hashes only, served to anyone.
#[derive(Debug, Clone, Serialize)]
pub struct InclusionProof {
    /// The line's sequence number (its leaf index is `seq - 1`).
    pub seq: u64,
    /// The tree size the proof is for (a checkpoint's size).
    pub size: u64,
    /// The line's leaf hash, SHA-256(0x00 || line), standard base64: what the path starts from.
    /// It does not give the line away: every line ends with a signature only the service key
    /// can make, so no guess of a line's text (an account number, say) can be checked against
    /// it.
    pub leaf_hash: String,
    /// The line itself, without its newline: only with `include=line`, to the gateway whose
    /// approval the line records or to an auditor (see `audit_read`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<String>,
    /// The audit path, leaf side first, standard base64.
    pub proof: Vec<String>,
    /// The Merkle root of the first `size` lines, standard base64 (compare with a checkpoint).
    pub root: String,
}

/// `GET /v1/audit/proof/consistency?from=A&to=B`.
#[derive(Debug, Clone, Serialize)]
pub struct ConsistencyProof {
    pub from: u64,
    pub to: u64,
    /// RFC 9162 PROOF(from, D[to]), standard base64.
    pub proof: Vec<String>,
    pub from_root: String,
    pub to_root: String,
}

/// A configured witness, its key parsed.
#[derive(Debug, Clone)]
pub(crate) struct WitnessTarget {
    pub url: String,
    pub key: NoteVerifier,
}

fn b64(h: &Hash) -> String {
    STANDARD.encode(h)
}

/// The process's Merkle tree, opened on first use.
#[derive(Debug)]
pub(crate) struct TreeSlot {
    /// The hash file; `None`: an unnamed temporary file.
    path: Option<PathBuf>,
    tree: Option<StoredTree>,
}

impl TreeSlot {
    pub(crate) fn new(path: Option<PathBuf>) -> Self {
        Self { path, tree: None }
    }

    /// The tree, opening its file if this is the first use (or the last one was distrusted).
    fn open(&mut self) -> Result<&mut StoredTree, StoreError> {
        let tree = match self.tree.take() {
            Some(tree) => tree,
            None => match &self.path {
                Some(path) => StoredTree::open(path),
                None => StoredTree::temporary(),
            }
            .map_err(|e| StoreError::Unavailable(format!("opening the Merkle hash file: {e}")))?,
        };
        Ok(self.tree.insert(tree))
    }
}

impl AppState {
    /// Run `f` on the tree grown to at least the log's first `size` lines; a `size` beyond the
    /// log is refused (400 `beyond_log`).
    pub(super) async fn with_tree<T: Send + 'static>(
        &self,
        size: u64,
        f: impl FnOnce(&StoredTree) -> T + Send + 'static,
    ) -> Result<T, ApiError> {
        let slot = self.inner.tree.clone();
        let grown = self
            .blocking(move |store| {
                let mut slot = slot
                    .lock()
                    .map_err(|_| StoreError::Corrupt("the Merkle tree lock is poisoned".into()))?;
                let tree = slot.open()?;
                while tree.size() < size {
                    let lines = store.audit_lines_after(tree.size(), GROW_BATCH)?;
                    if lines.is_empty() {
                        return Ok(None);
                    }
                    let mut leaves = Vec::with_capacity(lines.len());
                    for (seq, line) in &lines {
                        let expected = tree.size() + leaves.len() as u64 + 1;
                        if *seq != expected {
                            return Err(StoreError::Corrupt(format!(
                                "audit seq {seq} where {expected} was expected"
                            )));
                        }
                        leaves.push(leaf_hash(line.as_bytes()));
                    }
                    let done = tree.extend(&leaves).map_err(|e| {
                        StoreError::Unavailable(format!("writing the Merkle hash file: {e}"))
                    })?;
                    if let Some(at) = done.rewritten_from {
                        tracing::warn!(
                            stored_hash = at,
                            "the Merkle hash file disagreed with the audit log; rewritten from there"
                        );
                    }
                }
                Ok(Some(f(tree)))
            })
            .await?;
        grown.ok_or_else(|| {
            ApiError::bad_request(
                ErrorCode::BeyondLog,
                format!("the audit log has fewer than {size} lines"),
            )
        })
    }

    /// A proof that does not verify came from a hash file that changed under the process: drop
    /// the tree, so the next use replays the log and rewrites what differs.
    fn distrust_tree(&self, what: &str) -> ApiError {
        tracing::error!(
            proof = what,
            "a Merkle proof from the hash file does not verify"
        );
        if let Ok(mut slot) = self.inner.tree.lock() {
            slot.tree = None;
        }
        ApiError::internal(format!(
            "the {what} proof failed its check; the Merkle hash file is being rebuilt"
        ))
    }

    /// The Merkle root of the log's first `size` lines.
    pub async fn merkle_root(&self, size: u64) -> Result<Hash, ApiError> {
        self.with_tree(size, move |t| t.root(size))
            .await?
            .map_err(ApiError::internal)
    }

    /// An inclusion proof of line `seq` in the tree of the first `size` lines, without the line.
    pub async fn inclusion_proof(&self, seq: u64, size: u64) -> Result<InclusionProof, ApiError> {
        Ok(self.proof_and_line(seq, size).await?.0)
    }

    /// The proof of line `seq` (its `line` unset) and the line, which is read to check the
    /// proof before it is served.
    pub(super) async fn proof_and_line(
        &self,
        seq: u64,
        size: u64,
    ) -> Result<(InclusionProof, String), ApiError> {
        if seq == 0 || seq > size {
            return Err(ApiError::bad_request(
                ErrorCode::BadRange,
                format!("seq must be 1..=size, got seq {seq} and size {size}"),
            ));
        }
        let (proof, root) = self
            .with_tree(size, move |t| {
                Ok::<_, crate::audit::merkle::ProofError>((
                    t.inclusion_proof(seq - 1, size)?,
                    t.root(size)?,
                ))
            })
            .await?
            .map_err(ApiError::internal)?;
        let line = self
            .blocking(move |s| s.audit_lines_after(seq - 1, 1))
            .await?
            .into_iter()
            .next()
            .filter(|(n, _)| *n == seq)
            .map(|(_, line)| line)
            .ok_or_else(|| ApiError::internal(format!("audit line {seq} unreadable")))?;
        let leaf = leaf_hash(line.as_bytes());
        if verify_inclusion(seq - 1, size, &leaf, &proof, &root).is_err() {
            return Err(self.distrust_tree("inclusion"));
        }
        let proof = InclusionProof {
            seq,
            size,
            leaf_hash: b64(&leaf),
            line: None,
            proof: proof.iter().map(b64).collect(),
            root: b64(&root),
        };
        Ok((proof, line))
    }

    /// A consistency proof between the trees of the first `from` and `to` lines.
    pub async fn consistency_proof(
        &self,
        from: u64,
        to: u64,
    ) -> Result<ConsistencyProof, ApiError> {
        if from > to {
            return Err(ApiError::bad_request(
                ErrorCode::BadRange,
                format!("from {from} is beyond to {to}"),
            ));
        }
        let (proof, from_root, to_root) = self
            .with_tree(to, move |t| {
                Ok::<_, crate::audit::merkle::ProofError>((
                    t.consistency_proof(from, to)?,
                    t.root(from)?,
                    t.root(to)?,
                ))
            })
            .await?
            .map_err(ApiError::internal)?;
        if verify_consistency(from, to, &from_root, &to_root, &proof).is_err() {
            return Err(self.distrust_tree("consistency"));
        }
        Ok(ConsistencyProof {
            from,
            to,
            proof: proof.iter().map(b64).collect(),
            from_root: b64(&from_root),
            to_root: b64(&to_root),
        })
    }

    /// The audit key as a C2SP vkey named by the checkpoint origin (type 0x01).
    pub fn checkpoint_vkey(&self) -> String {
        NoteVerifier {
            name: self.audit_origin().to_owned(),
            kind: crate::audit::note::TYPE_ED25519,
            key: self.inner.sealer.public_key(),
        }
        .vkey()
    }

    /// The latest checkpoint with the cosignatures the witnesses returned for it, if any was
    /// witnessed yet.
    pub fn witnessed_checkpoint(&self) -> Option<String> {
        self.inner.witnessed.lock().ok().and_then(|w| w.clone())
    }

    /// The configured witnesses (keys checked at startup).
    fn witness_targets(&self) -> Vec<WitnessTarget> {
        self.config()
            .witnesses
            .iter()
            .filter_map(|w| {
                Some(WitnessTarget {
                    url: w.url.trim_end_matches('/').to_owned(),
                    key: NoteVerifier::parse(&w.key).ok()?,
                })
            })
            .collect()
    }

    /// Sign a checkpoint of the log as it is, send it to every configured witness with a
    /// consistency proof from the size that witness last cosigned, and keep the checkpoint with
    /// the cosignatures that verify (published at `GET /v1/audit/checkpoint/witnessed`).
    /// Returns the cosigned note and how many witnesses cosigned.
    pub async fn witness_checkpoint(&self) -> Result<(String, usize), ApiError> {
        let (size, _) = self.blocking(|s| s.audit_head()).await?;
        let note = self.sign_checkpoint(size).await?;
        let http = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(10))
            .build()
            .map_err(ApiError::internal)?;
        let mut cosignatures = String::new();
        let mut count = 0;
        for target in self.witness_targets() {
            match self.submit(&http, &target, size, &note).await {
                Ok(lines) => {
                    cosignatures.push_str(&lines);
                    count += 1;
                }
                Err(e) => tracing::warn!(witness = %target.url, error = %e, "not cosigned"),
            }
        }
        let witnessed = format!("{note}{cosignatures}");
        if let Ok(mut slot) = self.inner.witnessed.lock() {
            *slot = Some(witnessed.clone());
        }
        Ok((witnessed, count))
    }

    /// One witness: ask from the size it last cosigned (learned from a 409, which carries it).
    async fn submit(
        &self,
        http: &reqwest::Client,
        target: &WitnessTarget,
        size: u64,
        note: &str,
    ) -> Result<String, String> {
        let mut old = 0u64;
        for _ in 0..2 {
            let proof = self
                .consistency_proof(old.min(size), size)
                .await
                .map_err(|e| format!("{e:?}"))?;
            let mut body = format!("old {old}\n");
            for hash in &proof.proof {
                body.push_str(hash);
                body.push('\n');
            }
            body.push('\n');
            body.push_str(note);
            let response = http
                .post(format!("{}/add-checkpoint", target.url))
                .body(body)
                .send()
                .await
                .map_err(|e| e.to_string())?;
            let status = response.status();
            let text = response.text().await.map_err(|e| e.to_string())?;
            if status == reqwest::StatusCode::CONFLICT {
                match text.trim().parse::<u64>() {
                    Ok(latest) if latest != old && latest <= size => {
                        old = latest;
                        continue;
                    }
                    _ => return Err(format!("409: {}", text.trim())),
                }
            }
            if !status.is_success() {
                return Err(format!("{status}: {}", text.trim()));
            }
            // Keep only the lines that verify as this witness's cosignature of this note.
            let lines: String = text
                .lines()
                .filter(|line| {
                    let candidate = format!("{note}{line}\n");
                    crate::audit::note::valid_cosignatures(
                        &candidate,
                        std::slice::from_ref(&target.key),
                    )
                    .is_ok_and(|v| !v.is_empty())
                })
                .map(|line| format!("{line}\n"))
                .collect();
            if lines.is_empty() {
                return Err("no valid cosignature in the answer".into());
            }
            return Ok(lines);
        }
        Err("the witness's size kept changing".into())
    }
}
