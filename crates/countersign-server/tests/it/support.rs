//! A `TestApp`: the real router on 127.0.0.1:0, a fresh in-memory database, a manual clock.

use countersign::{CredentialRecord, Decision, b64};
use countersign_audit::{AuditReport, AuditSealer, EvidenceCheck, verify_log_with};
use countersign_server::store::SqliteStore;
use countersign_server::{AppState, AssertionBody, Config, ManualClock, StateParts};
use countersign_softkey::{AssertionRequest, Ceremony, SoftKey};
use countersign_testkit::{ORIGIN, RP_ID};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

pub const START: &str = "2026-11-20T10:00:00Z";

/// The configuration every test starts from: the worked example's RP and origin.
pub fn config() -> Config {
    Config::from_toml(&format!(
        r#"
        rp_id = "{RP_ID}"
        origins = ["{ORIGIN}"]
        [timeouts]
        approval_seconds = 300
        grant_seconds = 60
        long_poll_max_seconds = 60
        [groups]
        finance = ["alice", "bob"]
        ops = ["nobody-enrolled"]
        [[tools]]
        name = "payments.transfer"
        approvers = ["finance"]
        severity = "high"
        profile = "countersign.payment/1"
        [[tools]]
        name = "read_file"
        approval = "none"
        [[tools]]
        name = "restart_cluster"
        approvers = ["ops"]
        [[tools]]
        name = "directory.update"
        nfc = "normalize"
        "#
    ))
    .unwrap()
}

/// The name of the gateway every `TestApp` adds; `http` sends its token.
pub const GATEWAY: &str = "test-gateway";

pub struct TestApp {
    pub base: String,
    /// Sends [`GATEWAY`]'s bearer token with every request that does not set its own.
    pub http: reqwest::Client,
    /// Sends no credentials at all.
    pub anon: reqwest::Client,
    /// [`GATEWAY`]'s bearer token.
    pub token: String,
    pub clock: Arc<ManualClock>,
    pub state: AppState,
    pub sealer: AuditSealer,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for TestApp {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// A response: status and JSON body.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub body: Value,
}

impl TestApp {
    pub async fn start(config: Config, enrolled: &[&Approver]) -> Self {
        let clock = Arc::new(ManualClock::new(
            OffsetDateTime::parse(START, &Rfc3339).unwrap(),
        ));
        Self::start_with_clock(config, enrolled, clock.clone(), clock).await
    }

    /// Start with `service_clock` as the service's clock; `clock` is what `advance` moves (the
    /// same clock, or the one `service_clock` reads through).
    pub async fn start_with_clock(
        config: Config,
        enrolled: &[&Approver],
        clock: Arc<ManualClock>,
        service_clock: Arc<dyn countersign_server::Clock>,
    ) -> Self {
        let sealer = AuditSealer::from_seed([42; 32]);
        let store = SqliteStore::in_memory(sealer.clone()).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let state = AppState::new(StateParts {
            config,
            public_url: base.clone(),
            store: Arc::new(store),
            clock: service_clock,
            sealer: sealer.clone(),
            mirror: None,
        })
        .unwrap();
        let records: Vec<CredentialRecord> = enrolled.iter().map(|a| a.record()).collect();
        state.enroll(records).await.unwrap();
        let token = state.add_gateway(GATEWAY).await.unwrap();
        let router = countersign_server::build_router(state.clone());
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Self {
            base,
            http: Self::client_with(&token),
            anon: reqwest::Client::new(),
            token,
            clock,
            state,
            sealer,
            server,
        }
    }

    /// A client that sends `token` as its gateway bearer token (unless a request sets its own).
    pub fn client_with(token: &str) -> reqwest::Client {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert(
            reqwest::header::AUTHORIZATION,
            format!("Bearer {token}").parse().unwrap(),
        );
        reqwest::Client::builder()
            .default_headers(headers)
            .build()
            .unwrap()
    }

    /// A second gateway: its name's token, and a client sending it.
    pub async fn other_gateway(&self, name: &str) -> (String, reqwest::Client) {
        let token = self.state.add_gateway(name).await.unwrap();
        let client = Self::client_with(&token);
        (token, client)
    }

    /// An auditor: its name's token, and a client sending it.
    pub async fn auditor(&self, name: &str) -> (String, reqwest::Client) {
        let token = self.state.add_auditor(name).await.unwrap();
        let client = Self::client_with(&token);
        (token, client)
    }

    /// GET `path` with `client`'s credentials.
    pub async fn get_as(&self, client: &reqwest::Client, path: &str) -> Reply {
        self.send(client.get(self.url(path))).await
    }

    pub async fn default_with(enrolled: &[&Approver]) -> Self {
        Self::start(config(), enrolled).await
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub async fn send(&self, req: reqwest::RequestBuilder) -> Reply {
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        let body = serde_json::from_str(&text)
            .unwrap_or_else(|_| panic!("non-JSON body with status {status}: {text:?}"));
        Reply { status, body }
    }

    pub async fn post(&self, path: &str, body: &Value) -> Reply {
        self.send(self.http.post(self.url(path)).json(body)).await
    }

    /// GET `path`, unauthenticated, as text.
    pub async fn get_text(&self, path: &str) -> String {
        let r = self.anon.get(self.url(path)).send().await.unwrap();
        r.text().await.unwrap()
    }

    pub async fn get(&self, path: &str) -> Reply {
        self.send(self.http.get(self.url(path))).await
    }

    pub async fn post_auth(&self, path: &str, token: &str, body: &Value) -> Reply {
        self.send(self.http.post(self.url(path)).bearer_auth(token).json(body))
            .await
    }

    /// Create a generic tool call.
    pub async fn create(&self, tool: &str, params: Value) -> Reply {
        self.post(
            "/v1/approvals",
            &json!({"agent_id": "agent-7", "tool_name": tool, "params": params}),
        )
        .await
    }

    /// Create a pending payment approval; returns its id.
    pub async fn create_pending(&self, params: Value) -> String {
        let r = self.create("payments.transfer", params).await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        assert_eq!(r.body["status"], "PENDING", "{:?}", r.body);
        r.body["approval_id"].as_str().unwrap().to_owned()
    }

    pub fn audit_text(&self) -> String {
        self.state.store().seal_audit().unwrap();
        let lines = self.state.store().audit_lines_after(0, 1_000_000).unwrap();
        lines.into_iter().map(|(_, l)| l + "\n").collect()
    }

    /// The whole audit check, every Decision's evidence re-verified.
    pub fn audit(&self) -> AuditReport {
        audit_of(self.audit_text().as_bytes(), &self.sealer)
    }

    /// Audit lines as JSON, filtered by kind.
    pub fn audit_lines(&self, kind: &str) -> Vec<Value> {
        self.audit_text()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|v| v["kind"] == kind)
            .collect()
    }

    pub fn advance(&self, seconds: i64) {
        self.clock.advance(time::Duration::seconds(seconds));
    }
}

/// An approver with a software authenticator.
pub struct Approver {
    pub principal: String,
    pub key: SoftKey,
    counter: AtomicU32,
}

impl Approver {
    pub fn new(principal: &str, fixture: &str) -> Self {
        Self {
            principal: principal.to_owned(),
            key: countersign_testkit::key(fixture),
            counter: AtomicU32::new(0),
        }
    }

    /// An approver with a given software key (enrolled through an invite, for example).
    pub fn with_key(principal: &str, key: SoftKey) -> Self {
        Self {
            principal: principal.to_owned(),
            key,
            counter: AtomicU32::new(0),
        }
    }

    pub fn alice() -> Self {
        Self::new("alice", "alice-es256")
    }

    pub fn bob() -> Self {
        Self::new("bob", "bob-es256")
    }

    pub fn record(&self) -> CredentialRecord {
        countersign_testkit::enroll(&self.key, &self.principal)
    }

    /// Sign `challenge` (raw bytes) as the approver's authenticator would.
    pub fn sign(&self, challenge: Vec<u8>) -> AssertionBody {
        let request = AssertionRequest::from(Ceremony {
            sign_count: self.counter.fetch_add(1, Ordering::SeqCst) + 1,
            ..Ceremony::get(RP_ID, ORIGIN, challenge)
        });
        let r = self.key.assert(&request).unwrap();
        AssertionBody {
            credential_id: b64::encode(&r.credential_id),
            client_data_json: b64::encode(&r.client_data_json),
            authenticator_data: b64::encode(&r.authenticator_data),
            signature: b64::encode(&r.signature),
        }
    }

    pub async fn login(&self, app: &TestApp) -> String {
        let c = app.post("/v1/approver/login/challenge", &json!({})).await;
        assert_eq!(c.status, 200, "{:?}", c.body);
        let challenge = b64::decode(c.body["challenge"].as_str().unwrap()).unwrap();
        let body = serde_json::to_value(self.sign(challenge)).unwrap();
        let r = app.post("/v1/approver/login", &body).await;
        assert_eq!(r.status, 200, "login: {:?}", r.body);
        assert_eq!(r.body["principal"], self.principal.as_str());
        r.body["token"].as_str().unwrap().to_owned()
    }

    /// Fetch a challenge for `decision` and sign it (not yet submitted).
    pub async fn prepare(&self, app: &TestApp, token: &str, id: &str, decision: Decision) -> Value {
        let c = app
            .post_auth(
                &format!("/v1/approver/approvals/{id}/challenge"),
                token,
                &json!({"decision": decision}),
            )
            .await;
        assert_eq!(c.status, 200, "challenge: {:?}", c.body);
        let challenge = b64::decode(c.body["challenge"].as_str().unwrap()).unwrap();
        serde_json::to_value(self.sign(challenge)).unwrap()
    }

    /// Submit a prepared assertion as the verdict on `id`.
    pub async fn submit(&self, app: &TestApp, token: &str, id: &str, body: &Value) -> Reply {
        app.post_auth(
            &format!("/v1/approver/approvals/{id}/decision"),
            token,
            body,
        )
        .await
    }

    /// Login, fetch, sign and submit.
    pub async fn decide(&self, app: &TestApp, id: &str, decision: Decision) -> Reply {
        let token = self.login(app).await;
        let body = self.prepare(app, &token, id, decision).await;
        self.submit(app, &token, id, &body).await
    }
}

/// `audit verify` of a log under [`config`], evidence re-verified.
pub fn audit_of(log: &[u8], sealer: &AuditSealer) -> AuditReport {
    let config = config();
    let check = EvidenceCheck {
        policy: config.policy(&config.default_tool, None),
        tools: config
            .tools
            .iter()
            .map(|rule| (rule.name.clone(), config.policy(rule, None)))
            .collect(),
        registry: None,
        threads: 2,
    };
    verify_log_with(log, &sealer.public_key(), Some(&check))
}
