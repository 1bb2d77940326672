//! Evidence vectors for the rules that decide what valid evidence may authorize: NFC admission of
//! the action, the operation the action runs, who may decide, and policies that contradict
//! themselves (docs/SPEC.md §6 steps 3 and 4.4, §8).

use super::Out;
use super::case::*;
use countersign::Decision::{Approved, Denied};
use serde_json::{Value, json};

/// Strings that NFC changes although they look like their normal form.
const NOT_NFC: [(&str, &str, &str); 4] = [
    ("kelvin", "\u{212A}evin", "KELVIN SIGN U+212A, shown as K"),
    (
        "ohm",
        "10 k\u{2126}",
        "OHM SIGN U+2126, shown as Greek capital omega",
    ),
    (
        "greek-question-mark",
        "drop table\u{37E}",
        "GREEK QUESTION MARK U+037E, shown as a semicolon",
    ),
    (
        "cjk-compatibility",
        "\u{F900}",
        "CJK COMPATIBILITY IDEOGRAPH U+F900, normalized to U+8C48",
    ),
];

pub(crate) fn nfc(out: &mut Out) {
    let a = "alice-es256";
    for (name, text, what) in NOT_NFC {
        for (place, params) in [
            ("value", json!({"user": text})),
            ("key", json!({ text: "account-9" })),
        ] {
            let action = tool(params);
            let entry = good(a, &action, Approved);
            let c = Case::new(action, "APPROVED", vec![entry], &[a]);
            out.ev(
                &format!("nfc::{name}-in-{place}-require"),
                &format!(
                    "{what} in a params {place}, signed over its NFC form; nfc = require (the \
                     default): refused, the gateway would run other bytes than were shown"
                ),
                &["tool-call", "canon-nfc-require"],
                c.clone(),
                deny("action_inadmissible"),
            );
            let mut c = c;
            c.policy["nfc"] = json!("normalize");
            out.ev(
                &format!("nfc::{name}-in-{place}-normalize"),
                &format!(
                    "{what} in a params {place}, signed over its NFC form; nfc = normalize: the \
                     gateway runs the normalized form, admitted"
                ),
                &["tool-call", "policy-nfc-normalize"],
                c,
                allow("AAL2"),
            );
        }
    }
    // Already NFC (non-ASCII, composed): admitted under require.
    let action = tool(json!({"user": "K\u{e9}vin \u{3a9} \u{8C48}", "caf\u{e9}": ";"}));
    let entry = good(a, &action, Approved);
    let c = Case::new(action, "APPROVED", vec![entry], &[a]);
    out.ev(
        "nfc::already-nfc-require",
        "non-ASCII strings already in NFC (é, Ω U+03A9, U+8C48) in keys and values; nfc = require",
        &["tool-call", "canon-nfc-require"],
        c.clone(),
        allow("AAL2"),
    );
    let mut c = c;
    c.policy["nfc"] = json!("normalize");
    out.ev(
        "nfc::already-nfc-normalize",
        "non-ASCII strings already in NFC in keys and values; nfc = normalize",
        &["tool-call", "policy-nfc-normalize"],
        c,
        allow("AAL2"),
    );
}

const PAYMENT: &str = "countersign.payment/1";

/// The worked example's payment approved by `a`, run by `tool` (or no tool), under `profile_tools`.
fn payment_run_by(a: &str, tool: Option<&str>, profile_tools: Value) -> Case {
    let mut c = approve(a);
    c.action.tool = tool.map(str::to_owned);
    if profile_tools != Value::Null {
        c.policy["profile_tools"] = profile_tools;
    }
    c
}

pub(crate) fn operation(out: &mut Out) {
    let a = "alice-es256";
    // The tool-call profile signs its operation (tool_name is inside op_hash).
    let action = tool(json!({"to": "acct-9", "amount_cents": 125000}));
    let entry = good(a, &action, Approved);
    let base = Case::new(action, "APPROVED", vec![entry], &[a]);
    for (name, run_by, expected, description) in [
        (
            "tool-call-same-tool",
            Some("payments.transfer"),
            allow("AAL2"),
            "the action runs the signed tool_name",
        ),
        (
            "tool-call-other-tool",
            Some("payments.transfer.v2"),
            deny("binding_mismatch"),
            "the action runs another tool than the signed tool_name",
        ),
        (
            "tool-call-no-tool",
            None,
            allow("AAL2"),
            "the action names no tool: the signed tool_name is what runs",
        ),
    ] {
        let mut c = base.clone();
        c.action.tool = run_by.map(str::to_owned);
        out.ev(
            &format!("operation::{name}"),
            &format!("tool-call evidence for payments.transfer; {description}"),
            &["tool-call", "operation-binding"],
            c,
            expected,
        );
    }
    // A typed profile signs no operation: the verifier's profile_tools binds it to one tool.
    let bound = json!({PAYMENT: "payments.transfer"});
    for (name, run_by, tools, expected, description) in [
        (
            "typed-bound",
            Some("payments.transfer"),
            bound.clone(),
            allow("AAL2"),
            "run by payments.transfer, the tool profile_tools binds the payment profile to",
        ),
        (
            "typed-bound-to-another-tool",
            Some("payments.transfer.v2"),
            bound.clone(),
            deny("action_inadmissible"),
            "run by payments.transfer.v2, profile_tools binds the payment profile to \
             payments.transfer",
        ),
        (
            "typed-unbound",
            Some("payments.transfer"),
            Value::Null,
            deny("action_inadmissible"),
            "run by payments.transfer, profile_tools binds the payment profile to no tool",
        ),
        (
            "typed-no-tool-bound",
            None,
            bound.clone(),
            deny("action_inadmissible"),
            "no tool named, profile_tools binds the payment profile to payments.transfer",
        ),
        (
            "typed-no-tool-unbound",
            None,
            Value::Null,
            allow("AAL2"),
            "no tool named, no binding: a single-purpose verifier",
        ),
    ] {
        let mut flags = vec!["operation-binding"];
        if tools != Value::Null {
            flags.push("policy-profile-tools");
        }
        out.ev(
            &format!("operation::{name}"),
            &format!("a verified approval of the worked example's payment, {description}"),
            &flags,
            payment_run_by(a, run_by, tools),
            expected,
        );
    }
    // The binding is checked with the action, before any entry: a bound profile with the wrong
    // tool is refused even when the evidence is also for another action.
    let mut c = payment_run_by(a, Some("refunds.issue"), bound);
    c.action = pay(ACCOUNT_B);
    c.action.tool = Some("refunds.issue".into());
    out.ev(
        "operation::typed-wrong-tool-before-binding",
        "run by a tool the payment profile is not bound to, evidence for account A shown for \
         account B: the operation is checked with the action, first",
        &["operation-binding", "policy-profile-tools", "check-order"],
        c,
        deny("action_inadmissible"),
    );
}

pub(crate) fn eligibility(out: &mut Out) {
    let (a, b) = ("alice-es256", "bob-eddsa");
    let only_alice = json!(["alice"]);
    let mut c = approve(a);
    c.policy["approvers"] = json!(["bob", "alice"]);
    out.ev(
        "eligibility::eligible-approval",
        "alice approves; the policy's approvers are bob and alice",
        &["policy-approvers"],
        c,
        allow("AAL2"),
    );
    let action = pay(ACCOUNT_A);
    let entry = good(b, &action, Approved);
    let mut c = Case::new(action, "APPROVED", vec![entry], &[a, b]);
    c.policy["approvers"] = only_alice.clone();
    out.ev(
        "eligibility::ineligible-approval",
        "bob, enrolled, approves; the policy's approvers are only alice",
        &["policy-approvers"],
        c,
        deny("approver_ineligible"),
    );
    let action = pay(ACCOUNT_A);
    let entry = good(b, &action, Denied);
    let mut c = Case::new(action, "DENIED", vec![entry], &[a, b]);
    c.policy["approvers"] = only_alice.clone();
    out.ev(
        "eligibility::ineligible-refusal",
        "bob, enrolled, refuses; the policy's approvers are only alice: his refusal is not a \
         verified veto either",
        &["policy-approvers", "refusal"],
        c,
        deny_as("DENIED", "approver_ineligible", "declared"),
    );
    let action = pay(ACCOUNT_A);
    let entries = vec![good(a, &action, Approved), good(b, &action, Approved)];
    let mut c = Case::new(action, "APPROVED", entries, &[a, b]);
    c.policy["approvers"] = only_alice;
    out.ev(
        "eligibility::ineligible-second-approver",
        "alice and bob approve; only alice is eligible: one ineligible entry refuses the record",
        &["policy-approvers", "quorum"],
        c,
        deny("approver_ineligible"),
    );
    // Eligibility is checked right after the credential lookup, before the signature.
    let mut c = approve_tampered(b, |r| {
        if let Some(x) = r.signature.last_mut() {
            *x ^= 0x01;
        }
    });
    c.registry.push(enroll(a));
    c.policy["approvers"] = json!(["alice"]);
    out.ev(
        "eligibility::ineligible-before-signature",
        "bob's approval with a flipped signature bit; only alice is eligible",
        &["policy-approvers", "check-order", "signature-tamper"],
        c,
        deny("approver_ineligible"),
    );
}

pub(crate) fn contradictory(out: &mut Out) {
    let a = "alice-es256";
    let bare = || {
        let mut c = Case::new(pay(ACCOUNT_A), "APPROVED", vec![], &[a]);
        c.result = json!("APPROVED");
        c
    };
    for (name, policy, description) in [
        (
            "evidence-optional-min-aal2",
            json!({"require_evidence": false, "min_assurance": "AAL2"}),
            "require_evidence false with min_assurance AAL2",
        ),
        (
            "evidence-optional-quorum-2",
            json!({"require_evidence": false, "quorum": 2}),
            "require_evidence false with quorum 2",
        ),
        (
            "no-approvers",
            json!({"approvers": []}),
            "approvers is an empty list: nobody could ever approve",
        ),
        (
            "fewer-approvers-than-quorum",
            json!({"approvers": ["alice", "alice"], "quorum": 2}),
            "quorum 2 and one distinct eligible principal",
        ),
    ] {
        let mut c = bare();
        if let (Some(p), Some(extra)) = (c.policy.as_object_mut(), policy.as_object()) {
            for (k, v) in extra {
                p.insert(k.clone(), v.clone());
            }
        }
        out.ev(
            &format!("contradictory::{name}"),
            &format!(
                "a bare \"APPROVED\" under a policy with {description}: the CASE is unusable, no \
                 verdict (countersign verify exits 2)"
            ),
            &["policy-contradictory", "bare-string"],
            c,
            unusable_case("policy"),
        );
    }
    let mut c = bare();
    c.policy["require_evidence"] = json!(false);
    c.policy["min_assurance"] = json!("declared");
    out.ev(
        "contradictory::evidence-optional-min-declared",
        "a bare \"APPROVED\", require_evidence false with min_assurance declared: consistent",
        &[
            "policy-contradictory",
            "bare-string",
            "policy-evidence-optional",
        ],
        c,
        allow("declared"),
    );
}
