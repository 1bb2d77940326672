//! The interposer against the real approval service (in process, 127.0.0.1:0), a scripted MCP
//! server and a scripted client over in-memory pipes; the approver signs with a software key.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "test code: a panic is a failed test (clippy.toml covers #[test] fns, not helpers)"
)]

use countersign::{CredentialRecord, Decision, b64};
use countersign_mcp::answer::APPROVAL_KEY;
use countersign_mcp::{Config, Interposer};
use countersign_server::audit::{AuditSealer, IssueClass, verify_log};
use countersign_server::store::SqliteStore;
use countersign_server::{AppState, AssertionBody, StateParts, SystemClock};
use countersign_softkey::{AssertionRequest, SoftKey};
use countersign_testkit::{ORIGIN, RP_ID};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader, DuplexStream};

struct Service {
    base: String,
    token: String,
    http: reqwest::Client,
    _server: tokio::task::JoinHandle<()>,
}

async fn service(enrolled: &[CredentialRecord]) -> Service {
    let config = countersign_server::Config::from_toml(&format!(
        "rp_id = \"{RP_ID}\"\norigins = [\"{ORIGIN}\"]\n[timeouts]\napproval_seconds = 300\nlong_poll_max_seconds = 30\n"
    ))
    .unwrap();
    let sealer = AuditSealer::from_seed([42; 32]);
    let store = SqliteStore::in_memory(sealer.clone()).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let state = AppState::new(StateParts {
        config,
        public_url: base.clone(),
        store: Arc::new(store),
        clock: Arc::new(SystemClock),
        sealer,
        mirror: None,
    })
    .unwrap();
    state.enroll(enrolled.to_vec()).await.unwrap();
    let token = state.add_gateway("mcp").await.unwrap();
    let router = countersign_server::build_router(state);
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    Service {
        base,
        token,
        http: reqwest::Client::new(),
        _server: server,
    }
}

struct Approver {
    principal: String,
    key: SoftKey,
    counter: AtomicU32,
}

impl Approver {
    fn new(principal: &str, fixture: &str) -> Self {
        Self {
            principal: principal.into(),
            key: countersign_testkit::key(fixture),
            counter: AtomicU32::new(0),
        }
    }
    fn record(&self) -> CredentialRecord {
        countersign_testkit::enroll(&self.key, &self.principal)
    }
    fn sign(&self, challenge: Vec<u8>) -> Value {
        let request = AssertionRequest {
            sign_count: self.counter.fetch_add(1, Ordering::SeqCst) + 1,
            ..AssertionRequest::new(RP_ID, ORIGIN, challenge)
        };
        let r = self.key.assert(&request).unwrap();
        serde_json::to_value(AssertionBody {
            credential_id: b64::encode(&r.credential_id),
            client_data_json: b64::encode(&r.client_data_json),
            authenticator_data: b64::encode(&r.authenticator_data),
            signature: b64::encode(&r.signature),
        })
        .unwrap()
    }
    async fn post(svc: &Service, path: &str, token: Option<&str>, body: &Value) -> Value {
        let mut req = svc.http.post(format!("{}{path}", svc.base)).json(body);
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let r = req.send().await.unwrap();
        let status = r.status();
        let body: Value = r.json().await.unwrap();
        assert!(status.is_success(), "{path}: {status} {body}");
        body
    }
    /// Sign in, fetch the challenge for `decision` on `id`, sign and submit it.
    async fn decide(&self, svc: &Service, id: &str, decision: Decision) {
        let c = Self::post(svc, "/v1/approver/login/challenge", None, &json!({})).await;
        let challenge = b64::decode(c["challenge"].as_str().unwrap()).unwrap();
        let login = Self::post(svc, "/v1/approver/login", None, &self.sign(challenge)).await;
        let token = login["token"].as_str().unwrap().to_owned();
        let c = Self::post(
            svc,
            &format!("/v1/approver/approvals/{id}/challenge"),
            Some(&token),
            &json!({ "decision": decision }),
        )
        .await;
        let challenge = b64::decode(c["challenge"].as_str().unwrap()).unwrap();
        Self::post(
            svc,
            &format!("/v1/approver/approvals/{id}/decision"),
            Some(&token),
            &self.sign(challenge),
        )
        .await;
    }
}

/// `upstream_line` as the client sent it: the id the interposer forwarded it under (its own,
/// `"cs-…"`) swapped back for the client's id text. Every other byte must be the client's.
fn as_client_sent(upstream_line: &str, client_id: &str) -> String {
    let v: Value = serde_json::from_str(upstream_line).unwrap();
    let ours = v["id"].as_str().expect("an id of the interposer's own");
    assert!(ours.starts_with("cs-"), "{upstream_line}");
    upstream_line.replacen(&format!("\"{ours}\""), client_id, 1)
}

/// What the scripted upstream saw: every line, exactly.
#[derive(Default)]
struct Upstream {
    lines: Mutex<Vec<String>>,
}

impl Upstream {
    fn calls_of(&self, tool: &str) -> Vec<String> {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains("\"tools/call\"") && l.contains(&format!("\"{tool}\"")))
            .cloned()
            .collect()
    }
}

/// A minimal MCP server: initialize, tools/list (read_file read-only, write_file), tools/call
/// answers "ran"; it sends a progress notification before each call's answer.
async fn upstream(io: DuplexStream, seen: Arc<Upstream>) {
    let (r, mut w) = tokio::io::split(io);
    let mut lines = BufReader::new(r).lines();
    let mut parked = Vec::new();
    while let Ok(Some(line)) = lines.next_line().await {
        seen.lines.lock().unwrap().push(line.clone());
        let v: Value = serde_json::from_str(&line).unwrap_or_default();
        let id = v.get("id").cloned();
        let answer = match v["method"].as_str() {
            Some("initialize") => {
                json!({"protocolVersion": v["params"]["protocolVersion"], "capabilities": {"tools": {}}, "serverInfo": {"name": "fake", "version": "1"}})
            }
            Some("tools/list") => json!({"tools": [
                {"name": "read_file", "description": "Read.", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true}},
                {"name": "write_file", "description": "Write.", "inputSchema": {"type": "object"}, "annotations": {"destructiveHint": true}},
                {"name": "read_slow", "description": "Read, slowly.", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true}},
            ]}),
            // A 2026-07-28 tool that asks the client a question before it runs (its own multi
            // round trip), and runs once the client answers with its state.
            Some("tools/call") if v["params"]["name"] == "ask_file" => {
                if v["params"]["requestState"] == "upstream-state-1"
                    && v["params"]["inputResponses"]["q"].is_object()
                {
                    json!({"resultType": "complete", "content": [{"type": "text", "text": "ran ask_file"}]})
                } else {
                    json!({"resultType": "input_required", "requestState": "upstream-state-1",
                           "inputRequests": {"q": {"method": "elicitation/create",
                             "params": {"mode": "form", "message": "Sure?", "requestedSchema": {"type": "object"}}}}})
                }
            }
            // An allowed call the upstream answers only when told to (`vendor/release`): a
            // call that stays in flight while others come.
            Some("tools/call") if v["params"]["name"] == "read_slow" => {
                parked.push(id.clone());
                continue;
            }
            Some("vendor/release") => {
                for id in parked.drain(..) {
                    let text = json!([{"type": "text", "text": "ran read_slow"}]);
                    let frame = json!({"jsonrpc": "2.0", "id": id, "result": {"content": text}});
                    w.write_all(format!("{frame}\n").as_bytes()).await.unwrap();
                }
                json!({})
            }
            Some("tools/call") => {
                let note = json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": "p", "progress": 1}});
                w.write_all(format!("{note}\n").as_bytes()).await.unwrap();
                json!({"content": [{"type": "text", "text": format!("ran {}", v["params"]["name"])}], "x-extension": {"kept": true}})
            }
            _ => json!({}),
        };
        if let Some(id) = id {
            let frame = json!({"jsonrpc": "2.0", "id": id, "result": answer});
            w.write_all(format!("{frame}\n").as_bytes()).await.unwrap();
        }
    }
}

/// The client's end of the interposer.
struct Client {
    w: tokio::io::WriteHalf<DuplexStream>,
    lines: tokio::io::Lines<BufReader<tokio::io::ReadHalf<DuplexStream>>>,
    next: u64,
}

impl Client {
    async fn send_line(&mut self, line: &str) {
        self.w
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
    }
    async fn recv(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(30), self.lines.next_line())
            .await
            .expect("an answer in time")
            .unwrap()
            .expect("the interposer closed");
        serde_json::from_str(&line).unwrap()
    }
    /// Send a request and return its response (skipping notifications).
    async fn request(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        let frame = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_line(&frame.to_string()).await;
        self.response(id).await
    }
    async fn response(&mut self, id: u64) -> Value {
        loop {
            let v = self.recv().await;
            if v.get("id") == Some(&json!(id)) {
                return v;
            }
        }
    }
    /// A tools/call whose arguments are `args` as text, exactly.
    async fn call_raw(&mut self, tool: &str, args: &str) -> Value {
        self.next += 1;
        let id = self.next;
        let line = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"{tool}\",\"arguments\":{args}}}}}"
        );
        self.send_line(&line).await;
        self.response(id).await
    }
}

struct Rig {
    svc: Service,
    alice: Approver,
    upstream: Arc<Upstream>,
    client: Client,
    interposer: Arc<Interposer>,
    run: tokio::task::JoinHandle<std::io::Result<()>>,
    audit: PathBuf,
}

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "cs-mcp-{name}-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn base_config(dir: &std::path::Path, registry: &[CredentialRecord]) -> Config {
    let doc = countersign_testkit::registry(registry.iter().cloned());
    let path = dir.join("registry.json");
    std::fs::write(&path, countersign_testkit::registry_json(&doc).to_string()).unwrap();
    let mut config = Config::from_toml(&format!(
        "rp_id = \"{RP_ID}\"\norigins = [\"{ORIGIN}\"]\nallow = [\"read_*\"]\npark_seconds = 2\nhold_description_suffix = \"May be held for approval.\"\n"
    ))
    .unwrap();
    config.registry = Some(path);
    config.audit_log = Some(dir.join("mcp-audit.jsonl"));
    config
}

async fn start_interposer(
    svc: &Service,
    config: Config,
    seen: Arc<Upstream>,
) -> (
    Client,
    Arc<Interposer>,
    tokio::task::JoinHandle<std::io::Result<()>>,
) {
    let interposer = Arc::new(
        countersign_mcp::interposer(
            svc.base.parse().unwrap(),
            countersign_client::GatewayToken::new(&svc.token).unwrap(),
            "agent-7".into(),
            "filesystem".into(),
            config,
        )
        .await
        .unwrap(),
    );
    let (client_end, interposer_client) = tokio::io::duplex(1 << 16);
    let (interposer_up, upstream_end) = tokio::io::duplex(1 << 16);
    tokio::spawn(upstream(upstream_end, seen));
    let (cr, cw) = tokio::io::split(interposer_client);
    let (ur, uw) = tokio::io::split(interposer_up);
    let run = tokio::spawn(
        interposer
            .clone()
            .run(BufReader::new(cr), cw, BufReader::new(ur), uw),
    );
    let (r, w) = tokio::io::split(client_end);
    let client = Client {
        w,
        lines: BufReader::new(r).lines(),
        next: 0,
    };
    (client, interposer, run)
}

async fn rig(name: &str, init: Value) -> Rig {
    let alice = Approver::new("alice", "alice-es256");
    let svc = service(&[alice.record()]).await;
    let dir = temp(name);
    let config = base_config(&dir, &[alice.record()]);
    let audit = config.audit_log.clone().unwrap();
    let upstream = Arc::new(Upstream::default());
    let (mut client, interposer, run) = start_interposer(&svc, config, upstream.clone()).await;
    let r = client.request("initialize", init).await;
    assert!(r.get("result").is_some(), "{r}");
    let listed = client.request("tools/list", json!({})).await;
    let tools = listed["result"]["tools"].as_array().unwrap();
    assert_eq!(tools[0]["description"], "Read.", "allowed tools untouched");
    assert_eq!(
        tools[1]["description"], "Write. May be held for approval.",
        "held tools get the suffix"
    );
    Rig {
        svc,
        alice,
        upstream,
        client,
        interposer,
        run,
        audit,
    }
}

fn plain_client() -> Value {
    json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}})
}

fn ticket(r: &Value) -> &Value {
    &r["result"]["_meta"][APPROVAL_KEY]
}

fn approval_id(r: &Value) -> String {
    ticket(r)["approval_id"].as_str().unwrap().to_owned()
}

/// Close the client side and wait for the interposer to finish; the audit log's lines.
async fn close(rig: Rig) -> (Vec<Value>, Vec<u8>) {
    drop(rig.client);
    let _ = tokio::time::timeout(Duration::from_secs(10), rig.run).await;
    let bytes = std::fs::read(&rig.audit).unwrap();
    let lines = String::from_utf8_lossy(&bytes)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (lines, bytes)
}

#[tokio::test]
async fn allowed_calls_and_other_frames_pass_through_unchanged() {
    let mut rig = rig("pass", plain_client()).await;
    let args = r#"{"path" : "/a",  "n":1}"#;
    let r = rig.client.call_raw("read_file", args).await;
    assert_eq!(r["result"]["content"][0]["text"], "ran \"read_file\"");
    assert_eq!(
        r["result"]["x-extension"]["kept"], true,
        "unknown fields kept"
    );
    let sent = rig.upstream.calls_of("read_file");
    assert_eq!(sent.len(), 1);
    assert!(sent[0].contains(args), "the exact bytes: {}", sent[0]);
    // An unknown method passes through too.
    let r = rig
        .client
        .request("vendor/thing", json!({"a": [1, 2]}))
        .await;
    assert!(r.get("result").is_some());
    let (lines, _) = close(rig).await;
    let outcomes: Vec<_> = lines
        .iter()
        .filter(|l| l["kind"] == "mcp_outcome")
        .collect();
    assert_eq!(outcomes[0]["outcome"], "allowed");
    assert_eq!(outcomes[0]["upstream"], "ok");
}

/// Every spelling of a held call that reads as one message is held however it is escaped or
/// spaced, and an allowed one passes; a frame that readers could take for different messages
/// (a duplicated member, a null id, a batch) is not admitted: answered with its error under the
/// id that can be read, and nothing of it reaches the upstream.
#[tokio::test]
async fn every_spelling_of_a_held_call_is_held_and_allowed_ones_pass() {
    let mut rig = rig("spellings", plain_client()).await;
    let held = [
        r#"{"jsonrpc":"2.0","id":102,"method":"tools\/call","params":{"name":"write_\u0066ile","arguments":{"a":1}}}"#,
        r#" { "params" : {"arguments":{"k":1},"name":"write_file"} , "method" : "tools/call" , "id" : 103 , "jsonrpc":"2.0" }"#,
    ];
    for (id, line) in (102..).zip(held) {
        rig.client.send_line(line).await;
        let r = rig.client.response(id).await;
        assert_eq!(r["result"]["isError"], true, "{line}: {r}");
        assert!(ticket(&r)["approval_id"].is_string(), "held: {r}");
    }
    // Two `method`s (readers keep the first, the last, or either) and two `name`s: which call
    // is meant depends on the reader, so none is made.
    for (id, line) in [
        (
            101,
            r#"{"jsonrpc":"2.0","id":101,"method":"tools/list","method":"tools/call","params":{"name":"write_file","arguments":{}}}"#,
        ),
        (
            104,
            r#"{"jsonrpc":"2.0","id":104,"method":"tools/call","params":{"name":"read_file","name":"write_file","arguments":{}}}"#,
        ),
    ] {
        rig.client.send_line(line).await;
        let r = rig.client.response(id).await;
        assert_eq!(r["error"]["code"], -32600, "{r}");
        assert_eq!(r["error"]["data"]["reason"], "duplicate_member", "{r}");
    }
    // MCP ids are never null: refused, and answered under the null id.
    rig.client
        .send_line(r#"{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"write_file","arguments":{"n":2}}}"#)
        .await;
    let r = rig.client.recv().await;
    assert_eq!(r["id"], Value::Null, "{r}");
    assert_eq!(r["error"]["code"], -32600, "{r}");
    // A batch is refused whole, each request answered under its id.
    rig.client
        .send_line(r#"[{"jsonrpc":"2.0","id":105,"method":"tools/call","params":{"name":"read_file","arguments":{}}},{"jsonrpc":"2.0","method":"notifications/initialized"}]"#)
        .await;
    let r = rig.client.recv().await;
    assert_eq!(r.as_array().map(Vec::len), Some(1), "{r}");
    assert_eq!(r[0]["id"], 105, "{r}");
    assert_eq!(r[0]["error"]["code"], -32600, "{r}");
    // Allowed, spaced and with a string id: forwarded as sent, under the interposer's own id.
    let line = r#"{ "id" : "s-1" , "jsonrpc" : "2.0" , "method" : "tools/call" , "params" : { "name" : "read_file" , "arguments" : { } } }"#;
    rig.client.send_line(line).await;
    let r = loop {
        let v = rig.client.recv().await;
        if v.get("id") == Some(&json!("s-1")) {
            break v;
        }
    };
    assert_eq!(
        r["result"]["content"][0]["text"], "ran \"read_file\"",
        "{r}"
    );
    let seen = rig.upstream.lines.lock().unwrap().clone();
    let calls: Vec<_> = seen
        .iter()
        .filter(|l| l.contains("tools") && l.contains("call"))
        .collect();
    assert_eq!(
        calls.len(),
        1,
        "nothing else reached the upstream: {seen:?}"
    );
    assert_eq!(as_client_sent(calls[0], r#""s-1""#), line, "the exact line");
    let (lines, _) = close(rig).await;
    let outcomes: Vec<_> = lines
        .iter()
        .filter(|l| l["kind"] == "mcp_outcome")
        .map(|l| (l["outcome"].as_str().unwrap(), l["upstream"].as_str()))
        .collect();
    assert_eq!(
        outcomes
            .iter()
            .filter(|o| o.0 == "pending_approval")
            .count(),
        2
    );
    assert!(outcomes.contains(&("allowed", Some("ok"))), "{outcomes:?}");
}

/// `tools/call` is a request in MCP; sent as a notification (no `id`) it could be neither held
/// nor refused to the client, so the interposer never relays it, held tool or allowed one, and
/// logs it as refused.
#[tokio::test]
async fn a_tools_call_without_an_id_never_reaches_the_upstream() {
    let mut rig = rig("noid", plain_client()).await;
    for line in [
        r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"write_file","arguments":{"p":"/x"}}}"#,
        r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"read_file","arguments":{}}}"#,
    ] {
        rig.client.send_line(line).await;
    }
    // A request after them is answered, so both were read before it.
    let r = rig.client.call_raw("read_file", "{}").await;
    assert_eq!(r["result"]["content"][0]["text"], "ran \"read_file\"");
    assert!(rig.upstream.calls_of("write_file").is_empty());
    assert_eq!(
        rig.upstream.calls_of("read_file").len(),
        1,
        "only the request ran"
    );
    let (lines, _) = close(rig).await;
    let refused: Vec<_> = lines
        .iter()
        .filter(|l| l["kind"] == "mcp_outcome" && l["reason_code"] == "tools_call_without_id")
        .collect();
    assert_eq!(refused.len(), 2, "{lines:?}");
    assert!(refused.iter().all(|l| l["outcome"] == "denied"));
}

#[tokio::test]
async fn a_held_call_runs_once_after_approval_and_a_third_is_held_again() {
    let mut rig = rig("once", plain_client()).await;
    let args = r#"{"path":"/x","content":"hi"}"#;
    let first = rig.client.call_raw("write_file", args).await;
    assert_eq!(first["result"]["isError"], true, "{first}");
    let text = first["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("Held for human approval (approval "),
        "{text}"
    );
    let id = approval_id(&first);
    assert_eq!(
        ticket(&first)["approve_url"],
        // The page as a browser opens it: localhost, the service's own port.
        format!(
            "{}/approve/{id}",
            rig.svc.base.replace("127.0.0.1", "localhost")
        )
    );
    assert!(
        !text.contains("/x"),
        "nothing about the arguments in the ticket"
    );
    assert!(rig.upstream.calls_of("write_file").is_empty());

    // Retry before anyone decided: parked for the budget, then "still awaiting".
    let waiting = rig.client.call_raw("write_file", args).await;
    let text = waiting["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("Still awaiting human approval"), "{text}");
    assert_eq!(approval_id(&waiting), id, "the same approval");

    rig.alice.decide(&rig.svc, &id, Decision::Approved).await;
    let ran = rig.client.call_raw("write_file", args).await;
    assert_eq!(
        ran["result"]["content"][0]["text"], "ran \"write_file\"",
        "{ran}"
    );
    let sent = rig.upstream.calls_of("write_file");
    assert_eq!(sent.len(), 1, "executed exactly once");
    assert!(sent[0].contains(args));

    let third = rig.client.call_raw("write_file", args).await;
    assert_eq!(third["result"]["isError"], true);
    assert_ne!(
        approval_id(&third),
        id,
        "a new approval: the grant is spent"
    );
    assert_eq!(rig.upstream.calls_of("write_file").len(), 1);

    // Changed arguments are a new approval too, never the old ticket.
    let other = rig
        .client
        .call_raw("write_file", r#"{"path":"/x","content":"bye"}"#)
        .await;
    let other_id = approval_id(&other);
    assert_ne!(other_id, id);
    assert_ne!(other_id, approval_id(&third));

    let audit = rig.audit.clone();
    let (lines, bytes) = close(rig).await;
    let executed: Vec<_> = lines
        .iter()
        .filter(|l| l["outcome"] == "executed")
        .collect();
    assert_eq!(executed.len(), 1);
    assert_eq!(executed[0]["approval_ref"], id.as_str());
    assert_eq!(executed[0]["upstream"], "ok");
    assert_eq!(lines.last().unwrap()["kind"], "mcp_close");
    // The log verifies under its own key, every intent closed by an outcome.
    let key = AuditSealer::load_or_create(&audit.with_extension("key")).unwrap();
    let report = verify_log(&bytes, &key.public_key());
    assert!(report.issues.is_empty(), "{report:?}");
}

#[tokio::test]
async fn url_elicitation_clients_on_2025_11_25_get_32042() {
    let init = json!({"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {"form": {}, "url": {}}}, "clientInfo": {"name": "t", "version": "1"}});
    let mut rig = rig("elicit", init).await;
    let r = rig.client.call_raw("write_file", r#"{"path":"/e"}"#).await;
    assert_eq!(r["error"]["code"], -32042, "{r}");
    let e = &r["error"]["data"]["elicitations"][0];
    let id = r["error"]["data"][APPROVAL_KEY]["approval_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(e["mode"], "url");
    assert_eq!(e["elicitationId"], id.as_str());
    rig.alice.decide(&rig.svc, &id, Decision::Approved).await;
    let ran = rig.client.call_raw("write_file", r#"{"path":"/e"}"#).await;
    assert_eq!(ran["result"]["content"][0]["text"], "ran \"write_file\"");
}

#[tokio::test]
async fn a_refusal_reaches_the_client_as_a_tool_error_and_nothing_runs() {
    let mut rig = rig("refuse", plain_client()).await;
    let args = r#"{"path":"/r"}"#;
    let first = rig.client.call_raw("write_file", args).await;
    let id = approval_id(&first);
    rig.alice.decide(&rig.svc, &id, Decision::Denied).await;
    let r = rig.client.call_raw("write_file", args).await;
    let text = r["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("Not run: refused (approver_refused)"),
        "{text}"
    );
    assert_eq!(ticket(&r)["status"], "DENIED");
    assert!(rig.upstream.calls_of("write_file").is_empty());
}

#[tokio::test]
async fn deny_patterns_refuse_at_once_and_jsonrpc_error_mode_uses_its_codes() {
    let mut rig = rig("deny", plain_client()).await;
    let mut config = base_config(&temp("deny-cfg"), &[rig.alice.record()]);
    config.deny = vec!["write_*".into()];
    config.held_as = countersign_mcp::HeldAs::JsonrpcError;
    rig.interposer.set_config(config);
    let r = rig.client.call_raw("write_file", r#"{"path":"/d"}"#).await;
    assert_eq!(r["error"]["code"], -32011, "{r}");
    assert_eq!(r["error"]["data"]["reason_code"], "policy_denied");
    assert!(r["error"]["data"].get("approval_id").is_none());
    assert!(rig.upstream.calls_of("write_file").is_empty());
}

#[tokio::test]
async fn policy_hardened_after_approval_refuses_without_collecting_the_grant() {
    let mut rig = rig("harden", plain_client()).await;
    let args = r#"{"path":"/h"}"#;
    let first = rig.client.call_raw("write_file", args).await;
    let id = approval_id(&first);
    let op_hash = ticket(&first)["op_hash"].as_str().unwrap().to_owned();
    rig.alice.decide(&rig.svc, &id, Decision::Approved).await;
    let mut config = base_config(&temp("harden-cfg"), &[rig.alice.record()]);
    config.deny = vec!["write_file".into()];
    rig.interposer.set_config(config);
    let r = rig.client.call_raw("write_file", args).await;
    let text = r["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("Not run: refused (policy_denied)"),
        "{text}"
    );
    assert!(rig.upstream.calls_of("write_file").is_empty());
    // The grant was not collected: it is still there to collect (once).
    let grant = rig
        .svc
        .http
        .post(format!("{}/v1/approvals/{id}/grant", rig.svc.base))
        .bearer_auth(&rig.svc.token)
        .json(&json!({"fingerprint": op_hash, "tool_name": "write_file"}))
        .send()
        .await
        .unwrap();
    assert_eq!(grant.status(), 200, "{:?}", grant.text().await);
}

#[tokio::test]
async fn evidence_the_interposer_does_not_trust_does_not_burn_the_grant() {
    let mut rig = rig("forged", plain_client()).await;
    let args = r#"{"path":"/f"}"#;
    let first = rig.client.call_raw("write_file", args).await;
    let id = approval_id(&first);
    let op_hash = ticket(&first)["op_hash"].as_str().unwrap().to_owned();
    rig.alice.decide(&rig.svc, &id, Decision::Approved).await;
    // The interposer's own registry no longer lists alice (the service's still does).
    let bob = Approver::new("bob", "bob-es256");
    let config = base_config(&temp("forged-cfg"), &[bob.record()]);
    // Trust is the interposer's: a fresh one over the same audit log, trusting only bob.
    drop(rig.client);
    let _ = tokio::time::timeout(Duration::from_secs(10), rig.run).await;
    let mut config = config;
    config.audit_log = Some(rig.audit.clone());
    let upstream = Arc::new(Upstream::default());
    let (mut client, _i, _run) = start_interposer(&rig.svc, config, upstream.clone()).await;
    client.request("initialize", plain_client()).await;
    client.request("tools/list", json!({})).await;
    let r = client.call_raw("write_file", args).await;
    let text = r["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("Not run: refused (credential_unknown)"),
        "{text}"
    );
    assert!(upstream.calls_of("write_file").is_empty());
    let grant = rig
        .svc
        .http
        .post(format!("{}/v1/approvals/{id}/grant", rig.svc.base))
        .bearer_auth(&rig.svc.token)
        .json(&json!({"fingerprint": op_hash, "tool_name": "write_file"}))
        .send()
        .await
        .unwrap();
    assert_eq!(grant.status(), 200, "the grant was not burned");
}

#[tokio::test]
async fn a_restarted_interposer_releases_an_approval_made_before_the_restart() {
    let mut rig = rig("restart", plain_client()).await;
    let args = r#"{"path":"/s"}"#;
    let first = rig.client.call_raw("write_file", args).await;
    let id = approval_id(&first);
    drop(rig.client);
    let _ = tokio::time::timeout(Duration::from_secs(10), rig.run).await;
    rig.alice.decide(&rig.svc, &id, Decision::Approved).await;
    let mut config = base_config(&temp("restart-cfg"), &[rig.alice.record()]);
    config.audit_log = Some(rig.audit.clone());
    let upstream = Arc::new(Upstream::default());
    let (mut client, _i, run) = start_interposer(&rig.svc, config, upstream.clone()).await;
    client.request("initialize", plain_client()).await;
    client.request("tools/list", json!({})).await;
    let r = client.call_raw("write_file", args).await;
    assert_eq!(
        r["result"]["content"][0]["text"], "ran \"write_file\"",
        "{r}"
    );
    assert_eq!(upstream.calls_of("write_file").len(), 1);
    drop(client);
    let _ = tokio::time::timeout(Duration::from_secs(10), run).await;
    // Both runs' lines are one chain that verifies, each intent with its outcome.
    let bytes = std::fs::read(&rig.audit).unwrap();
    let key = AuditSealer::load_or_create(&rig.audit.with_extension("key")).unwrap();
    let report = verify_log(&bytes, &key.public_key());
    assert!(report.is_valid(), "{report:?}");
    assert!(
        !report
            .issues
            .iter()
            .any(|i| i.class == IssueClass::Violation),
        "{report:?}"
    );
}

#[tokio::test]
async fn a_client_cancel_during_a_park_drops_only_the_response() {
    let mut rig = rig("cancel", plain_client()).await;
    let mut config = base_config(&temp("cancel-cfg"), &[rig.alice.record()]);
    config.park_seconds = 30;
    rig.interposer.set_config(config);
    let args = r#"{"path":"/c"}"#;
    let first = rig.client.call_raw("write_file", args).await;
    let id = approval_id(&first);
    // A retry parks; the client gives up and says so.
    let line = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":99,\"method\":\"tools/call\",\"params\":{{\"name\":\"write_file\",\"arguments\":{args}}}}}"
    );
    rig.client.send_line(&line).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    rig.client
        .send_line(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99,"reason":"timeout"}}"#)
        .await;
    // The next answer the client gets is for its next request, not for 99.
    let r = rig.client.request("vendor/ping", json!({})).await;
    assert!(r.get("result").is_some());
    // The approval is still pending at the service, and the cancel was not forwarded.
    let status = rig
        .svc
        .http
        .get(format!("{}/v1/approvals/{id}", rig.svc.base))
        .bearer_auth(&rig.svc.token)
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(status["status"], "PENDING");
    assert!(
        !rig.upstream
            .lines
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("notifications/cancelled"))
    );
}

/// A 2026-07-28 tools/call declaring URL elicitation in `_meta`, optionally echoing a state.
fn mrtr_line(id: u64, args: &str, state: Option<&str>) -> String {
    let state = state
        .map(|s| format!(",\"requestState\":\"{s}\",\"inputResponses\":{{\"countersign.approval\":{{\"action\":\"accept\"}}}}"))
        .unwrap_or_default();
    format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"write_file\",\"arguments\":{args},\"_meta\":{{\"io.modelcontextprotocol/clientCapabilities\":{{\"elicitation\":{{\"url\":{{}}}}}}}}{state}}}}}"
    )
}

async fn mrtr_call(client: &mut Client, args: &str, state: Option<&str>) -> Value {
    client.next += 1;
    let id = client.next;
    client.send_line(&mrtr_line(id, args, state)).await;
    client.response(id).await
}

#[tokio::test]
async fn the_2026_07_28_round_trip_and_its_state_refusals() {
    let mut rig = rig("mrtr", plain_client()).await;
    let args = r#"{"path":"/m"}"#;
    let first = mrtr_call(&mut rig.client, args, None).await;
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    let request = &first["result"]["inputRequests"]["countersign.approval"];
    assert_eq!(request["params"]["mode"], "url");
    let state = first["result"]["requestState"].as_str().unwrap().to_owned();
    assert!(!state.contains("/m"));
    let id = approval_id(&first);
    rig.alice.decide(&rig.svc, &id, Decision::Approved).await;

    // Tampered: one character of the MAC changed.
    let mut tampered = state.clone();
    let last = tampered.pop().unwrap();
    tampered.push(if last == 'A' { 'B' } else { 'A' });
    let r = mrtr_call(&mut rig.client, args, Some(&tampered)).await;
    let text = r["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("Not run: refused (request_state_invalid)"),
        "{text}"
    );
    // Moved onto other arguments.
    let r = mrtr_call(&mut rig.client, r#"{"path":"/other"}"#, Some(&state)).await;
    let text = r["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("Not run: refused (binding_mismatch)"),
        "{text}"
    );
    assert!(rig.upstream.calls_of("write_file").is_empty());

    let ran = mrtr_call(&mut rig.client, args, Some(&state)).await;
    assert_eq!(
        ran["result"]["content"][0]["text"], "ran \"write_file\"",
        "{ran}"
    );
    // The upstream got the call without the interposer's own state and input response.
    let sent = rig.upstream.calls_of("write_file");
    assert!(!sent[0].contains("requestState"), "{}", sent[0]);
    assert!(!sent[0].contains("countersign.approval"), "{}", sent[0]);
    assert!(sent[0].contains(&format!("\"arguments\":{args}")));
    // Replayed after use: the grant is spent, nothing runs twice.
    let again = mrtr_call(&mut rig.client, args, Some(&state)).await;
    assert_eq!(again["result"]["isError"], true, "{again}");
    assert_eq!(rig.upstream.calls_of("write_file").len(), 1);
}

/// The lines of the interposer's audit log so far.
fn audit_lines(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Wait until the audit log holds `n` outcome lines (bounded only against a hang: nothing here
/// assumes how fast the interposer is).
async fn outcomes(path: &std::path::Path, n: usize) -> Vec<Value> {
    for _ in 0..600 {
        let lines: Vec<Value> = audit_lines(path)
            .into_iter()
            .filter(|l| l["kind"] == "mcp_outcome")
            .collect();
        if lines.len() >= n {
            return lines;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the interposer never wrote {n} outcome lines");
}

async fn approval_status(svc: &Service, id: &str) -> Value {
    svc.http
        .get(format!("{}/v1/approvals/{id}", svc.base))
        .bearer_auth(&svc.token)
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_2026_07_28_request_gets_results_that_carry_result_type() {
    let mut rig = rig("modern-rt", plain_client()).await;
    // A modern request without URL elicitation: the tool-error ticket, tagged complete.
    let meta = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}"#;
    let line = |id: u64, tool: &str| {
        format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"{tool}\",\"arguments\":{{\"path\":\"/rt\"}},{meta}}}}}"
        )
    };
    rig.client.send_line(&line(50, "write_file")).await;
    let held = rig.client.response(50).await;
    assert_eq!(held["result"]["isError"], true, "{held}");
    assert_eq!(held["result"]["resultType"], "complete", "{held}");
    // Still awaiting, and refused, answers too.
    rig.client.send_line(&line(51, "write_file")).await;
    let waiting = rig.client.response(51).await;
    assert_eq!(waiting["result"]["resultType"], "complete", "{waiting}");
    let id = approval_id(&held);
    rig.alice.decide(&rig.svc, &id, Decision::Denied).await;
    rig.client.send_line(&line(52, "write_file")).await;
    let refused = rig.client.response(52).await;
    let text = refused["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("Not run: refused (approver_refused)"));
    assert_eq!(refused["result"]["resultType"], "complete", "{refused}");
    // A 2025 client's answers stay as they were.
    let old = rig
        .client
        .call_raw("write_file", r#"{"path":"/old"}"#)
        .await;
    assert!(old["result"].get("resultType").is_none(), "{old}");
}

#[tokio::test]
async fn an_approved_mrtr_retry_reaches_the_upstream_without_the_interposers_members() {
    let mut rig = rig("mrtr-strip", plain_client()).await;
    // Odd spacing and escapes: the upstream must see these exact bytes.
    let args = r#"{ "path" : "/m\u00e9",  "n":[1, 2] }"#;
    let first = mrtr_call(&mut rig.client, args, None).await;
    let state = first["result"]["requestState"].as_str().unwrap().to_owned();
    let id = approval_id(&first);
    rig.alice.decide(&rig.svc, &id, Decision::Approved).await;
    // The retry answers the interposer's request and, too, one the upstream asked earlier.
    let line = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":77,\"method\":\"tools/call\",\"params\":{{\"requestState\":\"{state}\",\"name\":\"write_file\",\"arguments\":{args},\"inputResponses\":{{\"countersign.approval\":{{\"action\":\"accept\"}}, \"upstream.ask\":{{\"action\":\"accept\",\"content\":{{\"ok\":true}}}}}},\"_meta\":{{\"io.modelcontextprotocol/clientCapabilities\":{{\"elicitation\":{{\"url\":{{}}}}}}}}}}}}"
    );
    rig.client.send_line(&line).await;
    let ran = rig.client.response(77).await;
    assert_eq!(
        ran["result"]["content"][0]["text"], "ran \"write_file\"",
        "{ran}"
    );
    let sent = rig.upstream.calls_of("write_file");
    assert_eq!(sent.len(), 1);
    let expected = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":77,\"method\":\"tools/call\",\"params\":{{\"name\":\"write_file\",\"arguments\":{args},\"inputResponses\":{{ \"upstream.ask\":{{\"action\":\"accept\",\"content\":{{\"ok\":true}}}}}},\"_meta\":{{\"io.modelcontextprotocol/clientCapabilities\":{{\"elicitation\":{{\"url\":{{}}}}}}}}}}}}"
    );
    assert_eq!(
        as_client_sent(&sent[0], "77"),
        expected,
        "only the interposer's members are cut out"
    );

    // Without other responses, `inputResponses` goes as a whole.
    let args = r#"{"path":"/m2"}"#;
    let first = mrtr_call(&mut rig.client, args, None).await;
    let state = first["result"]["requestState"].as_str().unwrap().to_owned();
    rig.alice
        .decide(&rig.svc, &approval_id(&first), Decision::Approved)
        .await;
    let ran = mrtr_call(&mut rig.client, args, Some(&state)).await;
    assert_eq!(
        ran["result"]["content"][0]["text"], "ran \"write_file\"",
        "{ran}"
    );
    let sent = rig.upstream.calls_of("write_file");
    let last: Value = serde_json::from_str(&sent[1]).unwrap();
    let params = last["params"].as_object().unwrap();
    let keys: Vec<&str> = params.keys().map(String::as_str).collect();
    assert_eq!(keys, ["_meta", "arguments", "name"], "{}", sent[1]);
    assert!(sent[1].contains(&format!("\"arguments\":{args}")));
}

#[tokio::test]
async fn a_cancel_that_overtakes_the_park_still_drops_the_response() {
    // park_seconds = 2: were the cancel lost, the retry would be answered after 2 s.
    let mut rig = rig("cancel-race", plain_client()).await;
    let args = r#"{"path":"/race"}"#;
    let first = rig.client.call_raw("write_file", args).await;
    let id = approval_id(&first);
    // The retry and its cancel in one write: the relay reads the cancel before the retry's own
    // task has parked (on this single-threaded runtime it has not even started).
    let retry = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":99,\"method\":\"tools/call\",\"params\":{{\"name\":\"write_file\",\"arguments\":{args}}}}}"
    );
    let cancel = r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99,"reason":"timeout"}}"#;
    rig.client.send_line(&format!("{retry}\n{cancel}")).await;
    // The retry's record closes as a cancelled park, not as "still awaiting" after the budget.
    let lines = outcomes(&rig.audit, 2).await;
    assert_eq!(lines[1]["outcome"], "pending_approval", "{lines:?}");
    assert_eq!(lines[1]["reason_code"], "client_cancelled", "{lines:?}");
    // Its task is over without answering: the next answer is for the next request.
    let r = rig.client.request("vendor/ping", json!({})).await;
    assert!(r.get("result").is_some());
    assert_eq!(approval_status(&rig.svc, &id).await["status"], "PENDING");
    assert!(
        !rig.upstream
            .lines
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("notifications/cancelled")),
        "the upstream never saw request 99, nor its cancel"
    );
    let retry_call = lines[1]["call_id"].clone();
    let (lines, _) = close(rig).await;
    let of_retry = lines
        .iter()
        .filter(|l| l["kind"] == "mcp_outcome" && l["call_id"] == retry_call)
        .count();
    assert_eq!(
        of_retry, 1,
        "one outcome for the cancelled retry: {lines:?}"
    );
}

#[tokio::test]
async fn a_cancel_that_overtakes_an_approved_retry_collects_nothing() {
    let mut rig = rig("cancel-approved", plain_client()).await;
    let args = r#"{"path":"/ca"}"#;
    let first = rig.client.call_raw("write_file", args).await;
    let id = approval_id(&first);
    rig.alice.decide(&rig.svc, &id, Decision::Approved).await;
    let retry = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":98,\"method\":\"tools/call\",\"params\":{{\"name\":\"write_file\",\"arguments\":{args}}}}}"
    );
    let cancel =
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":98}}"#;
    rig.client.send_line(&format!("{retry}\n{cancel}")).await;
    let lines = outcomes(&rig.audit, 2).await;
    assert_eq!(lines[1]["reason_code"], "client_cancelled", "{lines:?}");
    assert!(rig.upstream.calls_of("write_file").is_empty());
    // The grant is still there: the next identical call runs, once.
    let ran = rig.client.call_raw("write_file", args).await;
    assert_eq!(
        ran["result"]["content"][0]["text"], "ran \"write_file\"",
        "{ran}"
    );
    assert_eq!(rig.upstream.calls_of("write_file").len(), 1);
}

// `countersign mcp http`: the same life cycle over Streamable HTTP.
#[path = "it/http.rs"]
mod http;

// The second external review's findings at the stdio edge.
#[path = "it/edge.rs"]
mod edge;

// Who may approve each held tool: the interposer's own approver rules.
#[path = "it/approvers.rs"]
mod approvers;

#[tokio::test]
async fn cancel_on_disconnect_withdraws_what_the_client_left_pending_and_only_that() {
    // Off (the default): the client goes away, the approval stays pending for its next retry.
    let mut off = rig("disconnect-off", plain_client()).await;
    let kept = approval_id(&off.client.call_raw("write_file", r#"{"path":"/k"}"#).await);
    let svc = close_keeping_service(off).await;
    assert_eq!(approval_status(&svc, &kept).await["status"], "PENDING");

    // On: the approvals of calls held in this session and still pending are withdrawn; one
    // already decided is left as it was.
    let mut on = rig("disconnect-on", plain_client()).await;
    let mut config = base_config(&temp("disconnect-on-cfg"), &[on.alice.record()]);
    config.cancel_on_disconnect = true;
    on.interposer.set_config(config);
    let left = approval_id(&on.client.call_raw("write_file", r#"{"path":"/a"}"#).await);
    let refused = approval_id(&on.client.call_raw("write_file", r#"{"path":"/b"}"#).await);
    on.alice.decide(&on.svc, &refused, Decision::Denied).await;
    let svc = close_keeping_service(on).await;
    let status = approval_status(&svc, &left).await;
    assert_eq!(status["status"], "DENIED", "{status}");
    assert_eq!(status["reason_code"], "cancelled", "{status}");
    let status = approval_status(&svc, &refused).await;
    assert_eq!(status["reason_code"], "approver_refused", "{status}");
}

/// Close the client side, wait for the interposer to finish, and keep the service running.
async fn close_keeping_service(rig: Rig) -> Service {
    drop(rig.client);
    rig.run.await.unwrap().unwrap();
    rig.svc
}

fn tasks_client() -> Value {
    json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}})
}

/// The task id of a `CreateTaskResult` answer.
fn task_id(created: &Value) -> String {
    created["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// A held call sent as a 2025-11-25 task: the `CreateTaskResult`'s task.
async fn task_call(client: &mut Client, args: &str) -> Value {
    client.next += 1;
    let id = client.next;
    let line = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"write_file\",\"arguments\":{args},\"task\":{{\"ttl\":60000}}}}}}"
    );
    client.send_line(&line).await;
    client.response(id).await
}

/// `tasks/get` until the task leaves `working` (bounded only against a hang).
async fn task_end(client: &mut Client, task_id: &str) -> Value {
    for _ in 0..600 {
        let r = client
            .request("tasks/get", json!({ "taskId": task_id }))
            .await;
        if r["result"]["status"] != "working" {
            return r["result"].clone();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("task {task_id} never ended");
}

#[tokio::test]
async fn a_held_call_sent_as_a_task_runs_once_when_approved_with_no_retry() {
    let alice = Approver::new("alice", "alice-es256");
    let svc = service(&[alice.record()]).await;
    let dir = temp("task-run");
    let config = base_config(&dir, &[alice.record()]);
    let audit = config.audit_log.clone().unwrap();
    let upstream = Arc::new(Upstream::default());
    let (mut client, _interposer, run) = start_interposer(&svc, config, upstream.clone()).await;
    // The interposer offers tasks for tools/call, and held tools say they can run as one.
    let init = client.request("initialize", tasks_client()).await;
    assert_eq!(
        init["result"]["capabilities"]["tasks"]["requests"]["tools"]["call"],
        json!({}),
        "{init}"
    );
    let listed = client.request("tools/list", json!({})).await;
    let tools = listed["result"]["tools"].as_array().unwrap();
    assert!(
        tools[0].get("execution").is_none(),
        "allowed tools untouched"
    );
    assert_eq!(tools[1]["execution"]["taskSupport"], "optional");

    let args = r#"{"path":"/t", "content":"hi"}"#;
    let created = task_call(&mut client, args).await;
    let task = &created["result"]["task"];
    assert_eq!(task["status"], "working", "{created}");
    let task_id = task_id(&created);
    let approval = approval_id(&created);
    assert!(task["statusMessage"].as_str().unwrap().contains(&approval));
    assert!(
        upstream.calls_of("write_file").is_empty(),
        "nothing runs before approval"
    );

    alice.decide(&svc, &approval, Decision::Approved).await;
    let ended = task_end(&mut client, &task_id).await;
    assert_eq!(ended["status"], "completed", "{ended}");
    let sent = upstream.calls_of("write_file");
    assert_eq!(sent.len(), 1, "executed exactly once, with no retry");
    assert!(
        sent[0].contains(args),
        "the hashed argument bytes: {}",
        sent[0]
    );
    assert!(
        !sent[0].contains("\"task\""),
        "the upstream runs a plain call"
    );
    let result = client
        .request("tasks/result", json!({ "taskId": task_id }))
        .await;
    assert_eq!(result["result"]["content"][0]["text"], "ran \"write_file\"");
    assert_eq!(
        result["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        task_id.as_str()
    );
    let list = client.request("tasks/list", json!({})).await;
    assert_eq!(list["result"]["tasks"][0]["taskId"], task_id.as_str());

    // The grant is spent: the same call as a task again is a new approval.
    let again = task_call(&mut client, args).await;
    assert_ne!(approval_id(&again), approval);
    assert_eq!(upstream.calls_of("write_file").len(), 1);

    drop(client);
    let _ = tokio::time::timeout(Duration::from_secs(10), run).await;
    let bytes = std::fs::read(&audit).unwrap();
    let lines: Vec<Value> = audit_lines(&audit);
    let executed: Vec<_> = lines
        .iter()
        .filter(|l| l["outcome"] == "executed")
        .collect();
    assert_eq!(executed.len(), 1);
    assert_eq!(executed[0]["approval_ref"], approval.as_str());
    assert_eq!(executed[0]["upstream"], "ok");
    let key = AuditSealer::load_or_create(&audit.with_extension("key")).unwrap();
    let report = verify_log(&bytes, &key.public_key());
    assert!(report.issues.is_empty(), "{report:?}");
}

#[tokio::test]
async fn tasks_cancel_withdraws_the_approval_and_nothing_runs() {
    let mut rig = rig("task-cancel", tasks_client()).await;
    let created = task_call(&mut rig.client, r#"{"path":"/c"}"#).await;
    let task_id = task_id(&created);
    let approval = approval_id(&created);
    let cancelled = rig
        .client
        .request("tasks/cancel", json!({ "taskId": task_id }))
        .await;
    assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");
    let status = approval_status(&rig.svc, &approval).await;
    assert_eq!(status["status"], "DENIED", "{status}");
    assert_eq!(status["reason_code"], "cancelled", "{status}");
    // A task that ended cannot be cancelled again; its result says it did not run.
    let twice = rig
        .client
        .request("tasks/cancel", json!({ "taskId": task_id }))
        .await;
    assert_eq!(twice["error"]["code"], -32602, "{twice}");
    let result = rig
        .client
        .request("tasks/result", json!({ "taskId": task_id }))
        .await;
    assert_eq!(result["result"]["isError"], true, "{result}");
    // The withdrawn approval cannot be approved any more, and nothing ran.
    assert!(rig.upstream.calls_of("write_file").is_empty());
}

#[tokio::test]
async fn a_refused_task_fails_and_its_result_is_the_refusal() {
    let mut rig = rig("task-refused", tasks_client()).await;
    let created = task_call(&mut rig.client, r#"{"path":"/r"}"#).await;
    let task_id = task_id(&created);
    let approval = approval_id(&created);
    rig.alice
        .decide(&rig.svc, &approval, Decision::Denied)
        .await;
    let ended = task_end(&mut rig.client, &task_id).await;
    assert_eq!(ended["status"], "failed", "{ended}");
    let message = ended["statusMessage"].as_str().unwrap();
    assert!(
        message.starts_with("Not run: refused (approver_refused)"),
        "{message}"
    );
    let result = rig
        .client
        .request("tasks/result", json!({ "taskId": task_id }))
        .await;
    assert_eq!(result["result"]["isError"], true, "{result}");
    assert_eq!(ticket(&result)["status"], "DENIED");
    assert!(rig.upstream.calls_of("write_file").is_empty());
}

#[tokio::test]
async fn task_ids_the_interposer_does_not_know_are_refused_or_left_to_the_upstream() {
    let mut rig = rig("task-unknown", tasks_client()).await;
    // One of ours it no longer knows (a restart, an expiry): answered here.
    let r = rig
        .client
        .request("tasks/get", json!({"taskId": "countersign-task-gone-1"}))
        .await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
    // The upstream's own task ids are the upstream's.
    let r = rig
        .client
        .request("tasks/get", json!({"taskId": "upstream-7"}))
        .await;
    assert_eq!(r["result"], json!({}), "{r}");
    assert!(
        rig.upstream
            .lines
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("upstream-7"))
    );
}

#[tokio::test]
async fn a_client_before_2025_11_25_gets_no_tasks_and_its_task_member_is_ignored() {
    let mut rig = rig("task-old", plain_client()).await;
    let created = task_call(&mut rig.client, r#"{"path":"/o"}"#).await;
    assert!(created["result"].get("task").is_none(), "{created}");
    assert_eq!(created["result"]["isError"], true, "the tool-error ticket");
}

#[tokio::test]
async fn tasks_result_waits_for_the_task_to_end() {
    let mut rig = rig("task-wait", tasks_client()).await;
    let created = task_call(&mut rig.client, r#"{"path":"/w"}"#).await;
    let task_id = task_id(&created);
    let approval = approval_id(&created);
    // Asked before anyone decided: answered only once the approved call ran.
    rig.client.next += 1;
    let waiting = rig.client.next;
    let ask = json!({"jsonrpc": "2.0", "id": waiting, "method": "tasks/result", "params": {"taskId": task_id}});
    rig.client.send_line(&ask.to_string()).await;
    let status = rig
        .client
        .request("tasks/get", json!({ "taskId": task_id }))
        .await;
    assert_eq!(status["result"]["status"], "working", "{status}");
    rig.alice
        .decide(&rig.svc, &approval, Decision::Approved)
        .await;
    let result = rig.client.response(waiting).await;
    assert_eq!(
        result["result"]["content"][0]["text"], "ran \"write_file\"",
        "{result}"
    );
    assert_eq!(rig.upstream.calls_of("write_file").len(), 1);
}

/// A 2026-07-28 `tools/call` of `ask_file` declaring URL elicitation, with `tail` (state and
/// input responses) appended to its params.
async fn ask_call(client: &mut Client, tail: &str) -> Value {
    client.next += 1;
    let id = client.next;
    let line = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"ask_file\",\"arguments\":{{\"p\":1}},\"_meta\":{{\"io.modelcontextprotocol/clientCapabilities\":{{\"elicitation\":{{\"url\":{{}}}}}}}}{tail}}}}}"
    );
    client.send_line(&line).await;
    client.response(id).await
}

#[tokio::test]
async fn an_approved_call_whose_upstream_asks_for_input_goes_on_once_without_a_new_approval() {
    let mut rig = rig("nested", plain_client()).await;
    let held = ask_call(&mut rig.client, "").await;
    assert_eq!(held["result"]["resultType"], "input_required", "{held}");
    let ours = held["result"]["requestState"].as_str().unwrap().to_owned();
    let id = approval_id(&held);
    rig.alice.decide(&rig.svc, &id, Decision::Approved).await;

    // The approved retry reaches the upstream, which asks its own question: passed through.
    let approve = format!(
        ",\"requestState\":\"{ours}\",\"inputResponses\":{{\"countersign.approval\":{{\"action\":\"accept\"}}}}"
    );
    let asked = ask_call(&mut rig.client, &approve).await;
    assert_eq!(
        asked["result"]["requestState"], "upstream-state-1",
        "{asked}"
    );
    assert_eq!(
        asked["result"]["inputRequests"]["q"]["params"]["message"],
        "Sure?"
    );

    // The client answers it with the upstream's state: the same approved call goes on, once.
    let answer = ",\"requestState\":\"upstream-state-1\",\"inputResponses\":{\"q\":{\"action\":\"accept\",\"content\":{}}}";
    let ran = ask_call(&mut rig.client, answer).await;
    assert_eq!(ran["result"]["content"][0]["text"], "ran ask_file", "{ran}");
    let sent = rig.upstream.calls_of("ask_file");
    assert_eq!(sent.len(), 2, "the approved call and its answer");
    assert!(sent[1].contains(answer), "passed as it came: {}", sent[1]);

    // The pass is spent: the same answer again is refused and nothing reaches the upstream.
    let again = ask_call(&mut rig.client, answer).await;
    let text = again["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("Not run: refused (request_state_invalid)"),
        "{text}"
    );
    assert_eq!(rig.upstream.calls_of("ask_file").len(), 2);

    let audit = rig.audit.clone();
    let (lines, bytes) = close(rig).await;
    let outcome = |o: &str| {
        lines
            .iter()
            .filter(|l| l["outcome"] == o)
            .cloned()
            .collect::<Vec<_>>()
    };
    let executed = outcome("executed");
    assert_eq!(executed.len(), 1);
    assert_eq!(executed[0]["upstream"], "input_required");
    let continued = outcome("continued");
    assert_eq!(continued.len(), 1);
    assert_eq!(continued[0]["approval_ref"], id.as_str());
    assert_eq!(continued[0]["upstream"], "ok");
    let key = AuditSealer::load_or_create(&audit.with_extension("key")).unwrap();
    let report = verify_log(&bytes, &key.public_key());
    assert!(report.issues.is_empty(), "{report:?}");
}

#[tokio::test]
async fn two_tasks_for_one_approval_run_the_call_once() {
    let mut rig = rig("task-twice", tasks_client()).await;
    let args = r#"{"path":"/twice"}"#;
    let a = task_call(&mut rig.client, args).await;
    let b = task_call(&mut rig.client, args).await;
    let approval = approval_id(&a);
    assert_eq!(approval_id(&b), approval, "one open ticket");
    rig.alice
        .decide(&rig.svc, &approval, Decision::Approved)
        .await;
    let mut ends = Vec::new();
    for created in [&a, &b] {
        ends.push(task_end(&mut rig.client, &task_id(created)).await["status"].clone());
    }
    ends.sort_by_key(Value::to_string);
    assert_eq!(
        ends,
        [json!("completed"), json!("failed")],
        "one grant, one run"
    );
    assert_eq!(rig.upstream.calls_of("write_file").len(), 1);
}
