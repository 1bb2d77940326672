//! Which gateway a bearer token belongs to.
//!
//! The live gateways are held in memory, keyed by the SHA-256 of their token, and reloaded when
//! the store's credentials version moves (the sweeper checks it every 500 ms, as for credential
//! revocations), so `countersign gateway add` and `gateway revoke` reach a running service, and
//! every replica, without a restart. Looking a token up costs one SHA-256 and one hash-map probe
//! and no database round trip on the request path. The probe compares hashes, not tokens: what
//! its timing could reveal is how a guess's SHA-256 relates to a stored one, which does not help
//! find a token.

use super::AppState;
use crate::error::ApiError;
use crate::gateways::GatewayError;
use crate::store::{GatewayRecord, RevokeOutcome};
use std::collections::HashMap;
use std::sync::Arc;

/// Live gateway credentials.
#[derive(Debug, Default)]
pub(crate) struct Gateways {
    by_hash: HashMap<[u8; 32], Arc<str>>,
}

impl Gateways {
    /// The unrevoked gateways of `records`.
    pub(crate) fn from_records(records: Vec<GatewayRecord>) -> Self {
        Self {
            by_hash: records
                .into_iter()
                .filter(|g| g.revoked_at.is_none())
                .map(|g| (g.token_hash, Arc::from(g.name)))
                .collect(),
        }
    }
}

impl AppState {
    /// The name of the live gateway whose token this is.
    pub fn gateway_of_token(&self, token: &str) -> Option<Arc<str>> {
        let hash = crate::gateways::token_hash(token);
        self.inner
            .gateways
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .by_hash
            .get(&hash)
            .cloned()
    }

    /// Reload the gateways from the store.
    pub(crate) async fn reload_gateways(&self) -> Result<(), ApiError> {
        let records = self.blocking(|s| s.gateways()).await?;
        self.set_gateways(records);
        Ok(())
    }

    /// Replace the live gateways with the unrevoked ones of `records`.
    pub(crate) fn set_gateways(&self, records: Vec<GatewayRecord>) {
        *self
            .inner
            .gateways
            .write()
            .unwrap_or_else(|p| p.into_inner()) = Arc::new(Gateways::from_records(records));
    }

    /// Add a gateway from inside the process (what `countersign gateway add` does from another
    /// one): its bearer token, usable at once.
    pub async fn add_gateway(&self, name: &str) -> Result<String, GatewayError> {
        let now = self.now_ms();
        let store = self.store().clone();
        let key = name.to_owned();
        let token =
            tokio::task::spawn_blocking(move || crate::gateways::add(store.as_ref(), &key, now))
                .await
                .map_err(|e| {
                    GatewayError::Store(crate::store::StoreError::Database(e.to_string()))
                })??;
        self.reload_gateways()
            .await
            .map_err(|e| GatewayError::Store(crate::store::StoreError::Database(e.message)))?;
        Ok(token)
    }

    /// Revoke a gateway from inside the process; its token stops working at once here.
    pub async fn revoke_gateway(&self, name: &str) -> Result<RevokeOutcome, ApiError> {
        let now = self.now_ms();
        let key = name.to_owned();
        let outcome = self
            .blocking(move |s| crate::gateways::revoke(s, &key, now))
            .await?;
        self.reload_gateways().await?;
        Ok(outcome)
    }
}
