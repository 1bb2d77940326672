//! [`StandingStore`] on PostgreSQL. Lock order stays that of the module above: a grant's row
//! (taken by the guarded `UPDATE`), then the audit chain head; a proposal's settlement locks its
//! approval row, never a grant row, so the two cannot wait on each other in a cycle.

use super::{PostgresStore, Tx, append, read_approval};
use crate::audit::AuditEvent;
use crate::store::standing::{NewStandingGrant, StandingGrantRecord, StandingStore, UseRecords};
use crate::store::{ApprovalRecord, NewApproval, StoreError};
use ::postgres::Row;
use countersign::{ApprovalStatus, ReasonCode};

/// Appended to the store's migrations (see `MIGRATIONS`).
pub(super) const MIGRATION: &str = "
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
";

const SELECT_GRANT: &str = "SELECT a.id, a.created_at, a.expires_at, a.agent_id, a.tool_name, \
    a.profile, a.fields_json, a.severity, a.op_hash_approved, a.op_hash_denied, a.status, \
    a.reason_code, a.evidence_json, a.decided_at, a.grant_expires_at, a.grant_collected_at, \
    a.gateway, a.preauth_slug, a.preauth_digest, a.preauth_use, a.revises, \
    g.expires_at, g.max_uses, g.uses, g.revoked_at, g.revoked_by \
    FROM standing_grants g JOIN approvals a ON a.id = g.id WHERE g.id = $1";

const SELECT_LIVE_GRANTS: &str = "SELECT a.id, a.created_at, a.expires_at, a.agent_id, \
    a.tool_name, a.profile, a.fields_json, a.severity, a.op_hash_approved, a.op_hash_denied, \
    a.status, a.reason_code, a.evidence_json, a.decided_at, a.grant_expires_at, \
    a.grant_collected_at, a.gateway, a.preauth_slug, a.preauth_digest, a.preauth_use, \
    a.revises, g.expires_at, g.max_uses, g.uses, g.revoked_at, \
    g.revoked_by FROM standing_grants g JOIN approvals a ON a.id = g.id \
    WHERE a.status = 'APPROVED' AND g.revoked_at IS NULL AND g.expires_at > $1 \
    AND g.uses < g.max_uses ORDER BY a.created_at, a.id LIMIT $2";

fn read_grant(r: &Row) -> Result<StandingGrantRecord, StoreError> {
    let get = |e: ::postgres::Error| StoreError::Corrupt(e.to_string());
    let count = |v: i64, what: &str| {
        u32::try_from(v).map_err(|_| StoreError::Corrupt(format!("standing grant {what} {v}")))
    };
    Ok(StandingGrantRecord {
        proposal: read_approval(r)?,
        expires_at: r.try_get(21).map_err(get)?,
        max_uses: count(r.try_get(22).map_err(get)?, "max_uses")?,
        uses: count(r.try_get(23).map_err(get)?, "uses")?,
        revoked_at: r.try_get(24).map_err(get)?,
        revoked_by: r.try_get(25).map_err(get)?,
    })
}

fn insert_approval(
    tx: &mut Tx<'_, '_>,
    a: &NewApproval,
    evidence_json: Option<&str>,
) -> Result<(), StoreError> {
    let decided = (a.status != ApprovalStatus::Pending).then_some(a.created_at);
    let inserted = tx.execute(
        "INSERT INTO approvals (id, created_at, expires_at, agent_id, tool_name, profile, \
         fields_json, severity, op_hash_approved, op_hash_denied, status, reason_code, \
         decided_at, grant_expires_at, gateway, evidence_json) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16) \
         ON CONFLICT (id) DO NOTHING",
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
            &evidence_json,
        ],
    )?;
    if inserted == 0 {
        return Err(StoreError::DuplicateId(a.id.clone()));
    }
    Ok(())
}

impl StandingStore for PostgresStore {
    fn create_standing_proposal(
        &self,
        approval: &NewApproval,
        grant: &NewStandingGrant,
        events: &[AuditEvent],
    ) -> Result<(), StoreError> {
        let (approval, grant, events) = (approval.clone(), grant.clone(), events.to_vec());
        self.tx(move |tx, sealer| {
            insert_approval(tx, &approval, None)?;
            tx.execute(
                "INSERT INTO standing_grants (id, expires_at, max_uses) VALUES ($1, $2, $3)",
                &[&grant.id, &grant.expires_at, &i64::from(grant.max_uses)],
            )?;
            append(tx, sealer, &events)
        })
    }

    fn standing_grant(&self, id: &str) -> Result<Option<StandingGrantRecord>, StoreError> {
        let id = id.to_owned();
        self.one(move |tx| {
            tx.query_opt(SELECT_GRANT, &[&id])?
                .as_ref()
                .map(read_grant)
                .transpose()
        })
    }

    fn live_standing_grants(
        &self,
        now: i64,
        limit: usize,
    ) -> Result<Vec<StandingGrantRecord>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.one(move |tx| {
            tx.query(SELECT_LIVE_GRANTS, &[&now, &limit])?
                .iter()
                .map(read_grant)
                .collect()
        })
    }

    fn use_standing_grant(
        &self,
        approval: &NewApproval,
        grant_id: &str,
        now: i64,
        records: UseRecords,
    ) -> Result<Option<u32>, StoreError> {
        let (approval, grant_id) = (approval.clone(), grant_id.to_owned());
        self.tx(move |tx, sealer| {
            // The guard is the whole rule: signed, unrevoked, unexpired, a use left. Two replicas
            // racing for the last use: the second waits on the row lock, re-reads `uses` after the
            // first commits, and its guard no longer holds.
            let Some(row) = tx.query_opt(
                "UPDATE standing_grants SET uses = uses + 1 \
                 WHERE id = $1 AND revoked_at IS NULL AND expires_at > $2 AND uses < max_uses \
                 AND EXISTS (SELECT 1 FROM approvals a \
                             WHERE a.id = standing_grants.id AND a.status = 'APPROVED') \
                 RETURNING uses",
                &[&grant_id, &now],
            )?
            else {
                return Ok(None);
            };
            let used: i64 = row.get(0);
            let use_number = u32::try_from(used)
                .map_err(|_| StoreError::Corrupt(format!("standing grant uses {used}")))?;
            let (evidence_json, events) = records(use_number)?;
            insert_approval(tx, &approval, Some(&evidence_json))?;
            tx.execute(
                "INSERT INTO standing_uses (approval_id, grant_id, use_number) \
                 VALUES ($1, $2, $3)",
                &[&approval.id, &grant_id, &used],
            )?;
            append(tx, sealer, &events)?;
            Ok(Some(use_number))
        })
    }

    fn revoke_standing_grant(
        &self,
        id: &str,
        principal: &str,
        now: i64,
        event: &AuditEvent,
    ) -> Result<bool, StoreError> {
        let (id, principal, event) = (id.to_owned(), principal.to_owned(), event.clone());
        self.tx(move |tx, sealer| {
            let changed = tx.execute(
                "UPDATE standing_grants SET revoked_at = $2, revoked_by = $3 \
                 WHERE id = $1 AND revoked_at IS NULL",
                &[&id, &now, &principal],
            )?;
            if changed == 1 {
                append(tx, sealer, std::slice::from_ref(&event))?;
            }
            Ok(changed == 1)
        })
    }

    fn open_approvals(&self, now: i64, limit: usize) -> Result<Vec<ApprovalRecord>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.one(move |tx| {
            tx.query(
                "SELECT id, created_at, expires_at, agent_id, tool_name, profile, fields_json, \
                 severity, op_hash_approved, op_hash_denied, status, reason_code, evidence_json, \
                 decided_at, grant_expires_at, grant_collected_at, gateway, preauth_slug, \
                 preauth_digest, preauth_use, revises FROM approvals \
                 WHERE status = 'PENDING' AND expires_at > $1 \
                 ORDER BY created_at DESC, id DESC LIMIT $2",
                &[&now, &limit],
            )?
            .iter()
            .map(read_approval)
            .collect()
        })
    }
}
