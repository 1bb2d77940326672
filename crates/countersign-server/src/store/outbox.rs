//! The notification outbox: one row per (approval, step, channel), written with the approval
//! (or just after it) and worked off by the service's notifier (`service/outbox.rs`).
//!
//! A row is *due* from `due_at`; a worker *claims* due rows by setting a lease (`lease_until`)
//! in one statement — on PostgreSQL over `FOR UPDATE SKIP LOCKED`, so two replicas never claim
//! the same row — and records each attempt (its audit line in the same transaction) until the
//! row is *done*. A lease that runs out (the worker's process stopped mid-delivery) makes the
//! row claimable again, so a row due when a process stops is delivered after it restarts. Rows
//! of an approval that is no longer PENDING, or whose window has closed, are closed as `moot`
//! instead of being claimed: a late "please decide" is noise.

use super::{NewApproval, StoreError};
use crate::audit::AuditEvent;

/// A row to insert (nothing happens if the row exists: each step is written once).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewDelivery {
    pub approval_id: String,
    /// `new`, `reminder-N`, `escalation-N` (see `notify::Step`).
    pub step: String,
    /// The channel's configured name.
    pub channel: String,
    pub due_at: i64,
}

/// A claimed row, with what the notice needs from its approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub approval_id: String,
    pub step: String,
    pub channel: String,
    pub due_at: i64,
    /// Attempts already made (by this or an earlier lease).
    pub attempts: u32,
    pub tool_name: String,
    pub severity: String,
    pub created_at: i64,
    pub expires_at: i64,
}

/// One attempt's result to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryAttempt {
    pub approval_id: String,
    pub step: String,
    pub channel: String,
    /// This attempt's number, from 1.
    pub attempt: u32,
    pub now: i64,
    /// `Some(outcome)`: the row is done (delivered, or given up); `None`: more attempts follow
    /// under a lease renewed to `lease_until`.
    pub done: Option<String>,
    pub lease_until: i64,
}

/// One row as it stands (for operators and tests).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryRow {
    pub step: String,
    pub channel: String,
    pub attempts: u32,
    /// `None` while the row is open; then `delivered`, `moot`, or the last failed attempt's
    /// outcome.
    pub outcome: Option<String>,
}

/// What extending an approval's window did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExtendOutcome {
    /// The window now ends at `expires_at`.
    Extended {
        expires_at: i64,
    },
    NotFound,
    /// Not PENDING, or its window already closed: nothing changed.
    NotPending,
    /// The asked end is not later than the current one: nothing changed.
    NotLater {
        expires_at: i64,
    },
}

/// The outbox (see the module documentation). Every method is one transaction.
pub trait OutboxStore {
    /// Insert a request with its audit lines and its first outbox rows, together.
    fn create_notified(
        &self,
        approval: &NewApproval,
        events: &[AuditEvent],
        deliveries: &[NewDelivery],
    ) -> Result<(), StoreError>;

    /// Insert outbox rows (existing ones are left as they are).
    fn enqueue(&self, deliveries: &[NewDelivery]) -> Result<(), StoreError>;

    /// Close the due rows of approvals that are no longer PENDING or have expired, then, for
    /// each `(channel, room)`, lease up to `room` due, unleased (or lease-expired) rows of that
    /// channel until `lease_until`, oldest due first: one transaction for all channels.
    fn claim_deliveries(
        &self,
        rooms: &[(String, usize)],
        now: i64,
        lease_until: i64,
    ) -> Result<Vec<Delivery>, StoreError>;

    /// Record attempts, each with its audit line (`None`: the row is closed without an
    /// attempt, its approval no longer waiting), in one transaction.
    fn record_attempts(
        &self,
        attempts: &[(DeliveryAttempt, Option<AuditEvent>)],
    ) -> Result<(), StoreError>;

    /// Every row of an approval, by step and channel.
    fn deliveries_of(&self, approval_id: &str) -> Result<Vec<DeliveryRow>, StoreError>;

    /// Move a PENDING, unexpired approval's expiry to `expires_at` (only later), with `event`.
    fn extend_approval(
        &self,
        approval_id: &str,
        expires_at: i64,
        now: i64,
        event: &AuditEvent,
    ) -> Result<ExtendOutcome, StoreError>;
}
