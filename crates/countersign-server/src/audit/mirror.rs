//! The audit log file: a mirror of the database's audit table, appended after each commit
//! (SQLite) or each sweep (PostgreSQL, whose lines are sealed just after the commit).
//!
//! The database is the source of truth: an event is stored in the same transaction as the state
//! change it records (sealed there on SQLite, sealed just after on PostgreSQL), so a crash can
//! never leave a verdict without its line or a line without its verdict. The file is the artifact an auditor takes away; on startup it is repaired
//! from the database (a torn last line is cut, missing lines are appended), so after a SIGKILL it
//! is complete again before the service answers its first request.

use crate::store::Store;
use anyhow::Context as _;
use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};

/// How many lines one sync copies per database read.
const BATCH: usize = 4096;

/// Appends the database's audit lines to a file, in order, each exactly once.
#[derive(Debug)]
pub struct AuditMirror {
    path: PathBuf,
    file: std::fs::File,
    last_seq: u64,
}

impl AuditMirror {
    /// Open (or create) the file, cut a torn last line, and catch up with the database.
    pub fn open(path: &Path, store: &dyn Store) -> anyhow::Result<Self> {
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(path)
            .with_context(|| format!("opening {}", path.display()))?;
        let mut text = Vec::new();
        file.read_to_end(&mut text)?;
        let complete = text.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        if complete < text.len() {
            tracing::warn!(path = %path.display(), "cutting a torn last audit line");
            file.set_len(u64::try_from(complete)?)?;
            file.seek(SeekFrom::End(0))?;
        }
        let last_seq = text
            .get(..complete)
            .map_or(0, |t| t.iter().filter(|&&b| b == b'\n').count());
        let last_seq = u64::try_from(last_seq)?;
        let head = store.audit_head().context("reading the audit head")?;
        anyhow::ensure!(
            last_seq <= head.0,
            "{} has {last_seq} lines but the database only {}: wrong data directory?",
            path.display(),
            head.0
        );
        let mut mirror = Self {
            path: path.to_owned(),
            file,
            last_seq,
        };
        mirror.sync(store)?;
        Ok(mirror)
    }

    /// Append every line the database has beyond the file.
    pub fn sync(&mut self, store: &dyn Store) -> anyhow::Result<()> {
        loop {
            let lines = store.audit_lines_after(self.last_seq, BATCH)?;
            if lines.is_empty() {
                return Ok(());
            }
            let mut buf = String::new();
            let mut last = self.last_seq;
            for (seq, line) in &lines {
                anyhow::ensure!(*seq == last + 1, "audit seq gap in the database");
                buf.push_str(line);
                buf.push('\n');
                last = *seq;
            }
            // A failed append (disk full) may have written part of the batch: cut back to the
            // last complete line and keep the position, so the next sync (once there is room)
            // writes the same lines again instead of leaving a torn line and a gap behind.
            let good = self.file.metadata()?.len();
            if let Err(e) = self.file.write_all(buf.as_bytes()) {
                let _ = self.file.set_len(good);
                return Err(e).with_context(|| format!("appending to {}", self.path.display()));
            }
            self.last_seq = last;
            if lines.len() < BATCH {
                // A short batch is the end: no second read to learn that.
                return Ok(());
            }
        }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where the service keeps the log's Merkle hashes: beside the log, `.merkle` for its
    /// extension (`audit.merkle`; see [`super::hashfile`]).
    pub fn hash_file_path(&self) -> PathBuf {
        self.path.with_extension("merkle")
    }
}
