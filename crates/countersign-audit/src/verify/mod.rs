//! Offline verification of an audit log, one line at a time.
//!
//! Each line passes four checkers, one per concern, in this order:
//! 1. [`integrity`]: the line's place in the chain (`seq`, `prev_hash`) and its seal, or the
//!    later seal that covers an interposer's unsigned line. Checked on every line, even after a
//!    failure, so one edited line reports where it is (its signature) and what it broke (the
//!    next line's `prev_hash`).
//! 2. [`structure`]: the service's kinds and the cross-line rules of seed 000 (one terminal line
//!    per approval, grants inside their authority, credentials enrolled and revoked in turn).
//! 3. [`mcp`]: the interposer's kinds (every intent gets exactly one outcome).
//! 4. [`evidence`]: every Decision's evidence re-verified by the core, when asked for.
//!
//! The walk streams: a line is read, checked and dropped. What stays in memory is what later
//! lines can still refer to (each approval's state, enrolled credentials, the calls still without
//! an outcome, the evidence nonces seen), plus seals and evidence checks waiting for their batch
//! (at most [`FLUSH_LINES`] lines' worth), so memory grows with the approvals a log records, not
//! with the bytes of its lines. The report is the same as a whole-file walk's: findings sorted
//! by line, each line's findings in the order the checkers found them, then the end-of-log notes.

mod evidence;
mod integrity;
mod mcp;
mod report;
mod structure;

pub use evidence::EvidenceCheck;
pub use report::{AuditIssue, AuditReport, IssueClass};

use crate::checkpoint::{Checkpoint, CheckpointHash};
use crate::code::AuditCode;
use crate::merkle::{Frontier, leaf_hash};
use countersign::b64;
use ed25519_dalek::VerifyingKey;
use report::Findings;
use std::io::BufRead;

/// Lines walked between two flushes of the queued seals and evidence checks: enough for full
/// batches on every thread, few enough that the queues stay a few megabytes.
const FLUSH_LINES: usize = 4096;

/// Verify a whole log against the service's public key (seals, chain and cross-line rules; no
/// evidence re-verification: see [`verify_log_with`]).
pub fn verify_log(bytes: &[u8], key: &VerifyingKey) -> AuditReport {
    verify_log_with(bytes, key, None)
}

/// Verify a whole log, and with `evidence` re-verify every Decision's evidence
/// (docs/spec/service.md, "audit verify").
pub fn verify_log_with(
    bytes: &[u8],
    key: &VerifyingKey,
    evidence: Option<&EvidenceCheck>,
) -> AuditReport {
    let options = VerifyOptions {
        evidence,
        ..VerifyOptions::default()
    };
    // Reading from memory cannot fail.
    verify_reader(bytes, key, &options).unwrap_or_default()
}

/// What [`verify_reader`] checks besides the log itself.
#[derive(Debug, Default, Clone, Copy)]
pub struct VerifyOptions<'a> {
    /// Re-verify every Decision's evidence under this policy.
    pub evidence: Option<&'a EvidenceCheck>,
    /// Signed checkpoints (already verified under the key) the log must contain: each adds a
    /// finding after the log's own (see [`AuditReport::check_checkpoint`]).
    pub checkpoints: &'a [Checkpoint],
    /// Incremental verification from a signed checkpoint already verified: the lines it covers
    /// are read for the Merkle root and for the state they leave (open approvals, enrolled
    /// credentials, ...), but their seals and evidence are not checked again and their findings
    /// are not reported (they were when the checkpoint's log was verified). The log must start
    /// with exactly the lines the checkpoint signed (`checkpoint_inconsistent` otherwise).
    pub from: Option<&'a Checkpoint>,
}

/// Verify a log read from `reader`, line by line (see the module documentation). Fails only
/// when `reader` does.
pub fn verify_reader(
    mut reader: impl BufRead,
    key: &VerifyingKey,
    options: &VerifyOptions<'_>,
) -> std::io::Result<AuditReport> {
    let quiet = options
        .from
        .map_or(0, |cp| usize::try_from(cp.size).unwrap_or(usize::MAX));
    let prepared = options.evidence.map(evidence::Prepared::new);
    std::thread::scope(|scope| {
        let mut walk = Walk::new(key, options, quiet, prepared.as_ref(), scope);
        if options.from.is_some() && quiet == 0 {
            walk.check_from(0);
        }
        let mut buf = Vec::new();
        let mut n = 0usize;
        loop {
            buf.clear();
            if reader.read_until(b'\n', &mut buf)? == 0 {
                break;
            }
            let terminated = buf.last() == Some(&b'\n');
            if terminated {
                buf.pop();
            }
            // A file of one newline has no line (the piece after the last newline is not a
            // line).
            if n == 0 && terminated && buf.is_empty() && reader.fill_buf()?.is_empty() {
                break;
            }
            let Ok(line) = std::str::from_utf8(&buf) else {
                return Ok(not_utf8());
            };
            n += 1;
            walk.line(n, line);
            if !terminated {
                walk.findings.push(
                    0,
                    AuditCode::Unterminated,
                    "the last line has no newline (a torn write?)".into(),
                );
            }
        }
        Ok(walk.finish(n))
    })
}

/// The report of a log that is not UTF-8: that finding alone (nothing else was judged).
fn not_utf8() -> AuditReport {
    let mut findings = Findings::new(0);
    findings.push(0, AuditCode::NotUtf8, "the log is not UTF-8 text".into());
    AuditReport {
        lines: 0,
        head: String::new(),
        issues: findings.into_sorted(),
    }
}

/// The state of one walk: the four checkers, the findings, the Merkle edge when a checkpoint
/// needs it, and the verification of the last flush, running while the walk reads on.
struct Walk<'a, 's, 'e> {
    scope: &'s std::thread::Scope<'s, 'e>,
    verifying: Option<Verifying<'s>>,
    findings: Findings,
    chain: integrity::Chain,
    seals: integrity::Seals<'a>,
    structure: structure::Structure,
    mcp: mcp::Calls,
    evidence: Option<evidence::Evidence<'a>>,
    /// Lines 1..=quiet are covered by `options.from`: read for state, not re-verified.
    quiet: usize,
    merkle: Option<Frontier>,
    /// The log as of each checkpoint's size: (Merkle root, the hash of line `size`).
    seen: Vec<Option<([u8; 32], [u8; 32])>>,
    options: &'a VerifyOptions<'a>,
    since_flush: usize,
}

/// Seals and Decisions verifying on a thread of their own: lines `first..=last`.
struct Verifying<'s> {
    first: usize,
    last: usize,
    handle: std::thread::ScopedJoinHandle<'s, Vec<report::AuditIssue>>,
}

impl<'a: 's, 's, 'e> Walk<'a, 's, 'e> {
    fn new(
        key: &'a VerifyingKey,
        options: &'a VerifyOptions<'a>,
        quiet: usize,
        prepared: Option<&'a evidence::Prepared<'a>>,
        scope: &'s std::thread::Scope<'s, 'e>,
    ) -> Self {
        let threads = threads(options.evidence.map_or(1, |e| e.threads));
        let needs_merkle = options.from.is_some() || !options.checkpoints.is_empty();
        Self {
            scope,
            verifying: None,
            findings: Findings::new(quiet),
            chain: integrity::Chain::new(),
            seals: integrity::Seals::new(key, threads),
            structure: structure::Structure::new(options.evidence.is_some()),
            mcp: mcp::Calls::default(),
            evidence: prepared.map(|p| evidence::Evidence::new(p, threads)),
            quiet,
            merkle: needs_merkle.then(Frontier::new),
            seen: vec![None; options.checkpoints.len()],
            options,
            since_flush: 0,
        }
    }

    /// Line `n`, in the order of the concerns.
    fn line(&mut self, n: usize, line: &str) {
        let verify = n > self.quiet;
        let object = self.chain.read(
            n,
            line,
            verify.then_some(&mut self.seals),
            &mut self.findings,
        );
        if let Some(object) = object {
            let kind = object.get("kind").and_then(|k| k.as_str()).unwrap_or("");
            if mcp::is_mcp_kind(kind) {
                self.mcp.line(n, kind, &object, &mut self.findings);
            } else {
                let evidence = self.evidence.as_mut().map(|e| (e, verify));
                self.structure
                    .line(n, kind, &object, evidence, &mut self.findings);
            }
        }
        self.merkle_line(n, line);
        if n == self.quiet {
            self.check_from(n);
        }
        self.since_flush += 1;
        if self.since_flush >= FLUSH_LINES {
            self.flush(n);
        }
    }

    /// The Merkle edge, and what each checkpoint's size looks like.
    fn merkle_line(&mut self, n: usize, line: &str) {
        let Some(edge) = self.merkle.as_mut() else {
            return;
        };
        edge.push(leaf_hash(line.as_bytes()));
        for (cp, seen) in self.options.checkpoints.iter().zip(self.seen.iter_mut()) {
            if usize::try_from(cp.size).ok() == Some(n) {
                *seen = Some((edge.root(), self.chain.head()));
            }
        }
    }

    /// At the `--from` checkpoint's size: the lines read so far must be the ones it signed.
    fn check_from(&mut self, n: usize) {
        let (Some(cp), Some(edge)) = (self.options.from, self.merkle.as_ref()) else {
            return;
        };
        let found = match cp.kind {
            CheckpointHash::MerkleRoot => edge.root(),
            CheckpointHash::ChainHead => self.chain.head(),
        };
        if found != cp.hash {
            self.findings.push(
                n.saturating_add(1),
                AuditCode::CheckpointInconsistent,
                format!(
                    "the checkpoint signed at {} says the first {} lines hash to {} but this \
                     log's first {n} lines hash to {}: a line before it was changed, or the \
                     checkpoint is another log's",
                    cp.time,
                    cp.size,
                    b64::encode(&cp.hash),
                    b64::encode(&found)
                ),
            );
        }
    }

    /// Hand the queued seals and evidence (lines up to `last`) to a thread of their own, once
    /// the previous flush's findings are in: the walk reads on while they are verified.
    fn flush(&mut self, last: usize) {
        self.collect();
        let seals = self.seals.take();
        let jobs = self.evidence.as_mut().map(evidence::Evidence::take);
        let handle = self.scope.spawn(move || {
            // Within one line, seals are reported before evidence (as the walk found them).
            let mut issues = seals.verify();
            if let Some(jobs) = jobs {
                issues.extend(jobs.judge());
            }
            issues
        });
        let first = last.saturating_sub(self.since_flush).saturating_add(1);
        self.verifying = Some(Verifying {
            first,
            last,
            handle,
        });
        self.since_flush = 0;
    }

    /// The findings of the flush in progress. A verification that did not finish proved
    /// nothing: its first line fails (closed), naming the lines it left unverified.
    fn collect(&mut self) {
        let Some(v) = self.verifying.take() else {
            return;
        };
        match v.handle.join() {
            Ok(issues) => issues.into_iter().for_each(|i| self.findings.add(i)),
            Err(_) => self.findings.push(
                v.first,
                AuditCode::BadSignature,
                format!(
                    "the verification of lines {} to {} did not complete",
                    v.first, v.last
                ),
            ),
        }
    }

    fn finish(mut self, lines: usize) -> AuditReport {
        if let Some(cp) = self.options.from
            && usize::try_from(cp.size).map_or(true, |size| size > lines)
        {
            // Line 0: the file as a whole (its lines are all under the checkpoint's size).
            self.findings.push(
                0,
                AuditCode::CheckpointInconsistent,
                format!(
                    "the checkpoint signed at {} covers {} lines but the log has {lines}",
                    cp.time, cp.size
                ),
            );
        }
        self.chain.finish(&mut self.findings);
        self.flush(lines);
        self.collect();
        let mut issues = self.findings.into_sorted();
        let mut notes = Findings::new(0);
        self.mcp.finish(&mut notes);
        self.structure.finish(&mut notes);
        issues.append(&mut notes.into_unsorted());
        let mut report = AuditReport {
            lines,
            head: b64::encode(&self.chain.head()),
            issues,
        };
        for (cp, seen) in self.options.checkpoints.iter().zip(&self.seen) {
            report.push_checkpoint(cp, lines as u64, seen.as_ref());
        }
        report
    }
}

/// `0` means every core.
fn threads(asked: usize) -> usize {
    match asked {
        0 => std::thread::available_parallelism().map_or(1, usize::from),
        n => n,
    }
}

#[cfg(test)]
mod tests;
