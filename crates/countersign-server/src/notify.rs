//! Notifications: a webhook that says *that* a decision is waiting, never *what* it is about.
//!
//! The body carries the approval id, severity, expiry and the approver page link, nothing from
//! the action. A notification channel (chat, e-mail, pager) is read by more people and systems
//! than the approvers; the material fields are shown only after the approver authenticates.
//!
//! Delivery happens off the request path and is retried with exponential backoff when the
//! failure may be transient (no connection, a timeout, 408, 429, 5xx), never after the approval
//! has expired: a late "please decide" is noise. Every attempt for one approval carries the same
//! `Idempotency-Key` (the approval id), so a receiver that saw an attempt time out and then
//! arrive can drop the repeat.

use serde::Serialize;
use std::time::Duration;

/// How long one webhook delivery attempt may take.
const WEBHOOK_TIMEOUT: Duration = Duration::from_secs(5);

/// Attempts per notification, the first included.
const MAX_ATTEMPTS: u32 = 5;

/// Wait before the second attempt; doubled before each later one (0.5, 1, 2, 4 s).
const FIRST_BACKOFF: Duration = Duration::from_millis(500);

/// How one attempt ended, as far as retrying is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Attempt {
    /// A 2xx answer.
    Delivered,
    /// No answer: connection refused or reset, timeout.
    NoAnswer,
    /// An HTTP status other than 2xx.
    Status(u16),
}

/// How long to wait before attempt `next` (2, 3, …) after `last`, or `None` to give up.
///
/// Retried: no answer, 408, 429 and 5xx, which a receiver that is restarting or overloaded
/// gives. Not retried: other 4xx (the receiver refuses this request and will refuse it again),
/// success, and anything past [`MAX_ATTEMPTS`].
pub(crate) fn retry_after(next: u32, last: Attempt, first_backoff: Duration) -> Option<Duration> {
    let transient = match last {
        Attempt::Delivered => false,
        Attempt::NoAnswer => true,
        Attempt::Status(code) => code == 408 || code == 429 || (500..600).contains(&code),
    };
    if !transient || !(2..=MAX_ATTEMPTS).contains(&next) {
        return None;
    }
    first_backoff.checked_mul(1 << (next - 2))
}

/// The webhook body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Notification {
    pub approval_id: String,
    pub severity: String,
    pub expires_at: String,
    pub approver_url: String,
}

/// Delivers notifications to one webhook URL, retrying transient failures.
#[derive(Debug, Clone)]
pub(crate) struct Notifier {
    url: String,
    public_url: String,
    http: reqwest::Client,
    /// Attempts by outcome, registered in the service's metrics (`webhook_attempts`).
    pub(crate) attempts: prometheus_client::metrics::family::Family<
        Vec<(&'static str, String)>,
        prometheus_client::metrics::counter::Counter,
    >,
}

impl Attempt {
    /// The metrics label: a closed set (statuses grouped by class).
    fn label(self) -> &'static str {
        match self {
            Self::Delivered => "delivered",
            Self::NoAnswer => "no_answer",
            Self::Status(s) if s < 500 => "status_4xx",
            Self::Status(_) => "status_5xx",
        }
    }
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
            attempts: prometheus_client::metrics::family::Family::default(),
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

    /// Send in the background, retrying transient failures for at most `window` (the time left
    /// before the approval expires); the request that created the approval never waits for any
    /// of it.
    pub(crate) fn send(&self, notification: Notification, window: Duration) {
        let notifier = self.clone();
        let deadline = tokio::time::Instant::now() + window;
        tokio::spawn(async move { notifier.deliver(&notification, deadline).await });
    }

    async fn deliver(&self, notification: &Notification, deadline: tokio::time::Instant) {
        let mut attempt = 1;
        loop {
            let last = match self
                .http
                .post(&self.url)
                .header("Idempotency-Key", &notification.approval_id)
                .json(notification)
                .send()
                .await
            {
                Ok(r) if r.status().is_success() => Attempt::Delivered,
                Ok(r) => Attempt::Status(r.status().as_u16()),
                Err(e) => {
                    tracing::debug!(error = %e, "webhook attempt failed");
                    Attempt::NoAnswer
                }
            };
            self.attempts
                .get_or_create(&vec![("outcome", last.label().to_owned())])
                .inc();
            if last == Attempt::Delivered {
                return;
            }
            attempt += 1;
            let wait = retry_after(attempt, last, FIRST_BACKOFF);
            let expired = |wait: Duration| {
                tokio::time::Instant::now()
                    .checked_add(wait)
                    .is_none_or(|at| at >= deadline)
            };
            match wait {
                Some(wait) if !expired(wait) => tokio::time::sleep(wait).await,
                _ => {
                    tracing::warn!(
                        approval_id = %notification.approval_id,
                        attempts = attempt - 1,
                        last = ?last,
                        "webhook delivery abandoned"
                    );
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: Duration = Duration::from_millis(500);

    #[test]
    fn transient_failures_are_retried_with_doubling_waits() {
        for last in [
            Attempt::NoAnswer,
            Attempt::Status(500),
            Attempt::Status(503),
            Attempt::Status(429),
            Attempt::Status(408),
        ] {
            let waits: Vec<Option<Duration>> = (2..=MAX_ATTEMPTS)
                .map(|n| retry_after(n, last, BASE))
                .collect();
            assert_eq!(
                waits,
                [500, 1000, 2000, 4000].map(|ms| Some(Duration::from_millis(ms))),
                "{last:?}"
            );
        }
    }

    #[test]
    fn success_refusals_and_the_attempt_limit_end_delivery() {
        assert_eq!(retry_after(2, Attempt::Delivered, BASE), None);
        for code in [400, 401, 403, 404, 410, 422] {
            assert_eq!(retry_after(2, Attempt::Status(code), BASE), None, "{code}");
        }
        assert_eq!(retry_after(MAX_ATTEMPTS + 1, Attempt::NoAnswer, BASE), None);
        assert_eq!(retry_after(1, Attempt::NoAnswer, BASE), None);
    }
}
