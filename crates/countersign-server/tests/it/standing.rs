//! Approver-signed standing grants through the service, and the approver inbox (docs/spec/
//! service.md §11): proposed by a gateway, signed on the approver API, covering later calls with
//! the grant's evidence and a use number, consumed atomically, revocable by their signer only.

use crate::support::{Approver, GATEWAY, TestApp, config};
use crate::web::{page_get, page_post, sign_in};
use countersign::{
    Action, ApprovalResult, Decision, MemoryReplayState, ReasonCode, verify_evidence,
};
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// A tool under the default rule (every enrolled approver may decide, the tool-call profile).
const TOOL: &str = "vendor.pay";

fn scope(max_uses: u64) -> Value {
    json!({
        "agent_id": "agent-7",
        "tool_name": "vendor.*",
        "constraints": [
            {"kind": "max", "arg": "/amount", "max": "100.00"},
            {"kind": "currency", "arg": "/currency", "allowed": ["EUR"]},
        ],
        "max_uses": max_uses,
        "expires_at": "2026-11-21T10:00:00Z",
    })
}

async fn propose(app: &TestApp, body: &Value) -> String {
    let r = app.post("/v1/standing-grants", body).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["status"], "PENDING", "{:?}", r.body);
    r.body["approval_id"].as_str().unwrap().to_owned()
}

/// Propose a grant and have `who` sign it.
async fn signed_grant(app: &TestApp, who: &Approver, max_uses: u64) -> String {
    let id = propose(app, &scope(max_uses)).await;
    let r = who.decide(app, &id, Decision::Approved).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["status"], "APPROVED");
    id
}

fn params(amount: &str) -> Value {
    json!({"amount": amount, "currency": "EUR", "invoice": "INV-7"})
}

/// What a gateway does with the answer: verify it offline with its own policy and registry.
fn verify_offline(app: &TestApp, amount: &str, result: &Value) -> countersign::Verdict {
    let config = config();
    let policy = config.policy(&config.default_tool, None);
    let fields = json!({"agent_id": "agent-7", "tool_name": TOOL, "params": params(amount)});
    let action = Action::new("countersign.tool-call/1", fields.to_string()).with_tool(TOOL);
    let result = ApprovalResult::from_json(result.to_string().as_bytes()).unwrap();
    let registry = countersign::CredentialRegistry::from_document(countersign::RegistryDocument {
        credentials: app.state.store().credentials().unwrap(),
    })
    .unwrap();
    let now = OffsetDateTime::parse(crate::support::START, &Rfc3339).unwrap();
    verify_evidence(
        &policy,
        &action,
        &result,
        &registry,
        &mut MemoryReplayState::new(),
        now,
    )
}

#[tokio::test]
async fn a_signed_grant_approves_covered_calls_with_its_evidence_and_a_use_number() {
    let alice = Approver::alice();
    let app = TestApp::default_with(&[&alice]).await;
    let grant = signed_grant(&app, &alice, 2).await;

    let first = app.create(TOOL, params("40.00")).await;
    assert_eq!(first.body["status"], "APPROVED", "{:?}", first.body);
    assert_eq!(first.body["standing_grant"]["grant_id"], grant.as_str());
    assert_eq!(first.body["standing_grant"]["use"], 1);
    // The signed fields: the proposal, and the calls it covers (the proposing gateway's
    // generic tool calls, as the proposal named neither a profile nor gateways).
    let mut signed = scope(2);
    signed["calls"] = json!({"profile": "countersign.tool-call/1", "gateways": [GATEWAY]});
    assert_eq!(first.body["standing_grant"]["fields"], signed);
    let evidence = &first.body["approver_evidence"][0];
    assert_eq!(
        evidence["canonicalization_profile"],
        countersign::STANDING_GRANT_PROFILE
    );
    let verdict = verify_offline(&app, "40.00", &first.body);
    assert!(verdict.is_allow(), "{verdict:?}");
    assert_eq!(verdict.approvers[0].principal, "alice");

    // The covered call's single-use grant is collected like any other.
    let fingerprint = {
        let profile = countersign::ProfileRegistry::builtin();
        let profile = profile.get("countersign.tool-call/1").unwrap().clone();
        let fields = json!({"agent_id": "agent-7", "tool_name": TOOL, "params": params("40.00")});
        let admitted = countersign::admit_fields(&profile, fields.to_string().as_bytes()).unwrap();
        countersign::b64::encode(&countersign::op_hash(&profile, Decision::Approved, &admitted).0)
    };
    let id = first.body["approval_id"].as_str().unwrap();
    let g = app
        .post(
            &format!("/v1/approvals/{id}/grant"),
            &json!({"fingerprint": fingerprint, "tool_name": TOOL}),
        )
        .await;
    assert_eq!(g.status, 200, "{:?}", g.body);

    let second = app.create(TOOL, params("100.00")).await;
    assert_eq!(second.body["standing_grant"]["use"], 2, "{:?}", second.body);
    // max_uses = 2: the third call goes to a human.
    let third = app.create(TOOL, params("10.00")).await;
    assert_eq!(third.body["status"], "PENDING", "{:?}", third.body);
    assert!(third.body.get("standing_grant").is_none());

    // Each use is an outcome line naming the grant, its number and its signer.
    let uses: Vec<Value> = app
        .audit_lines("outcome")
        .into_iter()
        .filter(|l| l.get("standing_grant").is_some())
        .collect();
    assert_eq!(uses.len(), 2);
    assert_eq!(uses[0]["use"], 1);
    assert_eq!(uses[1]["use"], 2);
    assert_eq!(uses[1]["signed_by"], "alice");
    assert!(app.audit().is_valid(), "{:?}", app.audit().issues);
}

#[tokio::test]
async fn a_call_outside_the_scope_goes_to_a_human() {
    let alice = Approver::alice();
    let app = TestApp::default_with(&[&alice]).await;
    signed_grant(&app, &alice, 5).await;
    for (tool, params) in [
        (TOOL, params("100.01")),
        (TOOL, json!({"amount": "5.00", "currency": "USD"})),
        (TOOL, json!({"currency": "EUR"})),
        ("accounts.close", params("5.00")),
    ] {
        let r = app.create(tool, params.clone()).await;
        assert_eq!(r.body["status"], "PENDING", "{tool} {params}: {:?}", r.body);
    }
    // Another agent is not covered either.
    let r = app
        .post(
            "/v1/approvals",
            &json!({"agent_id": "agent-8", "tool_name": TOOL, "params": params("5.00")}),
        )
        .await;
    assert_eq!(r.body["status"], "PENDING");
}

#[tokio::test]
async fn the_result_is_refused_offline_for_a_call_it_does_not_cover() {
    let alice = Approver::alice();
    let app = TestApp::default_with(&[&alice]).await;
    signed_grant(&app, &alice, 5).await;
    let r = app.create(TOOL, params("40.00")).await;
    // Presented for a bigger payment, the same result is out of scope.
    let verdict = verify_offline(&app, "400.00", &r.body);
    assert_eq!(
        verdict.reason_code,
        Some(ReasonCode::OutOfScope),
        "{verdict:?}"
    );
}

#[tokio::test]
async fn a_refused_or_unsigned_grant_approves_nothing() {
    let alice = Approver::alice();
    let app = TestApp::default_with(&[&alice]).await;
    let pending = propose(&app, &scope(5)).await;
    assert_eq!(
        app.create(TOOL, params("5.00")).await.body["status"],
        "PENDING"
    );
    let refused = propose(&app, &scope(5)).await;
    let r = alice.decide(&app, &refused, Decision::Denied).await;
    assert_eq!(r.body["status"], "DENIED");
    assert_eq!(
        app.create(TOOL, params("5.00")).await.body["status"],
        "PENDING"
    );
    let _ = pending;
}

#[tokio::test]
async fn only_the_signer_revokes_and_a_revoked_grant_stops_at_once() {
    let (alice, bob) = (Approver::alice(), Approver::bob());
    let app = TestApp::default_with(&[&alice, &bob]).await;
    let grant = signed_grant(&app, &alice, 5).await;
    assert_eq!(
        app.create(TOOL, params("5.00")).await.body["status"],
        "APPROVED"
    );

    let path = format!("/v1/approver/standing-grants/{grant}/revoke");
    let bob_token = bob.login(&app).await;
    let r = app.post_auth(&path, &bob_token, &json!({})).await;
    assert_eq!(
        (r.status, r.body["error"]["code"].as_str()),
        (403, Some("not_your_grant"))
    );
    let alice_token = alice.login(&app).await;
    let r = app.post_auth(&path, &alice_token, &json!({})).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["live"], false);
    assert_eq!(r.body["uses"], 1);
    assert_eq!(r.body["revoked_by"], "alice");
    let again = app.post_auth(&path, &alice_token, &json!({})).await;
    assert_eq!(
        (again.status, again.body["error"]["code"].as_str()),
        (409, Some("already_revoked"))
    );

    assert_eq!(
        app.create(TOOL, params("5.00")).await.body["status"],
        "PENDING"
    );
    let revocations = app.audit_lines("standing_revocation");
    assert_eq!(revocations.len(), 1);
    assert_eq!(revocations[0]["principal"], "alice");
    assert!(app.audit().is_valid(), "{:?}", app.audit().issues);
}

#[tokio::test]
async fn an_expired_grant_approves_nothing() {
    let alice = Approver::alice();
    let app = TestApp::default_with(&[&alice]).await;
    signed_grant(&app, &alice, 5).await;
    app.advance(24 * 3600);
    assert_eq!(
        app.create(TOOL, params("5.00")).await.body["status"],
        "PENDING"
    );
}

#[tokio::test]
async fn concurrent_calls_never_take_more_than_max_uses() {
    let alice = Approver::alice();
    let app = TestApp::default_with(&[&alice]).await;
    signed_grant(&app, &alice, 5).await;
    let url = app.url("/v1/approvals");
    let tasks: Vec<_> = (0..24)
        .map(|_| {
            let (client, url) = (app.http.clone(), url.clone());
            let body = json!({"agent_id": "agent-7", "tool_name": TOOL, "params": params("1.00")});
            tokio::spawn(async move {
                let resp = client.post(url).json(&body).send().await.unwrap();
                resp.json::<Value>().await.unwrap()
            })
        })
        .collect();
    let mut uses = Vec::new();
    for task in tasks {
        let body = task.await.unwrap();
        if body["status"] == "APPROVED" {
            uses.push(body["standing_grant"]["use"].as_u64().unwrap());
        } else {
            assert_eq!(body["status"], "PENDING", "{body}");
        }
    }
    uses.sort_unstable();
    assert_eq!(uses, [1, 2, 3, 4, 5]);
}

#[tokio::test]
async fn a_scope_the_core_refuses_is_422_and_the_profile_is_not_a_plain_approval() {
    let app = TestApp::default_with(&[&Approver::alice()]).await;
    for (member, value) in [
        (
            "constraints",
            json!([{"kind": "at_least", "arg": "/amount", "min": "1"}]),
        ),
        ("expires_at", json!("2026-11-21T10:00:00")),
        ("expires_at", json!("2026-11-19T10:00:00Z")),
        ("max_uses", json!(0)),
    ] {
        let mut body = scope(5);
        body[member] = value.clone();
        let r = app.post("/v1/standing-grants", &body).await;
        assert_eq!(r.status, 422, "{member} = {value}: {:?}", r.body);
        assert_eq!(r.body["error"]["code"], "invalid_scope");
    }
    let r = app
        .post(
            "/v1/approvals",
            &json!({"agent_id": "agent-7", "tool_name": "vendor.*", "params": scope(5)["constraints"],
                    "profile": countersign::STANDING_GRANT_PROFILE}),
        )
        .await;
    assert_eq!(r.status, 422, "{:?}", r.body);
    // Unauthenticated proposals are refused before anything is read.
    let r = app
        .send(
            app.anon
                .post(app.url("/v1/standing-grants"))
                .json(&scope(5)),
        )
        .await;
    assert_eq!(r.status, 401);
}

#[tokio::test]
async fn the_page_review_of_a_proposal_shows_every_constraint_and_its_standing() {
    let alice = Approver::alice();
    let app = TestApp::default_with(&[&alice]).await;
    let id = propose(&app, &scope(3)).await;
    let s = sign_in(&app, &alice).await;
    let r = page_get(&app, &format!("/v1/web/approvals/{id}"), &s).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["profile"], countersign::STANDING_GRANT_PROFILE);
    let paths: Vec<&str> = r.body["display"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["path"].as_str().unwrap())
        .collect();
    for leaf in [
        "agent_id",
        "tool_name",
        "constraints[0].kind",
        "constraints[0].arg",
        "constraints[0].max",
        "constraints[1].allowed[0]",
        "max_uses",
        "expires_at",
    ] {
        assert!(paths.contains(&leaf), "{leaf} not shown: {paths:?}");
    }
    assert_eq!(r.body["standing"]["status"], "PENDING");
    assert_eq!(r.body["standing"]["live"], false);
    // Signed through the page, then revoked through the page.
    let c = page_post(
        &app,
        &format!("/v1/web/approvals/{id}/challenge"),
        &json!({"decision": "APPROVED"}),
        Some(&s),
    )
    .await;
    let challenge = countersign::b64::decode(c.body["challenge"].as_str().unwrap()).unwrap();
    let body = serde_json::to_value(alice.sign(challenge)).unwrap();
    let d = page_post(
        &app,
        &format!("/v1/web/approvals/{id}/decision"),
        &body,
        Some(&s),
    )
    .await;
    assert_eq!(d.body["status"], "APPROVED", "{:?}", d.body);
    let r = page_get(&app, &format!("/v1/web/approvals/{id}"), &s).await;
    assert_eq!(r.body["standing"]["live"], true);
    assert_eq!(r.body["standing"]["signed_by"], "alice");
    let revoke = format!("/v1/web/standing-grants/{id}/revoke");
    let no_csrf = app
        .send(
            app.http
                .post(app.url(&revoke))
                .header("origin", countersign_testkit::ORIGIN)
                .header("cookie", &s.cookie)
                .json(&json!({})),
        )
        .await;
    assert_eq!(no_csrf.status, 403);
    let r = page_post(&app, &revoke, &json!({}), Some(&s)).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert!(r.body["revoked_at"].is_string());
}

#[tokio::test]
async fn the_inbox_lists_what_the_signed_in_approver_may_decide_newest_first_and_nothing_before() {
    let (alice, bob) = (Approver::alice(), Approver::bob());
    let app = TestApp::default_with(&[&alice, &bob]).await;
    let r = app.get("/v1/web/inbox").await;
    assert_eq!(r.status, 401, "nothing before sign-in: {:?}", r.body);
    let r = app.get("/v1/approver/inbox").await;
    assert_eq!(r.status, 401);

    let older = app.create(TOOL, json!({"n": 1})).await.body["approval_id"].clone();
    app.advance(1);
    // restart_cluster's approvers are the ops group, which neither alice nor bob is in.
    let hidden = app.create("restart_cluster", json!({})).await.body["approval_id"].clone();
    app.advance(1);
    let newer = app.create(TOOL, json!({"n": 2})).await.body["approval_id"].clone();
    app.advance(1);
    let grant = signed_grant(&app, &alice, 4).await;
    app.create(TOOL, params("1.00")).await;

    let s = sign_in(&app, &alice).await;
    let inbox = page_get(&app, "/v1/web/inbox", &s).await;
    assert_eq!(inbox.status, 200, "{:?}", inbox.body);
    let ids: Vec<&Value> = inbox.body["pending"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| &i["approval_id"])
        .collect();
    assert_eq!(
        ids,
        [&newer, &older],
        "newest first, only what alice may decide"
    );
    assert!(!ids.contains(&&hidden));
    let first = &inbox.body["pending"][0];
    for key in ["tool_name", "severity", "expires_at", "kind"] {
        assert!(first.get(key).is_some(), "{key} missing: {first}");
    }
    assert!(first.get("params").is_none() && first.get("fields").is_none());
    let grants = inbox.body["standing_grants"].as_array().unwrap();
    assert_eq!(grants.len(), 1);
    assert_eq!(grants[0]["grant_id"], grant.as_str());
    assert_eq!(
        (grants[0]["uses"].as_u64(), grants[0]["max_uses"].as_u64()),
        (Some(1), Some(4))
    );

    // Bob sees the same pending calls, but not alice's grant.
    let token = bob.login(&app).await;
    let r = app
        .send(
            app.http
                .get(app.url("/v1/approver/inbox"))
                .bearer_auth(&token),
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["pending"].as_array().unwrap().len(), 2);
    assert!(r.body["standing_grants"].as_array().unwrap().is_empty());
}

/// Create a generic tool call of agent-7 as the gateway holding `token`.
async fn create_as(app: &TestApp, token: &str, params: Value) -> crate::support::Reply {
    app.post_auth(
        "/v1/approvals",
        token,
        &json!({"agent_id": "agent-7", "tool_name": TOOL, "params": params}),
    )
    .await
}

#[tokio::test]
async fn a_grant_covers_only_the_calls_of_the_gateway_that_proposed_it() {
    let alice = Approver::alice();
    let app = TestApp::default_with(&[&alice]).await;
    let (other_token, _) = app.other_gateway("other-team").await;
    // Proposed by the app's own gateway (test-gateway), signed by alice.
    signed_grant(&app, &alice, 5).await;
    // Another tenant claiming the same agent id does not spend it: its call goes to a human.
    let r = create_as(&app, &other_token, params("5.00")).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["status"], "PENDING", "{:?}", r.body);
    assert!(r.body.get("standing_grant").is_none(), "{:?}", r.body);
    // The proposing gateway's own call is covered, and it is the grant's first use.
    let r = app.create(TOOL, params("5.00")).await;
    assert_eq!(r.body["status"], "APPROVED", "{:?}", r.body);
    assert_eq!(r.body["standing_grant"]["use"], 1, "{:?}", r.body);
}

#[tokio::test]
async fn a_grant_naming_other_gateways_covers_theirs_only_and_unknown_names_are_refused() {
    let alice = Approver::alice();
    let app = TestApp::default_with(&[&alice]).await;
    let (ops_token, _) = app.other_gateway("ops-gw").await;
    let (other_token, _) = app.other_gateway("other-team").await;
    let mut body = scope(5);
    body["gateways"] = json!(["ops-gw"]);
    let id = propose(&app, &body).await;
    let r = alice.decide(&app, &id, Decision::Approved).await;
    assert_eq!(r.body["status"], "APPROVED", "{:?}", r.body);
    // Named: covered. Not named — the proposer included, and any third gateway — not covered.
    let r = create_as(&app, &ops_token, params("5.00")).await;
    assert_eq!(r.body["status"], "APPROVED", "{:?}", r.body);
    assert_eq!(
        r.body["standing_grant"]["fields"]["calls"]["gateways"],
        json!(["ops-gw"])
    );
    for token in [None, Some(&other_token)] {
        let r = match token {
            None => app.create(TOOL, params("5.00")).await,
            Some(t) => create_as(&app, t, params("5.00")).await,
        };
        assert_eq!(r.body["status"], "PENDING", "{:?}", r.body);
    }
    // A name the service does not know (it could be registered later by someone else), an
    // empty list and null are refused before anything is recorded.
    for gateways in [json!(["ops-gw", "nobody"]), json!([]), Value::Null] {
        let mut body = scope(5);
        body["gateways"] = gateways.clone();
        let r = app.post("/v1/standing-grants", &body).await;
        assert!(
            r.status == 422 || r.status == 400,
            "{gateways}: {:?}",
            r.body
        );
    }
}

/// An MCP tool call of agent-7 to `server`, created by the app's gateway.
async fn create_mcp(app: &TestApp, server: &str, params: Value) -> crate::support::Reply {
    app.post(
        "/v1/approvals",
        &json!({"agent_id": "agent-7", "tool_name": TOOL, "params": params,
                "profile": countersign::MCP_TOOL_CALL_PROFILE, "server_id": server}),
    )
    .await
}

#[tokio::test]
async fn a_grant_covers_calls_under_its_profile_and_to_its_mcp_server_only() {
    let alice = Approver::alice();
    let app = TestApp::default_with(&[&alice]).await;
    let mut body = scope(5);
    body["profile"] = json!(countersign::MCP_TOOL_CALL_PROFILE);
    body["server_id"] = json!("payments-server");
    let id = propose(&app, &body).await;
    assert_eq!(
        alice.decide(&app, &id, Decision::Approved).await.body["status"],
        "APPROVED"
    );
    // The same agent, tool and arguments: to another server, or as a generic tool call, the
    // call goes to a human.
    let r = create_mcp(&app, "other-server", params("5.00")).await;
    assert_eq!(r.body["status"], "PENDING", "{:?}", r.body);
    let r = app.create(TOOL, params("5.00")).await;
    assert_eq!(r.body["status"], "PENDING", "{:?}", r.body);
    // To the named server: covered, and the gateway's offline check agrees.
    let r = create_mcp(&app, "payments-server", params("5.00")).await;
    assert_eq!(r.body["status"], "APPROVED", "{:?}", r.body);
    assert_eq!(r.body["standing_grant"]["use"], 1, "{:?}", r.body);
    let config = config();
    let policy = config.policy(&config.default_tool, None);
    let registry = countersign::CredentialRegistry::from_document(countersign::RegistryDocument {
        credentials: app.state.store().credentials().unwrap(),
    })
    .unwrap();
    let now = OffsetDateTime::parse(crate::support::START, &Rfc3339).unwrap();
    let result = ApprovalResult::from_json(r.body.to_string().as_bytes()).unwrap();
    let verdict_for = |server: &str| {
        let fields = json!({"agent_id": "agent-7", "server_id": server, "tool_name": TOOL,
                            "params": params("5.00")});
        let action =
            Action::new(countersign::MCP_TOOL_CALL_PROFILE, fields.to_string()).with_tool(TOOL);
        verify_evidence(
            &policy,
            &action,
            &result,
            &registry,
            &mut MemoryReplayState::new(),
            now,
        )
    };
    assert!(verdict_for("payments-server").is_allow());
    assert_eq!(
        verdict_for("other-server").reason_code,
        Some(ReasonCode::OutOfScope)
    );
}

#[tokio::test]
async fn a_proposal_must_name_a_call_profile_and_its_server_exactly_when_it_signs_one() {
    let app = TestApp::default_with(&[&Approver::alice()]).await;
    for (profile, server) in [
        // The MCP profile signs the server: a grant that names none would cover every server.
        (json!(countersign::MCP_TOOL_CALL_PROFILE), None),
        // The generic profile signs none: a server would be a promise nobody checks.
        (json!("countersign.tool-call/1"), Some("payments-server")),
        // Typed and standing-grant profiles have no agent, tool and params to cover.
        (json!("countersign.payment/1"), None),
        (json!(countersign::STANDING_GRANT_PROFILE), None),
        (json!("acme.unknown/1"), None),
    ] {
        let mut body = scope(5);
        body["profile"] = profile.clone();
        if let Some(server) = server {
            body["server_id"] = json!(server);
        }
        let r = app.post("/v1/standing-grants", &body).await;
        assert_eq!(r.status, 422, "{profile} {server:?}: {:?}", r.body);
        assert_eq!(r.body["error"]["code"], "invalid_scope");
    }
}

#[tokio::test]
async fn the_approver_page_shows_the_calls_a_grant_covers_before_signing() {
    let alice = Approver::alice();
    let app = TestApp::default_with(&[&alice]).await;
    app.other_gateway("ops-gw").await;
    let mut body = scope(3);
    body["profile"] = json!(countersign::MCP_TOOL_CALL_PROFILE);
    body["server_id"] = json!("payments-server");
    body["gateways"] = json!([GATEWAY, "ops-gw"]);
    let id = propose(&app, &body).await;
    let s = sign_in(&app, &alice).await;
    let r = page_get(&app, &format!("/v1/web/approvals/{id}"), &s).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    // Every member of `calls` is a row of the table the approver signs, with its value.
    let rows = r.body["display"]["rows"].as_array().unwrap();
    let shown = |path: &str| -> Option<String> {
        rows.iter().find(|row| row["path"] == path).map(|row| {
            row["value"]
                .as_array()
                .unwrap()
                .iter()
                .map(|seg| seg["text"].as_str().unwrap())
                .collect()
        })
    };
    assert_eq!(
        shown("calls.profile").as_deref(),
        Some(countersign::MCP_TOOL_CALL_PROFILE)
    );
    assert_eq!(shown("calls.server_id").as_deref(), Some("payments-server"));
    assert_eq!(shown("calls.gateways[0]").as_deref(), Some(GATEWAY));
    assert_eq!(shown("calls.gateways[1]").as_deref(), Some("ops-gw"));
    // The page's fields (what the banner reads) and the standing view say the same.
    assert_eq!(
        r.body["fields"]["calls"]["gateways"],
        json!([GATEWAY, "ops-gw"])
    );
    assert_eq!(r.body["standing"]["calls"]["server_id"], "payments-server");
}
