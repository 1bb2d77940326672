//! The PostgreSQL store: several replicas of the service over one database.
//!
//! Every method is one transaction at READ COMMITTED, and every write transaction takes its locks
//! in one order — the approval row (`SELECT ... FOR UPDATE`), then the credential's counter row,
//! then the audit chain head row — so two replicas can wait on each other but never deadlock.
//! First-verdict-wins is the approval row lock plus a status check; a spent nonce is a unique
//! insert (`ON CONFLICT DO NOTHING`: a concurrent spender waits for the first one's commit and then
//! inserts nothing); the counter is compared under its row lock and only ever raised with
//! `GREATEST`.
//!
//! The audit chain stays unforked because the chain head is one row (`audit_head`) that every
//! appending transaction locks with `SELECT ... FOR UPDATE` after its state change and updates
//! before it commits: appends from all replicas are serialized in commit order, and a line's
//! `prev_hash` is always the line committed just before it. `audit.seq` being the primary key is
//! the second fence: a fork would need two rows with one seq.
//!
//! The `postgres` crate is synchronous but runs a private tokio runtime per connection, which must
//! not be started on a thread that is already inside a runtime (the service calls the store from
//! its async tasks as well as from the blocking pool). So each connection lives on its own worker
//! thread and a call sends it a job and waits for the answer on a plain channel: that works from
//! any thread, like the SQLite store's mutex.

use super::preauth::stamp_use;
use super::{
    ApprovalRecord, DisableOutcome, GatewayRecord, GrantOutcome, Import, IssuedChallenge,
    NewApproval, PreauthChange, PreauthDefinition, PreauthUse, RedeemOutcome, RevokeOutcome,
    Session, SettleKind, SettleOutcome, Settlement, Store, StoreError, StoredPreauth, plan_import,
    plan_reconcile,
};
use crate::audit::{AuditEvent, AuditSealer, GENESIS_HASH};
use crate::clock::{from_ms, rfc3339};
use ::postgres::error::SqlState;
use ::postgres::types::ToSql;
use ::postgres::{Client, NoTls, Row, Statement, Transaction};
use countersign::{ApprovalStatus, CredentialRecord, Decision, ReasonCode};
use std::collections::HashMap;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

mod standing;

/// Schema migrations, applied in order on start; a version is applied once, under an advisory
/// lock so replicas starting together do not race. Never edit a published entry: append one.
const MIGRATIONS: &[&str] = &[
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
    standing::MIGRATION,
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
];

/// Advisory lock key serializing migrations across replicas ("cntrsign").
const MIGRATION_LOCK: i64 = 0x636e_7472_7369_676e;

// Statements are cache keys (`&'static str`), so the column list is spelled out in each.
const SELECT_APPROVAL: &str = "SELECT id, created_at, expires_at, agent_id, tool_name, profile, \
    fields_json, severity, op_hash_approved, op_hash_denied, status, reason_code, evidence_json, \
    decided_at, grant_expires_at, grant_collected_at, gateway, preauth_slug, preauth_digest, \
    preauth_use, revises FROM approvals WHERE id = $1";
const SELECT_APPROVAL_FOR_UPDATE: &str = "SELECT id, created_at, expires_at, agent_id, tool_name, \
    profile, fields_json, severity, op_hash_approved, op_hash_denied, status, reason_code, \
    evidence_json, decided_at, grant_expires_at, grant_collected_at, gateway, preauth_slug, \
    preauth_digest, preauth_use, revises FROM approvals WHERE id = $1 FOR UPDATE";

/// How many times a transaction is retried after a serialization failure or deadlock report.
const RETRIES: usize = 5;

fn db(e: ::postgres::Error) -> StoreError {
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

/// PostgreSQL-backed [`Store`].
#[derive(Debug)]
pub struct PostgresStore {
    jobs: Mutex<mpsc::Sender<Job>>,
    sealer: Arc<AuditSealer>,
}

/// One connection with its prepared statements.
struct Worker {
    url: String,
    client: Option<Client>,
    statements: HashMap<&'static str, Statement>,
}

impl Worker {
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
        f: &dyn Fn(&mut Tx<'_, '_>) -> Result<T, StoreError>,
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
        f: &dyn Fn(&mut Tx<'_, '_>) -> Result<T, StoreError>,
    ) -> Result<T, Retry> {
        self.client().map_err(Retry::Fail)?;
        let Self {
            client, statements, ..
        } = self;
        let client = client
            .as_mut()
            .ok_or_else(|| Retry::Fail(StoreError::Database("no connection".into())))?;
        let tx = if alone {
            Conn::Alone(client)
        } else {
            // Only BEGIN has been sent: a connection that died while idle in the pool (killed,
            // server restarted) is replaced and the transaction run again, nothing lost.
            Conn::Tx(client.transaction().map_err(|e| match retry(e) {
                Retry::Fail(e @ StoreError::Unavailable(_)) => Retry::Again(e),
                other => other,
            })?)
        };
        let mut tx = Tx {
            tx,
            statements,
            retry: None,
        };
        let out = f(&mut tx);
        if let Some(e) = tx.retry.take() {
            return Err(Retry::Again(e));
        }
        let out = out.map_err(Retry::Fail)?;
        if let Conn::Tx(t) = tx.tx {
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
struct Tx<'c, 'w> {
    tx: Conn<'c>,
    statements: &'w mut HashMap<&'static str, Statement>,
    /// Set when a statement failed with a transient error: the whole transaction is retried.
    retry: Option<StoreError>,
}

impl Tx<'_, '_> {
    fn statement(&mut self, sql: &'static str) -> Result<Statement, StoreError> {
        if let Some(s) = self.statements.get(sql) {
            return Ok(s.clone());
        }
        let prepared = match &mut self.tx {
            Conn::Tx(t) => t.prepare(sql),
            Conn::Alone(c) => c.prepare(sql),
        };
        let s = prepared.map_err(|e| self.fail(e))?;
        self.statements.insert(sql, s.clone());
        Ok(s)
    }

    fn fail(&mut self, e: ::postgres::Error) -> StoreError {
        let transient = is_transient(&e) || (matches!(self.tx, Conn::Tx(_)) && session_ended(&e));
        let e = db(e);
        if transient {
            self.retry = Some(clone_error(&e));
        }
        e
    }

    fn query(
        &mut self,
        sql: &'static str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, StoreError> {
        let st = self.statement(sql)?;
        let rows = match &mut self.tx {
            Conn::Tx(t) => t.query(&st, params),
            Conn::Alone(c) => c.query(&st, params),
        };
        rows.map_err(|e| self.fail(e))
    }

    fn query_opt(
        &mut self,
        sql: &'static str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<Row>, StoreError> {
        let st = self.statement(sql)?;
        let row = match &mut self.tx {
            Conn::Tx(t) => t.query_opt(&st, params),
            Conn::Alone(c) => c.query_opt(&st, params),
        };
        row.map_err(|e| self.fail(e))
    }

    fn execute(
        &mut self,
        sql: &'static str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, StoreError> {
        let st = self.statement(sql)?;
        let n = match &mut self.tx {
            Conn::Tx(t) => t.execute(&st, params),
            Conn::Alone(c) => c.execute(&st, params),
        };
        n.map_err(|e| self.fail(e))
    }
}

impl PostgresStore {
    /// Connect `pool` connections to `url` (`postgres://user@host:port/db?options=...`), apply
    /// the migrations, and check that the audit chain in the database is sealed with `sealer`'s
    /// key (replicas must share the service key: one chain, one signer).
    pub fn connect(url: &str, sealer: AuditSealer, pool: usize) -> Result<Self, StoreError> {
        // Parse once here so a malformed URL is refused before any thread starts.
        url.parse::<::postgres::Config>().map_err(db)?;
        let (tx, rx) = mpsc::channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        for n in 0..pool.max(1) {
            let rx = Arc::clone(&rx);
            let mut worker = Worker {
                url: url.to_owned(),
                client: None,
                statements: HashMap::new(),
            };
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
        let store = Self {
            jobs: Mutex::new(tx),
            sealer: Arc::new(sealer),
        };
        store.migrate()?;
        Ok(store)
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
    fn tx<T: Send + 'static>(
        &self,
        f: impl Fn(&mut Tx<'_, '_>, &AuditSealer) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let sealer = Arc::clone(&self.sealer);
        self.run(move |w| w.transaction(false, &|tx| f(tx, &sealer)))
    }

    /// Run `f`, which issues exactly one statement, without BEGIN/COMMIT around it.
    fn one<T: Send + 'static>(
        &self,
        f: impl Fn(&mut Tx<'_, '_>) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        self.run(move |w| w.transaction(true, &f))
    }

    fn migrate(&self) -> Result<(), StoreError> {
        let public_key = self.sealer.public_key_b64();
        self.run(move |w| {
            let client = w.client()?;
            let mut tx = client.transaction().map_err(db)?;
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
                .map_err(db)?;
            tx.batch_execute(
                "CREATE TABLE IF NOT EXISTS countersign_migrations \
                 (version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())",
            )
            .map_err(db)?;
            let applied: i32 = tx
                .query_one(
                    "SELECT COALESCE(MAX(version), 0) FROM countersign_migrations",
                    &[],
                )
                .map_err(db)?
                .get(0);
            for (n, sql) in MIGRATIONS.iter().enumerate() {
                let version = i32::try_from(n + 1).unwrap_or(i32::MAX);
                if version <= applied {
                    continue;
                }
                tx.batch_execute(sql).map_err(db)?;
                tx.execute(
                    "INSERT INTO countersign_migrations (version) VALUES ($1)",
                    &[&version],
                )
                .map_err(db)?;
            }
            tx.execute(
                "INSERT INTO audit_head (seq, hash, public_key) VALUES (0, $1, $2) \
                 ON CONFLICT (one) DO NOTHING",
                &[&&GENESIS_HASH[..], &public_key],
            )
            .map_err(db)?;
            let chain_key: String = tx
                .query_one("SELECT public_key FROM audit_head", &[])
                .map_err(db)?
                .get(0);
            if chain_key != public_key {
                return Err(StoreError::Database(format!(
                    "the audit chain in this database is sealed with service key {chain_key}, \
                     this replica's key is {public_key}: give every replica the same \
                     service-key file"
                )));
            }
            tx.commit().map_err(db)
        })
    }
}

/// Seal and insert `events` after the chain head, which stays locked until commit.
fn append(
    tx: &mut Tx<'_, '_>,
    sealer: &AuditSealer,
    events: &[AuditEvent],
) -> Result<(), StoreError> {
    if events.is_empty() {
        return Ok(());
    }
    let row = tx.query_opt("SELECT seq, hash FROM audit_head FOR UPDATE", &[])?;
    let row = row.ok_or_else(|| StoreError::Corrupt("audit_head row missing".into()))?;
    let mut seq = u64::try_from(row.get::<_, i64>(0))
        .map_err(|_| StoreError::Corrupt("negative audit seq".into()))?;
    let mut prev = hash32(row.get(1), "audit head hash")?;
    for event in events {
        seq += 1;
        let sealed = sealer.seal(seq, &prev, event);
        tx.execute(
            "INSERT INTO audit (seq, hash, line) VALUES ($1, $2, $3)",
            &[&to_i64(sealed.seq), &&sealed.hash[..], &sealed.line],
        )?;
        prev = sealed.hash;
    }
    tx.execute(
        "UPDATE audit_head SET seq = $1, hash = $2",
        &[&to_i64(seq), &&prev[..]],
    )?;
    Ok(())
}

/// Settle one overdue PENDING approval (its row already locked by the caller).
fn expire_in(
    tx: &mut Tx<'_, '_>,
    sealer: &AuditSealer,
    id: &str,
    now: i64,
) -> Result<(), StoreError> {
    let changed = tx.execute(
        "UPDATE approvals SET status = 'DENIED', reason_code = $2, decided_at = $3 \
         WHERE id = $1 AND status = 'PENDING' AND expires_at <= $3",
        &[&id, &ReasonCode::ExpiredUnanswered.as_str(), &now],
    )?;
    if changed == 1 {
        let event = AuditEvent::settlement(
            id,
            &rfc3339(from_ms(now)),
            ReasonCode::ExpiredUnanswered.as_str(),
        );
        append(tx, sealer, &[event])?;
    }
    Ok(())
}

/// The stored record of a credential, its row locked until commit.
fn lock_credential(
    tx: &mut Tx<'_, '_>,
    credential_id: &[u8],
) -> Result<Option<CredentialRecord>, StoreError> {
    tx.query_opt(
        "SELECT record_json FROM credentials WHERE credential_id = $1 FOR UPDATE",
        &[&credential_id],
    )?
    .map(|r| serde_json::from_str(r.get(0)).map_err(|e| StoreError::Corrupt(e.to_string())))
    .transpose()
}

fn record_json(record: &CredentialRecord) -> Result<String, StoreError> {
    serde_json::to_string(record).map_err(|e| StoreError::Corrupt(e.to_string()))
}

/// Raise the credentials version: locks its row (after the credential rows, before the audit
/// head) until commit.
fn bump_credentials_version(tx: &mut Tx<'_, '_>) -> Result<(), StoreError> {
    tx.execute("UPDATE credentials_version SET version = version + 1", &[])?;
    Ok(())
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn to_u32(v: i64, what: &str) -> Result<u32, StoreError> {
    u32::try_from(v).map_err(|_| StoreError::Corrupt(format!("{what} {v} out of range")))
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

fn decision_from(text: &str) -> Result<Decision, StoreError> {
    match text {
        "APPROVED" => Ok(Decision::Approved),
        "DENIED" => Ok(Decision::Denied),
        other => Err(StoreError::Corrupt(format!("decision {other:?}"))),
    }
}

fn read_approval(r: &Row) -> Result<ApprovalRecord, StoreError> {
    let get = |e: ::postgres::Error| StoreError::Corrupt(e.to_string());
    Ok(ApprovalRecord {
        id: r.try_get(0).map_err(get)?,
        created_at: r.try_get(1).map_err(get)?,
        expires_at: r.try_get(2).map_err(get)?,
        agent_id: r.try_get(3).map_err(get)?,
        tool_name: r.try_get(4).map_err(get)?,
        profile: r.try_get(5).map_err(get)?,
        fields_json: r.try_get(6).map_err(get)?,
        severity: r.try_get(7).map_err(get)?,
        op_hash_approved: hash32(r.try_get(8).map_err(get)?, "op_hash_approved")?,
        op_hash_denied: hash32(r.try_get(9).map_err(get)?, "op_hash_denied")?,
        status: status_from(r.try_get(10).map_err(get)?)?,
        reason_code: r.try_get(11).map_err(get)?,
        evidence_json: r.try_get(12).map_err(get)?,
        decided_at: r.try_get(13).map_err(get)?,
        grant_expires_at: r.try_get(14).map_err(get)?,
        grant_collected_at: r.try_get(15).map_err(get)?,
        gateway: r.try_get(16).map_err(get)?,
        preauthorization: match (
            r.try_get::<_, Option<String>>(17).map_err(get)?,
            r.try_get::<_, Option<Vec<u8>>>(18).map_err(get)?,
            r.try_get::<_, Option<i64>>(19).map_err(get)?,
        ) {
            (Some(slug), Some(digest), Some(use_number)) => Some(PreauthUse {
                slug,
                digest: hash32(digest, "preauth_digest")?,
                use_number,
            }),
            _ => None,
        },
        revises: r.try_get(20).map_err(get)?,
    })
}

/// Insert an approval row (with the preauthorization that approved it, if one did).
fn insert_approval(
    tx: &mut Tx<'_, '_>,
    a: &NewApproval,
    preauth: Option<&PreauthUse>,
) -> Result<(), StoreError> {
    let decided = (a.status != ApprovalStatus::Pending).then_some(a.created_at);
    let inserted = tx.execute(
        "INSERT INTO approvals (id, created_at, expires_at, agent_id, tool_name, profile, \
         fields_json, severity, op_hash_approved, op_hash_denied, status, reason_code, \
         decided_at, grant_expires_at, gateway, revises, preauth_slug, preauth_digest, \
         preauth_use) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, \
         $18, $19) ON CONFLICT (id) DO NOTHING",
        &[
            &a.id,
            &a.created_at,
            &a.expires_at,
            &a.agent_id,
            &a.tool_name,
            &a.profile,
            &a.fields_json,
            &a.severity,
            &&a.op_hash_approved[..],
            &&a.op_hash_denied[..],
            &a.status.as_str(),
            &a.reason_code.map(ReasonCode::as_str),
            &decided,
            &a.grant_expires_at,
            &a.gateway,
            &a.revises,
            &preauth.map(|p| p.slug.as_str()),
            &preauth.map(|p| p.digest.to_vec()),
            &preauth.map(|p| p.use_number),
        ],
    )?;
    if inserted == 0 {
        return Err(StoreError::DuplicateId(a.id.clone()));
    }
    Ok(())
}

/// Every preauthorization row, by slug.
fn stored_preauths(tx: &mut Tx<'_, '_>) -> Result<Vec<StoredPreauth>, StoreError> {
    tx.query(
        "SELECT slug, definition_json, digest, expires_at, max_uses, uses, in_config, \
         disabled_at FROM preauthorizations ORDER BY slug",
        &[],
    )?
    .iter()
    .map(|r| {
        Ok(StoredPreauth {
            slug: r.get(0),
            definition_json: r.get(1),
            digest: hash32(r.get(2), "preauthorization digest")?,
            expires_at: r.get(3),
            max_uses: r.get(4),
            uses: r.get(5),
            in_config: r.get(6),
            disabled_at: r.get(7),
        })
    })
    .collect()
}

/// The recheck before a preauthorized call's grant is collected, by the database's clock.
fn preauth_still_usable(tx: &mut Tx<'_, '_>, p: &PreauthUse) -> Result<bool, StoreError> {
    Ok(tx
        .query_opt(
            "SELECT 1 FROM preauthorizations WHERE slug = $1 AND digest = $2 AND in_config \
             AND disabled_at IS NULL \
             AND expires_at > (extract(epoch FROM clock_timestamp()) * 1000)::bigint",
            &[&p.slug, &&p.digest[..]],
        )?
        .is_some())
}

/// Read an approval and lock its row until commit.
fn lock_approval(tx: &mut Tx<'_, '_>, id: &str) -> Result<Option<ApprovalRecord>, StoreError> {
    tx.query_opt(SELECT_APPROVAL_FOR_UPDATE, &[&id])?
        .as_ref()
        .map(read_approval)
        .transpose()
}

/// Lock the credential's counter row and read it, creating it first if this is the credential's
/// first use.
///
/// `SELECT … FOR UPDATE` on a row that does not exist locks nothing: two first uses would both
/// read "no counter" and both pass. So the row is inserted first (`ON CONFLICT DO NOTHING`):
/// a concurrent first use's insert waits for this transaction's commit, then inserts nothing,
/// and its `SELECT … FOR UPDATE` reads the committed counter. The placeholder is 0, which the
/// counter rule treats exactly as "no counter" (an authenticator may send 0 after 0, and any
/// count passes 0), so a refusal that commits it changes nothing observable.
fn stored_counter(tx: &mut Tx<'_, '_>, credential_id: &[u8]) -> Result<Option<u32>, StoreError> {
    tx.execute(
        "INSERT INTO counters (credential_id, sign_count) VALUES ($1, 0) \
         ON CONFLICT (credential_id) DO NOTHING",
        &[&credential_id],
    )?;
    tx.query_opt(
        "SELECT sign_count FROM counters WHERE credential_id = $1 FOR UPDATE",
        &[&credential_id],
    )?
    .map(|r| to_u32(r.get(0), "sign_count"))
    .transpose()
}

/// The counter rule shared with the SQLite store: it must advance, unless both are zero (an
/// authenticator without a counter).
fn regressed(stored: Option<u32>, got: u32) -> Option<u32> {
    stored.filter(|&s| !(s == 0 && got == 0) && got <= s)
}

fn raise_counter(tx: &mut Tx<'_, '_>, credential_id: &[u8], count: u32) -> Result<(), StoreError> {
    tx.execute(
        "INSERT INTO counters (credential_id, sign_count) VALUES ($1, $2) \
         ON CONFLICT (credential_id) DO UPDATE \
         SET sign_count = GREATEST(counters.sign_count, EXCLUDED.sign_count)",
        &[&credential_id, &i64::from(count)],
    )?;
    Ok(())
}

impl Store for PostgresStore {
    fn create(&self, a: &NewApproval, events: &[AuditEvent]) -> Result<(), StoreError> {
        let a = a.clone();
        let events = events.to_vec();
        self.tx(move |tx, sealer| {
            insert_approval(tx, &a, None)?;
            append(tx, sealer, &events)
        })
    }

    fn create_preauthorized(
        &self,
        a: &NewApproval,
        slug: &str,
        digest: &[u8; 32],
        events: &[AuditEvent],
    ) -> Result<Option<i64>, StoreError> {
        let (a, slug, digest, events) = (a.clone(), slug.to_owned(), *digest, events.to_vec());
        self.tx(move |tx, sealer| {
            // The guarded consume. Under READ COMMITTED a concurrent consumer of the same row
            // waits for this one's commit and then re-evaluates the WHERE clause on the new
            // row: at most `max_uses` updates ever succeed, across every replica.
            let taken = tx.query_opt(
                "UPDATE preauthorizations SET uses = uses + 1 \
                 WHERE slug = $1 AND digest = $2 AND in_config AND disabled_at IS NULL \
                 AND uses < max_uses \
                 AND expires_at > (extract(epoch FROM clock_timestamp()) * 1000)::bigint \
                 RETURNING uses",
                &[&slug, &&digest[..]],
            )?;
            let Some(row) = taken else {
                return Ok(None);
            };
            let use_number: i64 = row.get(0);
            let used = PreauthUse {
                slug: slug.clone(),
                digest,
                use_number,
            };
            insert_approval(tx, &a, Some(&used))?;
            append(tx, sealer, &stamp_use(&events, use_number))?;
            Ok(Some(use_number))
        })
    }

    fn reconcile_preauthorizations(
        &self,
        incoming: &[PreauthDefinition],
        now: i64,
    ) -> Result<Vec<PreauthChange>, StoreError> {
        let incoming = incoming.to_vec();
        self.tx(move |tx, sealer| {
            // Every row locked first, so two replicas starting together reconcile one after
            // the other instead of interleaving their plans.
            tx.query("SELECT slug FROM preauthorizations FOR UPDATE", &[])?;
            let changes = plan_reconcile(&stored_preauths(tx)?, &incoming);
            let ts = rfc3339(from_ms(now));
            for change in &changes {
                match change {
                    PreauthChange::Insert(d) => tx.execute(
                        "INSERT INTO preauthorizations (slug, definition_json, digest, \
                         expires_at, max_uses, uses, in_config) \
                         VALUES ($1, $2, $3, $4, $5, 0, TRUE)",
                        &[
                            &d.slug,
                            &d.definition_json,
                            &&d.digest[..],
                            &d.expires_at,
                            &d.max_uses,
                        ],
                    )?,
                    PreauthChange::Replace(d) => tx.execute(
                        "UPDATE preauthorizations SET definition_json = $2, digest = $3, \
                         expires_at = $4, max_uses = $5, in_config = TRUE WHERE slug = $1",
                        &[
                            &d.slug,
                            &d.definition_json,
                            &&d.digest[..],
                            &d.expires_at,
                            &d.max_uses,
                        ],
                    )?,
                    PreauthChange::Remove(slug) => tx.execute(
                        "UPDATE preauthorizations SET in_config = FALSE WHERE slug = $1",
                        &[slug],
                    )?,
                };
                append(tx, sealer, &[change.event(&ts)])?;
            }
            Ok(changes)
        })
    }

    fn preauthorizations(&self) -> Result<Vec<StoredPreauth>, StoreError> {
        self.one(stored_preauths)
    }

    fn disable_preauthorization(&self, slug: &str, now: i64) -> Result<DisableOutcome, StoreError> {
        let slug = slug.to_owned();
        self.tx(move |tx, sealer| {
            let row = tx.query_opt(
                "SELECT disabled_at FROM preauthorizations WHERE slug = $1 FOR UPDATE",
                &[&slug],
            )?;
            match row.map(|r| r.get::<_, Option<i64>>(0)) {
                None => return Ok(DisableOutcome::NotFound),
                Some(Some(_)) => return Ok(DisableOutcome::AlreadyDisabled),
                Some(None) => {}
            }
            tx.execute(
                "UPDATE preauthorizations SET disabled_at = $2 WHERE slug = $1",
                &[&slug, &now],
            )?;
            let ts = rfc3339(from_ms(now));
            append(
                tx,
                sealer,
                &[AuditEvent::preauthorization(&ts, "disabled", &slug, None)],
            )?;
            Ok(DisableOutcome::Disabled)
        })
    }

    fn get(&self, id: &str) -> Result<Option<ApprovalRecord>, StoreError> {
        let id = id.to_owned();
        self.one(move |tx| {
            tx.query_opt(SELECT_APPROVAL, &[&id])?
                .as_ref()
                .map(read_approval)
                .transpose()
        })
    }

    fn settle(&self, s: &Settlement) -> Result<SettleOutcome, StoreError> {
        let s = s.clone();
        self.tx(move |tx, sealer| {
            let Some(current) = lock_approval(tx, &s.approval_id)? else {
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
            // Late by a millisecond is late, exactly as in the SQLite store.
            if current.expires_at <= s.now {
                expire_in(tx, sealer, &s.approval_id, s.now)?;
                let expired = lock_approval(tx, &s.approval_id)?;
                return Ok(expired.map_or(SettleOutcome::NotFound, SettleOutcome::Expired));
            }
            let mut evidence_json = None;
            if let SettleKind::Verdict {
                spend,
                evidence_json: evidence,
            } = &s.kind
            {
                // Refusals are decided before the first write (but the counter placeholder, which
                // is the same as no counter), so committing them is harmless.
                let spent = tx
                    .query_opt(
                        "SELECT 1 FROM spent_nonces WHERE nonce = $1",
                        &[&spend.nonce],
                    )?
                    .is_some();
                if spent {
                    return Ok(SettleOutcome::Replayed);
                }
                let stored = stored_counter(tx, &spend.credential_id)?;
                if let Some(stored) = regressed(stored, spend.sign_count) {
                    return Ok(SettleOutcome::CounterRegression {
                        stored,
                        got: spend.sign_count,
                    });
                }
                // A concurrent verdict spending the same nonce on another approval: this insert
                // waits for its commit and then inserts nothing.
                let fresh = tx.execute(
                    "INSERT INTO spent_nonces (nonce, spent_at) VALUES ($1, $2) \
                     ON CONFLICT (nonce) DO NOTHING",
                    &[&spend.nonce, &s.now],
                )?;
                if fresh == 0 {
                    return Ok(SettleOutcome::Replayed);
                }
                raise_counter(tx, &spend.credential_id, spend.sign_count)?;
                evidence_json = Some(evidence.clone());
            }
            let updated = tx.query_opt(
                "UPDATE approvals SET status = $2, reason_code = $3, evidence_json = $4, \
                 decided_at = $5, grant_expires_at = $6 \
                 WHERE id = $1 AND status = 'PENDING' AND expires_at > $5 \
                 RETURNING id, created_at, expires_at, agent_id, tool_name, profile, \
                 fields_json, severity, op_hash_approved, op_hash_denied, status, reason_code, \
                 evidence_json, decided_at, grant_expires_at, grant_collected_at, gateway, \
                 preauth_slug, preauth_digest, preauth_use, revises",
                &[
                    &s.approval_id,
                    &s.status.as_str(),
                    &s.reason_code.map(ReasonCode::as_str),
                    &evidence_json,
                    &s.now,
                    &s.grant_expires_at,
                ],
            )?;
            let Some(row) = updated else {
                return Err(StoreError::Database(
                    "compare-and-set lost under the row lock".into(),
                ));
            };
            let settled = read_approval(&row)?;
            append(tx, sealer, std::slice::from_ref(&s.event))?;
            Ok(SettleOutcome::Settled(settled))
        })
    }

    fn expire_overdue(&self, now: i64, limit: usize) -> Result<Vec<String>, StoreError> {
        let limit = to_i64(limit as u64);
        self.tx(move |tx, sealer| {
            // SKIP LOCKED: a row another replica is settling (or sweeping) right now is its
            // business; it will be settled exactly once either way.
            let ids: Vec<String> = tx
                .query(
                    "SELECT id FROM approvals WHERE status = 'PENDING' AND expires_at <= $1 \
                     ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED",
                    &[&now, &limit],
                )?
                .iter()
                .map(|r| r.get(0))
                .collect();
            for id in &ids {
                expire_in(tx, sealer, id, now)?;
            }
            tx.execute("DELETE FROM challenges WHERE expires_at <= $1", &[&now])?;
            tx.execute(
                "DELETE FROM login_challenges WHERE expires_at <= $1",
                &[&now],
            )?;
            tx.execute("DELETE FROM sessions WHERE expires_at <= $1", &[&now])?;
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
        let (id, gateway, fingerprint, tool_name, event) = (
            id.to_owned(),
            gateway.to_owned(),
            *fingerprint,
            tool_name.map(str::to_owned),
            event.clone(),
        );
        self.tx(move |tx, sealer| {
            let Some(current) = lock_approval(tx, &id)? else {
                return Ok(GrantOutcome::NotFound);
            };
            if current.gateway.as_deref() != Some(gateway.as_str()) {
                return Ok(GrantOutcome::NotFound);
            }
            if current.status != ApprovalStatus::Approved {
                return Ok(GrantOutcome::NotApproved(Box::new(current)));
            }
            if let Some(collected_at) = current.grant_collected_at {
                return Ok(GrantOutcome::AlreadyCollected { collected_at });
            }
            if current.op_hash_approved != fingerprint {
                return Ok(GrantOutcome::FingerprintMismatch);
            }
            if tool_name.as_deref().is_some_and(|t| t != current.tool_name) {
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
            let changed = tx.execute(
                "UPDATE approvals SET grant_collected_at = $2 \
                 WHERE id = $1 AND grant_collected_at IS NULL",
                &[&id, &now],
            )?;
            if changed != 1 {
                return Err(StoreError::Database(
                    "grant compare-and-set lost under the row lock".into(),
                ));
            }
            append(tx, sealer, std::slice::from_ref(&event))?;
            Ok(GrantOutcome::Granted { collected_at: now })
        })
    }

    fn put_challenge(&self, c: &IssuedChallenge) -> Result<(), StoreError> {
        let c = c.clone();
        self.one(move |tx| {
            tx.execute(
                "INSERT INTO challenges (nonce, approval_id, decision, principal, expires_at) \
                 VALUES ($1, $2, $3, $4, $5)",
                &[
                    &c.nonce,
                    &c.approval_id,
                    &c.decision.as_str(),
                    &c.principal,
                    &c.expires_at,
                ],
            )?;
            Ok(())
        })
    }

    fn challenge(&self, nonce: &[u8]) -> Result<Option<IssuedChallenge>, StoreError> {
        let nonce = nonce.to_vec();
        self.one(move |tx| {
            let Some(r) = tx.query_opt(
                "SELECT approval_id, decision, principal, expires_at FROM challenges \
                 WHERE nonce = $1",
                &[&nonce],
            )?
            else {
                return Ok(None);
            };
            Ok(Some(IssuedChallenge {
                nonce: nonce.clone(),
                approval_id: r.get(0),
                decision: decision_from(r.get(1))?,
                principal: r.get(2),
                expires_at: r.get(3),
            }))
        })
    }

    fn replay_snapshot(
        &self,
        nonce: &[u8],
        credential_id: &[u8],
    ) -> Result<(bool, Option<u32>), StoreError> {
        let (nonce, credential_id) = (nonce.to_vec(), credential_id.to_vec());
        self.one(move |tx| {
            let r = tx.query_opt(
                "SELECT EXISTS (SELECT 1 FROM spent_nonces WHERE nonce = $1), \
                 (SELECT sign_count FROM counters WHERE credential_id = $2)",
                &[&nonce, &credential_id],
            )?;
            let Some(r) = r else {
                return Ok((false, None));
            };
            let count: Option<i64> = r.get(1);
            Ok((
                r.get(0),
                count.map(|c| to_u32(c, "sign_count")).transpose()?,
            ))
        })
    }

    fn put_login_challenge(&self, nonce: &[u8], expires_at: i64) -> Result<(), StoreError> {
        let nonce = nonce.to_vec();
        self.one(move |tx| {
            tx.execute(
                "INSERT INTO login_challenges (nonce, expires_at) VALUES ($1, $2)",
                &[&nonce, &expires_at],
            )?;
            Ok(())
        })
    }

    fn take_login_challenge(&self, nonce: &[u8], now: i64) -> Result<bool, StoreError> {
        let nonce = nonce.to_vec();
        self.one(move |tx| {
            let expires = tx.query_opt(
                "DELETE FROM login_challenges WHERE nonce = $1 RETURNING expires_at",
                &[&nonce],
            )?;
            Ok(expires.is_some_and(|r| r.get::<_, i64>(0) > now))
        })
    }

    fn create_session(
        &self,
        token_hash: &[u8; 32],
        s: &Session,
        sign_count: u32,
    ) -> Result<bool, StoreError> {
        let (token_hash, s) = (*token_hash, s.clone());
        self.tx(move |tx, _| {
            let stored = stored_counter(tx, &s.credential_id)?;
            if regressed(stored, sign_count).is_some() {
                return Ok(false);
            }
            raise_counter(tx, &s.credential_id, sign_count)?;
            tx.execute(
                "INSERT INTO sessions (token_hash, principal, credential_id, expires_at) \
                 VALUES ($1, $2, $3, $4)",
                &[
                    &&token_hash[..],
                    &s.principal,
                    &s.credential_id,
                    &s.expires_at,
                ],
            )?;
            Ok(true)
        })
    }

    fn session(&self, token_hash: &[u8; 32], now: i64) -> Result<Option<Session>, StoreError> {
        let token_hash = *token_hash;
        self.one(move |tx| {
            Ok(tx
                .query_opt(
                    "SELECT principal, credential_id, expires_at FROM sessions \
                     WHERE token_hash = $1 AND expires_at > $2",
                    &[&&token_hash[..], &now],
                )?
                .map(|r| Session {
                    principal: r.get(0),
                    credential_id: r.get(1),
                    expires_at: r.get(2),
                }))
        })
    }

    fn delete_session(&self, token_hash: &[u8; 32]) -> Result<bool, StoreError> {
        let token_hash = *token_hash;
        self.one(move |tx| {
            let n = tx.execute(
                "DELETE FROM sessions WHERE token_hash = $1",
                &[&&token_hash[..]],
            )?;
            Ok(n > 0)
        })
    }

    fn put_credentials(&self, records: &[CredentialRecord], now: i64) -> Result<usize, StoreError> {
        let mut records = records.to_vec();
        // One lock order for every importer: replicas starting together cannot deadlock.
        records.sort_by(|a, b| a.credential_id.cmp(&b.credential_id));
        self.tx(move |tx, sealer| {
            let mut events = Vec::new();
            let mut changed = 0;
            for record in &records {
                let stored = lock_credential(tx, &record.credential_id)?;
                let json = record_json(record)?;
                match plan_import(stored.as_ref(), record, now) {
                    Import::Keep => continue,
                    Import::Insert(e) => {
                        // A concurrent importer that inserted first wins; this one adds nothing.
                        let inserted = tx.execute(
                            "INSERT INTO credentials (credential_id, record_json) VALUES ($1, $2) \
                             ON CONFLICT (credential_id) DO NOTHING",
                            &[&record.credential_id, &json],
                        )?;
                        if inserted == 0 {
                            continue;
                        }
                        events.extend(e);
                    }
                    Import::Replace(e) => {
                        tx.execute(
                            "UPDATE credentials SET record_json = $2 WHERE credential_id = $1",
                            &[&record.credential_id, &json],
                        )?;
                        events.extend(e);
                    }
                }
                changed += 1;
            }
            if changed > 0 {
                bump_credentials_version(tx)?;
                append(tx, sealer, &events)?;
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
        let (credential_id, event) = (credential_id.to_vec(), event.clone());
        self.tx(move |tx, sealer| {
            let Some(mut record) = lock_credential(tx, &credential_id)? else {
                return Ok(RevokeOutcome::NotFound);
            };
            if record.revoked {
                return Ok(RevokeOutcome::AlreadyRevoked);
            }
            record.revoked = true;
            tx.execute(
                "UPDATE credentials SET record_json = $2 WHERE credential_id = $1",
                &[&credential_id, &record_json(&record)?],
            )?;
            bump_credentials_version(tx)?;
            append(tx, sealer, std::slice::from_ref(&event))?;
            Ok(RevokeOutcome::Revoked)
        })
    }

    fn credentials_version(&self) -> Result<u64, StoreError> {
        self.one(|tx| {
            let v: i64 = tx
                .query_opt("SELECT version FROM credentials_version", &[])?
                .ok_or_else(|| StoreError::Corrupt("credentials_version row missing".into()))?
                .get(0);
            u64::try_from(v).map_err(|_| StoreError::Corrupt("negative credentials version".into()))
        })
    }

    fn put_gateway(&self, gateway: &GatewayRecord) -> Result<bool, StoreError> {
        let g = gateway.clone();
        self.tx(move |tx, _| {
            // Unique name and unique token hash: either conflict inserts nothing.
            let inserted = tx.execute(
                "INSERT INTO gateways (name, token_hash, created_at, revoked_at) \
                 VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
                &[&g.name, &&g.token_hash[..], &g.created_at, &g.revoked_at],
            )?;
            if inserted == 1 {
                bump_credentials_version(tx)?;
            }
            Ok(inserted == 1)
        })
    }

    fn revoke_gateway(&self, name: &str, now: i64) -> Result<RevokeOutcome, StoreError> {
        let name = name.to_owned();
        self.tx(move |tx, _| {
            let row = tx.query_opt(
                "SELECT revoked_at FROM gateways WHERE name = $1 FOR UPDATE",
                &[&name],
            )?;
            let Some(row) = row else {
                return Ok(RevokeOutcome::NotFound);
            };
            if row.get::<_, Option<i64>>(0).is_some() {
                return Ok(RevokeOutcome::AlreadyRevoked);
            }
            tx.execute(
                "UPDATE gateways SET revoked_at = $2 WHERE name = $1",
                &[&name, &now],
            )?;
            bump_credentials_version(tx)?;
            Ok(RevokeOutcome::Revoked)
        })
    }

    fn gateways(&self) -> Result<Vec<GatewayRecord>, StoreError> {
        self.one(|tx| {
            tx.query(
                "SELECT name, token_hash, created_at, revoked_at FROM gateways ORDER BY name COLLATE \"C\"",
                &[],
            )?
            .iter()
            .map(|r| {
                Ok(GatewayRecord {
                    name: r.get(0),
                    token_hash: hash32(r.get(1), "gateway token hash")?,
                    created_at: r.get(2),
                    revoked_at: r.get(3),
                })
            })
            .collect()
        })
    }

    fn put_invite(&self, invite: &crate::enroll::Invite) -> Result<(), StoreError> {
        let i = invite.clone();
        self.one(move |tx| {
            tx.execute(
                "INSERT INTO invites (token_hash, principal, grp, created_at, expires_at) \
                 VALUES ($1, $2, $3, $4, $5)",
                &[
                    &&i.token_hash[..],
                    &i.principal,
                    &i.group,
                    &i.created_at,
                    &i.expires_at,
                ],
            )?;
            Ok(())
        })
    }

    fn invite(
        &self,
        token_hash: &[u8; 32],
        now: i64,
    ) -> Result<Option<crate::enroll::Invite>, StoreError> {
        let token_hash = *token_hash;
        self.one(move |tx| {
            Ok(tx
                .query_opt(
                    "SELECT principal, grp, created_at, expires_at FROM invites \
                     WHERE token_hash = $1 AND redeemed_at IS NULL AND expires_at > $2",
                    &[&&token_hash[..], &now],
                )?
                .map(|r| crate::enroll::Invite {
                    token_hash,
                    principal: r.get(0),
                    group: r.get(1),
                    created_at: r.get(2),
                    expires_at: r.get(3),
                }))
        })
    }

    fn redeem_invite(
        &self,
        token_hash: &[u8; 32],
        now: i64,
        credential: &CredentialRecord,
        event: &AuditEvent,
    ) -> Result<RedeemOutcome, StoreError> {
        let (token_hash, credential, event) = (*token_hash, credential.clone(), event.clone());
        let json = record_json(&credential)?;
        self.tx(move |tx, sealer| {
            // An existing credential id is never replaced, and checking it first leaves the
            // invite usable for another authenticator.
            let exists = tx.query_opt(
                "SELECT 1 FROM credentials WHERE credential_id = $1",
                &[&credential.credential_id],
            )?;
            if exists.is_some() {
                return Ok(RedeemOutcome::CredentialExists);
            }
            // The UPDATE locks the invite row: of two concurrent redemptions one sees it spent.
            let Some(row) = tx.query_opt(
                "UPDATE invites SET redeemed_at = $2 \
                 WHERE token_hash = $1 AND redeemed_at IS NULL AND expires_at > $2 \
                 RETURNING grp",
                &[&&token_hash[..], &now],
            )?
            else {
                return Ok(RedeemOutcome::InviteUnusable);
            };
            let group: Option<String> = row.get(0);
            tx.execute(
                "INSERT INTO credentials (credential_id, record_json) VALUES ($1, $2)",
                &[&credential.credential_id, &json],
            )?;
            if let Some(group) = group {
                tx.execute(
                    "INSERT INTO memberships (principal, grp) VALUES ($1, $2) \
                     ON CONFLICT DO NOTHING",
                    &[&credential.principal, &group],
                )?;
            }
            bump_credentials_version(tx)?;
            append(tx, sealer, std::slice::from_ref(&event))?;
            Ok(RedeemOutcome::Redeemed)
        })
    }

    fn memberships(&self) -> Result<Vec<(String, String)>, StoreError> {
        self.one(|tx| {
            Ok(tx
                .query(
                    "SELECT principal, grp FROM memberships ORDER BY grp, principal",
                    &[],
                )?
                .iter()
                .map(|r| (r.get(0), r.get(1)))
                .collect())
        })
    }

    fn credentials(&self) -> Result<Vec<CredentialRecord>, StoreError> {
        self.one(|tx| {
            tx.query(
                "SELECT record_json FROM credentials ORDER BY credential_id",
                &[],
            )?
            .iter()
            .map(|r| serde_json::from_str(r.get(0)).map_err(|e| StoreError::Corrupt(e.to_string())))
            .collect()
        })
    }

    fn audit_head(&self) -> Result<(u64, [u8; 32]), StoreError> {
        self.one(|tx| {
            let row = tx
                .query_opt("SELECT seq, hash FROM audit_head", &[])?
                .ok_or_else(|| StoreError::Corrupt("audit_head row missing".into()))?;
            let seq = u64::try_from(row.get::<_, i64>(0))
                .map_err(|_| StoreError::Corrupt("negative audit seq".into()))?;
            Ok((seq, hash32(row.get(1), "audit head hash")?))
        })
    }

    fn audit_lines_after(&self, seq: u64, limit: usize) -> Result<Vec<(u64, String)>, StoreError> {
        let (seq, limit) = (to_i64(seq), to_i64(limit as u64));
        self.one(move |tx| {
            tx.query(
                "SELECT seq, line FROM audit WHERE seq > $1 ORDER BY seq LIMIT $2",
                &[&seq, &limit],
            )?
            .iter()
            .map(|r| {
                u64::try_from(r.get::<_, i64>(0))
                    .map(|s| (s, r.get(1)))
                    .map_err(|_| StoreError::Corrupt("negative audit seq".into()))
            })
            .collect()
        })
    }

    fn pending_count(&self) -> Result<u64, StoreError> {
        self.one(|tx| {
            let n: i64 = tx
                .query_opt(
                    "SELECT COUNT(*) FROM approvals WHERE status = 'PENDING'",
                    &[],
                )?
                .map_or(0, |r| r.get(0));
            Ok(u64::try_from(n).unwrap_or(0))
        })
    }

    fn oldest_pending(&self) -> Result<Option<i64>, StoreError> {
        self.one(|tx| {
            Ok(tx
                .query_opt(
                    "SELECT MIN(created_at) FROM approvals WHERE status = 'PENDING'",
                    &[],
                )?
                .and_then(|r| r.get::<_, Option<i64>>(0)))
        })
    }

    fn ready(&self) -> Result<(), StoreError> {
        let expected = i32::try_from(MIGRATIONS.len()).unwrap_or(i32::MAX);
        self.run(move |w| {
            let client = w.client()?;
            // Dropped without commit: rolled back, so the probe changes nothing.
            let mut tx = client.transaction().map_err(db)?;
            let applied: i32 = tx
                .query_one(
                    "SELECT COALESCE(MAX(version), 0) FROM countersign_migrations",
                    &[],
                )
                .map_err(db)?
                .get(0);
            if applied != expected {
                return Err(StoreError::Database(format!(
                    "schema at migration {applied}, this build expects {expected}"
                )));
            }
            // A write to the audit chain head that changes nothing: fails on a read-only
            // database or a standby.
            tx.execute("UPDATE audit_head SET seq = seq", &[])
                .map_err(db)?;
            Ok(())
        })
    }
}

/// A schema of its own for one test or benchmark run, dropped (with everything in it) on drop.
///
/// Tests share one database; each gets a fresh schema and a URL whose `search_path` points at
/// it, so tests run in parallel and leave nothing behind.
#[doc(hidden)]
#[derive(Debug)]
pub struct ScratchSchema {
    base: String,
    name: String,
}

/// Environment variable naming the PostgreSQL database tests use. When it is set the PostgreSQL
/// tests must run (CI); when it is not, they try the local default and skip if it is absent.
pub const TEST_DATABASE_ENV: &str = "COUNTERSIGN_TEST_POSTGRES";
/// What the tests try when [`TEST_DATABASE_ENV`] is not set.
pub const TEST_DATABASE_DEFAULT: &str = "postgres://postgres@127.0.0.1:5432/test";

impl ScratchSchema {
    /// A fresh schema in the test database, or `None` (with a message saying why) when no
    /// PostgreSQL is reachable and [`TEST_DATABASE_ENV`] is not set. With the variable set, an
    /// unreachable database is an error: CI must not skip silently.
    pub fn for_test(label: &str) -> Result<Option<Self>, StoreError> {
        let (base, required) = match std::env::var(TEST_DATABASE_ENV) {
            Ok(url) if !url.is_empty() => (url, true),
            _ => (TEST_DATABASE_DEFAULT.to_owned(), false),
        };
        if !required && !port_open(&base) {
            eprintln!(
                "SKIPPED {label} on PostgreSQL: no PostgreSQL at {base} (set {TEST_DATABASE_ENV}=postgres://… \
                 to run the PostgreSQL tests; .ci/steps/postgres.sh does)"
            );
            return Ok(None);
        }
        match Self::create(&base) {
            Ok(s) => Ok(Some(s)),
            Err(e) if !required => {
                eprintln!("SKIPPED {label}: PostgreSQL at {base} is not usable: {e}");
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Create a uniquely named schema in the database at `base`.
    pub fn create(base: &str) -> Result<Self, StoreError> {
        let mut random = [0u8; 8];
        getrandom::fill(&mut random).map_err(|e| StoreError::Database(e.to_string()))?;
        let name = format!("cs_test_{}", hex_lower(&random));
        let base = base.to_owned();
        let sql = format!("CREATE SCHEMA {name}");
        admin(&base, &sql)?;
        Ok(Self { base, name })
    }

    /// The database URL with `search_path` set to this schema.
    pub fn url(&self) -> String {
        let sep = if self.base.contains('?') { '&' } else { '?' };
        format!("{}{sep}options=-csearch_path%3D{}", self.base, self.name)
    }

    /// The schema's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for ScratchSchema {
    fn drop(&mut self) {
        let sql = format!("DROP SCHEMA IF EXISTS {} CASCADE", self.name);
        if let Err(e) = admin(&self.base, &sql) {
            eprintln!("dropping schema {}: {e}", self.name);
        }
    }
}

/// Run one statement on a connection of its own, on a thread of its own (the caller may be
/// inside an async runtime, where the synchronous client cannot run).
fn admin(url: &str, sql: &str) -> Result<(), StoreError> {
    let (url, sql) = (url.to_owned(), sql.to_owned());
    std::thread::spawn(move || {
        let mut client = Client::connect(&url, NoTls).map_err(db)?;
        client.batch_execute(&sql).map_err(db)
    })
    .join()
    .map_err(|_| StoreError::Database("admin connection thread panicked".into()))?
}

fn hex_lower(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether the URL's host:port accepts a TCP connection within a short timeout.
pub(super) fn port_open(url: &str) -> bool {
    use std::net::ToSocketAddrs as _;
    let Ok(config) = url.parse::<::postgres::Config>() else {
        return false;
    };
    let host = match config.get_hosts().first() {
        Some(::postgres::config::Host::Tcp(h)) => h.clone(),
        _ => "127.0.0.1".to_owned(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let Ok(addrs) = (host.as_str(), port).to_socket_addrs() else {
        return false;
    };
    addrs.into_iter().any(|a| {
        std::net::TcpStream::connect_timeout(&a, std::time::Duration::from_millis(300)).is_ok()
    })
}
