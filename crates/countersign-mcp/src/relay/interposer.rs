//! Floor 3: the interposer as one session sees it: the state every session shares (behind an
//! `Arc`), the session's own state (behind its lock), and the agent it acts for. Only small
//! accessors live here; what the relay does is in the floors above.

use super::client_reader::CallFrame;
use super::session::{Held, Session};
use super::shared::Shared;
use crate::answer::{self, Ticket};
use crate::audit::{AuditLog, OpenTicket};
use crate::config::{Config, Rule};
use crate::tasks;
use countersign_client::Gateway;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::mpsc;

/// Where lines go: to the client or to the upstream, one line per message.
pub(crate) type Lines = mpsc::UnboundedSender<String>;

/// Who is calling which server, and under which rules.
#[derive(Debug, Clone)]
pub struct Settings {
    pub agent_id: String,
    pub server_id: String,
    /// Base of the approver page link (`<approver_url>/approve/<id>`).
    pub approver_url: String,
    pub config: Config,
}

/// The interposer: policy, the service connection, the audit log and one session's view.
///
/// Everything but the session and the agent is shared by the sessions
/// [`Interposer::session_for`] makes (HTTP mode: one per upstream session).
pub struct Interposer {
    pub(super) agent_id: String,
    pub(super) shared: Arc<Shared>,
    session: Mutex<Session>,
    /// Where a task's call goes when its verdict lands, if not on the channel of the request that
    /// made the task: HTTP answers each request on its own, so its sessions get a way of their own
    /// to the upstream ([`Interposer::set_task_upstream`]).
    task_upstream: Mutex<Option<Lines>>,
}

impl std::fmt::Debug for Interposer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Interposer")
            .field("agent_id", &self.agent_id)
            .field("server_id", &self.shared.server_id)
            .finish_non_exhaustive()
    }
}

impl Interposer {
    /// An interposer with the tickets its audit log still had open.
    pub fn new(
        settings: Settings,
        gateway: Gateway,
        audit: AuditLog,
        tickets: HashMap<String, OpenTicket>,
    ) -> Self {
        let shared = Shared::new(
            settings.server_id,
            settings.approver_url,
            settings.config,
            gateway,
            audit,
            tickets,
        );
        Self::with(settings.agent_id, Arc::new(shared))
    }

    fn with(agent_id: String, shared: Arc<Shared>) -> Self {
        Self {
            agent_id,
            shared,
            session: Mutex::default(),
            task_upstream: Mutex::new(None),
        }
    }

    /// Another session of this interposer for `agent_id` (HTTP mode: one per upstream session,
    /// the agent taken from its bearer credential): its own view of the client and the catalog,
    /// the same policy, service connection, audit log, tickets and `requestState` key.
    pub fn session_for(&self, agent_id: String) -> Self {
        Self::with(agent_id, self.shared.clone())
    }

    /// The agent this session acts for.
    pub fn agent_id(&self) -> &str {
        &self.agent_id
    }

    /// Replace the configuration (policy, held_as, park budget); it applies to every decision
    /// from now on, including retries of calls held under the old one.
    pub fn set_config(&self, config: Config) {
        self.shared.set_config(config);
    }

    pub(crate) fn config(&self) -> Arc<Config> {
        self.shared.config()
    }

    /// The session's own way to the upstream for the calls its tasks run (HTTP).
    pub(crate) fn set_task_upstream(&self, lines: Lines) {
        *self.task_upstream.lock().unwrap_or_else(|p| p.into_inner()) = Some(lines);
    }

    /// [`Self::set_task_upstream`]'s channel, if one was set.
    pub(super) fn task_upstream(&self) -> Option<Lines> {
        self.task_upstream
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The revision this session negotiated, if known.
    pub(crate) fn revision(&self) -> Option<String> {
        self.session().client.revision.clone()
    }

    /// The clean end of the interposer: the audit log's close line.
    pub(crate) fn close_audit(&self) {
        self.shared.audit.close();
    }

    pub(super) fn session(&self) -> MutexGuard<'_, Session> {
        self.session.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The rule for a call of `tool` under the policy in force and this session's last
    /// `tools/list`.
    pub(super) fn rule_now(&self, tool: &str) -> Rule {
        let listed = self.session().listed(tool);
        self.shared.rule(tool, listed.as_ref())
    }

    /// This session's client negotiated 2025-11-25, the revision whose tasks the interposer
    /// speaks (2026-07-28's tasks extension is another protocol: not offered), and tasks are
    /// offered at all.
    pub(super) fn session_takes_tasks(&self) -> bool {
        self.config().tasks
            && self.session().client.revision.as_deref() == Some(answer::REVISION_2025_11_25)
    }

    /// Whether held call `call` runs as a task, and which kind: the 2026-07-28 extension when a
    /// 2026-07-28 request declares it (SEP-2663 defines it for no earlier revision), else the
    /// 2025-11-25 feature when the request asks with `params.task` in a session that takes tasks.
    pub(super) fn task_ask(&self, call: &CallFrame) -> Option<tasks::Ask> {
        if !self.config().tasks {
            return None;
        }
        if call.tasks_extension && call.modern(self.revision().as_deref()) {
            return Some(tasks::Ask {
                ttl: None,
                flavor: tasks::Flavor::Extension,
            });
        }
        let ttl = call.task.filter(|_| self.session_takes_tasks())?;
        Some(tasks::Ask {
            ttl,
            flavor: tasks::Flavor::Legacy,
        })
    }

    /// `tasks/list` is answered here (the interposer's tasks) unless the upstream lists its own.
    pub(super) fn answers_task_list(&self) -> bool {
        self.session_takes_tasks() && !self.session().upstream_lists_tasks
    }

    /// Open the ticket of `op_hash` on `approval_id`: an identical call finds it.
    pub(super) fn open_ticket(&self, op_hash: &str, open: OpenTicket) {
        self.shared.tickets().insert(op_hash.to_owned(), open);
    }

    /// This session's client waits on `approval_id` for the call `op_hash`.
    pub(super) fn held_here(&self, op_hash: &str, approval_id: &str) {
        self.session()
            .held
            .insert(op_hash.to_owned(), approval_id.to_owned());
    }

    /// The ticket of `op_hash` is closed (executed, refused, withdrawn).
    pub(super) fn drop_ticket(&self, op_hash: &str) {
        self.shared.tickets().remove(op_hash);
        self.session().held.remove(op_hash);
    }

    /// The approval block of held call `h` on `approval_id`.
    pub(super) fn ticket(&self, h: &Held, approval_id: &str, expires_at: Option<&str>) -> Ticket {
        Ticket {
            approval_id: Some(approval_id.to_owned()),
            op_hash: h.op_hash.clone(),
            expires_at: expires_at.map(str::to_owned),
            approve_url: Some(self.shared.approve_url(approval_id)),
            denied: None,
        }
    }
}
