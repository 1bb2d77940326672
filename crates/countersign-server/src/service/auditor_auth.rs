//! Which auditor a bearer token belongs to.
//!
//! Held and reloaded exactly as the gateways are (`gateway_auth`): a map from token hash to name,
//! replaced when the store's credentials version moves, so `countersign auditor add` and
//! `auditor revoke` reach every running replica within about half a second. The map is separate
//! from the gateways' map, so a token is an auditor's only if it was added as one.

use super::AppState;
use crate::auditors::AuditorError;
use crate::error::ApiError;
use crate::store::{AuditorRecord, RevokeOutcome, StoreError};
use std::collections::HashMap;
use std::sync::Arc;

/// Live auditor credentials.
#[derive(Debug, Default)]
pub(crate) struct Auditors {
    by_hash: HashMap<[u8; 32], Arc<str>>,
}

impl Auditors {
    /// The unrevoked auditors of `records`.
    pub(crate) fn from_records(records: Vec<AuditorRecord>) -> Self {
        Self {
            by_hash: records
                .into_iter()
                .filter(|a| a.revoked_at.is_none())
                .map(|a| (a.token_hash, Arc::from(a.name)))
                .collect(),
        }
    }
}

impl AppState {
    /// The name of the live auditor whose token this is.
    pub fn auditor_of_token(&self, token: &str) -> Option<Arc<str>> {
        let hash = crate::gateways::token_hash(token);
        self.inner
            .auditors
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .by_hash
            .get(&hash)
            .cloned()
    }

    /// Replace the live auditors with the unrevoked ones of `records`.
    pub(crate) fn set_auditors(&self, records: Vec<AuditorRecord>) {
        *self
            .inner
            .auditors
            .write()
            .unwrap_or_else(|p| p.into_inner()) = Arc::new(Auditors::from_records(records));
    }

    async fn reload_auditors(&self) -> Result<(), ApiError> {
        let records = self.blocking(|s| s.auditors()).await?;
        self.set_auditors(records);
        Ok(())
    }

    /// Add an auditor from inside the process (what `countersign auditor add` does from another
    /// one): its bearer token, usable at once.
    pub async fn add_auditor(&self, name: &str) -> Result<String, AuditorError> {
        let now = self.now_ms();
        let store = self.store().clone();
        let key = name.to_owned();
        let token =
            tokio::task::spawn_blocking(move || crate::auditors::add(store.as_ref(), &key, now))
                .await
                .map_err(|e| AuditorError::Store(StoreError::Database(e.to_string())))??;
        self.reload_auditors()
            .await
            .map_err(|e| AuditorError::Store(StoreError::Database(e.message)))?;
        Ok(token)
    }

    /// Revoke an auditor from inside the process; its token stops working at once here.
    pub async fn revoke_auditor(&self, name: &str) -> Result<RevokeOutcome, ApiError> {
        let now = self.now_ms();
        let key = name.to_owned();
        let outcome = self
            .blocking(move |s| crate::auditors::revoke(s, &key, now))
            .await?;
        self.reload_auditors().await?;
        Ok(outcome)
    }
}
