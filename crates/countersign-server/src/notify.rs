//! Notifications: a webhook that says *that* a decision is waiting, never *what* it is about.
//!
//! The body carries the approval id, severity, expiry and the approver page link, nothing from
//! the action. A notification channel (chat, e-mail, pager) is read by more people and systems
//! than the approvers; the material fields are shown only after the approver authenticates.

use serde::Serialize;
use std::time::Duration;

/// How long one webhook delivery may take.
const WEBHOOK_TIMEOUT: Duration = Duration::from_secs(5);

/// The webhook body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Notification {
    pub approval_id: String,
    pub severity: String,
    pub expires_at: String,
    pub approver_url: String,
}

/// Delivers notifications to one webhook URL, best effort.
#[derive(Debug, Clone)]
pub(crate) struct Notifier {
    url: String,
    public_url: String,
    http: reqwest::Client,
}

impl Notifier {
    pub(crate) fn new(url: String, public_url: String) -> Self {
        let http = reqwest::Client::builder()
            .timeout(WEBHOOK_TIMEOUT)
            .build()
            .unwrap_or_default();
        Self {
            url,
            public_url: public_url.trim_end_matches('/').to_owned(),
            http,
        }
    }

    /// Build the body for an approval.
    pub(crate) fn notification(
        &self,
        approval_id: &str,
        severity: &str,
        expires_at: &str,
    ) -> Notification {
        Notification {
            approval_id: approval_id.to_owned(),
            severity: severity.to_owned(),
            expires_at: expires_at.to_owned(),
            approver_url: format!("{}/approve/{approval_id}", self.public_url),
        }
    }

    /// Send in the background; a failed delivery is logged, never retried into the request path.
    pub(crate) fn send(&self, notification: Notification) {
        let http = self.http.clone();
        let url = self.url.clone();
        tokio::spawn(async move {
            match http.post(&url).json(&notification).send().await {
                Ok(r) if r.status().is_success() => {}
                Ok(r) => tracing::warn!(status = %r.status(), "webhook refused the notification"),
                Err(e) => tracing::warn!(error = %e, "webhook delivery failed"),
            }
        });
    }
}
