//! Gateway credentials: who may create, follow, withdraw and collect approvals.
//!
//! An operator adds a gateway by name (`countersign gateway add NAME`) and hands the printed
//! bearer token to that gateway; the service keeps only the token's SHA-256. Every gateway call
//! carries `Authorization: Bearer TOKEN`, and an approval belongs to the gateway that created it:
//! another gateway asking about it is told it does not exist. Without this, anyone holding an
//! approval id (the webhook hands it out) could read the result, take the single-use grant or
//! withdraw the request.

use crate::store::{GatewayRecord, RevokeOutcome, Store, StoreError};
use countersign::b64;
use sha2::{Digest as _, Sha256};

/// Every token starts with this, so a leaked one is recognizable (secret scanners, logs).
pub const TOKEN_PREFIX: &str = "csg_";

/// Longest gateway name, in bytes.
pub const MAX_NAME_BYTES: usize = 64;

/// The stored form of a token: SHA-256 of its text. A token carries 256 random bits, so a
/// plain hash is enough (no password stretching): the table leaks nothing usable.
pub fn token_hash(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// A fresh bearer token: `prefix` then 256 random bits in base64url (gateway and auditor tokens
/// alike; only the prefix tells a reader which kind it is, the service never relies on it).
pub(crate) fn mint_token(prefix: &str) -> Result<String, String> {
    let mut raw = [0u8; 32];
    getrandom::fill(&mut raw).map_err(|e| e.to_string())?;
    Ok(format!("{prefix}{}", b64::encode(&raw)))
}

/// Why a gateway could not be added.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    #[error("a gateway name is 1 to {MAX_NAME_BYTES} characters of A-Z a-z 0-9 . _ - (got {0:?})")]
    BadName(String),
    #[error("a gateway named {0:?} exists already (names are never reused, even once revoked)")]
    NameTaken(String),
    #[error("the system random generator failed: {0}")]
    Random(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Check a gateway name: it appears in audit lines and in `gateway list`, so it is kept to a
/// plain ASCII alphabet that cannot hide one name behind another.
pub fn check_name(name: &str) -> Result<(), GatewayError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME_BYTES
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(GatewayError::BadName(name.to_owned()))
    }
}

/// Add a gateway named `name` at `now` (ms since the epoch): returns its bearer token, which is
/// shown this once and never stored.
pub fn add(store: &dyn Store, name: &str, now: i64) -> Result<String, GatewayError> {
    check_name(name)?;
    let token = mint_token(TOKEN_PREFIX).map_err(GatewayError::Random)?;
    let record = GatewayRecord {
        name: name.to_owned(),
        token_hash: token_hash(&token),
        created_at: now,
        revoked_at: None,
    };
    if !store.put_gateway(&record)? {
        return Err(GatewayError::NameTaken(name.to_owned()));
    }
    Ok(token)
}

/// Revoke the gateway `name`: its token stops authenticating (a running service notices within
/// about half a second, like a credential revocation).
pub fn revoke(store: &dyn Store, name: &str, now: i64) -> Result<RevokeOutcome, StoreError> {
    store.revoke_gateway(name, now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_plain_ascii_and_bounded() {
        for good in ["billing", "gw-1", "payments.prod", "A_b", &"x".repeat(64)] {
            assert!(check_name(good).is_ok(), "{good:?}");
        }
        for bad in [
            "",
            " ",
            "gw 1",
            "gw/1",
            "gw\n",
            "pаyments", // Cyrillic а
            &"x".repeat(65),
        ] {
            assert!(
                matches!(check_name(bad), Err(GatewayError::BadName(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn a_token_is_prefixed_random_and_only_its_hash_is_stored() {
        let store =
            crate::store::SqliteStore::in_memory(crate::audit::AuditSealer::from_seed([1; 32]))
                .unwrap();
        let a = add(&store, "a", 1).unwrap();
        let b = add(&store, "b", 2).unwrap();
        assert!(a.starts_with(TOKEN_PREFIX) && a.len() == TOKEN_PREFIX.len() + 43);
        assert_ne!(a, b);
        let stored = store.gateways().unwrap();
        assert_eq!(stored.len(), 2);
        assert_eq!(stored[0].token_hash, token_hash(&a));
        assert_eq!(stored[0].name, "a");
        assert!(matches!(
            add(&store, "a", 3),
            Err(GatewayError::NameTaken(n)) if n == "a"
        ));
        assert!(matches!(
            add(&store, "no way", 3),
            Err(GatewayError::BadName(_))
        ));
    }
}
