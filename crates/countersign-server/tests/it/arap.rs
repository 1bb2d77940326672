//! The AuthZEN ARAP Access Request Service (docs/spec/arap.md), driven by a PDP client written
//! here from the profile's text (openid/authzen
//! `profiles/authzen-access-request-approval/authzen-access-request-approval-profile-1_0.md`,
//! Draft 1): discover the endpoint in the metadata, submit an access request for a requestable
//! denial, poll the task's status endpoint, and verify `approval.state` against the JWK Set at
//! `jwks_uri` — in Rust here, and with Python's joserfc (a JOSE library the service does not use)
//! in the ignored test `.ci/steps/arap.sh` runs.

use crate::support::{Approver, GATEWAY, TestApp, config};
use countersign::{Decision, b64};
use countersign_server::Config;
use countersign_testkit::{ORIGIN, RP_ID};
use serde_json::{Value, json};

/// The PEP side of the profile: what it learned from the metadata.
struct Pdp<'a> {
    app: &'a TestApp,
    endpoint: String,
    jwks_uri: String,
}

impl<'a> Pdp<'a> {
    /// Discovery: the metadata names the endpoint, the key set and the capability.
    async fn discover(app: &'a TestApp) -> Self {
        let meta = app.get("/.well-known/authzen-configuration").await;
        assert_eq!(meta.status, 200, "{:?}", meta.body);
        let caps = meta.body["capabilities"].as_array().unwrap();
        assert!(caps.contains(&json!("urn:openid:authzen:capability:access-request")));
        Self {
            app,
            endpoint: meta.body["access_request_endpoint"]
                .as_str()
                .unwrap()
                .to_owned(),
            jwks_uri: meta.body["jwks_uri"].as_str().unwrap().to_owned(),
        }
    }

    /// A single-item submission for a denial of `action` on a document for `subject`.
    fn request(subject: &str, action: &str) -> Value {
        json!({
            "subject": {"type": "user", "id": subject},
            "resource": {"type": "document", "id": "q4-plan"},
            "action": {"name": action},
            "context": {"business_justification": "renewal review"},
            "denial": {
                "evaluation_id": "eval_01HX4Y2P8BQ4Y3F0V0K9D6Z7M1",
                "evaluated_at": "2026-11-20T09:59:00Z",
                "expires_at": "2026-11-20T10:10:00Z",
                "reason": "approval_required",
            },
        })
    }

    /// Submit; the raw answer (status, headers' Location, body).
    async fn submit_raw(&self, body: &Value) -> (u16, Option<String>, String, Value) {
        let r = self
            .app
            .http
            .post(&self.endpoint)
            .json(body)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        let location = r
            .headers()
            .get("location")
            .map(|v| v.to_str().unwrap().to_owned());
        let kind = r
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default();
        let body: Value = serde_json::from_str(&r.text().await.unwrap()).unwrap();
        (status, location, kind, body)
    }

    /// Submit and expect a pending task; its status endpoint.
    async fn submit(&self, subject: &str, action: &str) -> (String, String) {
        let (status, location, _, body) = self.submit_raw(&Self::request(subject, action)).await;
        assert_eq!(status, 202, "{body:?}");
        let task = &body["task"];
        assert_eq!(task["status"], "pending");
        let endpoint = task["status_endpoint"].as_str().unwrap().to_owned();
        assert_eq!(location.as_deref(), Some(endpoint.as_str()));
        assert!(task["links"]["cancel"].is_string());
        (task["id"].as_str().unwrap().to_owned(), endpoint)
    }

    async fn poll(&self, status_endpoint: &str) -> Value {
        let r = self.app.send(self.app.http.get(status_endpoint)).await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        r.body
    }

    /// The Ed25519 key of `kid` from the JWK Set.
    async fn key(&self, kid: &str) -> ed25519_dalek::VerifyingKey {
        let set = self.app.send(self.app.anon.get(&self.jwks_uri)).await.body;
        let jwk = set["keys"]
            .as_array()
            .unwrap()
            .iter()
            .find(|k| k["kid"] == kid)
            .expect("kid in the JWK Set");
        assert_eq!(jwk["kty"], "OKP");
        assert_eq!(jwk["crv"], "Ed25519");
        let x = b64::decode(jwk["x"].as_str().unwrap()).unwrap();
        ed25519_dalek::VerifyingKey::from_bytes(&x.try_into().unwrap()).unwrap()
    }

    /// Verify a compact JWS `approval.state`; its claims.
    async fn verify_state(&self, state: &str) -> Value {
        let parts: Vec<&str> = state.split('.').collect();
        assert_eq!(parts.len(), 3, "compact JWS");
        let header: Value = serde_json::from_slice(&b64::decode(parts[0]).unwrap()).unwrap();
        assert_eq!(header["alg"], "EdDSA");
        let key = self.key(header["kid"].as_str().unwrap()).await;
        let signature =
            ed25519_dalek::Signature::from_slice(&b64::decode(parts[2]).unwrap()).unwrap();
        key.verify_strict(format!("{}.{}", parts[0], parts[1]).as_bytes(), &signature)
            .expect("approval.state signature verifies under jwks_uri");
        serde_json::from_slice(&b64::decode(parts[1]).unwrap()).unwrap()
    }
}

#[tokio::test]
async fn a_pdp_submits_polls_and_verifies_the_signed_approval_state() {
    let (alice, bob) = (Approver::alice(), Approver::bob());
    let app = TestApp::default_with(&[&alice, &bob]).await;
    let pdp = Pdp::discover(&app).await;
    let (id, status_endpoint) = pdp.submit("carol@example.com", "can_read").await;
    assert_eq!(
        pdp.poll(&status_endpoint).await["task"]["status"],
        "pending"
    );

    // The approver sees the request as the approval's parameters.
    let token = alice.login(&app).await;
    let review = app
        .send(
            app.http
                .get(app.url(&format!("/v1/approver/approvals/{id}")))
                .bearer_auth(&token),
        )
        .await;
    assert_eq!(review.status, 200, "{:?}", review.body);
    let shown = review.body.to_string();
    assert!(shown.contains("q4-plan") && shown.contains("carol@example.com"));

    let r = alice.decide(&app, &id, Decision::Approved).await;
    assert_eq!(r.status, 200, "{:?}", r.body);

    let done = pdp.poll(&status_endpoint).await;
    assert_eq!(done["task"]["status"], "approved", "{done:?}");
    let result = &done["result"];
    assert_eq!(result["mode"], "reevaluate");
    let approval = &result["approval"];
    assert_eq!(approval["id"], id.as_str());
    let claims = pdp.verify_state(approval["state"].as_str().unwrap()).await;
    assert_eq!(claims["iss"], app.base.as_str());
    assert_eq!(claims["aud"], GATEWAY);
    assert_eq!(claims["approval_id"], approval["id"]);
    assert_eq!(claims["approved_until"], approval["approved_until"]);
    assert!(claims["exp"].as_i64().unwrap() > claims["iat"].as_i64().unwrap());
    assert_eq!(claims["subject"]["id"], "carol@example.com");
    assert_eq!(claims["resource"]["id"], "q4-plan");
    assert_eq!(claims["action"]["name"], "can_read");
    assert_eq!(claims["evaluation_id"], "eval_01HX4Y2P8BQ4Y3F0V0K9D6Z7M1");

    // The evidence inside is the approver's: its op_hash is the one the service signs for.
    let evidence = &claims["evidence"][0];
    assert_eq!(evidence["decision"], "APPROVED");
    let op_hash = b64::decode(claims["op_hash"].as_str().unwrap()).unwrap();
    assert_eq!(
        b64::decode(evidence["op_hash"].as_str().unwrap()).unwrap(),
        op_hash
    );
    let digest = b64::decode(claims["evidence_sha256"].as_str().unwrap()).unwrap();
    assert_eq!(digest.len(), 32);
    assert!(
        claims["tlog_proof"]
            .as_str()
            .unwrap()
            .starts_with("c2sp.org/tlog-proof@v1")
    );
    let fetched = app
        .send(app.http.get(claims["evidence_uri"].as_str().unwrap()))
        .await;
    assert_eq!(fetched.body["approver_evidence"], claims["evidence"]);
}

#[tokio::test]
async fn a_refusal_is_denied_and_carries_no_result() {
    let bob = Approver::bob();
    let app = TestApp::default_with(&[&bob]).await;
    let pdp = Pdp::discover(&app).await;
    let (id, status_endpoint) = pdp.submit("carol@example.com", "can_read").await;
    let r = bob.decide(&app, &id, Decision::Denied).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let done = pdp.poll(&status_endpoint).await;
    assert_eq!(done["task"]["status"], "denied");
    assert!(done.get("result").is_none(), "{done:?}");
}

/// Challenge for `decision` on `id` as `approver`: the answer.
async fn challenge(app: &TestApp, approver: &Approver, id: &str) -> crate::support::Reply {
    let token = approver.login(app).await;
    app.post_auth(
        &format!("/v1/approver/approvals/{id}/challenge"),
        &token,
        &json!({"decision": Decision::Approved}),
    )
    .await
}

#[tokio::test]
async fn the_subject_may_not_approve_its_own_request() {
    let (alice, bob) = (Approver::alice(), Approver::bob());
    let app = TestApp::default_with(&[&alice, &bob]).await;
    let pdp = Pdp::discover(&app).await;
    let (id, status_endpoint) = pdp.submit("alice", "can_read").await;
    let r = challenge(&app, &alice, &id).await;
    assert_eq!(r.status, 403, "{:?}", r.body);
    assert_eq!(r.body["error"]["code"], "self_approval");
    assert_eq!(
        pdp.poll(&status_endpoint).await["task"]["status"],
        "pending"
    );
    let r = bob.decide(&app, &id, Decision::Approved).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(
        pdp.poll(&status_endpoint).await["task"]["status"],
        "approved"
    );
}

#[tokio::test]
async fn who_may_approve_is_the_tools_policy() {
    // The action's name is the tool: `deploy` is bob's alone to approve.
    let config = Config::from_toml(&format!(
        r#"
        rp_id = "{RP_ID}"
        origins = ["{ORIGIN}"]
        [groups]
        releasers = ["bob"]
        [[tools]]
        name = "deploy"
        approvers = ["releasers"]
        "#
    ))
    .unwrap();
    let (alice, bob) = (Approver::alice(), Approver::bob());
    let app = TestApp::start(config, &[&alice, &bob]).await;
    let pdp = Pdp::discover(&app).await;
    let (id, status_endpoint) = pdp.submit("carol@example.com", "deploy").await;
    let r = challenge(&app, &alice, &id).await;
    assert_eq!(r.status, 403, "{:?}", r.body);
    assert_eq!(r.body["error"]["code"], "not_eligible");
    assert_eq!(bob.decide(&app, &id, Decision::Approved).await.status, 200);
    assert_eq!(
        pdp.poll(&status_endpoint).await["task"]["status"],
        "approved"
    );
}

#[tokio::test]
async fn a_tool_that_needs_no_approval_completes_at_once() {
    let app = TestApp::default_with(&[]).await;
    let pdp = Pdp::discover(&app).await;
    let (status, _, _, body) = pdp.submit_raw(&Pdp::request("carol", "read_file")).await;
    assert_eq!(status, 201, "{body:?}");
    assert_eq!(body["task"]["status"], "approved");
    let claims = pdp
        .verify_state(body["result"]["approval"]["state"].as_str().unwrap())
        .await;
    assert_eq!(claims["evidence"], json!([]));
}

#[tokio::test]
async fn submissions_without_a_live_bound_denial_are_problems() {
    let alice = Approver::alice();
    let app = TestApp::default_with(&[&alice]).await;
    let pdp = Pdp::discover(&app).await;
    let problem = |kind: &str| format!("urn:openid:authzen:access-request:error:{kind}");

    let mut unbound = Pdp::request("carol", "can_read");
    unbound["denial"] = json!({"expires_at": "2026-11-20T10:10:00Z"});
    let (status, _, kind, body) = pdp.submit_raw(&unbound).await;
    assert_eq!((status, kind.as_str()), (400, "application/problem+json"));
    assert_eq!(body["type"], problem("invalid_denial_binding"));

    let mut stale = Pdp::request("carol", "can_read");
    stale["denial"]["expires_at"] = json!("2026-11-20T09:59:00Z");
    let (status, _, _, body) = pdp.submit_raw(&stale).await;
    assert_eq!(status, 410);
    assert_eq!(body["type"], problem("expired_denial"));

    // Within the 30-second skew tolerance: accepted.
    let mut skewed = Pdp::request("carol", "can_read");
    skewed["denial"]["expires_at"] = json!("2026-11-20T09:59:40Z");
    assert_eq!(pdp.submit_raw(&skewed).await.0, 202);

    let mut bundle = Pdp::request("carol", "can_read");
    bundle["items"] = json!([{"resource": {"type": "doc", "id": "x"}, "action": {"name": "a"}}]);
    let (status, _, _, body) = pdp.submit_raw(&bundle).await;
    assert_eq!(status, 400);
    assert_eq!(body["type"], problem("not_requestable"));

    // Unauthenticated: the gateway token is required.
    let r = app
        .send(app.anon.post(&pdp.endpoint).json(&Pdp::request("c", "a")))
        .await;
    assert_eq!(r.status, 401);
}

#[tokio::test]
async fn tasks_expire_cancel_once_and_belong_to_their_gateway() {
    let alice = Approver::alice();
    let app = TestApp::start(config(), &[&alice]).await;
    let pdp = Pdp::discover(&app).await;
    let problem = |kind: &str| format!("urn:openid:authzen:access-request:error:{kind}");

    let (id, status_endpoint) = pdp.submit("carol", "can_read").await;
    let cancel = format!("{status_endpoint}/cancel");
    let (_, other) = app.other_gateway("other-gateway").await;
    let r = app.send(other.get(&status_endpoint)).await;
    assert_eq!(r.status, 404);
    assert_eq!(r.body["type"], problem("unknown_task"));
    let r = app.send(other.post(&cancel)).await;
    assert_eq!(r.status, 404);

    let r = app.send(app.http.post(&cancel)).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["task"]["status"], "cancelled");
    assert_eq!(r.body["task"]["id"], id.as_str());
    let r = app.send(app.http.post(&cancel)).await;
    assert_eq!(r.status, 409);
    assert_eq!(r.body["type"], problem("invalid_task_state"));

    // An unanswered request expires (approval_seconds = 300).
    let (_, status_endpoint) = pdp.submit("carol", "can_read").await;
    app.advance(301);
    assert_eq!(
        pdp.poll(&status_endpoint).await["task"]["status"],
        "expired"
    );
}

/// The same flow, with `approval.state` verified by Python's joserfc against the JWK Set it
/// fetches from `jwks_uri` (iss, aud and exp checked by joserfc's claims registry).
/// `.ci/steps/arap.sh` makes the venv and sets `ARAP_PYTHON`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs python jose"]
async fn joserfc_verifies_the_approval_state() {
    let python = std::env::var("ARAP_PYTHON").expect("ARAP_PYTHON: a python with joserfc");
    let alice = Approver::alice();
    let app = TestApp::default_with(&[&alice]).await;
    let pdp = Pdp::discover(&app).await;
    let (id, status_endpoint) = pdp.submit("carol@example.com", "can_read").await;
    assert_eq!(
        alice.decide(&app, &id, Decision::Approved).await.status,
        200
    );
    let done = pdp.poll(&status_endpoint).await;
    let state = done["result"]["approval"]["state"]
        .as_str()
        .unwrap()
        .to_owned();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/arap_verify.py");
    // The server runs on this runtime's other worker while Python calls it.
    let check = |state: &str, audience: &str| {
        tokio::task::block_in_place(|| {
            std::process::Command::new(&python)
                .args([script, &app.base, state, audience, &id])
                .output()
        })
        .expect("run the joserfc check")
    };
    // joserfc refuses a state for another audience, and one whose payload was edited.
    assert!(!check(&state, "another-pdp").status.success());
    let (signed, signature) = state.rsplit_once('.').unwrap();
    let (header, payload) = signed.split_once('.').unwrap();
    let mut claims: Value = serde_json::from_slice(&b64::decode(payload).unwrap()).unwrap();
    claims["resource"]["id"] = json!("another-document");
    let edited = format!(
        "{header}.{}.{signature}",
        b64::encode(&serde_json::to_vec(&claims).unwrap())
    );
    assert!(!check(&edited, GATEWAY).status.success());
    let out = check(&state, GATEWAY);
    assert!(
        out.status.success(),
        "joserfc refused: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let claims: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(claims["approval_id"], id.as_str());
    assert_eq!(claims["op_hash"], pdp.verify_state(&state).await["op_hash"]);
}
