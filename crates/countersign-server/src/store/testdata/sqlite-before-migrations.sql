-- The SQLite schema as the store created it before numbered migrations (main at fde9632:
-- SCHEMA, then each ADDED_COLUMNS entry, then the standing-grant SCHEMA), with a few rows.
-- store/tests.rs opens a database made from this with the current code: nothing may be lost.
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
ALTER TABLE approvals ADD COLUMN gateway TEXT;
ALTER TABLE approvals ADD COLUMN preauth_slug TEXT;
ALTER TABLE approvals ADD COLUMN preauth_digest BLOB;
ALTER TABLE approvals ADD COLUMN preauth_use INTEGER;
ALTER TABLE approvals ADD COLUMN revises TEXT;
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
INSERT INTO approvals (id, created_at, expires_at, agent_id, tool_name, profile, fields_json,
    severity, op_hash_approved, op_hash_denied, status, reason_code, evidence_json, decided_at,
    grant_expires_at, grant_collected_at, gateway, revises)
    VALUES ('old', 5, 1000, 'agent', 'tool', 'p', '{}', 'high', zeroblob(32), zeroblob(32),
    'APPROVED', NULL, '[]', 7, 900, NULL, 'gw', 'older');
INSERT INTO credentials (credential_id, record_json) VALUES (x'0102', '{}');
INSERT INTO gateways (name, token_hash, created_at, revoked_at) VALUES ('gw', zeroblob(32), 1, NULL);
INSERT INTO counters (credential_id, sign_count) VALUES (x'0102', 41);
INSERT INTO audit (seq, hash, line) VALUES (1, x'0101010101010101010101010101010101010101010101010101010101010101', '{"seq":1}');
UPDATE credentials_version SET version = 3;
