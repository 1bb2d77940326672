//! Calls approved under an approver-signed standing grant (docs/SPEC.md §14): the grant's
//! signature, the approver's eligibility, every scope rule, expiry and the use number, each with
//! a call that passes and one that does not.

use super::verify::{alice, alice_registry, assert_allow, assert_deny, now, policy, verify};
use countersign::webauthn::default_backend;
use countersign::{
    Action, ApprovalResult, ApprovalStatus, Decision, MemoryReplayState, Policy, ReasonCode,
    ResultError, VerifyError, verify_evidence_with,
};
use countersign_testkit::{self as kit, Signing};
use serde_json::{Value, json};

const EXPIRES: &str = "2026-11-21T10:00:00Z";

/// A grant for agent-7 to make payments up to 500.00 EUR to accounts starting with `ops-`,
/// tagged `rent` or `utilities`, ten times until [`EXPIRES`].
fn fields() -> Value {
    kit::standing_grant_fields(
        "agent-7",
        "payments.*",
        json!([
            {"kind": "max", "arg": "/amount", "max": "500.00"},
            {"kind": "currency", "arg": "/currency", "allowed": ["EUR"]},
            {"kind": "prefix", "arg": "/to", "prefix": "ops-"},
            {"kind": "one_of", "arg": "/tag", "values": ["rent", "utilities"]},
        ]),
        10,
        EXPIRES,
    )
}

fn params() -> Value {
    json!({"amount": "120.00", "currency": "EUR", "to": "ops-landlord", "tag": "rent"})
}

fn call(params: Value) -> Action {
    kit::tool_call_action("agent-7", "payments.transfer", params).with_tool("payments.transfer")
}

/// The grant signed by alice (`decision`), presented as use `use_number`.
fn signed(fields: &Value, decision: Decision, use_number: u64) -> ApprovalResult {
    let grant = kit::standing_grant_action(fields);
    let mut signing = Signing::new(decision, "standing-grant");
    // Signed a day before the call: far older than max_age_seconds, which does not apply.
    signing.assertion_at = "2026-11-19T10:00:00Z".into();
    let entry = kit::evidence(&alice(), &grant, &signing);
    kit::standing_result(fields, use_number, [entry])
}

fn check(action: &Action, result: &ApprovalResult) -> countersign::Verdict {
    verify(&policy(), action, result, &alice_registry())
}

fn out_of_scope_code(verdict: &countersign::Verdict) -> &'static str {
    match &verdict.error {
        Some(VerifyError::OutOfScope(e)) => e.code(),
        other => panic!("expected out_of_scope, got {other:?}"),
    }
}

#[test]
fn a_covered_call_is_allowed_with_the_grant_signer_as_approver() {
    let verdict = check(&call(params()), &signed(&fields(), Decision::Approved, 1));
    assert_allow(&verdict);
    assert_eq!(verdict.approvers.len(), 1);
    assert_eq!(verdict.approvers[0].principal, "alice@example.com");
    assert_eq!(verdict.approvers[0].decision, Decision::Approved);
}

#[test]
fn each_use_is_spendable_once_and_other_uses_stay_spendable() {
    let action = call(params());
    let mut replay = MemoryReplayState::new();
    let mut run = |use_number| {
        verify_evidence_with(
            default_backend(),
            &policy(),
            &action,
            &signed(&fields(), Decision::Approved, use_number),
            &alice_registry(),
            &mut replay,
            now(),
        )
    };
    assert_allow(&run(1));
    assert_deny(&run(1), ReasonCode::Replayed);
    assert_allow(&run(2));
}

#[test]
fn the_signature_counter_is_not_compared_for_a_grant() {
    // The approver's key has signed many times since the grant; its count is far above.
    let mut record = kit::enroll(&alice(), "alice@example.com");
    record.sign_count = 1_000;
    let registry = super::verify::registry_of(vec![record]);
    let verdict = verify(
        &policy(),
        &call(params()),
        &signed(&fields(), Decision::Approved, 1),
        &registry,
    );
    assert_allow(&verdict);
}

#[test]
fn a_use_beyond_max_uses_is_out_of_scope() {
    assert_allow(&check(
        &call(params()),
        &signed(&fields(), Decision::Approved, 10),
    ));
    let verdict = check(&call(params()), &signed(&fields(), Decision::Approved, 11));
    assert_deny(&verdict, ReasonCode::OutOfScope);
    assert_eq!(out_of_scope_code(&verdict), "uses_exhausted");
}

#[test]
fn use_zero_makes_the_result_unusable() {
    let mut json = kit::result_json(&signed(&fields(), Decision::Approved, 1));
    json["standing_grant"]["use"] = json!(0);
    let err = ApprovalResult::from_json(json.to_string().as_bytes()).unwrap_err();
    assert!(matches!(
        err,
        ResultError::InvalidField {
            field: "standing_grant",
            ..
        }
    ));
    json["standing_grant"] = Value::Null;
    let err = ApprovalResult::from_json(json.to_string().as_bytes()).unwrap_err();
    assert!(
        matches!(
            err,
            ResultError::InvalidField {
                field: "standing_grant",
                ..
            }
        ),
        "null is not absent"
    );
}

#[test]
fn an_expired_grant_approves_nothing() {
    let mut f = fields();
    // Expiry is exclusive: a grant expiring exactly now no longer covers.
    f["expires_at"] = json!(kit::NOW);
    let verdict = check(&call(params()), &signed(&f, Decision::Approved, 1));
    assert_deny(&verdict, ReasonCode::StandingGrantExpired);
    f["expires_at"] = json!("2026-11-20T10:00:01Z");
    assert_allow(&check(&call(params()), &signed(&f, Decision::Approved, 1)));
}

#[test]
fn another_agent_or_tool_is_out_of_scope() {
    let other_agent = kit::tool_call_action("agent-8", "payments.transfer", params())
        .with_tool("payments.transfer");
    let verdict = check(&other_agent, &signed(&fields(), Decision::Approved, 1));
    assert_deny(&verdict, ReasonCode::OutOfScope);
    assert_eq!(out_of_scope_code(&verdict), "agent_not_covered");
    let other_tool =
        kit::tool_call_action("agent-7", "accounts.close", params()).with_tool("accounts.close");
    let verdict = check(&other_tool, &signed(&fields(), Decision::Approved, 1));
    assert_deny(&verdict, ReasonCode::OutOfScope);
    assert_eq!(out_of_scope_code(&verdict), "tool_not_covered");
}

#[test]
fn each_constraint_kind_refuses_a_call_outside_it() {
    for (name, value, code) in [
        ("amount", json!("500.01"), "above_maximum"),
        ("currency", json!("USD"), "currency_not_allowed"),
        ("to", json!("personal-1"), "prefix_mismatch"),
        ("tag", json!("bonus"), "value_not_allowed"),
    ] {
        let mut p = params();
        p[name] = value;
        let verdict = check(&call(p), &signed(&fields(), Decision::Approved, 1));
        assert_deny(&verdict, ReasonCode::OutOfScope);
        assert_eq!(out_of_scope_code(&verdict), code, "{name}");
    }
    // The maximum itself is inside.
    let mut p = params();
    p["amount"] = json!("500.00");
    assert_allow(&check(&call(p), &signed(&fields(), Decision::Approved, 1)));
}

#[test]
fn an_absent_argument_never_matches_even_where_null_is_allowed() {
    let f = kit::standing_grant_fields(
        "agent-7",
        "payments.*",
        json!([{"kind": "one_of", "arg": "/memo", "values": [null, "ok"]}]),
        5,
        EXPIRES,
    );
    assert_allow(&check(
        &call(json!({"memo": null})),
        &signed(&f, Decision::Approved, 1),
    ));
    let verdict = check(&call(json!({})), &signed(&f, Decision::Approved, 1));
    assert_deny(&verdict, ReasonCode::OutOfScope);
    assert_eq!(out_of_scope_code(&verdict), "argument_missing");
}

#[test]
fn fields_changed_after_signing_do_not_match_the_signature() {
    let mut result = signed(&fields(), Decision::Approved, 1);
    let grant = result.standing_grant.as_mut().unwrap();
    grant.fields["max_uses"] = json!(1000);
    assert_deny(
        &check(&call(params()), &result),
        ReasonCode::BindingMismatch,
    );
}

#[test]
fn a_refused_grant_is_a_veto() {
    let verdict = check(&call(params()), &signed(&fields(), Decision::Denied, 1));
    assert_deny(&verdict, ReasonCode::ApproverRefused);
}

#[test]
fn the_signer_must_be_eligible_under_the_calls_policy() {
    let strict = Policy {
        approvers: Some(vec!["bob@example.com".into()]),
        ..policy()
    };
    let result = signed(&fields(), Decision::Approved, 1);
    let verdict = verify(&strict, &call(params()), &result, &alice_registry());
    assert_deny(&verdict, ReasonCode::ApproverIneligible);
    let alice_only = Policy {
        approvers: Some(vec!["alice@example.com".into()]),
        ..policy()
    };
    assert_allow(&verify(
        &alice_only,
        &call(params()),
        &result,
        &alice_registry(),
    ));
}

#[test]
fn a_grant_assertion_dated_in_the_future_is_stale() {
    let grant = kit::standing_grant_action(&fields());
    let mut signing = Signing::new(Decision::Approved, "standing-future");
    signing.assertion_at = "2026-11-20T10:05:00Z".into();
    let entry = kit::evidence(&alice(), &grant, &signing);
    let result = kit::standing_result(&fields(), 1, [entry]);
    assert_deny(&check(&call(params()), &result), ReasonCode::Stale);
}

#[test]
fn a_grant_covers_tool_calls_only() {
    let payment = kit::payment_action("account-A");
    let verdict = check(&payment, &signed(&fields(), Decision::Approved, 1));
    assert_deny(&verdict, ReasonCode::ActionInadmissible);
    assert!(matches!(
        verdict.error,
        Some(VerifyError::StandingNotToolCall { .. })
    ));
}

#[test]
fn grant_evidence_without_the_standing_member_does_not_approve_the_call() {
    let mut result = signed(&fields(), Decision::Approved, 1);
    result.standing_grant = None;
    assert_deny(
        &check(&call(params()), &result),
        ReasonCode::BindingMismatch,
    );
}

#[test]
fn a_denied_result_carrying_a_grant_is_contradictory() {
    let mut result = signed(&fields(), Decision::Approved, 1);
    result.status = ApprovalStatus::Denied;
    assert_deny(
        &check(&call(params()), &result),
        ReasonCode::BindingMismatch,
    );
}

#[test]
fn an_unreadable_scope_is_malformed_evidence() {
    let f = kit::standing_grant_fields(
        "agent-7",
        "payments.*",
        json!([{"kind": "at_least", "arg": "/amount", "min": "1"}]),
        5,
        EXPIRES,
    );
    let verdict = check(&call(params()), &signed(&f, Decision::Approved, 1));
    assert_deny(&verdict, ReasonCode::EvidenceMalformed);
}

#[test]
fn grant_fields_round_trip_through_the_scope() {
    let scope = countersign::scope_of_grant_fields(&fields()).unwrap();
    assert_eq!(
        countersign::grant_fields_of_scope(&scope).unwrap(),
        fields()
    );
}

/// The grant of [`fields`] for MCP calls to `server` instead of generic tool calls.
fn mcp_fields(server: &str) -> Value {
    let mut f = fields();
    f["calls"] = kit::grant_calls(
        countersign::MCP_TOOL_CALL_PROFILE,
        Some(server),
        &[kit::GRANT_GATEWAY],
    );
    f
}

fn mcp_call(server: &str) -> Action {
    kit::mcp_tool_call_action("agent-7", server, "payments.transfer", params())
        .with_tool("payments.transfer")
}

#[test]
fn a_grant_covers_calls_under_the_profile_it_names_only() {
    // Named for generic tool calls: an MCP call with the same agent, tool and arguments is not
    // covered, whatever server it goes to.
    let verdict = check(
        &mcp_call("payments-server"),
        &signed(&fields(), Decision::Approved, 1),
    );
    assert_deny(&verdict, ReasonCode::OutOfScope);
    assert_eq!(out_of_scope_code(&verdict), "profile_not_covered");
    // Named for MCP calls: the generic tool call is not covered.
    let verdict = check(
        &call(params()),
        &signed(&mcp_fields("payments-server"), Decision::Approved, 1),
    );
    assert_deny(&verdict, ReasonCode::OutOfScope);
    assert_eq!(out_of_scope_code(&verdict), "profile_not_covered");
}

#[test]
fn an_mcp_grant_covers_calls_to_the_server_it_names_only() {
    let result = signed(&mcp_fields("payments-server"), Decision::Approved, 1);
    assert_allow(&check(&mcp_call("payments-server"), &result));
    let verdict = check(&mcp_call("other-server"), &result);
    assert_deny(&verdict, ReasonCode::OutOfScope);
    assert_eq!(out_of_scope_code(&verdict), "server_not_covered");
}

#[test]
fn an_mcp_grant_that_names_no_server_covers_no_mcp_call() {
    let mut f = fields();
    f["calls"] = kit::grant_calls(
        countersign::MCP_TOOL_CALL_PROFILE,
        None,
        &[kit::GRANT_GATEWAY],
    );
    let verdict = check(
        &mcp_call("payments-server"),
        &signed(&f, Decision::Approved, 1),
    );
    assert_deny(&verdict, ReasonCode::OutOfScope);
    assert_eq!(out_of_scope_code(&verdict), "server_not_covered");
}

/// The definition of the withdrawn `countersign.standing-grant/1`, whose scope named no calls.
const STANDING_GRANT_V1: &str = r#"{"id": "countersign.standing-grant/1",
  "title": "Standing grant: permission for later calls", "allow_floats": false, "fields": [
  {"name": "agent_id", "type": "string", "label": "Agents (pattern)", "exact": true},
  {"name": "tool_name", "type": "string", "label": "Tools (pattern)", "exact": true},
  {"name": "constraints", "type": "any", "label": "Argument constraints", "exact": false},
  {"name": "max_uses", "type": "integer", "label": "Uses at most", "exact": false},
  {"name": "expires_at", "type": "string", "label": "Expires at", "exact": true}]}"#;

#[test]
fn a_grant_signed_under_version_1_covers_no_call() {
    // A genuine signature over a version 1 scope, as a service before this version stored it.
    let mut f = fields();
    f.as_object_mut().unwrap().remove("calls");
    let v1 = countersign::Profile::from_definition(STANDING_GRANT_V1.as_bytes()).unwrap();
    let admitted = countersign::admit_fields(&v1, f.to_string().as_bytes()).unwrap();
    let op_hash = countersign::op_hash(&v1, Decision::Approved, &admitted).0;
    let mut signing = Signing::new(Decision::Approved, "standing-v1");
    signing.request.ceremony.challenge = [signing.nonce.as_slice(), &op_hash].concat();
    signing.keep_challenge = true;
    signing.assertion_at = "2026-11-19T10:00:00Z".into();
    let v1_action = Action::new("countersign.standing-grant/1", f.to_string());
    let response = kit::assert(&alice(), &v1_action, &signing);
    let entry = countersign::EvidenceEntry {
        format: countersign::WEBAUTHN_ASSERTION_FORMAT.to_owned(),
        decision: Decision::Approved,
        canonicalization_profile: v1.id.clone(),
        credential_id: response.credential_id,
        client_data_json: response.client_data_json,
        authenticator_data: response.authenticator_data,
        signature: response.signature,
        aaguid: None,
        attestation_ref: None,
        nonce: signing.nonce.to_vec(),
        op_hash: op_hash.to_vec(),
        assertion_at: signing.assertion_at.clone(),
        co_signatures: Vec::new(),
    };
    // Its fields name no calls: refused when read, before any signature work.
    let verdict = check(
        &call(params()),
        &kit::standing_result(&f, 1, [entry.clone()]),
    );
    assert_deny(&verdict, ReasonCode::EvidenceMalformed);
    // Nor does adding a `calls` member after signing help: the signature covers other fields.
    let verdict = check(
        &call(params()),
        &kit::standing_result(&fields(), 1, [entry]),
    );
    assert_deny(&verdict, ReasonCode::ProfileUnknown);
}

#[test]
fn the_gateways_a_grant_names_are_signed() {
    // The offline verdict does not know the gateway (the service enforces it), but the list is
    // covered by the signature: naming another gateway after signing breaks the binding.
    let mut result = signed(&fields(), Decision::Approved, 1);
    let grant = result.standing_grant.as_mut().unwrap();
    grant.fields["calls"]["gateways"] = json!(["ci-gw", "other-team"]);
    assert_deny(
        &check(&call(params()), &result),
        ReasonCode::BindingMismatch,
    );
}

#[test]
fn a_server_a_grant_could_not_name_is_refused_not_read_as_none() {
    // An operator profile that types server_id as an object: no grant can name such a server, so
    // a grant that names none must not cover the call.
    let def = r#"{"id": "acme.tool-call/1", "title": "Acme call", "allow_floats": false, "fields": [
      {"name": "agent_id", "type": "string", "label": "Agent", "exact": true},
      {"name": "server_id", "type": "object", "label": "Server", "exact": false},
      {"name": "tool_name", "type": "string", "label": "Tool", "exact": true},
      {"name": "params", "type": "object", "label": "Arguments", "exact": false}]}"#;
    let digest = countersign::Profile::from_definition(def.as_bytes())
        .unwrap()
        .digest;
    let mut acme = policy();
    acme.profiles.insert_pinned(def.as_bytes(), digest).unwrap();
    let mut f = fields();
    f["calls"] = kit::grant_calls("acme.tool-call/1", None, &[kit::GRANT_GATEWAY]);
    let call_with = |server: Value| {
        let fields = json!({"agent_id": "agent-7", "server_id": server,
                            "tool_name": "payments.transfer", "params": params()});
        Action::new("acme.tool-call/1", fields.to_string()).with_tool("payments.transfer")
    };
    let result = signed(&f, Decision::Approved, 1);
    let verdict = verify(
        &acme,
        &call_with(json!({"name": "x"})),
        &result,
        &alice_registry(),
    );
    assert_deny(&verdict, ReasonCode::ActionInadmissible);
    assert!(matches!(
        verdict.error,
        Some(VerifyError::StandingNotToolCall { .. })
    ));
}
