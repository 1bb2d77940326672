//! Signed checkpoints of the audit log: a C2SP signed note (<https://c2sp.org/signed-note>) whose
//! text is a C2SP tlog-checkpoint (<https://c2sp.org/tlog-checkpoint>).
//!
//! ```text
//! example.com/countersign/audit          origin (also the signing key's name)
//! 42                                     size: the number of audit lines covered
//! 3q2+7w...=                             base64 of the RFC 9162 Merkle root of lines 1..=42
//! countersign.audit-checkpoint/2         format version: what line 3 means
//! time 2026-11-20T10:00:00.000Z          when the service signed it
//!
//! — example.com/countersign/audit <base64(key id || Ed25519 signature)>
//! — witness.example/w1 <base64(key id || timestamp || Ed25519 cosignature)>   (0 or more)
//! ```
//!
//! A chain alone cannot show that lines were cut from its end; a checkpoint can: whoever holds
//! one signed at size N can prove that a log shorter than N, or whose first N lines have another
//! Merkle root, is not the log the service kept. Version 2 (this service writes it) carries the
//! RFC 9162 Merkle tree head of [`crate::merkle`], exactly where tlog-checkpoint puts it, so
//! C2SP witnesses can cosign it and inclusion and consistency proofs check against it. Version 1
//! (still read, no longer written) carried the chain head instead (the SHA-256 of line N, which
//! commits to every earlier line through `prev_hash`); its version line kept generic clients from
//! taking it for a Merkle root. Extension lines are discouraged by tlog-checkpoint because log
//! monitors cannot audit them; these two carry nothing a monitor needs, and witnesses cosign the
//! first three lines.
//!
//! The key is the audit key, which also signs audit lines. The two messages cannot be confused:
//! an audit line's signed message begins with `countersign.audit/1\n` followed by a JSON object,
//! which never parses as a checkpoint (its second line is not a decimal number), and no origin
//! may equal `countersign.audit/1` (refused here, so never signed).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::{Signature, Signer as _, SigningKey, Verifier as _, VerifyingKey};
use sha2::{Digest as _, Sha256};

/// The version line this service writes: line 3 is the RFC 9162 Merkle root of the lines.
pub const CHECKPOINT_VERSION: &str = "countersign.audit-checkpoint/2";
/// The first version's line: line 3 is the audit chain head (read, no longer written).
pub const CHECKPOINT_VERSION_1: &str = "countersign.audit-checkpoint/1";
/// The path the default origin appends to the public URL's host.
pub const ORIGIN_PATH: &str = "/countersign/audit";
/// signed-note's signature type byte for Ed25519.
const ED25519_TYPE: u8 = 0x01;
/// signed-note asks verifiers to accept at least 16 signatures; more is refused as malformed.
const MAX_SIGNATURES: usize = 64;
/// The signature line prefix: EM DASH (U+2014), space.
const SIG_PREFIX: &str = "\u{2014} ";

/// What a checkpoint's third line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckpointHash {
    /// Version 1: the hash of line `size` (32 zero bytes when `size` is 0).
    ChainHead,
    /// Version 2: the RFC 9162 Merkle root of lines `1..=size`.
    MerkleRoot,
}

/// The facts a checkpoint states.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// The log's identity, also the signing key's name.
    pub origin: String,
    /// The number of audit lines covered.
    pub size: u64,
    /// The chain head or the Merkle root, as `kind` says.
    pub hash: [u8; 32],
    /// RFC 3339 time of signing.
    pub time: String,
    /// What `hash` is (the format version).
    pub kind: CheckpointHash,
}

/// Why a note is not a checkpoint signed by the expected key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckpointError {
    /// Not a signed note, or its text is not a version-1 checkpoint.
    #[error("malformed checkpoint: {0}")]
    Malformed(String),
    /// A signature line of the expected key (name and key id match) does not verify.
    #[error("the signature of {key_name} does not verify")]
    BadSignature { key_name: String },
    /// No signature line of the expected key.
    #[error(
        "not signed by the given key (no signature line for key name {key_name} and key id {key_id})"
    )]
    NotSigned { key_name: String, key_id: String },
    /// The origin is not the one the caller expects.
    #[error("checkpoint origin is {found:?}, expected {expected:?}")]
    WrongOrigin { expected: String, found: String },
}

pub(crate) fn malformed(why: impl Into<String>) -> CheckpointError {
    CheckpointError::Malformed(why.into())
}

/// Whether `name` may be a note key name (and so an origin): non-empty, no Unicode space, no
/// `+`, no control character, and never the audit line domain.
pub fn valid_origin(name: &str) -> bool {
    // The audit line domain without its newline (a unit test keeps the two in step).
    let audit_domain = b"countersign.audit/1";
    !name.is_empty()
        && name.as_bytes() != audit_domain
        && !name
            .chars()
            .any(|c| c.is_whitespace() || c == '+' || c.is_control())
}

/// The default origin for a public URL: its host (and port), then `/countersign/audit`.
pub fn default_origin(public_url: &str) -> String {
    let rest = public_url
        .split_once("://")
        .map_or(public_url, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    format!("{}{ORIGIN_PATH}", host.to_ascii_lowercase())
}

/// signed-note key id: SHA-256(name || 0x0A || 0x01 || public key)[:4].
pub fn key_id(name: &str, key: &VerifyingKey) -> [u8; 4] {
    let mut h = Sha256::new();
    h.update(name.as_bytes());
    h.update([b'\n', ED25519_TYPE]);
    h.update(key.as_bytes());
    let digest: [u8; 32] = h.finalize().into();
    let [a, b, c, d, ..] = digest;
    [a, b, c, d]
}

impl Checkpoint {
    /// The note text (the signed bytes).
    pub fn text(&self) -> String {
        let version = match self.kind {
            CheckpointHash::ChainHead => CHECKPOINT_VERSION_1,
            CheckpointHash::MerkleRoot => CHECKPOINT_VERSION,
        };
        format!(
            "{}\n{}\n{}\n{version}\ntime {}\n",
            self.origin,
            self.size,
            STANDARD.encode(self.hash),
            self.time
        )
    }

    /// The signed note: the text, a blank line, one Ed25519 signature line under `origin`.
    pub fn sign(&self, key: &SigningKey) -> Result<String, CheckpointError> {
        if !valid_origin(&self.origin) {
            return Err(malformed(format!(
                "origin {:?} cannot be a note key name",
                self.origin
            )));
        }
        let text = self.text();
        let signature = key.sign(text.as_bytes());
        let mut blob = key_id(&self.origin, &key.verifying_key()).to_vec();
        blob.extend_from_slice(&signature.to_bytes());
        Ok(format!(
            "{text}\n{SIG_PREFIX}{} {}\n",
            self.origin,
            STANDARD.encode(blob)
        ))
    }

    /// Parse a signed note and verify it under `key` (named by the checkpoint's origin, as this
    /// service signs). With `origin`, the checkpoint must also name that origin.
    pub fn verify(
        note: &str,
        key: &VerifyingKey,
        origin: Option<&str>,
    ) -> Result<Self, CheckpointError> {
        let (text, signatures) = split_note(note)?;
        let checkpoint = parse_text(text)?;
        if let Some(expected) = origin
            && expected != checkpoint.origin
        {
            return Err(CheckpointError::WrongOrigin {
                expected: expected.to_owned(),
                found: checkpoint.origin,
            });
        }
        let name = checkpoint.origin.as_str();
        let id = key_id(name, key);
        let mut verified = false;
        for line in signatures {
            let (sig_name, blob) = parse_signature_line(line)?;
            // signed-note: a signature of an unknown key (name or id differs) is ignored.
            let Some(rest) = blob.strip_prefix(&id[..]).filter(|_| sig_name == name) else {
                continue;
            };
            let ok = <[u8; 64]>::try_from(rest)
                .map(|bytes| key.verify(text.as_bytes(), &Signature::from_bytes(&bytes)))
                .is_ok_and(|r| r.is_ok());
            if !ok {
                // A known key's signature that fails rejects the whole note.
                return Err(CheckpointError::BadSignature {
                    key_name: name.to_owned(),
                });
            }
            verified = true;
        }
        if !verified {
            return Err(CheckpointError::NotSigned {
                key_name: name.to_owned(),
                key_id: hex(&id),
            });
        }
        Ok(checkpoint)
    }
}

/// How a log compares with a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogComparison {
    /// Line `size` of the log hashes to the checkpoint's hash (or `size` is 0): the log contains
    /// the checkpointed log as its prefix.
    Covers,
    /// The log has fewer lines than the checkpoint: lines were cut.
    Shorter { size: u64, lines: u64 },
    /// Line `size` hashes to another value: the log is not the one the checkpoint signed.
    Diverges {
        size: u64,
        expected: [u8; 32],
        found: [u8; 32],
    },
}

impl Checkpoint {
    /// Compare a log file (JSON lines, each ending in a newline) with this checkpoint.
    ///
    /// Version 2: the Merkle root of the first `size` lines is computed. Version 1: only line
    /// `size` is hashed: through `prev_hash`, its hash commits to every line before it, which
    /// [`crate::verify_log`] checks separately.
    pub fn compare(&self, log: &[u8]) -> LogComparison {
        let mut lines = log.split(|b| *b == b'\n');
        if log.last() == Some(&b'\n') || log.is_empty() {
            // The piece after the final newline is not a line.
            lines.next_back();
        }
        let take = usize::try_from(self.size).unwrap_or(usize::MAX);
        let count = lines.clone().count() as u64;
        let at_size = match self.kind {
            CheckpointHash::MerkleRoot => {
                // The right edge is all a root needs: memory stays flat however long the log.
                let mut edge = crate::merkle::Frontier::new();
                for line in lines.take(take) {
                    edge.push(crate::merkle::leaf_hash(line));
                }
                (edge.size() == self.size).then(|| edge.root())
            }
            CheckpointHash::ChainHead => take
                .checked_sub(1)
                .and_then(|index| lines.nth(index))
                .map(|line| Sha256::digest(line).into()),
        };
        self.judge(count, at_size)
    }

    /// How a log of `lines` lines compares with this checkpoint, given what the log holds at
    /// the checkpoint's size (`at_size`: the Merkle root of its first `size` lines, or for
    /// version 1 the hash of line `size`; `None` when the log is shorter or for size 0).
    pub fn judge(&self, lines: u64, at_size: Option<[u8; 32]>) -> LogComparison {
        let size = self.size;
        let found = match (self.kind, size) {
            (CheckpointHash::MerkleRoot, 0) => crate::merkle::empty_root(),
            (CheckpointHash::ChainHead, 0) => crate::GENESIS_HASH,
            _ if lines < size => return LogComparison::Shorter { size, lines },
            _ => match at_size {
                Some(found) => found,
                None => return LogComparison::Shorter { size, lines },
            },
        };
        if found == self.hash {
            LogComparison::Covers
        } else {
            LogComparison::Diverges {
                size,
                expected: self.hash,
                found,
            }
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Split a signed note into its text (with its final newline) and its signature lines.
pub(crate) fn split_note(note: &str) -> Result<(&str, Vec<&str>), CheckpointError> {
    if note.chars().any(|c| c.is_ascii_control() && c != '\n') {
        return Err(malformed(
            "a signed note contains no control character but newline",
        ));
    }
    let body = note
        .strip_suffix('\n')
        .ok_or_else(|| malformed("a signed note ends with a newline"))?;
    // The text is separated from the signatures by the last blank line.
    let split = body
        .rfind("\n\n")
        .ok_or_else(|| malformed("no blank line before the signatures"))?;
    let text = note
        .get(..=split)
        .ok_or_else(|| malformed("no note text"))?;
    let signatures: Vec<&str> = body
        .get(split + 2..)
        .ok_or_else(|| malformed("no signature line"))?
        .split('\n')
        .collect();
    if signatures.len() > MAX_SIGNATURES {
        return Err(malformed(format!(
            "more than {MAX_SIGNATURES} signature lines"
        )));
    }
    Ok((text, signatures))
}

/// `— <name> <base64(key id || signature)>`.
pub(crate) fn parse_signature_line(line: &str) -> Result<(&str, Vec<u8>), CheckpointError> {
    let rest = line.strip_prefix(SIG_PREFIX).ok_or_else(|| {
        malformed(format!(
            "signature line {line:?} does not start with \"— \""
        ))
    })?;
    let (name, b64) = rest
        .split_once(' ')
        .ok_or_else(|| malformed(format!("signature line {line:?} has no signature")))?;
    if !valid_origin(name) {
        return Err(malformed(format!("invalid key name {name:?}")));
    }
    let blob = STANDARD
        .decode(b64)
        .map_err(|_| malformed(format!("signature of {name} is not base64")))?;
    if blob.len() < 5 {
        return Err(malformed(format!("signature of {name} is too short")));
    }
    Ok((name, blob))
}

/// The checkpoint text: origin, size, hash, version line, time line, nothing else.
fn parse_text(text: &str) -> Result<Checkpoint, CheckpointError> {
    let lines: Vec<&str> = text
        .strip_suffix('\n')
        .unwrap_or(text)
        .split('\n')
        .collect();
    let [origin, size, hash, version, time] = lines.as_slice() else {
        return Err(malformed(format!(
            "a checkpoint has 5 lines (origin, size, hash, {CHECKPOINT_VERSION}, time), not {}",
            lines.len()
        )));
    };
    if !valid_origin(origin) {
        return Err(malformed(format!("invalid origin {origin:?}")));
    }
    let size_ok = !size.is_empty()
        && size.bytes().all(|b| b.is_ascii_digit())
        && (*size == "0" || !size.starts_with('0'));
    let size: u64 = size_ok
        .then(|| size.parse().ok())
        .flatten()
        .ok_or_else(|| {
            malformed(format!(
                "size {size:?} is not a decimal without leading zeros"
            ))
        })?;
    let hash: [u8; 32] = STANDARD
        .decode(hash)
        .ok()
        .filter(|h| STANDARD.encode(h) == *hash)
        .and_then(|h| h.try_into().ok())
        .ok_or_else(|| malformed(format!("hash {hash:?} is not base64 of 32 bytes")))?;
    let kind = match *version {
        CHECKPOINT_VERSION => CheckpointHash::MerkleRoot,
        CHECKPOINT_VERSION_1 => CheckpointHash::ChainHead,
        _ => {
            return Err(malformed(format!(
                "unsupported checkpoint version line {version:?} (this verifier reads \
                 {CHECKPOINT_VERSION} and {CHECKPOINT_VERSION_1})"
            )));
        }
    };
    let time = time
        .strip_prefix("time ")
        .filter(|t| {
            time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339).is_ok()
        })
        .ok_or_else(|| malformed(format!("{time:?} is not `time <RFC 3339>`")))?;
    Ok(Checkpoint {
        origin: (*origin).to_owned(),
        size,
        hash,
        time: time.to_owned(),
        kind,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Known answer computed independently of this code, by
    /// `crates/countersign-audit/tests/checkpoint_kat.py` (Python's hashlib and the
    /// `cryptography` package's Ed25519).
    const KAT_NOTE: &str = include_str!("../tests/checkpoint_kat.txt");

    fn kat() -> (Checkpoint, SigningKey) {
        let checkpoint = Checkpoint {
            origin: "approvals.example.com/countersign/audit".into(),
            size: 3,
            hash: Sha256::digest(b"line 3").into(),
            time: "2026-11-20T10:00:00.000Z".into(),
            kind: CheckpointHash::ChainHead,
        };
        (checkpoint, SigningKey::from_bytes(&[7; 32]))
    }

    #[test]
    fn known_answer_matches_an_independent_implementation() {
        let (checkpoint, key) = kat();
        assert_eq!(checkpoint.sign(&key).unwrap(), KAT_NOTE);
        let parsed = Checkpoint::verify(KAT_NOTE, &key.verifying_key(), None).unwrap();
        assert_eq!(parsed, checkpoint);
    }

    #[test]
    fn round_trips_and_pins_the_origin() {
        let (checkpoint, key) = kat();
        let note = checkpoint.sign(&key).unwrap();
        let origin = Some("approvals.example.com/countersign/audit");
        assert_eq!(
            Checkpoint::verify(&note, &key.verifying_key(), origin).unwrap(),
            checkpoint
        );
        assert!(matches!(
            Checkpoint::verify(&note, &key.verifying_key(), Some("other.example/log")),
            Err(CheckpointError::WrongOrigin { .. })
        ));
    }

    #[test]
    fn another_key_or_an_edited_text_is_refused() {
        let (checkpoint, key) = kat();
        let note = checkpoint.sign(&key).unwrap();
        let other = SigningKey::from_bytes(&[8; 32]).verifying_key();
        assert!(matches!(
            Checkpoint::verify(&note, &other, None),
            Err(CheckpointError::NotSigned { .. })
        ));
        // A larger size under the same signature: the known key's signature fails.
        let edited = note.replacen("\n3\n", "\n4\n", 1);
        assert!(matches!(
            Checkpoint::verify(&edited, &key.verifying_key(), None),
            Err(CheckpointError::BadSignature { .. })
        ));
        // A changed origin changes the key name, hence the key id: no signature of the key.
        let renamed = note.replace("approvals.example.com", "evil.example.com");
        assert!(matches!(
            Checkpoint::verify(&renamed, &key.verifying_key(), None),
            Err(CheckpointError::NotSigned { .. })
        ));
    }

    #[test]
    fn unknown_signatures_are_ignored_and_a_known_one_is_required() {
        let (checkpoint, key) = kat();
        let note = checkpoint.sign(&key).unwrap();
        let witness = Checkpoint {
            origin: "witness.example/w1".into(),
            ..checkpoint.clone()
        };
        // A cosignature line of an unknown key, appended: still verifies.
        let other_line = witness
            .sign(&SigningKey::from_bytes(&[9; 32]))
            .unwrap()
            .rsplit_once("\n\n")
            .map(|(_, sig)| sig.to_owned())
            .unwrap();
        let cosigned = format!("{note}{other_line}");
        assert_eq!(
            Checkpoint::verify(&cosigned, &key.verifying_key(), None).unwrap(),
            checkpoint
        );
        // Only the unknown signature: refused.
        let text = checkpoint.text();
        let alone = format!("{text}\n{other_line}");
        assert!(matches!(
            Checkpoint::verify(&alone, &key.verifying_key(), None),
            Err(CheckpointError::NotSigned { .. })
        ));
    }

    #[test]
    fn malformed_notes_are_refused() {
        let (checkpoint, key) = kat();
        let vk = key.verifying_key();
        let note = checkpoint.sign(&key).unwrap();
        let cases = [
            note.trim_end().to_owned(),          // no final newline
            note.replacen("\n\n", "\n", 1),      // no blank line
            note.replacen("\n3\n", "\n03\n", 1), // leading zero
            note.replacen("\n3\n", "\n-3\n", 1), // sign
            note.replacen(CHECKPOINT_VERSION_1, "countersign.audit-checkpoint/3", 1),
            note.replacen("time 2026", "time x2026", 1), // not RFC 3339
            note.replacen("\u{2014} ", "- ", 1),         // not an em dash
            note.replacen("\ntime", "\r\ntime", 1),      // control character
            note.replacen("=\n", "\n", 1),               // unpadded base64
            note.replacen("\n\n", "\nextra\n\n", 1),     // an unknown extension line
        ];
        for (i, case) in cases.iter().enumerate() {
            assert!(
                matches!(
                    Checkpoint::verify(case, &vk, None),
                    Err(CheckpointError::Malformed(_))
                ),
                "case {i}: {case:?}"
            );
        }
    }

    #[test]
    fn a_log_is_compared_with_line_size() {
        let log = b"one\ntwo\nthree\n";
        let at = |size: u64, line: &[u8]| Checkpoint {
            origin: "o.example/log".into(),
            size,
            hash: Sha256::digest(line).into(),
            time: "2026-11-20T10:00:00Z".into(),
            kind: CheckpointHash::ChainHead,
        };
        assert_eq!(at(2, b"two").compare(log), LogComparison::Covers);
        assert_eq!(at(3, b"three").compare(log), LogComparison::Covers);
        assert_eq!(
            at(4, b"four").compare(log),
            LogComparison::Shorter { size: 4, lines: 3 }
        );
        assert!(matches!(
            at(2, b"TWO").compare(log),
            LogComparison::Diverges { size: 2, .. }
        ));
        let empty = Checkpoint {
            hash: crate::GENESIS_HASH,
            ..at(0, b"")
        };
        assert_eq!(empty.compare(b""), LogComparison::Covers);
        assert_eq!(
            at(1, b"one").compare(b""),
            LogComparison::Shorter { size: 1, lines: 0 }
        );
    }

    #[test]
    fn a_version_2_checkpoint_is_compared_by_merkle_root() {
        let log = b"one\ntwo\nthree\n";
        let tree = crate::merkle::MerkleTree::from_lines([&b"one"[..], b"two", b"three"]);
        let at = |size: u64, hash: [u8; 32]| Checkpoint {
            origin: "o.example/log".into(),
            size,
            hash,
            time: "2026-11-20T10:00:00Z".into(),
            kind: CheckpointHash::MerkleRoot,
        };
        for size in 0..=3 {
            let root = tree.root(size).unwrap_or_default();
            assert_eq!(at(size, root).compare(log), LogComparison::Covers);
        }
        let root2 = tree.root(2).unwrap_or_default();
        // The chain head of line 2 is not its Merkle root.
        assert!(matches!(
            at(2, Sha256::digest(b"two").into()).compare(log),
            LogComparison::Diverges { size: 2, .. }
        ));
        assert!(matches!(
            at(2, root2).compare(b"one\nTWO\nthree\n"),
            LogComparison::Diverges { size: 2, .. }
        ));
        assert_eq!(
            at(4, root2).compare(log),
            LogComparison::Shorter { size: 4, lines: 3 }
        );
        // Version 2 round-trips through a signed note with its version line.
        let key = SigningKey::from_bytes(&[7; 32]);
        let note = at(2, root2).sign(&key).unwrap_or_default();
        assert!(note.contains("\ncountersign.audit-checkpoint/2\n"));
        assert_eq!(
            Checkpoint::verify(&note, &key.verifying_key(), None),
            Ok(at(2, root2))
        );
    }

    #[test]
    fn origins() {
        assert_eq!(
            default_origin("https://Approvals.Example.com:8443/base"),
            "approvals.example.com:8443/countersign/audit"
        );
        assert_eq!(
            default_origin("http://127.0.0.1:8080"),
            "127.0.0.1:8080/countersign/audit"
        );
        assert!(valid_origin("example.com/log"));
        assert!(!valid_origin(""));
        assert!(!valid_origin("a b"));
        assert!(!valid_origin("a+b"));
        assert!(!valid_origin("countersign.audit/1"));
        assert_eq!(crate::AUDIT_DOMAIN, b"countersign.audit/1\n");
        let bad = Checkpoint {
            origin: "countersign.audit/1".into(),
            ..kat().0
        };
        assert!(bad.sign(&kat().1).is_err());
    }
}
