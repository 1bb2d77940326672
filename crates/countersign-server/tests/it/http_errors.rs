//! Malformed requests get a 4xx with the JSON error envelope, never a 500 or a panic.

use crate::support::{Approver, TestApp};
use serde_json::{Value, json};

fn assert_envelope(status: u16, body: &Value, want: u16) {
    assert_eq!(status, want, "{body:?}");
    assert!(body["error"]["code"].is_string(), "{body:?}");
    assert!(body["error"]["message"].is_string(), "{body:?}");
}

#[tokio::test]
async fn null_optional_request_members_are_refused_naming_the_member() {
    let alice = Approver::alice();
    let app = TestApp::default_with(&[&alice]).await;
    for member in ["profile", "severity"] {
        let mut body = json!({"agent_id": "a", "tool_name": "read_file", "params": {}});
        body[member] = Value::Null;
        let r = app.post("/v1/approvals", &body).await;
        assert_envelope(r.status, &r.body, 422);
        assert!(
            r.body["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains(member)),
            "{member}: {:?}",
            r.body
        );
    }
    // Absent, both take their defaults.
    let r = app
        .post(
            "/v1/approvals",
            &json!({"agent_id": "a", "tool_name": "read_file", "params": {}}),
        )
        .await;
    assert!((200..300).contains(&r.status), "{:?}", r.body);
}

#[tokio::test]
async fn malformed_requests_get_json_4xx() {
    let alice = Approver::alice();
    let app = TestApp::default_with(&[&alice]).await;
    let raw = |body: &'static str| {
        app.http
            .post(app.url("/v1/approvals"))
            .header("content-type", "application/json")
            .body(body)
    };
    for (body, status) in [
        ("{", 400),
        ("[]", 422),
        (r#"{"agent_id": "a"}"#, 422),
        (
            r#"{"agent_id": "a", "tool_name": "t", "params": {}, "extra": 1}"#,
            422,
        ),
        (r#"{"agent_id": 5, "tool_name": "t", "params": {}}"#, 422),
        (r#"{"agent_id": "", "tool_name": "t", "params": {}}"#, 400),
        // Duplicate keys inside params: admission looks at the raw bytes.
        (
            r#"{"agent_id": "a", "tool_name": "t", "params": {"x": "1", "x": "2"}}"#,
            422,
        ),
        (
            r#"{"agent_id": "a", "tool_name": "t", "params": {"n": 1e400}}"#,
            400,
        ),
        (
            r#"{"agent_id": "a", "tool_name": "t", "params": {}, "profile": "nope/1"}"#,
            422,
        ),
    ] {
        let r = app.send(raw(body)).await;
        assert!(
            r.status == status || (400..500).contains(&r.status),
            "{body}: {r:?}"
        );
        assert_envelope(r.status, &r.body, r.status);
    }
    let unknown_profile = app
        .post(
            "/v1/approvals",
            &json!({"agent_id": "a", "tool_name": "t", "params": {}, "profile": "nope/1"}),
        )
        .await;
    assert_eq!(
        unknown_profile.body["error"]["reason_code"],
        "profile_unknown"
    );
    let dup = app
        .send(raw(
            r#"{"agent_id": "a", "tool_name": "t", "params": {"x": "1", "x": "2"}}"#,
        ))
        .await;
    assert_eq!(dup.body["error"]["reason_code"], "action_inadmissible");

    let no_type = app
        .send(app.http.post(app.url("/v1/approvals")).body("{}"))
        .await;
    assert_envelope(no_type.status, &no_type.body, 415);

    let missing = app.get("/v1/approvals/apv_nope").await;
    assert_envelope(missing.status, &missing.body, 404);
    let route = app.get("/v2/whatever").await;
    assert_envelope(route.status, &route.body, 404);
    let method = app.send(app.http.delete(app.url("/v1/approvals"))).await;
    assert_envelope(method.status, &method.body, 405);
    let bad_wait = app.get("/v1/approvals/x?wait=soon").await;
    assert_envelope(bad_wait.status, &bad_wait.body, 400);

    let id = app.create_pending(json!({"to": "A"})).await;
    for fp in ["", "not base64!", "AAAA"] {
        let r = app
            .post(
                &format!("/v1/approvals/{id}/grant"),
                &json!({"fingerprint": fp}),
            )
            .await;
        assert_envelope(r.status, &r.body, 400);
    }
    let pending = app
        .post(
            &format!("/v1/approvals/{id}/grant"),
            &json!({"fingerprint": countersign::b64::encode(&[0; 32])}),
        )
        .await;
    assert_envelope(pending.status, &pending.body, 409);
    assert_eq!(pending.body["error"]["reason_code"], "pending");

    // Approver endpoints: no token, a bad token, garbage assertions.
    let r = app
        .post(
            "/v1/approver/approvals/x/challenge",
            &json!({"decision": "APPROVED"}),
        )
        .await;
    assert_envelope(r.status, &r.body, 401);
    let r = app
        .post_auth(
            "/v1/approver/approvals/x/challenge",
            "forged",
            &json!({"decision": "APPROVED"}),
        )
        .await;
    assert_envelope(r.status, &r.body, 401);
    let garbage = json!({"credential_id": "!!", "client_data_json": "", "authenticator_data": "", "signature": ""});
    let r = app.post("/v1/approver/login", &garbage).await;
    assert_envelope(r.status, &r.body, 400);
    let token = alice.login(&app).await;
    let r = app
        .post_auth(
            &format!("/v1/approver/approvals/{id}/challenge"),
            &token,
            &json!({"decision": "MAYBE"}),
        )
        .await;
    assert_envelope(r.status, &r.body, 422);
    let unsigned = json!({
        "credential_id": countersign::b64::encode(alice.key.credential_id()),
        "client_data_json": countersign::b64::encode(b"{}"),
        "authenticator_data": "",
        "signature": "",
    });
    let r = alice.submit(&app, &token, &id, &unsigned).await;
    assert!((400..500).contains(&r.status), "{r:?}");
    assert_envelope(r.status, &r.body, r.status);
    assert_eq!(
        app.get(&format!("/v1/approvals/{id}")).await.body["status"],
        "PENDING"
    );
}

#[tokio::test]
async fn metadata_endpoints_answer() {
    let app = TestApp::default_with(&[]).await;
    let openapi = app.get("/openapi.json").await;
    assert_eq!(openapi.status, 200);
    assert!(openapi.body["paths"]["/v1/approvals"].is_object());
    let key = app.get("/v1/service-key").await;
    assert_eq!(key.body["public_key"], app.sealer.public_key_b64().as_str());
    assert_eq!(app.get("/healthz").await.body["status"], "ok");
}

/// The operations that never touch the store, so never answer 503 `store_unavailable`
/// (`/readyz` answers 503 with its own `not_ready` body).
const STORELESS: [(&str, &str); 5] = [
    ("/healthz", "get"),
    ("/readyz", "get"),
    ("/openapi.json", "get"),
    ("/v1/service-key", "get"),
    ("/v1/audit/checkpoint/witnessed", "get"),
];

#[tokio::test]
async fn every_operation_that_reads_the_store_documents_503() {
    let app = TestApp::default_with(&[]).await;
    let openapi = app.get("/openapi.json").await.body;
    let unavailable = &openapi["components"]["responses"]["Unavailable"];
    assert_eq!(
        unavailable["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/Error"
    );
    let mut checked = 0;
    for (path, ops) in openapi["paths"].as_object().unwrap() {
        for (method, op) in ops.as_object().unwrap() {
            let Some(responses) = op.get("responses") else {
                continue;
            };
            if op.get("requestBody").is_some() {
                assert_eq!(
                    responses["408"]["$ref"], "#/components/responses/BodyTimeout",
                    "{method} {path} reads a body and must list 408"
                );
            }
            let answer = &responses["503"];
            if STORELESS.contains(&(path.as_str(), method.as_str())) {
                assert_ne!(
                    answer["$ref"], "#/components/responses/Unavailable",
                    "{method} {path}"
                );
            } else {
                assert_eq!(
                    answer["$ref"], "#/components/responses/Unavailable",
                    "{method} {path} can meet an unavailable store and must list 503"
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 25, "{checked}");
    // The exempt list names real operations (a renamed one cannot hide behind it).
    for (path, method) in STORELESS {
        assert!(
            openapi["paths"][path][method].is_object(),
            "{method} {path}"
        );
    }
}

#[tokio::test]
async fn a_dribbled_body_is_answered_408_while_other_clients_are_served() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut cfg = crate::support::config();
    cfg.timeouts.body_read_seconds = 1;
    let app = TestApp::start(cfg, &[&Approver::alice()]).await;
    let host = app.base.trim_start_matches("http://").to_owned();
    let mut slow = tokio::net::TcpStream::connect(&host).await.unwrap();
    // Headers promise 200 bytes; the body comes one byte at a time and never completes.
    let head = format!(
        "POST /v1/approvals HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nContent-Length: 200\r\n\r\n{{",
        app.token
    );
    slow.write_all(head.as_bytes()).await.unwrap();
    let dribble = tokio::spawn(async move {
        let mut answer = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            // A byte, then wait for an answer for a while before the next one.
            let _ = slow.write_all(b" ").await;
            match tokio::time::timeout(std::time::Duration::from_millis(200), slow.read(&mut buf))
                .await
            {
                Ok(Ok(0)) | Ok(Err(_)) => return answer,
                Ok(Ok(n)) => answer.extend_from_slice(&buf[..n]),
                Err(_) if !answer.is_empty() => return answer,
                Err(_) => {}
            }
        }
    });
    // Another client is served while the slow one dribbles.
    let health = app.get("/healthz").await;
    assert_eq!(health.status, 200);
    let created = app
        .create(
            "payments.transfer",
            countersign_testkit::payment_fields("B"),
        )
        .await;
    assert_eq!(created.status, 200, "{:?}", created.body);
    let answer = String::from_utf8_lossy(&dribble.await.unwrap()).into_owned();
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("\"code\":\"body_timeout\""), "{answer}");
}

#[test]
fn the_body_timeout_defaults_to_30_seconds_and_zero_is_refused() {
    assert_eq!(crate::support::config().timeouts.body_read_seconds, 30);
    let zero = countersign_server::Config::from_toml(&format!(
        "rp_id = \"{}\"\norigins = [\"{}\"]\n[timeouts]\nbody_read_seconds = 0\n",
        countersign_testkit::RP_ID,
        countersign_testkit::ORIGIN
    ));
    assert!(zero.is_err(), "a zero body timeout is refused");
}
