//! Every statement the rules issue. Most are one text for both dialects (placeholders `?N`,
//! rewritten to `$N` for PostgreSQL); [`Sql::each`] marks where they differ: row locks
//! (`FOR UPDATE`, which SQLite's single writer does not need), the database's clock, the chain
//! head (a locked row on PostgreSQL, the last line on SQLite) and collation.

use super::super::seam::Sql;

/// The approval columns, in the order `read_approval` reads them.
macro_rules! approval_columns {
    () => {
        "id, created_at, expires_at, agent_id, tool_name, profile, fields_json, severity, \
         op_hash_approved, op_hash_denied, status, reason_code, evidence_json, decided_at, \
         grant_expires_at, grant_collected_at, gateway, preauth_slug, preauth_digest, \
         preauth_use, revises"
    };
}

/// The database's clock in milliseconds since the epoch: preauthorization expiry is judged by
/// it, not by the service's clock (which on PostgreSQL follows it too: `clock::DatabaseTime`).
macro_rules! sqlite_now_ms {
    () => {
        "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)"
    };
}
macro_rules! postgres_now_ms {
    () => {
        "(extract(epoch FROM clock_timestamp()) * 1000)::bigint"
    };
}

/// A standing grant: the proposal's approval columns, then the grant's (renamed so that the
/// approval's `id` and `expires_at` stay unambiguous). Grants first, then each approval by its key:
/// SQLite keeps a CROSS JOIN's order, and without statistics it otherwise scanned every approval
/// for the few standing grants on each create (the soak, docs/RELIABILITY.md, showed throughput
/// falling with the table's size). The join condition is in WHERE so the text is PostgreSQL's too.
macro_rules! standing_select {
    () => {
        concat!(
            "SELECT ",
            approval_columns!(),
            ", g_expires_at, max_uses, uses, revoked_at, revoked_by FROM \
             (SELECT id AS g_id, expires_at AS g_expires_at, max_uses, uses, revoked_at, \
             revoked_by FROM standing_grants) g CROSS JOIN approvals WHERE approvals.id = g.g_id"
        )
    };
}

// ---- approvals ----
pub(super) const SELECT_APPROVAL: Sql = Sql::same(concat!(
    "SELECT ",
    approval_columns!(),
    " FROM approvals WHERE id = ?1"
));
pub(super) const SELECT_APPROVAL_FOR_UPDATE: Sql = Sql::each(
    concat!(
        "SELECT ",
        approval_columns!(),
        " FROM approvals WHERE id = ?1"
    ),
    concat!(
        "SELECT ",
        approval_columns!(),
        " FROM approvals WHERE id = ?1 FOR UPDATE"
    ),
);
pub(super) const INSERT_APPROVAL: Sql = Sql::same(
    "INSERT INTO approvals (id, created_at, expires_at, agent_id, tool_name, profile, \
     fields_json, severity, op_hash_approved, op_hash_denied, status, reason_code, decided_at, \
     grant_expires_at, gateway, revises, preauth_slug, preauth_digest, preauth_use, \
     evidence_json) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, \
     ?19, ?20) ON CONFLICT (id) DO NOTHING",
);
pub(super) const EXPIRE: Sql = Sql::same(
    "UPDATE approvals SET status = 'DENIED', reason_code = ?2, decided_at = ?3 \
     WHERE id = ?1 AND status = 'PENDING' AND expires_at <= ?3",
);
pub(super) const SETTLE: Sql = Sql::same(concat!(
    "UPDATE approvals SET status = ?2, reason_code = ?3, evidence_json = ?4, decided_at = ?5, \
     grant_expires_at = ?6 WHERE id = ?1 AND status = 'PENDING' AND expires_at > ?5 RETURNING ",
    approval_columns!()
));
pub(super) const OVERDUE: Sql = Sql::each(
    "SELECT id FROM approvals WHERE status = 'PENDING' AND expires_at <= ?1 \
     ORDER BY expires_at LIMIT ?2",
    "SELECT id FROM approvals WHERE status = 'PENDING' AND expires_at <= ?1 \
     ORDER BY expires_at LIMIT ?2 FOR UPDATE SKIP LOCKED",
);
pub(super) const SWEEP_CHALLENGES: Sql = Sql::same("DELETE FROM challenges WHERE expires_at <= ?1");
pub(super) const SWEEP_LOGIN_CHALLENGES: Sql =
    Sql::same("DELETE FROM login_challenges WHERE expires_at <= ?1");
pub(super) const SWEEP_SESSIONS: Sql = Sql::same("DELETE FROM sessions WHERE expires_at <= ?1");
pub(super) const COLLECT: Sql = Sql::same(
    "UPDATE approvals SET grant_collected_at = ?2 WHERE id = ?1 AND grant_collected_at IS NULL",
);
pub(super) const PENDING_COUNT: Sql =
    Sql::same("SELECT COUNT(*) FROM approvals WHERE status = 'PENDING'");
pub(super) const OLDEST_PENDING: Sql =
    Sql::same("SELECT MIN(created_at) FROM approvals WHERE status = 'PENDING'");
pub(super) const OPEN_APPROVALS: Sql = Sql::same(concat!(
    "SELECT ",
    approval_columns!(),
    " FROM approvals WHERE status = 'PENDING' AND expires_at > ?1 \
     ORDER BY created_at DESC, id DESC LIMIT ?2"
));

// ---- the audit chain ----
pub(super) const HEAD: Sql = Sql::each(
    "SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1",
    "SELECT seq, hash FROM audit_head",
);
pub(super) const HEAD_FOR_APPEND: Sql = Sql::each(
    "SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1",
    "SELECT seq, hash FROM audit_head FOR UPDATE",
);
pub(super) const INSERT_AUDIT: Sql =
    Sql::same("INSERT INTO audit (seq, hash, line) VALUES (?1, ?2, ?3)");
/// PostgreSQL only (SQLite's head is the last line).
pub(super) const UPDATE_HEAD: Sql = Sql::same("UPDATE audit_head SET seq = ?1, hash = ?2");
/// PostgreSQL only: an event committed with its state change, waiting to be sealed.
pub(super) const INSERT_UNSEALED: Sql =
    Sql::same("INSERT INTO audit_unsealed (event, tag) VALUES (?1, ?2)");
/// PostgreSQL only: one sealer at a time, cluster-wide, until its transaction ends. An advisory
/// lock rather than `FOR UPDATE` on the head row: a round that finds nothing to seal then
/// writes nothing and its commit waits for no flush.
pub(super) const SEALER_LOCK: Sql = Sql::same("SELECT pg_advisory_xact_lock(?1)");
/// PostgreSQL only: take (delete and return) up to `?1` waiting events, oldest first. Exactly the
/// returned rows are deleted, so an event that commits while this runs waits for the next round.
pub(super) const TAKE_UNSEALED: Sql = Sql::same(
    "DELETE FROM audit_unsealed WHERE id IN \
     (SELECT id FROM audit_unsealed ORDER BY id LIMIT ?1) RETURNING id, event, tag",
);
/// PostgreSQL only: a sealed batch, one statement (arrays of seq, hash, line).
pub(super) const INSERT_AUDIT_BATCH: Sql = Sql::same(
    "INSERT INTO audit (seq, hash, line) \
     SELECT * FROM unnest(?1::bigint[], ?2::bytea[], ?3::text[])",
);
/// PostgreSQL only: whether any event waits (read without a lock, to skip empty rounds).
pub(super) const ANY_UNSEALED: Sql = Sql::same("SELECT EXISTS (SELECT 1 FROM audit_unsealed)");
pub(super) const AUDIT_AFTER: Sql =
    Sql::same("SELECT seq, line FROM audit WHERE seq > ?1 ORDER BY seq LIMIT ?2");

// ---- nonces, counters, challenges, sessions ----
pub(super) const NONCE_SPENT: Sql = Sql::same("SELECT 1 FROM spent_nonces WHERE nonce = ?1");
pub(super) const SPEND_NONCE: Sql = Sql::same(
    "INSERT INTO spent_nonces (nonce, spent_at) VALUES (?1, ?2) ON CONFLICT (nonce) DO NOTHING",
);
pub(super) const COUNTER_PLACEHOLDER: Sql = Sql::same(
    "INSERT INTO counters (credential_id, sign_count) VALUES (?1, 0) \
     ON CONFLICT (credential_id) DO NOTHING",
);
pub(super) const COUNTER_FOR_UPDATE: Sql = Sql::each(
    "SELECT sign_count FROM counters WHERE credential_id = ?1",
    "SELECT sign_count FROM counters WHERE credential_id = ?1 FOR UPDATE",
);
/// A verdict without a counter (0) raises nothing, so it only needs the count not to move
/// while it commits: a shared lock, which does not queue the verdicts of one credential
/// behind each other's commits as `FOR UPDATE` does, yet waits for (and then sees) a
/// concurrent raise.
pub(super) const COUNTER_FOR_SHARE: Sql = Sql::each(
    "SELECT sign_count FROM counters WHERE credential_id = ?1",
    "SELECT sign_count FROM counters WHERE credential_id = ?1 FOR SHARE",
);
pub(super) const RAISE_COUNTER: Sql =
    Sql::same("UPDATE counters SET sign_count = ?2 WHERE credential_id = ?1 AND sign_count < ?2");
pub(super) const REPLAY_SNAPSHOT: Sql = Sql::same(
    "SELECT EXISTS (SELECT 1 FROM spent_nonces WHERE nonce = ?1), \
     (SELECT sign_count FROM counters WHERE credential_id = ?2)",
);
pub(super) const INSERT_CHALLENGE: Sql = Sql::same(
    "INSERT INTO challenges (nonce, approval_id, decision, principal, expires_at) \
     VALUES (?1, ?2, ?3, ?4, ?5)",
);
pub(super) const CHALLENGE: Sql = Sql::same(
    "SELECT approval_id, decision, principal, expires_at FROM challenges WHERE nonce = ?1",
);
pub(super) const INSERT_LOGIN_CHALLENGE: Sql =
    Sql::same("INSERT INTO login_challenges (nonce, expires_at) VALUES (?1, ?2)");
pub(super) const TAKE_LOGIN_CHALLENGE: Sql =
    Sql::same("DELETE FROM login_challenges WHERE nonce = ?1 RETURNING expires_at");
pub(super) const INSERT_SESSION: Sql = Sql::same(
    "INSERT INTO sessions (token_hash, principal, credential_id, expires_at) \
     VALUES (?1, ?2, ?3, ?4)",
);
pub(super) const SESSION: Sql = Sql::same(
    "SELECT principal, credential_id, expires_at FROM sessions \
     WHERE token_hash = ?1 AND expires_at > ?2",
);
pub(super) const DELETE_SESSION: Sql = Sql::same("DELETE FROM sessions WHERE token_hash = ?1");

// ---- credentials, gateways, invites ----
pub(super) const CREDENTIAL_FOR_UPDATE: Sql = Sql::each(
    "SELECT record_json FROM credentials WHERE credential_id = ?1",
    "SELECT record_json FROM credentials WHERE credential_id = ?1 FOR UPDATE",
);
pub(super) const CREDENTIAL_EXISTS: Sql =
    Sql::same("SELECT 1 FROM credentials WHERE credential_id = ?1");
pub(super) const INSERT_CREDENTIAL: Sql = Sql::same(
    "INSERT INTO credentials (credential_id, record_json) VALUES (?1, ?2) \
     ON CONFLICT (credential_id) DO NOTHING",
);
pub(super) const UPDATE_CREDENTIAL: Sql =
    Sql::same("UPDATE credentials SET record_json = ?2 WHERE credential_id = ?1");
pub(super) const CREDENTIALS: Sql =
    Sql::same("SELECT record_json FROM credentials ORDER BY credential_id");
pub(super) const BUMP_CREDENTIALS_VERSION: Sql =
    Sql::same("UPDATE credentials_version SET version = version + 1");
pub(super) const CREDENTIALS_VERSION: Sql = Sql::same("SELECT version FROM credentials_version");
pub(super) const INSERT_GATEWAY: Sql = Sql::same(
    "INSERT INTO gateways (name, token_hash, created_at, revoked_at) VALUES (?1, ?2, ?3, ?4) \
     ON CONFLICT DO NOTHING",
);
pub(super) const GATEWAY_FOR_UPDATE: Sql = Sql::each(
    "SELECT revoked_at FROM gateways WHERE name = ?1",
    "SELECT revoked_at FROM gateways WHERE name = ?1 FOR UPDATE",
);
pub(super) const REVOKE_GATEWAY: Sql =
    Sql::same("UPDATE gateways SET revoked_at = ?2 WHERE name = ?1");
/// Byte order of names on both (SQLite's default collation is binary).
pub(super) const GATEWAYS: Sql = Sql::each(
    "SELECT name, token_hash, created_at, revoked_at FROM gateways ORDER BY name",
    "SELECT name, token_hash, created_at, revoked_at FROM gateways ORDER BY name COLLATE \"C\"",
);
pub(super) const INSERT_AUDITOR: Sql = Sql::same(
    "INSERT INTO auditors (name, token_hash, created_at, revoked_at) VALUES (?1, ?2, ?3, ?4) \
     ON CONFLICT DO NOTHING",
);
pub(super) const AUDITOR_FOR_UPDATE: Sql = Sql::each(
    "SELECT revoked_at FROM auditors WHERE name = ?1",
    "SELECT revoked_at FROM auditors WHERE name = ?1 FOR UPDATE",
);
pub(super) const REVOKE_AUDITOR: Sql =
    Sql::same("UPDATE auditors SET revoked_at = ?2 WHERE name = ?1");
/// Byte order of names on both, as for the gateways.
pub(super) const AUDITORS: Sql = Sql::each(
    "SELECT name, token_hash, created_at, revoked_at FROM auditors ORDER BY name",
    "SELECT name, token_hash, created_at, revoked_at FROM auditors ORDER BY name COLLATE \"C\"",
);
pub(super) const INSERT_INVITE: Sql = Sql::same(
    "INSERT INTO invites (token_hash, principal, grp, created_at, expires_at) \
     VALUES (?1, ?2, ?3, ?4, ?5)",
);
pub(super) const INVITE: Sql = Sql::same(
    "SELECT principal, grp, created_at, expires_at FROM invites \
     WHERE token_hash = ?1 AND redeemed_at IS NULL AND expires_at > ?2",
);
pub(super) const REDEEM_INVITE: Sql = Sql::same(
    "UPDATE invites SET redeemed_at = ?2 \
     WHERE token_hash = ?1 AND redeemed_at IS NULL AND expires_at > ?2 RETURNING grp",
);
pub(super) const INSERT_MEMBERSHIP: Sql =
    Sql::same("INSERT INTO memberships (principal, grp) VALUES (?1, ?2) ON CONFLICT DO NOTHING");
pub(super) const MEMBERSHIPS: Sql =
    Sql::same("SELECT principal, grp FROM memberships ORDER BY grp, principal");

// ---- preauthorizations ----
pub(super) const PREAUTHS: Sql = Sql::same(
    "SELECT slug, definition_json, digest, expires_at, max_uses, uses, in_config, disabled_at \
     FROM preauthorizations ORDER BY slug",
);
pub(super) const LOCK_PREAUTHS: Sql = Sql::each(
    "SELECT slug FROM preauthorizations",
    "SELECT slug FROM preauthorizations FOR UPDATE",
);
pub(super) const INSERT_PREAUTH: Sql = Sql::same(
    "INSERT INTO preauthorizations (slug, definition_json, digest, expires_at, max_uses, uses, \
     in_config) VALUES (?1, ?2, ?3, ?4, ?5, 0, TRUE)",
);
pub(super) const REPLACE_PREAUTH: Sql = Sql::same(
    "UPDATE preauthorizations SET definition_json = ?2, digest = ?3, expires_at = ?4, \
     max_uses = ?5, in_config = TRUE WHERE slug = ?1",
);
pub(super) const REMOVE_PREAUTH: Sql =
    Sql::same("UPDATE preauthorizations SET in_config = FALSE WHERE slug = ?1");
pub(super) const PREAUTH_FOR_UPDATE: Sql = Sql::each(
    "SELECT disabled_at FROM preauthorizations WHERE slug = ?1",
    "SELECT disabled_at FROM preauthorizations WHERE slug = ?1 FOR UPDATE",
);
pub(super) const DISABLE_PREAUTH: Sql =
    Sql::same("UPDATE preauthorizations SET disabled_at = ?2 WHERE slug = ?1");
/// The database's clock now (`serve` on PostgreSQL runs the service's clock on it).
pub(super) const DATABASE_NOW: Sql = Sql::each(
    concat!("SELECT ", sqlite_now_ms!()),
    concat!("SELECT ", postgres_now_ms!()),
);
pub(super) const CONSUME_PREAUTH: Sql = Sql::each(
    concat!(
        "UPDATE preauthorizations SET uses = uses + 1 WHERE slug = ?1 AND digest = ?2 \
         AND in_config = TRUE AND disabled_at IS NULL AND uses < max_uses AND expires_at > ",
        sqlite_now_ms!(),
        " RETURNING uses"
    ),
    concat!(
        "UPDATE preauthorizations SET uses = uses + 1 WHERE slug = ?1 AND digest = ?2 \
         AND in_config = TRUE AND disabled_at IS NULL AND uses < max_uses AND expires_at > ",
        postgres_now_ms!(),
        " RETURNING uses"
    ),
);
pub(super) const PREAUTH_USABLE: Sql = Sql::each(
    concat!(
        "SELECT 1 FROM preauthorizations WHERE slug = ?1 AND digest = ?2 AND in_config = TRUE \
         AND disabled_at IS NULL AND expires_at > ",
        sqlite_now_ms!()
    ),
    concat!(
        "SELECT 1 FROM preauthorizations WHERE slug = ?1 AND digest = ?2 AND in_config = TRUE \
         AND disabled_at IS NULL AND expires_at > ",
        postgres_now_ms!()
    ),
);

// ---- standing grants ----
pub(super) const INSERT_STANDING: Sql =
    Sql::same("INSERT INTO standing_grants (id, expires_at, max_uses) VALUES (?1, ?2, ?3)");
pub(super) const INSERT_STANDING_GATEWAY: Sql =
    Sql::same("INSERT INTO standing_grant_gateways (grant_id, gateway) VALUES (?1, ?2)");
pub(super) const STANDING_GRANT: Sql = Sql::same(concat!(standing_select!(), " AND g_id = ?1"));
pub(super) const LIVE_STANDING_GRANTS: Sql = Sql::same(concat!(
    standing_select!(),
    " AND status = 'APPROVED' AND revoked_at IS NULL AND g_expires_at > ?1 \
     AND uses < max_uses ORDER BY created_at, id LIMIT ?2"
));
/// The live grants one gateway may spend: another tenant's grants are not candidates (nor can
/// they crowd this gateway's out of the candidate limit).
pub(super) const LIVE_STANDING_GRANTS_OF: Sql = Sql::same(concat!(
    standing_select!(),
    " AND status = 'APPROVED' AND revoked_at IS NULL AND g_expires_at > ?1 \
     AND uses < max_uses AND EXISTS (SELECT 1 FROM standing_grant_gateways sg \
     WHERE sg.gateway = ?3 AND sg.grant_id = g_id) ORDER BY created_at, id LIMIT ?2"
));
/// The guard is the whole rule: signed, unrevoked, unexpired, a use left, and named for the
/// gateway whose call takes the use.
pub(super) const USE_STANDING: Sql = Sql::same(
    "UPDATE standing_grants SET uses = uses + 1 \
     WHERE id = ?1 AND revoked_at IS NULL AND expires_at > ?2 AND uses < max_uses \
     AND EXISTS (SELECT 1 FROM approvals a \
                 WHERE a.id = standing_grants.id AND a.status = 'APPROVED') \
     AND EXISTS (SELECT 1 FROM standing_grant_gateways sg \
                 WHERE sg.grant_id = standing_grants.id AND sg.gateway = ?3) \
     RETURNING uses",
);
pub(super) const INSERT_STANDING_USE: Sql =
    Sql::same("INSERT INTO standing_uses (approval_id, grant_id, use_number) VALUES (?1, ?2, ?3)");
pub(super) const REVOKE_STANDING: Sql = Sql::same(
    "UPDATE standing_grants SET revoked_at = ?2, revoked_by = ?3 \
     WHERE id = ?1 AND revoked_at IS NULL",
);

// ---- migrations and readiness ----
pub(super) const MIGRATIONS_TABLE: Sql = Sql::each(
    "CREATE TABLE IF NOT EXISTS countersign_migrations \
     (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP)",
    "CREATE TABLE IF NOT EXISTS countersign_migrations \
     (version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())",
);
pub(super) const APPLIED_MIGRATIONS: Sql =
    Sql::same("SELECT COALESCE(MAX(version), 0) FROM countersign_migrations");
pub(super) const RECORD_MIGRATION: Sql =
    Sql::same("INSERT INTO countersign_migrations (version) VALUES (?1)");
/// A write to the audit chain that changes nothing.
pub(super) const WRITE_PROBE: Sql = Sql::each(
    "DELETE FROM audit WHERE seq < 0",
    "UPDATE audit_head SET seq = seq",
);
