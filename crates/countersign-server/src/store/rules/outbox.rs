//! [`OutboxStore`] on [`SqlStore`]: the outbox's rules, once for both databases.

use super::super::outbox::{
    Delivery, DeliveryAttempt, DeliveryRow, ExtendOutcome, NewDelivery, OutboxStore,
};
use super::*;

const INSERT_DELIVERY: Sql = Sql::same(
    "INSERT INTO notify_outbox (approval_id, step, channel, due_at) VALUES (?1, ?2, ?3, ?4) \
     ON CONFLICT (approval_id, step, channel) DO NOTHING",
);
/// Due rows whose approval no longer waits for anyone.
const MOOT: Sql = Sql::same(
    "UPDATE notify_outbox SET done_at = ?1, outcome = 'moot', lease_until = NULL \
     WHERE done_at IS NULL AND due_at <= ?1 AND NOT EXISTS (SELECT 1 FROM approvals a \
     WHERE a.id = notify_outbox.approval_id AND a.status = 'PENDING' AND a.expires_at > ?1)",
);
/// The claim: one statement, so the lease is taken atomically; PostgreSQL skips rows another
/// replica is claiming right now instead of waiting for them.
const CLAIM: Sql = Sql::each(
    "UPDATE notify_outbox SET lease_until = ?2 WHERE (approval_id, step, channel) IN \
     (SELECT approval_id, step, channel FROM notify_outbox WHERE channel = ?3 \
     AND done_at IS NULL AND due_at <= ?1 AND (lease_until IS NULL OR lease_until <= ?1) \
     ORDER BY due_at LIMIT ?4) RETURNING approval_id, step, channel, due_at, attempts",
    "UPDATE notify_outbox SET lease_until = ?2 WHERE (approval_id, step, channel) IN \
     (SELECT approval_id, step, channel FROM notify_outbox WHERE channel = ?3 \
     AND done_at IS NULL AND due_at <= ?1 AND (lease_until IS NULL OR lease_until <= ?1) \
     ORDER BY due_at LIMIT ?4 FOR UPDATE SKIP LOCKED) \
     RETURNING approval_id, step, channel, due_at, attempts",
);
const RECORD: Sql = Sql::same(
    "UPDATE notify_outbox SET attempts = ?4, lease_until = ?5, done_at = ?6, outcome = ?7 \
     WHERE approval_id = ?1 AND step = ?2 AND channel = ?3",
);
const OF_APPROVAL: Sql = Sql::same(
    "SELECT step, channel, attempts, outcome FROM notify_outbox WHERE approval_id = ?1 \
     ORDER BY step, channel",
);
const EXTEND: Sql = Sql::same(
    "UPDATE approvals SET expires_at = ?2 WHERE id = ?1 AND status = 'PENDING' \
     AND expires_at > ?3 AND expires_at < ?2",
);

fn insert(tx: &mut dyn Tx, rows: &[NewDelivery]) -> Result<(), StoreError> {
    for d in rows {
        tx.execute(
            &INSERT_DELIVERY,
            params![&d.approval_id, &d.step, &d.channel, d.due_at],
        )?;
    }
    Ok(())
}

fn claim(
    tx: &mut dyn Tx,
    rooms: &[(String, usize)],
    now: i64,
    lease_until: i64,
) -> Result<Vec<Delivery>, StoreError> {
    tx.execute(&MOOT, params![now])?;
    let mut claimed = Vec::new();
    for (channel, room) in rooms {
        let rows = tx.query(&CLAIM, params![now, lease_until, channel, limit(*room)])?;
        for mut r in rows {
            claimed.push((
                r.text(0)?,
                r.text(1)?,
                r.text(2)?,
                r.int(3)?,
                r.u32(4, "notify_outbox attempts")?,
            ));
        }
    }
    let mut out = Vec::with_capacity(claimed.len());
    for (approval_id, step, channel, due_at, attempts) in claimed {
        // The row's approval exists (a foreign key) and was PENDING when MOOT ran in this
        // transaction; the notice's facts come from it.
        let Some(a) = approval(tx, &approval_id, false)? else {
            continue;
        };
        out.push(Delivery {
            approval_id,
            step,
            channel,
            due_at,
            attempts,
            tool_name: a.tool_name,
            severity: a.severity,
            created_at: a.created_at,
            expires_at: a.expires_at,
        });
    }
    out.sort_by_key(|d| d.due_at);
    Ok(out)
}

impl OutboxStore for SqlStore {
    fn create_notified(
        &self,
        approval: &NewApproval,
        events: &[AuditEvent],
        deliveries: &[NewDelivery],
    ) -> Result<(), StoreError> {
        let (a, events, rows) = (approval.clone(), events.to_vec(), deliveries.to_vec());
        self.write(move |tx, sealer| {
            insert_approval(tx, &a, None, None)?;
            insert(tx, &rows)?;
            append(tx, sealer, &events)
        })
    }

    fn enqueue(&self, deliveries: &[NewDelivery]) -> Result<(), StoreError> {
        if deliveries.is_empty() {
            return Ok(());
        }
        let rows = deliveries.to_vec();
        self.write(move |tx, _| insert(tx, &rows))
    }

    fn claim_deliveries(
        &self,
        rooms: &[(String, usize)],
        now: i64,
        lease_until: i64,
    ) -> Result<Vec<Delivery>, StoreError> {
        let rooms = rooms.to_vec();
        self.write(move |tx, _| claim(tx, &rooms, now, lease_until))
    }

    fn record_attempts(
        &self,
        attempts: &[(DeliveryAttempt, Option<AuditEvent>)],
    ) -> Result<(), StoreError> {
        let attempts = attempts.to_vec();
        self.write(move |tx, sealer| {
            let mut events = Vec::new();
            for (a, event) in &attempts {
                let done_at = a.done.as_ref().map(|_| a.now);
                let lease = a.done.is_none().then_some(a.lease_until);
                tx.execute(
                    &RECORD,
                    params![
                        &a.approval_id,
                        &a.step,
                        &a.channel,
                        i64::from(a.attempt),
                        lease,
                        done_at,
                        a.done.as_deref(),
                    ],
                )?;
                events.extend(event.iter().cloned());
            }
            append(tx, sealer, &events)
        })
    }

    fn deliveries_of(&self, approval_id: &str) -> Result<Vec<DeliveryRow>, StoreError> {
        let id = approval_id.to_owned();
        self.one(move |tx| {
            tx.query(&OF_APPROVAL, params![&id])?
                .into_iter()
                .map(|mut r| {
                    Ok(DeliveryRow {
                        step: r.text(0)?,
                        channel: r.text(1)?,
                        attempts: r.u32(2, "notify_outbox attempts")?,
                        outcome: r.opt_text(3)?,
                    })
                })
                .collect()
        })
    }

    fn extend_approval(
        &self,
        approval_id: &str,
        expires_at: i64,
        now: i64,
        event: &AuditEvent,
    ) -> Result<ExtendOutcome, StoreError> {
        let (id, event) = (approval_id.to_owned(), event.clone());
        self.write(move |tx, sealer| {
            let Some(current) = approval(tx, &id, true)? else {
                return Ok(ExtendOutcome::NotFound);
            };
            if current.status != ApprovalStatus::Pending || current.expires_at <= now {
                return Ok(ExtendOutcome::NotPending);
            }
            if expires_at <= current.expires_at {
                return Ok(ExtendOutcome::NotLater {
                    expires_at: current.expires_at,
                });
            }
            if tx.execute(&EXTEND, params![&id, expires_at, now])? != 1 {
                return Err(StoreError::Database(
                    "extension compare-and-set lost under the row lock".into(),
                ));
            }
            append(tx, sealer, std::slice::from_ref(&event))?;
            Ok(ExtendOutcome::Extended { expires_at })
        })
    }
}
