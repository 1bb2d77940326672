//! Floor 2: what one session owns: the client's revision and the catalog it was shown, the map
//! from the interposer's upstream ids back to the client's, the calls being decided, the
//! approvals its client waits on, its tasks. Plain data: no channel, no service, no log.

use super::shared::Bound;
use super::upstream_reader::id_key;
use crate::answer::ClientKind;
use crate::config::{ListedTool, Rule};
use crate::tasks::Tasks;
use countersign_client::ToolCall;
use serde_json::Value;
use std::collections::HashMap;
use tokio::sync::oneshot;

#[derive(Debug, Default)]
pub(super) struct Session {
    pub(super) client: ClientKind,
    /// `None` until the upstream answered a `tools/list`.
    pub(super) catalog: Option<HashMap<String, ListedTool>>,
    pub(super) initialize_ids: Vec<String>,
    /// `server/discover` requests forwarded (2026-07-28): their answers name the extensions.
    pub(super) discover_ids: Vec<String>,
    pub(super) list_ids: Vec<String>,
    /// Forwarded `tools/call`s awaiting the upstream's answer, by upstream id key.
    pub(super) forwarded: HashMap<String, Forwarded>,
    /// `tools/call`s neither answered nor forwarded yet, by request id.
    pub(super) calls: HashMap<String, Pending>,
    /// op_hash -> approval id of the calls this session left pending at the service (until
    /// their ticket closes): what `cancel_on_disconnect` withdraws.
    pub(super) held: HashMap<String, String>,
    /// The tasks this session's client was given (2025-11-25 task-augmented held calls).
    pub(super) tasks: Tasks,
    /// The upstream declared `tasks.list`: `tasks/list` is its to answer.
    pub(super) upstream_lists_tasks: bool,
    /// Requests forwarded under the interposer's own ids, by that id's key: the client's id.
    /// Two client requests never share an upstream id, so no answer is ever booked to the
    /// wrong call.
    pub(super) outbound: HashMap<String, ClientId>,
    /// The reverse: the upstream id key of each forwarded request, by the client id's key.
    pub(super) outbound_by_client: HashMap<String, String>,
}

impl Session {
    /// Whether a request with this client id is being decided or awaits the upstream's answer.
    pub(super) fn in_flight(&self, key: &str) -> bool {
        self.calls.contains_key(key) || self.outbound_by_client.contains_key(key)
    }

    /// Forget forwarded request `upstream_key`: the client id it was sent for, if it was one.
    pub(super) fn answered(&mut self, upstream_key: &str) -> Option<ClientId> {
        let client = self.outbound.remove(upstream_key)?;
        self.outbound_by_client.remove(&client.key);
        Some(client)
    }

    /// The listing's word on `tool`, if the upstream listed it.
    pub(super) fn listed(&self, tool: &str) -> Option<ListedTool> {
        self.catalog.as_ref().and_then(|c| c.get(tool).cloned())
    }

    /// Register call `key` as being decided (see [`Pending`]): the receiver fires if the client
    /// cancels it.
    pub(super) fn pending(&mut self, key: String, modern: bool) -> oneshot::Receiver<()> {
        let (cancel, cancelled) = oneshot::channel();
        self.calls.insert(
            key,
            Pending {
                cancel: Some(cancel),
                cancelled: false,
                cancel_line: None,
                modern,
            },
        );
        cancelled
    }

    /// The client is gone: no pending call is answered or collected for it any more (parked
    /// responses are dropped; their approvals stay pending at the service).
    pub(super) fn drop_pending_answers(&mut self) {
        self.tasks.stop_all();
        for call in self.calls.values_mut() {
            call.cancel();
        }
    }
}

/// A client's request id: its key, and its JSON text exactly as the client wrote it (what its
/// answer carries back).
#[derive(Debug, Clone)]
pub(super) struct ClientId {
    pub(super) key: String,
    pub(super) raw: String,
}

/// A `tools/call` the interposer has not answered or forwarded yet. It is registered the moment
/// its frame is read, before anything awaits, so a `notifications/cancelled` that overtakes the
/// call's own task (before it parks, or while it talks to the service) is never lost.
#[derive(Debug)]
pub(super) struct Pending {
    /// Fires the call's cancellation; its receiver travels with the call.
    cancel: Option<oneshot::Sender<()>>,
    /// The client cancelled: no answer may reach it.
    pub(super) cancelled: bool,
    /// The client's cancel line, forwarded right after the call if the call is forwarded after
    /// all (what a transparent relay would have done).
    pub(super) cancel_line: Option<String>,
    /// The request is on protocol revision 2026-07-28 or later: results carry `resultType`.
    pub(super) modern: bool,
}

impl Pending {
    /// The client cancelled the call (or left): no answer for it, and its task is told.
    pub(super) fn cancel(&mut self) {
        self.cancelled = true;
        if let Some(cancel) = self.cancel.take() {
            let _ = cancel.send(());
        }
    }
}

/// A forwarded `tools/call` whose answer is awaited for the audit outcome.
#[derive(Debug, Clone)]
pub(super) struct Forwarded {
    pub(super) call_id: String,
    pub(super) op_hash: String,
    /// [`super::outcome`]'s `ALLOWED`, `EXECUTED` or `CONTINUED`.
    pub(super) outcome: countersign_audit::McpOutcome,
    pub(super) approval_ref: Option<String>,
    /// For an approved call: the tool and argument bytes that ran, which a continuation of it
    /// must repeat exactly.
    pub(super) bound: Option<Bound>,
}

/// What the interposer keeps about a request it forwards, to read the upstream's answer.
#[derive(Debug)]
pub(super) enum Track {
    /// Nothing: the answer goes back to the client as it is (but for its id).
    Plain,
    /// `initialize`: the negotiated revision and capabilities.
    Initialize,
    /// `tools/list`: the catalog.
    List,
    /// `server/discover` (2026-07-28): the server's capabilities.
    Discover,
    /// A `tools/call`: its audit outcome.
    Call(Forwarded),
}

/// A held `tools/call` on its way to a verdict: the original line is kept to be forwarded as is.
#[derive(Debug)]
pub(super) struct Held {
    pub(super) call_id: String,
    /// The id the answer goes under: the client's, or for a task's call the interposer's own.
    pub(super) id: Value,
    pub(super) line: String,
    pub(super) call: ToolCall,
    pub(super) op_hash: String,
    /// The rule it was held under (its intent line says it again when a task runs it).
    pub(super) rule: Rule,
    /// Answer with a multi round-trip result (see [`super::client_reader::CallFrame::mrtr`]).
    pub(super) mrtr: bool,
    /// The `requestState` the client echoed, if any.
    pub(super) request_state: Option<String>,
    /// `params.inputResponses` answers the interposer's own input request.
    pub(super) own_response: bool,
    /// The call runs as a task (2025-11-25 `params.task`, or the 2026-07-28 extension).
    pub(super) task: Option<crate::tasks::Ask>,
    /// Fires when the client cancels this call (or leaves).
    pub(super) cancel: oneshot::Receiver<()>,
    /// `line` carries an id of the interposer's own (a task's call), not the client's.
    pub(super) own_id: bool,
}

impl Held {
    /// The key of the id this call is answered or forwarded under.
    pub(super) fn key(&self) -> String {
        id_key(&self.id)
    }

    /// Whether the client cancelled this call (or left): fired, or its sender gone.
    pub(super) fn cancelled(&mut self) -> bool {
        !matches!(
            self.cancel.try_recv(),
            Err(oneshot::error::TryRecvError::Empty)
        )
    }
}
