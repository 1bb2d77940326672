//! Operator preauthorizations on the create path, and their administration.
//!
//! A call a configured preauthorization covers is APPROVED without a human. Coverage is decided
//! by the core's [`countersign::Scope::covers`] on the admitted arguments (what op_hash covers);
//! the use is then consumed by the store in the same transaction as the approval row and its
//! lines, by a guarded update that re-checks the row by the database's clock. When every
//! covering preauthorization is exhausted, disabled or expired, the call takes the ordinary path
//! (a human decides): a preauthorization can only add approvals a human did not give, never
//! refuse one.

use super::AppState;
use crate::audit::{AuditEvent, authority};
use crate::clock::{from_ms, rfc3339};
use crate::error::ApiError;
use crate::preauth::Preauthorization;
use crate::store::{ApprovalRecord, DisableOutcome, NewApproval};
use countersign::{ApprovalStatus, b64};
use serde_json::{Value, json};

/// What the service knows about a preauthorized create before the store consumes the use.
pub(crate) struct PreauthCandidate<'a> {
    pub(crate) approval: &'a NewApproval,
    /// The `request` line.
    pub(crate) request: &'a AuditEvent,
    /// The arguments the constraints read (`params` of a tool call, the fields of a typed
    /// profile), in their admitted form.
    pub(crate) args: &'a Value,
    /// When an APPROVED grant stops being collectable.
    pub(crate) grant_expires_at: i64,
}

/// The `preauthorization` member of an outcome line and of a result's `authority`.
fn named(p: &Preauthorization, digest: &[u8; 32]) -> Value {
    json!({ "slug": p.slug, "digest": b64::encode(digest) })
}

impl AppState {
    /// Disable a preauthorization by hand (what `countersign preauth disable` does).
    pub async fn disable_preauthorization(&self, slug: &str) -> Result<DisableOutcome, ApiError> {
        let (slug, now) = (slug.to_owned(), self.now_ms());
        self.committing(move |s| s.disable_preauthorization(&slug, now))
            .await
    }

    /// Approve the call under the first configured preauthorization that covers it and still
    /// has a use (config order), committing the approval and its lines; `None`, with nothing
    /// written, when none does.
    pub(crate) async fn approve_preauthorized(
        &self,
        c: PreauthCandidate<'_>,
    ) -> Result<Option<ApprovalRecord>, ApiError> {
        let at = from_ms(c.approval.created_at);
        let covering = self.config().preauthorizations.iter().filter(|p| {
            p.scope
                .covers(&c.approval.agent_id, &c.approval.tool_name, c.args, at)
                .inspect_err(|why| {
                    tracing::debug!(slug = %p.slug, rule = why.code(), "not covered: {why}");
                })
                .is_ok()
        });
        for p in covering {
            let digest = p.digest();
            let mut approval = c.approval.clone();
            approval.status = ApprovalStatus::Approved;
            approval.reason_code = None;
            approval.grant_expires_at = Some(c.grant_expires_at);
            let ts = rfc3339(at);
            let until = rfc3339(from_ms(c.grant_expires_at));
            let outcome = AuditEvent::outcome(&approval.id, &ts, "APPROVED", None)
                .with_member("preauthorization", named(p, &digest))
                .with_member(
                    "authority",
                    authority(
                        Some(&approval.op_hash_approved),
                        Some(&until),
                        "preauthorization",
                        Some(named(p, &digest)),
                    ),
                );
            let events = [c.request.clone(), outcome];
            let (stored, slug) = (approval.clone(), p.slug.clone());
            let taken = self
                .committing(move |s| s.create_preauthorized(&stored, &slug, &digest, &events))
                .await?;
            let Some(use_number) = taken else {
                // Exhausted, disabled, expired or changed by another replica: try the next.
                continue;
            };
            tracing::info!(slug = %p.slug, use_number, id = %approval.id, "preauthorized");
            let used = crate::store::PreauthUse {
                slug: p.slug.clone(),
                digest,
                use_number,
            };
            return Ok(Some(approval.into_record(Some(used))));
        }
        Ok(None)
    }
}

/// The `authority` of a result, from its stored record: what an APPROVED verdict grants.
pub(crate) fn authority_of(r: &ApprovalRecord) -> Option<Value> {
    if r.status != ApprovalStatus::Approved {
        return None;
    }
    let until = r.grant_expires_at.map(|t| rfc3339(from_ms(t)));
    let (by, preauth) = match (&r.preauthorization, &r.evidence_json) {
        (Some(p), _) => (
            "preauthorization",
            Some(json!({
                "slug": p.slug,
                "digest": b64::encode(&p.digest),
                "use": p.use_number,
            })),
        ),
        (None, Some(_)) => ("decision", None),
        (None, None) => ("tool_rule", None),
    };
    Some(authority(
        Some(&r.op_hash_approved),
        until.as_deref(),
        by,
        preauth,
    ))
}
