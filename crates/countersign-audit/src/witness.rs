//! A C2SP tlog-witness (<https://c2sp.org/tlog-witness>): what `POST /add-checkpoint` answers.
//! The HTTP route around it lives in the service (`countersign_server::witness`).
//!
//! For each log it knows (by origin, with the log's Ed25519 note key) the witness keeps the
//! last checkpoint it cosigned, in a file of its state directory, and cosigns a new checkpoint
//! only with a consistency proof from that one. So it never cosigns two histories of one log
//! (a fork) and never a smaller tree after a larger one (a rollback), across restarts too, for
//! as long as its state directory survives.
//!
//! Answers, as the specification fixes them: 200 with one `cosignature/v1` line; 400 for a
//! malformed body or an old size above the checkpoint's; 403 when no signature of the log's key
//! verifies; 404 for an unknown origin; 409 (`text/x.tlog.size`, the size it last cosigned) when
//! the old size is not that size, or when the sizes are equal and the roots differ; 422 when the
//! consistency proof does not verify. The check and the write of the new state happen under one
//! lock, so two concurrent requests cannot roll the state back.

use crate::merkle::{Hash, verify_consistency};
use crate::note::{
    NoteSigner, NoteVerifier, TYPE_ED25519, checkpoint_head, note_parts, verify_log_signature,
};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use sha2::{Digest as _, Sha256};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// tlog-witness: a client sends at most 63 consistency proof lines.
const MAX_PROOF_LINES: usize = 63;
/// A request body larger than this is refused (a checkpoint with signatures is well under it).
pub const MAX_BODY: usize = 64 * 1024;

/// The witness: its cosigning key, the logs it witnesses, where it keeps their state.
#[derive(Debug)]
pub struct Witness {
    signer: NoteSigner,
    logs: HashMap<String, NoteVerifier>,
    state_dir: PathBuf,
    /// Held from reading a log's state to writing its new state.
    lock: Mutex<()>,
}

/// What `add-checkpoint` answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
}

fn answer(status: u16, body: impl Into<String>) -> Answer {
    Answer {
        status,
        content_type: "text/plain; charset=utf-8",
        body: body.into(),
    }
}

impl Witness {
    /// A witness of `logs` (Ed25519 note keys, type 0x01; the key name is the log's origin),
    /// keeping its state in `state_dir` (created if needed).
    pub fn new(
        signer: NoteSigner,
        logs: Vec<NoteVerifier>,
        state_dir: &Path,
    ) -> anyhow::Result<Self> {
        let mut map = HashMap::new();
        for log in logs {
            anyhow::ensure!(
                log.kind == TYPE_ED25519,
                "log key {} is not an Ed25519 note key (type 0x01)",
                log.vkey()
            );
            map.insert(log.name.clone(), log);
        }
        std::fs::create_dir_all(state_dir)?;
        Ok(Self {
            signer,
            logs: map,
            state_dir: state_dir.to_owned(),
            lock: Mutex::new(()),
        })
    }

    /// The witness's public key (what logs and verifiers configure).
    pub fn vkey(&self) -> String {
        self.signer.cosigner().vkey()
    }

    fn state_path(&self, origin: &str) -> PathBuf {
        let digest: [u8; 32] = Sha256::digest(origin.as_bytes()).into();
        let name: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        self.state_dir.join(format!("{name}.checkpoint"))
    }

    /// The size and root of the last checkpoint cosigned for `origin` (`None`: never).
    pub fn latest(&self, origin: &str) -> anyhow::Result<Option<(u64, Hash)>> {
        let path = self.state_path(origin);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let (body, _) =
            note_parts(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        let (_, size, root) =
            checkpoint_head(body).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        Ok(Some((size, root)))
    }

    /// Handle one `add-checkpoint` body at POSIX time `now`.
    pub fn add_checkpoint(&self, body: &str, now: u64) -> Answer {
        let Some((old, proof, note)) = parse_request(body) else {
            return answer(400, "malformed add-checkpoint body\n");
        };
        let Ok((text, _)) = note_parts(note) else {
            return answer(400, "the checkpoint is not a signed note\n");
        };
        let Ok((origin, size, root)) = checkpoint_head(text) else {
            return answer(400, "the checkpoint text is malformed\n");
        };
        let Some(log) = self.logs.get(&origin) else {
            return answer(404, format!("unknown log {origin}\n"));
        };
        if verify_log_signature(note, log).is_err() {
            return answer(403, "no valid signature of the log's key\n");
        }
        if old > size {
            return answer(400, "the old size is above the checkpoint size\n");
        }
        let Ok(_guard) = self.lock.lock() else {
            return answer(500, "witness state lock poisoned\n");
        };
        let latest = match self.latest(&origin) {
            Ok(latest) => latest,
            Err(e) => {
                tracing::error!(error = %e, "witness state unreadable");
                return answer(500, "witness state unreadable\n");
            }
        };
        let (stored_size, stored_root) = latest.unwrap_or((0, crate::merkle::empty_root()));
        if old != stored_size {
            return Answer {
                status: 409,
                content_type: "text/x.tlog.size",
                body: format!("{stored_size}\n"),
            };
        }
        if old == size && latest.is_some() && root != stored_root {
            return Answer {
                status: 409,
                content_type: "text/x.tlog.size",
                body: format!("{stored_size}\n"),
            };
        }
        if verify_consistency(old, size, &stored_root, &root, &proof).is_err() {
            tracing::warn!(%origin, old, size, "consistency proof refused: kept as evidence");
            let _ = std::fs::write(
                self.state_path(&origin)
                    .with_extension(format!("refused-{size}")),
                note,
            );
            return answer(422, "the consistency proof does not verify\n");
        }
        if let Err(e) = write_atomically(&self.state_path(&origin), note) {
            tracing::error!(error = %e, "witness state unwritable");
            return answer(500, "witness state unwritable\n");
        }
        answer(200, self.signer.cosign(text, now))
    }
}

/// `old N\n`, up to 63 base64 hash lines, an empty line, then the checkpoint note.
fn parse_request(body: &str) -> Option<(u64, Vec<Hash>, &str)> {
    let (first, mut rest) = body.split_once('\n')?;
    let old = first.strip_prefix("old ")?;
    if old.is_empty()
        || !old.bytes().all(|b| b.is_ascii_digit())
        || (old.len() > 1 && old.starts_with('0'))
    {
        return None;
    }
    let old: u64 = old.parse().ok()?;
    let mut proof = Vec::new();
    loop {
        let (line, after) = rest.split_once('\n')?;
        rest = after;
        if line.is_empty() {
            break;
        }
        if proof.len() == MAX_PROOF_LINES {
            return None;
        }
        let hash = STANDARD.decode(line).ok()?;
        proof.push(<[u8; 32]>::try_from(hash).ok()?);
    }
    Some((old, proof, rest))
}

/// Write `text` to a temporary file, flush it to disk, and rename it over `path`: a crash
/// leaves the old state or the new one, never half of one.
fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent()
        && let Ok(d) = std::fs::File::open(dir)
    {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::merkle::MerkleTree;
    use crate::{Checkpoint, CheckpointHash};
    use ed25519_dalek::SigningKey;

    const ORIGIN: &str = "log.example/countersign/audit";

    fn log_key() -> SigningKey {
        SigningKey::from_bytes(&[1; 32])
    }

    fn witness(dir: &Path) -> Witness {
        let log = NoteVerifier {
            name: ORIGIN.into(),
            kind: TYPE_ED25519,
            key: log_key().verifying_key(),
        };
        let signer = NoteSigner::from_seed("witness.example/w1", [2; 32]).unwrap();
        Witness::new(signer, vec![log], dir).unwrap()
    }

    fn tree(n: usize, salt: &str) -> MerkleTree {
        let lines: Vec<String> = (0..n).map(|i| format!("{salt}{i}")).collect();
        MerkleTree::from_lines(lines.iter().map(|l| l.as_bytes()))
    }

    fn note(t: &MerkleTree, size: u64) -> String {
        Checkpoint {
            origin: ORIGIN.into(),
            size,
            hash: t.root(size).unwrap(),
            time: "2026-12-03T10:00:00Z".into(),
            kind: CheckpointHash::MerkleRoot,
        }
        .sign(&log_key())
        .unwrap()
    }

    fn body(old: u64, proof: &[Hash], note: &str) -> String {
        let mut b = format!("old {old}\n");
        for h in proof {
            b.push_str(&STANDARD.encode(h));
            b.push('\n');
        }
        format!("{b}\n{note}")
    }

    fn scratch(label: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "countersign-witness-{label}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        ));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn cosigns_a_consistent_history_and_refuses_forks_and_rollbacks() {
        let dir = scratch("unit");
        let w = witness(&dir);
        let t = tree(20, "a");
        let a = w.add_checkpoint(&body(0, &[], &note(&t, 10)), 1);
        assert_eq!(a.status, 200, "{a:?}");
        let cosigned = format!("{}{}", note(&t, 10), a.body);
        let keys = [w.signer.cosigner()];
        assert_eq!(
            crate::note::valid_cosignatures(&cosigned, &keys).map(|v| v.len()),
            Ok(1)
        );
        // Stale old size: 409 with the size it holds.
        let stale = w.add_checkpoint(&body(0, &[], &note(&t, 20)), 2);
        assert_eq!((stale.status, stale.body.as_str()), (409, "10\n"));
        assert_eq!(stale.content_type, "text/x.tlog.size");
        // Consistent growth: cosigned.
        let proof = t.consistency_proof(10, 20).unwrap();
        assert_eq!(
            w.add_checkpoint(&body(10, &proof, &note(&t, 20)), 3).status,
            200
        );
        // Rollback: a smaller tree after the larger one.
        let back = w.add_checkpoint(&body(20, &[], &note(&t, 15)), 4);
        assert_eq!(back.status, 400);
        let back = w.add_checkpoint(&body(10, &[], &note(&t, 15)), 4);
        assert_eq!((back.status, back.body.as_str()), (409, "20\n"));
        // A fork at the same size: 409.
        let fork = tree(30, "b");
        let same = w.add_checkpoint(&body(20, &[], &note(&fork, 20)), 5);
        assert_eq!(same.status, 409);
        // A fork that grows: its proof does not lead to the cosigned root.
        let proof = fork.consistency_proof(20, 30).unwrap();
        assert_eq!(
            w.add_checkpoint(&body(20, &proof, &note(&fork, 30)), 6)
                .status,
            422
        );
        // The state survives a restart.
        drop(w);
        let w = witness(&dir);
        assert_eq!(w.latest(ORIGIN).unwrap().map(|l| l.0), Some(20));
        let proof = t.consistency_proof(20, 20).unwrap();
        assert_eq!(
            w.add_checkpoint(&body(20, &proof, &note(&t, 20)), 7).status,
            200
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn unknown_logs_bad_signatures_and_malformed_bodies() {
        let dir = scratch("refusals");
        let w = witness(&dir);
        let t = tree(4, "a");
        let other = Checkpoint {
            origin: "other.example/log".into(),
            size: 4,
            hash: t.root(4).unwrap(),
            time: "2026-12-03T10:00:00Z".into(),
            kind: CheckpointHash::MerkleRoot,
        };
        let unknown = other.sign(&log_key()).unwrap();
        assert_eq!(w.add_checkpoint(&body(0, &[], &unknown), 1).status, 404);
        let forged = Checkpoint {
            origin: ORIGIN.into(),
            ..other
        }
        .sign(&SigningKey::from_bytes(&[9; 32]))
        .unwrap();
        assert_eq!(w.add_checkpoint(&body(0, &[], &forged), 1).status, 403);
        for bad in [
            "",
            "old\n\n",
            "old 01\n\n",
            "new 0\n\n",
            "old 0\nnot base64\n\n",
        ] {
            assert_eq!(w.add_checkpoint(bad, 1).status, 400, "{bad:?}");
        }
        let too_long = body(0, &[[0; 32]; 64], &note(&t, 4));
        assert_eq!(w.add_checkpoint(&too_long, 1).status, 400);
        // A non-empty proof from size 0 does not verify.
        assert_eq!(
            w.add_checkpoint(&body(0, &[[0; 32]], &note(&t, 4)), 1)
                .status,
            422
        );
        assert_eq!(w.add_checkpoint(&body(0, &[], &note(&t, 4)), 1).status, 200);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
