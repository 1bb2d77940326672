//! Operator preauthorizations, recorded authority and revisions, over real HTTP.

use crate::support::{Approver, TestApp, config};
use countersign::{Decision, b64};
use countersign_server::Config;
use serde_json::{Value, json};

/// The shared test config plus `[[preauthorizations]]` tables.
fn config_with(preauth: &str) -> Config {
    let base = config();
    let mut c = Config::from_toml(&format!(
        r#"
        rp_id = "{}"
        origins = ["{}"]
        {preauth}
        "#,
        base.rp_id, base.origins[0],
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    c.timeouts = base.timeouts;
    c.groups = base.groups;
    c.tools = base.tools;
    c
}

const SMALL_EUR: &str = r#"
    [[preauthorizations]]
    slug = "small-eur"
    agent = "agent-*"
    tool = "payments.transfer"
    expires_at = 2099-01-01T00:00:00Z
    max_uses = 2
    constraints = [
        { kind = "currency", arg = "/currency", allowed = ["EUR"] },
        { kind = "max", arg = "/amount", max = "100.00" },
        { kind = "one_of", arg = "/memo", values = ["rent", "payroll"] },
    ]
"#;

fn payment(amount: &str, memo: Option<Value>) -> Value {
    let mut p = countersign_testkit::payment_fields("DE89");
    p["amount"] = json!(amount);
    if let Some(memo) = memo {
        p["memo"] = memo;
    }
    p
}

fn fingerprint(params: &Value) -> String {
    let action =
        countersign_testkit::tool_call_action("agent-7", "payments.transfer", params.clone());
    b64::encode(&countersign_testkit::op_hash_of(
        &action,
        Decision::Approved,
    ))
}

#[tokio::test]
async fn a_covered_call_is_approved_without_a_human_and_says_by_what() {
    let app = TestApp::start(config_with(SMALL_EUR), &[&Approver::alice()]).await;
    let params = payment("99.99", Some(json!("rent")));
    let r = app.create("payments.transfer", params.clone()).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["status"], "APPROVED");
    let authority = &r.body["authority"];
    assert_eq!(authority["by"], "preauthorization");
    assert_eq!(authority["preauthorization"]["slug"], "small-eur");
    assert_eq!(authority["preauthorization"]["use"], 1);
    assert_eq!(authority["op_hash"], fingerprint(&params));
    let digest = authority["preauthorization"]["digest"].as_str().unwrap();
    let expected = app.state.config().preauthorizations[0].digest();
    assert_eq!(digest, b64::encode(&expected));

    // The outcome line names it too, with the same digest, and the log verifies.
    let outcome = app.audit_lines("outcome").pop().unwrap();
    assert_eq!(outcome["status"], "APPROVED");
    assert_eq!(outcome["preauthorization"]["slug"], "small-eur");
    assert_eq!(outcome["preauthorization"]["digest"], digest);
    assert_eq!(outcome["preauthorization"]["use"], 1);
    assert_eq!(outcome["authority"]["scope"], "one_call");

    // The grant is collectable once, for this exact call.
    let id = r.body["approval_id"].as_str().unwrap();
    let grant = app
        .post(
            &format!("/v1/approvals/{id}/grant"),
            &json!({"fingerprint": fingerprint(&params), "tool_name": "payments.transfer"}),
        )
        .await;
    assert_eq!(grant.status, 200, "{:?}", grant.body);
    let report = app.audit();
    assert!(report.is_valid(), "{report:?}");
}

#[tokio::test]
async fn calls_outside_the_scope_or_beyond_max_uses_wait_for_a_human() {
    let app = TestApp::start(config_with(SMALL_EUR), &[&Approver::alice()]).await;
    for params in [
        payment("100.01", None),           // above the maximum
        payment("5", Some(json!("gift"))), // memo not allowed
        payment("5", None),                // memo absent: absence never matches null
    ] {
        let r = app.create("payments.transfer", params.clone()).await;
        assert_eq!(r.body["status"], "PENDING", "{params}: {:?}", r.body);
        assert!(r.body.get("authority").is_none());
    }
    let mut eur_gbp = payment("5", Some(json!("rent")));
    eur_gbp["currency"] = json!("GBP");
    assert_eq!(
        app.create("payments.transfer", eur_gbp).await.body["status"],
        "PENDING"
    );
    // Another tool is not covered either.
    let r = app
        .create("restart_cluster", payment("5", Some(json!("rent"))))
        .await;
    assert_ne!(r.body["status"], "APPROVED");

    // Two uses, then a human again.
    for expected in ["APPROVED", "APPROVED", "PENDING"] {
        let r = app
            .create("payments.transfer", payment("1", Some(json!("rent"))))
            .await;
        assert_eq!(r.body["status"], expected, "{:?}", r.body);
    }
}

#[tokio::test]
async fn a_disabled_preauthorization_stops_approving_and_its_uncollected_grants() {
    let app = TestApp::start(config_with(SMALL_EUR), &[&Approver::alice()]).await;
    let params = payment("1", Some(json!("rent")));
    let r = app.create("payments.transfer", params.clone()).await;
    assert_eq!(r.body["status"], "APPROVED");
    let id = r.body["approval_id"].as_str().unwrap().to_owned();

    let outcome = app
        .state
        .disable_preauthorization("small-eur")
        .await
        .unwrap();
    assert_eq!(outcome, countersign_server::store::DisableOutcome::Disabled);
    let again = app.create("payments.transfer", params.clone()).await;
    assert_eq!(again.body["status"], "PENDING");

    let grant = app
        .post(
            &format!("/v1/approvals/{id}/grant"),
            &json!({"fingerprint": fingerprint(&params)}),
        )
        .await;
    assert_eq!(grant.status, 409, "{:?}", grant.body);
    assert_eq!(grant.body["error"]["code"], "preauthorization_withdrawn");
    let disabled = app.audit_lines("preauthorization").pop().unwrap();
    assert_eq!(disabled["change"], "disabled");
}

#[tokio::test]
async fn an_expired_preauthorization_approves_nothing() {
    let expired = SMALL_EUR.replace("2099-01-01T00:00:00Z", "2020-01-01T00:00:00+01:00");
    let app = TestApp::start(config_with(&expired), &[&Approver::alice()]).await;
    let r = app
        .create("payments.transfer", payment("1", Some(json!("rent"))))
        .await;
    assert_eq!(r.body["status"], "PENDING");
}

#[test]
fn a_config_with_a_local_expiry_or_an_unknown_constraint_does_not_load() {
    let base = "rp_id = \"x\"\norigins = [\"https://x\"]\n";
    let local = SMALL_EUR.replace("2099-01-01T00:00:00Z", "2099-01-01T00:00:00");
    let err = Config::from_toml(&format!("{base}{local}")).err().unwrap();
    assert!(err.to_string().contains("offset"), "{err}");
    let unknown = SMALL_EUR.replace("kind = \"max\"", "kind = \"regex\"");
    let err = Config::from_toml(&format!("{base}{unknown}"))
        .err()
        .unwrap();
    assert!(err.to_string().contains("regex"), "{err}");
}

#[test]
fn a_config_with_a_string_prefix_over_a_path_does_not_load_and_a_path_rule_does() {
    let base = "rp_id = \"x\"\norigins = [\"https://x\"]\n";
    let files = |rule: &str| {
        format!(
            "{base}[[preauthorizations]]\nslug = \"reports\"\nagent = \"*\"\ntool = \"files.read\"\n\
             expires_at = 2099-01-01T00:00:00Z\nmax_uses = 5\nconstraints = [ {rule} ]\n"
        )
    };
    let err = Config::from_toml(&files(
        r#"{ kind = "prefix", arg = "/path", prefix = "/srv/reports/" }"#,
    ))
    .err()
    .unwrap();
    assert!(err.to_string().contains("\"kind\": \"path\""), "{err}");
    let err = Config::from_toml(&files(
        r#"{ kind = "path", arg = "/path", under = "/srv/reports/" }"#,
    ))
    .err()
    .unwrap();
    assert!(err.to_string().contains("normal form"), "{err}");
    assert!(
        Config::from_toml(&files(
            r#"{ kind = "path", arg = "/path", under = "/srv/reports" }"#
        ))
        .is_ok()
    );
}

#[tokio::test]
async fn a_human_decision_records_the_one_call_it_grants() {
    let alice = Approver::alice();
    let app = TestApp::default_with(&[&alice]).await;
    let params = payment("40000.00", None);
    let id = app.create_pending(params.clone()).await;
    let r = alice.decide(&app, &id, Decision::Approved).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["authority"]["by"], "decision");
    let decision = app.audit_lines("decision").pop().unwrap();
    assert_eq!(decision["authority"]["scope"], "one_call");
    assert_eq!(decision["authority"]["op_hash"], fingerprint(&params));
    assert_eq!(decision["authority"]["until"], r.body["authority"]["until"]);

    let other = payment("40000.00", Some(json!("rent")));
    let id2 = app.create_pending(other).await;
    let r = alice.decide(&app, &id2, Decision::Denied).await;
    assert_eq!(r.status, 200);
    let decision = app.audit_lines("decision").pop().unwrap();
    assert_eq!(decision["authority"]["scope"], "none");
}

#[tokio::test]
async fn a_revision_is_a_new_proposal_linked_to_the_one_it_revises() {
    let alice = Approver::alice();
    let app = TestApp::default_with(&[&alice]).await;
    let first = app.create_pending(payment("40000.00", None)).await;
    alice.decide(&app, &first, Decision::Approved).await;

    // The revision (a changed amount) starts PENDING: no approval passes to it.
    let r = app
        .post(
            "/v1/approvals",
            &json!({"agent_id": "agent-7", "tool_name": "payments.transfer",
                    "params": payment("45000.00", None), "revises": first}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["status"], "PENDING");
    assert_eq!(r.body["revises"], first.as_str());
    let second = r.body["approval_id"].as_str().unwrap().to_owned();
    let get = app.get(&format!("/v1/approvals/{second}")).await;
    assert_eq!(get.body["revises"], first.as_str());
    let request = app.audit_lines("request").pop().unwrap();
    assert_eq!(request["revises"], first.as_str());

    // Denying the revision leaves the revised one as it was, and the denial stays.
    alice.decide(&app, &second, Decision::Denied).await;
    let old = app.get(&format!("/v1/approvals/{first}")).await;
    assert_eq!(old.body["status"], "APPROVED");
    let third = app
        .post(
            "/v1/approvals",
            &json!({"agent_id": "agent-7", "tool_name": "payments.transfer",
                    "params": payment("44000.00", None), "revises": second}),
        )
        .await;
    assert_eq!(third.body["status"], "PENDING");
    let denied = app.get(&format!("/v1/approvals/{second}")).await;
    assert_eq!(denied.body["status"], "DENIED");

    // Only an approval of the same gateway can be revised.
    let r = app
        .post(
            "/v1/approvals",
            &json!({"agent_id": "agent-7", "tool_name": "payments.transfer",
                    "params": payment("1", None), "revises": "apv_nope"}),
        )
        .await;
    assert_eq!(r.status, 422);
    assert_eq!(r.body["error"]["code"], "unknown_revision");
    let (_, other) = app.other_gateway("other").await;
    let r = app
        .send(other.post(app.url("/v1/approvals")).json(&json!({
            "agent_id": "agent-7", "tool_name": "payments.transfer",
            "params": payment("1", None), "revises": first})))
        .await;
    assert_eq!(r.status, 422, "{:?}", r.body);
}
