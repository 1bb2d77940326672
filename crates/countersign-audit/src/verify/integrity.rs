//! Integrity: each line's place in the chain (`seq`, `prev_hash`) and its seal.
//!
//! The service signs every line. An interposer signs only the last line of each write; the
//! lines before it are authenticated by that signature through the chain (each `prev_hash` is
//! the hash of the whole previous line), so an unsigned interposer line is accepted only if a
//! signed line follows it (docs/spec/service.md, "Audit log").

use super::report::{AuditIssue, Findings};
use crate::code::AuditCode;
use crate::seal::{AUDIT_DOMAIN, GENESIS_HASH, SIG_SUFFIX_LEN, line_hash};
use countersign::b64;
use ed25519_dalek::{Signature, VerifyingKey};
use serde_json::{Map, Value};

/// The chain as far as the walk has read it.
#[derive(Debug)]
pub(super) struct Chain {
    prev_hash: [u8; 32],
    expected_seq: u64,
    /// The first and last unsigned interposer line since the last signed line: covered by the
    /// next signed line through the chain, and a violation if none follows.
    uncovered: Option<(usize, usize)>,
}

impl Chain {
    pub(super) fn new() -> Self {
        Self {
            prev_hash: GENESIS_HASH,
            expected_seq: 1,
            uncovered: None,
        }
    }

    /// The hash of the last line read (the genesis hash before the first).
    pub(super) fn head(&self) -> [u8; 32] {
        self.prev_hash
    }

    /// Line `n`: its seal queued on `seals` (none for lines a `--from` checkpoint covers), its
    /// `seq` and `prev_hash` checked; the parsed object when the line is readable.
    pub(super) fn read(
        &mut self,
        n: usize,
        line: &str,
        seals: Option<&mut Seals<'_>>,
        f: &mut Findings,
    ) -> Option<Map<String, Value>> {
        let object = self.unseal(n, line, seals, f);
        if let Some(object) = &object {
            self.check_links(n, object, f);
        }
        self.prev_hash = line_hash(line);
        self.expected_seq = self.expected_seq.saturating_add(1);
        object
    }

    /// The object of a signed line (its seal queued), or of an unsigned interposer line (now
    /// waiting for a signed line to cover it).
    fn unseal(
        &mut self,
        n: usize,
        line: &str,
        seals: Option<&mut Seals<'_>>,
        f: &mut Findings,
    ) -> Option<Map<String, Value>> {
        let Some((unsigned, signature)) = split_signature(line) else {
            let object = unsigned_interposer_line(line);
            if object.is_some() {
                self.uncovered = Some((self.uncovered.map_or(n, |(first, _)| first), n));
            } else {
                f.push(
                    n,
                    AuditCode::NoSignature,
                    "line does not end with a \"sig\" member".into(),
                );
            }
            return object;
        };
        // This signature covers the unsigned lines before it (if it verifies: checked in a
        // batch, see `Seals`).
        self.uncovered = None;
        let object = match serde_json::from_str::<Value>(&unsigned) {
            Ok(Value::Object(object)) if !object.contains_key("sig") => object,
            Ok(_) => {
                f.push(
                    n,
                    AuditCode::NotObject,
                    "line is not a JSON object with one sig".into(),
                );
                return None;
            }
            Err(e) => {
                f.push(n, AuditCode::NotJson, format!("line is not JSON: {e}"));
                return None;
            }
        };
        if let Some(seals) = seals {
            let mut message = Vec::with_capacity(AUDIT_DOMAIN.len() + unsigned.len());
            message.extend_from_slice(AUDIT_DOMAIN);
            message.extend_from_slice(unsigned.as_bytes());
            seals.queue(n, message, signature);
        }
        Some(object)
    }

    /// `seq` and `prev_hash` of line `n`: the chain.
    fn check_links(&self, n: usize, object: &Map<String, Value>, f: &mut Findings) {
        let expected_seq = self.expected_seq;
        let seq = object.get("seq").and_then(Value::as_u64);
        if seq != Some(expected_seq) {
            f.push(
                n,
                AuditCode::SeqGap,
                format!(
                    "seq is {seq:?}, expected {expected_seq} (line removed, inserted or \
                     reordered)"
                ),
            );
        }
        let expected = b64::encode(&self.prev_hash);
        let got = object.get("prev_hash").and_then(Value::as_str);
        if got != Some(expected.as_str()) {
            f.push(
                n,
                AuditCode::ChainBreak,
                format!("prev_hash is {got:?}, the previous line hashes to {expected}"),
            );
        }
    }

    /// At the end of the log: unsigned lines no signature covers.
    pub(super) fn finish(&self, f: &mut Findings) {
        if let Some((first, last)) = self.uncovered {
            f.push(
                first,
                AuditCode::UnsignedTail,
                format!(
                    "lines {first} to {last} carry no signature and no signed line follows \
                     them (a write cut short, or lines added without the key)"
                ),
            );
        }
    }
}

/// An interposer line written without a signature: a JSON object of an `mcp_` kind with no
/// `sig` member.
fn unsigned_interposer_line(line: &str) -> Option<Map<String, Value>> {
    match serde_json::from_str::<Value>(line) {
        Ok(Value::Object(o))
            if !o.contains_key("sig")
                && o.get("kind")
                    .and_then(Value::as_str)
                    .is_some_and(super::mcp::is_mcp_kind) =>
        {
            Some(o)
        }
        _ => None,
    }
}

/// Split `...,"sig":"<86 chars>"}` into the signed text (`...}`) and the signature.
fn split_signature(line: &str) -> Option<(String, Signature)> {
    let cut = line.len().checked_sub(SIG_SUFFIX_LEN)?;
    let head = line.get(..cut)?;
    let suffix = line.get(cut..)?;
    let encoded = suffix.strip_prefix(",\"sig\":\"")?.strip_suffix("\"}")?;
    let bytes = b64::decode(encoded).ok()?;
    let signature = Signature::from_slice(&bytes).ok()?;
    Some((format!("{head}}}"), signature))
}

/// One seal to verify: (line, signed message, signature).
type Seal = (usize, Vec<u8>, Signature);

/// Lines per batch verification: large enough to amortize, small enough that a failed batch
/// (re-checked line by line to name the bad lines) costs little.
const SEAL_BATCH: usize = 256;

/// Seals queued for verification in batches.
#[derive(Debug)]
pub(super) struct Seals<'a> {
    key: &'a VerifyingKey,
    threads: usize,
    queued: Vec<Seal>,
}

impl<'a> Seals<'a> {
    pub(super) fn new(key: &'a VerifyingKey, threads: usize) -> Self {
        Self {
            key,
            threads,
            queued: Vec::new(),
        }
    }

    fn queue(&mut self, n: usize, message: Vec<u8>, signature: Signature) {
        self.queued.push((n, message, signature));
    }

    /// The queued seals, to verify on any thread ([`SealBatch::verify`]).
    pub(super) fn take(&mut self) -> SealBatch {
        SealBatch {
            key: *self.key,
            threads: self.threads,
            seals: std::mem::take(&mut self.queued),
        }
    }
}

/// Seals taken from the queue.
#[derive(Debug)]
pub(super) struct SealBatch {
    key: VerifyingKey,
    threads: usize,
    seals: Vec<Seal>,
}

impl SealBatch {
    /// A `bad_signature` finding for each seal that does not verify, in line order.
    pub(super) fn verify(self) -> Vec<AuditIssue> {
        let mut bad = check_seals(&self.key, &self.seals, self.threads);
        bad.sort_unstable();
        bad.into_iter()
            .map(|n| {
                AuditIssue::new(
                    n,
                    AuditCode::BadSignature,
                    "signature does not verify under the key".into(),
                )
            })
            .collect()
    }
}

/// The lines whose seal does not verify. Batches use ed25519-dalek's batch verification (one
/// multiscalar multiplication per batch); a batch that fails, and every batch under a weak key,
/// is re-checked line by line with `verify_strict`, which therefore has the last word on every
/// rejected line. Batches run on `threads` threads.
fn check_seals(key: &VerifyingKey, seals: &[Seal], threads: usize) -> Vec<usize> {
    let one_by_one = |batch: &[Seal]| -> Vec<usize> {
        batch
            .iter()
            .filter(|(_, m, s)| key.verify_strict(m, s).is_err())
            .map(|(n, _, _)| *n)
            .collect()
    };
    let check_batch = |batch: &[Seal]| -> Vec<usize> {
        if key.is_weak() {
            return one_by_one(batch);
        }
        let messages: Vec<&[u8]> = batch.iter().map(|(_, m, _)| m.as_slice()).collect();
        let signatures: Vec<Signature> = batch.iter().map(|(_, _, s)| *s).collect();
        let keys = vec![*key; batch.len()];
        match ed25519_dalek::verify_batch(&messages, &signatures, &keys) {
            Ok(()) => Vec::new(),
            Err(_) => one_by_one(batch),
        }
    };
    let batches: Vec<&[Seal]> = seals.chunks(SEAL_BATCH).collect();
    if threads <= 1 || batches.len() < 2 {
        return batches.into_iter().flat_map(check_batch).collect();
    }
    let per_thread = batches.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let handles: Vec<_> = batches
            .chunks(per_thread)
            .map(|group| {
                let handle = scope.spawn(move || {
                    group
                        .iter()
                        .flat_map(|b| check_batch(b))
                        .collect::<Vec<_>>()
                });
                (group, handle)
            })
            .collect();
        // A thread that did not finish proved nothing: every line of its group fails (closed).
        handles
            .into_iter()
            .flat_map(|(group, h)| {
                h.join().unwrap_or_else(|_| {
                    group
                        .iter()
                        .flat_map(|b| b.iter().map(|(n, _, _)| *n))
                        .collect()
                })
            })
            .collect()
    })
}
