//! C2SP tlog-proof@v1 (<https://c2sp.org/tlog-proof>, text of C2SP/C2SP commit 5ba5ee8; no
//! version tag yet): an inclusion proof that travels alone and is checked offline.
//!
//! ```text
//! c2sp.org/tlog-proof@v1
//! extra <base64 of the audit line>
//! index 41
//! <base64 hash>                          the audit path, leaf side first
//! ...
//!
//! <the signed checkpoint, verbatim, with any cosignatures>
//! ```
//!
//! The leaf is application-defined (step 1 of the spec's verification). Here it is an audit
//! line: the service puts the line in `extra`, so the holder of a receipt needs nothing else,
//! and the line is believed only because its RFC 6962 leaf hash, `SHA-256(0x00 || line)`, walks
//! up the path to the root of a checkpoint the policy trusts. The unauthenticated `extra` is
//! never trusted on its own (the spec's rule): a verifier that kept its own copy of the line
//! passes it instead, and [`TlogProof::verify`] takes the leaf's bytes from the caller either
//! way.

use crate::checkpoint::CheckpointError;
use crate::merkle::{Hash, ProofError, leaf_hash, verify_inclusion};
use crate::policy::{Policy, Witnessing};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

/// The first line of a proof.
pub const TLOG_PROOF_V1: &str = "c2sp.org/tlog-proof@v1";
/// The file extension the spec recommends.
pub const TLOG_PROOF_EXTENSION: &str = "tlog-proof";
/// The most path lines read: a u64-sized tree needs at most 64.
const MAX_PATH: usize = 64;

/// A parsed tlog-proof.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlogProof {
    /// Opaque, unauthenticated data (here: the audit line).
    pub extra: Option<Vec<u8>>,
    /// The entry's 0-based index (an audit line's `seq - 1`).
    pub index: u64,
    /// The audit path, leaf side first.
    pub path: Vec<Hash>,
    /// The checkpoint note, verbatim (ends with a newline).
    pub checkpoint: String,
}

/// Why a proof does not parse or does not hold, by the step of the spec that failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TlogProofError {
    /// The text is not a tlog-proof@v1.
    #[error("malformed tlog-proof: {0}")]
    Malformed(String),
    /// Step 2: the checkpoint is not a note of a trusted log (its origin or signature).
    #[error("the checkpoint is not signed by a trusted log: {0}")]
    Log(CheckpointError),
    /// Step 3: the witnesses that cosigned do not make the quorum.
    #[error("the checkpoint's cosignatures ({cosigned}) do not meet the policy's quorum")]
    NoQuorum { cosigned: String },
    /// Step 4: the path does not lead from the leaf to the checkpoint's root.
    #[error("the entry is not shown in the checkpoint's tree: {0}")]
    NotIncluded(ProofError),
}

fn malformed(why: impl Into<String>) -> TlogProofError {
    TlogProofError::Malformed(why.into())
}

/// What a proof that holds established.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedTlogProof {
    /// The log's origin line.
    pub origin: String,
    /// The checkpoint's tree size.
    pub size: u64,
    /// The entry's index.
    pub index: u64,
    /// The witnesses whose cosignatures verified.
    pub witnessing: Witnessing,
}

/// Standard base64 of exactly 32 bytes, canonical.
fn hash_line(line: &str) -> Option<Hash> {
    STANDARD
        .decode(line)
        .ok()
        .filter(|h| STANDARD.encode(h) == line)
        .and_then(|h| <[u8; 32]>::try_from(h).ok())
}

impl TlogProof {
    /// The proof text.
    pub fn to_text(&self) -> String {
        let mut out = format!("{TLOG_PROOF_V1}\n");
        if let Some(extra) = &self.extra {
            out.push_str(&format!("extra {}\n", STANDARD.encode(extra)));
        }
        out.push_str(&format!("index {}\n", self.index));
        for h in &self.path {
            out.push_str(&STANDARD.encode(h));
            out.push('\n');
        }
        out.push('\n');
        out.push_str(&self.checkpoint);
        out
    }

    /// Parse a proof. The checkpoint is kept verbatim; it is checked by [`Self::verify`].
    pub fn parse(text: &str) -> Result<Self, TlogProofError> {
        let (head, checkpoint) = text
            .split_once("\n\n")
            .ok_or_else(|| malformed("no empty line before the checkpoint"))?;
        let mut lines = head.split('\n');
        if lines.next() != Some(TLOG_PROOF_V1) {
            return Err(malformed(format!("the first line is not {TLOG_PROOF_V1}")));
        }
        let mut next = lines.next();
        let extra = match next.and_then(|l| l.strip_prefix("extra ")) {
            Some(b64) => {
                let bytes = STANDARD
                    .decode(b64)
                    .map_err(|_| malformed("the extra line is not base64"))?;
                next = lines.next();
                Some(bytes)
            }
            None => None,
        };
        let index = next
            .and_then(|l| l.strip_prefix("index "))
            .filter(|d| {
                !d.is_empty()
                    && d.bytes().all(|b| b.is_ascii_digit())
                    && (*d == "0" || !d.starts_with('0'))
            })
            .and_then(|d| d.parse::<u64>().ok())
            .ok_or_else(|| malformed("no `index N` line (a decimal without leading zeros)"))?;
        let mut path = Vec::new();
        for line in lines {
            if path.len() == MAX_PATH {
                return Err(malformed(format!("more than {MAX_PATH} path lines")));
            }
            path.push(hash_line(line).ok_or_else(|| {
                malformed(format!("path line {line:?} is not base64 of 32 bytes"))
            })?);
        }
        if checkpoint.is_empty() {
            return Err(malformed("no checkpoint"));
        }
        Ok(Self {
            extra,
            index,
            path,
            checkpoint: checkpoint.to_owned(),
        })
    }

    /// The spec's verification, in its order, for the entry whose bytes are `entry` (step 1:
    /// its leaf hash is RFC 6962's): step 2, the checkpoint is signed by a log of `policy`
    /// (or, when the policy lists no log, by `log`, which the caller knows from elsewhere);
    /// step 3, the policy's witnesses make its quorum; step 4, the path leads from the leaf to
    /// the checkpoint's root.
    pub fn verify(
        &self,
        entry: &[u8],
        policy: &Policy,
        log: Option<&crate::note::NoteVerifier>,
    ) -> Result<VerifiedTlogProof, TlogProofError> {
        // 1. The leaf hash.
        let leaf = leaf_hash(entry);
        // 2. A trusted log's checkpoint.
        let signed = match (policy.logs.is_empty(), log) {
            (false, _) => policy.check_log(&self.checkpoint).map(|_| ()),
            (true, Some(log)) => {
                crate::note::verify_log_signature(&self.checkpoint, log).and_then(|text| {
                    let (origin, _, _) = crate::note::checkpoint_head(text)?;
                    if origin == log.name {
                        Ok(())
                    } else {
                        Err(CheckpointError::WrongOrigin {
                            expected: log.name.clone(),
                            found: origin,
                        })
                    }
                })
            }
            (true, None) => Err(CheckpointError::Malformed(
                "the policy lists no log and no log key was given".to_owned(),
            )),
        };
        signed.map_err(TlogProofError::Log)?;
        let (text, _) = crate::note::note_parts(&self.checkpoint).map_err(TlogProofError::Log)?;
        let (origin, size, root) =
            crate::note::checkpoint_head(text).map_err(TlogProofError::Log)?;
        // 3. The witnesses' quorum.
        let witnessing = policy
            .witnessing(&self.checkpoint)
            .map_err(TlogProofError::Log)?;
        if !witnessing.quorum_met {
            let names: Vec<&str> = witnessing
                .cosigned
                .iter()
                .map(|(n, _)| n.as_str())
                .collect();
            return Err(TlogProofError::NoQuorum {
                cosigned: if names.is_empty() {
                    "none".to_owned()
                } else {
                    names.join(", ")
                },
            });
        }
        // 4. Inclusion.
        verify_inclusion(self.index, size, &leaf, &self.path, &root)
            .map_err(TlogProofError::NotIncluded)?;
        Ok(VerifiedTlogProof {
            origin,
            size,
            index: self.index,
            witnessing,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::merkle::MerkleTree;
    use crate::note::{NoteSigner, NoteVerifier, TYPE_ED25519};
    use crate::{Checkpoint, CheckpointHash};
    use ed25519_dalek::SigningKey;

    const ORIGIN: &str = "example.com/countersign/audit";

    fn lines() -> Vec<Vec<u8>> {
        (0..7)
            .map(|i| format!("{{\"seq\":{}}}", i + 1).into_bytes())
            .collect()
    }

    fn proof_of(index: u64, cosigners: &[&NoteSigner]) -> (TlogProof, NoteVerifier) {
        let lines = lines();
        let tree = MerkleTree::from_lines(lines.iter().map(Vec::as_slice));
        let key = SigningKey::from_bytes(&[7; 32]);
        let cp = Checkpoint {
            origin: ORIGIN.into(),
            size: 7,
            hash: tree.root(7).unwrap(),
            time: "2026-12-05T17:00:00Z".into(),
            kind: CheckpointHash::MerkleRoot,
        };
        let mut note = cp.sign(&key).unwrap();
        let text = cp.text();
        for w in cosigners {
            note.push_str(&w.cosign(&text, 1_790_000_000));
        }
        let proof = TlogProof {
            extra: Some(lines[index as usize].clone()),
            index,
            path: tree.inclusion_proof(index, 7).unwrap(),
            checkpoint: note,
        };
        let vkey = NoteVerifier {
            name: ORIGIN.into(),
            kind: TYPE_ED25519,
            key: key.verifying_key(),
        };
        (proof, vkey)
    }

    fn policy(text: &str) -> Policy {
        Policy::parse(text.as_bytes()).unwrap()
    }

    #[test]
    fn a_proof_round_trips_and_verifies_by_the_specs_steps() {
        let w = NoteSigner::from_seed("witness.example/w1", [3; 32]).unwrap();
        let (proof, log) = proof_of(3, &[&w]);
        let text = proof.to_text();
        assert!(text.starts_with("c2sp.org/tlog-proof@v1\nextra eyJzZXEiOjR9\nindex 3\n"));
        let parsed = TlogProof::parse(&text).unwrap();
        assert_eq!(parsed, proof);
        let entry = lines()[3].clone();
        let p = policy(&format!(
            "log {}\nwitness a {}\nquorum a\n",
            log.vkey(),
            w.cosigner().vkey()
        ));
        let ok = parsed.verify(&entry, &p, None).unwrap();
        assert_eq!((ok.origin.as_str(), ok.size, ok.index), (ORIGIN, 7, 3));
        // Another entry's bytes: step 4 fails.
        assert!(matches!(
            parsed.verify(&lines()[2], &p, None),
            Err(TlogProofError::NotIncluded(_))
        ));
        // A quorum the cosignatures do not meet: step 3 fails.
        let w2 = NoteSigner::from_seed("witness.example/w2", [4; 32]).unwrap();
        let two = policy(&format!(
            "log {}\nwitness a {}\nwitness b {}\ngroup g all a b\nquorum g\n",
            log.vkey(),
            w.cosigner().vkey(),
            w2.cosigner().vkey()
        ));
        assert!(matches!(
            parsed.verify(&entry, &two, None),
            Err(TlogProofError::NoQuorum { .. })
        ));
        // No log in the policy: the caller's key decides; another key fails step 2.
        let none = policy("quorum none\n");
        assert!(parsed.verify(&entry, &none, Some(&log)).is_ok());
        assert!(matches!(
            parsed.verify(&entry, &none, None),
            Err(TlogProofError::Log(_))
        ));
        let stranger = NoteVerifier {
            key: SigningKey::from_bytes(&[8; 32]).verifying_key(),
            ..log.clone()
        };
        assert!(matches!(
            parsed.verify(&entry, &none, Some(&stranger)),
            Err(TlogProofError::Log(_))
        ));
    }

    #[test]
    fn an_edited_proof_fails() {
        let (proof, log) = proof_of(6, &[]);
        let p = policy(&format!("log {}\nquorum none\n", log.vkey()));
        let entry = lines()[6].clone();
        assert!(proof.verify(&entry, &p, None).is_ok());
        // Another index under the same path.
        let moved = TlogProof {
            index: 5,
            ..proof.clone()
        };
        assert!(moved.verify(&entry, &p, None).is_err());
        // A flipped bit in the path.
        let mut flipped = proof.clone();
        flipped.path[0][0] ^= 1;
        assert!(flipped.verify(&entry, &p, None).is_err());
        // An edited checkpoint (size 7 to 8): its signature fails.
        let edited = TlogProof {
            checkpoint: proof.checkpoint.replacen("\n7\n", "\n8\n", 1),
            ..proof.clone()
        };
        assert!(matches!(
            edited.verify(&entry, &p, None),
            Err(TlogProofError::Log(_))
        ));
    }

    #[test]
    fn malformed_texts_are_refused() {
        let (proof, _) = proof_of(0, &[]);
        let text = proof.to_text();
        for bad in [
            text.replacen("c2sp.org/tlog-proof@v1", "c2sp.org/tlog-proof@v2", 1),
            text.replacen("index 0", "index 00", 1),
            text.replacen("index 0\n", "", 1),
            text.replacen("extra ", "extra !", 1),
            text.replacen("\n\n", "\n", 1),
            text.replacen("index 0\n", "index 0\nnot-a-hash\n", 1),
        ] {
            assert!(TlogProof::parse(&bad).is_err(), "{bad}");
        }
        // Without extra, and a proof of a tree of one entry (no path lines).
        let bare = TlogProof {
            extra: None,
            index: 0,
            path: vec![],
            checkpoint: proof.checkpoint.clone(),
        };
        assert_eq!(TlogProof::parse(&bare.to_text()), Ok(bare));
    }

    proptest::proptest! {
        /// No text panics the parser, whatever follows the format line.
        #[test]
        fn any_text_is_answered(text in "(c2sp.org/tlog-proof@v1\n)?(extra |index )?[ -~\n]{0,120}") {
            let _ = TlogProof::parse(&text);
        }
    }
}
