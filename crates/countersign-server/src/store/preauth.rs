//! Preauthorization rows: the rules both stores apply, written once.
//!
//! A row is config-owned: `in_config` says whether the current config defines it, and
//! `disabled_at` records an operator's manual disable (`countersign preauth disable`), which a
//! restart never clears. A row may approve a call only when it is in the config, not disabled,
//! unexpired by the database's clock, under its `max_uses`, and its digest is the one the service
//! matched the call against. That condition is, checked by the guarded consume and the
//! recheck before a grant (the SQL spells it in both dialects with the database's own clock).

use crate::audit::AuditEvent;
use crate::preauth::Preauthorization;

/// A preauthorization as the config defines it, ready to store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreauthDefinition {
    pub slug: String,
    /// `{"slug": …, "scope": …}` as JSON text.
    pub definition_json: String,
    pub digest: [u8; 32],
    /// Milliseconds since the epoch.
    pub expires_at: i64,
    pub max_uses: i64,
}

impl PreauthDefinition {
    /// The storable form of a loaded preauthorization.
    pub fn of(p: &Preauthorization) -> Self {
        let at = p.scope.expires_at.instant();
        Self {
            slug: p.slug.clone(),
            definition_json: p.definition().to_string(),
            digest: p.digest(),
            expires_at: crate::clock::to_ms(at),
            max_uses: i64::try_from(p.scope.max_uses.get()).unwrap_or(i64::MAX),
        }
    }
}

/// A stored preauthorization.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredPreauth {
    pub slug: String,
    pub definition_json: String,
    pub digest: [u8; 32],
    pub expires_at: i64,
    pub max_uses: i64,
    /// Uses consumed so far (kept across restarts and definition changes).
    pub uses: i64,
    /// Whether the current config defines it.
    pub in_config: bool,
    /// When an operator disabled it by hand, if they did.
    pub disabled_at: Option<i64>,
}

/// The preauthorization an at-once APPROVED call was approved under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreauthUse {
    pub slug: String,
    pub digest: [u8; 32],
    /// 1-based.
    pub use_number: i64,
}

/// One change startup reconciliation makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PreauthChange {
    /// A slug the database does not know: inserted with no uses.
    Insert(PreauthDefinition),
    /// A known slug whose definition changed (or that returns to the config): its definition
    /// replaced, its uses and manual disable kept.
    Replace(PreauthDefinition),
    /// A config-owned slug the config no longer defines: disabled (`in_config` false).
    Remove(String),
}

impl PreauthChange {
    /// The audit line recording the change.
    pub fn event(&self, ts: &str) -> AuditEvent {
        match self {
            Self::Insert(d) => AuditEvent::preauthorization(ts, "added", &d.slug, Some(d.into())),
            Self::Replace(d) => {
                AuditEvent::preauthorization(ts, "changed", &d.slug, Some(d.into()))
            }
            Self::Remove(slug) => AuditEvent::preauthorization(ts, "removed", slug, None),
        }
    }
}

/// What reconciling `incoming` (the whole config-owned set) against `stored` must change.
/// Unchanged slugs produce nothing, so a restart with the same config writes no line.
pub fn plan_reconcile(
    stored: &[StoredPreauth],
    incoming: &[PreauthDefinition],
) -> Vec<PreauthChange> {
    let mut changes = Vec::new();
    for def in incoming {
        match stored.iter().find(|s| s.slug == def.slug) {
            None => changes.push(PreauthChange::Insert(def.clone())),
            Some(s) if !s.in_config || s.digest != def.digest => {
                changes.push(PreauthChange::Replace(def.clone()));
            }
            Some(_) => {}
        }
    }
    for s in stored {
        if s.in_config && !incoming.iter().any(|d| d.slug == s.slug) {
            changes.push(PreauthChange::Remove(s.slug.clone()));
        }
    }
    changes
}

/// What disabling a preauthorization did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DisableOutcome {
    Disabled,
    NotFound,
    AlreadyDisabled,
}

/// The lines of a preauthorized create with the use number stamped into the `outcome` line's
/// `preauthorization` member (the use is known only inside the consuming transaction).
pub(crate) fn stamp_use(events: &[AuditEvent], use_number: i64) -> Vec<AuditEvent> {
    events
        .iter()
        .map(|e| {
            let Some(serde_json::Value::Object(p)) = e.body().get("preauthorization") else {
                return e.clone();
            };
            if e.kind() != "outcome" {
                return e.clone();
            }
            let mut p = p.clone();
            p.insert("use".into(), serde_json::Value::from(use_number));
            e.clone()
                .with_member("preauthorization", serde_json::Value::Object(p))
        })
        .collect()
}
