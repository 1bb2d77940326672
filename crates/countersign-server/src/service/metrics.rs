//! Prometheus metrics (`GET /metrics`). Every label value comes from a closed set: reason codes,
//! statuses, and tool names from the configuration ("other" for any tool the config does not
//! list), so a gateway cannot grow the series count by inventing names.

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::collections::BTreeSet;

type Labels = Vec<(&'static str, String)>;

/// The service's metrics; cheap to update from any thread.
#[derive(Debug)]
pub(crate) struct Metrics {
    registry: Registry,
    tools: BTreeSet<String>,
    created: Family<Labels, Counter>,
    settled: Family<Labels, Counter>,
    verifications: Family<Labels, Counter>,
    verify_seconds: Histogram,
    grants: Counter,
    commit_seconds: Histogram,
    pending: Gauge,
    oldest_pending: Gauge,
    waiters: Gauge,
}

impl Metrics {
    /// `webhook_attempts`: the notifier's counter, when a webhook is configured.
    pub(crate) fn new(
        tools: impl IntoIterator<Item = String>,
        webhook_attempts: Option<Family<Labels, Counter>>,
    ) -> Self {
        let mut registry = Registry::with_prefix("countersign");
        if let Some(attempts) = webhook_attempts {
            registry.register(
                "webhook_attempts",
                "Webhook delivery attempts, by outcome",
                attempts,
            );
        }
        let created = Family::<Labels, Counter>::default();
        let settled = Family::<Labels, Counter>::default();
        let verifications = Family::<Labels, Counter>::default();
        // 0.25 ms to ~0.5 s: a verification is a few signature checks, well under a millisecond
        // on current hardware; the tail buckets catch a starved blocking pool.
        let verify_seconds = Histogram::new(exponential_buckets(0.000_25, 2.0, 12));
        let grants = Counter::default();
        // Store commits: ~50 µs (SQLite, normal sync) to ~1 s (a stalled disk or database).
        let commit_seconds = Histogram::new(exponential_buckets(0.000_05, 2.0, 15));
        let pending = Gauge::default();
        let oldest_pending = Gauge::default();
        let waiters = Gauge::default();
        registry.register(
            "approvals_created",
            "Approval requests created, by tool and initial status",
            created.clone(),
        );
        registry.register(
            "approvals_settled",
            "Approvals settled, by final status and reason code",
            settled.clone(),
        );
        registry.register(
            "verifications",
            "Approver evidence verified by the service, by verdict and reason code",
            verifications.clone(),
        );
        registry.register(
            "verification_seconds",
            "Time to verify one approver's evidence",
            verify_seconds.clone(),
        );
        registry.register(
            "store_commit_seconds",
            "Time of one store transaction that may append audit lines",
            commit_seconds.clone(),
        );
        registry.register(
            "grants_collected",
            "Single-use grants collected",
            grants.clone(),
        );
        registry.register(
            "approvals_pending",
            "PENDING approvals now",
            pending.clone(),
        );
        registry.register(
            "oldest_pending_age_seconds",
            "Age of the oldest PENDING approval (0 when none is pending)",
            oldest_pending.clone(),
        );
        registry.register(
            "long_poll_waiters",
            "Long polls waiting on a settlement now",
            waiters.clone(),
        );
        Self {
            registry,
            tools: tools.into_iter().collect(),
            created,
            settled,
            verifications,
            verify_seconds,
            grants,
            commit_seconds,
            pending,
            oldest_pending,
            waiters,
        }
    }

    /// A configured tool's name, or "other": request data never becomes a label value as is.
    fn tool_label(&self, tool: &str) -> String {
        if self.tools.contains(tool) {
            tool.to_owned()
        } else {
            "other".to_owned()
        }
    }

    pub(crate) fn created(&self, tool: &str, status: &str) {
        self.created
            .get_or_create(&vec![
                ("tool", self.tool_label(tool)),
                ("status", status.to_owned()),
            ])
            .inc();
    }

    pub(crate) fn settled(&self, status: &str, reason_code: Option<&str>) {
        self.settled
            .get_or_create(&vec![
                ("status", status.to_owned()),
                ("reason_code", reason_code.unwrap_or("none").to_owned()),
            ])
            .inc();
    }

    pub(crate) fn verified(&self, verdict: &str, reason_code: Option<&str>, seconds: f64) {
        self.verify_seconds.observe(seconds);
        self.verifications
            .get_or_create(&vec![
                ("verdict", verdict.to_owned()),
                ("reason_code", reason_code.unwrap_or("none").to_owned()),
            ])
            .inc();
    }

    pub(crate) fn committed(&self, seconds: f64) {
        self.commit_seconds.observe(seconds);
    }

    pub(crate) fn grant_collected(&self) {
        self.grants.inc();
    }

    /// The text exposition, with the gauges read at scrape time set first.
    pub(crate) fn render(&self, pending: u64, oldest_age_s: i64, waiters: usize) -> String {
        self.pending.set(i64::try_from(pending).unwrap_or(i64::MAX));
        self.oldest_pending.set(oldest_age_s);
        self.waiters.set(i64::try_from(waiters).unwrap_or(i64::MAX));
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }
}
