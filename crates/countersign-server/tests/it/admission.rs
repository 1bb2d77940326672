//! Admission (issue 10 §1 and §2): what a gateway submits is refused unless it is already in NFC
//! (or the tool's rule normalizes, and then says what changed), and the rule that decides who may
//! approve follows from signed data only: a typed profile is usable by the one tool configured
//! for it, and the verifier policy the service builds carries the eligible approvers, so an
//! offline verifier holding the service's configuration reaches the same verdicts.

use crate::support::{Approver, START, TestApp};
use countersign::{
    Action, ApprovalResult, ApprovalStatus, Decision, MemoryReplayState, ReasonCode,
    verify_evidence,
};
use countersign_server::Config;
use countersign_testkit::{ORIGIN, RP_ID, Signing, payment_fields};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// bob is enrolled but not in `finance`; the payment profile belongs to `payments.transfer`.
fn config() -> Config {
    Config::from_toml(&format!(
        r#"
        rp_id = "{RP_ID}"
        origins = ["{ORIGIN}"]
        [groups]
        finance = ["alice"]
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
        "#
    ))
    .unwrap()
}

fn payment(tool: &str, dest: &str) -> Value {
    json!({
        "agent_id": "agent-7",
        "tool_name": tool,
        "profile": "countersign.payment/1",
        "params": payment_fields(dest),
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn now() -> OffsetDateTime {
    OffsetDateTime::parse(START, &Rfc3339).unwrap()
}

#[tokio::test]
async fn a_string_not_in_nfc_is_refused_naming_every_path_and_code_point() {
    let app = TestApp::start(config(), &[&Approver::alice()]).await;
    // KELVIN SIGN and OHM SIGN: shown by most fonts exactly like K and Ω.
    let r = app
        .create(
            "payments.transfer",
            json!({"user": "\u{212A}evin", "note": "100 \u{2126}", "fine": "Kevin"}),
        )
        .await;
    assert_eq!(r.status, 422, "{:?}", r.body);
    let err = &r.body["error"];
    assert_eq!(err["code"], "not_nfc");
    assert_eq!(err["reason_code"], "action_inadmissible");
    assert_eq!(
        err["not_nfc"],
        json!([
            {"path": "/params/note", "code_points": ["U+2126"]},
            {"path": "/params/user", "code_points": ["U+212A"]},
        ])
    );
    let message = err["message"].as_str().unwrap();
    assert!(
        message.contains("/params/user") && message.contains("U+212A"),
        "{message}"
    );
    // A key is a string too.
    let r = app
        .create("payments.transfer", json!({"\u{212A}": "x"}))
        .await;
    assert_eq!(
        r.body["error"]["not_nfc"][0]["code_points"],
        json!(["U+212A"])
    );
    // Nothing was recorded for a refused request; the NFC spelling is admitted.
    assert!(app.audit_lines("request").is_empty());
    let ok = app
        .create("payments.transfer", json!({"user": "Kevin"}))
        .await;
    assert_eq!(ok.status, 200, "{:?}", ok.body);
    let line = &app.audit_lines("request")[0];
    let submitted =
        r#"{"agent_id":"agent-7","tool_name":"payments.transfer","params":{"user":"Kevin"}}"#;
    assert_eq!(line["submitted_sha256"], hex(&Sha256::digest(submitted)));
    assert!(line.get("submitted_text").is_none(), "{line}");
}

#[tokio::test]
async fn under_normalize_the_request_is_admitted_and_keeps_what_was_submitted() {
    let alice = Approver::alice();
    let app = TestApp::start(config(), &[&alice]).await;
    let r = app
        .create("directory.update", json!({"user": "\u{212A}evin"}))
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["status"], "PENDING");
    let id = r.body["approval_id"].as_str().unwrap().to_owned();

    // The audit line: the admitted (signed) form, and what the gateway will execute.
    let line = &app.audit_lines("request")[0];
    assert_eq!(line["fields"]["params"]["user"], "Kevin");
    let submitted = "{\"agent_id\":\"agent-7\",\"tool_name\":\"directory.update\",\
                     \"params\":{\"user\":\"\u{212A}evin\"}}";
    assert_eq!(line["submitted_text"], submitted);
    assert_eq!(line["submitted_sha256"], hex(&Sha256::digest(submitted)));
    assert!(app.audit().is_valid(), "{:?}", app.audit());

    // The approver API names what NFC changed and shows the submitted strings.
    let token = alice.login(&app).await;
    let view = app
        .send(
            app.http
                .get(app.url(&format!("/v1/approver/approvals/{id}")))
                .bearer_auth(&token),
        )
        .await;
    assert_eq!(view.status, 200, "{:?}", view.body);
    assert_eq!(
        view.body["not_nfc"],
        json!([{"path": "/params/user", "code_points": ["U+212A"]}])
    );
    assert_eq!(
        view.body["submitted_fields"]["params"]["user"],
        "\u{212A}evin"
    );
    assert_eq!(view.body["fields"]["params"]["user"], "Kevin");

    // The service verifies the verdict under the tool's normalize rule.
    let d = alice.decide(&app, &id, Decision::Approved).await;
    assert_eq!(d.status, 200, "{:?}", d.body);
    assert_eq!(d.body["status"], "APPROVED");
}

#[tokio::test]
async fn a_payment_under_another_tool_name_is_refused_before_any_rule_applies() {
    let app = TestApp::start(config(), &[&Approver::alice(), &Approver::bob()]).await;
    // The review's first attack: the same payment as `payments.transfer.v2` fell to the default
    // rule, which bob may approve.
    let r = app
        .post("/v1/approvals", &payment("payments.transfer.v2", "A"))
        .await;
    assert_eq!(r.status, 422, "{:?}", r.body);
    assert_eq!(r.body["error"]["code"], "action_inadmissible");
    assert_eq!(r.body["error"]["reason_code"], "action_inadmissible");
    let message = r.body["error"]["message"].as_str().unwrap();
    assert!(message.contains("payments.transfer.v2"), "{message}");
    // The second: under `approval = "none"` it was APPROVED at once, with a grant.
    let r = app.post("/v1/approvals", &payment("read_file", "A")).await;
    assert_eq!(r.status, 422, "{:?}", r.body);
    assert_eq!(r.body["error"]["code"], "action_inadmissible");
    assert!(app.audit_lines("request").is_empty());

    // The tool the profile belongs to: PENDING, and bob (not in finance) cannot decide it.
    let r = app
        .post("/v1/approvals", &payment("payments.transfer", "A"))
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["status"], "PENDING");
    let id = r.body["approval_id"].as_str().unwrap();
    let bob = Approver::bob();
    let token = bob.login(&app).await;
    let c = app
        .post_auth(
            &format!("/v1/approver/approvals/{id}/challenge"),
            &token,
            &json!({"decision": "APPROVED"}),
        )
        .await;
    assert_eq!(c.status, 403, "{:?}", c.body);
    assert_eq!(c.body["error"]["code"], "not_eligible");
    // The generic tool-call profile signs the tool name, so any tool may use it.
    let r = app.create("read_file", json!({"path": "/etc/motd"})).await;
    assert_eq!(r.body["status"], "APPROVED", "{:?}", r.body);
}

#[tokio::test]
async fn the_services_policy_refuses_offline_what_the_service_refuses() {
    let alice = Approver::alice();
    let bob = Approver::bob();
    let app = TestApp::start(config(), &[&alice, &bob]).await;
    let registry = countersign::CredentialRegistry::from_document(countersign_testkit::registry([
        alice.record(),
        bob.record(),
    ]))
    .unwrap();
    let policy = app.state.policy("payments.transfer");
    assert_eq!(policy.approvers, Some(vec!["alice".to_owned()]));
    assert_eq!(
        policy
            .profile_tools
            .get("countersign.payment/1")
            .map(String::as_str),
        Some("payments.transfer")
    );
    let payment = countersign_testkit::payment_action("A");
    let verify = |action: &Action, signer: &Approver, label: &str| {
        let mut signing = Signing::new(Decision::Approved, label);
        signing.assertion_at = START.to_owned();
        let entry = countersign_testkit::evidence(&signer.key, action, &signing);
        let result: ApprovalResult = countersign_testkit::result(ApprovalStatus::Approved, [entry]);
        verify_evidence(
            &policy,
            action,
            &result,
            &registry,
            &mut MemoryReplayState::new(),
            now(),
        )
    };
    // alice's approval for the tool it belongs to.
    let right = payment.clone().with_tool("payments.transfer");
    let v = verify(&right, &alice, "n1");
    assert!(v.is_allow(), "{v:?}");
    // The same evidence presented for another tool.
    let wrong = payment.clone().with_tool("payments.transfer.v2");
    let v = verify(&wrong, &alice, "n2");
    assert_eq!(v.reason_code, Some(ReasonCode::ActionInadmissible), "{v:?}");
    // bob, enrolled but not eligible: denied with its own reason, whoever asked.
    let v = verify(&right, &bob, "n3");
    assert_eq!(v.reason_code, Some(ReasonCode::ApproverIneligible), "{v:?}");
}
