//! The client sessions: the interposer hands each client a random session id of its own, bound
//! to the agent that opened it and mapped to the upstream's; one interposer session (client
//! view, tool catalog) per upstream session. Requests without a session id share one interposer
//! session per agent. `DELETE` ends a session.

use super::response::{bad_gateway, header_str, rpc_error, session_not_found, status_only};
use super::upstream::relay_response;
use super::{HttpRelay, SESSION_HEADER};
use crate::Interposer;
use crate::relay::Lines;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};
use url::Url;

/// A session nobody used for this long is forgotten (clients often never send DELETE).
const SESSION_IDLE: Duration = Duration::from_secs(3600);
/// At most this many sessions; past it the least recently used is forgotten.
const MAX_SESSIONS: usize = 10_000;

/// One client session: whose it is, the upstream's session id, and the interposer's view of it.
pub(super) struct Session {
    agent_id: String,
    pub(super) upstream_id: Option<String>,
    pub(super) interposer: Arc<Interposer>,
    last_used: Mutex<Instant>,
}

impl Session {
    fn last_used(&self) -> Instant {
        *self.last_used.lock().unwrap_or_else(|p| p.into_inner())
    }
}

pub(super) type Sessions = HashMap<String, Arc<Session>>;

fn new_session_id() -> String {
    use ring::rand::SecureRandom as _;
    let mut bytes = [0u8; 18];
    if ring::rand::SystemRandom::new().fill(&mut bytes).is_err() {
        // Not expected on supported platforms; a predictable id would still be bound to the
        // agent's credential, so it could not be used by another agent.
        let t = time::OffsetDateTime::now_utc().unix_timestamp_nanos();
        bytes[..16].copy_from_slice(&t.to_le_bytes());
    }
    countersign::b64::encode(&bytes)
}

/// Forget the sessions idle too long and, at the limit, the least recently used: their
/// interposers, to be ended once the lock is released.
fn forget_stale(sessions: &mut Sessions, now: Instant) -> Vec<Arc<Interposer>> {
    let mut ended = Vec::new();
    sessions.retain(|_, s| {
        let keep = now.duration_since(s.last_used()) < SESSION_IDLE;
        if !keep {
            ended.push(s.interposer.clone());
        }
        keep
    });
    if sessions.len() >= MAX_SESSIONS {
        let oldest = sessions
            .iter()
            .min_by_key(|(_, s)| s.last_used())
            .map(|(k, _)| k.clone());
        if let Some(s) = oldest.and_then(|k| sessions.remove(&k)) {
            ended.push(s.interposer.clone());
        }
    }
    ended
}

impl HttpRelay {
    fn lock_sessions(&self) -> std::sync::MutexGuard<'_, Sessions> {
        self.sessions.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The client's session `id`, if it exists and is `agent`'s: another agent's session id is
    /// as unknown as a made-up one.
    pub(super) fn session(&self, id: &str, agent: &str) -> Option<Arc<Session>> {
        let s = self.lock_sessions().get(id).cloned()?;
        if s.agent_id != agent {
            return None;
        }
        *s.last_used.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
        Some(s)
    }

    /// A new session of `agent_id` on `interposer`, mapped to the upstream's `upstream_id`:
    /// the id the client is to use.
    pub(super) fn open_session(
        &self,
        agent_id: String,
        upstream_id: Option<String>,
        interposer: Arc<Interposer>,
    ) -> String {
        let id = new_session_id();
        let now = Instant::now();
        let ended = {
            let mut sessions = self.lock_sessions();
            let ended = forget_stale(&mut sessions, now);
            interposer.set_task_upstream(self.task_forwarder(upstream_id.clone(), &interposer));
            let session = Session {
                agent_id,
                upstream_id,
                interposer,
                last_used: Mutex::new(now),
            };
            sessions.insert(id.clone(), Arc::new(session));
            ended
        };
        for i in ended {
            i.end_session();
        }
        id
    }

    /// The session's own way to the upstream for the calls its tasks run once approved: no
    /// client request is under way then to carry them. Each frame is POSTed in the session (its
    /// upstream session id, its revision) and the answer, JSON or an event stream, goes through
    /// the session's upstream hook (audit outcome, the task's end) with nobody to relay it to.
    /// It ends with the session's interposer (held weakly: the interposer holds the sender).
    fn task_forwarder(
        &self,
        upstream_session: Option<String>,
        interposer: &Arc<Interposer>,
    ) -> Lines {
        let (lines, mut frames) = mpsc::unbounded_channel::<String>();
        let to = TaskUpstream {
            http: self.http.clone(),
            url: self.upstream.clone(),
            session: upstream_session,
        };
        let interposer = Arc::downgrade(interposer);
        tokio::spawn(async move {
            while let Some(frame) = frames.recv().await {
                let Some(interposer) = interposer.upgrade() else {
                    break;
                };
                to.post(frame, interposer).await;
            }
        });
        lines
    }

    /// End session `id`: its interposer, if it existed.
    pub(super) fn end_session(&self, id: &str) -> Option<Arc<Interposer>> {
        let removed = self.lock_sessions().remove(id)?;
        removed.interposer.end_session();
        Some(removed.interposer.clone())
    }

    /// End every session, those with an id and the per-agent ones.
    pub(super) fn end_all_sessions(&self) {
        let sessions: Vec<_> = self.lock_sessions().drain().map(|(_, s)| s).collect();
        for s in sessions {
            s.interposer.end_session();
        }
        let stateless: Vec<_> = self.lock_stateless().drain().map(|(_, i)| i).collect();
        for i in stateless {
            i.end_session();
        }
    }

    /// End session `id` because its client asked to (DELETE); with `cancel_on_disconnect`, its
    /// pending approvals are withdrawn before this returns. (A session the upstream ended, or
    /// one forgotten idle, keeps them: its client may still retry in a new session.)
    async fn close_session(&self, id: &str) {
        if let Some(interposer) = self.end_session(id) {
            interposer.withdraw_on_disconnect().await;
        }
    }

    fn lock_stateless(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Interposer>>> {
        self.stateless.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The interposer session of `agent`'s requests that carry no session id.
    /// Its tasks' calls (2026-07-28 clients keep no session) go upstream with no session id.
    pub(super) fn stateless_for(&self, agent: &str) -> Arc<Interposer> {
        self.lock_stateless()
            .entry(agent.to_owned())
            .or_insert_with(|| {
                let interposer = Arc::new(self.base.session_for(agent.to_owned()));
                interposer.set_task_upstream(self.task_forwarder(None, &interposer));
                interposer
            })
            .clone()
    }
}

/// Where a session's task calls go: the upstream, in the session.
struct TaskUpstream {
    http: reqwest::Client,
    url: Url,
    session: Option<String>,
}

impl TaskUpstream {
    /// POST one task call `frame`; its answer ends the task in the upstream hook (nobody reads
    /// the reply), and a call that got no answer fails its task.
    async fn post(&self, frame: String, interposer: Arc<Interposer>) {
        let parsed = serde_json::from_str::<Value>(&frame).ok();
        let id = parsed.as_ref().and_then(|v| v.get("id").cloned());
        // The session's revision, else the one the call names itself (2026-07-28: no session).
        let revision = interposer.revision().or_else(|| {
            parsed
                .as_ref()
                .and_then(|v| v.pointer("/params/_meta/io.modelcontextprotocol~1protocolVersion"))
                .and_then(Value::as_str)
                .map(str::to_owned)
        });
        let mut request = self
            .http
            .post(self.url.clone())
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ACCEPT, "application/json, text/event-stream")
            .body(frame);
        if let Some(revision) = revision {
            // 2026-07-28 routes on headers that restate the body (SEP-2243).
            if revision.as_str() >= crate::answer::REVISION_2026_07_28 {
                request = request.header("mcp-method", "tools/call");
                if let Some(name) = parsed
                    .as_ref()
                    .and_then(|v| v.pointer("/params/name"))
                    .and_then(Value::as_str)
                {
                    request = request.header("mcp-name", name);
                }
            }
            request = request.header("mcp-protocol-version", revision);
        }
        if let Some(upstream) = &self.session {
            request = request.header(SESSION_HEADER, upstream.as_str());
        }
        match request.send().await {
            Ok(response) => {
                let (reply, unread) = oneshot::channel();
                drop(unread);
                relay_response(response, interposer.clone(), None, None, true, reply).await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "the upstream could not be reached for a task");
            }
        }
        if let Some(id) = &id {
            interposer.task_call_unanswered(id);
        }
    }
}

/// `DELETE /mcp`: end the client's session, and the upstream's if it keeps one.
pub(super) async fn delete_mcp(
    State(relay): State<Arc<HttpRelay>>,
    headers: HeaderMap,
) -> Response {
    if let Some(refused) = relay.foreign_caller(&headers) {
        return refused;
    }
    let Some(agent) = relay.authenticate(&headers) else {
        return super::response::unauthorized(None);
    };
    let Some(id) = header_str(&headers, SESSION_HEADER).map(str::to_owned) else {
        let message = "DELETE needs the session id";
        return rpc_error(StatusCode::BAD_REQUEST, None, -32600, message);
    };
    let Some(session) = relay.session(&id, &agent) else {
        return session_not_found(None, "Session not found");
    };
    let Some(upstream_id) = &session.upstream_id else {
        // The upstream keeps no session: ending ours is all there is.
        relay.close_session(&id).await;
        return status_only(StatusCode::OK);
    };
    let mut request = relay
        .http
        .delete(relay.upstream.clone())
        .header(SESSION_HEADER, upstream_id.as_str());
    if let Some(v) = headers.get("mcp-protocol-version") {
        request = request.header("mcp-protocol-version", v.clone());
    }
    match request.send().await {
        Ok(r) => {
            let status = r.status();
            // 405: the upstream does not let clients end sessions; both stay.
            if status.is_success() || status == StatusCode::NOT_FOUND {
                relay.close_session(&id).await;
            }
            let mut out = Response::new(Body::from(r.bytes().await.unwrap_or_default()));
            *out.status_mut() = status;
            out
        }
        Err(e) => {
            tracing::warn!(error = %e, "the upstream could not be reached");
            bad_gateway(None, "the upstream MCP server could not be reached")
        }
    }
}
