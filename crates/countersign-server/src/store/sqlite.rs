//! The embedded SQLite store (the default: nothing to install).
//!
//! One connection in WAL mode behind a mutex: SQLite serializes writers anyway, and a single
//! connection makes every method trivially one `IMMEDIATE` transaction. With `synchronous=NORMAL`
//! a committed transaction survives the process being killed (the WAL is in the OS page cache);
//! `durability = "full"` also survives power loss at the cost of an fsync per commit.

use super::preauth::stamp_use;
use super::{
    ApprovalRecord, DisableOutcome, GatewayRecord, GrantOutcome, Import, IssuedChallenge,
    NewApproval, PreauthChange, PreauthDefinition, PreauthUse, RedeemOutcome, RevokeOutcome,
    Session, SettleKind, SettleOutcome, Settlement, Store, StoreError, StoredPreauth, plan_import,
    plan_reconcile,
};
use crate::audit::{AuditEvent, AuditSealer, GENESIS_HASH};
use crate::clock::{from_ms, rfc3339};
use crate::config::Durability;
use countersign::{ApprovalStatus, CredentialRecord, Decision, ReasonCode};
use rusqlite::{Connection, OptionalExtension as _, Params, Row, params};
use std::path::Path;
use std::sync::{Arc, Mutex};

mod standing;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS approvals (
    id TEXT PRIMARY KEY,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    agent_id TEXT NOT NULL,
    tool_name TEXT NOT NULL,
    profile TEXT NOT NULL,
    fields_json TEXT NOT NULL,
    severity TEXT NOT NULL,
    op_hash_approved BLOB NOT NULL,
    op_hash_denied BLOB NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('PENDING', 'APPROVED', 'DENIED')),
    reason_code TEXT,
    evidence_json TEXT,
    decided_at INTEGER,
    grant_expires_at INTEGER,
    grant_collected_at INTEGER
);
CREATE INDEX IF NOT EXISTS approvals_pending_expiry ON approvals (expires_at) WHERE status = 'PENDING';
CREATE TABLE IF NOT EXISTS challenges (
    nonce BLOB PRIMARY KEY,
    approval_id TEXT NOT NULL,
    decision TEXT NOT NULL,
    principal TEXT NOT NULL,
    expires_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS spent_nonces (nonce BLOB PRIMARY KEY, spent_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS counters (credential_id BLOB PRIMARY KEY, sign_count INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS credentials (credential_id BLOB PRIMARY KEY, record_json TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS login_challenges (nonce BLOB PRIMARY KEY, expires_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS sessions (
    token_hash BLOB PRIMARY KEY,
    principal TEXT NOT NULL,
    credential_id BLOB NOT NULL,
    expires_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS invites (
    token_hash BLOB PRIMARY KEY,
    principal TEXT NOT NULL,
    grp TEXT,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    redeemed_at INTEGER
);
CREATE TABLE IF NOT EXISTS memberships (
    principal TEXT NOT NULL,
    grp TEXT NOT NULL,
    PRIMARY KEY (principal, grp)
);
CREATE TABLE IF NOT EXISTS audit (seq INTEGER PRIMARY KEY, hash BLOB NOT NULL, line TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS credentials_version (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    version INTEGER NOT NULL
);
INSERT OR IGNORE INTO credentials_version (one, version) VALUES (1, 0);
CREATE TABLE IF NOT EXISTS preauthorizations (
    slug TEXT PRIMARY KEY,
    definition_json TEXT NOT NULL,
    digest BLOB NOT NULL,
    expires_at INTEGER NOT NULL,
    max_uses INTEGER NOT NULL,
    uses INTEGER NOT NULL DEFAULT 0,
    in_config INTEGER NOT NULL,
    disabled_at INTEGER
);
CREATE TABLE IF NOT EXISTS gateways (
    name TEXT PRIMARY KEY,
    token_hash BLOB NOT NULL UNIQUE,
    created_at INTEGER NOT NULL,
    revoked_at INTEGER
);
";

/// Columns added to tables that existed before: SQLite has no `ADD COLUMN IF NOT EXISTS`, so
/// each is added when `PRAGMA table_info` does not list it. Append; never edit an entry.
const ADDED_COLUMNS: &[(&str, &str, &str)] = &[
    // The gateway that created an approval (NULL for rows from before gateways authenticated).
    (
        "approvals",
        "gateway",
        "ALTER TABLE approvals ADD COLUMN gateway TEXT",
    ),
    // The preauthorization that approved a call without a human (slug, definition digest, use).
    (
        "approvals",
        "preauth_slug",
        "ALTER TABLE approvals ADD COLUMN preauth_slug TEXT",
    ),
    (
        "approvals",
        "preauth_digest",
        "ALTER TABLE approvals ADD COLUMN preauth_digest BLOB",
    ),
    (
        "approvals",
        "preauth_use",
        "ALTER TABLE approvals ADD COLUMN preauth_use INTEGER",
    ),
    // The approval a request revises, when the gateway says so.
    (
        "approvals",
        "revises",
        "ALTER TABLE approvals ADD COLUMN revises TEXT",
    ),
];

/// The database's clock in milliseconds since the epoch (preauthorization expiry is judged by
/// it, not by the service's clock).
const DB_NOW_MS: &str = "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)";

const SELECT_APPROVAL: &str = "SELECT id, created_at, expires_at, agent_id, tool_name, profile, \
    fields_json, severity, op_hash_approved, op_hash_denied, status, reason_code, evidence_json, \
    decided_at, grant_expires_at, grant_collected_at, gateway, preauth_slug, preauth_digest, \
    preauth_use, revises FROM approvals WHERE id = ?1";

/// SQLite-backed [`Store`].
#[derive(Debug)]
pub struct SqliteStore {
    /// Declared first so it stops first: the request connection, closed last, then folds what
    /// is left of the log into the database file.
    checkpointer: Option<Checkpointer>,
    conn: Arc<Mutex<Connection>>,
    sealer: AuditSealer,
}

/// How often the background checkpointer copies the write-ahead log into the database file.
const CHECKPOINT_INTERVAL: std::time::Duration = std::time::Duration::from_millis(100);

/// Log length (frames, one page each) past which the checkpointer makes sure the log restarts.
const RESTART_FRAMES: i64 = 8192;

/// Size the log file is cut back to when it restarts after having grown past it.
const JOURNAL_SIZE_LIMIT: i64 = 64 * 1024 * 1024;

/// A thread with its own connection that checkpoints the write-ahead log periodically.
///
/// A passive checkpoint never waits for and never blocks the request connection: it copies the
/// frames no reader still needs. Committed transactions are durable in the log whether or not
/// they have been copied. The log starts again from the beginning only when a write finds it
/// copied to its end, and under sustained writes a passive checkpoint never ends there: it
/// copies the log as it was when it began while new frames arrive. So once the log passes
/// [`RESTART_FRAMES`] and is still growing, the checkpointer copies the remainder (the frames
/// written during its own pass) with request writes held; the next write then restarts the log.
#[derive(Debug)]
struct Checkpointer {
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Checkpointer {
    fn start(path: &Path, requests: Arc<Mutex<Connection>>) -> Result<Self, StoreError> {
        let mut passes = Passes {
            conn: Connection::open(path).map_err(db)?,
            requests,
            last_frames: 0,
        };
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("sqlite-checkpoint".into())
            .spawn(move || {
                // Ends when the store drops its sender. After a pass that had to catch the
                // log up, the next one comes at once: writes are outpacing the interval.
                let mut wait = CHECKPOINT_INTERVAL;
                while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                    stopped.recv_timeout(wait)
                {
                    wait = match passes.pass() {
                        Ok(Pass::CaughtUp) => std::time::Duration::ZERO,
                        Ok(Pass::Rest) => CHECKPOINT_INTERVAL,
                        Err(e) => {
                            tracing::warn!(error = %e, "WAL checkpoint failed; retrying");
                            CHECKPOINT_INTERVAL
                        }
                    };
                }
            })
            .map_err(|e| StoreError::Database(format!("starting the checkpointer: {e}")))?;
        Ok(Self {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// What a checkpointer pass did, which decides when the next one runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pass {
    /// The log is short, or nothing was written since the last pass (a long log copied to its
    /// end waits for the next write to restart it), or a reader on another connection pins it,
    /// which holding our writes cannot change: wait for the next interval.
    Rest,
    /// The log was long and growing, and was copied to its end with writes held.
    CaughtUp,
}

/// The checkpointer's connection, the request connection it may hold, and what it last saw.
struct Passes {
    conn: Connection,
    requests: Arc<Mutex<Connection>>,
    /// Frames in the log at the end of the previous pass.
    last_frames: i64,
}

impl Passes {
    /// One pass: a passive checkpoint, then, if the log is long and was written to since the
    /// last pass, a second one with the request connection held so that it reaches the end.
    fn pass(&mut self) -> rusqlite::Result<Pass> {
        let (frames, _) = checkpoint(&self.conn)?;
        // The frame count a passive checkpoint reports is the log's length when it began, so
        // "all copied" says nothing about frames written meanwhile: only a pass with writes
        // held can tell. A log that has not moved since the last pass needs no such pass.
        if frames < RESTART_FRAMES || frames == self.last_frames {
            self.last_frames = frames;
            return Ok(Pass::Rest);
        }
        let _writes = self.requests.lock().unwrap_or_else(|p| p.into_inner());
        let (frames, copied) = checkpoint(&self.conn)?;
        self.last_frames = frames;
        // Never a busy loop: a pass that could not finish (another process's reader) waits.
        Ok(if copied == frames {
            Pass::CaughtUp
        } else {
            Pass::Rest
        })
    }
}

/// One passive checkpoint; returns `(frames in the log, frames copied)`.
fn checkpoint(conn: &Connection) -> rusqlite::Result<(i64, i64)> {
    conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| {
        Ok((r.get(1)?, r.get(2)?))
    })
}

fn db(e: rusqlite::Error) -> StoreError {
    use rusqlite::ErrorCode as C;
    // Conditions of the storage, not of the request: the operator fixes them (frees space,
    // makes the file writable) and the same request then succeeds, without a restart.
    match e.sqlite_error_code() {
        Some(C::DiskFull | C::ReadOnly | C::SystemIoFailure | C::CannotOpen) => {
            StoreError::Unavailable(e.to_string())
        }
        _ => StoreError::Database(e.to_string()),
    }
}

impl SqliteStore {
    /// Open (creating if needed) the database at `path`.
    pub fn open(
        path: &Path,
        sealer: AuditSealer,
        durability: Durability,
    ) -> Result<Self, StoreError> {
        let conn = Connection::open(path).map_err(db)?;
        let mut store = Self::init(conn, sealer, durability)?;
        // Checkpoints move off the request path: a commit that happened to cross SQLite's
        // automatic threshold used to copy the whole log into the database file while holding
        // the connection, the source of nearly every multi-millisecond response.
        {
            let conn = store.conn.lock().unwrap_or_else(|p| p.into_inner());
            conn.pragma_update(None, "wal_autocheckpoint", 0)
                .map_err(db)?;
            conn.pragma_update(None, "journal_size_limit", JOURNAL_SIZE_LIMIT)
                .map_err(db)?;
        }
        store.checkpointer = Some(Checkpointer::start(path, store.conn.clone())?);
        Ok(store)
    }

    /// A private in-memory database (tests).
    pub fn in_memory(sealer: AuditSealer) -> Result<Self, StoreError> {
        let conn = Connection::open_in_memory().map_err(db)?;
        Self::init(conn, sealer, Durability::Normal)
    }

    fn init(
        conn: Connection,
        sealer: AuditSealer,
        durability: Durability,
    ) -> Result<Self, StoreError> {
        let sync = match durability {
            Durability::Normal => "NORMAL",
            Durability::Full => "FULL",
        };
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(db)?;
        conn.pragma_update(None, "synchronous", sync).map_err(db)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(db)?;
        conn.execute_batch(SCHEMA).map_err(db)?;
        add_columns(&conn)?;
        conn.execute_batch(standing::SCHEMA).map_err(db)?;
        // Room for every statement this store issues, so none is ever parsed twice.
        conn.set_prepared_statement_cache_capacity(128);
        Ok(Self {
            checkpointer: None,
            conn: Arc::new(Mutex::new(conn)),
            sealer,
        })
    }

    /// Run `f` as one `IMMEDIATE` transaction: committed when it returns `Ok`, rolled back when
    /// it returns an error (or unwinds), so no path leaves a transaction open on the connection.
    fn with_tx<T>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        exec(&conn, "BEGIN IMMEDIATE", []).map_err(db)?;
        let mut open = OpenTransaction {
            conn: &conn,
            committed: false,
        };
        let out = f(open.conn)?;
        exec(open.conn, "COMMIT", []).map_err(db)?;
        open.committed = true;
        Ok(out)
    }

    /// Seal and insert `events` after the current chain head, inside `tx`.
    fn append(&self, tx: &Connection, events: &[AuditEvent]) -> Result<(), StoreError> {
        let (mut seq, mut prev) = head(tx)?;
        for event in events {
            seq += 1;
            let sealed = self.sealer.seal(seq, &prev, event);
            exec(
                tx,
                "INSERT INTO audit (seq, hash, line) VALUES (?1, ?2, ?3)",
                params![to_i64(sealed.seq), &sealed.hash[..], sealed.line],
            )
            .map_err(db)?;
            prev = sealed.hash;
        }
        Ok(())
    }

    /// Settle one overdue PENDING approval inside `tx`.
    fn expire_in(&self, tx: &Connection, id: &str, now: i64) -> Result<(), StoreError> {
        let changed = exec(
            tx,
            "UPDATE approvals SET status = 'DENIED', reason_code = ?2, decided_at = ?3 \
                 WHERE id = ?1 AND status = 'PENDING' AND expires_at <= ?3",
            params![id, ReasonCode::ExpiredUnanswered.as_str(), now],
        )
        .map_err(db)?;
        if changed == 1 {
            let event = AuditEvent::settlement(
                id,
                &rfc3339(from_ms(now)),
                ReasonCode::ExpiredUnanswered.as_str(),
            );
            self.append(tx, &[event])?;
        }
        Ok(())
    }
}

/// Apply [`ADDED_COLUMNS`] that the database does not have yet.
fn add_columns(conn: &Connection) -> Result<(), StoreError> {
    for (table, column, sql) in ADDED_COLUMNS {
        let mut stmt = conn
            .prepare(&format!("PRAGMA table_info({table})"))
            .map_err(db)?;
        let names: Vec<String> = stmt
            .query_map([], |r| r.get(1))
            .map_err(db)?
            .collect::<Result<_, _>>()
            .map_err(db)?;
        if !names.iter().any(|n| n == column) {
            conn.execute_batch(sql).map_err(db)?;
        }
    }
    Ok(())
}

/// Rolls back on drop: a transaction that did not reach `COMMIT` leaves no trace.
struct OpenTransaction<'c> {
    conn: &'c Connection,
    committed: bool,
}

impl Drop for OpenTransaction<'_> {
    fn drop(&mut self) {
        if !self.committed
            && let Err(e) = exec(self.conn, "ROLLBACK", [])
        {
            tracing::error!(error = %e, "rollback failed");
        }
    }
}

/// Execute `sql` through the connection's statement cache: SQLite parses each distinct
/// statement once per connection instead of once per call (parsing was a tenth of the service's
/// CPU time under load before this).
fn exec(conn: &Connection, sql: &str, params: impl Params) -> rusqlite::Result<usize> {
    conn.prepare_cached(sql)?.execute(params)
}

/// [`exec`] for a statement that returns (at most) one row.
fn query_row<T>(
    conn: &Connection,
    sql: &str,
    params: impl Params,
    f: impl FnOnce(&Row<'_>) -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    conn.prepare_cached(sql)?.query_row(params, f)
}

fn head(tx: &Connection) -> Result<(u64, [u8; 32]), StoreError> {
    let row: Option<(i64, Vec<u8>)> = query_row(
        tx,
        "SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1",
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .optional()
    .map_err(db)?;
    match row {
        None => Ok((0, GENESIS_HASH)),
        Some((seq, hash)) => Ok((
            u64::try_from(seq).map_err(|_| StoreError::Corrupt("negative audit seq".into()))?,
            hash32(hash, "audit hash")?,
        )),
    }
}

/// The stored record of a credential, if any.
fn stored_credential(
    tx: &Connection,
    credential_id: &[u8],
) -> Result<Option<CredentialRecord>, StoreError> {
    let json: Option<String> = query_row(
        tx,
        "SELECT record_json FROM credentials WHERE credential_id = ?1",
        [credential_id],
        |r| r.get(0),
    )
    .optional()
    .map_err(db)?;
    json.map(|j| serde_json::from_str(&j).map_err(|e| StoreError::Corrupt(e.to_string())))
        .transpose()
}

fn record_json(record: &CredentialRecord) -> Result<String, StoreError> {
    serde_json::to_string(record).map_err(|e| StoreError::Corrupt(e.to_string()))
}

/// Raise the credentials version (inside a transaction that changed credentials).
fn bump_credentials_version(tx: &Connection) -> Result<(), StoreError> {
    exec(
        tx,
        "UPDATE credentials_version SET version = version + 1 WHERE one = 1",
        [],
    )
    .map_err(db)?;
    Ok(())
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn hash32(bytes: Vec<u8>, what: &str) -> Result<[u8; 32], StoreError> {
    <[u8; 32]>::try_from(bytes).map_err(|_| StoreError::Corrupt(format!("{what} is not 32 bytes")))
}

fn status_from(text: &str) -> Result<ApprovalStatus, StoreError> {
    match text {
        "PENDING" => Ok(ApprovalStatus::Pending),
        "APPROVED" => Ok(ApprovalStatus::Approved),
        "DENIED" => Ok(ApprovalStatus::Denied),
        other => Err(StoreError::Corrupt(format!("status {other:?}"))),
    }
}

pub(super) type ApprovalRow = (ApprovalRecord, Vec<u8>, Vec<u8>, String, PreauthColumns);
type PreauthColumns = (Option<String>, Option<Vec<u8>>, Option<i64>);

fn read_approval(r: &Row<'_>) -> rusqlite::Result<ApprovalRow> {
    Ok((
        ApprovalRecord {
            id: r.get(0)?,
            created_at: r.get(1)?,
            expires_at: r.get(2)?,
            agent_id: r.get(3)?,
            tool_name: r.get(4)?,
            profile: r.get(5)?,
            fields_json: r.get(6)?,
            severity: r.get(7)?,
            op_hash_approved: [0; 32],
            op_hash_denied: [0; 32],
            status: ApprovalStatus::Pending,
            reason_code: r.get(11)?,
            evidence_json: r.get(12)?,
            decided_at: r.get(13)?,
            grant_expires_at: r.get(14)?,
            grant_collected_at: r.get(15)?,
            gateway: r.get(16)?,
            preauthorization: None,
            revises: r.get(20)?,
        },
        r.get(8)?,
        r.get(9)?,
        r.get(10)?,
        (r.get(17)?, r.get(18)?, r.get(19)?),
    ))
}

fn get_approval(conn: &Connection, id: &str) -> Result<Option<ApprovalRecord>, StoreError> {
    query_row(conn, SELECT_APPROVAL, [id], read_approval)
        .optional()
        .map_err(db)?
        .map(finish_approval)
        .transpose()
}

/// An approval row as read by [`read_approval`], checked and completed: the two op_hashes, the
/// status, and the preauthorization that approved it (all three columns or none).
pub(super) fn finish_approval(
    (mut record, approved, denied, status, (slug, digest, use_number)): ApprovalRow,
) -> Result<ApprovalRecord, StoreError> {
    if let (Some(slug), Some(digest), Some(use_number)) = (slug, digest, use_number) {
        record.preauthorization = Some(PreauthUse {
            slug,
            digest: hash32(digest, "preauth_digest")?,
            use_number,
        });
    }
    record.op_hash_approved = hash32(approved, "op_hash_approved")?;
    record.op_hash_denied = hash32(denied, "op_hash_denied")?;
    record.status = status_from(&status)?;
    Ok(record)
}

/// Insert an approval row (with the preauthorization that approved it, if one did).
fn insert_approval(
    tx: &Connection,
    a: &NewApproval,
    preauth: Option<&PreauthUse>,
) -> Result<(), StoreError> {
    let decided = (a.status != ApprovalStatus::Pending).then_some(a.created_at);
    let inserted = exec(
        tx,
        "INSERT INTO approvals (id, created_at, expires_at, agent_id, tool_name, profile, \
         fields_json, severity, op_hash_approved, op_hash_denied, status, reason_code, \
         decided_at, grant_expires_at, gateway, revises, preauth_slug, preauth_digest, \
         preauth_use) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, \
         ?18, ?19)",
        params![
            a.id,
            a.created_at,
            a.expires_at,
            a.agent_id,
            a.tool_name,
            a.profile,
            a.fields_json,
            a.severity,
            &a.op_hash_approved[..],
            &a.op_hash_denied[..],
            a.status.as_str(),
            a.reason_code.map(ReasonCode::as_str),
            decided,
            a.grant_expires_at,
            a.gateway,
            a.revises,
            preauth.map(|p| p.slug.as_str()),
            preauth.map(|p| p.digest.to_vec()),
            preauth.map(|p| p.use_number),
        ],
    );
    match inserted {
        Ok(_) => Ok(()),
        Err(rusqlite::Error::SqliteFailure(e, _))
            if e.code == rusqlite::ErrorCode::ConstraintViolation =>
        {
            Err(StoreError::DuplicateId(a.id.clone()))
        }
        Err(e) => Err(db(e)),
    }
}

/// Every preauthorization row, by slug.
fn stored_preauths(conn: &Connection) -> Result<Vec<StoredPreauth>, StoreError> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT slug, definition_json, digest, expires_at, max_uses, uses, in_config, \
             disabled_at FROM preauthorizations ORDER BY slug",
        )
        .map_err(db)?;
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, Vec<u8>>(2)?,
                r.get::<_, i64>(3)?,
                r.get::<_, i64>(4)?,
                r.get::<_, i64>(5)?,
                r.get::<_, i64>(6)?,
                r.get::<_, Option<i64>>(7)?,
            ))
        })
        .map_err(db)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(db)?;
    rows.into_iter()
        .map(
            |(
                slug,
                definition_json,
                digest,
                expires_at,
                max_uses,
                uses,
                in_config,
                disabled_at,
            )| {
                Ok(StoredPreauth {
                    slug,
                    definition_json,
                    digest: hash32(digest, "preauthorization digest")?,
                    expires_at,
                    max_uses,
                    uses,
                    in_config: in_config != 0,
                    disabled_at,
                })
            },
        )
        .collect()
}

/// The recheck before a preauthorized call's grant is collected: the row is still in the
/// config, not disabled, unexpired by the database's clock, and has the digest the call was
/// approved under.
fn preauth_still_usable(tx: &Connection, p: &PreauthUse) -> Result<bool, StoreError> {
    let found: Option<i64> = query_row(
        tx,
        &format!(
            "SELECT 1 FROM preauthorizations WHERE slug = ?1 AND digest = ?2 AND in_config = 1 \
             AND disabled_at IS NULL AND expires_at > {DB_NOW_MS}"
        ),
        params![p.slug, &p.digest[..]],
        |r| r.get(0),
    )
    .optional()
    .map_err(db)?;
    Ok(found.is_some())
}

fn decision_text(d: Decision) -> &'static str {
    d.as_str()
}

fn decision_from(text: &str) -> Result<Decision, StoreError> {
    match text {
        "APPROVED" => Ok(Decision::Approved),
        "DENIED" => Ok(Decision::Denied),
        other => Err(StoreError::Corrupt(format!("decision {other:?}"))),
    }
}

impl Store for SqliteStore {
    fn create(&self, a: &NewApproval, events: &[AuditEvent]) -> Result<(), StoreError> {
        self.with_tx(|tx| {
            insert_approval(tx, a, None)?;
            self.append(tx, events)
        })
    }

    fn create_preauthorized(
        &self,
        a: &NewApproval,
        slug: &str,
        digest: &[u8; 32],
        events: &[AuditEvent],
    ) -> Result<Option<i64>, StoreError> {
        self.with_tx(|tx| {
            // The guarded consume: the row must still allow a use by the database's clock.
            let taken: Option<i64> = query_row(
                tx,
                &format!(
                    "UPDATE preauthorizations SET uses = uses + 1 \
                     WHERE slug = ?1 AND digest = ?2 AND in_config = 1 AND disabled_at IS NULL \
                     AND uses < max_uses AND expires_at > {DB_NOW_MS} RETURNING uses"
                ),
                params![slug, &digest[..]],
                |r| r.get(0),
            )
            .optional()
            .map_err(db)?;
            let Some(use_number) = taken else {
                return Ok(None);
            };
            let used = PreauthUse {
                slug: slug.to_owned(),
                digest: *digest,
                use_number,
            };
            insert_approval(tx, a, Some(&used))?;
            self.append(tx, &stamp_use(events, use_number))?;
            Ok(Some(use_number))
        })
    }

    fn reconcile_preauthorizations(
        &self,
        incoming: &[PreauthDefinition],
        now: i64,
    ) -> Result<Vec<PreauthChange>, StoreError> {
        self.with_tx(|tx| {
            let changes = plan_reconcile(&stored_preauths(tx)?, incoming);
            let ts = rfc3339(from_ms(now));
            for change in &changes {
                match change {
                    PreauthChange::Insert(d) => exec(
                        tx,
                        "INSERT INTO preauthorizations (slug, definition_json, digest, \
                         expires_at, max_uses, uses, in_config) VALUES (?1, ?2, ?3, ?4, ?5, 0, 1)",
                        params![
                            d.slug,
                            d.definition_json,
                            &d.digest[..],
                            d.expires_at,
                            d.max_uses
                        ],
                    ),
                    PreauthChange::Replace(d) => exec(
                        tx,
                        "UPDATE preauthorizations SET definition_json = ?2, digest = ?3, \
                         expires_at = ?4, max_uses = ?5, in_config = 1 WHERE slug = ?1",
                        params![
                            d.slug,
                            d.definition_json,
                            &d.digest[..],
                            d.expires_at,
                            d.max_uses
                        ],
                    ),
                    PreauthChange::Remove(slug) => exec(
                        tx,
                        "UPDATE preauthorizations SET in_config = 0 WHERE slug = ?1",
                        params![slug],
                    ),
                }
                .map_err(db)?;
                self.append(tx, &[change.event(&ts)])?;
            }
            Ok(changes)
        })
    }

    fn preauthorizations(&self) -> Result<Vec<StoredPreauth>, StoreError> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        stored_preauths(&conn)
    }

    fn disable_preauthorization(&self, slug: &str, now: i64) -> Result<DisableOutcome, StoreError> {
        self.with_tx(|tx| {
            let disabled: Option<Option<i64>> = query_row(
                tx,
                "SELECT disabled_at FROM preauthorizations WHERE slug = ?1",
                [slug],
                |r| r.get(0),
            )
            .optional()
            .map_err(db)?;
            match disabled {
                None => return Ok(DisableOutcome::NotFound),
                Some(Some(_)) => return Ok(DisableOutcome::AlreadyDisabled),
                Some(None) => {}
            }
            exec(
                tx,
                "UPDATE preauthorizations SET disabled_at = ?2 WHERE slug = ?1",
                params![slug, now],
            )
            .map_err(db)?;
            let ts = rfc3339(from_ms(now));
            self.append(
                tx,
                &[AuditEvent::preauthorization(&ts, "disabled", slug, None)],
            )?;
            Ok(DisableOutcome::Disabled)
        })
    }

    fn get(&self, id: &str) -> Result<Option<ApprovalRecord>, StoreError> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        get_approval(&conn, id)
    }

    fn settle(&self, s: &Settlement) -> Result<SettleOutcome, StoreError> {
        self.with_tx(|tx| {
            let Some(current) = get_approval(tx, &s.approval_id)? else {
                return Ok(SettleOutcome::NotFound);
            };
            if let SettleKind::Withdrawn { gateway } = &s.kind
                && current.gateway.as_deref() != Some(gateway.as_str())
            {
                return Ok(SettleOutcome::NotFound);
            }
            if current.status != ApprovalStatus::Pending {
                return Ok(SettleOutcome::AlreadySettled(current));
            }
            // Late by a millisecond is late: the window closed, so the request expires here
            // and the verdict that arrived after it changes nothing but that.
            if current.expires_at <= s.now {
                self.expire_in(tx, &s.approval_id, s.now)?;
                let expired = get_approval(tx, &s.approval_id)?;
                return Ok(expired.map_or(SettleOutcome::NotFound, SettleOutcome::Expired));
            }
            let mut evidence_json = None;
            if let SettleKind::Verdict {
                spend,
                evidence_json: evidence,
            } = &s.kind
            {
                // Every refusal is decided before the first write: returning Ok commits.
                let spent = query_row(
                    tx,
                    "SELECT 1 FROM spent_nonces WHERE nonce = ?1",
                    [&spend.nonce],
                    |_| Ok(()),
                )
                .optional()
                .map_err(db)?
                .is_some();
                if spent {
                    return Ok(SettleOutcome::Replayed);
                }
                let stored: Option<u32> = query_row(
                    tx,
                    "SELECT sign_count FROM counters WHERE credential_id = ?1",
                    [&spend.credential_id],
                    |r| r.get(0),
                )
                .optional()
                .map_err(db)?;
                if let Some(stored) = stored
                    && !(stored == 0 && spend.sign_count == 0)
                    && spend.sign_count <= stored
                {
                    return Ok(SettleOutcome::CounterRegression {
                        stored,
                        got: spend.sign_count,
                    });
                }
                exec(
                    tx,
                    "INSERT INTO spent_nonces (nonce, spent_at) VALUES (?1, ?2)",
                    params![spend.nonce, s.now],
                )
                .map_err(db)?;
                exec(
                    tx,
                    "INSERT INTO counters (credential_id, sign_count) VALUES (?1, ?2) \
                     ON CONFLICT (credential_id) DO UPDATE SET sign_count = MAX(sign_count, ?2)",
                    params![spend.credential_id, spend.sign_count],
                )
                .map_err(db)?;
                evidence_json = Some(evidence.as_str());
            }
            let changed = exec(
                tx,
                "UPDATE approvals SET status = ?2, reason_code = ?3, evidence_json = ?4, \
                     decided_at = ?5, grant_expires_at = ?6 \
                     WHERE id = ?1 AND status = 'PENDING' AND expires_at > ?5",
                params![
                    s.approval_id,
                    s.status.as_str(),
                    s.reason_code.map(ReasonCode::as_str),
                    evidence_json,
                    s.now,
                    s.grant_expires_at,
                ],
            )
            .map_err(db)?;
            if changed != 1 {
                return Err(StoreError::Database(
                    "compare-and-set lost inside an immediate transaction".into(),
                ));
            }
            // Issued challenges stay until they expire (the sweeper removes them): a verdict
            // racing this one must find its challenge and lose with "already settled", not be
            // told its challenge was never issued.
            self.append(tx, std::slice::from_ref(&s.event))?;
            let settled = get_approval(tx, &s.approval_id)?;
            Ok(settled.map_or(SettleOutcome::NotFound, SettleOutcome::Settled))
        })
    }

    fn expire_overdue(&self, now: i64, limit: usize) -> Result<Vec<String>, StoreError> {
        self.with_tx(|tx| {
            let ids: Vec<String> = {
                let mut stmt = tx
                    .prepare_cached(
                        "SELECT id FROM approvals WHERE status = 'PENDING' AND expires_at <= ?1 \
                         ORDER BY expires_at LIMIT ?2",
                    )
                    .map_err(db)?;
                stmt.query_map(params![now, to_i64(limit as u64)], |r| r.get(0))
                    .map_err(db)?
                    .collect::<Result<_, _>>()
                    .map_err(db)?
            };
            for id in &ids {
                self.expire_in(tx, id, now)?;
            }
            exec(tx, "DELETE FROM challenges WHERE expires_at <= ?1", [now]).map_err(db)?;
            exec(
                tx,
                "DELETE FROM login_challenges WHERE expires_at <= ?1",
                [now],
            )
            .map_err(db)?;
            exec(tx, "DELETE FROM sessions WHERE expires_at <= ?1", [now]).map_err(db)?;
            Ok(ids)
        })
    }

    fn collect_grant(
        &self,
        id: &str,
        gateway: &str,
        fingerprint: &[u8; 32],
        tool_name: Option<&str>,
        now: i64,
        event: &AuditEvent,
    ) -> Result<GrantOutcome, StoreError> {
        self.with_tx(|tx| {
            let Some(current) = get_approval(tx, id)? else {
                return Ok(GrantOutcome::NotFound);
            };
            if current.gateway.as_deref() != Some(gateway) {
                return Ok(GrantOutcome::NotFound);
            }
            if current.status != ApprovalStatus::Approved {
                return Ok(GrantOutcome::NotApproved(Box::new(current)));
            }
            if let Some(collected_at) = current.grant_collected_at {
                return Ok(GrantOutcome::AlreadyCollected { collected_at });
            }
            if &current.op_hash_approved != fingerprint {
                return Ok(GrantOutcome::FingerprintMismatch);
            }
            if tool_name.is_some_and(|t| t != current.tool_name) {
                return Ok(GrantOutcome::FingerprintMismatch);
            }
            if current.grant_expires_at.is_none_or(|t| t <= now) {
                return Ok(GrantOutcome::Expired);
            }
            if let Some(p) = &current.preauthorization
                && !preauth_still_usable(tx, p)?
            {
                return Ok(GrantOutcome::PreauthorizationWithdrawn);
            }
            let changed = exec(
                tx,
                "UPDATE approvals SET grant_collected_at = ?2 \
                     WHERE id = ?1 AND grant_collected_at IS NULL",
                params![id, now],
            )
            .map_err(db)?;
            if changed != 1 {
                return Err(StoreError::Database("grant compare-and-set lost".into()));
            }
            self.append(tx, std::slice::from_ref(event))?;
            Ok(GrantOutcome::Granted { collected_at: now })
        })
    }

    fn put_challenge(&self, c: &IssuedChallenge) -> Result<(), StoreError> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        exec(
            &conn,
            "INSERT INTO challenges (nonce, approval_id, decision, principal, expires_at) \
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![
                c.nonce,
                c.approval_id,
                decision_text(c.decision),
                c.principal,
                c.expires_at
            ],
        )
        .map_err(db)?;
        Ok(())
    }

    fn challenge(&self, nonce: &[u8]) -> Result<Option<IssuedChallenge>, StoreError> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let row: Option<(String, String, String, i64)> = query_row(
            &conn,
            "SELECT approval_id, decision, principal, expires_at FROM challenges \
                 WHERE nonce = ?1",
            [nonce],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .optional()
        .map_err(db)?;
        row.map(|(approval_id, decision, principal, expires_at)| {
            Ok(IssuedChallenge {
                nonce: nonce.to_vec(),
                approval_id,
                decision: decision_from(&decision)?,
                principal,
                expires_at,
            })
        })
        .transpose()
    }

    fn replay_snapshot(
        &self,
        nonce: &[u8],
        credential_id: &[u8],
    ) -> Result<(bool, Option<u32>), StoreError> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let spent = query_row(
            &conn,
            "SELECT 1 FROM spent_nonces WHERE nonce = ?1",
            [nonce],
            |_| Ok(()),
        )
        .optional()
        .map_err(db)?
        .is_some();
        let count = query_row(
            &conn,
            "SELECT sign_count FROM counters WHERE credential_id = ?1",
            [credential_id],
            |r| r.get(0),
        )
        .optional()
        .map_err(db)?;
        Ok((spent, count))
    }

    fn put_login_challenge(&self, nonce: &[u8], expires_at: i64) -> Result<(), StoreError> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        exec(
            &conn,
            "INSERT INTO login_challenges (nonce, expires_at) VALUES (?1, ?2)",
            params![nonce, expires_at],
        )
        .map_err(db)?;
        Ok(())
    }

    fn take_login_challenge(&self, nonce: &[u8], now: i64) -> Result<bool, StoreError> {
        self.with_tx(|tx| {
            let expires: Option<i64> = query_row(
                tx,
                "DELETE FROM login_challenges WHERE nonce = ?1 RETURNING expires_at",
                [nonce],
                |r| r.get(0),
            )
            .optional()
            .map_err(db)?;
            Ok(expires.is_some_and(|t| t > now))
        })
    }

    fn create_session(
        &self,
        token_hash: &[u8; 32],
        s: &Session,
        sign_count: u32,
    ) -> Result<bool, StoreError> {
        self.with_tx(|tx| {
            let stored: Option<u32> = query_row(
                tx,
                "SELECT sign_count FROM counters WHERE credential_id = ?1",
                [&s.credential_id],
                |r| r.get(0),
            )
            .optional()
            .map_err(db)?;
            if let Some(stored) = stored
                && !(stored == 0 && sign_count == 0)
                && sign_count <= stored
            {
                return Ok(false);
            }
            exec(
                tx,
                "INSERT INTO counters (credential_id, sign_count) VALUES (?1, ?2) \
                 ON CONFLICT (credential_id) DO UPDATE SET sign_count = MAX(sign_count, ?2)",
                params![s.credential_id, sign_count],
            )
            .map_err(db)?;
            exec(
                tx,
                "INSERT INTO sessions (token_hash, principal, credential_id, expires_at) \
                 VALUES (?1, ?2, ?3, ?4)",
                params![&token_hash[..], s.principal, s.credential_id, s.expires_at],
            )
            .map_err(db)?;
            Ok(true)
        })
    }

    fn session(&self, token_hash: &[u8; 32], now: i64) -> Result<Option<Session>, StoreError> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        query_row(
            &conn,
            "SELECT principal, credential_id, expires_at FROM sessions \
             WHERE token_hash = ?1 AND expires_at > ?2",
            params![&token_hash[..], now],
            |r| {
                Ok(Session {
                    principal: r.get(0)?,
                    credential_id: r.get(1)?,
                    expires_at: r.get(2)?,
                })
            },
        )
        .optional()
        .map_err(db)
    }

    fn delete_session(&self, token_hash: &[u8; 32]) -> Result<bool, StoreError> {
        self.with_tx(|tx| {
            let n = exec(
                tx,
                "DELETE FROM sessions WHERE token_hash = ?1",
                [&token_hash[..]],
            )
            .map_err(db)?;
            Ok(n > 0)
        })
    }

    fn put_credentials(&self, records: &[CredentialRecord], now: i64) -> Result<usize, StoreError> {
        self.with_tx(|tx| {
            let mut events = Vec::new();
            let mut changed = 0;
            for record in records {
                let stored = stored_credential(tx, &record.credential_id)?;
                let sql = match plan_import(stored.as_ref(), record, now) {
                    Import::Keep => continue,
                    Import::Insert(e) => {
                        events.extend(e);
                        "INSERT INTO credentials (credential_id, record_json) VALUES (?1, ?2)"
                    }
                    Import::Replace(e) => {
                        events.extend(e);
                        "UPDATE credentials SET record_json = ?2 WHERE credential_id = ?1"
                    }
                };
                exec(tx, sql, params![record.credential_id, record_json(record)?]).map_err(db)?;
                changed += 1;
            }
            if changed > 0 {
                bump_credentials_version(tx)?;
                self.append(tx, &events)?;
            }
            Ok(changed)
        })
    }

    fn revoke_credential(
        &self,
        credential_id: &[u8],
        _now: i64,
        event: &AuditEvent,
    ) -> Result<RevokeOutcome, StoreError> {
        self.with_tx(|tx| {
            let Some(mut record) = stored_credential(tx, credential_id)? else {
                return Ok(RevokeOutcome::NotFound);
            };
            if record.revoked {
                return Ok(RevokeOutcome::AlreadyRevoked);
            }
            record.revoked = true;
            exec(
                tx,
                "UPDATE credentials SET record_json = ?2 WHERE credential_id = ?1",
                params![credential_id, record_json(&record)?],
            )
            .map_err(db)?;
            bump_credentials_version(tx)?;
            self.append(tx, std::slice::from_ref(event))?;
            Ok(RevokeOutcome::Revoked)
        })
    }

    fn credentials_version(&self) -> Result<u64, StoreError> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let v: i64 = query_row(
            &conn,
            "SELECT version FROM credentials_version WHERE one = 1",
            [],
            |r| r.get(0),
        )
        .map_err(db)?;
        u64::try_from(v).map_err(|_| StoreError::Corrupt("negative credentials version".into()))
    }

    fn credentials(&self) -> Result<Vec<CredentialRecord>, StoreError> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let mut stmt = conn
            .prepare_cached("SELECT record_json FROM credentials ORDER BY credential_id")
            .map_err(db)?;
        let rows: Vec<String> = stmt
            .query_map([], |r| r.get(0))
            .map_err(db)?
            .collect::<Result<_, _>>()
            .map_err(db)?;
        rows.iter()
            .map(|json| serde_json::from_str(json).map_err(|e| StoreError::Corrupt(e.to_string())))
            .collect()
    }

    fn put_gateway(&self, g: &GatewayRecord) -> Result<bool, StoreError> {
        self.with_tx(|tx| {
            // The token hash is unique too, so a (astronomically unlikely) collision is refused
            // rather than making one token authenticate as two gateways.
            let inserted = exec(
                tx,
                "INSERT INTO gateways (name, token_hash, created_at, revoked_at) \
                 VALUES (?1, ?2, ?3, ?4) ON CONFLICT DO NOTHING",
                params![g.name, &g.token_hash[..], g.created_at, g.revoked_at],
            )
            .map_err(db)?;
            if inserted == 1 {
                bump_credentials_version(tx)?;
            }
            Ok(inserted == 1)
        })
    }

    fn revoke_gateway(&self, name: &str, now: i64) -> Result<RevokeOutcome, StoreError> {
        self.with_tx(|tx| {
            let revoked: Option<Option<i64>> = query_row(
                tx,
                "SELECT revoked_at FROM gateways WHERE name = ?1",
                [name],
                |r| r.get(0),
            )
            .optional()
            .map_err(db)?;
            match revoked {
                None => Ok(RevokeOutcome::NotFound),
                Some(Some(_)) => Ok(RevokeOutcome::AlreadyRevoked),
                Some(None) => {
                    exec(
                        tx,
                        "UPDATE gateways SET revoked_at = ?2 WHERE name = ?1",
                        params![name, now],
                    )
                    .map_err(db)?;
                    bump_credentials_version(tx)?;
                    Ok(RevokeOutcome::Revoked)
                }
            }
        })
    }

    fn gateways(&self) -> Result<Vec<GatewayRecord>, StoreError> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let mut stmt = conn
            .prepare_cached(
                "SELECT name, token_hash, created_at, revoked_at FROM gateways ORDER BY name",
            )
            .map_err(db)?;
        let rows: Vec<(String, Vec<u8>, i64, Option<i64>)> = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .map_err(db)?
            .collect::<Result<_, _>>()
            .map_err(db)?;
        rows.into_iter()
            .map(|(name, hash, created_at, revoked_at)| {
                Ok(GatewayRecord {
                    name,
                    token_hash: hash32(hash, "gateway token hash")?,
                    created_at,
                    revoked_at,
                })
            })
            .collect()
    }

    fn put_invite(&self, i: &crate::enroll::Invite) -> Result<(), StoreError> {
        self.with_tx(|tx| {
            exec(
                tx,
                "INSERT INTO invites (token_hash, principal, grp, created_at, expires_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![
                    &i.token_hash[..],
                    i.principal,
                    i.group,
                    i.created_at,
                    i.expires_at
                ],
            )
            .map_err(db)?;
            Ok(())
        })
    }

    fn invite(
        &self,
        token_hash: &[u8; 32],
        now: i64,
    ) -> Result<Option<crate::enroll::Invite>, StoreError> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        query_row(
            &conn,
            "SELECT principal, grp, created_at, expires_at FROM invites \
             WHERE token_hash = ?1 AND redeemed_at IS NULL AND expires_at > ?2",
            params![&token_hash[..], now],
            |r| {
                Ok(crate::enroll::Invite {
                    token_hash: *token_hash,
                    principal: r.get(0)?,
                    group: r.get(1)?,
                    created_at: r.get(2)?,
                    expires_at: r.get(3)?,
                })
            },
        )
        .optional()
        .map_err(db)
    }

    fn redeem_invite(
        &self,
        token_hash: &[u8; 32],
        now: i64,
        credential: &CredentialRecord,
        event: &AuditEvent,
    ) -> Result<RedeemOutcome, StoreError> {
        let json = record_json(credential)?;
        self.with_tx(|tx| {
            let exists: bool = query_row(
                tx,
                "SELECT EXISTS (SELECT 1 FROM credentials WHERE credential_id = ?1)",
                [&credential.credential_id],
                |r| r.get(0),
            )
            .map_err(db)?;
            if exists {
                return Ok(RedeemOutcome::CredentialExists);
            }
            let group: Option<Option<String>> = query_row(
                tx,
                "UPDATE invites SET redeemed_at = ?2 \
                     WHERE token_hash = ?1 AND redeemed_at IS NULL AND expires_at > ?2 \
                     RETURNING grp",
                params![&token_hash[..], now],
                |r| r.get(0),
            )
            .optional()
            .map_err(db)?;
            let Some(group) = group else {
                return Ok(RedeemOutcome::InviteUnusable);
            };
            exec(
                tx,
                "INSERT INTO credentials (credential_id, record_json) VALUES (?1, ?2)",
                params![credential.credential_id, json],
            )
            .map_err(db)?;
            if let Some(group) = group {
                exec(
                    tx,
                    "INSERT INTO memberships (principal, grp) VALUES (?1, ?2) \
                     ON CONFLICT DO NOTHING",
                    params![credential.principal, group],
                )
                .map_err(db)?;
            }
            bump_credentials_version(tx)?;
            self.append(tx, std::slice::from_ref(event))?;
            Ok(RedeemOutcome::Redeemed)
        })
    }

    fn memberships(&self) -> Result<Vec<(String, String)>, StoreError> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let mut stmt = conn
            .prepare_cached("SELECT principal, grp FROM memberships ORDER BY grp, principal")
            .map_err(db)?;
        let rows = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(db)?;
        rows.collect::<Result<_, _>>().map_err(db)
    }

    fn audit_head(&self) -> Result<(u64, [u8; 32]), StoreError> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        head(&conn)
    }

    fn audit_lines_after(&self, seq: u64, limit: usize) -> Result<Vec<(u64, String)>, StoreError> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let mut stmt = conn
            .prepare_cached("SELECT seq, line FROM audit WHERE seq > ?1 ORDER BY seq LIMIT ?2")
            .map_err(db)?;
        let rows: Vec<(i64, String)> = stmt
            .query_map(params![to_i64(seq), to_i64(limit as u64)], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .map_err(db)?
            .collect::<Result<_, _>>()
            .map_err(db)?;
        rows.into_iter()
            .map(|(s, line)| {
                u64::try_from(s)
                    .map(|s| (s, line))
                    .map_err(|_| StoreError::Corrupt("negative audit seq".into()))
            })
            .collect()
    }

    fn pending_count(&self) -> Result<u64, StoreError> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let n: i64 = query_row(
            &conn,
            "SELECT COUNT(*) FROM approvals WHERE status = 'PENDING'",
            [],
            |r| r.get(0),
        )
        .map_err(db)?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    fn oldest_pending(&self) -> Result<Option<i64>, StoreError> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        query_row(
            &conn,
            "SELECT MIN(created_at) FROM approvals WHERE status = 'PENDING'",
            [],
            |r| r.get(0),
        )
        .map_err(db)
    }

    fn ready(&self) -> Result<(), StoreError> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        // IMMEDIATE takes the write lock: a read-only or locked-out database fails here, not
        // at the next request's commit.
        conn.execute_batch("BEGIN IMMEDIATE").map_err(db)?;
        let probe = (|| {
            // The newest column `add_columns` adds: present means the schema is current.
            conn.prepare_cached("SELECT gateway FROM approvals LIMIT 0")
                .map_err(db)?;
            head(&conn)?;
            // A write to the audit chain that touches no row: proves the table accepts writes.
            conn.execute("DELETE FROM audit WHERE seq < 0", [])
                .map_err(db)?;
            Ok(())
        })();
        let rollback = conn.execute_batch("ROLLBACK").map_err(db);
        probe.and(rollback)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn approvals(store: &SqliteStore) -> i64 {
        let conn = store.conn.lock().unwrap_or_else(|p| p.into_inner());
        query_row(&conn, "SELECT COUNT(*) FROM approvals", [], |r| r.get(0)).unwrap_or(-1)
    }

    fn insert(conn: &Connection, id: &str) -> Result<(), StoreError> {
        exec(
            conn,
            "INSERT INTO approvals (id, created_at, expires_at, agent_id, tool_name, profile, \
             fields_json, severity, op_hash_approved, op_hash_denied, status) \
             VALUES (?1, 0, 1, 'a', 't', 'p', '{}', 'normal', x'00', x'00', 'PENDING')",
            [id],
        )
        .map(drop)
        .map_err(db)
    }

    #[test]
    fn a_failed_transaction_leaves_nothing_and_the_connection_usable() {
        let Ok(store) = SqliteStore::in_memory(AuditSealer::from_seed([3; 32])) else {
            panic!("in-memory store")
        };
        let failed: Result<(), StoreError> = store.with_tx(|tx| {
            insert(tx, "a")?;
            Err(StoreError::Corrupt("refused after a write".into()))
        });
        assert!(matches!(failed, Err(StoreError::Corrupt(_))));
        assert_eq!(
            approvals(&store),
            0,
            "the write before the error was rolled back"
        );
        // A transaction left open would make this BEGIN fail.
        assert!(store.with_tx(|tx| insert(tx, "b")).is_ok());
        assert_eq!(approvals(&store), 1);
    }

    /// A scratch directory for a file-backed store, removed on drop.
    struct Scratch(std::path::PathBuf);

    impl Scratch {
        fn new(tag: &str) -> Self {
            let mut raw = [0u8; 8];
            getrandom::fill(&mut raw).unwrap_or_default();
            let name: String = raw.iter().map(|b| format!("{b:02x}")).collect();
            let dir = std::env::temp_dir().join(format!("countersign-sqlite-{tag}-{name}"));
            std::fs::create_dir_all(&dir).unwrap_or_default();
            Self(dir)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn open(path: &Path) -> SqliteStore {
        let Ok(store) =
            SqliteStore::open(path, AuditSealer::from_seed([3; 32]), Durability::Normal)
        else {
            panic!("opening {}", path.display())
        };
        store
    }

    fn file_len(path: &Path) -> u64 {
        std::fs::metadata(path).map_or(0, |m| m.len())
    }

    #[test]
    fn commits_never_checkpoint_the_background_thread_does() {
        let dir = Scratch::new("checkpoint");
        let path = dir.0.join("db");
        let store = open(&path);
        {
            let conn = store.conn.lock().unwrap_or_else(|p| p.into_inner());
            let auto: i64 =
                query_row(&conn, "PRAGMA wal_autocheckpoint", [], |r| r.get(0)).unwrap_or(-1);
            assert_eq!(
                auto, 0,
                "the request connection never checkpoints on commit"
            );
        }
        let before = file_len(&path);
        for n in 0..2000 {
            assert!(store.with_tx(|tx| insert(tx, &format!("id-{n}"))).is_ok());
        }
        // The rows reach the database file without any request doing the copying. The wait is
        // generous and only bounds a hang; it asserts nothing about speed.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        while file_len(&path) < before + 64 * 1024 {
            assert!(
                std::time::Instant::now() < deadline,
                "the checkpointer never copied the log ({} bytes)",
                file_len(&path)
            );
            std::thread::sleep(CHECKPOINT_INTERVAL);
        }
        assert_eq!(approvals(&store), 2000);
    }

    #[test]
    fn closing_folds_the_log_into_the_file_and_keeps_every_commit() {
        let dir = Scratch::new("close");
        let path = dir.0.join("db");
        let store = open(&path);
        for n in 0..500 {
            assert!(store.with_tx(|tx| insert(tx, &format!("id-{n}"))).is_ok());
        }
        drop(store);
        let wal = dir.0.join("db-wal");
        assert_eq!(
            file_len(&wal),
            0,
            "the last connection checkpointed on close"
        );
        assert_eq!(approvals(&open(&path)), 500);
    }

    #[test]
    fn a_long_log_is_copied_to_its_end_and_starts_again() {
        let dir = Scratch::new("restart");
        let path = dir.0.join("db");
        let mut store = open(&path);
        // Drive the checkpointer by hand: the same step its thread runs, without the timing.
        drop(store.checkpointer.take());
        let Ok(conn) = Connection::open(&path) else {
            panic!("second connection")
        };
        let mut passes = Passes {
            conn,
            requests: store.conn.clone(),
            last_frames: 0,
        };
        for n in 0..6000 {
            assert!(store.with_tx(|tx| insert(tx, &format!("id-{n}"))).is_ok());
        }
        let frames = |c: &Connection| checkpoint(c).map_or(-1, |(frames, _)| frames);
        assert!(frames(&passes.conn) >= RESTART_FRAMES, "the log is long");
        // A long log that moved since the last pass is copied to its end with writes held.
        assert_eq!(passes.pass().ok(), Some(Pass::CaughtUp));
        // With nothing written since, the next pass rests: an idle store is not checkpointed
        // in a loop, and nothing takes the request connection.
        assert_eq!(passes.pass().ok(), Some(Pass::Rest));
        // The next write finds the log fully copied and starts it again from the beginning.
        assert!(store.with_tx(|tx| insert(tx, "after")).is_ok());
        let after = frames(&passes.conn);
        assert!((1..16).contains(&after), "{after} frames after the restart");
        // The file was cut back to the limit, not left at its longest.
        assert!(file_len(&dir.0.join("db-wal")) <= JOURNAL_SIZE_LIMIT as u64);
        assert_eq!(approvals(&store), 6001);
    }

    #[test]
    fn a_log_pinned_by_another_reader_is_left_to_the_next_interval() {
        let dir = Scratch::new("pinned");
        let path = dir.0.join("db");
        let mut store = open(&path);
        drop(store.checkpointer.take());
        let (Ok(conn), Ok(reader)) = (Connection::open(&path), Connection::open(&path)) else {
            panic!("connections")
        };
        let mut passes = Passes {
            conn,
            requests: store.conn.clone(),
            last_frames: 0,
        };
        assert!(store.with_tx(|tx| insert(tx, "first")).is_ok());
        // A reader (another process, say) holds a snapshot from before the bulk of the log.
        assert!(exec(&reader, "BEGIN", []).is_ok());
        assert_eq!(
            query_row(&reader, "SELECT COUNT(*) FROM approvals", [], |r| r
                .get::<_, i64>(0))
            .ok(),
            Some(1)
        );
        for n in 0..6000 {
            assert!(store.with_tx(|tx| insert(tx, &format!("id-{n}"))).is_ok());
        }
        // The checkpoint cannot pass the reader's snapshot even with our writes held: the pass
        // says rest, so the thread waits an interval instead of spinning on the lock.
        assert_eq!(passes.pass().ok(), Some(Pass::Rest));
        // Once the reader leaves, the next pass's passive checkpoint copies the rest.
        assert!(exec(&reader, "COMMIT", []).is_ok());
        assert_eq!(passes.pass().ok(), Some(Pass::Rest));
        assert!(store.with_tx(|tx| insert(tx, "after")).is_ok());
        let frames = checkpoint(&passes.conn).map_or(-1, |(frames, _)| frames);
        assert!(
            (1..16).contains(&frames),
            "{frames} frames after the reader left"
        );
    }
}
