//! The interposer's own audit log: the service's line format and seal (`countersign audit verify`
//! checks it), with MCP kinds. Seed 000's rule: the record of a call closes at once (intent, then
//! outcome); only a response may park.

use countersign_audit::{
    AuditEvent, AuditSealer, GENESIS_HASH, McpOutcome, line_hash, unsigned_line,
};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::io::Write as _;
use std::path::Path;
use std::sync::mpsc;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// A held call the log says is waiting for a verdict (rebuilt at start).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenTicket {
    pub approval_id: String,
    pub expires_at: Option<String>,
}

/// An append-only, sealed log (or nothing, when not configured).
///
/// Lines are chained and written by a thread of their own, in the order they were handed over,
/// so the relay's thread neither signs nor waits for a `write` per line. The thread holds lines
/// for a moment (at most [`SIGN_WITHIN`]), writes them with a single `write`, and signs only the
/// last line of each write. What is queued but not yet written is lost if the
/// process dies, so a line the interposer must not lose (anything about a held call, the close
/// line) is followed by [`AuditLog::flush`] before the client sees what it records.
pub struct AuditLog {
    writer: Option<Writer>,
    public_key: Option<String>,
}

impl std::fmt::Debug for AuditLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditLog")
            .field("enabled", &self.writer.is_some())
            .finish_non_exhaustive()
    }
}

/// What the interposer writes about one outcome.
#[derive(Debug, Clone)]
pub struct Outcome<'a> {
    pub outcome: McpOutcome,
    pub op_hash: &'a str,
    pub approval_id: Option<&'a str>,
    pub approval_ref: Option<&'a str>,
    pub reason_code: Option<&'a str>,
    pub expires_at: Option<&'a str>,
    pub upstream: Option<&'a str>,
}

/// Every writer names its outcome; the default is only the base the others are written over
/// (`..Outcome::default()`), and it is the refusal, so a forgotten word can never read as a
/// call that ran.
impl Default for Outcome<'_> {
    fn default() -> Self {
        Self {
            outcome: McpOutcome::Denied,
            op_hash: "",
            approval_id: None,
            approval_ref: None,
            reason_code: None,
            expires_at: None,
            upstream: None,
        }
    }
}

/// A line's body without its `ts`, and the moment it happened (formatted by the writer thread).
struct Entry {
    body: Vec<(&'static str, Value)>,
    at: OffsetDateTime,
}

enum Job {
    Line(Entry),
    /// Answered once every line queued before it is written (or failed to be).
    Flush(mpsc::Sender<()>),
}

/// The handle on the writer thread.
struct Writer {
    queue: mpsc::Sender<Job>,
    thread: std::thread::JoinHandle<()>,
}

/// The writer thread's end of the chain.
struct Tail {
    file: std::fs::File,
    sealer: AuditSealer,
    seq: u64,
    prev: [u8; 32],
}

/// Most bytes the writer collects before a `write` (a burst larger than this takes several).
const BATCH_BYTES: usize = 1 << 20;

/// How long an allowed call's lines may wait in memory, chained but neither signed nor written
/// (unless a flush asks for them, or the log is dropped, first): so that one signature covers
/// every line of that interval under load. It bounds what a crash can lose of allowed calls'
/// lines.
const SIGN_WITHIN: std::time::Duration = std::time::Duration::from_millis(20);

impl Tail {
    /// Chain, sign and write everything queued until the log is dropped. Lines are chained and
    /// kept in memory; a write happens when a flush asks for it (a line the interposer must not
    /// lose), when the oldest line has waited [`SIGN_WITHIN`], when [`BATCH_BYTES`] are waiting,
    /// or at the end. Only the last line of a write is signed: its signature covers the lines
    /// before it through their `prev_hash` chain, so a write costs one signature however many
    /// lines it holds, and the file always ends with a signed line.
    fn run(mut self, jobs: mpsc::Receiver<Job>) {
        use mpsc::TryRecvError;
        let mut buf = Vec::new();
        let mut acks = Vec::new();
        // The chain as far as it is built in memory (`self.seq`/`self.prev`: as far as written).
        let (mut seq, mut prev) = (self.seq, self.prev);
        // Where the last waiting line starts in `buf`, and its unsigned text.
        let mut last: Option<(usize, String)> = None;
        let mut oldest: Option<std::time::Instant> = None;
        let mut open = true;
        while open {
            // Block for the next line when nothing waits; otherwise take what has arrived (the
            // thread slept through the arrivals: see the end of the loop).
            let first = if oldest.is_none() {
                match jobs.recv() {
                    Ok(job) => Some(job),
                    Err(_) => break,
                }
            } else {
                match jobs.try_recv() {
                    Ok(job) => Some(job),
                    Err(TryRecvError::Empty) => None,
                    Err(TryRecvError::Disconnected) => {
                        open = false;
                        None
                    }
                }
            };
            let mut due = false;
            let mut next = first;
            while let Some(job) = next.take() {
                match job {
                    Job::Line(entry) => {
                        seq += 1;
                        let text = unsigned_line(seq, &prev, &entry.event());
                        prev = line_hash(&text);
                        let start = buf.len();
                        buf.extend_from_slice(text.as_bytes());
                        buf.push(b'\n');
                        last = Some((start, text));
                        oldest.get_or_insert_with(std::time::Instant::now);
                    }
                    Job::Flush(ack) => {
                        acks.push(ack);
                        due = true;
                    }
                }
                if buf.len() < BATCH_BYTES {
                    match jobs.try_recv() {
                        Ok(job) => next = Some(job),
                        Err(TryRecvError::Empty) => {}
                        Err(TryRecvError::Disconnected) => open = false,
                    }
                }
            }
            let due = due
                || !open
                || buf.len() >= BATCH_BYTES
                || oldest.is_some_and(|since| since.elapsed() >= SIGN_WITHIN);
            if !due {
                // Sleep until the oldest line is due, not woken by each allowed call's lines
                // (a send to a receiver that is not blocked in `recv` wakes nobody); a flush,
                // or the log's drop, unparks this thread.
                if let Some(since) = oldest {
                    std::thread::park_timeout(SIGN_WITHIN.saturating_sub(since.elapsed()));
                }
                continue;
            }
            if let Some((start, text)) = last.take() {
                // The write ends signed: the one signature, over its last line.
                buf.truncate(start);
                let sealed = self.sealer.sign(seq, &text);
                buf.extend_from_slice(sealed.line.as_bytes());
                buf.push(b'\n');
                prev = sealed.hash;
            }
            if !buf.is_empty() {
                // One write: a crash leaves at most a torn last line, which verify reports. A
                // failed write loses these lines; the next line takes the first one's seq again.
                match self.file.write_all(&buf) {
                    Ok(()) => (self.seq, self.prev) = (seq, prev),
                    Err(e) => {
                        tracing::error!("audit log write failed: {e}");
                        (seq, prev) = (self.seq, self.prev);
                    }
                }
                buf.clear();
            }
            oldest = None;
            for ack in acks.drain(..) {
                let _ = ack.send(());
            }
        }
    }
}

impl Entry {
    fn new(body: Vec<(&'static str, Value)>) -> Self {
        Self {
            body,
            at: OffsetDateTime::now_utc(),
        }
    }

    /// The body in the order the members were always inserted: `kind`, `ts`, then the rest.
    fn event(self) -> AuditEvent {
        let mut map = Map::new();
        let mut members = self.body.into_iter();
        if let Some((k, v)) = members.next() {
            map.insert(k.into(), v);
        }
        map.insert(
            "ts".into(),
            self.at.format(&Rfc3339).unwrap_or_default().into(),
        );
        for (k, v) in members {
            map.insert(k.into(), v);
        }
        AuditEvent::from_body(map)
    }
}

impl AuditLog {
    /// No log.
    pub fn disabled() -> Self {
        Self {
            writer: None,
            public_key: None,
        }
    }

    /// Open (or create) the log at `path`, sealed with the key at `key`; returns the log and the
    /// tickets it still has open (a `pending_approval` with no later executed or denied line for
    /// the same op_hash).
    pub fn open(path: &Path, key: &Path) -> anyhow::Result<(Self, HashMap<String, OpenTicket>)> {
        use anyhow::Context as _;
        let sealer = AuditSealer::load_or_create(key)?;
        // The verifying key beside the seed, for `audit verify --interposer-key` (the seed is
        // private; what it verifies is not).
        let mut public = key.as_os_str().to_owned();
        public.push(".pub");
        let public = std::path::PathBuf::from(public);
        if !public.exists() {
            std::fs::write(&public, format!("{}\n", sealer.public_key_b64()))
                .with_context(|| format!("writing {}", public.display()))?;
        }
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        let mut seq = 0;
        let mut prev = GENESIS_HASH;
        let mut tickets = HashMap::new();
        for line in text.lines() {
            seq += 1;
            prev = line_hash(line);
            let Ok(Value::Object(o)) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            if o.get("kind").and_then(Value::as_str) != Some("mcp_outcome") {
                continue;
            }
            let s = |k: &str| o.get(k).and_then(Value::as_str).map(str::to_owned);
            let Some(op_hash) = s("op_hash") else {
                continue;
            };
            match s("outcome").as_deref().and_then(McpOutcome::from_wire) {
                Some(McpOutcome::PendingApproval) => {
                    if let Some(approval_id) = s("approval_id") {
                        tickets.insert(
                            op_hash,
                            OpenTicket {
                                approval_id,
                                expires_at: s("expires_at"),
                            },
                        );
                    }
                }
                Some(McpOutcome::Executed | McpOutcome::Denied) => {
                    tickets.remove(&op_hash);
                }
                _ => {}
            }
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("opening {}", path.display()))?;
        let public_key = Some(sealer.public_key_b64());
        let tail = Tail {
            file,
            sealer,
            seq,
            prev,
        };
        let (queue, jobs) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("mcp-audit".into())
            .spawn(move || tail.run(jobs))
            .context("starting the audit log writer")?;
        Ok((
            Self {
                writer: Some(Writer { queue, thread }),
                public_key,
            },
            tickets,
        ))
    }

    /// Queue one line; the writer thread seals it with the next seq.
    fn append(&self, body: Vec<(&'static str, Value)>) {
        let Some(writer) = &self.writer else {
            return;
        };
        let _ = writer.queue.send(Job::Line(Entry::new(body)));
    }

    /// Return once every line queued so far is written (what the interposer cannot lose: a held
    /// call's record before its client hears of it; the close line).
    pub fn flush(&self) {
        let Some(writer) = &self.writer else {
            return;
        };
        let (ack, done) = mpsc::channel();
        if writer.queue.send(Job::Flush(ack)).is_ok() {
            // The writer may be sleeping through allowed calls' lines: wake it for this one.
            writer.thread.thread().unpark();
            // The writer only seals and writes a file: this wait is bounded by one batch.
            let _ = done.recv();
        }
    }

    /// The intent of a call, written before anything is done with it.
    pub fn call(
        &self,
        call_id: &str,
        agent_id: &str,
        server_id: &str,
        tool_name: &str,
        op_hash: &str,
        rule: &str,
    ) {
        if self.writer.is_none() {
            return;
        }
        self.append(vec![
            ("kind", "mcp_call".into()),
            ("call_id", call_id.into()),
            ("agent_id", agent_id.into()),
            ("server_id", server_id.into()),
            ("tool_name", tool_name.into()),
            ("op_hash", op_hash.into()),
            ("rule", rule.into()),
        ]);
    }

    /// The outcome of a call.
    pub fn outcome(&self, call_id: &str, o: &Outcome<'_>) {
        if self.writer.is_none() {
            return;
        }
        let mut body = vec![
            ("kind", "mcp_outcome".into()),
            ("call_id", call_id.into()),
            ("outcome", o.outcome.as_str().into()),
            ("op_hash", o.op_hash.into()),
        ];
        for (k, v) in [
            ("approval_id", o.approval_id),
            ("approval_ref", o.approval_ref),
            ("reason_code", o.reason_code),
            ("expires_at", o.expires_at),
            ("upstream", o.upstream),
        ] {
            if let Some(v) = v {
                body.push((k, v.into()));
            }
        }
        self.append(body);
    }

    /// The clean end of this log's writer: intents still without outcome become violations.
    /// Returns once the close line and everything before it is written.
    pub fn close(&self) {
        self.append(vec![("kind", "mcp_close".into())]);
        self.flush();
    }

    /// Whether lines are written at all.
    pub fn enabled(&self) -> bool {
        self.writer.is_some()
    }

    /// The verifying key (base64url), when the log is enabled.
    pub fn public_key(&self) -> Option<String> {
        self.public_key.clone()
    }
}

impl Drop for AuditLog {
    /// Whatever is still queued is written before the log goes away.
    fn drop(&mut self) {
        if let Some(Writer { queue, thread }) = self.writer.take() {
            drop(queue);
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use countersign_audit::verify_log;

    fn temp(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("cs-mcp-audit-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn lines(path: &Path) -> Vec<Value> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    fn allowed(log: &AuditLog, run: &str, n: usize) {
        for i in 0..n {
            let id = format!("{run}-{i}");
            log.call(&id, "agent", "server", "echo", "h", "allow");
            log.outcome(
                &id,
                &Outcome {
                    outcome: McpOutcome::Allowed,
                    op_hash: "h",
                    upstream: Some("ok"),
                    ..Outcome::default()
                },
            );
        }
    }

    #[test]
    fn queued_lines_are_written_in_order_as_one_chain_by_flush() {
        let dir = temp("order");
        let (path, key) = (dir.join("a.jsonl"), dir.join("a.key"));
        let (log, _) = AuditLog::open(&path, &key).unwrap();
        allowed(&log, "c", 500);
        log.flush();
        let written = lines(&path);
        assert_eq!(
            written.len(),
            1000,
            "everything queued before flush is written"
        );
        for (i, line) in written.iter().enumerate() {
            assert_eq!(line["seq"], i as u64 + 1);
            let kind = if i % 2 == 0 {
                "mcp_call"
            } else {
                "mcp_outcome"
            };
            assert_eq!(line["kind"], kind);
            assert_eq!(line["call_id"], format!("c-{}", i / 2));
        }
        let sealer = AuditSealer::load_or_create(&key).unwrap();
        let report = verify_log(&std::fs::read(&path).unwrap(), &sealer.public_key());
        assert!(report.issues.is_empty(), "{report:?}");
        // Reopened, the chain goes on where it stopped; close ends it after everything queued.
        drop(log);
        let (log, _) = AuditLog::open(&path, &key).unwrap();
        allowed(&log, "d", 3);
        log.close();
        let written = lines(&path);
        assert_eq!(written.len(), 1007);
        assert_eq!(written[1006]["kind"], "mcp_close");
        assert_eq!(written[1006]["seq"], 1007);
        let report = verify_log(&std::fs::read(&path).unwrap(), &sealer.public_key());
        assert!(report.is_valid(), "{report:?}");
    }

    #[test]
    fn a_write_is_signed_once_on_its_last_line_whether_a_flush_the_clock_or_the_end_makes_it() {
        let dir = temp("batch");
        let path = dir.join("a.jsonl");
        let sealer = AuditSealer::from_seed([5; 32]);
        let file = std::fs::File::create(&path).unwrap();
        let tail = Tail {
            file,
            sealer: sealer.clone(),
            seq: 0,
            prev: GENESIS_HASH,
        };
        // Ten lines and a flush queued before the writer looks: one batch. Then one line and a
        // flush after it: a batch of its own.
        let (queue, jobs) = mpsc::channel();
        for i in 0..10 {
            let (kind, extra) = if i % 2 == 0 {
                ("mcp_call", ("rule", "allow"))
            } else {
                ("mcp_outcome", ("outcome", "allowed"))
            };
            queue
                .send(Job::Line(Entry::new(vec![
                    ("kind", kind.into()),
                    ("call_id", format!("c{}", i / 2).into()),
                    (extra.0, extra.1.into()),
                ])))
                .unwrap();
        }
        let (ack, _done) = mpsc::channel();
        queue.send(Job::Flush(ack)).unwrap();
        let writer = std::thread::spawn(move || tail.run(jobs));
        // The first batch is written before the second line is sent. (Counted by newlines, not
        // parsed: a read may overlap the writer's `write`.)
        let written = || {
            std::fs::read(&path)
                .unwrap_or_default()
                .iter()
                .filter(|&&b| b == b'\n')
                .count()
        };
        while written() < 10 {
            std::thread::yield_now();
        }
        // An allowed call's two lines, no flush: written, the second signed, once they are due
        // (SIGN_WITHIN); the wait only bounds a hang.
        for (kind, extra) in [
            ("mcp_call", ("rule", "allow")),
            ("mcp_outcome", ("outcome", "allowed")),
        ] {
            queue
                .send(Job::Line(Entry::new(vec![
                    ("kind", kind.into()),
                    ("call_id", "c5".into()),
                    (extra.0, extra.1.into()),
                ])))
                .unwrap();
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while written() < 12 {
            assert!(std::time::Instant::now() < deadline, "never written");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        // The last line, then the log dropped: written at once, signed.
        queue
            .send(Job::Line(Entry::new(vec![("kind", "mcp_close".into())])))
            .unwrap();
        drop(queue);
        writer.join().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let mut signed: Vec<bool> = text.lines().map(|l| l.contains("\"sig\":")).collect();
        // (Line 11 is unsigned unless the test thread stalled for SIGN_WITHIN between the two
        // sends, which would make it a write of its own: either is correct.)
        signed[10] = false;
        let mut expected = vec![false; 9];
        expected.extend([true, false, true, true]);
        assert_eq!(signed, expected, "{text}");
        let report = verify_log(text.as_bytes(), &sealer.public_key());
        assert!(report.issues.is_empty(), "{report:?}");
    }

    #[test]
    fn a_dropped_log_writes_what_was_queued_and_a_disabled_one_writes_nothing() {
        let dir = temp("drop");
        let (path, key) = (dir.join("a.jsonl"), dir.join("a.key"));
        let (log, _) = AuditLog::open(&path, &key).unwrap();
        allowed(&log, "c", 50);
        drop(log);
        assert_eq!(lines(&path).len(), 100, "dropping the log drains its queue");
        // A disabled log writes nothing and its flush returns at once.
        let off = AuditLog::disabled();
        allowed(&off, "c", 5);
        off.flush();
        off.close();
        assert!(!off.enabled());
        assert_eq!(lines(&path).len(), 100);
    }
}
