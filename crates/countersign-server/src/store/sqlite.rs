//! The embedded SQLite store (the default: nothing to install).
//!
//! One connection in WAL mode behind a mutex: SQLite serializes writers anyway, and a single
//! connection makes every method trivially one `IMMEDIATE` transaction. With `synchronous=NORMAL`
//! a committed transaction survives the process being killed (the WAL is in the OS page cache);
//! `durability = "full"` also survives power loss at the cost of an fsync per commit.
//!
//! This file holds only the connection, its transactions and the schema; the rules are in
//! `rules.rs`, shared with PostgreSQL.

use super::rules::{self, Db, SqlStore};
use super::seam::{Dialect, Param, Row, Sql, Tx, Value};
use super::{SqliteStore, StoreError};
use crate::audit::AuditSealer;
use crate::config::Durability;
use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Connection, Params};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// Schema migrations, applied in order on open, each once (recorded in
/// `countersign_migrations`). Never edit a published entry: append one.
const MIGRATIONS: &[&str] = &[
    // 1: the schema as it stood when numbered migrations began (`IF NOT EXISTS`, so a database
    // from before then, brought up to date by `LEGACY_COLUMNS`, takes it as a no-op).
    "
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
    grant_collected_at INTEGER,
    gateway TEXT,
    preauth_slug TEXT,
    preauth_digest BLOB,
    preauth_use INTEGER,
    revises TEXT
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
CREATE TABLE IF NOT EXISTS standing_grants (
    id TEXT PRIMARY KEY REFERENCES approvals (id),
    expires_at INTEGER NOT NULL,
    max_uses INTEGER NOT NULL CHECK (max_uses >= 1),
    uses INTEGER NOT NULL DEFAULT 0 CHECK (uses >= 0 AND uses <= max_uses),
    revoked_at INTEGER,
    revoked_by TEXT
);
CREATE TABLE IF NOT EXISTS standing_uses (
    approval_id TEXT PRIMARY KEY REFERENCES approvals (id),
    grant_id TEXT NOT NULL REFERENCES standing_grants (id),
    use_number INTEGER NOT NULL,
    UNIQUE (grant_id, use_number)
);
",
    // 2: auditor credentials (`countersign auditor add`), apart from the gateways.
    "
CREATE TABLE auditors (
    name TEXT PRIMARY KEY,
    token_hash BLOB NOT NULL UNIQUE,
    created_at INTEGER NOT NULL,
    revoked_at INTEGER
);
",
    // 3: the gateways a standing grant names (its signed `calls.gateways`), the index by which
    // a use is found and guarded. Grants from before have no rows: their scope names no
    // gateway, so they cover no call (docs/SPEC.md §14.5).
    "
CREATE TABLE standing_grant_gateways (
    grant_id TEXT NOT NULL REFERENCES standing_grants (id),
    gateway TEXT NOT NULL,
    PRIMARY KEY (gateway, grant_id)
);
",
    // 4: the notification outbox (store/outbox.rs): one row per approval, step and channel.
    "
CREATE TABLE notify_outbox (
    approval_id TEXT NOT NULL REFERENCES approvals (id),
    step TEXT NOT NULL,
    channel TEXT NOT NULL,
    due_at INTEGER NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    lease_until INTEGER,
    done_at INTEGER,
    outcome TEXT,
    PRIMARY KEY (approval_id, step, channel)
);
CREATE INDEX notify_outbox_due ON notify_outbox (channel, due_at) WHERE done_at IS NULL;
",
];

/// Columns that releases before numbered migrations added to an existing `approvals` table one
/// at a time (SQLite has no `ADD COLUMN IF NOT EXISTS`). Applied, where missing, only to such a
/// database, before migration 1; never extend this list: add a migration.
const LEGACY_COLUMNS: &[(&str, &str)] = &[
    ("gateway", "ALTER TABLE approvals ADD COLUMN gateway TEXT"),
    (
        "preauth_slug",
        "ALTER TABLE approvals ADD COLUMN preauth_slug TEXT",
    ),
    (
        "preauth_digest",
        "ALTER TABLE approvals ADD COLUMN preauth_digest BLOB",
    ),
    (
        "preauth_use",
        "ALTER TABLE approvals ADD COLUMN preauth_use INTEGER",
    ),
    ("revises", "ALTER TABLE approvals ADD COLUMN revises TEXT"),
];

/// The SQLite connection behind a [`SqlStore`].
#[derive(Debug)]
pub(super) struct SqliteDb {
    /// Declared first so it stops first: the request connection, closed last, then folds what
    /// is left of the log into the database file.
    checkpointer: Option<Checkpointer>,
    conn: Arc<Mutex<Connection>>,
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
    /// Open (creating if needed) the database at `path`, applying migrations.
    pub fn open(
        path: &Path,
        sealer: AuditSealer,
        durability: Durability,
    ) -> Result<Self, StoreError> {
        Ok(SqlStore::new(
            Db::Sqlite(SqliteDb::open(path, durability)?),
            sealer,
        ))
    }

    /// A private in-memory database (tests).
    pub fn in_memory(sealer: AuditSealer) -> Result<Self, StoreError> {
        Ok(SqlStore::new(Db::Sqlite(SqliteDb::in_memory()?), sealer))
    }
}

impl SqliteDb {
    fn open(path: &Path, durability: Durability) -> Result<Self, StoreError> {
        let conn = Connection::open(path).map_err(db)?;
        let mut store = Self::init(conn, durability)?;
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

    fn in_memory() -> Result<Self, StoreError> {
        Self::init(
            Connection::open_in_memory().map_err(db)?,
            Durability::Normal,
        )
    }

    fn init(conn: Connection, durability: Durability) -> Result<Self, StoreError> {
        let sync = match durability {
            Durability::Normal => "NORMAL",
            Durability::Full => "FULL",
        };
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(db)?;
        conn.pragma_update(None, "synchronous", sync).map_err(db)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(db)?;
        // Room for every statement this store issues, so none is ever parsed twice.
        conn.set_prepared_statement_cache_capacity(128);
        let store = Self {
            checkpointer: None,
            conn: Arc::new(Mutex::new(conn)),
        };
        store.with_tx(|conn| {
            add_legacy_columns(conn)?;
            rules::migrate(&mut SqliteTx { conn }, MIGRATIONS)
        })?;
        Ok(store)
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

    pub(super) fn transaction<T>(
        &self,
        f: impl Fn(&mut dyn Tx) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.with_tx(|conn| f(&mut SqliteTx { conn }))
    }

    /// One statement on its own (SQLite commits it by itself).
    pub(super) fn alone<T>(
        &self,
        f: impl Fn(&mut dyn Tx) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut SqliteTx { conn: &conn })
    }

    /// Readiness: [`rules::probe`] in an `IMMEDIATE` transaction (which takes the write lock: a
    /// read-only or locked-out database fails here, not at the next request's commit), always
    /// rolled back.
    pub(super) fn ready(&self) -> Result<(), StoreError> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        conn.execute_batch("BEGIN IMMEDIATE").map_err(db)?;
        let probe = rules::probe(&mut SqliteTx { conn: &conn }, MIGRATIONS.len());
        let rollback = conn.execute_batch("ROLLBACK").map_err(db);
        probe.and(rollback)
    }
}

/// A database from before numbered migrations (an `approvals` table, no migrations table) gets
/// the columns its release may not have added yet.
fn add_legacy_columns(conn: &Connection) -> Result<(), StoreError> {
    let exists = |table: &str| -> Result<bool, StoreError> {
        conn.query_row(
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?1",
            [table],
            |r| r.get::<_, i64>(0),
        )
        .map(|n| n > 0)
        .map_err(db)
    };
    if !exists("approvals")? || exists("countersign_migrations")? {
        return Ok(());
    }
    let mut stmt = conn.prepare("PRAGMA table_info(approvals)").map_err(db)?;
    let names: Vec<String> = stmt
        .query_map([], |r| r.get(1))
        .map_err(db)?
        .collect::<Result<_, _>>()
        .map_err(db)?;
    for (column, sql) in LEGACY_COLUMNS {
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
        // SQLite rolls a transaction back by itself on some errors (SQLITE_FULL, an I/O error):
        // then there is nothing left to roll back, and saying "rollback failed" would mislead.
        if !self.committed
            && !self.conn.is_autocommit()
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

impl rusqlite::ToSql for Param<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match *self {
            Param::Null => ToSqlOutput::Borrowed(ValueRef::Null),
            Param::Int(v) => ToSqlOutput::Borrowed(ValueRef::Integer(v)),
            Param::Text(v) => ToSqlOutput::Borrowed(ValueRef::Text(v.as_bytes())),
            Param::Blob(v) => ToSqlOutput::Borrowed(ValueRef::Blob(v)),
            Param::Ints(_) | Param::Texts(_) | Param::Blobs(_) => {
                return Err(rusqlite::Error::ToSqlConversionFailure(
                    "array parameters are for PostgreSQL statements only".into(),
                ));
            }
        })
    }
}

fn value(v: ValueRef<'_>) -> Result<Value, StoreError> {
    Ok(match v {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => Value::Int(i),
        ValueRef::Text(t) => Value::Text(
            String::from_utf8(t.to_vec()).map_err(|e| StoreError::Corrupt(e.to_string()))?,
        ),
        ValueRef::Blob(b) => Value::Blob(b.to_vec()),
        ValueRef::Real(f) => return Err(StoreError::Corrupt(format!("unexpected real {f}"))),
    })
}

/// [`Tx`] over the connection, inside (or, for [`SqliteDb::alone`], outside) a transaction.
struct SqliteTx<'c> {
    conn: &'c Connection,
}

impl Tx for SqliteTx<'_> {
    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }

    fn execute(&mut self, sql: &Sql, params: &[Param<'_>]) -> Result<u64, StoreError> {
        let n = exec(
            self.conn,
            sql.text(Dialect::Sqlite),
            rusqlite::params_from_iter(params),
        )
        .map_err(db)?;
        Ok(u64::try_from(n).unwrap_or(u64::MAX))
    }

    fn query(&mut self, sql: &Sql, params: &[Param<'_>]) -> Result<Vec<Row>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(sql.text(Dialect::Sqlite))
            .map_err(db)?;
        let columns = stmt.column_count();
        let mut rows = stmt.query(rusqlite::params_from_iter(params)).map_err(db)?;
        let mut out = Vec::new();
        while let Some(r) = rows.next().map_err(db)? {
            let values = (0..columns)
                .map(|i| value(r.get_ref(i).map_err(db)?))
                .collect::<Result<_, _>>()?;
            out.push(Row(values));
        }
        Ok(out)
    }

    fn batch(&mut self, sql: &str) -> Result<(), StoreError> {
        self.conn.execute_batch(sql).map_err(db)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query_row<T>(
        conn: &Connection,
        sql: &str,
        params: impl Params,
        f: impl FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    ) -> rusqlite::Result<T> {
        conn.prepare_cached(sql)?.query_row(params, f)
    }

    fn approvals(store: &SqliteDb) -> i64 {
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
        let Ok(store) = SqliteDb::in_memory() else {
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

    fn open(path: &Path) -> SqliteDb {
        let Ok(store) = SqliteDb::open(path, Durability::Normal) else {
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

    /// Published migration numbers never move: a database records only how far it got, so an
    /// entry inserted before a published one would be skipped by a database past it, and the
    /// published one run twice.
    #[test]
    fn published_migrations_keep_their_numbers() {
        assert!(MIGRATIONS[1].contains("CREATE TABLE auditors ("));
        assert!(MIGRATIONS[2].contains("CREATE TABLE standing_grant_gateways ("));
    }

    /// A database of the release with auditors and before the grants' gateways (migrations 1
    /// and 2) upgrades in place: migration 3 only, its rows kept, and the store then ready.
    #[test]
    fn a_database_at_migration_2_upgrades_to_the_grant_gateways() {
        let dir = Scratch::new("upgrade-from-2");
        let path = dir.0.join("db");
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch("BEGIN").unwrap();
            rules::migrate(&mut SqliteTx { conn: &conn }, &MIGRATIONS[..2]).unwrap();
            conn.execute_batch(
                "INSERT INTO auditors (name, token_hash, created_at)
                 VALUES ('compliance', zeroblob(32), 10);
                 COMMIT",
            )
            .unwrap();
        }
        let store = open(&path);
        store.ready().unwrap();
        let conn = store.conn.lock().unwrap_or_else(|p| p.into_inner());
        let versions: Vec<i64> = conn
            .prepare("SELECT version FROM countersign_migrations ORDER BY version")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(versions, [1, 2, 3, 4]);
        let auditors: i64 =
            query_row(&conn, "SELECT COUNT(*) FROM auditors", [], |r| r.get(0)).unwrap();
        assert_eq!(auditors, 1, "the auditor of the older release is kept");
        let gateways: i64 = query_row(
            &conn,
            "SELECT COUNT(*) FROM standing_grant_gateways",
            [],
            |r| r.get(0),
        )
        .unwrap();
        assert_eq!(gateways, 0, "the table is there, empty");
    }
}
