//! `POST /mcp`: one JSON-RPC message, admitted as a stdio frame is, after `Host`, `Origin`, the
//! bearer credential and the routing headers are checked; then the relay decides it exactly as
//! it decides a stdio frame, with two channels of this request's own for the outbox: an answer
//! the interposer gives itself (held, refused) comes back on one, a frame to forward on the
//! other. A forwarded frame is POSTed to the upstream and its answer relayed back.

use super::guard::routing_headers_match;
use super::response::{
    bad_gateway, header_str, json_response, json_status, rpc_error, session_not_found, status_only,
    unauthorized,
};
use super::upstream::{relay_response, upstream_request};
use super::{HEADER_MISMATCH_CODE, HttpRelay, SESSION_HEADER};
use crate::relay::Lines;
use crate::{Interposer, admission};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde_json::Value;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

/// A body admission took: its text, admission's reading of it, and its request id if it is a
/// request.
struct Admitted {
    text: String,
    message: admission::Message,
    request_id: Option<Value>,
}

/// A response that ends the request before the relay sees it (boxed: a `Response` is large).
type Refused = Box<Response>;

/// Which interposer session a request is decided in.
struct SessionOf {
    interposer: Arc<Interposer>,
    /// The client's session id, when it sent one.
    client_session: Option<String>,
    upstream_session: Option<String>,
    /// An `initialize` without a session id: a session is opened if the upstream accepts it.
    opens_session: bool,
}

/// What one POST's exchange needs to know about the request.
struct Exchange {
    session: SessionOf,
    headers: HeaderMap,
    agent_id: String,
    request_id: Option<Value>,
}

pub(super) async fn post_mcp(
    State(relay): State<Arc<HttpRelay>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(refused) = relay.foreign_caller(&headers) {
        return refused;
    }
    let admitted = match relay.admit(&headers, &body) {
        Ok(admitted) => admitted,
        Err(refused) => return *refused,
    };
    let request_id = admitted.request_id.as_ref();
    let Some(agent) = relay.authenticate(&headers) else {
        return unauthorized(request_id);
    };
    // Headers that restate the body (2026-07-28 routes on them) must say what the body says: a
    // gateway that routes or authorizes on the header must see the call the interposer judges.
    if let Err(mismatch) = routing_headers_match(&headers, &admitted.text, &admitted.message) {
        return rpc_error(
            StatusCode::BAD_REQUEST,
            request_id,
            HEADER_MISMATCH_CODE,
            mismatch,
        );
    }
    let session = match relay.session_of(&headers, &agent, &admitted) {
        Ok(session) => session,
        Err(refused) => return *refused,
    };
    relay.decide(admitted, session, headers, agent).await
}

impl HttpRelay {
    /// The body is admitted before anything in it is believed: what fails is answered here and
    /// goes nowhere (docs/MCP.md, "What the interposer admits"). A body may end with one line
    /// break; inside, it is one line, as a stdio frame is.
    fn admit(&self, headers: &HeaderMap, body: &Bytes) -> Result<Admitted, Refused> {
        let frame = body
            .strip_suffix(b"\n")
            .map(|b| b.strip_suffix(b"\r").unwrap_or(b))
            .unwrap_or(body);
        let (text, message) = match admission::admit_bytes(frame) {
            Ok((text, message)) => (text.to_owned(), message),
            Err(why) => return Err(Box::new(self.refuse_body(headers, frame, &why))),
        };
        let request_id = message
            .id
            .clone()
            .filter(|_| message.kind == admission::Kind::Request)
            .and_then(|at| serde_json::from_str::<Value>(&text[at]).ok());
        Ok(Admitted {
            text,
            message,
            request_id,
        })
    }

    /// A body not admitted: 401 to a caller without a known credential, else 400 with the
    /// relay's refusal, written through its outbox as a stdio frame's is.
    fn refuse_body(
        &self,
        headers: &HeaderMap,
        frame: &[u8],
        why: &admission::Rejection,
    ) -> Response {
        let Some(agent) = self.authenticate(headers) else {
            return unauthorized(None);
        };
        tracing::warn!(agent, reason = why.reason(), error = %why, "POST body not admitted");
        let (to_client, mut answers): (Lines, _) = mpsc::unbounded_channel();
        self.base.refuse_body(frame, why, &to_client);
        match answers.try_recv() {
            Ok(answer) => json_status(StatusCode::BAD_REQUEST, answer),
            Err(_) => status_only(StatusCode::BAD_REQUEST),
        }
    }

    /// The session the request names (404 if it is not `agent`'s), a new one for an
    /// `initialize` without one, else the agent's session of requests without an id.
    fn session_of(
        &self,
        headers: &HeaderMap,
        agent: &str,
        admitted: &Admitted,
    ) -> Result<SessionOf, Refused> {
        let client_session = header_str(headers, SESSION_HEADER).map(str::to_owned);
        let initialize = admitted.message.method.as_deref() == Some("initialize");
        let (interposer, upstream_session, opens_session) = match &client_session {
            Some(id) => match self.session(id, agent) {
                Some(s) => (s.interposer.clone(), s.upstream_id.clone(), false),
                None => {
                    let message = "Session not found: initialize a new session";
                    return Err(Box::new(session_not_found(
                        admitted.request_id.as_ref(),
                        message,
                    )));
                }
            },
            None if initialize => (
                Arc::new(self.base.session_for(agent.to_owned())),
                None,
                true,
            ),
            None => (self.stateless_for(agent), None, false),
        };
        Ok(SessionOf {
            interposer,
            client_session,
            upstream_session,
            opens_session,
        })
    }

    /// The relay decides the message, its effects on this request's two channels; the exchange
    /// runs detached and hands back the response.
    async fn decide(
        self: Arc<Self>,
        admitted: Admitted,
        session: SessionOf,
        headers: HeaderMap,
        agent_id: String,
    ) -> Response {
        let (to_client, answers): (Lines, _) = mpsc::unbounded_channel();
        let (to_upstream, forwards): (Lines, _) = mpsc::unbounded_channel();
        let Admitted {
            text,
            message,
            request_id,
        } = admitted;
        session
            .interposer
            .clone()
            .client_message(text, message, &to_client, &to_upstream);
        drop((to_client, to_upstream));
        let (reply, response) = oneshot::channel();
        let exchange = Exchange {
            session,
            headers,
            agent_id,
            request_id,
        };
        tokio::spawn(self.exchange(exchange, answers, forwards, reply));
        response.await.unwrap_or_else(|_| {
            let message = "the interposer lost this request";
            rpc_error(StatusCode::INTERNAL_SERVER_ERROR, None, -32603, message)
        })
    }

    /// The first thing the interposer does with the message: answer it, forward it, or neither
    /// (a notification it consumed). Runs detached from the client's request, so a frame the
    /// relay decides to forward (an approved call whose grant it just collected) is forwarded
    /// even if the client has gone.
    async fn exchange(
        self: Arc<Self>,
        x: Exchange,
        mut answers: mpsc::UnboundedReceiver<String>,
        mut forwards: mpsc::UnboundedReceiver<String>,
        mut reply: oneshot::Sender<Response>,
    ) {
        let mut client_gone = false;
        let (mut forwards_open, mut answers_open) = (true, true);
        while forwards_open || answers_open {
            tokio::select! {
                biased;
                frame = forwards.recv(), if forwards_open => match frame {
                    Some(frame) => return self.forward(x, frame, reply).await,
                    None => forwards_open = false,
                },
                answer = answers.recv(), if answers_open => match answer {
                    Some(answer) => {
                        let _ = reply.send(json_response(answer));
                        return;
                    }
                    None => answers_open = false,
                },
                () = reply.closed(), if !client_gone => {
                    // The client dropped its request while the interposer was still deciding
                    // (a parked retry): as for a `notifications/cancelled`, only the parked
                    // response is dropped; the approval stays pending. Whatever the relay still
                    // forwards is forwarded.
                    client_gone = true;
                    if let Some(id) = &x.request_id {
                        x.session.interposer.abandoned(id);
                    }
                }
            }
        }
        // Nothing to answer or forward: a notification the interposer consumed (the cancel of
        // a parked retry), or a request whose parked response was dropped.
        let _ = reply.send(status_only(StatusCode::ACCEPTED));
    }

    /// Send `frame` (the exact bytes the client posted) to the upstream and relay its answer.
    async fn forward(&self, x: Exchange, frame: String, reply: oneshot::Sender<Response>) {
        let request = self.http.post(self.upstream.clone()).body(frame);
        let request = upstream_request(request, &x.headers, x.session.upstream_session.as_deref());
        let response = match request.send().await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "the upstream could not be reached");
                let id = x.request_id.as_ref();
                if let Some(id) = id {
                    x.session.interposer.no_answer(id);
                }
                let _ = reply.send(bad_gateway(
                    id,
                    "the upstream MCP server could not be reached",
                ));
                return;
            }
        };
        let session_header = self.sessions_after(&x, &response);
        let s = x.session;
        relay_response(
            response,
            s.interposer,
            session_header,
            x.request_id,
            true,
            reply,
        )
        .await;
    }

    /// The sessions once the upstream answered `response`: an `initialize` it accepted opens
    /// ours (the id the client gets); a 404 in a session means the upstream ended it, and so
    /// ours ends too (the client re-initializes).
    fn sessions_after(&self, x: &Exchange, response: &reqwest::Response) -> Option<String> {
        let status = response.status();
        if status == StatusCode::NOT_FOUND
            && let (Some(ours), Some(_)) = (&x.session.client_session, &x.session.upstream_session)
        {
            self.end_session(ours);
        }
        if !(x.session.opens_session && status.is_success()) {
            return None;
        }
        let upstream_id = header_str(response.headers(), SESSION_HEADER).map(str::to_owned);
        let interposer = x.session.interposer.clone();
        Some(self.open_session(x.agent_id.clone(), upstream_id, interposer))
    }
}
