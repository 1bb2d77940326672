//! The PostgreSQL store: several replicas of the service over one database.
//!
//! Every method is one transaction at READ COMMITTED; the rules (`rules.rs`, shared with
//! SQLite) take row locks in one order so two replicas can wait on each other but never
//! deadlock. First-verdict-wins is the approval row lock plus a status check; a spent nonce is a
//! unique insert (`ON CONFLICT DO NOTHING`: a concurrent spender waits for the first one's commit
//! and then inserts nothing); the counter is compared under its row lock.
//!
//! The audit chain: a transaction that changes state writes its events, tagged with a key only
//! the service key's holders have, to `audit_unsealed` in the same commit; it takes no lock
//! that other replicas' commits wait for. Each replica runs a sealer thread ([`Sealer`]) that
//! moves committed events into the chain: under a cluster-wide advisory lock it takes the
//! waiting rows, checks their tags, seals them after the head row (`audit_head`) and updates the
//! head, in one transaction, so one flush covers many events. The chain stays unforked because
//! only the lock holder extends it, and `audit.seq` being the primary key is the second fence.
//! A caller that must see its events in the chain before it answers (a grant receipt's signed
//! checkpoint, `audit_head`) asks for a round and waits for it: concurrent callers share
//! rounds. Rows left by a replica that died are sealed by any other replica's next round, or
//! by its own on restart.
//!
//! The `postgres` crate is synchronous but runs a private tokio runtime per connection, which must
//! not be started on a thread that is already inside a runtime (the service calls the store from
//! its async tasks as well as from the blocking pool). So each connection lives on its own worker
//! thread and a call sends it a job and waits for the answer on a plain channel: that works from
//! any thread, like the SQLite store's mutex. This file holds only that, the binding of
//! parameters and rows, and the schema.

use super::rules::{self, Db, SqlStore};
use super::seam::{Dialect, Param, Row, Sql, Tx, Value, dollar_placeholders};
use super::{PostgresStore, StoreError};
use crate::audit::{AuditSealer, GENESIS_HASH};
use ::postgres::error::SqlState;
use ::postgres::types::{ToSql, Type};
use ::postgres::{Client, NoTls, Statement, Transaction};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};

/// Schema migrations, applied in order on start; a version is applied once, under an advisory
/// lock so replicas starting together do not race. Never edit a published entry: append one.
pub(super) const MIGRATIONS: &[&str] = &[
    "
CREATE TABLE approvals (
    id TEXT PRIMARY KEY,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    agent_id TEXT NOT NULL,
    tool_name TEXT NOT NULL,
    profile TEXT NOT NULL,
    fields_json TEXT NOT NULL,
    severity TEXT NOT NULL,
    op_hash_approved BYTEA NOT NULL,
    op_hash_denied BYTEA NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('PENDING', 'APPROVED', 'DENIED')),
    reason_code TEXT,
    evidence_json TEXT,
    decided_at BIGINT,
    grant_expires_at BIGINT,
    grant_collected_at BIGINT
);
CREATE INDEX approvals_pending_expiry ON approvals (expires_at) WHERE status = 'PENDING';
CREATE TABLE challenges (
    nonce BYTEA PRIMARY KEY,
    approval_id TEXT NOT NULL,
    decision TEXT NOT NULL,
    principal TEXT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX challenges_expiry ON challenges (expires_at);
CREATE TABLE spent_nonces (nonce BYTEA PRIMARY KEY, spent_at BIGINT NOT NULL);
CREATE TABLE counters (credential_id BYTEA PRIMARY KEY, sign_count BIGINT NOT NULL);
CREATE TABLE credentials (credential_id BYTEA PRIMARY KEY, record_json TEXT NOT NULL);
CREATE TABLE login_challenges (nonce BYTEA PRIMARY KEY, expires_at BIGINT NOT NULL);
CREATE TABLE sessions (
    token_hash BYTEA PRIMARY KEY,
    principal TEXT NOT NULL,
    credential_id BYTEA NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE TABLE audit (seq BIGINT PRIMARY KEY, hash BYTEA NOT NULL, line TEXT NOT NULL);
CREATE TABLE audit_head (
    one BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
    seq BIGINT NOT NULL,
    hash BYTEA NOT NULL,
    public_key TEXT NOT NULL
);
",
    "
CREATE TABLE invites (
    token_hash BYTEA PRIMARY KEY,
    principal TEXT NOT NULL,
    grp TEXT,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    redeemed_at BIGINT
);
CREATE TABLE memberships (
    principal TEXT NOT NULL,
    grp TEXT NOT NULL,
    PRIMARY KEY (principal, grp)
);
",
    "
CREATE TABLE credentials_version (
    one BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
    version BIGINT NOT NULL
);
INSERT INTO credentials_version (version) VALUES (0);
",
    // Gateway credentials, and the gateway that created each approval (NULL for rows from
    // before: they belong to no gateway).
    "
ALTER TABLE approvals ADD COLUMN gateway TEXT;
CREATE TABLE gateways (
    name TEXT PRIMARY KEY,
    token_hash BYTEA NOT NULL UNIQUE,
    created_at BIGINT NOT NULL,
    revoked_at BIGINT
);
",
    // Approver-signed standing grants (store/standing.rs).
    "
CREATE TABLE standing_grants (
    id TEXT PRIMARY KEY REFERENCES approvals (id),
    expires_at BIGINT NOT NULL,
    max_uses BIGINT NOT NULL CHECK (max_uses >= 1),
    uses BIGINT NOT NULL DEFAULT 0 CHECK (uses >= 0 AND uses <= max_uses),
    revoked_at BIGINT,
    revoked_by TEXT
);
CREATE TABLE standing_uses (
    approval_id TEXT PRIMARY KEY REFERENCES approvals (id),
    grant_id TEXT NOT NULL REFERENCES standing_grants (id),
    use_number BIGINT NOT NULL,
    UNIQUE (grant_id, use_number)
);
",
    // Operator preauthorizations (config-owned rows), the one that approved a call, and the
    // approval a request revises.
    "
ALTER TABLE approvals ADD COLUMN preauth_slug TEXT, ADD COLUMN preauth_digest BYTEA,
    ADD COLUMN preauth_use BIGINT, ADD COLUMN revises TEXT;
CREATE TABLE preauthorizations (
    slug TEXT PRIMARY KEY,
    definition_json TEXT NOT NULL,
    digest BYTEA NOT NULL,
    expires_at BIGINT NOT NULL,
    max_uses BIGINT NOT NULL,
    uses BIGINT NOT NULL DEFAULT 0,
    in_config BOOLEAN NOT NULL,
    disabled_at BIGINT
);
",
    // Events committed with their state change and not yet sealed into the chain (the sealer
    // takes them in `id` order); `tag` is HMAC-SHA-256 of `event` under a key derived from the
    // service key (AuditSealer::tag_unsealed).
    "
CREATE TABLE audit_unsealed (
    id BIGSERIAL PRIMARY KEY,
    event TEXT NOT NULL,
    tag BYTEA NOT NULL
);
",
    // Auditor credentials (`countersign auditor add`), apart from the gateways.
    "
CREATE TABLE auditors (
    name TEXT PRIMARY KEY,
    token_hash BYTEA NOT NULL UNIQUE,
    created_at BIGINT NOT NULL,
    revoked_at BIGINT
);
",
    // The gateways a standing grant names (its signed `calls.gateways`), the index by which a
    // use is found and guarded. Grants from before have no rows: their scope names no gateway,
    // so they cover no call (docs/SPEC.md §14.5).
    "
CREATE TABLE standing_grant_gateways (
    grant_id TEXT NOT NULL REFERENCES standing_grants (id),
    gateway TEXT NOT NULL,
    PRIMARY KEY (gateway, grant_id)
);
",
    // The notification outbox (store/outbox.rs): one row per approval, step and channel.
    "
CREATE TABLE notify_outbox (
    approval_id TEXT NOT NULL REFERENCES approvals (id),
    step TEXT NOT NULL,
    channel TEXT NOT NULL,
    due_at BIGINT NOT NULL,
    attempts BIGINT NOT NULL DEFAULT 0,
    lease_until BIGINT,
    done_at BIGINT,
    outcome TEXT,
    PRIMARY KEY (approval_id, step, channel)
);
CREATE INDEX notify_outbox_due ON notify_outbox (channel, due_at) WHERE done_at IS NULL;
",
];

/// Most events one sealing transaction chains.
const SEAL_BATCH: i64 = 1024;

/// How often a replica's sealer looks for events nobody asked it to seal (a dead replica's, or
/// its own when no caller waits): the longest an event stays out of the chain while replicas
/// run.
const SEAL_POLL: std::time::Duration = std::time::Duration::from_millis(100);

/// Advisory lock key serializing migrations across replicas ("cntrsign").
const MIGRATION_LOCK: i64 = 0x636e_7472_7369_676e;

/// How many times a transaction is retried after a serialization failure or deadlock report.
const RETRIES: usize = 5;

pub(super) fn db(e: ::postgres::Error) -> StoreError {
    // The server's message is in the source; `Display` alone says only "db error".
    match e.as_db_error() {
        Some(d) if unavailable(d.code()) => {
            StoreError::Unavailable(format!("{}: {}", d.code().code(), d.message()))
        }
        Some(d) => StoreError::Database(format!("{}: {}", d.code().code(), d.message())),
        // No server answer at all: the connection is gone (killed, server restarting).
        None if e.is_closed() || lost(&e) => StoreError::Unavailable(e.to_string()),
        None => StoreError::Database(e.to_string()),
    }
}

/// A copy of a classified error (the retry keeps one, the statement returns the other).
fn clone_error(e: &StoreError) -> StoreError {
    match e {
        StoreError::Unavailable(m) => StoreError::Unavailable(m.clone()),
        StoreError::Corrupt(m) => StoreError::Corrupt(m.clone()),
        other => StoreError::Database(other.to_string()),
    }
}

/// No connection: an I/O failure talking to the server, or none could be opened (the driver's
/// Kind is private; its message and an I/O cause are what it exposes).
fn lost(e: &::postgres::Error) -> bool {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if s.is::<std::io::Error>() {
            return true;
        }
        source = s.source();
    }
    let text = e.to_string();
    text.starts_with("error connecting") || text.starts_with("error communicating")
}

/// Server conditions the operator (or a failover) resolves: read-only (hot standby, or
/// `default_transaction_read_only`), out of space, shutting down or starting up, connection
/// failures, too many connections.
fn unavailable(code: &SqlState) -> bool {
    let class = &code.code()[..2];
    *code == SqlState::READ_ONLY_SQL_TRANSACTION || matches!(class, "08" | "53" | "57")
}

/// A job for a connection's worker thread.
type Job = Box<dyn FnOnce(&mut Worker) + Send>;

/// The connection pool behind a [`SqlStore`] on PostgreSQL, and this replica's sealer.
#[derive(Debug)]
pub(super) struct PostgresDb {
    jobs: Mutex<mpsc::Sender<Job>>,
    sealer: Arc<Sealer>,
}

impl Drop for PostgresDb {
    fn drop(&mut self) {
        self.sealer.stop();
    }
}

/// Sealing rounds: asked for by callers that need their events in the chain, run by one thread
/// per replica on a connection of its own. A round started after a caller's request covers
/// every event committed before the request, so callers waiting together share one round (and
/// one flush): group commit for the chain, outside the request transactions.
#[derive(Debug, Default)]
struct Sealer {
    rounds: Mutex<Rounds>,
    changed: Condvar,
    stats: SealCounters,
}

#[derive(Debug, Default)]
struct Rounds {
    /// Rounds asked for so far (a request's number is the count after it).
    requested: u64,
    /// Every request up to this number has had a round start after it.
    completed: u64,
    /// The last round's error, with the request number it answered.
    failed: Option<(u64, StoreError)>,
    stop: bool,
}

/// What the sealer has done: the figures of docs/PERFORMANCE.md (time the chain lock was held
/// per sealed line).
#[derive(Debug, Default)]
struct SealCounters {
    rounds: AtomicU64,
    lines: AtomicU64,
    /// Time the lock was held by the transactions that sealed at least one line: from its
    /// grant to the commit's return (the lock is released at commit).
    busy_nanos: AtomicU64,
}

/// A snapshot of a replica sealer's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SealStats {
    /// Sealing transactions that chained at least one event.
    pub rounds: u64,
    /// Events chained.
    pub lines: u64,
    /// The time they held the cluster-wide chain lock, in nanoseconds (from its grant to the
    /// commit's return, so waiting for another replica's round is not counted).
    pub busy_nanos: u64,
}

impl Sealer {
    /// Ask for a round and wait until one has run after the request.
    fn seal_now(&self) -> Result<(), StoreError> {
        let mut rounds = self.rounds.lock().unwrap_or_else(|p| p.into_inner());
        rounds.requested += 1;
        let mine = rounds.requested;
        self.changed.notify_all();
        while rounds.completed < mine {
            if rounds.stop {
                return Err(StoreError::Unavailable("the store is closing".into()));
            }
            rounds = self.changed.wait(rounds).unwrap_or_else(|p| p.into_inner());
        }
        match &rounds.failed {
            Some((round, e)) if *round >= mine => Err(clone_error(e)),
            _ => Ok(()),
        }
    }

    fn stop(&self) {
        self.rounds.lock().unwrap_or_else(|p| p.into_inner()).stop = true;
        self.changed.notify_all();
    }

    /// The sealer thread: a round whenever one is asked for, and every [`SEAL_POLL`] anyway.
    fn run(&self, mut worker: Worker, key: &AuditSealer) {
        // Logged when it starts failing, changes reason, or recovers: not every poll.
        let mut failing: Option<String> = None;
        loop {
            let (target, stop) = {
                let mut rounds = self.rounds.lock().unwrap_or_else(|p| p.into_inner());
                if rounds.requested == rounds.completed && !rounds.stop {
                    rounds = self
                        .changed
                        .wait_timeout(rounds, SEAL_POLL)
                        .map_or_else(|p| p.into_inner().0, |(r, _)| r);
                }
                (rounds.requested, rounds.stop)
            };
            let outcome = self.seal_all(&mut worker, key);
            match (&outcome, &failing) {
                (Err(e), last) if last.as_deref() != Some(e.to_string().as_str()) => {
                    tracing::error!(error = %e, "sealing audit events failed; they stay committed and waiting");
                    failing = Some(e.to_string());
                }
                (Ok(()), Some(_)) => {
                    tracing::info!("sealing audit events works again");
                    failing = None;
                }
                _ => {}
            }
            {
                let mut rounds = self.rounds.lock().unwrap_or_else(|p| p.into_inner());
                rounds.completed = rounds.completed.max(target);
                rounds.failed = outcome.err().map(|e| (target, e));
            }
            self.changed.notify_all();
            if stop {
                return;
            }
        }
    }

    /// Seal batches until one comes back short (everything committed before it is chained).
    fn seal_all(&self, worker: &mut Worker, key: &AuditSealer) -> Result<(), StoreError> {
        loop {
            let (n, locked) =
                worker.transaction(false, &|tx| rules::seal_unsealed(tx, key, SEAL_BATCH))?;
            if let (true, Some(locked)) = (n > 0, locked) {
                // From the lock's grant to the commit's return: the lock is released at commit.
                let busy = u64::try_from(locked.elapsed().as_nanos()).unwrap_or(u64::MAX);
                self.stats.rounds.fetch_add(1, Ordering::Relaxed);
                self.stats.lines.fetch_add(n as u64, Ordering::Relaxed);
                self.stats.busy_nanos.fetch_add(busy, Ordering::Relaxed);
            }
            if i64::try_from(n).unwrap_or(i64::MAX) < SEAL_BATCH {
                return Ok(());
            }
        }
    }

    fn stats(&self) -> SealStats {
        SealStats {
            rounds: self.stats.rounds.load(Ordering::Relaxed),
            lines: self.stats.lines.load(Ordering::Relaxed),
            busy_nanos: self.stats.busy_nanos.load(Ordering::Relaxed),
        }
    }
}

/// One connection with its prepared statements.
struct Worker {
    url: String,
    client: Option<Client>,
    statements: HashMap<&'static str, Statement>,
}

impl Worker {
    fn new(url: &str) -> Self {
        Self {
            url: url.to_owned(),
            client: None,
            statements: HashMap::new(),
        }
    }

    /// The live connection, reconnecting after a broken one.
    fn client(&mut self) -> Result<&mut Client, StoreError> {
        if self.client.as_ref().is_none_or(Client::is_closed) {
            self.statements.clear();
            self.client = Some(Client::connect(&self.url, NoTls).map_err(db)?);
        }
        self.client
            .as_mut()
            .ok_or_else(|| StoreError::Database("no connection".into()))
    }

    /// Run `f` in one transaction (or, when `alone`, as statements that are each atomic on
    /// their own: a read or a single write, two round trips fewer), retrying it when the
    /// database asks for a retry.
    fn transaction<T>(
        &mut self,
        alone: bool,
        f: &dyn Fn(&mut dyn Tx) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let out = self.try_transaction(alone, f);
            if let Err(
                Retry::Again(StoreError::Unavailable(_)) | Retry::Fail(StoreError::Unavailable(_)),
            ) = &out
            {
                // A fresh connection next time: the server may have restarted, or (read-only)
                // this connection may be to a demoted primary while the URL now leads to the
                // new one; a session's read-only default is also fixed when it starts.
                self.client = None;
            }
            match out {
                Err(Retry::Again(_)) if attempt < RETRIES => continue,
                Err(Retry::Again(e) | Retry::Fail(e)) => return Err(e),
                Ok(v) => return Ok(v),
            }
        }
    }

    fn try_transaction<T>(
        &mut self,
        alone: bool,
        f: &dyn Fn(&mut dyn Tx) -> Result<T, StoreError>,
    ) -> Result<T, Retry> {
        self.client().map_err(Retry::Fail)?;
        let Self {
            client, statements, ..
        } = self;
        let client = client
            .as_mut()
            .ok_or_else(|| Retry::Fail(StoreError::Database("no connection".into())))?;
        let conn = if alone {
            Conn::Alone(client)
        } else {
            // Only BEGIN has been sent: a connection that died while idle in the pool (killed,
            // server restarted) is replaced and the transaction run again, nothing lost.
            Conn::Tx(client.transaction().map_err(|e| match retry(e) {
                Retry::Fail(e @ StoreError::Unavailable(_)) => Retry::Again(e),
                other => other,
            })?)
        };
        let mut tx = PgTx {
            conn,
            statements,
            retry: None,
        };
        let out = f(&mut tx);
        if let Some(e) = tx.retry.take() {
            return Err(Retry::Again(e));
        }
        let out = out.map_err(Retry::Fail)?;
        if let Conn::Tx(t) = tx.conn {
            t.commit().map_err(retry)?;
        }
        Ok(out)
    }
}

enum Retry {
    Again(StoreError),
    Fail(StoreError),
}

fn is_transient(e: &::postgres::Error) -> bool {
    e.code().is_some_and(|c| {
        *c == SqlState::T_R_SERIALIZATION_FAILURE || *c == SqlState::T_R_DEADLOCK_DETECTED
    })
}

/// The session was ended (pg_terminate_backend, a server shutting down). Inside an explicit
/// transaction, before COMMIT, that means nothing of it committed, so it may run again on a
/// new connection (the worker drops this one: the code is `unavailable`). Not at COMMIT nor for
/// a lone statement: the server may have committed before it noticed it was told to end, and
/// the answer is then lost (503; a retry by the client meets the committed state).
fn session_ended(e: &::postgres::Error) -> bool {
    e.code().is_some_and(|c| {
        *c == SqlState::ADMIN_SHUTDOWN
            || *c == SqlState::CRASH_SHUTDOWN
            || *c == SqlState::CANNOT_CONNECT_NOW
    })
}

fn retry(e: ::postgres::Error) -> Retry {
    if is_transient(&e) {
        Retry::Again(db(e))
    } else {
        Retry::Fail(db(e))
    }
}

/// Where statements run: inside a transaction, or alone (one statement is its own transaction).
enum Conn<'c> {
    Tx(Transaction<'c>),
    Alone(&'c mut Client),
}

/// A transaction (or a lone statement) with the worker's statement cache.
struct PgTx<'c, 'w> {
    conn: Conn<'c>,
    statements: &'w mut HashMap<&'static str, Statement>,
    /// Set when a statement failed with a transient error: the whole transaction is retried.
    retry: Option<StoreError>,
}

impl PgTx<'_, '_> {
    /// The prepared statement for `sql`, prepared (with `$N` placeholders) on first use.
    fn statement(&mut self, sql: &Sql) -> Result<Statement, StoreError> {
        let key = sql.text(Dialect::Postgres);
        if let Some(s) = self.statements.get(key) {
            return Ok(s.clone());
        }
        let text = dollar_placeholders(key);
        let prepared = match &mut self.conn {
            Conn::Tx(t) => t.prepare(&text),
            Conn::Alone(c) => c.prepare(&text),
        };
        let s = prepared.map_err(|e| self.fail(e))?;
        self.statements.insert(key, s.clone());
        Ok(s)
    }

    fn fail(&mut self, e: ::postgres::Error) -> StoreError {
        let transient = is_transient(&e) || (matches!(self.conn, Conn::Tx(_)) && session_ended(&e));
        let e = db(e);
        if transient {
            self.retry = Some(clone_error(&e));
        }
        e
    }
}

/// Each parameter as the driver type the statement's parameter has: PostgreSQL types even a
/// NULL, and `countersign_migrations.version` is an `INTEGER`, not a `BIGINT`.
fn bind<'a>(
    params: &'a [Param<'a>],
    types: &[Type],
) -> Result<Vec<Box<dyn ToSql + Sync + 'a>>, StoreError> {
    let narrow = |v: i64| StoreError::Database(format!("parameter {v} out of range"));
    params
        .iter()
        .zip(types)
        .map(
            |(p, ty)| -> Result<Box<dyn ToSql + Sync + 'a>, StoreError> {
                Ok(match (*p, ty) {
                    (Param::Null, &Type::BYTEA) => Box::new(None::<&[u8]>),
                    (Param::Null, &Type::INT8) => Box::new(None::<i64>),
                    (Param::Null, &Type::INT4) => Box::new(None::<i32>),
                    (Param::Null, &Type::BOOL) => Box::new(None::<bool>),
                    (Param::Null, _) => Box::new(None::<&str>),
                    (Param::Int(v), &Type::INT4) => {
                        Box::new(i32::try_from(v).map_err(|_| narrow(v))?)
                    }
                    (Param::Int(v), _) => Box::new(v),
                    (Param::Text(v), _) => Box::new(v),
                    (Param::Blob(v), _) => Box::new(v),
                    (Param::Ints(v), _) => Box::new(v),
                    (Param::Texts(v), _) => Box::new(v),
                    (Param::Blobs(v), _) => Box::new(v),
                })
            },
        )
        .collect()
}

/// One result column as a [`Value`], by its type.
fn value(row: &::postgres::Row, i: usize) -> Result<Value, StoreError> {
    let get = |e: ::postgres::Error| StoreError::Corrupt(e.to_string());
    let ty = row
        .columns()
        .get(i)
        .map(|c| c.type_().clone())
        .ok_or_else(|| StoreError::Corrupt(format!("no column {i}")))?;
    let int = |v: Option<i64>| v.map_or(Value::Null, Value::Int);
    Ok(match ty {
        Type::INT8 => int(row.try_get::<_, Option<i64>>(i).map_err(get)?),
        Type::INT4 => int(row
            .try_get::<_, Option<i32>>(i)
            .map_err(get)?
            .map(i64::from)),
        Type::INT2 => int(row
            .try_get::<_, Option<i16>>(i)
            .map_err(get)?
            .map(i64::from)),
        Type::BOOL => row
            .try_get::<_, Option<bool>>(i)
            .map_err(get)?
            .map_or(Value::Null, Value::Bool),
        Type::BYTEA => row
            .try_get::<_, Option<Vec<u8>>>(i)
            .map_err(get)?
            .map_or(Value::Null, Value::Blob),
        _ => row
            .try_get::<_, Option<String>>(i)
            .map_err(get)?
            .map_or(Value::Null, Value::Text),
    })
}

impl Tx for PgTx<'_, '_> {
    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    fn execute(&mut self, sql: &Sql, params: &[Param<'_>]) -> Result<u64, StoreError> {
        let st = self.statement(sql)?;
        let boxed = bind(params, st.params())?;
        let refs: Vec<&(dyn ToSql + Sync)> = boxed.iter().map(|b| &**b as _).collect();
        let n = match &mut self.conn {
            Conn::Tx(t) => t.execute(&st, &refs),
            Conn::Alone(c) => c.execute(&st, &refs),
        };
        n.map_err(|e| self.fail(e))
    }

    fn query(&mut self, sql: &Sql, params: &[Param<'_>]) -> Result<Vec<Row>, StoreError> {
        let st = self.statement(sql)?;
        let boxed = bind(params, st.params())?;
        let refs: Vec<&(dyn ToSql + Sync)> = boxed.iter().map(|b| &**b as _).collect();
        let rows = match &mut self.conn {
            Conn::Tx(t) => t.query(&st, &refs),
            Conn::Alone(c) => c.query(&st, &refs),
        };
        rows.map_err(|e| self.fail(e))?
            .iter()
            .map(|r| {
                Ok(Row((0..r.len())
                    .map(|i| value(r, i))
                    .collect::<Result<_, _>>()?))
            })
            .collect()
    }

    fn batch(&mut self, sql: &str) -> Result<(), StoreError> {
        let done = match &mut self.conn {
            Conn::Tx(t) => t.batch_execute(sql),
            Conn::Alone(c) => c.batch_execute(sql),
        };
        done.map_err(|e| self.fail(e))
    }
}

impl PostgresStore {
    /// Connect `pool` connections to `url` (`postgres://user@host:port/db?options=...`), apply
    /// the migrations, and check that the audit chain in the database is sealed with `sealer`'s
    /// key (replicas must share the service key: one chain, one signer).
    ///
    /// Events a replica committed but did not seal before it stopped are sealed before this
    /// returns, and from then on by this replica's sealer thread.
    pub fn connect(url: &str, sealer: AuditSealer, pool: usize) -> Result<Self, StoreError> {
        let db = PostgresDb::connect(url, pool)?;
        db.migrate(sealer.public_key_b64())?;
        db.start_sealer(url, sealer.clone())?;
        db.seal_now()?;
        Ok(SqlStore::new(Db::Postgres(db), sealer))
    }
}

impl PostgresDb {
    fn connect(url: &str, pool: usize) -> Result<Self, StoreError> {
        // Parse once here so a malformed URL is refused before any thread starts.
        url.parse::<::postgres::Config>().map_err(db)?;
        let (tx, rx) = mpsc::channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        for n in 0..pool.max(1) {
            let rx = Arc::clone(&rx);
            let mut worker = Worker::new(url);
            std::thread::Builder::new()
                .name(format!("countersign-pg-{n}"))
                .spawn(move || {
                    loop {
                        // The lock is held only while waiting for the next job.
                        let job = match rx.lock() {
                            Ok(guard) => guard.recv(),
                            Err(poisoned) => poisoned.into_inner().recv(),
                        };
                        let Ok(job) = job else { return };
                        job(&mut worker);
                    }
                })
                .map_err(|e| StoreError::Database(format!("starting a worker: {e}")))?;
        }
        Ok(Self {
            jobs: Mutex::new(tx),
            sealer: Arc::default(),
        })
    }

    /// Start this replica's sealer thread, on a connection of its own.
    fn start_sealer(&self, url: &str, key: AuditSealer) -> Result<(), StoreError> {
        let sealer = Arc::clone(&self.sealer);
        let worker = Worker::new(url);
        std::thread::Builder::new()
            .name("countersign-pg-sealer".into())
            .spawn(move || sealer.run(worker, &key))
            .map_err(|e| StoreError::Database(format!("starting the sealer: {e}")))?;
        Ok(())
    }

    /// Chain every event committed before this call (see [`Sealer`]).
    pub(super) fn seal_now(&self) -> Result<(), StoreError> {
        self.sealer.seal_now()
    }

    /// What this replica's sealer has done so far.
    pub(super) fn seal_stats(&self) -> SealStats {
        self.sealer.stats()
    }

    /// Run `f` on a worker thread and wait for its answer.
    fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Worker) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let (reply, answer) = mpsc::sync_channel(1);
        let job: Job = Box::new(move |w| {
            let _ = reply.send(f(w));
        });
        self.jobs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .send(job)
            .map_err(|_| StoreError::Database("the connection pool is gone".into()))?;
        answer
            .recv()
            .map_err(|_| StoreError::Database("a connection worker died".into()))?
    }

    /// Run `f` in one transaction on a worker.
    pub(super) fn transaction<T: Send + 'static>(
        &self,
        f: impl Fn(&mut dyn Tx) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        self.run(move |w| w.transaction(false, &f))
    }

    /// Run `f`, which issues exactly one statement, without BEGIN/COMMIT around it.
    pub(super) fn alone<T: Send + 'static>(
        &self,
        f: impl Fn(&mut dyn Tx) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        self.run(move |w| w.transaction(true, &f))
    }

    /// Apply the migrations under an advisory lock (replicas starting together apply each
    /// once), create the chain head, and refuse a database sealed with another key.
    fn migrate(&self, public_key: String) -> Result<(), StoreError> {
        self.transaction(move |tx| {
            tx.execute(&MIGRATION_LOCK_SQL, &[Param::Int(MIGRATION_LOCK)])?;
            rules::migrate(tx, MIGRATIONS)?;
            tx.execute(
                &INIT_HEAD,
                &[Param::Blob(&GENESIS_HASH), Param::Text(&public_key)],
            )?;
            let mut row = tx
                .query_opt(&CHAIN_KEY, &[])?
                .ok_or_else(|| StoreError::Corrupt("audit_head row missing".into()))?;
            let chain_key = row.text(0)?;
            if chain_key != public_key {
                return Err(StoreError::Database(format!(
                    "the audit chain in this database is sealed with service key {chain_key}, \
                     this replica's key is {public_key}: give every replica the same \
                     service-key file"
                )));
            }
            Ok(())
        })
    }

    /// Readiness: [`rules::probe`] in a transaction that is rolled back.
    pub(super) fn ready(&self) -> Result<(), StoreError> {
        self.run(move |w| {
            w.client()?;
            let Worker {
                client, statements, ..
            } = w;
            let client = client
                .as_mut()
                .ok_or_else(|| StoreError::Database("no connection".into()))?;
            // Dropped without commit: rolled back, so the probe changes nothing.
            let conn = Conn::Tx(client.transaction().map_err(db)?);
            let mut tx = PgTx {
                conn,
                statements,
                retry: None,
            };
            rules::probe(&mut tx, MIGRATIONS.len())
        })
    }
}

const MIGRATION_LOCK_SQL: Sql = Sql::same("SELECT pg_advisory_xact_lock(?1)");
const INIT_HEAD: Sql = Sql::same(
    "INSERT INTO audit_head (seq, hash, public_key) VALUES (0, ?1, ?2) ON CONFLICT (one) DO NOTHING",
);
const CHAIN_KEY: Sql = Sql::same("SELECT public_key FROM audit_head");
