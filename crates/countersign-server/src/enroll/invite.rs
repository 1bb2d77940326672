//! One-time, expiring invites.

use crate::store::{Invite, Store, StoreError};
use countersign::b64;
use sha2::{Digest as _, Sha256};

/// A freshly created invite: the token (shown once) and the link that carries it.
#[derive(Debug, Clone)]
pub struct CreatedInvite {
    pub token: String,
    pub url: String,
    pub invite: Invite,
    /// `invite.expires_at` as RFC 3339.
    pub expires_at: String,
}

/// The stored form of an invite token.
pub fn invite_token_hash(token: &str) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"countersign.invite/1\n");
    h.update(token.as_bytes());
    h.finalize().into()
}

/// Create and store an invite for `principal`, valid for `ttl_ms` from `now` (ms since epoch).
///
/// `public_url` is the approver page's base URL (the service's `public_url`).
pub fn create_invite(
    store: &dyn Store,
    public_url: &str,
    principal: &str,
    group: Option<&str>,
    now: i64,
    ttl_ms: i64,
) -> Result<CreatedInvite, InviteCreateError> {
    let principal = principal.trim();
    if principal.is_empty() || principal.chars().any(char::is_control) {
        return Err(InviteCreateError::BadPrincipal);
    }
    if group.is_some_and(|g| g.trim().is_empty() || g.chars().any(char::is_control)) {
        return Err(InviteCreateError::BadGroup);
    }
    if ttl_ms <= 0 {
        return Err(InviteCreateError::BadTtl);
    }
    let mut raw = [0u8; 32];
    getrandom::fill(&mut raw).map_err(|e| InviteCreateError::Random(e.to_string()))?;
    let token = b64::encode(&raw);
    let invite = Invite {
        token_hash: invite_token_hash(&token),
        principal: principal.to_owned(),
        group: group.map(|g| g.trim().to_owned()),
        created_at: now,
        expires_at: now.saturating_add(ttl_ms),
    };
    store.put_invite(&invite)?;
    Ok(CreatedInvite {
        url: format!("{}/enroll#{token}", public_url.trim_end_matches('/')),
        token,
        expires_at: crate::clock::rfc3339(crate::clock::from_ms(invite.expires_at)),
        invite,
    })
}

/// Why an invite could not be created.
#[derive(Debug, thiserror::Error)]
pub enum InviteCreateError {
    #[error("the principal must be a non-empty name without control characters")]
    BadPrincipal,
    #[error("the group must be a non-empty name without control characters")]
    BadGroup,
    #[error("the invite lifetime must be positive")]
    BadTtl,
    #[error("no randomness: {0}")]
    Random(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::AuditSealer;
    use crate::store::SqliteStore;

    fn store() -> SqliteStore {
        SqliteStore::in_memory(AuditSealer::from_seed([1; 32])).unwrap()
    }

    #[test]
    fn invite_is_stored_by_hash_and_readable_until_expiry() {
        let s = store();
        let created =
            create_invite(&s, "http://h:1/", "alice", Some("payments"), 1000, 500).unwrap();
        assert!(created.url.starts_with("http://h:1/enroll#"));
        assert!(created.url.ends_with(&created.token));
        let hash = invite_token_hash(&created.token);
        let got = s.invite(&hash, 1499).unwrap().unwrap();
        assert_eq!(got.principal, "alice");
        assert_eq!(got.group.as_deref(), Some("payments"));
        assert_eq!(
            s.invite(&hash, 1500).unwrap(),
            None,
            "expired at expires_at"
        );
        assert_eq!(s.invite(&invite_token_hash("other"), 1000).unwrap(), None);
    }

    #[test]
    fn bad_principal_group_and_ttl_are_refused() {
        let s = store();
        assert!(matches!(
            create_invite(&s, "u", " ", None, 0, 1),
            Err(InviteCreateError::BadPrincipal)
        ));
        assert!(matches!(
            create_invite(&s, "u", "a\u{0}b", None, 0, 1),
            Err(InviteCreateError::BadPrincipal)
        ));
        assert!(matches!(
            create_invite(&s, "u", "a", Some(""), 0, 1),
            Err(InviteCreateError::BadGroup)
        ));
        assert!(matches!(
            create_invite(&s, "u", "a", None, 0, 0),
            Err(InviteCreateError::BadTtl)
        ));
    }
}

/// `countersign enroll invite`: what to create and where.
#[derive(Debug, Clone)]
pub struct InviteOptions {
    pub data_dir: std::path::PathBuf,
    pub config: crate::config::Config,
    pub principal: String,
    pub group: Option<String>,
    /// Lifetime; default `[enrollment] invite_seconds`.
    pub expires_in_seconds: Option<u64>,
    /// Base of the link; default `public_url`, else the first configured origin.
    pub public_url: Option<String>,
    /// The service's database (`--database`); default the configuration's `database`, else the
    /// SQLite database in `data_dir`.
    pub database: Option<String>,
}

/// Write an invite straight into the service's database: `database` (the flag), else the
/// configuration's `database`, else the SQLite database in the data directory, the same choice
/// `countersign serve` makes, so replicas on PostgreSQL find the invite.
///
/// Works whether the service is running or not: the running service reads invites from the
/// database at each request (SQLite in WAL mode lets this second process write while it runs).
pub fn invite_in_data_dir(opts: &InviteOptions) -> anyhow::Result<CreatedInvite> {
    use crate::files;
    use anyhow::Context as _;
    let key = opts.data_dir.join(files::SERVICE_KEY);
    anyhow::ensure!(
        key.exists(),
        "{} is not a countersign data directory (no service key); start `countersign serve \
         --data-dir {}` once, or pass the right --data-dir",
        opts.data_dir.display(),
        opts.data_dir.display()
    );
    if let Some(group) = &opts.group {
        anyhow::ensure!(
            opts.config.groups.contains_key(group),
            "group {group:?} is not defined in the configuration's [groups]; define it (it may \
             be empty: {group} = []) and name it in a tool's approvers, then invite into it"
        );
    }
    let base = opts
        .public_url
        .clone()
        .or_else(|| opts.config.public_url.clone())
        .or_else(|| opts.config.origins.first().cloned())
        .context("no --public-url, no public_url and no origins configured")?;
    let sealer = crate::audit::AuditSealer::load_or_create(&key)?;
    let url = match opts.database.as_deref().or(opts.config.database.as_deref()) {
        Some(url) => crate::store::DatabaseUrl::parse(url)?,
        None => crate::store::DatabaseUrl::default_in(&opts.data_dir),
    };
    let store = url.open(sealer, opts.config.durability)?;
    let seconds = opts
        .expires_in_seconds
        .unwrap_or(opts.config.enrollment.invite_seconds);
    let ttl_ms = crate::clock::secs_to_ms(seconds);
    let now = crate::clock::system_now_ms();
    Ok(create_invite(
        store.as_ref(),
        &base,
        &opts.principal,
        opts.group.as_deref(),
        now,
        ttl_ms,
    )?)
}
