//! The store's rules, written once for both databases.
//!
//! Every [`Store`] method is one function here over a [`Tx`]: first verdict wins, expiry at
//! commit, nonce spend, the signature-counter rule, single-use grant collection, invites,
//! credential import and revocation, preauthorization and standing-grant use, and the audit
//! events each writes (sealed into the chain in the same transaction on SQLite, by
//! [`seal_unsealed`] just after the commit on PostgreSQL). A backend (`sqlite.rs`,
//! `postgres.rs`) supplies only connections, transactions and the SQL text where the dialects
//! differ.
//!
//! Lock order on PostgreSQL (every write takes its locks in it, so replicas can wait on each
//! other but never deadlock): the approval row (or grant, preauthorization, credential, gateway
//! row), then the credential's counter row, then the credentials version. The audit chain head
//! is taken only by the sealer, in a transaction of its own that takes no other lock. On SQLite
//! the `IMMEDIATE` transaction holds the one write lock, and the same statements run without
//! `FOR UPDATE`.

use super::preauth::stamp_use;
use super::seam::{Dialect, Param, Row, Sql, Tx, params};
use super::standing::{NewStandingGrant, StandingGrantRecord, StandingStore, UseRecords};
use super::{
    ApprovalRecord, AuditorRecord, DisableOutcome, GatewayRecord, GrantOutcome, Import,
    IssuedChallenge, NewApproval, PreauthChange, PreauthDefinition, PreauthUse, RedeemOutcome,
    RevokeOutcome, Session, SettleKind, SettleOutcome, Settlement, Store, StoreError,
    StoredPreauth, plan_import, plan_reconcile, postgres, sqlite,
};
use crate::audit::{AuditEvent, AuditSealer, GENESIS_HASH};
use crate::clock::{from_ms, rfc3339};
use countersign::webauthn::sign_count_advances;
use countersign::{ApprovalStatus, CredentialRecord, Decision, ReasonCode};
use std::sync::Arc;

mod methods;
mod outbox;
mod sql;
use sql::*;

/// The store: the rules below over one of the two databases. [`super::SqliteStore`] and
/// [`super::PostgresStore`] name it by the constructor that opens each.
#[derive(Debug)]
pub struct SqlStore {
    pub(super) db: Db,
    sealer: Arc<AuditSealer>,
}

/// The database behind a [`SqlStore`].
#[derive(Debug)]
pub(super) enum Db {
    Sqlite(sqlite::SqliteDb),
    Postgres(postgres::PostgresDb),
}

impl SqlStore {
    pub(super) fn new(db: Db, sealer: AuditSealer) -> Self {
        Self {
            db,
            sealer: Arc::new(sealer),
        }
    }

    /// What this replica's audit sealer has done (PostgreSQL; `None` on SQLite, which seals in
    /// the writing transaction).
    pub fn seal_stats(&self) -> Option<super::SealStats> {
        match &self.db {
            Db::Sqlite(_) => None,
            Db::Postgres(db) => Some(db.seal_stats()),
        }
    }

    /// Run `f` as one transaction: committed when it returns `Ok`, rolled back otherwise.
    /// (PostgreSQL may run it again after a serialization failure, hence `Fn`.)
    fn write<T: Send + 'static>(
        &self,
        f: impl Fn(&mut dyn Tx, &AuditSealer) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let sealer = Arc::clone(&self.sealer);
        let f = move |tx: &mut dyn Tx| f(tx, &sealer);
        match &self.db {
            Db::Sqlite(db) => db.transaction(f),
            Db::Postgres(db) => db.transaction(f),
        }
    }

    /// Run `f`, which issues exactly one statement (atomic on its own), with no transaction
    /// around it: two round trips fewer on PostgreSQL.
    fn one<T: Send + 'static>(
        &self,
        f: impl Fn(&mut dyn Tx) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        match &self.db {
            Db::Sqlite(db) => db.alone(f),
            Db::Postgres(db) => db.alone(f),
        }
    }
}

// ---- rows ----------------------------------------------------------------------------------

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

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn limit(v: usize) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// An approval from the columns of [`approval_columns!`], in order.
fn read_approval(r: &mut Row) -> Result<ApprovalRecord, StoreError> {
    Ok(ApprovalRecord {
        id: r.text(0)?,
        created_at: r.int(1)?,
        expires_at: r.int(2)?,
        agent_id: r.text(3)?,
        tool_name: r.text(4)?,
        profile: r.text(5)?,
        fields_json: r.text(6)?,
        severity: r.text(7)?,
        op_hash_approved: r.hash(8, "op_hash_approved")?,
        op_hash_denied: r.hash(9, "op_hash_denied")?,
        status: status_from(&r.text(10)?)?,
        reason_code: r.opt_text(11)?,
        evidence_json: r.opt_text(12)?,
        decided_at: r.opt_int(13)?,
        grant_expires_at: r.opt_int(14)?,
        grant_collected_at: r.opt_int(15)?,
        gateway: r.opt_text(16)?,
        // All three columns or none: a preauthorization approved it, or none did.
        preauthorization: match (r.opt_text(17)?, r.opt_blob(18)?, r.opt_int(19)?) {
            (Some(slug), Some(digest), Some(use_number)) => Some(PreauthUse {
                slug,
                digest: super::seam::hash32(digest, "preauth_digest")?,
                use_number,
            }),
            _ => None,
        },
        revises: r.opt_text(20)?,
    })
}

fn read_approvals(rows: Vec<Row>) -> Result<Vec<ApprovalRecord>, StoreError> {
    rows.into_iter()
        .map(|mut r| read_approval(&mut r))
        .collect()
}

/// Read an approval; `lock` also locks its row until commit (PostgreSQL).
fn approval(tx: &mut dyn Tx, id: &str, lock: bool) -> Result<Option<ApprovalRecord>, StoreError> {
    let sql = if lock {
        &SELECT_APPROVAL_FOR_UPDATE
    } else {
        &SELECT_APPROVAL
    };
    tx.query_opt(sql, params![id])?
        .map(|mut r| read_approval(&mut r))
        .transpose()
}

/// Insert an approval row: its request, the preauthorization that approved it (if one did),
/// the evidence it was approved with (a standing grant's use), and the approval it revises.
/// The one insert every creating path uses.
fn insert_approval(
    tx: &mut dyn Tx,
    a: &NewApproval,
    preauth: Option<&PreauthUse>,
    evidence_json: Option<&str>,
) -> Result<(), StoreError> {
    let decided = (a.status != ApprovalStatus::Pending).then_some(a.created_at);
    let inserted = tx.execute(
        &INSERT_APPROVAL,
        params![
            &a.id,
            a.created_at,
            a.expires_at,
            &a.agent_id,
            &a.tool_name,
            &a.profile,
            &a.fields_json,
            &a.severity,
            &a.op_hash_approved,
            &a.op_hash_denied,
            a.status.as_str(),
            a.reason_code.map(ReasonCode::as_str),
            decided,
            a.grant_expires_at,
            &a.gateway,
            a.revises.as_deref(),
            preauth.map(|p| p.slug.as_str()),
            preauth.map(|p| &p.digest),
            preauth.map(|p| p.use_number),
            evidence_json,
        ],
    )?;
    if inserted == 0 {
        return Err(StoreError::DuplicateId(a.id.clone()));
    }
    Ok(())
}

// ---- the audit chain -------------------------------------------------------------------------

/// `(seq, hash)` of the chain head; in a write transaction on PostgreSQL the head row stays
/// locked until commit, which serializes appends from every replica.
fn head(tx: &mut dyn Tx, for_append: bool) -> Result<(u64, [u8; 32]), StoreError> {
    let sql = if for_append { &HEAD_FOR_APPEND } else { &HEAD };
    match tx.query_opt(sql, params![])? {
        Some(mut r) => Ok((r.u64(0, "audit seq")?, r.hash(1, "audit head hash")?)),
        // SQLite reads the last line: none yet is the genesis. PostgreSQL's head row is
        // created with the schema: missing is damage, not an empty log.
        None if tx.dialect() == Dialect::Sqlite => Ok((0, GENESIS_HASH)),
        None => Err(StoreError::Corrupt("audit_head row missing".into())),
    }
}

/// Record `events` in this transaction, with the state change they describe.
///
/// SQLite (one writer) seals them into the chain at once, after the head read in this same
/// transaction. PostgreSQL stores each one tagged (see [`AuditSealer::tag_unsealed`]) in
/// `audit_unsealed`, and [`seal_unsealed`] chains them shortly after: a commit then holds no
/// lock that every replica's commits queue behind; only the sealer takes the chain head, once
/// for many events. Committed is durable either way: an event waiting to be sealed is in the
/// same table space, written by the same commit as its verdict.
fn append(tx: &mut dyn Tx, sealer: &AuditSealer, events: &[AuditEvent]) -> Result<(), StoreError> {
    if events.is_empty() {
        return Ok(());
    }
    if tx.dialect() == Dialect::Postgres {
        for event in events {
            let text = serde_json::to_string(event.body())
                .map_err(|e| StoreError::Database(format!("serializing an audit event: {e}")))?;
            let tag = sealer.tag_unsealed(&text);
            tx.execute(&INSERT_UNSEALED, params![text.as_str(), &tag])?;
        }
        return Ok(());
    }
    let (seq, prev) = head(tx, true)?;
    chain(tx, sealer, seq, prev, events.iter())?;
    Ok(())
}

/// Seal `events` in order after line `seq` (hash `prev`) and insert them; returns the new head.
fn chain<'e>(
    tx: &mut dyn Tx,
    sealer: &AuditSealer,
    mut seq: u64,
    mut prev: [u8; 32],
    events: impl Iterator<Item = &'e AuditEvent>,
) -> Result<(u64, [u8; 32]), StoreError> {
    for event in events {
        seq += 1;
        let sealed = sealer.seal(seq, &prev, event);
        tx.execute(
            &INSERT_AUDIT,
            params![to_i64(sealed.seq), &sealed.hash, &sealed.line],
        )?;
        prev = sealed.hash;
    }
    Ok((seq, prev))
}

/// Advisory lock key of the PostgreSQL sealer ("cs-seal!").
const SEALER_LOCK_KEY: i64 = 0x6373_2d73_6561_6c21;

/// PostgreSQL: chain up to `max` committed events from `audit_unsealed`, oldest first, in one
/// transaction under the sealer lock; returns how many were sealed (0 leaves the database
/// untouched) and when the lock was granted (for the lock-time figures). An event whose tag does not verify was not written by a holder of the service
/// key: nothing of the batch is sealed (the transaction rolls back, the rows stay for an
/// operator to inspect) and the error names the row.
pub(super) fn seal_unsealed(
    tx: &mut dyn Tx,
    sealer: &AuditSealer,
    max: i64,
) -> Result<(usize, Option<std::time::Instant>), StoreError> {
    let any = tx
        .query_opt(&ANY_UNSEALED, params![])?
        .map(|mut r| r.bool(0))
        .transpose()?
        .unwrap_or(false);
    if !any {
        return Ok((0, None));
    }
    tx.execute(&SEALER_LOCK, params![SEALER_LOCK_KEY])?;
    let locked = std::time::Instant::now();
    let mut taken = tx
        .query(&TAKE_UNSEALED, params![max])?
        .into_iter()
        .map(|mut r| Ok((r.int(0)?, r.text(1)?, r.blob(2)?)))
        .collect::<Result<Vec<(i64, String, Vec<u8>)>, StoreError>>()?;
    if taken.is_empty() {
        return Ok((0, Some(locked)));
    }
    // `RETURNING` has no order: the ids are the order the events were written in.
    taken.sort_unstable_by_key(|(id, ..)| *id);
    let mut events = Vec::with_capacity(taken.len());
    for (id, text, tag) in &taken {
        if !sealer.check_unsealed(text, tag) {
            return Err(StoreError::Corrupt(format!(
                "audit_unsealed row {id} does not carry this service key's tag: it was not \
                 written by a replica; nothing sealed"
            )));
        }
        let body = serde_json::from_str(text).map_err(|e| {
            StoreError::Corrupt(format!("audit_unsealed row {id} is not a JSON object: {e}"))
        })?;
        events.push(AuditEvent::from_body(body));
    }
    // One statement for the batch: the lock is held for a few round trips, not one per line.
    let (mut seq, mut prev) = head(tx, false)?;
    let (mut seqs, mut hashes, mut lines) = (Vec::new(), Vec::new(), Vec::new());
    for event in &events {
        seq += 1;
        let sealed = sealer.seal(seq, &prev, event);
        prev = sealed.hash;
        seqs.push(to_i64(seq));
        hashes.push(sealed.hash.to_vec());
        lines.push(sealed.line);
    }
    tx.execute(
        &INSERT_AUDIT_BATCH,
        &[
            Param::Ints(&seqs),
            Param::Blobs(&hashes),
            Param::Texts(&lines),
        ],
    )?;
    tx.execute(&UPDATE_HEAD, params![to_i64(seq), &prev])?;
    Ok((events.len(), Some(locked)))
}

// ---- approvals -----------------------------------------------------------------------------

/// Settle one overdue PENDING approval (its row read, and on PostgreSQL locked, by the caller)
/// as DENIED `expired_unanswered`, with its line.
fn expire_in(tx: &mut dyn Tx, sealer: &AuditSealer, id: &str, now: i64) -> Result<(), StoreError> {
    let reason = ReasonCode::ExpiredUnanswered.as_str();
    if tx.execute(&EXPIRE, params![id, reason, now])? == 1 {
        let event = AuditEvent::settlement(id, &rfc3339(from_ms(now)), reason);
        append(tx, sealer, &[event])?;
    }
    Ok(())
}

/// The counter rule, as the verifier applies it ([`sign_count_advances`]): a verdict or login
/// must advance the credential's signature counter, unless both are zero (an authenticator
/// without a counter). Returns the stored count that was not passed.
fn regressed(stored: Option<u32>, got: u32) -> Option<u32> {
    stored.filter(|&s| !sign_count_advances(s, got))
}

/// Read the credential's counter with its row locked, creating the row first on first use.
///
/// `SELECT … FOR UPDATE` on a row that does not exist locks nothing, so two first uses on
/// PostgreSQL would both read "no counter" and both pass. Inserting a 0 placeholder first
/// (`ON CONFLICT DO NOTHING`) makes a concurrent first use wait for this commit. The counter
/// rule treats 0 exactly as "no counter", so a refusal that commits the placeholder changes
/// nothing observable.
fn stored_counter(
    tx: &mut dyn Tx,
    credential_id: &[u8],
    got: u32,
) -> Result<Option<u32>, StoreError> {
    tx.execute(&COUNTER_PLACEHOLDER, params![credential_id])?;
    let lock = if got == 0 {
        &COUNTER_FOR_SHARE
    } else {
        &COUNTER_FOR_UPDATE
    };
    tx.query_opt(lock, params![credential_id])?
        .map(|mut r| r.u32(0, "sign_count"))
        .transpose()
}

/// The counter rule applied to the stored counter (read with its row locked): `Some(stored)`
/// when `got` does not advance it.
fn counter_refuses(
    tx: &mut dyn Tx,
    credential_id: &[u8],
    got: u32,
) -> Result<Option<u32>, StoreError> {
    Ok(regressed(stored_counter(tx, credential_id, got)?, got))
}

/// Raise the counter (its row exists: [`stored_counter`] ran first) to `got`; never lowers it,
/// and leaves the row untouched (unlocked) when `got` does not exceed it.
fn raise_counter(tx: &mut dyn Tx, credential_id: &[u8], got: u32) -> Result<(), StoreError> {
    tx.execute(&RAISE_COUNTER, params![credential_id, got])?;
    Ok(())
}

fn settle(
    tx: &mut dyn Tx,
    sealer: &AuditSealer,
    s: &Settlement,
) -> Result<SettleOutcome, StoreError> {
    let Some(current) = approval(tx, &s.approval_id, true)? else {
        return Ok(SettleOutcome::NotFound);
    };
    // Only the gateway that created an approval may withdraw it; to any other it is unknown.
    if let SettleKind::Withdrawn { gateway } = &s.kind
        && current.gateway.as_deref() != Some(gateway.as_str())
    {
        return Ok(SettleOutcome::NotFound);
    }
    // First verdict wins.
    if current.status != ApprovalStatus::Pending {
        return Ok(SettleOutcome::AlreadySettled(current));
    }
    // Expiry at commit: late by a millisecond is late, whatever was asked.
    if current.expires_at <= s.now {
        expire_in(tx, sealer, &s.approval_id, s.now)?;
        let expired = approval(tx, &s.approval_id, false)?;
        return Ok(expired.map_or(SettleOutcome::NotFound, SettleOutcome::Expired));
    }
    let mut evidence_json = None;
    if let SettleKind::Verdict {
        spend,
        evidence_json: evidence,
    } = &s.kind
    {
        // Refusals are decided before any write but the counter placeholder (the same as no
        // counter), so committing them is harmless.
        if tx.query_opt(&NONCE_SPENT, params![&spend.nonce])?.is_some() {
            return Ok(SettleOutcome::Replayed);
        }
        if let Some(stored) = counter_refuses(tx, &spend.credential_id, spend.sign_count)? {
            return Ok(SettleOutcome::CounterRegression {
                stored,
                got: spend.sign_count,
            });
        }
        // A concurrent verdict spending the same nonce for another approval: this insert
        // waits for its commit, then inserts nothing.
        if tx.execute(&SPEND_NONCE, params![&spend.nonce, s.now])? == 0 {
            return Ok(SettleOutcome::Replayed);
        }
        raise_counter(tx, &spend.credential_id, spend.sign_count)?;
        evidence_json = Some(evidence.as_str());
    }
    let settled = tx.query_opt(
        &SETTLE,
        params![
            &s.approval_id,
            s.status.as_str(),
            s.reason_code.map(ReasonCode::as_str),
            evidence_json,
            s.now,
            s.grant_expires_at,
        ],
    )?;
    let Some(mut row) = settled else {
        return Err(StoreError::Database(
            "compare-and-set lost under the row lock".into(),
        ));
    };
    let settled = read_approval(&mut row)?;
    append(tx, sealer, std::slice::from_ref(&s.event))?;
    Ok(SettleOutcome::Settled(settled))
}

fn expire_overdue(
    tx: &mut dyn Tx,
    sealer: &AuditSealer,
    now: i64,
    max: i64,
) -> Result<Vec<String>, StoreError> {
    // On PostgreSQL, SKIP LOCKED: a row another replica is settling (or sweeping) right now is
    // its business; it is settled exactly once either way.
    let ids = tx
        .query(&OVERDUE, params![now, max])?
        .into_iter()
        .map(|mut r| r.text(0))
        .collect::<Result<Vec<_>, _>>()?;
    for id in &ids {
        expire_in(tx, sealer, id, now)?;
    }
    // Issued challenges stay until they expire rather than going with their verdict: a verdict
    // racing the winner must find its challenge and lose with "already settled".
    for sql in [&SWEEP_CHALLENGES, &SWEEP_LOGIN_CHALLENGES, &SWEEP_SESSIONS] {
        tx.execute(sql, params![now])?;
    }
    Ok(ids)
}

/// The recheck before a preauthorized call's grant is collected: the row is still in the
/// config, not disabled, unexpired by the database's clock, with the digest it was approved
/// under.
fn preauth_still_usable(tx: &mut dyn Tx, p: &PreauthUse) -> Result<bool, StoreError> {
    Ok(tx
        .query_opt(&PREAUTH_USABLE, params![&p.slug, &p.digest])?
        .is_some())
}

struct Collect {
    id: String,
    gateway: String,
    fingerprint: [u8; 32],
    tool_name: Option<String>,
    now: i64,
    event: AuditEvent,
}

fn collect_grant(
    tx: &mut dyn Tx,
    sealer: &AuditSealer,
    c: &Collect,
) -> Result<GrantOutcome, StoreError> {
    let Some(current) = approval(tx, &c.id, true)? else {
        return Ok(GrantOutcome::NotFound);
    };
    // Decided before anything else is looked at: to another gateway the approval is unknown.
    if current.gateway.as_deref() != Some(c.gateway.as_str()) {
        return Ok(GrantOutcome::NotFound);
    }
    if current.status != ApprovalStatus::Approved {
        return Ok(GrantOutcome::NotApproved(Box::new(current)));
    }
    if let Some(collected_at) = current.grant_collected_at {
        return Ok(GrantOutcome::AlreadyCollected { collected_at });
    }
    if current.op_hash_approved != c.fingerprint {
        return Ok(GrantOutcome::FingerprintMismatch);
    }
    // A typed profile's fingerprint does not cover the tool: the same arguments under another
    // tool would otherwise match.
    if c.tool_name
        .as_deref()
        .is_some_and(|t| t != current.tool_name)
    {
        return Ok(GrantOutcome::FingerprintMismatch);
    }
    if current.grant_expires_at.is_none_or(|t| t <= c.now) {
        return Ok(GrantOutcome::Expired);
    }
    if let Some(p) = &current.preauthorization
        && !preauth_still_usable(tx, p)?
    {
        return Ok(GrantOutcome::PreauthorizationWithdrawn);
    }
    if tx.execute(&COLLECT, params![&c.id, c.now])? != 1 {
        return Err(StoreError::Database(
            "grant compare-and-set lost under the row lock".into(),
        ));
    }
    append(tx, sealer, std::slice::from_ref(&c.event))?;
    Ok(GrantOutcome::Granted {
        collected_at: c.now,
    })
}

// ---- credentials, gateways, auditors, invites ---------------------------------------------------

fn record_json(record: &CredentialRecord) -> Result<String, StoreError> {
    serde_json::to_string(record).map_err(|e| StoreError::Corrupt(e.to_string()))
}

fn parse_record(json: &str) -> Result<CredentialRecord, StoreError> {
    serde_json::from_str(json).map_err(|e| StoreError::Corrupt(e.to_string()))
}

/// The stored record of a credential, its row locked until commit (PostgreSQL).
fn lock_credential(
    tx: &mut dyn Tx,
    credential_id: &[u8],
) -> Result<Option<CredentialRecord>, StoreError> {
    tx.query_opt(&CREDENTIAL_FOR_UPDATE, params![credential_id])?
        .map(|mut r| parse_record(&r.text(0)?))
        .transpose()
}

/// Raise the credentials version, which every process compares with the one it loaded.
fn bump_credentials_version(tx: &mut dyn Tx) -> Result<(), StoreError> {
    tx.execute(&BUMP_CREDENTIALS_VERSION, params![])?;
    Ok(())
}

fn put_credentials(
    tx: &mut dyn Tx,
    sealer: &AuditSealer,
    records: &[CredentialRecord],
    now: i64,
) -> Result<usize, StoreError> {
    let mut events = Vec::new();
    let mut changed = 0;
    for record in records {
        let stored = lock_credential(tx, &record.credential_id)?;
        let json = record_json(record)?;
        match plan_import(stored.as_ref(), record, now) {
            Import::Keep => continue,
            Import::Insert(e) => {
                // A concurrent importer that inserted first wins; this one adds nothing.
                if tx.execute(&INSERT_CREDENTIAL, params![&record.credential_id, &json])? == 0 {
                    continue;
                }
                events.extend(e);
            }
            Import::Replace(e) => {
                tx.execute(&UPDATE_CREDENTIAL, params![&record.credential_id, &json])?;
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
}

fn revoke_credential(
    tx: &mut dyn Tx,
    sealer: &AuditSealer,
    credential_id: &[u8],
    event: &AuditEvent,
) -> Result<RevokeOutcome, StoreError> {
    let Some(mut record) = lock_credential(tx, credential_id)? else {
        return Ok(RevokeOutcome::NotFound);
    };
    if record.revoked {
        return Ok(RevokeOutcome::AlreadyRevoked);
    }
    record.revoked = true;
    tx.execute(
        &UPDATE_CREDENTIAL,
        params![credential_id, &record_json(&record)?],
    )?;
    bump_credentials_version(tx)?;
    append(tx, sealer, std::slice::from_ref(event))?;
    Ok(RevokeOutcome::Revoked)
}

/// The statements of one kind of named bearer credential (gateways, auditors): each kind has
/// its own table, and these rules are the same for both.
struct TokenTable {
    insert: &'static Sql,
    for_update: &'static Sql,
    revoke: &'static Sql,
    all: &'static Sql,
}

const GATEWAY_TABLE: TokenTable = TokenTable {
    insert: &INSERT_GATEWAY,
    for_update: &GATEWAY_FOR_UPDATE,
    revoke: &REVOKE_GATEWAY,
    all: &GATEWAYS,
};

const AUDITOR_TABLE: TokenTable = TokenTable {
    insert: &INSERT_AUDITOR,
    for_update: &AUDITOR_FOR_UPDATE,
    revoke: &REVOKE_AUDITOR,
    all: &AUDITORS,
};

/// Insert a named token; false when the name or the token hash is taken (either conflict
/// inserts nothing: a token-hash collision is refused rather than letting one token
/// authenticate under two names).
fn put_token(
    tx: &mut dyn Tx,
    table: &TokenTable,
    name: &str,
    token_hash: &[u8; 32],
    created_at: i64,
    revoked_at: Option<i64>,
) -> Result<bool, StoreError> {
    let inserted = tx.execute(
        table.insert,
        params![name, token_hash, created_at, revoked_at],
    )? == 1;
    if inserted {
        bump_credentials_version(tx)?;
    }
    Ok(inserted)
}

fn revoke_token(
    tx: &mut dyn Tx,
    table: &TokenTable,
    name: &str,
    now: i64,
) -> Result<RevokeOutcome, StoreError> {
    let Some(mut row) = tx.query_opt(table.for_update, params![name])? else {
        return Ok(RevokeOutcome::NotFound);
    };
    if row.opt_int(0)?.is_some() {
        return Ok(RevokeOutcome::AlreadyRevoked);
    }
    tx.execute(table.revoke, params![name, now])?;
    bump_credentials_version(tx)?;
    Ok(RevokeOutcome::Revoked)
}

/// One row of a token table.
struct StoredToken {
    name: String,
    token_hash: [u8; 32],
    created_at: i64,
    revoked_at: Option<i64>,
}

/// Every row of a token table, by name.
fn tokens(tx: &mut dyn Tx, table: &TokenTable) -> Result<Vec<StoredToken>, StoreError> {
    tx.query(table.all, params![])?
        .into_iter()
        .map(|mut r| {
            Ok(StoredToken {
                name: r.text(0)?,
                token_hash: r.hash(1, "token hash")?,
                created_at: r.int(2)?,
                revoked_at: r.opt_int(3)?,
            })
        })
        .collect()
}

fn redeem_invite(
    tx: &mut dyn Tx,
    sealer: &AuditSealer,
    token_hash: &[u8; 32],
    now: i64,
    credential: &CredentialRecord,
    event: &AuditEvent,
) -> Result<RedeemOutcome, StoreError> {
    // An existing credential id is never replaced, and checking it first leaves the invite
    // usable for another authenticator.
    if tx
        .query_opt(&CREDENTIAL_EXISTS, params![&credential.credential_id])?
        .is_some()
    {
        return Ok(RedeemOutcome::CredentialExists);
    }
    // Compare-and-set on "unused and unexpired" (on PostgreSQL the UPDATE locks the invite row:
    // of two concurrent redemptions one sees it spent).
    let Some(mut row) = tx.query_opt(&REDEEM_INVITE, params![token_hash, now])? else {
        return Ok(RedeemOutcome::InviteUnusable);
    };
    let group = row.opt_text(0)?;
    tx.execute(
        &INSERT_CREDENTIAL,
        params![&credential.credential_id, &record_json(credential)?],
    )?;
    if let Some(group) = &group {
        tx.execute(&INSERT_MEMBERSHIP, params![&credential.principal, group])?;
    }
    bump_credentials_version(tx)?;
    append(tx, sealer, std::slice::from_ref(event))?;
    Ok(RedeemOutcome::Redeemed)
}

fn create_session(
    tx: &mut dyn Tx,
    token_hash: &[u8; 32],
    s: &Session,
    sign_count: u32,
) -> Result<bool, StoreError> {
    if counter_refuses(tx, &s.credential_id, sign_count)?.is_some() {
        return Ok(false);
    }
    raise_counter(tx, &s.credential_id, sign_count)?;
    tx.execute(
        &INSERT_SESSION,
        params![token_hash, &s.principal, &s.credential_id, s.expires_at],
    )?;
    Ok(true)
}

// ---- preauthorizations -----------------------------------------------------------------------

fn stored_preauths(tx: &mut dyn Tx) -> Result<Vec<StoredPreauth>, StoreError> {
    tx.query(&PREAUTHS, params![])?
        .into_iter()
        .map(|mut r| {
            Ok(StoredPreauth {
                slug: r.text(0)?,
                definition_json: r.text(1)?,
                digest: r.hash(2, "preauthorization digest")?,
                expires_at: r.int(3)?,
                max_uses: r.int(4)?,
                uses: r.int(5)?,
                in_config: r.bool(6)?,
                disabled_at: r.opt_int(7)?,
            })
        })
        .collect()
}

fn reconcile_preauthorizations(
    tx: &mut dyn Tx,
    sealer: &AuditSealer,
    incoming: &[PreauthDefinition],
    now: i64,
) -> Result<Vec<PreauthChange>, StoreError> {
    // Every row locked first (PostgreSQL), so replicas starting together reconcile one after
    // the other instead of interleaving their plans.
    tx.query(&LOCK_PREAUTHS, params![])?;
    let changes = plan_reconcile(&stored_preauths(tx)?, incoming);
    let ts = rfc3339(from_ms(now));
    for change in &changes {
        match change {
            PreauthChange::Insert(d) | PreauthChange::Replace(d) => {
                let sql = if matches!(change, PreauthChange::Insert(_)) {
                    &INSERT_PREAUTH
                } else {
                    &REPLACE_PREAUTH
                };
                let p = params![
                    &d.slug,
                    &d.definition_json,
                    &d.digest,
                    d.expires_at,
                    d.max_uses
                ];
                tx.execute(sql, p)?
            }
            PreauthChange::Remove(slug) => tx.execute(&REMOVE_PREAUTH, params![slug])?,
        };
        append(tx, sealer, &[change.event(&ts)])?;
    }
    Ok(changes)
}

fn disable_preauthorization(
    tx: &mut dyn Tx,
    sealer: &AuditSealer,
    slug: &str,
    now: i64,
) -> Result<DisableOutcome, StoreError> {
    let Some(mut row) = tx.query_opt(&PREAUTH_FOR_UPDATE, params![slug])? else {
        return Ok(DisableOutcome::NotFound);
    };
    if row.opt_int(0)?.is_some() {
        return Ok(DisableOutcome::AlreadyDisabled);
    }
    tx.execute(&DISABLE_PREAUTH, params![slug, now])?;
    let ts = rfc3339(from_ms(now));
    let event = AuditEvent::preauthorization(&ts, "disabled", slug, None);
    append(tx, sealer, &[event])?;
    Ok(DisableOutcome::Disabled)
}

fn create_preauthorized(
    tx: &mut dyn Tx,
    sealer: &AuditSealer,
    a: &NewApproval,
    slug: &str,
    digest: &[u8; 32],
    events: &[AuditEvent],
) -> Result<Option<i64>, StoreError> {
    // The guarded consume, by the database's clock. On PostgreSQL at READ COMMITTED a
    // concurrent consumer waits for this commit and re-evaluates the guard on the new row: at
    // most `max_uses` updates ever succeed, across every replica.
    let Some(mut row) = tx.query_opt(&CONSUME_PREAUTH, params![slug, digest])? else {
        return Ok(None);
    };
    let use_number = row.int(0)?;
    let used = PreauthUse {
        slug: slug.to_owned(),
        digest: *digest,
        use_number,
    };
    insert_approval(tx, a, Some(&used), None)?;
    append(tx, sealer, &stamp_use(events, use_number))?;
    Ok(Some(use_number))
}

// ---- standing grants -------------------------------------------------------------------------

fn read_grant(mut r: Row) -> Result<StandingGrantRecord, StoreError> {
    Ok(StandingGrantRecord {
        proposal: read_approval(&mut r)?,
        expires_at: r.int(21)?,
        max_uses: r.u32(22, "standing grant max_uses")?,
        uses: r.u32(23, "standing grant uses")?,
        revoked_at: r.opt_int(24)?,
        revoked_by: r.opt_text(25)?,
    })
}

fn use_standing_grant(
    tx: &mut dyn Tx,
    sealer: &AuditSealer,
    approval: &NewApproval,
    grant_id: &str,
    now: i64,
    records: &UseRecords,
) -> Result<Option<u32>, StoreError> {
    // The guard is the whole rule: signed, unrevoked, unexpired, a use left, named for the
    // call's gateway. Two replicas racing for the last use: the second waits on the row lock,
    // re-reads `uses` after the first commits, and its guard no longer holds.
    let Some(mut row) = tx.query_opt(&USE_STANDING, params![grant_id, now, &approval.gateway])?
    else {
        return Ok(None);
    };
    let use_number = row.u32(0, "standing grant uses")?;
    let (evidence_json, events) = records(use_number)?;
    insert_approval(tx, approval, None, Some(&evidence_json))?;
    tx.execute(
        &INSERT_STANDING_USE,
        params![&approval.id, grant_id, use_number],
    )?;
    append(tx, sealer, &events)?;
    Ok(Some(use_number))
}

// ---- migrations and readiness --------------------------------------------------------------

/// Apply the numbered `steps` not yet recorded in `countersign_migrations`, in order, each
/// recorded with its number in the same transaction. Never edit a published step: append one.
pub(super) fn migrate(tx: &mut dyn Tx, steps: &[&str]) -> Result<(), StoreError> {
    tx.batch(MIGRATIONS_TABLE.text(tx.dialect()))?;
    let applied = applied_migrations(tx)?;
    for (n, step) in steps.iter().enumerate() {
        let version = i64::try_from(n + 1).unwrap_or(i64::MAX);
        if version <= applied {
            continue;
        }
        tx.batch(step)?;
        tx.execute(&RECORD_MIGRATION, params![version])?;
    }
    Ok(())
}

fn applied_migrations(tx: &mut dyn Tx) -> Result<i64, StoreError> {
    match tx.query_opt(&APPLIED_MIGRATIONS, params![])? {
        Some(mut r) => r.int(0),
        None => Ok(0),
    }
}

/// Readiness inside a transaction the backend rolls back: every migration applied, the chain
/// head readable, and the audit chain accepting a write (fails on a read-only database or a
/// standby).
pub(super) fn probe(tx: &mut dyn Tx, expected: usize) -> Result<(), StoreError> {
    let applied = applied_migrations(tx)?;
    if usize::try_from(applied).ok() != Some(expected) {
        return Err(StoreError::Database(format!(
            "schema at migration {applied}, this build expects {expected}"
        )));
    }
    head(tx, true)?;
    tx.execute(&WRITE_PROBE, params![])?;
    Ok(())
}
