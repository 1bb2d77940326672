//! [`StandingStore`] on SQLite: every method one `IMMEDIATE` transaction, like the rest.

use super::{ApprovalRow, SqliteStore, db, exec, finish_approval, read_approval};
use crate::audit::AuditEvent;
use crate::store::standing::{NewStandingGrant, StandingGrantRecord, StandingStore, UseRecords};
use crate::store::{ApprovalRecord, NewApproval, StoreError};
use countersign::ReasonCode;
use rusqlite::{Connection, OptionalExtension as _, Row, params};

/// Created with the rest of the schema (`CREATE … IF NOT EXISTS`).
pub(super) const SCHEMA: &str = "
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
";

// CROSS JOIN: SQLite then keeps this join order (grants first, each approval by its key).
// Without statistics it scanned every approval for the few standing grants, on every create;
// the soak (docs/RELIABILITY.md) found throughput falling with the table's size.
const SELECT_GRANTS: &str = "SELECT a.id, a.created_at, a.expires_at, a.agent_id, a.tool_name, \
    a.profile, a.fields_json, a.severity, a.op_hash_approved, a.op_hash_denied, a.status, \
    a.reason_code, a.evidence_json, a.decided_at, a.grant_expires_at, a.grant_collected_at, \
    a.gateway, a.preauth_slug, a.preauth_digest, a.preauth_use, a.revises, \
    g.expires_at, g.max_uses, g.uses, g.revoked_at, g.revoked_by \
    FROM standing_grants g CROSS JOIN approvals a ON a.id = g.id";

fn read_grant(r: &Row<'_>) -> rusqlite::Result<(ApprovalRow, GrantColumns)> {
    Ok((
        read_approval(r)?,
        (r.get(21)?, r.get(22)?, r.get(23)?, r.get(24)?, r.get(25)?),
    ))
}

type GrantColumns = (i64, i64, i64, Option<i64>, Option<String>);

fn finish_grant(
    (row, (expires_at, max_uses, uses, revoked_at, revoked_by)): (ApprovalRow, GrantColumns),
) -> Result<StandingGrantRecord, StoreError> {
    let count = |v: i64, what: &str| {
        u32::try_from(v).map_err(|_| StoreError::Corrupt(format!("standing grant {what} {v}")))
    };
    Ok(StandingGrantRecord {
        proposal: finish_approval(row)?,
        expires_at,
        max_uses: count(max_uses, "max_uses")?,
        uses: count(uses, "uses")?,
        revoked_at,
        revoked_by,
    })
}

fn insert_approval(
    tx: &Connection,
    a: &NewApproval,
    evidence_json: Option<&str>,
) -> Result<(), StoreError> {
    let decided = (a.status != countersign::ApprovalStatus::Pending).then_some(a.created_at);
    let inserted = exec(
        tx,
        "INSERT INTO approvals (id, created_at, expires_at, agent_id, tool_name, profile, \
         fields_json, severity, op_hash_approved, op_hash_denied, status, reason_code, \
         decided_at, grant_expires_at, gateway, evidence_json) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
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
            evidence_json,
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

impl StandingStore for SqliteStore {
    fn create_standing_proposal(
        &self,
        approval: &NewApproval,
        grant: &NewStandingGrant,
        events: &[AuditEvent],
    ) -> Result<(), StoreError> {
        self.with_tx(|tx| {
            insert_approval(tx, approval, None)?;
            exec(
                tx,
                "INSERT INTO standing_grants (id, expires_at, max_uses) VALUES (?1, ?2, ?3)",
                params![grant.id, grant.expires_at, i64::from(grant.max_uses)],
            )
            .map_err(db)?;
            self.append(tx, events)
        })
    }

    fn standing_grant(&self, id: &str) -> Result<Option<StandingGrantRecord>, StoreError> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let sql = format!("{SELECT_GRANTS} WHERE g.id = ?1");
        conn.prepare_cached(&sql)
            .and_then(|mut st| st.query_row([id], read_grant).optional())
            .map_err(db)?
            .map(finish_grant)
            .transpose()
    }

    fn live_standing_grants(
        &self,
        now: i64,
        limit: usize,
    ) -> Result<Vec<StandingGrantRecord>, StoreError> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let sql = format!(
            "{SELECT_GRANTS} WHERE a.status = 'APPROVED' AND g.revoked_at IS NULL \
             AND g.expires_at > ?1 AND g.uses < g.max_uses ORDER BY a.created_at, a.id LIMIT ?2"
        );
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut st = conn.prepare_cached(&sql).map_err(db)?;
        let rows = st
            .query_map(params![now, limit], read_grant)
            .map_err(db)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(db)?;
        rows.into_iter().map(finish_grant).collect()
    }

    fn use_standing_grant(
        &self,
        approval: &NewApproval,
        grant_id: &str,
        now: i64,
        records: UseRecords,
    ) -> Result<Option<u32>, StoreError> {
        self.with_tx(|tx| {
            // The guard is the whole rule: signed, unrevoked, unexpired, a use left.
            let used: Option<i64> = tx
                .prepare_cached(
                    "UPDATE standing_grants SET uses = uses + 1 \
                     WHERE id = ?1 AND revoked_at IS NULL AND expires_at > ?2 \
                     AND uses < max_uses \
                     AND EXISTS (SELECT 1 FROM approvals a \
                                 WHERE a.id = standing_grants.id AND a.status = 'APPROVED') \
                     RETURNING uses",
                )
                .and_then(|mut st| {
                    st.query_row(params![grant_id, now], |r| r.get(0))
                        .optional()
                })
                .map_err(db)?;
            let Some(used) = used else {
                return Ok(None);
            };
            let use_number = u32::try_from(used)
                .map_err(|_| StoreError::Corrupt(format!("standing grant uses {used}")))?;
            let (evidence_json, events) = records(use_number)?;
            insert_approval(tx, approval, Some(&evidence_json))?;
            exec(
                tx,
                "INSERT INTO standing_uses (approval_id, grant_id, use_number) VALUES (?1, ?2, ?3)",
                params![approval.id, grant_id, used],
            )
            .map_err(db)?;
            self.append(tx, &events)?;
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
        self.with_tx(|tx| {
            let changed = exec(
                tx,
                "UPDATE standing_grants SET revoked_at = ?2, revoked_by = ?3 \
                 WHERE id = ?1 AND revoked_at IS NULL",
                params![id, now, principal],
            )
            .map_err(db)?;
            if changed == 1 {
                self.append(tx, std::slice::from_ref(event))?;
            }
            Ok(changed == 1)
        })
    }

    fn open_approvals(&self, now: i64, limit: usize) -> Result<Vec<ApprovalRecord>, StoreError> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut st = conn
            .prepare_cached(
                "SELECT id, created_at, expires_at, agent_id, tool_name, profile, fields_json, \
                 severity, op_hash_approved, op_hash_denied, status, reason_code, evidence_json, \
                 decided_at, grant_expires_at, grant_collected_at, gateway, preauth_slug, \
                 preauth_digest, preauth_use, revises FROM approvals \
                 WHERE status = 'PENDING' AND expires_at > ?1 \
                 ORDER BY created_at DESC, id DESC LIMIT ?2",
            )
            .map_err(db)?;
        let rows = st
            .query_map(params![now, limit], read_approval)
            .map_err(db)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(db)?;
        rows.into_iter().map(finish_approval).collect()
    }
}
