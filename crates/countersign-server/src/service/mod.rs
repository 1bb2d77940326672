//! The service's state and its operations, independent of HTTP.
//!
//! `gateway` holds what a gateway calls (create, redrive, withdraw, grant); `approver` what an
//! approver calls (login, view, challenge, decide). Both go through [`AppState`], one cloneable
//! struct of handles.

mod approver;
mod arap;
mod audit_read;
mod auditor_auth;
mod enroll;
mod gateway;
mod gateway_auth;
mod metrics;
mod outbox;
mod preauth;
mod proofs;
mod standing;
mod tlog;
mod waiters;
mod web_guard;

pub use approver::{AssertionBody, DecisionChallenge, LoginChallenge, LoginResponse, ReviewView};
pub(crate) use arap::{ARAP_JWKS_PATH, ARAP_REQUESTS_PATH, AccessRequest, ArapError, TaskView};
pub use audit_read::{AUDIT_PAGE_DEFAULT, AUDIT_PAGE_MAX, LineReader};
pub use enroll::{EnrollFinish, EnrollOptions, EnrollStart};
pub use gateway::{
    CreateRequest, DEFAULT_PROFILE, GrantReceipt, GrantRequest, MAX_AGENT_TOOL_BYTES,
};
pub use outbox::{ExtendRequest, Extended};
pub use proofs::{ConsistencyProof, InclusionProof};
pub use standing::{Inbox, InboxItem, StandingProposal, StandingView};
pub(crate) use tlog::LineOf;
pub use tlog::TLOG_PROOF_REACH;
pub use waiters::WaiterStats;
pub(crate) use web_guard::WebGuard;

use crate::audit::{AuditMirror, AuditSealer};
use crate::clock::{Clock, from_ms, rfc3339};
use crate::config::Config;
use crate::error::{ApiError, ErrorCode};
use crate::store::{ApprovalRecord, Store, StoreError};
use countersign::{
    ApprovalResult, ApprovalStatus, CredentialRecord, CredentialRegistry, EvidenceEntry, Policy,
    ProfileRegistry, RegistryDocument,
};
use std::sync::{Arc, Mutex, RwLock};

/// Shared handles of the running service.
#[derive(Clone, Debug)]
pub struct AppState {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    config: Config,
    public_url: String,
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    registry: RwLock<Arc<CredentialRegistry>>,
    /// The store's credentials version the registry was loaded at.
    registry_version: std::sync::atomic::AtomicU64,
    service_key: String,
    /// The audit key, which also signs checkpoints of the log.
    sealer: AuditSealer,
    /// The checkpoints' origin line (`audit_origin`, or derived from the public URL).
    audit_origin: String,
    /// Long polls, per approval; a settlement wakes its own approval's waiters.
    waiters: Arc<waiters::Waiters>,
    mirror: Option<Mutex<AuditMirror>>,
    /// The notification channels and the outbox worker; `None` when no channel is configured.
    notifier: Option<outbox::Notifier>,
    metrics: metrics::Metrics,
    /// The registration ceremony; `None` when the configuration cannot enroll (logged).
    enroller: Option<crate::enroll::Enroller>,
    /// Group memberships granted by redeemed invites: group to principals.
    members: RwLock<std::collections::BTreeMap<String, std::collections::BTreeSet<String>>>,
    /// Approver page guards (rate limits).
    web: WebGuard,
    /// The verifier policy of every tool rule; rebuilt when group memberships change.
    policies: RwLock<Arc<Policies>>,
    /// The canonicalization profiles this service pins.
    profiles: ProfileRegistry,
    /// Live gateway credentials: token hash to gateway name (see `gateway_auth`).
    gateways: RwLock<Arc<gateway_auth::Gateways>>,
    /// Live auditor credentials: token hash to auditor name (see `auditor_auth`).
    auditors: RwLock<Arc<auditor_auth::Auditors>>,
    /// The Merkle tree over the audit lines, checked against the store's lines and grown as the
    /// log grows (see `proofs`).
    tree: Arc<Mutex<proofs::TreeSlot>>,
    /// The latest checkpoint with the witnesses' cosignatures, if witnesses are configured.
    witnessed: Mutex<Option<String>>,
}

/// Verifier policies, built at startup and again when an invite changes a group: a [`Policy`]
/// carries the parsed profile registry, which is too costly to rebuild on every request.
#[derive(Debug)]
struct Policies {
    default: Arc<Policy>,
    tools: std::collections::HashMap<String, Arc<Policy>>,
}

impl Policies {
    fn new(
        config: &Config,
        members: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
    ) -> Self {
        let build = |rule: &crate::config::ToolRule| {
            Arc::new(config.policy(rule, enroll::eligible(config, members, rule)))
        };
        Self {
            default: build(&config.default_tool),
            tools: config
                .tools
                .iter()
                .map(|rule| (rule.name.clone(), build(rule)))
                .collect(),
        }
    }
}

/// What [`AppState::new`] needs.
#[derive(Debug)]
pub struct StateParts {
    pub config: Config,
    /// Base of `redrive_url` and approver links, without a trailing slash.
    pub public_url: String,
    pub store: Arc<dyn Store>,
    pub clock: Arc<dyn Clock>,
    pub sealer: AuditSealer,
    /// The audit log file mirror, if any.
    pub mirror: Option<AuditMirror>,
}

impl AppState {
    /// Assemble the state and load the enrolled credentials from the store.
    pub fn new(parts: StateParts) -> Result<Self, anyhow::Error> {
        let version = parts.store.credentials_version()?;
        let records = crate::demo::as_trusted(&parts.config, parts.store.credentials()?);
        let registry = CredentialRegistry::from_document(RegistryDocument {
            credentials: records,
        })?;
        let enroller = match crate::enroll::Enroller::new(
            &parts.config.rp_id,
            &parts.config.origins,
            &parts.config.enrollment,
        ) {
            Ok(e) => Some(e),
            Err(e @ crate::enroll::EnrollError::Config(_))
                if parts.config.enrollment.attestation
                    == crate::enroll::AttestationPolicy::Verified =>
            {
                // A verified-attestation policy that cannot be loaded must stop the service
                // rather than silently enroll nobody.
                return Err(e.into());
            }
            Err(e) => {
                tracing::error!(error = %e, "enrollment disabled");
                None
            }
        };
        // The config-owned preauthorizations, reconciled in one transaction before anything is
        // served: if this fails (on PostgreSQL: another replica holding the rows, a lost
        // connection), the service does not start.
        let definitions: Vec<crate::store::PreauthDefinition> = parts
            .config
            .preauthorizations
            .iter()
            .map(crate::store::PreauthDefinition::of)
            .collect();
        let now = crate::clock::to_ms(parts.clock.now());
        let changes = parts
            .store
            .reconcile_preauthorizations(&definitions, now)
            .map_err(|e| anyhow::anyhow!("reconciling [[preauthorizations]]: {e}"))?;
        for change in &changes {
            tracing::info!(?change, "preauthorization reconciled");
        }
        let members = enroll::group_members(parts.store.memberships()?);
        let channels = crate::notify::Channels::new(&parts.config, &parts.public_url)?;
        let notifier = outbox::Notifier::new(channels);
        let policies = Policies::new(&parts.config, &members);
        let gateways = gateway_auth::Gateways::from_records(parts.store.gateways()?);
        let auditors = auditor_auth::Auditors::from_records(parts.store.auditors()?);
        let public_url = parts.public_url.trim_end_matches('/').to_owned();
        let audit_origin = parts
            .config
            .audit_origin
            .clone()
            .unwrap_or_else(|| crate::audit::default_origin(&public_url));
        anyhow::ensure!(
            crate::audit::valid_origin(&audit_origin),
            "the audit checkpoint origin {audit_origin:?} (from public_url) cannot name a signed \
             note's key; set audit_origin in the configuration"
        );
        for w in &parts.config.witnesses {
            let key = crate::audit::note::NoteVerifier::parse(&w.key)
                .map_err(|e| anyhow::anyhow!("witness {}: key {:?}: {e}", w.url, w.key))?;
            anyhow::ensure!(
                key.kind == crate::audit::note::TYPE_COSIGNATURE_V1,
                "witness {}: key {:?} is not a cosignature/v1 key (type 0x04)",
                w.url,
                w.key
            );
        }
        let waiters = Arc::new(waiters::Waiters::new(parts.config.limits.long_poll_waiters));
        Ok(Self {
            inner: Arc::new(Inner {
                public_url,
                audit_origin,
                waiters,
                metrics: metrics::Metrics::new(
                    parts.config.tools.iter().map(|t| t.name.clone()),
                    notifier
                        .as_ref()
                        .filter(|n| n.channels.has_webhook())
                        .map(|n| n.channels.webhook_attempts.clone()),
                ),
                config: parts.config,
                store: parts.store,
                clock: parts.clock,
                registry: RwLock::new(Arc::new(registry)),
                registry_version: std::sync::atomic::AtomicU64::new(version),
                service_key: parts.sealer.public_key_b64(),
                sealer: parts.sealer,
                tree: Arc::new(Mutex::new(proofs::TreeSlot::new(
                    parts.mirror.as_ref().map(AuditMirror::hash_file_path),
                ))),
                mirror: parts.mirror.map(Mutex::new),
                notifier,
                enroller,
                members: RwLock::new(members),
                web: WebGuard::default(),
                policies: RwLock::new(Arc::new(policies)),
                profiles: ProfileRegistry::builtin(),
                gateways: RwLock::new(Arc::new(gateways)),
                auditors: RwLock::new(Arc::new(auditors)),
                witnessed: Mutex::new(None),
            }),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// The audit key, base64url (for `audit verify --key`).
    pub fn service_key(&self) -> &str {
        &self.inner.service_key
    }

    /// The verifier policy for a tool: its `[[tools]]` rule, or the default rule.
    pub fn policy(&self, tool_name: &str) -> Arc<Policy> {
        let policies = self
            .inner
            .policies
            .read()
            .unwrap_or_else(|p| p.into_inner());
        policies
            .tools
            .get(tool_name)
            .unwrap_or(&policies.default)
            .clone()
    }

    /// Rebuild the verifier policies for new group memberships.
    fn rebuild_policies(
        &self,
        members: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
    ) {
        let policies = Arc::new(Policies::new(&self.inner.config, members));
        *self
            .inner
            .policies
            .write()
            .unwrap_or_else(|p| p.into_inner()) = policies;
    }

    /// The canonicalization profiles this service pins.
    pub fn profiles(&self) -> &ProfileRegistry {
        &self.inner.profiles
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.inner.store
    }

    /// The public base URL.
    pub fn public_url(&self) -> &str {
        &self.inner.public_url
    }

    pub(crate) fn now_ms(&self) -> i64 {
        crate::clock::to_ms(self.inner.clock.now())
    }

    pub(crate) fn registry(&self) -> Arc<CredentialRegistry> {
        self.inner
            .registry
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Enroll (or replace) credentials: stored with their `enrollment` lines (see
    /// [`Store::put_credentials`]), then the in-memory registry is rebuilt.
    pub async fn enroll(&self, records: Vec<CredentialRecord>) -> Result<(), anyhow::Error> {
        // Refuse a document the core would refuse before storing anything.
        CredentialRegistry::from_document(RegistryDocument {
            credentials: records.clone(),
        })?;
        let now = self.now_ms();
        let state = self.clone();
        tokio::task::spawn_blocking(move || {
            state.inner.store.put_credentials(&records, now)?;
            state.sync_audit_file();
            Ok::<_, StoreError>(())
        })
        .await??;
        self.reload_credentials()
            .await
            .map_err(|e| anyhow::anyhow!(e.message))?;
        Ok(())
    }

    /// Revoke a credential (what `countersign credential revoke` does from another process):
    /// stored with its `revocation` line, then the registry reloaded.
    pub async fn revoke_credential(
        &self,
        credential_id: Vec<u8>,
        reason: String,
    ) -> Result<crate::store::RevokeOutcome, ApiError> {
        let now = self.now_ms();
        let outcome = self
            .committing(move |s| crate::store::revoke(s, &credential_id, &reason, now))
            .await?;
        self.reload_credentials().await?;
        Ok(outcome)
    }

    /// Reload the registry, group memberships, gateways and auditors when the store's credentials
    /// version moved (another process or replica enrolled, revoked, or added or revoked a gateway
    /// or an auditor), and
    /// bring the audit file up to date with the lines it wrote. The sweeper calls this every
    /// 500 ms; returns whether it reloaded.
    pub async fn refresh_registry(&self) -> Result<bool, ApiError> {
        let version = self.blocking(|s| s.credentials_version()).await?;
        let loaded = self
            .inner
            .registry_version
            .load(std::sync::atomic::Ordering::Acquire);
        if version == loaded {
            return Ok(false);
        }
        self.reload_credentials().await?;
        let state = self.clone();
        tokio::task::spawn_blocking(move || state.sync_audit_file())
            .await
            .map_err(ApiError::internal)?;
        Ok(true)
    }

    /// The registry document a verifier should trust (public keys only).
    pub async fn registry_document(&self) -> Result<RegistryDocument, ApiError> {
        let credentials = self.blocking(|s| s.credentials()).await?;
        Ok(RegistryDocument { credentials })
    }

    pub(crate) fn metrics(&self) -> &metrics::Metrics {
        &self.inner.metrics
    }

    /// The Prometheus text exposition, with the pending count read from the store now.
    pub async fn metrics_text(&self) -> Result<String, ApiError> {
        let (pending, oldest) = self
            .blocking(|s| Ok((s.pending_count()?, s.oldest_pending()?)))
            .await?;
        // By the service clock, which also decides expiry.
        let age = oldest.map_or(0, |t| self.now_ms().saturating_sub(t).max(0) / 1000);
        let waiters = self.long_poll_stats().waiting;
        Ok(self.inner.metrics.render(pending, age, waiters))
    }

    /// Run a store call on the blocking pool.
    pub(crate) async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&dyn Store) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, ApiError> {
        let store = self.inner.store.clone();
        Ok(tokio::task::spawn_blocking(move || f(store.as_ref())).await??)
    }

    /// Run a store call that may append audit lines, then copy the new lines to the audit file,
    /// both on the blocking pool, so neither the database nor the file is ever touched from an
    /// async worker thread. With SQLite (which seals in the writing transaction) the file is up
    /// to date before the answer leaves. With PostgreSQL the call's lines are not sealed yet, so
    /// copying here would only put a read under the file's lock on every request: the sweep
    /// copies what the sealers chained, every 500 ms (docs/spec/service.md §7.1).
    pub(crate) async fn committing<T: Send + 'static>(
        &self,
        f: impl FnOnce(&dyn Store) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, ApiError> {
        let state = self.clone();
        Ok(tokio::task::spawn_blocking(move || {
            let started = std::time::Instant::now();
            let out = f(state.inner.store.as_ref());
            state
                .inner
                .metrics
                .committed(started.elapsed().as_secs_f64());
            let out = out?;
            if state.inner.store.seals_on_commit() {
                state.sync_audit_file();
            }
            Ok::<_, StoreError>(out)
        })
        .await??)
    }

    /// Bring the audit file up to the database's sealed lines (on the blocking pool).
    pub async fn catch_up_audit_file(&self) {
        if self.inner.mirror.is_some() {
            let state = self.clone();
            let _ = tokio::task::spawn_blocking(move || state.sync_audit_file()).await;
        }
    }

    /// Append the database's new audit lines to the file (blocking).
    fn sync_audit_file(&self) {
        if let Some(mirror) = &self.inner.mirror {
            let mut mirror = mirror.lock().unwrap_or_else(|p| p.into_inner());
            if let Err(e) = mirror.sync(self.inner.store.as_ref()) {
                // The database holds the line; the file is repaired on the next sync or start.
                tracing::error!(error = %e, "audit file sync failed");
            }
        }
    }

    /// After the settlement of `id` committed: wake the long polls waiting on it (only those).
    pub(crate) fn wake_long_polls(&self, id: &str) {
        self.inner.waiters.wake(id);
    }

    /// Register a long poll on `id` (429 `too_many_waiters` over `limits.long_poll_waiters`).
    pub(crate) fn wait_on(&self, id: &str) -> Result<waiters::WaitGuard, ApiError> {
        self.inner.waiters.register(id).ok_or_else(|| {
            ApiError::too_many(
                ErrorCode::TooManyWaiters,
                format!(
                    "{} long polls are already waiting; poll again later or without ?wait=",
                    self.config().limits.long_poll_waiters
                ),
                1,
            )
        })
    }

    /// The long-poll counters: how many wait now, how many wake-ups were delivered, how many
    /// polls were refused by the cap.
    pub fn long_poll_stats(&self) -> WaiterStats {
        self.inner.waiters.stats()
    }

    /// The origin line of this service's audit checkpoints.
    pub fn audit_origin(&self) -> &str {
        &self.inner.audit_origin
    }

    /// A signed checkpoint of the audit log as it is now (a C2SP signed note; see
    /// [`crate::audit::Checkpoint`]). It covers every line committed before this call.
    pub async fn checkpoint(&self) -> Result<String, ApiError> {
        let (size, _) = self.blocking(|s| s.audit_head()).await?;
        self.sign_checkpoint(size).await
    }

    /// Sign a checkpoint of the log's first `size` lines (version 2: their Merkle root).
    pub(crate) async fn sign_checkpoint(&self, size: u64) -> Result<String, ApiError> {
        let hash = self.merkle_root(size).await?;
        let checkpoint = crate::audit::Checkpoint {
            origin: self.inner.audit_origin.clone(),
            size,
            hash,
            time: rfc3339(self.inner.clock.now()),
            kind: crate::audit::CheckpointHash::MerkleRoot,
        };
        self.inner
            .sealer
            .sign_checkpoint(&checkpoint)
            .map_err(ApiError::internal)
    }

    /// Settle every overdue approval (the sweeper and startup call this).
    ///
    /// It also starts the notifier (once) and has it look for due rows: `serve` sweeps at
    /// startup and every 500 ms, so rows due while the process was stopped go out after a
    /// restart.
    pub async fn expire_overdue(&self) -> Result<usize, ApiError> {
        self.wake_notifier();
        let now = self.now_ms();
        let mut total = 0;
        loop {
            let ids = self.committing(move |s| s.expire_overdue(now, 512)).await?;
            total += ids.len();
            if ids.is_empty() {
                break;
            }
            for id in &ids {
                self.inner.metrics.settled(
                    countersign::ApprovalStatus::Denied.as_str(),
                    Some(countersign::ReasonCode::ExpiredUnanswered.as_str()),
                );
                self.wake_long_polls(id);
            }
        }
        Ok(total)
    }

    /// Read an approval, settling it as expired first if its window has closed.
    pub(crate) async fn load(&self, id: &str) -> Result<ApprovalRecord, ApiError> {
        let key = id.to_owned();
        let record = self
            .blocking(move |s| s.get(&key))
            .await?
            .ok_or_else(|| ApiError::not_found("approval"))?;
        self.settle_if_overdue(record).await
    }

    /// A record just read, or, when its window closed while it was PENDING, the same approval
    /// after the expiry settled it.
    pub(crate) async fn settle_if_overdue(
        &self,
        record: ApprovalRecord,
    ) -> Result<ApprovalRecord, ApiError> {
        if record.status == ApprovalStatus::Pending && record.expires_at <= self.now_ms() {
            self.expire_overdue().await?;
            let key = record.id;
            return self
                .blocking(move |s| s.get(&key))
                .await?
                .ok_or_else(|| ApiError::not_found("approval"));
        }
        Ok(record)
    }

    /// The ApprovalResult a gateway sees for a record.
    pub fn result_of(&self, r: &ApprovalRecord) -> ApprovalResult {
        let mut result = ApprovalResult::bare(r.status);
        result.approval_id = Some(r.id.clone());
        result.expires_at = Some(rfc3339(from_ms(r.expires_at)));
        result.redrive_url = Some(self.redrive_url(&r.id));
        result.reason_code = r.reason_code.clone();
        result.authority = preauth::authority_of(r);
        result.revises = r.revises.clone();
        if let Some(json) = &r.evidence_json {
            // An array: a human's verdict on this approval. An object: a use of a standing grant
            // (the grant's evidence and which use this is).
            let read = if json.starts_with('{') {
                serde_json::from_str::<standing::StoredStandingUse>(json).map(|stored| {
                    result.standing_grant = Some(stored.standing_grant);
                    stored.approver_evidence
                })
            } else {
                serde_json::from_str::<Vec<EvidenceEntry>>(json)
            };
            match read {
                Ok(entries) => {
                    result.approver_evidence = entries.into_iter().map(Into::into).collect();
                }
                Err(e) => tracing::error!(id = %r.id, error = %e, "stored evidence unreadable"),
            }
        }
        result
    }

    /// 409 `already_settled` carrying the verdict that won: the one answer to anything that
    /// arrives for an approval no longer PENDING.
    pub(crate) fn already_settled(&self, record: &ApprovalRecord) -> ApiError {
        ApiError::conflict(
            ErrorCode::AlreadySettled,
            format!("{} is already {}", record.id, record.status.as_str()),
        )
        .with_result(self.result_of(record))
    }

    pub(crate) fn redrive_url(&self, id: &str) -> String {
        format!("{}/v1/approvals/{id}", self.inner.public_url)
    }
}
