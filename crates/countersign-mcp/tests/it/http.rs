//! `countersign mcp http` against the real approval service and an in-process Streamable HTTP
//! upstream (axum): bearer refusal, byte-exact pass-through (JSON and SSE), SSE events relayed as
//! they arrive, session mapping, and a held call that runs once after a softkey approval.

use crate::support::{Approver, Service, approval_status, base_config, service, temp};
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse as _, Response};
use countersign::Decision;
use countersign_audit::{AuditSealer, verify_log};
use countersign_mcp::Config;
use countersign_mcp::answer::APPROVAL_KEY;
use countersign_mcp::http::{
    AgentEntry, Agents, HEADER_MISMATCH_CODE, HttpRelay, UNAUTHORIZED_CODE,
};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const TOKEN_A: &str = "agent-a-bearer-credential";
const TOKEN_B: &str = "agent-b-bearer-credential";
const UP_SESSION: &str = "upstream-session-1";

/// One request the upstream received: HTTP method, headers, body bytes.
struct Seen {
    method: &'static str,
    headers: HeaderMap,
    body: String,
}

#[derive(Default)]
struct Upstream {
    seen: Mutex<Vec<Seen>>,
    /// `read_slowly` sends its result only once this is notified.
    gate: tokio::sync::Notify,
    /// The id of a `read_resumed` call: its POST stream closed after one event, and its result
    /// goes on the client's resumed `GET` stream.
    resumed: Mutex<Option<Value>>,
}

impl Upstream {
    fn record(&self, method: &'static str, headers: &HeaderMap, body: &str) {
        self.seen.lock().unwrap().push(Seen {
            method,
            headers: headers.clone(),
            body: body.to_owned(),
        });
    }
    fn count(&self) -> usize {
        self.seen.lock().unwrap().len()
    }
    fn calls_of(&self, tool: &str) -> Vec<String> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|s| {
                s.body.contains("\"tools/call\"") && s.body.contains(&format!("\"{tool}\""))
            })
            .map(|s| s.body.clone())
            .collect()
    }
    fn header_of_last(&self, method: &str, name: &str) -> Option<String> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .rev()
            .find(|s| s.method == method)
            .and_then(|s| s.headers.get(name))
            .map(|v| v.to_str().unwrap().to_owned())
    }
}

/// The SSE body the upstream sends for a `tools/call` of `name` (two progress events, then the
/// result), with `id:` lines, a comment and spacing a re-serializer would not keep.
fn sse_events(id: &Value, name: &str) -> [String; 3] {
    [
        "id: e1\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"p\",\"progress\":1}}\n\n".to_owned(),
        ": keep-alive comment\nid: e2\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"p\",\"progress\":2}}\r\n\r\n".to_owned(),
        format!("id: e3\ndata: {{\"jsonrpc\":\"2.0\", \"id\":{id},\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"ran {name}\"}}], \"x-ext\" : true}}}}\n\n"),
    ]
}

fn json_reply(body: String) -> Response {
    ([("content-type", "application/json")], body).into_response()
}

async fn up_post(State(up): State<Arc<Upstream>>, headers: HeaderMap, body: String) -> Response {
    up.record("POST", &headers, &body);
    let v: Value = serde_json::from_str(&body).unwrap_or_default();
    let method = v["method"].as_str().map(str::to_owned);
    let session = headers.get("mcp-session-id").map(|h| h.to_str().unwrap());
    // 2026-07-28 has no sessions: such a request is served without one.
    let stateless = headers
        .get("mcp-protocol-version")
        .is_some_and(|v| v == "2026-07-28");
    if method.as_deref() != Some("initialize") && session != Some(UP_SESSION) && !stateless {
        return (StatusCode::BAD_REQUEST, "no or unknown session").into_response();
    }
    let (Some(id), Some(method)) = (v.get("id").cloned(), method) else {
        return StatusCode::ACCEPTED.into_response();
    };
    match method.as_str() {
        "initialize" => {
            let mut r = json_reply(
                json!({"jsonrpc": "2.0", "id": id, "result": {"protocolVersion": v["params"]["protocolVersion"], "capabilities": {"tools": {}}, "serverInfo": {"name": "fake-http", "version": "1"}}}).to_string(),
            );
            r.headers_mut()
                .insert("mcp-session-id", UP_SESSION.parse().unwrap());
            r
        }
        "tools/list" => json_reply(
            json!({"jsonrpc": "2.0", "id": id, "result": {"tools": [
                {"name": "read_file", "description": "Read.", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true}},
                {"name": "read_slowly", "description": "Read slowly.", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true}},
                {"name": "write_file", "description": "Write.", "inputSchema": {"type": "object"}},
            ]}})
            .to_string(),
        ),
        // A stream closed before the result, resumable (an event id): the result comes on the
        // resumed GET stream, as the suite's sse-retry scenario and SEP-1699 polling do.
        "tools/call" if v["params"]["name"] == "read_resumed" => {
            *up.resumed.lock().unwrap() = Some(id);
            (
                [("content-type", "text/event-stream")],
                "id: r1\nretry: 10\ndata: \n\n",
            )
                .into_response()
        }
        "tools/call" => {
            let name = v["params"]["name"].as_str().unwrap_or_default().to_owned();
            let events = sse_events(&id, &name);
            let (tx, rx) = tokio::sync::mpsc::channel::<String>(4);
            let up = up.clone();
            tokio::spawn(async move {
                let [a, b, c] = events;
                tx.send(a).await.unwrap();
                tx.send(b).await.unwrap();
                if name == "read_slowly" {
                    up.gate.notified().await;
                }
                let _ = tx.send(c).await;
            });
            let body = Body::from_stream(futures_util::stream::unfold(rx, |mut rx| async move {
                rx.recv()
                    .await
                    .map(|s| (Ok::<_, std::convert::Infallible>(s), rx))
            }));
            ([("content-type", "text/event-stream")], body).into_response()
        }
        // An upstream that tries to send the client elsewhere.
        "redirect/me" => (
            StatusCode::TEMPORARY_REDIRECT,
            [("location", "http://127.0.0.1:9/elsewhere")],
        )
            .into_response(),
        // Anything else: a JSON answer spaced as no serializer would.
        other => json_reply(format!(
            "{{\"jsonrpc\":\"2.0\",  \"id\":{id}, \"result\":{{ \"echo\" : \"{other}\" }}}}"
        )),
    }
}

async fn up_get(State(up): State<Arc<Upstream>>, headers: HeaderMap) -> Response {
    up.record("GET", &headers, "");
    if headers.get("last-event-id").is_some()
        && let Some(id) = up.resumed.lock().unwrap().take()
    {
        let event = format!(
            "id: r2\ndata: {{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"content\":[]}}}}\n\n"
        );
        return ([("content-type", "text/event-stream")], event).into_response();
    }
    (
        [("content-type", "text/event-stream")],
        "id: g1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"hello\"}}\n\n",
    )
        .into_response()
}

async fn up_delete(State(up): State<Arc<Upstream>>, headers: HeaderMap) -> Response {
    up.record("DELETE", &headers, "");
    StatusCode::OK.into_response()
}

struct HttpRig {
    svc: Service,
    alice: Approver,
    upstream: Arc<Upstream>,
    url: String,
    http: reqwest::Client,
    audit: PathBuf,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    served: tokio::task::JoinHandle<std::io::Result<()>>,
}

fn agent(id: &str, token: &str) -> AgentEntry {
    AgentEntry {
        id: id.into(),
        token: Some(token.into()),
        token_file: None,
        token_sha256: None,
    }
}

async fn http_rig(name: &str) -> HttpRig {
    http_rig_with(name, |_| {}).await
}

/// [`http_rig`] with `adjust` applied to the interposer's configuration.
async fn http_rig_with(name: &str, adjust: impl FnOnce(&mut Config)) -> HttpRig {
    let alice = Approver::new("alice", "alice-es256");
    let svc = service(&[alice.record()]).await;
    let dir = temp(name);
    let mut config = base_config(&dir, &[alice.record()]);
    adjust(&mut config);
    let audit = config.audit_log.clone().unwrap();

    let upstream = Arc::new(Upstream::default());
    let up_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let up_url = format!("http://{}/mcp", up_listener.local_addr().unwrap());
    let app = axum::Router::new()
        .route(
            "/mcp",
            axum::routing::post(up_post).get(up_get).delete(up_delete),
        )
        .with_state(upstream.clone());
    tokio::spawn(async move {
        let _ = axum::serve(up_listener, app).await;
    });

    let base = countersign_mcp::interposer(
        svc.base.parse().unwrap(),
        countersign_client::GatewayToken::new(&svc.token).unwrap(),
        String::new(),
        "files".into(),
        config,
    )
    .await
    .unwrap();
    let agents =
        Agents::from_entries(&[agent("agent-a", TOKEN_A), agent("agent-b", TOKEN_B)]).unwrap();
    let relay = HttpRelay::new(base, agents, up_url.parse().unwrap());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(relay.serve(listener, async move {
        let _ = stopped.await;
    }));
    HttpRig {
        svc,
        alice,
        upstream,
        url,
        http: reqwest::Client::new(),
        audit,
        stop: Some(stop),
        served,
    }
}

impl HttpRig {
    async fn post(
        &self,
        bearer: Option<&str>,
        session: Option<&str>,
        body: &str,
    ) -> reqwest::Response {
        let mut r = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-11-25")
            .body(body.to_owned());
        if let Some(b) = bearer {
            r = r.bearer_auth(b);
        }
        if let Some(s) = session {
            r = r.header("mcp-session-id", s);
        }
        r.send().await.unwrap()
    }

    /// `initialize` (a client without URL elicitation) and `tools/list` for agent `bearer`; the
    /// client's session id.
    async fn open(&self, bearer: &str) -> String {
        let r = self
            .post(
                Some(bearer),
                None,
                r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
            )
            .await;
        assert_eq!(r.status(), 200);
        let session = r.headers()["mcp-session-id"].to_str().unwrap().to_owned();
        let r = self
            .post(
                Some(bearer),
                Some(&session),
                r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            )
            .await;
        assert_eq!(r.status(), 202);
        let r = self
            .post(
                Some(bearer),
                Some(&session),
                r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
            )
            .await;
        let listed: Value = r.json().await.unwrap();
        assert_eq!(listed["result"]["tools"][2]["name"], "write_file");
        session
    }

    /// A `tools/call` with `args` as exact text; the JSON-RPC answer (from JSON or from SSE).
    async fn call(&self, bearer: &str, session: &str, id: u64, tool: &str, args: &str) -> Value {
        let body = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"{tool}\",\"arguments\":{args}}}}}"
        );
        let r = self.post(Some(bearer), Some(session), &body).await;
        assert_eq!(r.status(), 200);
        let sse = r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream");
        let text = r.text().await.unwrap();
        if !sse {
            return serde_json::from_str(&text).unwrap();
        }
        text.lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .map(|d| serde_json::from_str::<Value>(d).unwrap())
            .find(|v| v.get("id") == Some(&json!(id)))
            .expect("the answer in the stream")
    }

    /// Agent A's `GET` of the server's stream in `session`, resumed after event `last`.
    async fn resume(&self, session: &str, last: &str) -> reqwest::Response {
        self.http
            .get(&self.url)
            .bearer_auth(TOKEN_A)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", session)
            .header("last-event-id", last)
            .send()
            .await
            .unwrap()
    }

    /// `DELETE` of `session` by agent `bearer` (the client ending its session).
    async fn delete(&self, bearer: &str, session: &str) -> reqwest::Response {
        self.http
            .delete(&self.url)
            .bearer_auth(bearer)
            .header("mcp-session-id", session)
            .send()
            .await
            .unwrap()
    }

    async fn stop(mut self) -> Vec<u8> {
        let _ = self.stop.take().unwrap().send(());
        let _ = tokio::time::timeout(Duration::from_secs(15), self.served).await;
        std::fs::read(&self.audit).unwrap()
    }
}

/// The body read chunk by chunk until `want` bytes or the end.
async fn read_until(r: &mut reqwest::Response, buf: &mut Vec<u8>, want: usize) {
    while buf.len() < want {
        let chunk = tokio::time::timeout(Duration::from_secs(30), r.chunk())
            .await
            .expect("more of the stream in time")
            .unwrap();
        match chunk {
            Some(c) => buf.extend_from_slice(&c),
            None => break,
        }
    }
}

#[tokio::test]
async fn http_without_a_known_bearer_is_refused_and_nothing_is_forwarded() {
    let rig = http_rig("http-bearer").await;
    let init = r#"{"jsonrpc":"2.0","id":5,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    for bearer in [None, Some("not-a-known-agent-token"), Some("")] {
        let r = rig.post(bearer, None, init).await;
        assert_eq!(r.status(), 401, "{bearer:?}");
        assert!(r.headers().contains_key("www-authenticate"));
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["jsonrpc"], "2.0");
        assert_eq!(body["id"], 5);
        assert_eq!(body["error"]["code"], UNAUTHORIZED_CODE);
    }
    // `Basic` with the right token is still not a bearer credential.
    let r = rig
        .http
        .post(&rig.url)
        .header("authorization", format!("Basic {TOKEN_A}"))
        .body(init)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(rig.http.get(&rig.url).send().await.unwrap().status(), 401);
    assert_eq!(
        rig.http.delete(&rig.url).send().await.unwrap().status(),
        401
    );
    assert_eq!(rig.upstream.count(), 0, "nothing reached the upstream");
    rig.stop().await;
}

#[tokio::test]
async fn http_passes_through_byte_exact_and_maps_sessions() {
    let rig = http_rig("http-pass").await;
    let session = rig.open(TOKEN_A).await;
    assert_ne!(
        session, UP_SESSION,
        "the client gets the interposer's own session id"
    );
    assert_eq!(
        rig.upstream
            .header_of_last("POST", "mcp-session-id")
            .as_deref(),
        Some(UP_SESSION),
        "mapped to the upstream's on the way in"
    );
    assert_eq!(
        rig.upstream
            .header_of_last("POST", "mcp-protocol-version")
            .as_deref(),
        Some("2025-11-25")
    );
    assert_eq!(
        rig.upstream.header_of_last("POST", "accept").as_deref(),
        Some("application/json, text/event-stream")
    );
    assert_eq!(
        rig.upstream.header_of_last("POST", "authorization"),
        None,
        "the agent's credential stays with the interposer"
    );

    // An allowed call: the upstream gets the exact bytes, the client the exact event stream.
    let body = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"read_file","arguments":{"path" : "/a",  "n":1.50}}}"#;
    let r = rig.post(Some(TOKEN_A), Some(&session), body).await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "text/event-stream");
    assert!(!r.headers().contains_key("mcp-session-id"));
    let got = r.bytes().await.unwrap();
    assert_eq!(
        String::from_utf8_lossy(&got),
        sse_events(&json!(7), "read_file").concat(),
        "every event byte for byte, in order"
    );
    let sent = rig.upstream.calls_of("read_file");
    assert_eq!(sent.len(), 1);
    assert_eq!(crate::support::as_client_sent(&sent[0], "7"), body);

    // A method the interposer does not decode: the JSON answer byte for byte.
    let r = rig
        .post(
            Some(TOKEN_A),
            Some(&session),
            r#"{"jsonrpc":"2.0","id":8,"method":"vendor/thing","params":{"a" : [1,2]}}"#,
        )
        .await;
    assert_eq!(
        r.text().await.unwrap(),
        r#"{"jsonrpc":"2.0",  "id":8, "result":{ "echo" : "vendor/thing" }}"#
    );

    // The server's own stream (GET), with the resumption header and the mapped session.
    let r = rig.resume(&session, "e2").await;
    assert_eq!(r.status(), 200);
    assert!(r.text().await.unwrap().contains("\"hello\""));
    assert_eq!(
        rig.upstream
            .header_of_last("GET", "last-event-id")
            .as_deref(),
        Some("e2")
    );
    assert_eq!(
        rig.upstream
            .header_of_last("GET", "mcp-session-id")
            .as_deref(),
        Some(UP_SESSION)
    );

    // Another agent's credential with this session id, or a made-up id: not found.
    let ping = r#"{"jsonrpc":"2.0","id":9,"method":"ping"}"#;
    let before = rig.upstream.count();
    assert_eq!(
        rig.post(Some(TOKEN_B), Some(&session), ping).await.status(),
        404
    );
    assert_eq!(
        rig.post(Some(TOKEN_A), Some("made-up"), ping)
            .await
            .status(),
        404
    );
    assert_eq!(rig.upstream.count(), before);

    // DELETE ends both sessions.
    let r = rig.delete(TOKEN_A, &session).await;
    assert_eq!(r.status(), 200);
    assert_eq!(
        rig.upstream
            .header_of_last("DELETE", "mcp-session-id")
            .as_deref(),
        Some(UP_SESSION)
    );
    assert_eq!(
        rig.post(Some(TOKEN_A), Some(&session), ping).await.status(),
        404
    );

    let audit = rig.audit.clone();
    let bytes = rig.stop().await;
    let lines: Vec<Value> = String::from_utf8_lossy(&bytes)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let call = lines.iter().find(|l| l["kind"] == "mcp_call").unwrap();
    assert_eq!(call["agent_id"], "agent-a", "the agent its bearer names");
    let outcome = lines.iter().find(|l| l["kind"] == "mcp_outcome").unwrap();
    assert_eq!(outcome["outcome"], "allowed");
    assert_eq!(outcome["upstream"], "ok", "read from the SSE stream");
    assert_eq!(lines.last().unwrap()["kind"], "mcp_close");
    let key = AuditSealer::load_or_create(&audit.with_extension("key")).unwrap();
    let report = verify_log(&bytes, &key.public_key());
    assert!(report.issues.is_empty(), "{report:?}");
}

#[tokio::test]
async fn http_result_on_the_resumed_stream_reaches_the_client_and_is_audited_as_answered() {
    let rig = http_rig("http-resumed").await;
    let session = rig.open(TOKEN_A).await;
    let call = r#"{"jsonrpc":"2.0","id":"c-7","method":"tools/call","params":{"name":"read_resumed","arguments":{}}}"#;
    let r = rig.post(Some(TOKEN_A), Some(&session), call).await;
    // The POST stream ends after its one (priming) event, without the result.
    assert_eq!(r.text().await.unwrap(), "id: r1\nretry: 10\ndata: \n\n");
    let resumed = rig.resume(&session, "r1").await.text().await.unwrap();
    let answer: Value = resumed
        .lines()
        .find_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .expect("the result on the resumed stream");
    assert_eq!(answer["id"], "c-7", "under the client's own id");
    assert_eq!(answer["result"]["content"], json!([]));

    let bytes = rig.stop().await;
    let lines: Vec<Value> = String::from_utf8_lossy(&bytes)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let outcomes: Vec<&Value> = lines
        .iter()
        .filter(|l| l["kind"] == "mcp_outcome")
        .collect();
    assert_eq!(outcomes.len(), 1, "{lines:?}");
    assert_eq!(outcomes[0]["upstream"], "ok", "answered, not no_answer");
}

#[tokio::test]
async fn http_sse_events_reach_the_client_as_they_arrive() {
    let rig = http_rig("http-sse").await;
    let session = rig.open(TOKEN_A).await;
    let mut r = rig
        .post(
            Some(TOKEN_A),
            Some(&session),
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"read_slowly","arguments":{},"_meta":{"progressToken":"p"}}}"#,
        )
        .await;
    let [first, second, last] = sse_events(&json!(3), "read_slowly");
    // The upstream holds its result back until released: both progress events must already be
    // here, in order (nothing buffered until the end of the stream).
    let mut got = Vec::new();
    read_until(&mut r, &mut got, first.len() + second.len()).await;
    assert_eq!(String::from_utf8_lossy(&got), format!("{first}{second}"));
    rig.upstream.gate.notify_one();
    read_until(&mut r, &mut got, usize::MAX).await;
    assert_eq!(
        String::from_utf8_lossy(&got),
        format!("{first}{second}{last}")
    );
    rig.stop().await;
}

#[tokio::test]
async fn http_held_call_runs_once_after_approval_and_a_third_is_held_again() {
    let rig = http_rig("http-held").await;
    let session = rig.open(TOKEN_A).await;
    let args = r#"{"path":"/x", "content":"hi"}"#;
    let first = rig.call(TOKEN_A, &session, 10, "write_file", args).await;
    assert_eq!(first["id"], 10);
    assert_eq!(first["result"]["isError"], true, "{first}");
    let ticket = &first["result"]["_meta"][APPROVAL_KEY];
    let id = ticket["approval_id"].as_str().unwrap().to_owned();
    let op_hash = ticket["op_hash"].as_str().unwrap().to_owned();
    assert!(rig.upstream.calls_of("write_file").is_empty());

    // The same call from another agent is another op_hash (the agent comes from the bearer),
    // so another approval: agent-a's approval can never release it.
    let session_b = rig.open(TOKEN_B).await;
    let other = rig.call(TOKEN_B, &session_b, 10, "write_file", args).await;
    let other_ticket = &other["result"]["_meta"][APPROVAL_KEY];
    assert_ne!(other_ticket["op_hash"].as_str().unwrap(), op_hash);
    assert_ne!(other_ticket["approval_id"].as_str().unwrap(), id);

    rig.alice.decide(&rig.svc, &id, Decision::Approved).await;
    let ran = rig.call(TOKEN_A, &session, 11, "write_file", args).await;
    assert_eq!(
        ran["result"]["content"][0]["text"], "ran write_file",
        "{ran}"
    );
    let sent = rig.upstream.calls_of("write_file");
    assert_eq!(sent.len(), 1, "executed exactly once");
    assert!(sent[0].contains(args), "the exact argument bytes");

    // agent-b's identical call is still held: the approval was agent-a's.
    let b_again = rig.call(TOKEN_B, &session_b, 11, "write_file", args).await;
    assert_eq!(b_again["result"]["isError"], true, "{b_again}");

    let third = rig.call(TOKEN_A, &session, 12, "write_file", args).await;
    assert_eq!(third["result"]["isError"], true, "{third}");
    assert_ne!(
        third["result"]["_meta"][APPROVAL_KEY]["approval_id"]
            .as_str()
            .unwrap(),
        id,
        "a new approval: the grant is spent"
    );
    assert_eq!(rig.upstream.calls_of("write_file").len(), 1);

    let bytes = rig.stop().await;
    let lines: Vec<Value> = String::from_utf8_lossy(&bytes)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let executed: Vec<_> = lines
        .iter()
        .filter(|l| l["outcome"] == "executed")
        .collect();
    assert_eq!(executed.len(), 1);
    assert_eq!(executed[0]["approval_ref"], id.as_str());
    assert_eq!(executed[0]["upstream"], "ok");
}

#[tokio::test]
async fn http_cancel_of_a_parked_retry_drops_only_its_response() {
    let rig = http_rig("http-cancel").await;
    let session = rig.open(TOKEN_A).await;
    let args = r#"{"path":"/c"}"#;
    let first = rig.call(TOKEN_A, &session, 20, "write_file", args).await;
    let id = first["result"]["_meta"][APPROVAL_KEY]["approval_id"]
        .as_str()
        .unwrap()
        .to_owned();
    // The retry parks (for up to park_seconds = 2) on its own POST.
    let body = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":21,\"method\":\"tools/call\",\"params\":{{\"name\":\"write_file\",\"arguments\":{args}}}}}"
    );
    let parked = {
        let (http, url, session) = (rig.http.clone(), rig.url.clone(), session.clone());
        tokio::spawn(async move {
            http.post(url)
                .bearer_auth(TOKEN_A)
                .header("mcp-session-id", session)
                .header("accept", "application/json, text/event-stream")
                .body(body)
                .send()
                .await
                .unwrap()
        })
    };
    // Same wait as the stdio test: the cancel must find the park registered.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let r = rig
        .post(
            Some(TOKEN_A),
            Some(&session),
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":21,"reason":"timeout"}}"#,
        )
        .await;
    assert_eq!(r.status(), 202, "consumed by the interposer");
    let parked = tokio::time::timeout(Duration::from_secs(30), parked)
        .await
        .expect("the parked request ends")
        .unwrap();
    assert_eq!(parked.status(), 202, "no answer for a cancelled request");
    assert!(parked.text().await.unwrap().is_empty());
    // Nothing went upstream: neither the call nor the cancel; the approval is still pending.
    assert!(rig.upstream.calls_of("write_file").is_empty());
    assert!(
        !rig.upstream
            .seen
            .lock()
            .unwrap()
            .iter()
            .any(|s| s.body.contains("notifications/cancelled"))
    );
    let status: Value = rig
        .svc
        .http
        .get(format!("{}/v1/approvals/{id}", rig.svc.base))
        .bearer_auth(&rig.svc.token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(status["status"], "PENDING");
    rig.stop().await;
}

#[tokio::test]
async fn http_cancel_on_disconnect_withdraws_when_the_client_deletes_its_session() {
    let rig = http_rig_with("http-disconnect", |c| c.cancel_on_disconnect = true).await;
    let args = r#"{"path":"/d"}"#;
    let held = |r: &Value| {
        r["result"]["_meta"][APPROVAL_KEY]["approval_id"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let leaving = rig.open(TOKEN_A).await;
    let withdrawn = held(&rig.call(TOKEN_A, &leaving, 10, "write_file", args).await);
    let staying = rig.open(TOKEN_B).await;
    let kept = held(&rig.call(TOKEN_B, &staying, 10, "write_file", args).await);
    let r = rig.delete(TOKEN_A, &leaving).await;
    assert!(r.status().is_success(), "{}", r.status());
    // Withdrawn before the DELETE was answered; the other agent's session is untouched.
    let status = approval_status(&rig.svc, &withdrawn).await;
    assert_eq!(status["status"], "DENIED", "{status}");
    assert_eq!(status["reason_code"], "cancelled", "{status}");
    assert_eq!(approval_status(&rig.svc, &kept).await["status"], "PENDING");
    rig.stop().await;
}

#[tokio::test]
async fn http_a_held_call_sent_as_a_task_runs_once_when_approved() {
    let rig = http_rig("http-task").await;
    let session = rig.open(TOKEN_A).await;
    let listed: Value = rig
        .post(
            Some(TOKEN_A),
            Some(&session),
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#,
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        listed["result"]["tools"][2]["execution"]["taskSupport"],
        "optional"
    );

    let args = r#"{"path":"/t", "content":"hi"}"#;
    let body = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":20,\"method\":\"tools/call\",\"params\":{{\"name\":\"write_file\",\"arguments\":{args},\"task\":{{\"ttl\":60000}}}}}}"
    );
    let created: Value = rig
        .post(Some(TOKEN_A), Some(&session), &body)
        .await
        .json()
        .await
        .unwrap();
    let task_id = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    let id = created["result"]["_meta"][APPROVAL_KEY]["approval_id"]
        .as_str()
        .unwrap()
        .to_owned();
    rig.alice.decide(&rig.svc, &id, Decision::Approved).await;

    // No client request is under way when the verdict lands: the session's own way upstream
    // carries the call, in the upstream session.
    let mut status = Value::Null;
    for n in 0..600 {
        let get = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"tasks/get\",\"params\":{{\"taskId\":\"{task_id}\"}}}}",
            100 + n
        );
        status = rig
            .post(Some(TOKEN_A), Some(&session), &get)
            .await
            .json()
            .await
            .unwrap();
        if status["result"]["status"] != "working" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(status["result"]["status"], "completed", "{status}");
    let sent = rig.upstream.calls_of("write_file");
    assert_eq!(sent.len(), 1, "executed exactly once");
    assert!(
        sent[0].contains(args) && !sent[0].contains("\"task\""),
        "{}",
        sent[0]
    );
    let result: Value = rig
        .post(
            Some(TOKEN_A),
            Some(&session),
            &format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tasks/result\",\"params\":{{\"taskId\":\"{task_id}\"}}}}"
            ),
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        result["result"]["content"][0]["text"], "ran write_file",
        "{result}"
    );

    let bytes = rig.stop().await;
    let executed: Vec<Value> = String::from_utf8_lossy(&bytes)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|l| l["outcome"] == "executed")
        .collect();
    assert_eq!(executed.len(), 1);
    assert_eq!(executed[0]["approval_ref"], id.as_str());
    assert_eq!(executed[0]["upstream"], "ok");
}

#[tokio::test]
async fn http_an_upstream_redirect_is_not_followed() {
    let rig = http_rig("http-redirect").await;
    let session = rig.open(TOKEN_A).await;
    let r = rig
        .post(
            Some(TOKEN_A),
            Some(&session),
            r#"{"jsonrpc":"2.0","id":5,"method":"redirect/me"}"#,
        )
        .await;
    // Relayed as the upstream said it, never re-sent to where it points.
    assert_eq!(r.status(), 307);
    assert_eq!(
        rig.upstream.count(),
        4,
        "initialize, initialized, tools/list, this"
    );
}

impl HttpRig {
    /// A POST as agent A in `session` with `headers` added.
    async fn post_with(
        &self,
        session: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> reqwest::Response {
        let mut r = self
            .post_as_a()
            .header("mcp-session-id", session)
            .body(body.to_owned());
        for (name, value) in headers {
            r = r.header(*name, *value);
        }
        r.send().await.unwrap()
    }
}

/// The review's frames over `mcp http`: a body the interposer cannot read as one message is
/// answered 400 with its JSON-RPC error (under its id when one can be read), and nothing of it
/// reaches the upstream.
#[tokio::test]
async fn http_bodies_other_readers_take_differently_get_400_and_go_nowhere() {
    let rig = http_rig("http-edge-admission").await;
    let session = rig.open(TOKEN_A).await;
    let before = rig.upstream.count();
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    let call = |id: u64, params: &str| {
        format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{params}}}"#)
    };
    let cases = [
        (
            call(
                11,
                &format!(r#"{{"name":"write_file","arguments":{{"pad":{deep}}}}}"#),
            ),
            json!(11),
            -32700,
        ),
        (
            call(
                12,
                r#"{"name":"write_file","arguments":{"path":"x\ud800"}}"#,
            ),
            json!(12),
            -32700,
        ),
        (
            call(13, r#"{"name":"write_file","arguments":{"n":1e400}}"#),
            json!(13),
            -32700,
        ),
        (
            call(
                14,
                r#"{"name":"read_file","Name":"write_file","arguments":{}}"#,
            ),
            json!(14),
            -32600,
        ),
        (
            format!(
                "{}\n{}",
                call(15, r#"{"name":"read_file"}"#),
                call(16, r#"{"name":"write_file"}"#)
            ),
            json!(15),
            -32700,
        ),
        ("[1,2".to_owned(), Value::Null, -32700),
    ];
    for (body, id, code) in &cases {
        let r = rig.post(Some(TOKEN_A), Some(&session), body).await;
        assert_eq!(r.status(), 400, "{body:.80}");
        let answer: Value = r.json().await.unwrap();
        assert_eq!(answer["id"], *id, "{answer}");
        assert_eq!(answer["error"]["code"], *code, "{answer}");
    }
    assert_eq!(rig.upstream.count(), before, "nothing reached the upstream");
    // One trailing line break is no second frame.
    let r = rig
        .post(
            Some(TOKEN_A),
            Some(&session),
            &format!("{}\r\n", call(17, r#"{"name":"read_file","arguments":{}}"#)),
        )
        .await;
    assert_eq!(r.status(), 200);
    assert_eq!(rig.upstream.count(), before + 1);
    rig.stop().await;
}

#[tokio::test]
async fn http_routing_headers_must_restate_the_body_on_every_post() {
    let rig = http_rig("http-edge-headers").await;
    let session = rig.open(TOKEN_A).await;
    let before = rig.upstream.count();
    let write = r#"{"jsonrpc":"2.0","id":21,"method":"tools/call","params":{"name":"write_file","arguments":{}}}"#;
    let list = r#"{"jsonrpc":"2.0","id":22,"method":"tools/list"}"#;
    let read = r#"{"jsonrpc":"2.0","id":23,"method":"tools/call","params":{"name":"read_file","arguments":{}}}"#;
    let refused: [(&str, &[(&str, &str)]); 5] = [
        // A gateway that routes on Mcp-Method sees a harmless list; the body is a write.
        (write, &[("mcp-method", "tools/list")]),
        (
            list,
            &[("mcp-method", "tools/call"), ("mcp-name", "write_file")],
        ),
        // A name header on a message that names nothing.
        (list, &[("mcp-name", "write_file")]),
        (write, &[("mcp-name", "read_file")]),
        (
            read,
            &[("mcp-method", "tools/call"), ("mcp-method", "tools/call")],
        ),
    ];
    for (body, headers) in refused {
        let r = rig.post_with(&session, headers, body).await;
        assert_eq!(r.status(), 400, "{headers:?}");
        let answer: Value = r.json().await.unwrap();
        assert_eq!(answer["error"]["code"], HEADER_MISMATCH_CODE, "{answer}");
    }
    assert_eq!(rig.upstream.count(), before, "nothing reached the upstream");
    let r = rig
        .post_with(
            &session,
            &[("mcp-method", "tools/call"), ("mcp-name", "read_file")],
            read,
        )
        .await;
    assert_eq!(r.status(), 200);
    assert_eq!(rig.upstream.count(), before + 1);
    rig.stop().await;
}

impl HttpRig {
    /// An `initialize` POST as agent A carrying `Host: host`: the status it gets.
    async fn initialize_as_host(&self, host: &str) -> u16 {
        let init = r#"{"jsonrpc":"2.0","id":5,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
        self.http
            .post(&self.url)
            .bearer_auth(TOKEN_A)
            .header("host", host)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(init)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    }
}

#[tokio::test]
async fn http_a_host_that_is_not_the_relays_is_refused_with_or_without_origin() {
    let rig = http_rig("http-edge-host").await;
    // A page on an attacker's name that resolves to 127.0.0.1 (DNS rebinding), no Origin.
    for host in [
        "attacker.example",
        "attacker.example:8080",
        "127.0.0.1.attacker.example",
    ] {
        assert_eq!(rig.initialize_as_host(host).await, 403, "{host}");
        let r = rig
            .http
            .get(&rig.url)
            .bearer_auth(TOKEN_A)
            .header("host", host)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 403, "GET {host}");
    }
    assert_eq!(rig.upstream.count(), 0, "nothing reached the upstream");
    for host in ["localhost", "localhost:1234", "127.0.0.1", "[::1]:9"] {
        assert_eq!(rig.initialize_as_host(host).await, 200, "{host}");
    }
    rig.stop().await;
}

#[tokio::test]
async fn http_allowed_hosts_lets_a_named_host_in() {
    let rig = http_rig_with("http-edge-named-host", |c| {
        c.allowed_hosts = vec!["mcp.internal.example".into()];
    })
    .await;
    for (host, status) in [
        ("MCP.internal.example:443", 200),
        ("other.internal.example", 403),
    ] {
        assert_eq!(rig.initialize_as_host(host).await, status, "{host}");
    }
    rig.stop().await;
}

/// Over HTTP each POST is its own exchange, but the interposer's books are per session: a
/// second request under an id still in flight there is refused, and the upstream never sees a
/// client's id.
#[tokio::test]
async fn http_a_request_id_in_flight_is_not_taken_twice() {
    let rig = http_rig("http-edge-inflight").await;
    let session = rig.open(TOKEN_A).await;
    let slow = rig
        .http
        .post(&rig.url)
        .bearer_auth(TOKEN_A)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", &session)
        .body(r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"read_slowly","arguments":{}}}"#)
        .send();
    let slow = tokio::spawn(slow);
    // Wait until the slow call is upstream (its events are flowing).
    while rig.upstream.calls_of("read_slowly").is_empty() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let again = rig
        .post(
            Some(TOKEN_A),
            Some(&session),
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"read_file","arguments":{}}}"#,
        )
        .await;
    let answer: Value = again.json().await.unwrap();
    assert_eq!(answer["id"], 7, "{answer}");
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    assert!(rig.upstream.calls_of("read_file").is_empty());
    rig.upstream.gate.notify_one();
    let slow = slow.await.unwrap().unwrap().text().await.unwrap();
    assert!(slow.contains("\"id\":7"), "{slow}");
    let sent = rig.upstream.calls_of("read_slowly");
    let v: Value = serde_json::from_str(&sent[0]).unwrap();
    assert!(v["id"].as_str().unwrap().starts_with("cs-"), "{}", sent[0]);
    rig.stop().await;
}

impl HttpRig {
    /// `tasks/get` (2026-07-28, routed by `Mcp-Name`) until the task leaves `working` (bounded
    /// only against a hang).
    async fn settled_2026(&self, task_id: &str, meta: &str) -> Value {
        for n in 100..700 {
            let params = format!(r#"{{"taskId":"{task_id}","_meta":{meta}}}"#);
            let get =
                format!(r#"{{"jsonrpc":"2.0","id":{n},"method":"tasks/get","params":{params}}}"#);
            let answer = self.post_2026("tasks/get", Some(task_id), &get).await;
            if answer["result"]["status"] != "working" {
                return answer;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("task {task_id} never settled");
    }

    /// A POST to the relay as agent A, a JSON body, either answer form accepted.
    fn post_as_a(&self) -> reqwest::RequestBuilder {
        self.http
            .post(&self.url)
            .bearer_auth(TOKEN_A)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
    }

    /// A 2026-07-28 POST as agent A: no session, the revision in its header, the routing headers
    /// the revision asks for (`Mcp-Method`, and `Mcp-Name` when given); the JSON answer.
    async fn post_2026(&self, method: &str, name: Option<&str>, body: &str) -> Value {
        let mut r = self
            .post_as_a()
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", method)
            .body(body.to_owned());
        if let Some(name) = name {
            r = r.header("mcp-name", name);
        }
        let r = r.send().await.unwrap();
        assert_eq!(r.status(), 200, "{method}");
        r.json().await.unwrap()
    }
}

/// The tasks extension over Streamable HTTP with no session: the task is the agent's, its
/// `tasks/get` routes by `Mcp-Name: <taskId>` as SEP-2663 asks, and the approved call runs once.
#[tokio::test]
async fn http_a_2026_07_28_client_gets_a_task_handle_without_a_session() {
    let rig = http_rig("http-task-ext").await;
    let meta = r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}"#;
    let args = r#"{"path":"/x"}"#;
    let body = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{{\"name\":\"write_file\",\"arguments\":{args},\"_meta\":{meta}}}}}"
    );
    let created = rig.post_2026("tools/call", Some("write_file"), &body).await;
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    let task_id = created["result"]["taskId"].as_str().unwrap().to_owned();
    let id = crate::support::approval_id(&created);
    rig.alice.decide(&rig.svc, &id, Decision::Approved).await;
    let status = rig.settled_2026(&task_id, meta).await;
    assert_eq!(status["result"]["status"], "completed", "{status}");
    assert_eq!(
        status["result"]["result"]["content"][0]["text"],
        "ran write_file"
    );
    let sent = rig.upstream.calls_of("write_file");
    assert_eq!(sent.len(), 1, "executed exactly once");
    assert!(
        sent[0].contains(args) && !sent[0].contains("io.modelcontextprotocol/tasks"),
        "{}",
        sent[0]
    );
    assert_eq!(
        rig.upstream.header_of_last("POST", "mcp-name").as_deref(),
        Some("write_file"),
        "the task's call carries the 2026-07-28 routing headers"
    );
    let bytes = rig.stop().await;
    let executed = String::from_utf8_lossy(&bytes)
        .lines()
        .filter(|l| l.contains("\"executed\""))
        .count();
    assert_eq!(executed, 1);
}
