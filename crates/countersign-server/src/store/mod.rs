//! Durable state behind one trait.
//!
//! Every method is one atomic unit: it either commits entirely (state change and its audit lines,
//! sealed against the chain head read in the same transaction) or changes nothing. That is what
//! lets N replicas share one database later: first-verdict-wins is a compare-and-set on the
//! approval's status, grant collection a compare-and-set on its collection time, nonce spending a
//! unique insert, counter advance a conditional update, and the audit chain head a row read and
//! written inside the transaction. A PostgreSQL implementation maps each method to one
//! transaction with `SELECT ... FOR UPDATE` on the chain head.
//!
//! The trait is synchronous on purpose: the SQLite driver is, and the async service calls it on
//! tokio's blocking pool. Times are milliseconds since the Unix epoch from the service's clock,
//! passed in, so the store never reads a clock of its own (tests drive expiry explicitly).

pub mod outbox;
mod postgres;
mod preauth;
mod rules;
mod seam;
mod sqlite;
pub mod standing;
#[cfg(any(test, feature = "testing"))]
mod testing;
#[cfg(test)]
mod tests;

pub use outbox::{Delivery, DeliveryAttempt, DeliveryRow, ExtendOutcome, NewDelivery, OutboxStore};
pub use postgres::SealStats;
pub use preauth::{
    DisableOutcome, PreauthChange, PreauthDefinition, PreauthUse, StoredPreauth, plan_reconcile,
};
pub use rules::SqlStore;
#[cfg(any(test, feature = "testing"))]
pub use testing::{ScratchSchema, TEST_DATABASE_DEFAULT, TEST_DATABASE_ENV};

/// The store on the embedded SQLite database ([`SqlStore::open`], [`SqlStore::in_memory`]).
pub type SqliteStore = SqlStore;
/// The store on a PostgreSQL database shared by replicas ([`SqlStore::connect`]).
pub type PostgresStore = SqlStore;

use crate::audit::{AuditEvent, AuditSealer};
use crate::config::Durability;
use countersign::{ApprovalStatus, CredentialRecord, ReasonCode};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Which database backs the service: `--database URL` or `database = "URL"` in the config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DatabaseUrl {
    /// `sqlite://PATH` (`sqlite:///abs/path` for an absolute one): one process, embedded.
    Sqlite(PathBuf),
    /// `postgres://…` or `postgresql://…` (libpq URL syntax): any number of replicas.
    Postgres(String),
}

/// A database URL fit to print: the password, if any, is replaced by `***`.
pub fn redacted(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (authority, tail) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    match authority.rsplit_once('@') {
        Some((user, host)) if user.contains(':') => {
            let name = user.split(':').next().unwrap_or_default();
            format!("{scheme}://{name}:***@{host}{tail}")
        }
        _ => url.to_owned(),
    }
}

/// Connections each service process opens to PostgreSQL.
pub const POSTGRES_POOL: usize = 8;

impl DatabaseUrl {
    /// Parse a database URL; the scheme picks the backend.
    pub fn parse(url: &str) -> Result<Self, StoreError> {
        if let Some(path) = url.strip_prefix("sqlite://") {
            if path.is_empty() {
                return Err(StoreError::BadUrl(url.to_owned()));
            }
            return Ok(Self::Sqlite(PathBuf::from(path)));
        }
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            return Ok(Self::Postgres(url.to_owned()));
        }
        Err(StoreError::BadUrl(url.to_owned()))
    }

    /// The default: the embedded SQLite database in the data directory.
    pub fn default_in(data_dir: &Path) -> Self {
        Self::Sqlite(data_dir.join(crate::files::DATABASE))
    }

    /// Open the store (applying migrations).
    pub fn open(
        &self,
        sealer: AuditSealer,
        durability: Durability,
    ) -> Result<Arc<dyn Store>, StoreError> {
        Ok(match self {
            Self::Sqlite(path) => Arc::new(SqliteStore::open(path, sealer, durability)?),
            Self::Postgres(url) => Arc::new(PostgresStore::connect(url, sealer, POSTGRES_POOL)?),
        })
    }
}

/// A request to create.
#[derive(Debug, Clone)]
pub struct NewApproval {
    pub id: String,
    pub created_at: i64,
    pub expires_at: i64,
    pub agent_id: String,
    pub tool_name: String,
    pub profile: String,
    /// The JSON text of the action's fields, exactly as the verifier will admit it.
    pub fields_json: String,
    pub severity: String,
    pub op_hash_approved: [u8; 32],
    pub op_hash_denied: [u8; 32],
    /// Initial status: PENDING, or an at-once APPROVED/DENIED.
    pub status: ApprovalStatus,
    pub reason_code: Option<ReasonCode>,
    /// When an at-once APPROVED grant stops being collectable.
    pub grant_expires_at: Option<i64>,
    /// The gateway that asked (its name): only it may follow, withdraw or collect this approval.
    pub gateway: String,
    /// The approval this request revises, when the gateway says so (a new proposal: nothing
    /// passes from the one it revises).
    pub revises: Option<String>,
}

impl NewApproval {
    /// The row the store writes for this request, without reading it back: decided at its
    /// creation unless PENDING, no evidence, no grant collected yet, and the preauthorization
    /// that approved it, if one did. The one place a new approval's fields become a record's.
    pub fn into_record(self, preauthorization: Option<PreauthUse>) -> ApprovalRecord {
        ApprovalRecord {
            decided_at: (self.status != ApprovalStatus::Pending).then_some(self.created_at),
            reason_code: self.reason_code.map(|r| r.as_str().to_owned()),
            evidence_json: None,
            grant_collected_at: None,
            gateway: Some(self.gateway),
            preauthorization,
            id: self.id,
            created_at: self.created_at,
            expires_at: self.expires_at,
            agent_id: self.agent_id,
            tool_name: self.tool_name,
            profile: self.profile,
            fields_json: self.fields_json,
            severity: self.severity,
            op_hash_approved: self.op_hash_approved,
            op_hash_denied: self.op_hash_denied,
            status: self.status,
            grant_expires_at: self.grant_expires_at,
            revises: self.revises,
        }
    }
}

/// An approval as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalRecord {
    pub id: String,
    pub created_at: i64,
    pub expires_at: i64,
    pub agent_id: String,
    pub tool_name: String,
    pub profile: String,
    pub fields_json: String,
    pub severity: String,
    pub op_hash_approved: [u8; 32],
    pub op_hash_denied: [u8; 32],
    pub status: ApprovalStatus,
    pub reason_code: Option<String>,
    /// The decided ApprovalResult's `approver_evidence` (JSON array text), when a human decided.
    pub evidence_json: Option<String>,
    pub decided_at: Option<i64>,
    pub grant_expires_at: Option<i64>,
    pub grant_collected_at: Option<i64>,
    /// The gateway that created it; `None` for a row written before gateways authenticated,
    /// which therefore belongs to no gateway (every gateway is answered 404 for it).
    pub gateway: Option<String>,
    /// The operator preauthorization that approved it without a human, if one did.
    pub preauthorization: Option<PreauthUse>,
    /// The approval this one revises, if the gateway said so.
    pub revises: Option<String>,
}

/// A gateway credential as stored: the bearer token itself is never stored, only its SHA-256.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayRecord {
    /// The operator's name for the gateway, unique for the life of the database (a revoked name
    /// is never reused, so audit lines naming it stay unambiguous).
    pub name: String,
    pub token_hash: [u8; 32],
    pub created_at: i64,
    pub revoked_at: Option<i64>,
}

/// An auditor credential as stored (`countersign auditor add`), kept apart from the gateways in
/// its own table: a token is looked up among the auditors or among the gateways, never both, so
/// one kind of token can never stand for the other.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditorRecord {
    /// The operator's name for the auditor, unique for the life of the database.
    pub name: String,
    pub token_hash: [u8; 32],
    pub created_at: i64,
    pub revoked_at: Option<i64>,
}

/// An invite as stored: the token itself is never stored, only its hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invite {
    pub token_hash: [u8; 32],
    pub principal: String,
    /// The approver group the principal joins when the invite is redeemed.
    pub group: Option<String>,
    pub created_at: i64,
    pub expires_at: i64,
}

/// A nonce to spend and a counter to advance with a verdict.
#[derive(Debug, Clone)]
pub struct Spend {
    pub nonce: Vec<u8>,
    pub credential_id: Vec<u8>,
    pub sign_count: u32,
}

/// How an approval is being settled.
#[derive(Debug, Clone)]
pub enum SettleKind {
    /// A verified human verdict; the nonce is spent and the counter advanced atomically with it.
    Verdict { spend: Spend, evidence_json: String },
    /// The gateway withdrew the request (`cancelled`). Only the gateway that created the approval
    /// may: for any other the outcome is [`SettleOutcome::NotFound`], as for an unknown id.
    Withdrawn { gateway: String },
}

/// A first-verdict-wins settlement.
#[derive(Debug, Clone)]
pub struct Settlement {
    pub approval_id: String,
    pub now: i64,
    pub status: ApprovalStatus,
    pub reason_code: Option<ReasonCode>,
    pub kind: SettleKind,
    /// Set for APPROVED.
    pub grant_expires_at: Option<i64>,
    pub event: AuditEvent,
}

/// What a settlement attempt did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SettleOutcome {
    Settled(ApprovalRecord),
    /// Somebody settled first; nothing changed.
    AlreadySettled(ApprovalRecord),
    /// The approval had expired: it is now (or already was) DENIED `expired_unanswered`.
    Expired(ApprovalRecord),
    /// The nonce was spent by an earlier verdict.
    Replayed,
    /// The signature counter did not advance past the stored one.
    CounterRegression {
        stored: u32,
        got: u32,
    },
    NotFound,
}

/// What a grant collection did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GrantOutcome {
    Granted {
        collected_at: i64,
    },
    NotFound,
    /// The approval is not APPROVED (pending, refused, expired, withdrawn).
    NotApproved(Box<ApprovalRecord>),
    AlreadyCollected {
        collected_at: i64,
    },
    FingerprintMismatch,
    Expired,
    /// Approved by a preauthorization that, by the database's clock at collection, is no longer
    /// enabled, has expired, or has a different definition: the grant is refused.
    PreauthorizationWithdrawn,
}

/// A challenge issued to an authenticated approver for one decision on one approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuedChallenge {
    pub nonce: Vec<u8>,
    pub approval_id: String,
    pub decision: countersign::Decision,
    pub principal: String,
    pub expires_at: i64,
}

/// An approver session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    pub principal: String,
    pub credential_id: Vec<u8>,
    pub expires_at: i64,
}

/// What redeeming an invite did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RedeemOutcome {
    Redeemed,
    /// Unknown, already redeemed or expired; nothing changed.
    InviteUnusable,
    /// The credential id is enrolled already; nothing changed (the invite stays usable).
    CredentialExists,
}

/// What revoking a credential (or a gateway, or an auditor) did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RevokeOutcome {
    /// Marked revoked (for a credential, with its `revocation` line appended).
    Revoked,
    /// No credential with that id (no gateway or auditor with that name); nothing changed.
    NotFound,
    /// Revoked earlier; nothing changed.
    AlreadyRevoked,
}

/// Reason recorded when a registry file itself marks a credential revoked.
pub const REVOKED_IN_REGISTRY: &str = "revoked in the registry file";
/// Reason recorded when a registry file replaces a live credential's stored record: the old
/// record is revoked and the new one enrolled, so the log never shows two live enrollments.
pub const REPLACED_BY_REGISTRY: &str = "superseded: the registry file changed the stored record";

/// What importing one registry record does to the stored one.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Import {
    /// Identical, or the stored credential is revoked (a revocation is final: a registry file
    /// that still lists the key cannot bring it back).
    Keep,
    /// New: insert it.
    Insert(Vec<AuditEvent>),
    /// Changed: replace the stored record.
    Replace(Vec<AuditEvent>),
}

/// The one rule both stores apply to every record of `put_credentials`.
pub(crate) fn plan_import(
    stored: Option<&CredentialRecord>,
    incoming: &CredentialRecord,
    now: i64,
) -> Import {
    use crate::audit::EnrollmentSource::Registry;
    let ts = crate::clock::rfc3339(crate::clock::from_ms(now));
    let enrollment = || AuditEvent::enrollment_of(&ts, incoming, None, Registry);
    let revocation = |record: &CredentialRecord, reason: &str| {
        AuditEvent::revocation(&ts, &record.principal, &record.credential_id, reason)
    };
    match stored {
        None => {
            let mut events = vec![enrollment()];
            if incoming.revoked {
                events.push(revocation(incoming, REVOKED_IN_REGISTRY));
            }
            Import::Insert(events)
        }
        Some(old) if old.revoked || old == incoming => {
            if old != incoming {
                tracing::warn!(
                    credential_id = %countersign::b64::encode(&old.credential_id),
                    "registry record for a revoked credential ignored: revocation is final"
                );
            }
            Import::Keep
        }
        Some(old) if incoming.revoked => {
            Import::Replace(vec![revocation(old, REVOKED_IN_REGISTRY)])
        }
        Some(old) => Import::Replace(vec![revocation(old, REPLACED_BY_REGISTRY), enrollment()]),
    }
}

/// Revoke `credential_id` with the operator's `reason`: reads the record for its principal,
/// then [`Store::revoke_credential`] (which re-checks under its transaction).
pub fn revoke(
    store: &dyn Store,
    credential_id: &[u8],
    reason: &str,
    now: i64,
) -> Result<RevokeOutcome, StoreError> {
    let Some(record) = store
        .credentials()?
        .into_iter()
        .find(|c| c.credential_id == credential_id)
    else {
        return Ok(RevokeOutcome::NotFound);
    };
    if record.revoked {
        return Ok(RevokeOutcome::AlreadyRevoked);
    }
    let ts = crate::clock::rfc3339(crate::clock::from_ms(now));
    let event = AuditEvent::revocation(&ts, &record.principal, credential_id, reason);
    store.revoke_credential(credential_id, now, &event)
}

/// A storage failure (not a refusal: refusals are outcomes).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database: {0}")]
    Database(String),
    /// The database cannot take the write (or cannot be reached) now, through no fault of the
    /// request: disk full, read-only (a read-only file or a demoted primary), I/O failure, a
    /// lost connection. Nothing was committed by the failed call (or, for a connection lost at
    /// COMMIT, the outcome is unknown and a retry meets the settled state). Answered 503.
    #[error("database unavailable: {0}")]
    Unavailable(String),
    #[error("corrupt row: {0}")]
    Corrupt(String),
    #[error("an approval with id {0} already exists")]
    DuplicateId(String),
    #[error("database URL {0:?} is neither sqlite://PATH nor postgres://…")]
    BadUrl(String),
}

/// The service's durable state (standing grants: [`standing::StandingStore`]).
pub trait Store:
    standing::StandingStore + outbox::OutboxStore + Send + Sync + std::fmt::Debug + 'static
{
    /// Insert a request with its audit lines (request and outcome).
    fn create(&self, approval: &NewApproval, events: &[AuditEvent]) -> Result<(), StoreError>;

    /// Read an approval.
    fn get(&self, id: &str) -> Result<Option<ApprovalRecord>, StoreError>;

    /// Settle a PENDING approval, first writer wins. An approval whose `expires_at <= now` is
    /// settled as expired instead, whatever was asked.
    fn settle(&self, settlement: &Settlement) -> Result<SettleOutcome, StoreError>;

    /// Settle up to `limit` overdue PENDING approvals as DENIED `expired_unanswered`; returns
    /// their ids.
    fn expire_overdue(&self, now: i64, limit: usize) -> Result<Vec<String>, StoreError>;

    /// Collect the single-use grant of an APPROVED approval for `fingerprint`. Only the gateway
    /// that created the approval may: for any other the outcome is [`GrantOutcome::NotFound`],
    /// as for an unknown id, decided before anything else is looked at. When the gateway names
    /// the tool it is about to run (`tool_name`), a tool other than the approval's is a
    /// [`GrantOutcome::FingerprintMismatch`]: a typed profile's fingerprint does not cover the
    /// tool, so the same arguments under another tool would otherwise match.
    fn collect_grant(
        &self,
        id: &str,
        gateway: &str,
        fingerprint: &[u8; 32],
        tool_name: Option<&str>,
        now: i64,
        event: &AuditEvent,
    ) -> Result<GrantOutcome, StoreError>;

    /// Remember an issued decision challenge.
    fn put_challenge(&self, challenge: &IssuedChallenge) -> Result<(), StoreError>;
    /// Look up an issued decision challenge by its nonce.
    fn challenge(&self, nonce: &[u8]) -> Result<Option<IssuedChallenge>, StoreError>;

    /// Whether a nonce is spent, and the stored counter of a credential.
    fn replay_snapshot(
        &self,
        nonce: &[u8],
        credential_id: &[u8],
    ) -> Result<(bool, Option<u32>), StoreError>;

    /// Remember a login challenge.
    fn put_login_challenge(&self, nonce: &[u8], expires_at: i64) -> Result<(), StoreError>;
    /// Consume a login challenge: true exactly once, and only before it expires.
    fn take_login_challenge(&self, nonce: &[u8], now: i64) -> Result<bool, StoreError>;
    /// Create a session for the hash of its bearer token; the login assertion's counter is
    /// advanced in the same transaction (false and nothing stored when it regressed).
    fn create_session(
        &self,
        token_hash: &[u8; 32],
        session: &Session,
        sign_count: u32,
    ) -> Result<bool, StoreError>;
    /// The live session for a token hash.
    fn session(&self, token_hash: &[u8; 32], now: i64) -> Result<Option<Session>, StoreError>;
    /// End a session (logout): its row is deleted, so the token opens nothing from then on, on
    /// every replica. Returns whether a session was deleted.
    fn delete_session(&self, token_hash: &[u8; 32]) -> Result<bool, StoreError>;

    /// Import enrolled credentials (a registry file, `AppState::enroll`), in one transaction.
    /// A new credential is inserted with an `enrollment` line (`source: "registry"`); a changed
    /// one replaces the stored record with a `revocation` line for the old record and an
    /// `enrollment` line for the new one (only a `revocation` line when the change is
    /// `revoked: true`); an identical one, or any record of a revoked credential, changes
    /// nothing. Returns how many credentials were inserted or replaced.
    fn put_credentials(&self, records: &[CredentialRecord], now: i64) -> Result<usize, StoreError>;
    /// Revoke a credential, in one transaction: `revoked: true` in its stored record and
    /// `event` (its `revocation` line) appended. Nothing changes on refusal. (Sessions are kept:
    /// the service refuses a session whose credential its registry says is revoked, with
    /// `credential_revoked`.)
    fn revoke_credential(
        &self,
        credential_id: &[u8],
        now: i64,
        event: &AuditEvent,
    ) -> Result<RevokeOutcome, StoreError>;
    /// The database server's clock, in ms since the Unix epoch (`clock_timestamp()` on
    /// PostgreSQL, `julianday('now')` on SQLite): what [`crate::clock::DatabaseTime`] follows.
    fn database_now_ms(&self) -> Result<i64, StoreError>;
    /// A counter raised by every transaction that changes the credentials, memberships or
    /// gateways or auditors (redeemed invite, import, revocation, gateway or auditor added or
    /// revoked): a process compares it with the value it loaded
    /// its registry at to notice changes made by another process or replica.
    fn credentials_version(&self) -> Result<u64, StoreError>;
    /// Every enrolled credential.
    fn credentials(&self) -> Result<Vec<CredentialRecord>, StoreError>;

    /// Add a gateway credential; false (and nothing stored) when the name is taken, by a live or
    /// a revoked gateway. Raises the credentials version, so running services pick it up.
    fn put_gateway(&self, gateway: &GatewayRecord) -> Result<bool, StoreError>;
    /// Revoke a gateway by name (its token stops authenticating); raises the credentials version.
    fn revoke_gateway(&self, name: &str, now: i64) -> Result<RevokeOutcome, StoreError>;
    /// Every gateway, live and revoked, by name.
    fn gateways(&self) -> Result<Vec<GatewayRecord>, StoreError>;

    /// Add an auditor credential; false (and nothing stored) when the name is taken, by a live
    /// or a revoked auditor. Raises the credentials version, so running services pick it up.
    fn put_auditor(&self, auditor: &AuditorRecord) -> Result<bool, StoreError>;
    /// Revoke an auditor by name (its token stops authenticating); raises the credentials
    /// version.
    fn revoke_auditor(&self, name: &str, now: i64) -> Result<RevokeOutcome, StoreError>;
    /// Every auditor, live and revoked, by name.
    fn auditors(&self) -> Result<Vec<AuditorRecord>, StoreError>;

    /// Remember an enrollment invite (by the hash of its token).
    fn put_invite(&self, invite: &Invite) -> Result<(), StoreError>;
    /// The invite for a token hash, if it is unredeemed and `now < expires_at`.
    fn invite(&self, token_hash: &[u8; 32], now: i64) -> Result<Option<Invite>, StoreError>;
    /// Redeem an invite, in one transaction: mark it used (compare-and-set on "unused and
    /// unexpired"), insert the credential (never replacing an existing id), and record the
    /// invite's group membership, and append `event` (the `enrollment` line).
    fn redeem_invite(
        &self,
        token_hash: &[u8; 32],
        now: i64,
        credential: &CredentialRecord,
        event: &AuditEvent,
    ) -> Result<RedeemOutcome, StoreError>;
    /// Group memberships granted by redeemed invites: `(principal, group)`.
    fn memberships(&self) -> Result<Vec<(String, String)>, StoreError>;

    /// `(seq, hash)` of the last audit line (`(0, GENESIS)` when empty), after
    /// [`Store::seal_audit`]: the head covers every event committed before the call.
    fn audit_head(&self) -> Result<(u64, [u8; 32]), StoreError>;
    /// Chain every audit event committed before this call. SQLite seals events in the
    /// transaction that writes them, so there is nothing to do; PostgreSQL seals them just after
    /// their commit (store/postgres.rs), and this waits for a sealing round.
    fn seal_audit(&self) -> Result<(), StoreError>;
    /// Whether a committed event is a sealed line as soon as its transaction commits (SQLite),
    /// rather than a round later (PostgreSQL).
    fn seals_on_commit(&self) -> bool;
    /// Up to `limit` sealed audit lines after `seq`, in order (events committed but not yet
    /// sealed are not lines yet: [`Store::seal_audit`] first to have them all).
    fn audit_lines_after(&self, seq: u64, limit: usize) -> Result<Vec<(u64, String)>, StoreError>;
    /// Number of PENDING approvals.
    fn pending_count(&self) -> Result<u64, StoreError>;
    /// `created_at` (ms) of the oldest PENDING approval, if any.
    fn oldest_pending(&self) -> Result<Option<i64>, StoreError>;
    /// Reconcile the config-owned preauthorizations with `incoming` (the whole set the config
    /// defines) in one transaction, as [`plan_reconcile`] says, with one audit line per change.
    /// Returns the changes made.
    fn reconcile_preauthorizations(
        &self,
        incoming: &[PreauthDefinition],
        now: i64,
    ) -> Result<Vec<PreauthChange>, StoreError>;
    /// Every stored preauthorization, by slug.
    fn preauthorizations(&self) -> Result<Vec<StoredPreauth>, StoreError>;
    /// Disable a preauthorization by hand (kept across restarts), with a `preauthorization`
    /// line `change: "disabled"`.
    fn disable_preauthorization(&self, slug: &str, now: i64) -> Result<DisableOutcome, StoreError>;
    /// Consume one use of preauthorization `slug` and insert `approval` (APPROVED) with its
    /// lines, in one transaction. The use is taken by a guarded update that re-checks, by the
    /// database's clock, that the row is in the config, not disabled, unexpired, under
    /// `max_uses` and has `digest`; `None` (and nothing written) when it does not hold. The
    /// `outcome` line gets the use number as `preauthorization.use`.
    fn create_preauthorized(
        &self,
        approval: &NewApproval,
        slug: &str,
        digest: &[u8; 32],
        events: &[AuditEvent],
    ) -> Result<Option<i64>, StoreError>;

    /// Readiness (`GET /readyz`): the store answers, its schema is the one this build writes
    /// (every migration applied), and it would accept a write to the audit chain right now.
    /// Probes with a write transaction that is rolled back, so it changes nothing.
    fn ready(&self) -> Result<(), StoreError>;
}
