//! `countersign mcp http`: the interposer on Streamable HTTP, both sides (docs/MCP.md, "HTTP
//! mode").
//!
//! Each POST carries one JSON-RPC message, admitted as a stdio frame is (a body that is not gets
//! HTTP 400 and goes nowhere), after `Host`, `Origin`, the bearer credential and the routing
//! headers are checked. The relay's decision code then sees it exactly as it sees a stdio frame,
//! and every effect goes through the relay's outbox as on stdio, onto two channels of this
//! request's own: an answer the interposer gives itself (held, refused) comes back on one, a
//! frame to forward on the other. A forwarded frame goes to the upstream as the bytes received
//! (a request under the interposer's own id); the upstream's answer, JSON or an SSE stream, is
//! relayed as it arrives, each message through the relay's upstream hook (the client's id back,
//! audit outcome, `tools/list` catalog). What is left here is the transport: status codes,
//! headers, bodies, sessions.
//!
//! Who is calling comes from the bearer credential the agent presents (`[[agents]]` in the
//! configuration), never from anything in the messages. Sessions: the interposer hands the client
//! its own random session id and maps it to the upstream's; one interposer session (client
//! view, tool catalog) per upstream session, bound to the agent that opened it.
//!
//! | file | what it is |
//! |---|---|
//! | `agents`, `guard`, `sse` | the agents' credentials; the `Host`, `Origin` and routing-header checks; the SSE splitter |
//! | `response` | the responses the transport writes itself |
//! | `sessions` | the session table, a session's own way upstream for its tasks, `DELETE` |
//! | `upstream` | a request to the upstream, its answer relayed back; `GET` |
//! | `post` | `POST`: admitted, authenticated, decided by the relay, forwarded |
//! | this file | the relay: its routes, serving, shutdown, who is calling |

mod agents;
mod guard;
mod post;
mod response;
mod sessions;
mod sse;
mod upstream;

pub use agents::{AgentEntry, Agents, AgentsError, MIN_TOKEN_LEN};
pub(crate) use guard::is_host_name;
use guard::{host_name, is_loopback_host, origin_allowed};
use response::{header_str, rpc_error};
use sessions::Sessions;

use crate::Interposer;
use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use std::collections::HashMap;
use std::future::{Future, IntoFuture as _};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::oneshot;
use url::Url;

/// The session header (header names are case-insensitive: 2025-11-25 spells it `MCP-Session-Id`).
pub const SESSION_HEADER: &str = "mcp-session-id";
/// The JSON-RPC error code of a request refused for want of a known bearer credential (HTTP 401).
/// Outside -32000…-32004 (the SDKs' own) and beside the interposer's -32010 / -32011.
pub const UNAUTHORIZED_CODE: i64 = -32012;
/// 2026-07-28: a routing header that disagrees with the body (HTTP 400).
pub const HEADER_MISMATCH_CODE: i64 = -32020;

/// Largest request body (tool arguments can be whole files).
const MAX_BODY: usize = 16 << 20;
/// How long open streams get to finish after a shutdown signal.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// The HTTP relay: the agents, the upstream, the sessions.
pub struct HttpRelay {
    /// The template every session is made from (its own session view is never used).
    base: Interposer,
    agents: Agents,
    upstream: Url,
    http: reqwest::Client,
    sessions: Mutex<Sessions>,
    /// Per agent, the session of requests that carry no session id (2026-07-28 clients, or an
    /// upstream that issues none).
    stateless: Mutex<HashMap<String, Arc<Interposer>>>,
    /// The `Host` names let in besides loopback: `allowed_hosts`, and the address the relay
    /// listens on when that is no loopback one (lower case, without port).
    hosts: std::sync::RwLock<Vec<String>>,
}

impl std::fmt::Debug for HttpRelay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpRelay")
            .field("upstream", &self.upstream.as_str())
            .finish_non_exhaustive()
    }
}

impl HttpRelay {
    /// A relay in front of `upstream` (its MCP endpoint URL), making every session from `base`.
    pub fn new(base: Interposer, agents: Agents, upstream: Url) -> Arc<Self> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            // A redirect would send a judged call (and an approved one) somewhere other than the
            // configured upstream: the upstream's 3xx goes back to the client as it is.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_default();
        let hosts = base
            .config()
            .allowed_hosts
            .iter()
            .filter_map(|h| host_name(h))
            .collect();
        Arc::new(Self {
            base,
            agents,
            upstream,
            http,
            sessions: Mutex::new(HashMap::new()),
            stateless: Mutex::new(HashMap::new()),
            hosts: std::sync::RwLock::new(hosts),
        })
    }

    /// The routes: `POST`, `GET` and `DELETE` on `/mcp`.
    pub fn router(self: Arc<Self>) -> Router {
        Router::new()
            .route(
                "/mcp",
                axum::routing::post(post::post_mcp)
                    .get(upstream::get_mcp)
                    .delete(sessions::delete_mcp),
            )
            .layer(DefaultBodyLimit::max(MAX_BODY))
            .with_state(self)
    }

    /// Serve on `listener` until `shutdown` resolves; then give open streams a short grace, end
    /// every session and close the audit log.
    pub async fn serve(
        self: Arc<Self>,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        if let Ok(local) = listener.local_addr()
            && !local.ip().is_loopback()
            && !local.ip().is_unspecified()
            && let Some(host) = host_name(&local.ip().to_string())
        {
            self.hosts
                .write()
                .unwrap_or_else(|p| p.into_inner())
                .push(host);
        }
        let (stopping_tx, stopping_rx) = oneshot::channel::<()>();
        use axum::serve::ListenerExt as _;
        // Small JSON-RPC answers must not wait for Nagle's algorithm.
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let server =
            axum::serve(listener, self.clone().router()).with_graceful_shutdown(async move {
                shutdown.await;
                let _ = stopping_tx.send(());
            });
        // Graceful shutdown waits for every connection, and a GET stream never ends by itself.
        let grace = async move {
            match stopping_rx.await {
                Ok(()) => tokio::time::sleep(SHUTDOWN_GRACE).await,
                Err(_) => std::future::pending().await,
            }
        };
        let result = tokio::select! {
            r = server.into_future() => r,
            () = grace => Ok(()),
        };
        self.shutdown();
        result
    }

    /// End every session (parked responses dropped, unanswered calls audited `no_answer`) and
    /// write the audit log's close line.
    pub fn shutdown(&self) {
        self.end_all_sessions();
        self.base.close_audit();
    }

    /// DNS rebinding: a page on an attacker's name that resolves to this machine reaches the
    /// relay with that name in `Host` (and a browser that sends no `Origin` on some requests).
    /// Only loopback names, the listening address and `allowed_hosts` are let in; a request with
    /// no `Host` is not.
    fn host_allowed(&self, headers: &HeaderMap) -> bool {
        let Some(host) = header_str(headers, "host").and_then(host_name) else {
            return false;
        };
        is_loopback_host(&host)
            || self
                .hosts
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .contains(&host)
    }

    /// The 403 for a request whose `Host` is not this relay's or whose `Origin` is a page the
    /// relay does not serve (DNS rebinding, a browser's cross-site request); `None` to go on.
    pub(super) fn foreign_caller(&self, headers: &HeaderMap) -> Option<Response> {
        if !self.host_allowed(headers) {
            return Some(rpc_error(
                StatusCode::FORBIDDEN,
                None,
                -32600,
                "Host not allowed",
            ));
        }
        if !origin_allowed(headers) {
            return Some(rpc_error(
                StatusCode::FORBIDDEN,
                None,
                -32600,
                "Origin not allowed",
            ));
        }
        None
    }

    pub(super) fn authenticate(&self, headers: &HeaderMap) -> Option<String> {
        let value = header_str(headers, header::AUTHORIZATION.as_str())?;
        let (scheme, token) = value.split_once(' ')?;
        if !scheme.eq_ignore_ascii_case("bearer") {
            return None;
        }
        self.agents.identify(token.trim()).map(str::to_owned)
    }
}
