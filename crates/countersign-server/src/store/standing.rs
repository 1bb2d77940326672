//! Approver-signed standing grants in the store.
//!
//! A proposal is an ordinary approval row under the `countersign.standing-grant/2` profile, so it
//! is reviewed, signed or refused, expired and withdrawn exactly like any approval. The
//! `standing_grants` table adds what a signed grant needs over time: its expiry and use budget
//! (copied from the signed fields at proposal time), how many uses it has given, and its
//! revocation. `standing_uses` records which approval each use created, one row per use number.
//!
//! Which grant covers a call is decided by the service with the core's scope rules; the store
//! only consumes a use, atomically with the approval row and its audit lines, and only while the
//! grant is signed, unrevoked, unexpired, has a use left and names the call's gateway (a guarded
//! `UPDATE … RETURNING`). `standing_grant_gateways` holds the gateways each grant's signed
//! fields name, so that a gateway's candidates are only the grants it may spend.

use super::{ApprovalRecord, NewApproval, StoreError};
use crate::audit::AuditEvent;
use countersign::ApprovalStatus;
use std::sync::Arc;

/// What a proposal adds to its approval row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewStandingGrant {
    /// The proposal's approval id.
    pub id: String,
    /// The grant's `expires_at` (ms), from its fields.
    pub expires_at: i64,
    /// The grant's `max_uses`, from its fields.
    pub max_uses: u32,
    /// The gateways the grant names (`calls.gateways`), from its fields.
    pub gateways: Vec<String>,
}

/// A standing grant as stored, with its proposal's row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StandingGrantRecord {
    pub proposal: ApprovalRecord,
    pub expires_at: i64,
    pub max_uses: u32,
    /// Uses given so far.
    pub uses: u32,
    pub revoked_at: Option<i64>,
    /// Who revoked it (the signer's principal).
    pub revoked_by: Option<String>,
}

impl StandingGrantRecord {
    /// Signed (APPROVED), unrevoked, unexpired at `now`, with a use left.
    pub fn is_live(&self, now: i64) -> bool {
        self.proposal.status == ApprovalStatus::Approved
            && self.revoked_at.is_none()
            && now < self.expires_at
            && self.uses < self.max_uses
    }
}

/// Builds, once the use number is known inside the transaction, the stored evidence of the new
/// approval (`evidence_json`) and its audit lines.
pub type UseRecords =
    Arc<dyn Fn(u32) -> Result<(String, Vec<AuditEvent>), StoreError> + Send + Sync>;

/// Standing grants (see the module documentation). Every method is one transaction.
pub trait StandingStore {
    /// Insert a proposal: its approval row (PENDING), its `standing_grants` row, a
    /// `standing_grant_gateways` row per gateway it names and its audit lines, together.
    fn create_standing_proposal(
        &self,
        approval: &NewApproval,
        grant: &NewStandingGrant,
        events: &[AuditEvent],
    ) -> Result<(), StoreError>;

    /// One grant by its proposal id.
    fn standing_grant(&self, id: &str) -> Result<Option<StandingGrantRecord>, StoreError>;

    /// Every grant live at `now` (signed, unrevoked, unexpired, with a use left), oldest first,
    /// at most `limit`.
    fn live_standing_grants(
        &self,
        now: i64,
        limit: usize,
    ) -> Result<Vec<StandingGrantRecord>, StoreError>;

    /// Every grant live at `now` that names `gateway`, oldest first, at most `limit`: the
    /// candidates for a call of that gateway.
    fn live_standing_grants_of(
        &self,
        gateway: &str,
        now: i64,
        limit: usize,
    ) -> Result<Vec<StandingGrantRecord>, StoreError>;

    /// Consume one use of grant `grant_id` and insert `approval` (APPROVED) with the evidence and
    /// audit lines `records` builds for the use number, all in one transaction. The use is taken
    /// only while the grant is signed, unrevoked, unexpired at `now`, has a use left and names
    /// `approval.gateway`; returns the use number (from 1), or `None` with nothing changed.
    fn use_standing_grant(
        &self,
        approval: &NewApproval,
        grant_id: &str,
        now: i64,
        records: UseRecords,
    ) -> Result<Option<u32>, StoreError>;

    /// Revoke a grant by its signer: `revoked_at`/`revoked_by` set and `event` appended, only if
    /// it was not revoked already. Returns whether it was revoked now.
    fn revoke_standing_grant(
        &self,
        id: &str,
        principal: &str,
        now: i64,
        event: &AuditEvent,
    ) -> Result<bool, StoreError>;

    /// PENDING approvals whose window is open at `now`, newest first, at most `limit` (the
    /// approver inbox filters them by eligibility).
    fn open_approvals(&self, now: i64, limit: usize) -> Result<Vec<ApprovalRecord>, StoreError>;
}
