//! Notifications: tell approvers *that* a decision is waiting, never *what* it is about.
//!
//! Every channel — Slack, Microsoft Teams, e-mail, the generic webhook — carries the same few
//! facts: the approval id, its severity, when it expires and how long is left, which step this
//! is (the first notice, a reminder, an escalation) and the approver page link. Nothing from
//! the action: not its parameters, and not the agent or tool names either, because the approver
//! page shows only the id, severity and expiry before sign-in (`/v1/web/approvals/{id}/summary`)
//! and a channel is read by more people and systems than the approvers. The material fields are
//! shown only after the approver authenticates (docs/spec/service.md §6).
//!
//! What is sent is built here (one file per channel); when and how often is decided by the
//! durable outbox (`service/outbox.rs` and `store/outbox.rs`). One delivery is a series of at
//! most [`MAX_ATTEMPTS`] attempts, retried with exponential backoff when the failure may be
//! transient (no connection, a timeout, 408, 429, 5xx, an SMTP 4xx), never after the approval
//! is decided or has expired.

mod email;
mod slack;
mod teams;
mod webhook;

use crate::config::{ChannelConfig, ChannelKind, Config};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// How long one HTTP delivery attempt may take (SMTP: see `email.rs`).
const HTTP_TIMEOUT: Duration = Duration::from_secs(5);

/// Attempts per delivery, the first included.
pub(crate) const MAX_ATTEMPTS: u32 = 5;

/// Wait before the second attempt; doubled before each later one (0.5, 1, 2, 4 s).
pub(crate) const FIRST_BACKOFF: Duration = Duration::from_millis(500);

/// The name the legacy `webhook_url` channel goes by in audit lines.
pub(crate) const LEGACY_WEBHOOK: &str = "webhook_url";

/// How one attempt ended, as far as retrying is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Attempt {
    /// A 2xx answer, or the SMTP server accepted the message.
    Delivered,
    /// No answer: connection refused or reset, timeout, an SMTP transient (4xx) failure.
    NoAnswer,
    /// An HTTP status other than 2xx.
    Status(u16),
    /// The SMTP server refused the message for good (5xx), or it could not be built.
    Refused,
}

impl Attempt {
    /// The word in audit lines and metrics: a closed set (statuses grouped by class).
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::Delivered => "delivered",
            Self::NoAnswer => "no_answer",
            Self::Status(s) if s < 500 => "status_4xx",
            Self::Status(_) => "status_5xx",
            Self::Refused => "refused",
        }
    }
}

/// How long to wait before attempt `next` (2, 3, …) after `last`, or `None` to give up.
///
/// Retried: no answer, 408, 429 and 5xx, which a receiver that is restarting or overloaded
/// gives. Not retried: other 4xx (the receiver refuses this request and will refuse it again),
/// a refused e-mail, success, and anything past [`MAX_ATTEMPTS`].
pub(crate) fn retry_after(next: u32, last: Attempt, first_backoff: Duration) -> Option<Duration> {
    let transient = match last {
        Attempt::Delivered | Attempt::Refused => false,
        Attempt::NoAnswer => true,
        Attempt::Status(code) => code == 408 || code == 429 || (500..600).contains(&code),
    };
    if !transient || !(2..=MAX_ATTEMPTS).contains(&next) {
        return None;
    }
    first_backoff.checked_mul(1 << (next - 2))
}

/// Which notice of an approval this is. Stored as text in the outbox (`new`, `reminder-N`,
/// `escalation-N`, N from 1), the key that makes each step happen once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The first notice, when the approval is created.
    New,
    /// The Nth reminder.
    Reminder(u32),
    /// The Nth step of the tool's escalation chain.
    Escalation(u32),
}

impl Step {
    /// The stored form.
    pub fn key(self) -> String {
        match self {
            Self::New => "new".to_owned(),
            Self::Reminder(n) => format!("reminder-{n}"),
            Self::Escalation(n) => format!("escalation-{n}"),
        }
    }

    /// Parse the stored form.
    pub fn parse(text: &str) -> Option<Self> {
        if text == "new" {
            return Some(Self::New);
        }
        let (kind, n) = text.split_once('-')?;
        let n: u32 = n.parse().ok().filter(|n| *n >= 1)?;
        match kind {
            "reminder" => Some(Self::Reminder(n)),
            "escalation" => Some(Self::Escalation(n)),
            _ => None,
        }
    }
}

/// Everything a notice says: the same for every channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    pub approval_id: String,
    /// One of four words (never free text: see `config::Severity`).
    pub severity: String,
    /// When the approval expires, in ms since the epoch.
    pub expires_at: i64,
    /// When the notice is sent, in ms since the epoch (for the time left).
    pub now: i64,
    pub approver_url: String,
    pub step: Step,
    /// The group an escalation step is for (a configured group name).
    pub group: Option<String>,
}

impl Notice {
    /// The expiry as RFC 3339.
    pub fn expires(&self) -> String {
        crate::clock::rfc3339(crate::clock::from_ms(self.expires_at))
    }

    /// The time left, for a person: `3 d 4 h`, `2 h 5 min`, `12 min`, `under a minute`.
    pub fn time_left(&self) -> String {
        time_left(self.expires_at.saturating_sub(self.now))
    }

    /// The headline: what this notice asks.
    pub fn title(&self) -> String {
        let what = match self.step {
            Step::New => "An approval waits for your decision".to_owned(),
            Step::Reminder(_) => "Reminder: an approval still waits for a decision".to_owned(),
            Step::Escalation(_) => match &self.group {
                Some(group) => format!("Escalated to {group}: an approval waits for a decision"),
                None => "Escalated: an approval waits for a decision".to_owned(),
            },
        };
        format!("{what} ({} severity)", self.severity)
    }

    /// The line every channel ends with.
    pub fn footnote() -> &'static str {
        "What is asked is shown only on the approver page, after you sign in."
    }
}

/// Milliseconds left, said for a person (rounded down; never negative).
pub fn time_left(ms: i64) -> String {
    let minutes = ms.max(0) / 60_000;
    let (days, hours, mins) = (minutes / 1440, minutes / 60 % 24, minutes % 60);
    match (days, hours, mins) {
        (0, 0, 0) => "under a minute".to_owned(),
        (0, 0, m) => format!("{m} min"),
        (0, h, m) => format!("{h} h {m} min"),
        (d, h, _) => format!("{d} d {h} h"),
    }
}

/// `text` cut to at most `max` characters, on a character boundary, with an ellipsis when cut:
/// the chat services refuse a whole message when one text is over its limit.
pub(crate) fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// The generic webhook's body: exactly the members it has always had.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Notification {
    pub approval_id: String,
    pub severity: String,
    pub expires_at: String,
    pub approver_url: String,
}

/// Why the channels could not be set up at startup.
#[derive(Debug, thiserror::Error)]
pub(crate) enum NotifyError {
    #[error("notify channel {channel:?}: reading its secret from {path}: {source}")]
    SecretFile {
        channel: String,
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("notify channel {channel:?}: the environment variable {var} is not set (or not UTF-8)")]
    SecretEnv { channel: String, var: String },
    #[error("notify channel {channel:?}: its secret is empty")]
    EmptySecret { channel: String },
    #[error("notify channel {channel:?}: {problem}")]
    Email { channel: String, problem: String },
}

/// A secret from the file or environment variable the configuration names (trailing
/// whitespace trimmed: files usually end with a newline).
fn secret(
    channel: &str,
    file: Option<&std::path::Path>,
    env: Option<&str>,
) -> Result<Option<String>, NotifyError> {
    let text = match (file, env) {
        (Some(path), _) => {
            std::fs::read_to_string(path).map_err(|source| NotifyError::SecretFile {
                channel: channel.to_owned(),
                path: path.to_owned(),
                source,
            })?
        }
        (None, Some(var)) => std::env::var(var).map_err(|_| NotifyError::SecretEnv {
            channel: channel.to_owned(),
            var: var.to_owned(),
        })?,
        (None, None) => return Ok(None),
    };
    let text = text.trim_end().to_owned();
    if text.is_empty() {
        return Err(NotifyError::EmptySecret {
            channel: channel.to_owned(),
        });
    }
    Ok(Some(text))
}

/// Where a channel sends.
enum Target {
    /// A URL to POST JSON to (Slack, Teams, webhook). A secret: never printed.
    Http(String),
    Email(Box<email::Mailer>),
}

/// One configured channel, its secrets resolved.
pub(crate) struct Channel {
    pub(crate) name: String,
    pub(crate) kind: ChannelKind,
    target: Target,
}

impl std::fmt::Debug for Channel {
    // The target is a secret (a webhook URL is a bearer credential): never printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channel")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

impl Channel {
    fn new(config: &ChannelConfig) -> Result<Self, NotifyError> {
        let name = config.name.clone();
        let target = match config.kind {
            ChannelKind::Email => Target::Email(Box::new(email::Mailer::new(config)?)),
            _ => {
                let url = secret(&name, config.url_file.as_deref(), config.url_env.as_deref())?
                    .ok_or(NotifyError::EmptySecret {
                        channel: name.clone(),
                    })?;
                Target::Http(url)
            }
        };
        Ok(Self {
            name,
            kind: config.kind,
            target,
        })
    }

    /// One attempt to deliver `notice`.
    async fn attempt(&self, http: &reqwest::Client, notice: &Notice) -> Attempt {
        match (&self.target, self.kind) {
            (Target::Email(mailer), _) => mailer.send(notice).await,
            (Target::Http(url), ChannelKind::Slack) => {
                post(http.post(url).json(&slack::payload(notice))).await
            }
            (Target::Http(url), ChannelKind::Teams) => {
                post(http.post(url).json(&teams::payload(notice))).await
            }
            (Target::Http(url), _) => post(webhook::request(http.post(url), notice)).await,
        }
    }
}

/// Send one HTTP request and classify the answer.
async fn post(request: reqwest::RequestBuilder) -> Attempt {
    match request.send().await {
        Ok(r) if r.status().is_success() => Attempt::Delivered,
        Ok(r) => Attempt::Status(r.status().as_u16()),
        Err(e) => {
            tracing::debug!(error = %e, "notification attempt failed");
            Attempt::NoAnswer
        }
    }
}

/// The configured channels by name.
#[derive(Debug, Clone)]
pub(crate) struct Channels {
    by_name: Arc<BTreeMap<String, Channel>>,
    http: reqwest::Client,
    public_url: String,
    /// Attempts of the generic webhook channels by outcome, registered in the service's metrics
    /// (`webhook_attempts`).
    pub(crate) webhook_attempts: Family<Vec<(&'static str, String)>, Counter>,
}

impl Channels {
    /// Resolve every channel's secrets: `[[notify.channels]]`, and `webhook_url` as a webhook
    /// channel named [`LEGACY_WEBHOOK`].
    pub(crate) fn new(config: &Config, public_url: &str) -> Result<Self, NotifyError> {
        let mut by_name = BTreeMap::new();
        for c in &config.notify.channels {
            by_name.insert(c.name.clone(), Channel::new(c)?);
        }
        if let Some(url) = &config.webhook_url {
            by_name.insert(
                LEGACY_WEBHOOK.to_owned(),
                Channel {
                    name: LEGACY_WEBHOOK.to_owned(),
                    kind: ChannelKind::Webhook,
                    target: Target::Http(url.clone()),
                },
            );
        }
        let http = reqwest::Client::builder()
            .timeout(HTTP_TIMEOUT)
            .build()
            .unwrap_or_default();
        Ok(Self {
            by_name: Arc::new(by_name),
            http,
            public_url: public_url.trim_end_matches('/').to_owned(),
            webhook_attempts: Family::default(),
        })
    }

    /// Whether any channel is configured.
    pub(crate) fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// Whether a generic webhook channel is configured (for the `webhook_attempts` metric).
    pub(crate) fn has_webhook(&self) -> bool {
        self.by_name
            .values()
            .any(|c| c.kind == ChannelKind::Webhook)
    }

    /// The channel names.
    pub(crate) fn names(&self) -> impl Iterator<Item = &str> {
        self.by_name.keys().map(String::as_str)
    }

    pub(crate) fn get(&self, name: &str) -> Option<&Channel> {
        self.by_name.get(name)
    }

    /// The approver page link of an approval.
    pub(crate) fn approver_url(&self, approval_id: &str) -> String {
        format!("{}/approve/{approval_id}", self.public_url)
    }

    /// One attempt on channel `name`, counted in the metrics.
    pub(crate) async fn attempt(&self, channel: &Channel, notice: &Notice) -> Attempt {
        let outcome = channel.attempt(&self.http, notice).await;
        if channel.kind == ChannelKind::Webhook {
            self.webhook_attempts
                .get_or_create(&vec![("outcome", outcome.label().to_owned())])
                .inc();
        }
        outcome
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
        assert_eq!(retry_after(2, Attempt::Refused, BASE), None);
        for code in [400, 401, 403, 404, 410, 422] {
            assert_eq!(retry_after(2, Attempt::Status(code), BASE), None, "{code}");
        }
        assert_eq!(retry_after(MAX_ATTEMPTS + 1, Attempt::NoAnswer, BASE), None);
        assert_eq!(retry_after(1, Attempt::NoAnswer, BASE), None);
    }

    #[test]
    fn steps_round_trip_and_nothing_else_parses() {
        for step in [
            Step::New,
            Step::Reminder(1),
            Step::Reminder(40),
            Step::Escalation(2),
        ] {
            assert_eq!(Step::parse(&step.key()), Some(step));
        }
        for bad in [
            "",
            "reminder-0",
            "reminder-",
            "escalation-x",
            "other-1",
            "New",
        ] {
            assert_eq!(Step::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn time_left_reads_like_a_person_says_it() {
        assert_eq!(time_left(-5), "under a minute");
        assert_eq!(time_left(59_999), "under a minute");
        assert_eq!(time_left(300_000), "5 min");
        assert_eq!(time_left(2 * 3_600_000 + 5 * 60_000), "2 h 5 min");
        assert_eq!(time_left(7 * 86_400_000), "7 d 0 h");
    }

    #[test]
    fn clipping_keeps_characters_whole() {
        assert_eq!(clip("short", 10), "short");
        assert_eq!(clip("ééééé", 3), "éé…");
        assert_eq!(clip("abc", 3), "abc");
    }
}
