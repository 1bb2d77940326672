//! Enrollment through an invite, and approver groups granted by invites.

use super::AppState;
use crate::clock::{from_ms, rfc3339};
use crate::config::ToolRule;
use crate::enroll::{EnrollError, EnrolledSummary, Invite, invite_token_hash};
use crate::error::{ApiError, ErrorCode};
use crate::store::RedeemOutcome;
use axum::http::StatusCode;
use countersign::{CredentialRegistry, RegistryDocument};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use webauthn_rs::prelude::RegisterPublicKeyCredential;

/// `POST /v1/enroll/start`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnrollStart {
    pub invite: String,
}

/// The answer to a start: who is being enrolled and the options for `credentials.create`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EnrollOptions {
    pub principal: String,
    pub group: Option<String>,
    pub invite_expires_at: String,
    pub attestation_policy: crate::enroll::AttestationPolicy,
    /// `CredentialCreationOptions` with byte strings as base64url.
    pub options: Value,
}

/// `POST /v1/enroll/finish`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnrollFinish {
    pub invite: String,
    pub credential: RegisterPublicKeyCredential,
}

pub(super) fn group_members(rows: Vec<(String, String)>) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (principal, group) in rows {
        out.entry(group).or_default().insert(principal);
    }
    out
}

/// The principals `rule` admits: its groups as configured plus the members invites added;
/// `None` means every enrolled principal.
pub(super) fn eligible(
    config: &crate::config::Config,
    members: &BTreeMap<String, BTreeSet<String>>,
    rule: &ToolRule,
) -> Option<Vec<String>> {
    let configured = config.eligible_principals(rule)?;
    let mut out: BTreeSet<String> = configured.into_iter().map(str::to_owned).collect();
    for group in &rule.approvers {
        if let Some(extra) = members.get(group) {
            out.extend(extra.iter().cloned());
        }
    }
    Some(out.into_iter().collect())
}

fn invite_refused() -> ApiError {
    // One answer for unknown, used and expired: the page says the same thing for all three.
    ApiError::new(
        StatusCode::GONE,
        ErrorCode::InviteUnusable,
        "this invite is unknown, already used or expired; ask your operator for a new one",
    )
}

fn enroll_error(e: EnrollError) -> ApiError {
    match e {
        EnrollError::Config(m) => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::EnrollmentUnavailable,
            m,
        ),
        EnrollError::NoCeremony => ApiError::conflict(ErrorCode::NoCeremony, e.to_string()),
        other => ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::RegistrationRefused,
            other.to_string(),
        ),
    }
}

impl AppState {
    /// The principals a rule admits (configured groups plus members added by invites); `None`
    /// means every enrolled principal.
    pub fn eligible_principals(&self, rule: &ToolRule) -> Option<Vec<String>> {
        let members = self.inner.members.read().unwrap_or_else(|p| p.into_inner());
        eligible(self.config(), &members, rule)
    }

    fn enroller(&self) -> Result<&crate::enroll::Enroller, ApiError> {
        self.inner.enroller.as_ref().ok_or_else(|| {
            enroll_error(EnrollError::Config(
                "the rp_id and origins do not allow a registration ceremony (see the log)"
                    .to_owned(),
            ))
        })
    }

    async fn live_invite(&self, token: &str) -> Result<Invite, ApiError> {
        let hash = invite_token_hash(token);
        let now = self.now_ms();
        self.blocking(move |s| s.invite(&hash, now))
            .await?
            .ok_or_else(invite_refused)
    }

    /// Begin a registration ceremony for an invite; `hints` go into the creation options.
    pub async fn enroll_start(
        &self,
        req: EnrollStart,
        hints: &[crate::hints::Hint],
    ) -> Result<EnrollOptions, ApiError> {
        let enroller = self.enroller()?;
        let invite = self.live_invite(&req.invite).await?;
        // The principal's existing credentials are excluded, so one authenticator is not
        // enrolled twice for the same person.
        let exclude: Vec<Vec<u8>> = self
            .registry()
            .iter()
            .filter(|c| c.principal() == invite.principal)
            .map(|c| c.record().credential_id.clone())
            .collect();
        let now = self.now_ms();
        let started = enroller
            .start(
                invite.token_hash,
                &invite.principal,
                exclude,
                now,
                self.ceremony_ttl_ms(),
                hints,
            )
            .map_err(enroll_error)?;
        Ok(EnrollOptions {
            principal: invite.principal,
            group: invite.group,
            invite_expires_at: rfc3339(from_ms(invite.expires_at)),
            attestation_policy: enroller.policy(),
            options: started.options,
        })
    }

    fn ceremony_ttl_ms(&self) -> i64 {
        crate::clock::secs_to_ms(self.config().timeouts.assertion_max_age_seconds)
    }

    /// Finish the ceremony: verify, record the credential and redeem the invite atomically.
    pub async fn enroll_finish(&self, req: EnrollFinish) -> Result<EnrolledSummary, ApiError> {
        let enroller = self.enroller()?;
        let invite = self.live_invite(&req.invite).await?;
        let now = self.now_ms();
        let record = enroller
            .finish(&invite.token_hash, &invite.principal, &req.credential, now)
            .map_err(enroll_error)?;
        // The demo key enrolls only in the demo (crate::demo), whatever an invite says.
        crate::demo::refuse_outside_demo(self.config(), &record)?;
        // Refuse what the core would refuse before anything is stored.
        CredentialRegistry::from_document(RegistryDocument {
            credentials: vec![record.clone()],
        })
        .map_err(|e| {
            ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                ErrorCode::RegistrationRefused,
                e.to_string(),
            )
        })?;
        let stored = record.clone();
        let hash = invite.token_hash;
        let event = crate::audit::AuditEvent::enrollment_of(
            &rfc3339(from_ms(now)),
            &record,
            invite.group.as_deref(),
            crate::audit::EnrollmentSource::Invite,
        );
        match self
            .committing(move |s| s.redeem_invite(&hash, now, &stored, &event))
            .await?
        {
            RedeemOutcome::Redeemed => {}
            RedeemOutcome::InviteUnusable => return Err(invite_refused()),
            RedeemOutcome::CredentialExists => {
                return Err(ApiError::conflict(
                    ErrorCode::CredentialExists,
                    "this authenticator's credential is enrolled already",
                ));
            }
        }
        self.reload_credentials().await?;
        tracing::info!(
            principal = %record.principal,
            credential_id = %countersign::b64::encode(&record.credential_id),
            "approver enrolled"
        );
        Ok(EnrolledSummary::of(&record))
    }

    /// Rebuild the in-memory registry, group members, gateways and auditors from the store, all
    /// from one read, and only then record the version they reflect: a read that fails part way
    /// (the database restarting) leaves the old version in place, so the next refresh reloads
    /// everything rather than believing a half-done reload complete.
    pub async fn reload_credentials(&self) -> Result<(), ApiError> {
        // The version is read first: a change committed while reading is loaded now or, at the
        // latest, on the next refresh, never missed.
        let (version, credentials, memberships, (gateways, auditors)) = self
            .blocking(|s| {
                Ok((
                    s.credentials_version()?,
                    s.credentials()?,
                    s.memberships()?,
                    (s.gateways()?, s.auditors()?),
                ))
            })
            .await?;
        let credentials = crate::demo::as_trusted(self.config(), credentials);
        let registry = CredentialRegistry::from_document(RegistryDocument { credentials })
            .map_err(ApiError::internal)?;
        *self
            .inner
            .registry
            .write()
            .unwrap_or_else(|p| p.into_inner()) = std::sync::Arc::new(registry);
        let members = group_members(memberships);
        // The verifier policies carry the eligible principals: rebuilt with the new members.
        self.rebuild_policies(&members);
        *self
            .inner
            .members
            .write()
            .unwrap_or_else(|p| p.into_inner()) = members;
        self.set_gateways(gateways);
        self.set_auditors(auditors);
        self.inner
            .registry_version
            .store(version, std::sync::atomic::Ordering::Release);
        Ok(())
    }

    pub(crate) fn web_guard(&self) -> &super::WebGuard {
        &self.inner.web
    }
}
