//! What the MCP integration tests share: the approval service in process (127.0.0.1:0), a
//! software-key approver, a scripted MCP server and client over in-memory pipes, and the rig.

use countersign::{CredentialRecord, Decision, b64};
use countersign_audit::AuditSealer;
use countersign_mcp::answer::APPROVAL_KEY;
use countersign_mcp::{Config, Interposer};
use countersign_server::store::SqliteStore;
use countersign_server::{AppState, AssertionBody, StateParts, SystemClock};
use countersign_softkey::{AssertionRequest, Ceremony, SoftKey};
use countersign_testkit::{ORIGIN, RP_ID};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader, DuplexStream};

pub(crate) struct Service {
    pub(crate) base: String,
    pub(crate) token: String,
    pub(crate) http: reqwest::Client,
    pub(crate) _server: tokio::task::JoinHandle<()>,
}

pub(crate) async fn service(enrolled: &[CredentialRecord]) -> Service {
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

pub(crate) struct Approver {
    pub(crate) principal: String,
    pub(crate) key: SoftKey,
    pub(crate) counter: AtomicU32,
}

impl Approver {
    pub(crate) fn new(principal: &str, fixture: &str) -> Self {
        Self {
            principal: principal.into(),
            key: countersign_testkit::key(fixture),
            counter: AtomicU32::new(0),
        }
    }
    pub(crate) fn record(&self) -> CredentialRecord {
        countersign_testkit::enroll(&self.key, &self.principal)
    }
    pub(crate) fn sign(&self, challenge: Vec<u8>) -> Value {
        let request = AssertionRequest::from(Ceremony {
            sign_count: self.counter.fetch_add(1, Ordering::SeqCst) + 1,
            ..Ceremony::get(RP_ID, ORIGIN, challenge)
        });
        let r = self.key.assert(&request).unwrap();
        serde_json::to_value(AssertionBody {
            credential_id: b64::encode(&r.credential_id),
            client_data_json: b64::encode(&r.client_data_json),
            authenticator_data: b64::encode(&r.authenticator_data),
            signature: b64::encode(&r.signature),
        })
        .unwrap()
    }
    pub(crate) async fn post(
        svc: &Service,
        path: &str,
        token: Option<&str>,
        body: &Value,
    ) -> Value {
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
    pub(crate) async fn decide(&self, svc: &Service, id: &str, decision: Decision) {
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
pub(crate) fn as_client_sent(upstream_line: &str, client_id: &str) -> String {
    let v: Value = serde_json::from_str(upstream_line).unwrap();
    let ours = v["id"].as_str().expect("an id of the interposer's own");
    assert!(ours.starts_with("cs-"), "{upstream_line}");
    upstream_line.replacen(&format!("\"{ours}\""), client_id, 1)
}

/// What the scripted upstream saw: every line, exactly.
#[derive(Default)]
pub(crate) struct Upstream {
    pub(crate) lines: Mutex<Vec<String>>,
}

impl Upstream {
    pub(crate) fn calls_of(&self, tool: &str) -> Vec<String> {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains("\"tools/call\"") && l.contains(&format!("\"{tool}\"")))
            .cloned()
            .collect()
    }
}

/// The fake server's `tools/list` result, byte for byte.
pub(crate) const TOOLS_LISTED: &str = concat!(
    r#"{"tools":["#,
    r#"{"name":"read_file","description":"Read.","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}},"#,
    r#"{"name":"write_file","description":"Write.","inputSchema":{"type":"object"},"annotations":{"destructiveHint":true}},"#,
    r#"{"name":"read_slow","description":"Read, slowly.","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}"#,
    r#"]}"#
);

/// A minimal MCP server: initialize, tools/list (read_file read-only, write_file), tools/call
/// answers "ran"; it sends a progress notification before each call's answer.
pub(crate) async fn upstream(io: DuplexStream, seen: Arc<Upstream>) {
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
            // Written as a server writes it, members in its own order (not sorted), so a test
            // can tell a relayed list from a re-serialized one.
            Some("tools/list") => {
                let frame = format!(
                    r#"{{"jsonrpc":"2.0","id":{},"result":{TOOLS_LISTED}}}"#,
                    id.unwrap_or_default()
                );
                w.write_all(format!("{frame}\n").as_bytes()).await.unwrap();
                continue;
            }
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
pub(crate) struct Client {
    pub(crate) w: tokio::io::WriteHalf<DuplexStream>,
    pub(crate) lines: tokio::io::Lines<BufReader<tokio::io::ReadHalf<DuplexStream>>>,
    pub(crate) next: u64,
}

impl Client {
    pub(crate) async fn send_line(&mut self, line: &str) {
        self.w
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
    }
    pub(crate) async fn recv(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(30), self.lines.next_line())
            .await
            .expect("an answer in time")
            .unwrap()
            .expect("the interposer closed");
        serde_json::from_str(&line).unwrap()
    }
    /// Send a request and return its response (skipping notifications).
    pub(crate) async fn request(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        let frame = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_line(&frame.to_string()).await;
        self.response(id).await
    }
    pub(crate) async fn response(&mut self, id: u64) -> Value {
        loop {
            let v = self.recv().await;
            if v.get("id") == Some(&json!(id)) {
                return v;
            }
        }
    }
    /// A tools/call whose arguments are `args` as text, exactly.
    pub(crate) async fn call_raw(&mut self, tool: &str, args: &str) -> Value {
        self.next += 1;
        let id = self.next;
        let line = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"{tool}\",\"arguments\":{args}}}}}"
        );
        self.send_line(&line).await;
        self.response(id).await
    }
}

pub(crate) struct Rig {
    pub(crate) svc: Service,
    pub(crate) alice: Approver,
    pub(crate) upstream: Arc<Upstream>,
    pub(crate) client: Client,
    pub(crate) interposer: Arc<Interposer>,
    pub(crate) run: tokio::task::JoinHandle<std::io::Result<()>>,
    pub(crate) audit: PathBuf,
}

pub(crate) fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "cs-mcp-{name}-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub(crate) fn base_config(dir: &std::path::Path, registry: &[CredentialRecord]) -> Config {
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

pub(crate) async fn start_interposer(
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

pub(crate) async fn rig(name: &str, init: Value) -> Rig {
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

pub(crate) fn plain_client() -> Value {
    json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}})
}

pub(crate) fn ticket(r: &Value) -> &Value {
    &r["result"]["_meta"][APPROVAL_KEY]
}

pub(crate) fn approval_id(r: &Value) -> String {
    ticket(r)["approval_id"].as_str().unwrap().to_owned()
}

/// Close the client side and wait for the interposer to finish; the audit log's lines.
pub(crate) async fn close(rig: Rig) -> (Vec<Value>, Vec<u8>) {
    drop(rig.client);
    let _ = tokio::time::timeout(Duration::from_secs(10), rig.run).await;
    let bytes = std::fs::read(&rig.audit).unwrap();
    let lines = String::from_utf8_lossy(&bytes)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (lines, bytes)
}

/// The lines of the interposer's audit log so far.
pub(crate) fn audit_lines(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Wait until the audit log holds `n` outcome lines (bounded only against a hang: nothing here
/// assumes how fast the interposer is).
pub(crate) async fn outcomes(path: &std::path::Path, n: usize) -> Vec<Value> {
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

pub(crate) async fn approval_status(svc: &Service, id: &str) -> Value {
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

/// Close the client side, wait for the interposer to finish, and keep the service running.
pub(crate) async fn close_keeping_service(rig: Rig) -> Service {
    drop(rig.client);
    rig.run.await.unwrap().unwrap();
    rig.svc
}

pub(crate) fn tasks_client() -> Value {
    json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}})
}

/// The task id of a `CreateTaskResult` answer.
pub(crate) fn task_id(created: &Value) -> String {
    created["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// A held call sent as a 2025-11-25 task: the `CreateTaskResult`'s task.
pub(crate) async fn task_call(client: &mut Client, args: &str) -> Value {
    client.next += 1;
    let id = client.next;
    let line = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"write_file\",\"arguments\":{args},\"task\":{{\"ttl\":60000}}}}}}"
    );
    client.send_line(&line).await;
    client.response(id).await
}

/// `tasks/get` until the task leaves `working` (bounded only against a hang).
pub(crate) async fn task_end(client: &mut Client, task_id: &str) -> Value {
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

/// The interposer's audit log `bytes` (at `audit`) verify under its key, and `lines` hold exactly
/// one `executed` outcome, which names `approval`.
pub(crate) fn executed_once_and_verified(
    lines: &[Value],
    bytes: &[u8],
    audit: &std::path::Path,
    approval: &str,
) {
    let executed: Vec<&Value> = lines
        .iter()
        .filter(|l| l["outcome"] == "executed")
        .collect();
    assert_eq!(executed.len(), 1, "{executed:?}");
    assert_eq!(executed[0]["approval_ref"], approval);
    verified(bytes, audit);
}

/// The interposer's audit log `bytes` (at `audit`) verify under the key beside it.
pub(crate) fn verified(bytes: &[u8], audit: &std::path::Path) {
    let key = AuditSealer::load_or_create(&audit.with_extension("key")).unwrap();
    let report = countersign_audit::verify_log(bytes, &key.public_key());
    assert!(report.issues.is_empty(), "{report:?}");
}
