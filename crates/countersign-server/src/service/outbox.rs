//! The notifier: which notices an approval gets (its outbox rows), and the worker that delivers
//! them (see `store/outbox.rs` for the rows' life and `notify/` for what is sent).
//!
//! Creating an approval only writes rows, in the creating transaction; nothing is sent on the
//! request's path. One worker task per process claims due rows channel by channel, at most
//! [`IN_FLIGHT`] per channel at once, and spawns one delivery per row: a stalled channel holds
//! its own slots and nobody else's. The worker wakes when a row is written and every
//! [`POLL`] (rows that fall due with time: reminders, escalations, retries after a restart).

use super::{AppState, Inner};
use crate::audit::{AuditEvent, NotificationFacts};
use crate::clock::{from_ms, rfc3339, secs_to_ms};
use crate::config::Severity;
use crate::error::{ApiError, ErrorCode};
use crate::notify::{
    Attempt, Channels, FIRST_BACKOFF, LEGACY_WEBHOOK, MAX_ATTEMPTS, Notice, Step, retry_after,
};
use crate::store::{Delivery, DeliveryAttempt, ExtendOutcome, NewApproval, NewDelivery, Session};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::sync::{Notify, Semaphore};

/// How long a claimed row is this process's: longer than a whole series of attempts (five of
/// at most 10 s each, 7.5 s of backoff). A process that stops mid-series leaves the row to be
/// claimed again once this has passed.
const LEASE_MS: i64 = 120_000;

/// How often the worker looks for rows that fell due with time.
const POLL: Duration = Duration::from_millis(250);

/// Deliveries in flight per channel.
const IN_FLIGHT: usize = 64;

/// The shortest time between two claim rounds, and between two recorder commits.
const MIN_ROUND: Duration = Duration::from_millis(20);

/// An attempt's row update and its audit line, on their way to the recorder.
type Record = (DeliveryAttempt, Option<AuditEvent>);

/// The notifier's shared parts.
#[derive(Debug)]
pub(crate) struct Notifier {
    pub(crate) channels: Channels,
    wake: Arc<Notify>,
    started: AtomicBool,
    /// Free delivery slots per channel.
    slots: BTreeMap<String, Arc<Semaphore>>,
    /// Attempts to record: the recorder commits what has arrived in one transaction, so
    /// deliveries add a few writes a second to the database, not one per attempt.
    records: tokio::sync::mpsc::UnboundedSender<Record>,
    recorder: std::sync::Mutex<Option<tokio::sync::mpsc::UnboundedReceiver<Record>>>,
}

impl Notifier {
    /// `None` when no channel is configured.
    pub(crate) fn new(channels: Channels) -> Option<Self> {
        if channels.is_empty() {
            return None;
        }
        let slots = channels
            .names()
            .map(|n| (n.to_owned(), Arc::new(Semaphore::new(IN_FLIGHT))))
            .collect();
        let (records, recorder) = tokio::sync::mpsc::unbounded_channel();
        Some(Self {
            channels,
            wake: Arc::new(Notify::new()),
            started: AtomicBool::new(false),
            slots,
            records,
            recorder: std::sync::Mutex::new(Some(recorder)),
        })
    }
}

/// `POST /v1/approver/approvals/{id}/extend`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExtendRequest {
    /// Seconds to add to the current expiry (capped by the tool's `max_approval_seconds`,
    /// counted from the approval's creation).
    pub add_seconds: u64,
}

/// The answer to an extension.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Extended {
    pub approval_id: String,
    pub previous_expires_at: String,
    pub expires_at: String,
}

impl AppState {
    /// The first outbox rows of a new PENDING approval: the first notice on each channel its
    /// tool and severity route to, the first reminder, and every escalation step that falls
    /// inside its window.
    pub(crate) fn plan_deliveries(&self, a: &NewApproval) -> Vec<NewDelivery> {
        if self.inner.notifier.is_none() {
            return Vec::new();
        }
        let config = self.config();
        let rule = config.rule(&a.tool_name);
        let severity = Severity::from_wire(&a.severity).unwrap_or_default();
        let mut channels: Vec<&str> = config.channels_for(&a.tool_name, severity);
        if config.webhook_url.is_some() {
            channels.push(LEGACY_WEBHOOK);
        }
        let row = |step: Step, channel: &str, due_at: i64| NewDelivery {
            approval_id: a.id.clone(),
            step: step.key(),
            channel: channel.to_owned(),
            due_at,
        };
        let mut rows: Vec<NewDelivery> = channels
            .iter()
            .map(|c| row(Step::New, c, a.created_at))
            .collect();
        if let Some(every) = rule.reminder_every {
            let due = a.created_at.saturating_add(secs_to_ms(every));
            if due < a.expires_at {
                rows.extend(channels.iter().map(|c| row(Step::Reminder(1), c, due)));
            }
        }
        for (n, step) in (1..).zip(&rule.escalation) {
            let due = a.created_at.saturating_add(secs_to_ms(step.after));
            if due < a.expires_at {
                rows.extend(
                    step.channels
                        .iter()
                        .map(|c| row(Step::Escalation(n), c, due)),
                );
            }
        }
        rows
    }

    /// Start the worker if it is not running, and have it look for due rows now. `serve` calls
    /// it at startup (through the expiry sweep), so rows due while the process was stopped go
    /// out once it is back.
    pub(crate) fn wake_notifier(&self) {
        let Some(n) = &self.inner.notifier else {
            return;
        };
        if !n.started.swap(true, Ordering::SeqCst) {
            let (weak, wake) = (Arc::downgrade(&self.inner), n.wake.clone());
            tokio::spawn(run(weak.clone(), wake));
            let taken = n.recorder.lock().unwrap_or_else(|p| p.into_inner()).take();
            if let Some(rx) = taken {
                tokio::spawn(record(weak, rx));
            }
        }
        n.wake.notify_one();
    }

    /// One round: claim what each channel has room for (one transaction) and start delivering
    /// it.
    async fn claim_round(&self) {
        let Some(n) = &self.inner.notifier else {
            return;
        };
        let rooms: Vec<(String, usize)> = n
            .slots
            .iter()
            .map(|(name, slots)| (name.clone(), slots.available_permits()))
            .filter(|(_, room)| *room > 0)
            .collect();
        if rooms.is_empty() {
            return;
        }
        let now = self.now_ms();
        let claimed = self
            .blocking(move |s| s.claim_deliveries(&rooms, now, now.saturating_add(LEASE_MS)))
            .await;
        let claimed = match claimed {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(error = %e.message, "claiming notifications failed");
                return;
            }
        };
        for delivery in claimed {
            let Some(slots) = n.slots.get(&delivery.channel) else {
                continue;
            };
            let Ok(slot) = slots.clone().try_acquire_owned() else {
                continue;
            };
            let state = self.clone();
            tokio::spawn(async move {
                state.deliver(delivery).await;
                drop(slot);
            });
        }
    }

    /// Deliver one claimed row: a series of attempts, each recorded with its audit line.
    async fn deliver(&self, d: Delivery) {
        let Some(n) = &self.inner.notifier else {
            return;
        };
        let rule = self.config().rule(&d.tool_name);
        let step = Step::parse(&d.step);
        // The next reminder is written before this one is sent, so a slow channel does not
        // push the schedule back; its key makes it happen once whoever writes it.
        if let (Some(Step::Reminder(k)), Some(every)) = (step, rule.reminder_every) {
            let due = d.due_at.saturating_add(secs_to_ms(every));
            if due < d.expires_at {
                let next = NewDelivery {
                    approval_id: d.approval_id.clone(),
                    step: Step::Reminder(k + 1).key(),
                    channel: d.channel.clone(),
                    due_at: due,
                };
                if let Err(e) = self.blocking(move |s| s.enqueue(&[next])).await {
                    tracing::error!(error = %e.message, "scheduling the next reminder failed");
                }
            }
        }
        let group = match step {
            Some(Step::Escalation(k)) => rule
                .escalation
                .get(usize::try_from(k).unwrap_or(usize::MAX).saturating_sub(1))
                .map(|s| s.group.clone()),
            _ => None,
        };
        let (Some(step), Some(channel)) = (step, n.channels.get(&d.channel)) else {
            // A channel removed from the configuration since the row was written.
            self.close(&d, d.attempts, "no_channel", None).await;
            return;
        };
        let mut attempt = d.attempts + 1;
        // The claim read the approval PENDING in its own transaction; each retry reads it again.
        let (mut severity, mut expires_at) = (d.severity.clone(), d.expires_at);
        loop {
            let now = self.now_ms();
            if attempt > d.attempts + 1 {
                let id = d.approval_id.clone();
                let current = self.blocking(move |s| s.get(&id)).await.ok().flatten();
                match current.filter(|r| r.status == countersign::ApprovalStatus::Pending) {
                    Some(r) => (severity, expires_at) = (r.severity, r.expires_at),
                    None => expires_at = now,
                }
            }
            if expires_at <= now {
                self.close(&d, attempt - 1, "moot", None).await;
                return;
            }
            if attempt > MAX_ATTEMPTS {
                self.close(&d, attempt - 1, "abandoned", None).await;
                return;
            }
            let notice = Notice {
                approval_id: d.approval_id.clone(),
                severity: severity.clone(),
                expires_at,
                now,
                approver_url: n.channels.approver_url(&d.approval_id),
                step,
                group: group.clone(),
            };
            let outcome = n.channels.attempt(channel, &notice).await;
            let now = self.now_ms();
            let wait = retry_after(attempt + 1, outcome, FIRST_BACKOFF).filter(|w| {
                now.saturating_add(i64::try_from(w.as_millis()).unwrap_or(i64::MAX)) < expires_at
            });
            let event = AuditEvent::notification(&NotificationFacts {
                approval_id: &d.approval_id,
                ts: &rfc3339(from_ms(now)),
                step: &d.step,
                channel: channel.kind.as_str(),
                target: &channel.name,
                attempt,
                outcome: outcome.label(),
                last: wait.is_none(),
            });
            let record = DeliveryAttempt {
                approval_id: d.approval_id.clone(),
                step: d.step.clone(),
                channel: d.channel.clone(),
                attempt,
                now,
                done: wait.is_none().then(|| outcome.label().to_owned()),
                lease_until: now.saturating_add(LEASE_MS),
            };
            let _ = n.records.send((record, Some(event)));
            let Some(wait) = wait else {
                if outcome != Attempt::Delivered {
                    tracing::warn!(
                        approval_id = %d.approval_id,
                        channel = %d.channel,
                        step = %d.step,
                        attempts = attempt,
                        last = outcome.label(),
                        "notification abandoned"
                    );
                }
                return;
            };
            tokio::time::sleep(wait).await;
            attempt += 1;
        }
    }

    /// Close a row without an attempt (or after the last one), with `outcome` and an optional
    /// line.
    async fn close(&self, d: &Delivery, attempts: u32, outcome: &str, event: Option<AuditEvent>) {
        let record = DeliveryAttempt {
            approval_id: d.approval_id.clone(),
            step: d.step.clone(),
            channel: d.channel.clone(),
            attempt: attempts,
            now: self.now_ms(),
            done: Some(outcome.to_owned()),
            lease_until: 0,
        };
        if let Some(n) = &self.inner.notifier {
            let _ = n.records.send((record, event));
        }
    }

    /// An approver asks for more time on a PENDING approval: its expiry moves later by
    /// `add_seconds`, never past creation + the tool's `max_approval_seconds` (a tool without
    /// one cannot be extended). Only the approval's window moves: a grant's window is set when
    /// it is approved and never grows.
    pub async fn extend(
        &self,
        id: &str,
        req: ExtendRequest,
        session: &Session,
    ) -> Result<Extended, ApiError> {
        let record = self.load(id).await?;
        self.check_eligible(&record.tool_name, &session.principal)?;
        if record.status != countersign::ApprovalStatus::Pending {
            return Err(self.already_settled(&record));
        }
        let Some(max) = self.config().rule(&record.tool_name).max_approval_seconds else {
            return Err(ApiError::conflict(
                ErrorCode::NotExtendable,
                format!(
                    "{} allows no extension (no max_approval_seconds)",
                    record.tool_name
                ),
            ));
        };
        let ceiling = record.created_at.saturating_add(secs_to_ms(max));
        let wanted = record
            .expires_at
            .saturating_add(secs_to_ms(req.add_seconds))
            .min(ceiling);
        if wanted <= record.expires_at {
            return Err(ApiError::conflict(
                ErrorCode::NotExtendable,
                format!(
                    "{id} already waits until {}, the most its tool allows",
                    rfc3339(from_ms(record.expires_at))
                ),
            ));
        }
        let now = self.now_ms();
        let previous = rfc3339(from_ms(record.expires_at));
        let expires_at = rfc3339(from_ms(wanted));
        let event = AuditEvent::extension(
            id,
            &rfc3339(from_ms(now)),
            &session.principal,
            &previous,
            &expires_at,
        );
        let key = id.to_owned();
        let outcome = self
            .committing(move |s| s.extend_approval(&key, wanted, now, &event))
            .await?;
        match outcome {
            ExtendOutcome::Extended { .. } => {
                self.wake_long_polls(id);
                Ok(Extended {
                    approval_id: id.to_owned(),
                    previous_expires_at: previous,
                    expires_at,
                })
            }
            ExtendOutcome::NotFound => Err(ApiError::not_found("approval")),
            ExtendOutcome::NotPending | ExtendOutcome::NotLater { .. } => {
                let record = self.load(id).await?;
                Err(self.already_settled(&record))
            }
        }
    }
}

/// The worker: a round whenever woken or every [`POLL`], at most one per [`MIN_ROUND`] (a burst
/// of creations is claimed in a few transactions, not one each), until the service is dropped.
async fn run(state: Weak<Inner>, wake: Arc<Notify>) {
    loop {
        let Some(inner) = state.upgrade() else {
            return;
        };
        AppState { inner }.claim_round().await;
        tokio::time::sleep(MIN_ROUND).await;
        tokio::select! {
            () = wake.notified() => {}
            () = tokio::time::sleep(POLL) => {}
        }
    }
}

/// The recorder: commits the attempts that have arrived, together, then waits [`MIN_ROUND`] for
/// more; ends when the service is dropped and nothing is left to record.
async fn record(state: Weak<Inner>, mut rx: tokio::sync::mpsc::UnboundedReceiver<Record>) {
    loop {
        let first = tokio::select! {
            r = rx.recv() => r,
            () = tokio::time::sleep(POLL) => {
                if state.strong_count() == 0 {
                    return;
                }
                continue;
            }
        };
        let Some(first) = first else {
            return;
        };
        let mut batch = vec![first];
        while let Ok(next) = rx.try_recv() {
            batch.push(next);
        }
        let Some(inner) = state.upgrade() else {
            return;
        };
        let app = AppState { inner };
        if let Err(e) = app.committing(move |s| s.record_attempts(&batch)).await {
            tracing::error!(error = %e.message, "recording notification attempts failed");
        }
        drop(app);
        tokio::time::sleep(MIN_ROUND).await;
    }
}
