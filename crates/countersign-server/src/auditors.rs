//! Auditor credentials: who may read the whole audit log.
//!
//! The audit log records what agents asked for (tool arguments, such as an account number), who
//! approved it, which gateway asked and every enrolled credential. Proofs over it are public and
//! carry hashes only; a line's text goes to the gateway whose approval it records, and the whole
//! log, every line of every gateway, goes only to an auditor. An operator adds an auditor by name
//! (`countersign auditor add NAME`) and hands the printed bearer token to it; the service keeps
//! only the token's SHA-256, as for gateways, in a table of its own: an auditor token is never a
//! gateway token, and a gateway token is never an auditor token.

use crate::gateways::{check_name as check_gateway_name, mint_token, token_hash};
use crate::store::{AuditorRecord, RevokeOutcome, Store, StoreError};

/// Every auditor token starts with this (a gateway token with `csg_`), so a leaked one is
/// recognizable and never mistaken for a gateway's by a person reading it.
pub const TOKEN_PREFIX: &str = "csa_";

/// Why an auditor could not be added.
#[derive(Debug, thiserror::Error)]
pub enum AuditorError {
    #[error(
        "an auditor name is 1 to {max} characters of A-Z a-z 0-9 . _ - (got {0:?})",
        max = crate::gateways::MAX_NAME_BYTES
    )]
    BadName(String),
    #[error("an auditor named {0:?} exists already (names are never reused, even once revoked)")]
    NameTaken(String),
    #[error("the system random generator failed: {0}")]
    Random(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Check an auditor name: the same plain alphabet as a gateway name.
pub fn check_name(name: &str) -> Result<(), AuditorError> {
    check_gateway_name(name).map_err(|_| AuditorError::BadName(name.to_owned()))
}

/// Add an auditor named `name` at `now` (ms since the epoch): returns its bearer token, which is
/// shown this once and never stored.
pub fn add(store: &dyn Store, name: &str, now: i64) -> Result<String, AuditorError> {
    check_name(name)?;
    let token = mint_token(TOKEN_PREFIX).map_err(AuditorError::Random)?;
    let record = AuditorRecord {
        name: name.to_owned(),
        token_hash: token_hash(&token),
        created_at: now,
        revoked_at: None,
    };
    if !store.put_auditor(&record)? {
        return Err(AuditorError::NameTaken(name.to_owned()));
    }
    Ok(token)
}

/// Revoke the auditor `name`: its token stops authenticating (a running service notices within
/// about half a second, like a gateway revocation).
pub fn revoke(store: &dyn Store, name: &str, now: i64) -> Result<RevokeOutcome, StoreError> {
    store.revoke_auditor(name, now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_auditor_token_is_prefixed_random_and_only_its_hash_is_stored() {
        let store =
            crate::store::SqliteStore::in_memory(crate::audit::AuditSealer::from_seed([1; 32]))
                .unwrap();
        let a = add(&store, "compliance", 1).unwrap();
        let b = add(&store, "external", 2).unwrap();
        assert!(a.starts_with(TOKEN_PREFIX) && a.len() == TOKEN_PREFIX.len() + 43);
        assert_ne!(a, b);
        let stored = store.auditors().unwrap();
        assert_eq!(stored.len(), 2);
        assert_eq!(stored[0].token_hash, token_hash(&a));
        assert!(store.gateways().unwrap().is_empty(), "no gateway was added");
        assert!(matches!(
            add(&store, "compliance", 3),
            Err(AuditorError::NameTaken(n)) if n == "compliance"
        ));
        assert!(matches!(
            add(&store, "no way", 3),
            Err(AuditorError::BadName(_))
        ));
    }
}
