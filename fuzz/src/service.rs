//! The `service` target: the JSON bodies of the service's POST handlers, sent through the real
//! router (extractors, deserialization, validation, the handler and the in-memory SQLite store),
//! in process, without a socket.
//!
//! Input: byte 0 picks the route, the rest is the body. Oracles: never a 5xx (a body the service
//! cannot use is the client's error, never an internal one), every refusal is the JSON error
//! envelope, and the same body answered twice (on fresh material where the route consumes it)
//! gets the same status and error code.

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use countersign::CredentialRecord;
use countersign_audit::AuditSealer;
use countersign_server::store::SqliteStore;
use countersign_server::{AppState, Config, ManualClock, StateParts};
use serde_json::Value;
use std::sync::{Arc, OnceLock};
use time::OffsetDateTime;
use tower::ServiceExt as _;

/// The routes that take a JSON body, as (method path, whether the gateway token is sent).
/// `{approved}` becomes a fresh approval that its tool rule approved at once (so a grant can be
/// collected from it exactly once).
pub(crate) const ROUTES: [(&str, bool); 6] = [
    ("/v1/approvals", true),
    ("/v1/approvals/{approved}/grant", true),
    ("/v1/standing-grants", true),
    ("/v1/approver/login", false),
    ("/v1/enroll/start", false),
    ("/v1/enroll/finish", false),
];

struct Service {
    runtime: tokio::runtime::Runtime,
    router: Router,
    token: String,
    clock: Arc<ManualClock>,
}

const CONFIG: &str = r#"
rp_id = "pay.example.com"
origins = ["https://pay.example.com"]
[groups]
finance = ["alice", "bob"]
[[tools]]
name = "payments.transfer"
approvers = ["finance"]
profile = "countersign.payment/1"
[[tools]]
name = "read_file"
approval = "none"
[[tools]]
name = "directory.update"
nfc = "normalize"
approvers = ["finance"]
"#;

fn service() -> &'static Service {
    static SERVICE: OnceLock<Service> = OnceLock::new();
    SERVICE.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap_or_else(|e| panic!("runtime: {e}"));
        let clock = Arc::new(ManualClock::new(
            OffsetDateTime::UNIX_EPOCH + time::Duration::days(20_000),
        ));
        let (router, token) = runtime.block_on(async {
            let sealer = AuditSealer::from_seed([42; 32]);
            let store = SqliteStore::in_memory(sealer.clone()).unwrap_or_else(|e| panic!("{e}"));
            let config = Config::from_toml(CONFIG).unwrap_or_else(|e| panic!("{e}"));
            let state = AppState::new(StateParts {
                config,
                public_url: "http://127.0.0.1:9".into(),
                store: Arc::new(store),
                clock: clock.clone(),
                sealer,
                mirror: None,
            })
            .unwrap_or_else(|e| panic!("{e}"));
            state
                .enroll(enrolled())
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            let token = state
                .add_gateway("fuzz")
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            (countersign_server::build_router(state), token)
        });
        Service {
            runtime,
            router,
            token,
            clock,
        }
    })
}

/// The worked example's enrolled credentials, with alice and bob in the finance group.
fn enrolled() -> Vec<CredentialRecord> {
    crate::fixtures::good_cases()
        .iter()
        .flat_map(|g| g.case.registry.iter().map(|c| c.record().clone()))
        .take(1)
        .collect()
}

impl Service {
    fn post(&self, path: &str, gateway: bool, body: Vec<u8>) -> (StatusCode, Value) {
        let mut request = Request::post(path).header(header::CONTENT_TYPE, "application/json");
        if gateway {
            request = request.header(header::AUTHORIZATION, format!("Bearer {}", self.token));
        }
        let request = request
            .body(Body::from(body))
            .unwrap_or_else(|e| panic!("request: {e}"));
        self.runtime.block_on(async {
            let response = self
                .router
                .clone()
                .oneshot(request)
                .await
                .unwrap_or_else(|e| match e {});
            let status = response.status();
            let bytes = axum::body::to_bytes(response.into_body(), 1 << 24)
                .await
                .unwrap_or_else(|e| panic!("body: {e}"));
            let value = serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                panic!(
                    "{status}: body is not JSON ({e}): {}",
                    String::from_utf8_lossy(&bytes)
                )
            });
            (status, value)
        })
    }

    /// A fresh approval that its tool rule approved at once; its id.
    fn approved(&self) -> String {
        let body = br#"{"agent_id":"fuzz","tool_name":"read_file","params":{"path":"/etc/motd"}}"#;
        let (status, value) = self.post(ROUTES[0].0, true, body.to_vec());
        match (
            status,
            value["status"].as_str(),
            value["approval_id"].as_str(),
        ) {
            (StatusCode::OK, Some("APPROVED"), Some(id)) => id.to_owned(),
            _ => panic!("setup: {status} {value}"),
        }
    }

    /// Answer one body on one route: the status and the error code, if any.
    fn answer(&self, route: usize, body: &[u8]) -> (u16, Option<String>) {
        let (path, gateway) = ROUTES[route % ROUTES.len()];
        let path = if path.contains("{approved}") {
            path.replace("{approved}", &self.approved())
        } else {
            path.to_owned()
        };
        // Sign-in and enrollment attempts are rate limited per client: start a fresh window so
        // the limit never decides the answer.
        self.clock.advance(time::Duration::seconds(61));
        let (status, value) = self.post(&path, gateway, body.to_vec());
        assert!(!status.is_server_error(), "{path}: {status} {value}");
        let code = value["error"]["code"].as_str().map(str::to_owned);
        if !status.is_success() {
            assert!(
                code.is_some(),
                "{path}: {status} without the error envelope: {value}"
            );
        }
        (status.as_u16(), code)
    }
}

/// The target body.
pub(crate) fn one_request(data: &[u8]) {
    let Some((&route, body)) = data.split_first() else {
        return;
    };
    let service = service();
    let first = service.answer(usize::from(route), body);
    let second = service.answer(usize::from(route), body);
    assert_eq!(first, second, "same body, two answers");
}
