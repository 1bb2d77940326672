//! Floor 1: what every session of one interposer shares (HTTP mode makes one session per
//! upstream session; stdio has one): the policy in force, the service connection, the audit log,
//! the open tickets, the id counter, the `requestState` key and the upstream's continuation
//! passes. Nothing here knows a session or a channel.

use crate::audit::{AuditLog, OpenTicket};
use crate::config::{Config, ListedTool, Rule};
use crate::state::StateCodec;
use countersign_client::{Gateway, ToolCall};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, RwLock};
use std::time::{Duration, Instant};
use time::OffsetDateTime;

/// The prefix of the ids the interposer forwards client requests under.
const UPSTREAM_ID_PREFIX: &str = "cs-";

/// Longest life of a `requestState`: short, so a leaked state is soon worthless; a client whose
/// state expired calls again without it and is matched by op_hash.
pub(super) const STATE_TTL_SECONDS: i64 = 600;

/// How long the upstream's state stays a pass: as long as the interposer's own states live.
const CONTINUATION_TTL: Duration = Duration::from_secs(STATE_TTL_SECONDS.unsigned_abs());
/// Most passes kept at once (the oldest go first): a bound on what an upstream can make us hold.
const MAX_CONTINUATIONS: usize = 4096;

/// Everything the sessions of one interposer share.
pub(super) struct Shared {
    pub(super) server_id: String,
    /// Base of the approver page link (`<approver_url>/approve/<id>`).
    approver_url: String,
    /// The policy in force: replaced as a whole, read at every decision.
    config: RwLock<std::sync::Arc<Config>>,
    pub(super) gateway: Gateway,
    pub(super) audit: AuditLog,
    /// op_hash -> the approval a held call waits on, across sessions and restarts.
    tickets: Mutex<HashMap<String, OpenTicket>>,
    run_id: String,
    counter: AtomicU64,
    pub(super) states: StateCodec,
    /// The upstream's own `requestState`s from answers to approved calls, each the single-use
    /// pass for the client's answer to that upstream's input request (nested multi round trips).
    continuations: Mutex<Continuations>,
}

impl Shared {
    pub(super) fn new(
        server_id: String,
        approver_url: String,
        config: Config,
        gateway: Gateway,
        audit: AuditLog,
        tickets: HashMap<String, OpenTicket>,
    ) -> Self {
        let run_id = format!(
            "{:x}",
            OffsetDateTime::now_utc().unix_timestamp_nanos() & 0xffff_ffff_ffff
        );
        Self {
            server_id,
            approver_url,
            config: RwLock::new(std::sync::Arc::new(config)),
            gateway,
            audit,
            tickets: Mutex::new(tickets),
            run_id,
            counter: AtomicU64::new(0),
            // A key that cannot be generated leaves the interposer unable to seal states; a
            // fixed key would be worse (forgeable), so fall back to one from the clock and pid.
            states: StateCodec::random()
                .unwrap_or_else(|_| StateCodec::with_key(&random_fallback())),
            continuations: Mutex::default(),
        }
    }

    pub(super) fn config(&self) -> std::sync::Arc<Config> {
        self.config
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub(super) fn set_config(&self, config: Config) {
        *self.config.write().unwrap_or_else(|p| p.into_inner()) = std::sync::Arc::new(config);
    }

    /// The rule for a call of `tool` under the policy in force, given what the last `tools/list`
    /// said of it.
    pub(super) fn rule(&self, tool: &str, listed: Option<&ListedTool>) -> Rule {
        self.config().rule(tool, listed)
    }

    pub(super) fn tickets(&self) -> MutexGuard<'_, HashMap<String, OpenTicket>> {
        self.tickets.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the ticket of `op_hash` is open on `approval_id`.
    pub(super) fn ticket_open(&self, op_hash: &str, approval_id: &str) -> bool {
        self.tickets()
            .get(op_hash)
            .is_some_and(|t| t.approval_id == approval_id)
    }

    pub(super) fn continuations(&self) -> MutexGuard<'_, Continuations> {
        self.continuations.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn next(&self) -> u64 {
        self.counter.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// A fresh audit call id.
    pub(super) fn next_call_id(&self) -> String {
        format!("{}-{}", self.run_id, self.next())
    }

    /// A fresh id for a request the interposer forwards: never one a client chose, never one
    /// given before in this process. Its JSON text, which is also its key.
    pub(super) fn next_upstream_id(&self) -> String {
        format!("\"{UPSTREAM_ID_PREFIX}{}\"", self.next())
    }

    /// A fresh id with `prefix` (task ids, the ids of the calls tasks forward).
    pub(super) fn new_id(&self, prefix: &str) -> String {
        format!("{prefix}{}-{}", self.run_id, self.next())
    }

    /// [`Self::new_id`] with 128 random bits after it: an id a third party can neither guess nor
    /// enumerate (task ids, which SEP-2663 lets a server treat as bearer handles). Should the
    /// system RNG fail, the id is only unique, and still bound to its session.
    pub(super) fn new_secret_id(&self, prefix: &str) -> String {
        use ring::rand::SecureRandom as _;
        let mut bytes = [0u8; 16];
        let id = self.new_id(prefix);
        match ring::rand::SystemRandom::new().fill(&mut bytes) {
            Ok(()) => format!("{id}-{}", countersign::b64::encode(&bytes)),
            Err(_) => id,
        }
    }

    pub(super) fn approve_url(&self, approval_id: &str) -> String {
        format!(
            "{}/approve/{approval_id}",
            self.approver_url.trim_end_matches('/')
        )
    }
}

/// A key from the clock and the process id, used only if the system RNG fails (it does not on
/// supported platforms); states sealed under it are still checked for the call they name.
fn random_fallback() -> Vec<u8> {
    let t = OffsetDateTime::now_utc().unix_timestamp_nanos();
    format!("{t}:{}", std::process::id()).into_bytes()
}

/// The exact call an approval released: its tool name and its `arguments` text, byte for byte.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Bound {
    pub(super) tool: String,
    pub(super) arguments: String,
}

impl Bound {
    pub(super) fn of(call: &ToolCall) -> Self {
        Self {
            tool: call.tool_name.clone(),
            arguments: call.params_json.clone(),
        }
    }
}

/// One pass: the approved call an upstream `requestState` continues.
#[derive(Debug, Clone)]
pub(super) struct Continuation {
    pub(super) op_hash: String,
    /// The approved call's tool and argument bytes: the continuation must repeat them.
    pub(super) bound: Bound,
    pub(super) approval_id: String,
    pub(super) at: Instant,
}

/// The passes by the upstream's `requestState` text.
#[derive(Debug, Default)]
pub(super) struct Continuations(HashMap<String, Continuation>);

impl Continuations {
    pub(super) fn insert(&mut self, state: String, pass: Continuation) {
        let now = Instant::now();
        self.0
            .retain(|_, c| now.duration_since(c.at) < CONTINUATION_TTL);
        if self.0.len() >= MAX_CONTINUATIONS
            && let Some(oldest) = self
                .0
                .iter()
                .min_by_key(|(_, c)| c.at)
                .map(|(k, _)| k.clone())
        {
            self.0.remove(&oldest);
        }
        self.0.insert(state, pass);
    }

    fn live(&self, state: &str) -> Option<&Continuation> {
        self.0
            .get(state)
            .filter(|c| c.at.elapsed() < CONTINUATION_TTL)
    }

    /// Whether `state` is a live pass.
    pub(super) fn holds(&self, state: &str) -> bool {
        self.live(state).is_some()
    }

    /// Spend pass `state`.
    pub(super) fn take(&mut self, state: &str) -> Option<Continuation> {
        self.live(state)?;
        self.0.remove(state)
    }
}

/// RFC 3339 of now (for tests and logs).
pub fn now_rfc3339() -> String {
    OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}
