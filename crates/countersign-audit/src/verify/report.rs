//! What a verification reports: findings tied to lines, and the report of a whole log.

use crate::checkpoint::{Checkpoint, CheckpointHash, LogComparison};
use crate::code::AuditCode;
use countersign::{ReasonCode, b64};
use serde::Serialize;

/// Whether an issue breaks the log or is only worth knowing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IssueClass {
    /// Integrity or structure is broken: exit code 1.
    Violation,
    /// Legal, reported for the reader.
    Informational,
}

/// One finding, tied to a line (1-based; 0 for the file as a whole).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditIssue {
    pub line: usize,
    pub class: IssueClass,
    /// A stable code (docs/spec/service.md, "Audit issue codes"); it fixes `class`.
    pub code: AuditCode,
    pub detail: String,
    /// For a Decision whose evidence does not verify: the verifier's reason code.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason_code: Option<ReasonCode>,
}

impl AuditIssue {
    /// A finding of `code` (its class is the code's) on `line`.
    pub fn new(line: usize, code: AuditCode, detail: String) -> Self {
        Self {
            line,
            class: code.class(),
            code,
            detail,
            reason_code: None,
        }
    }
}

/// The result of [`crate::verify_log`].
#[derive(Debug, Clone, Default, Serialize)]
pub struct AuditReport {
    pub lines: usize,
    /// base64url hash of the last line (compare with the service's published head to detect a
    /// truncated tail, which a chain alone cannot reveal).
    pub head: String,
    pub issues: Vec<AuditIssue>,
}

impl AuditReport {
    /// Compare the log with a checkpoint already verified under the service key, and record the
    /// finding: informational when the log covers it, a violation when it is shorter (lines
    /// were cut from its end, which the chain alone cannot reveal) or diverges.
    pub fn check_checkpoint(&mut self, log: &[u8], checkpoint: &Checkpoint) {
        let comparison = checkpoint.compare(log);
        self.issues
            .push(checkpoint_finding(checkpoint, &comparison));
    }

    /// [`Self::check_checkpoint`] from what a streaming walk saw: the log's line count and, if
    /// it reached the checkpoint's size, (the Merkle root, the hash of line `size`) there.
    pub(crate) fn push_checkpoint(
        &mut self,
        checkpoint: &Checkpoint,
        lines: u64,
        seen: Option<&([u8; 32], [u8; 32])>,
    ) {
        let at_size = match checkpoint.kind {
            CheckpointHash::MerkleRoot => seen.map(|(root, _)| *root),
            CheckpointHash::ChainHead => seen.map(|(_, head)| *head),
        };
        let comparison = checkpoint.judge(lines, at_size);
        self.issues
            .push(checkpoint_finding(checkpoint, &comparison));
    }

    /// No violation (informational issues allowed).
    pub fn is_valid(&self) -> bool {
        !self.issues.iter().any(|i| i.class == IssueClass::Violation)
    }
}

/// The finding for a log compared with a checkpoint.
fn checkpoint_finding(checkpoint: &Checkpoint, comparison: &LogComparison) -> AuditIssue {
    let size = checkpoint.size;
    let at = usize::try_from(size).unwrap_or(usize::MAX);
    let (code, detail) = match comparison {
        LogComparison::Covers => (
            AuditCode::CheckpointCovered,
            format!(
                "the checkpoint of {} lines signed at {} is a prefix of this log",
                size, checkpoint.time
            ),
        ),
        LogComparison::Shorter { lines, .. } => (
            AuditCode::CheckpointTruncated,
            format!(
                "a checkpoint signed at {} covers {size} lines but the log has {lines}: \
                 lines were cut from its end",
                checkpoint.time
            ),
        ),
        LogComparison::Diverges {
            expected, found, ..
        } => (
            AuditCode::CheckpointDiverges,
            match checkpoint.kind {
                CheckpointHash::ChainHead => format!(
                    "a checkpoint signed at {} says line {size} hashes to {} but it hashes \
                     to {}",
                    checkpoint.time,
                    b64::encode(expected),
                    b64::encode(found)
                ),
                CheckpointHash::MerkleRoot => format!(
                    "a checkpoint signed at {} says the first {size} lines have Merkle root \
                     {} but they have {}",
                    checkpoint.time,
                    b64::encode(expected),
                    b64::encode(found)
                ),
            },
        ),
    };
    AuditIssue::new(at, code, detail)
}

/// Where the checkers put their findings. Findings on lines a `--from` checkpoint covers are
/// dropped: they were reported when that log was verified.
#[derive(Debug)]
pub(crate) struct Findings {
    issues: Vec<AuditIssue>,
    quiet: usize,
}

impl Findings {
    /// Findings that drop those on lines `1..=quiet`.
    pub(crate) fn new(quiet: usize) -> Self {
        Self {
            issues: Vec::new(),
            quiet,
        }
    }

    /// A finding of `code` on `line`.
    pub(crate) fn push(&mut self, line: usize, code: AuditCode, detail: String) {
        self.add(AuditIssue::new(line, code, detail));
    }

    /// A finding about a Decision's evidence, with the core's reason code.
    pub(crate) fn push_reason(
        &mut self,
        line: usize,
        code: AuditCode,
        detail: String,
        reason: ReasonCode,
    ) {
        self.add(AuditIssue {
            reason_code: Some(reason),
            ..AuditIssue::new(line, code, detail)
        });
    }

    pub(crate) fn add(&mut self, issue: AuditIssue) {
        if issue.line == 0 || issue.line > self.quiet {
            self.issues.push(issue);
        }
    }

    /// By line; a line's findings in the order they were found.
    pub(crate) fn into_sorted(mut self) -> Vec<AuditIssue> {
        self.issues.sort_by_key(|i| i.line);
        self.issues
    }

    /// In the order they were found.
    pub(crate) fn into_unsorted(self) -> Vec<AuditIssue> {
        self.issues
    }
}
