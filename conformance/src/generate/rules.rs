//! Evidence vectors for the rules that decide what valid evidence may authorize: NFC admission of
//! the action, the operation the action runs, who may decide, and policies that contradict
//! themselves (docs/SPEC.md §6 steps 3 and 4.4, §8).

use super::Out;
use super::case::*;
use countersign::Decision::{Approved, Denied};
use serde_json::{Value, json};

/// Strings that NFC changes although they look like their normal form.
const NOT_NFC: [(&str, &str, &str); 7] = [
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
    (
        "angstrom",
        "\u{212B}ngstrom",
        "ANGSTROM SIGN U+212B, normalized to U+00C5",
    ),
    (
        "hangul-jamo",
        "\u{1100}\u{1161}",
        "the conjoining jamo U+1100 U+1161, composed by NFC to the syllable U+AC00",
    ),
    (
        "combining-order",
        "a\u{301}\u{323}",
        "a with U+0301 before U+0323, which canonical ordering swaps (and NFC composes)",
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
    // Exact fields (every payment field; agent_id and tool_name of a tool call) are refused
    // unless already NFC, under either mode: normalize applies only where the profile allows it.
    let pay_text = |reference: &str| {
        format!(
            "{{\"amount\":\"40000.00\",\"currency\":\"EUR\",\"source_account\":\"ops-main\",\
             \"destination_account\":\"account-A\",\"reference\":\"{reference}\"}}"
        )
    };
    for (name, text, what) in [
        (
            "payment-reference-nfd",
            pay_text("Cafe\u{301}"),
            "the payment's reference in NFD (e + U+0301)",
        ),
        (
            "payment-reference-kelvin",
            pay_text("\u{212A}-2291"),
            "the payment's reference starting with KELVIN SIGN",
        ),
    ] {
        for (mode, flags) in [
            ("require", &["canon-nfc-require", "action-inadmissible"][..]),
            (
                "normalize",
                &["policy-nfc-normalize", "action-inadmissible"][..],
            ),
        ] {
            let mut c = approve(a);
            c.fields_text = Some(text.clone());
            c.policy["nfc"] = json!(mode);
            out.ev(
                &format!("nfc::{name}-{mode}"),
                &format!(
                    "{what}; nfc = {mode}: every payment field is exact, so a string NFC would \
                     change is refused under either mode"
                ),
                flags,
                c,
                deny("action_inadmissible"),
            );
        }
    }
    let action = Action::new(
        PAYMENT,
        json!({"amount": "40000.00", "currency": "EUR", "source_account": "ops-main",
               "destination_account": "account-A", "reference": "Caf\u{e9} \u{3a9}"})
        .to_string(),
    );
    let entry = good(a, &action, Approved);
    let c = Case::new(action, "APPROVED", vec![entry], &[a]);
    out.ev(
        "nfc::payment-reference-composed-require",
        "the payment's reference is Caf\u{e9} \u{3a9} (composed e-acute, GREEK CAPITAL OMEGA): \
         non-ASCII but already NFC, admitted in an exact field under nfc = require",
        &["canon-nfc-require"],
        c,
        allow("AAL2"),
    );
    for (name, text, what) in [
        (
            "tool-agent-id-kelvin",
            "{\"agent_id\":\"\u{212A}-7\",\"tool_name\":\"payments.transfer\",\"params\":{}}",
            "agent_id starting with KELVIN SIGN",
        ),
        (
            "tool-name-ohm",
            "{\"agent_id\":\"agent-7\",\"tool_name\":\"payments.\u{2126}\",\"params\":{}}",
            "tool_name ending in OHM SIGN",
        ),
    ] {
        let action = tool(json!({}));
        let entry = good(a, &action, Approved);
        let mut c = Case::new(action, "APPROVED", vec![entry], &[a]);
        c.fields_text = Some(text.to_owned());
        c.policy["nfc"] = json!("normalize");
        out.ev(
            &format!("nfc::{name}-normalize"),
            &format!(
                "a tool call with {what}; nfc = normalize: agent_id and tool_name are exact, refused"
            ),
            &["tool-call", "policy-nfc-normalize", "action-inadmissible"],
            c,
            deny("action_inadmissible"),
        );
    }
    // What normalize does not forgive: keys that collide once normalized, and code points that
    // are refused in any spelling.
    for (name, params, what) in [
        (
            "collision-under-normalize",
            "{\"K\":1,\"\u{212A}\":2}",
            "keys K and KELVIN SIGN, equal after NFC",
        ),
        (
            "unassigned-under-normalize",
            "{\"user\":\"\u{378}\"}",
            "the unassigned code point U+0378",
        ),
        (
            "noncharacter-under-normalize",
            "{\"user\":\"\u{FDD0}\"}",
            "the noncharacter U+FDD0",
        ),
    ] {
        let action = tool(json!({"K": 1}));
        let entry = good(a, &action, Approved);
        let mut c = Case::new(action, "APPROVED", vec![entry], &[a]);
        c.fields_text = Some(format!(
            r#"{{"agent_id":"agent-7","tool_name":"payments.transfer","params":{params}}}"#
        ));
        c.policy["nfc"] = json!("normalize");
        out.ev(
            &format!("nfc::{name}"),
            &format!("params with {what}; nfc = normalize: still inadmissible"),
            &["tool-call", "policy-nfc-normalize", "action-inadmissible"],
            c,
            deny("action_inadmissible"),
        );
    }
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
    // A profile that signs its operation is bound by tool_name alone: profile_tools does not
    // speak for it.
    let mut c = base.clone();
    c.action.tool = Some("payments.transfer".into());
    c.policy["profile_tools"] = json!({"countersign.tool-call/1": "admin.console"});
    out.ev(
        "operation::tool-call-profile-tools-not-consulted",
        "tool-call evidence for payments.transfer run by payments.transfer; profile_tools binds \
         the tool-call profile to admin.console, which a profile that signs its tool ignores",
        &["tool-call", "operation-binding", "policy-profile-tools"],
        c,
        allow("AAL2"),
    );
    let mut c = base.clone();
    c.action.tool = Some(String::new());
    out.ev(
        "operation::tool-call-empty-tool",
        "tool-call evidence for payments.transfer; the action names the empty string as its tool",
        &["tool-call", "operation-binding"],
        c,
        deny("binding_mismatch"),
    );
    // Refusals are bound the same way: a refusal of another operation says nothing about this one.
    let action = tool(json!({"to": "acct-9", "amount_cents": 125000}));
    let entry = good(a, &action, Denied);
    let mut c = Case::new(action, "DENIED", vec![entry], &[a]);
    c.action.tool = Some("payments.refund".into());
    out.ev(
        "operation::tool-call-refusal-other-tool",
        "a refusal signed for payments.transfer, the action runs payments.refund",
        &["tool-call", "operation-binding", "refusal"],
        c,
        deny_as("DENIED", "binding_mismatch", "declared"),
    );
    let action = pay(ACCOUNT_A);
    let entry = good(a, &action, Denied);
    let mut c = Case::new(action, "DENIED", vec![entry], &[a]);
    c.action.tool = Some("refunds.issue".into());
    c.policy["profile_tools"] = json!({PAYMENT: "payments.transfer"});
    out.ev(
        "operation::typed-refusal-wrong-tool",
        "a verified refusal of the payment, run by refunds.issue while profile_tools binds the \
         payment profile to payments.transfer: the operation is checked before any entry",
        &["operation-binding", "policy-profile-tools", "refusal"],
        c,
        deny_as("DENIED", "action_inadmissible", "declared"),
    );
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

/// Eligibility beside the other per-entry checks, and where it does not apply.
pub(crate) fn eligibility_more(out: &mut Out) {
    let (a, b) = ("alice-es256", "bob-eddsa");
    let action = pay(ACCOUNT_A);
    let entries = vec![good(a, &action, Approved), good(b, &action, Denied)];
    let mut c = Case::new(action, "DENIED", entries, &[a, b]);
    c.policy["approvers"] = json!(["alice", "bob"]);
    out.ev(
        "eligibility::eligible-refusal-vetoes",
        "alice approves, bob refuses; both are eligible: his refusal is a verified veto",
        &["policy-approvers", "refusal-veto"],
        c,
        deny_as("DENIED", "approver_refused", "AAL2"),
    );
    let action = pay(ACCOUNT_A);
    let entries = vec![good(a, &action, Approved), good(b, &action, Approved)];
    let mut c = Case::new(action, "APPROVED", entries, &[a, b]);
    c.policy["approvers"] = json!(["alice", "bob"]);
    c.policy["quorum"] = json!(2);
    out.ev(
        "eligibility::two-eligible-quorum-2",
        "alice and bob approve, both eligible, quorum 2",
        &["policy-approvers", "quorum"],
        c,
        allow("AAL2"),
    );
    let mut c = approve(a);
    c.policy["approvers"] = json!(["alice", "zed"]);
    out.ev(
        "eligibility::approver-named-without-credential",
        "alice approves; approvers names alice and zed, who has no credential: a list may name \
         principals not yet enrolled",
        &["policy-approvers"],
        c,
        allow("AAL2"),
    );
    let action = pay(ACCOUNT_A);
    let entry = good("carol-es256", &action, Approved);
    let mut c = Case::new(action, "APPROVED", vec![entry], &[a]);
    c.policy["approvers"] = json!(["alice"]);
    out.ev(
        "eligibility::unknown-before-eligibility",
        "carol, not enrolled, approves; only alice is eligible: the credential lookup fails first",
        &["policy-approvers", "credential-unknown", "check-order"],
        c,
        deny("credential_unknown"),
    );
    let action = pay(ACCOUNT_A);
    let entry = good(b, &action, Approved);
    let mut c = Case::new(action, "APPROVED", vec![entry], &[a, b]);
    c.record(b).revoked = true;
    c.policy["approvers"] = json!(["alice"]);
    out.ev(
        "eligibility::revoked-before-eligibility",
        "bob's revoked credential approves; only alice is eligible: revocation is reported first",
        &["policy-approvers", "credential-revoked", "check-order"],
        c,
        deny("credential_revoked"),
    );
    let action = pay(ACCOUNT_A);
    let id = b"conformance es512 credential".to_vec();
    let entry = signed_with(
        a,
        &action,
        Approved,
        |_| {},
        |r| r.credential_id = id.clone(),
    );
    let mut c = Case::new(action, "APPROVED", vec![entry], &[a]);
    c.extra_credentials.push(json!({
        "credential_id": b64(&id),
        "principal": "erin",
        "public_key": b64(&es512_cose_key()),
    }));
    c.policy["approvers"] = json!(["alice"]);
    out.ev(
        "eligibility::ineligible-before-algorithm",
        "erin's ES512 credential; only alice is eligible: eligibility is checked before the \
         key's algorithm",
        &["policy-approvers", "alg-unsupported", "check-order"],
        c,
        deny("approver_ineligible"),
    );
    let mut c = Case::new(pay(ACCOUNT_A), "DENIED", vec![], &[a]);
    c.result["reason_code"] = json!("expired_unanswered");
    c.policy["approvers"] = json!(["alice"]);
    out.ev(
        "eligibility::no-evidence-nothing-to-check",
        "DENIED without evidence, transport reason expired_unanswered, approvers alice: no \
         entry, so no eligibility check; the transport reason is carried",
        &["policy-approvers", "no-evidence", "transport-reason"],
        c,
        deny_as("DENIED", "expired_unanswered", "declared"),
    );
}

/// Policies that are not policies: unknown members, and members of the wrong type (`null`
/// included) where a boolean, an array, an integer or one of a few words is required. Each makes
/// the CASE unusable (SPEC §8, §11).
pub(crate) fn policy_shape(out: &mut Out) {
    let a = "alice-es256";
    let mut c = approve(a);
    c.policy = json!({"rp_id": "pay.example.com", "origins": ["https://pay.example.com"]});
    out.ev(
        "policy::required-members-only",
        "a valid approval under a policy with rp_id and origins only: every other member takes \
         its default (evidence and UV required, quorum 1, 300 s, 60 s skew)",
        &["policy-shape"],
        c,
        allow("AAL2"),
    );
    let mut c = approve(a);
    c.policy = json!({
        "rp_id": "pay.example.com",
        "origins": ["https://pay.example.com"],
        "require_evidence": true,
        "require_user_verification": true,
        "min_assurance": "AAL2",
        "quorum": 1,
        "max_age_seconds": 300,
        "clock_skew_seconds": 60,
        "allow_cross_origin": false,
        "top_origins": [],
        "aal3_aaguids": ["00000000-0000-0000-0000-000000000001"],
        "nfc": "require",
        "profile_tools": {},
        "approvers": ["alice"],
    });
    out.ev(
        "policy::every-member",
        "a valid approval under a policy that spells out every member with a legal value",
        &["policy-shape", "policy-approvers", "min-assurance"],
        c,
        allow("AAL2"),
    );
    for (name, member, value, what) in [
        ("unknown-member", "quorom", json!(2), "a misspelt quorum"),
        (
            "require-evidence-null",
            "require_evidence",
            Value::Null,
            "null where a boolean is required",
        ),
        (
            "require-user-verification-null",
            "require_user_verification",
            Value::Null,
            "null where a boolean is required",
        ),
        (
            "allow-cross-origin-null",
            "allow_cross_origin",
            Value::Null,
            "null where a boolean is required",
        ),
        (
            "require-evidence-string",
            "require_evidence",
            json!("false"),
            "the string \"false\" where a boolean is required",
        ),
        (
            "origins-null",
            "origins",
            Value::Null,
            "null where an array is required",
        ),
        (
            "top-origins-null",
            "top_origins",
            Value::Null,
            "null where an array is required",
        ),
        (
            "origins-string",
            "origins",
            json!("https://pay.example.com"),
            "a string where an array is required",
        ),
        ("quorum-negative", "quorum", json!(-1), "a negative quorum"),
        (
            "quorum-fraction",
            "quorum",
            json!(1.5),
            "a fractional quorum",
        ),
        (
            "max-age-fraction",
            "max_age_seconds",
            json!(300.5),
            "a fractional max_age_seconds",
        ),
        (
            "min-assurance-unknown",
            "min_assurance",
            json!("AAL4"),
            "a level that does not exist",
        ),
        (
            "nfc-unknown",
            "nfc",
            json!("NFKC"),
            "an NFC mode that does not exist",
        ),
        (
            "profile-tools-not-string",
            "profile_tools",
            json!({"countersign.payment/1": 1}),
            "a tool that is not a string",
        ),
    ] {
        let mut c = approve(a);
        c.policy[member] = value.clone();
        out.ev(
            &format!("policy::{name}"),
            &format!("a valid approval under a policy whose {member} is {value}: {what}; the CASE is unusable"),
            &["policy-shape"],
            c,
            unusable_case("policy"),
        );
    }
}

/// `null` on an optional member is refused, never read as absent (SPEC §2): absent takes the
/// documented default, and for several members that default is "no restriction" (`approvers`,
/// `aal3_aaguids`, `backup_eligible`). One accepting vector omits every optional member; each
/// refusing vector sets one of them to `null` in an otherwise valid approval.
pub(crate) fn null_members(out: &mut Out) {
    let a = "alice-es256";
    let mut c = approve(a);
    c.policy = json!({"rp_id": "pay.example.com", "origins": ["https://pay.example.com"]});
    if let Some(result) = c.result.as_object_mut() {
        result.remove("approval_id");
    }
    out.ev(
        "null::every-optional-member-absent",
        "a valid approval with every optional member absent: no action tool, no envelope \
         approval_id, no registry aaguid/backup_eligible/attestation, a policy of rp_id and \
         origins only; each takes its default",
        &["null-member", "policy-shape"],
        c,
        allow("AAL2"),
    );
    for member in ["min_assurance", "aal3_aaguids", "approvers"] {
        let mut c = approve(a);
        c.policy[member] = Value::Null;
        out.ev(
            &format!("null::policy-{}", member.replace('_', "-")),
            &format!(
                "a valid approval under a policy whose {member} is null: null is not read as \
                 absent (no restriction); the CASE is unusable"
            ),
            &["null-member", "policy-shape"],
            c,
            unusable_case("policy"),
        );
    }
    let mut c = approve(a);
    c.action_members.insert("tool".to_owned(), Value::Null);
    out.ev(
        "null::action-tool",
        "a valid approval whose action has tool null: not read as \"no tool\"; the CASE is \
         unusable",
        &["null-member"],
        c,
        unusable_case("action"),
    );
    for (member, attestation) in [
        ("aaguid", false),
        ("backup_eligible", false),
        ("attestation", false),
        ("root", true),
    ] {
        let mut c = approve(a);
        let mut record = c
            .registry
            .first()
            .map(|r| serde_json::to_value(r).unwrap_or(Value::Null))
            .unwrap_or(Value::Null);
        if attestation {
            record["attestation"] =
                json!({"format": "packed", "chain_verified": true, "root": null});
        } else {
            record[member] = Value::Null;
        }
        c.registry.clear();
        c.extra_credentials.push(record);
        let path = if attestation {
            "attestation.root"
        } else {
            member
        };
        out.ev(
            &format!("null::registry-{}", path.replace(['_', '.'], "-")),
            &format!(
                "a valid approval whose credential has {path} null: not read as absent; the \
                 registry, so the CASE, is unusable"
            ),
            &["null-member"],
            c,
            unusable_case("registry"),
        );
    }
    // The transport's informational strings restrict nothing a verifier decides: `null` there
    // reads as absent (SPEC §2.1), and the verdict is the one the same result without it gets.
    for member in ["approval_id", "expires_at", "redrive_url", "reason_code"] {
        for status in ["APPROVED", "DENIED"] {
            let (mut c, verdict) = if status == "APPROVED" {
                (approve(a), allow("AAL2"))
            } else {
                (refuse(a), deny_as("DENIED", "approver_refused", "AAL2"))
            };
            c.result[member] = Value::Null;
            out.ev(
                &format!(
                    "null::result-{}-{}",
                    member.replace('_', "-"),
                    status.to_lowercase()
                ),
                &format!(
                    "a valid {status} result whose envelope has {member} null: an informational \
                     transport member, so null reads as absent"
                ),
                &["null-informational"],
                c,
                verdict,
            );
        }
    }
    let mut c = Case::new(pay(ACCOUNT_A), "DENIED", vec![], &[a]);
    c.result = json!({"status": "DENIED", "reason_code": null});
    out.ev(
        "null::result-reason-code-denied-without-evidence",
        "DENIED without evidence and reason_code null: read as absent, so the reason is \
         approver_refused, not a transport reason",
        &["null-informational", "transport-reason"],
        c,
        deny_as("DENIED", "approver_refused", "declared"),
    );
    let mut c = Case::new(pay(ACCOUNT_A), "PENDING", vec![], &[a]);
    c.result = json!({"status": "PENDING", "approval_id": null});
    out.ev(
        "null::result-approval-id-pending",
        "PENDING with approval_id null: the id to ask again with is not informational; null is \
         refused and the envelope is unusable",
        &["null-informational", "null-member", "result-malformed"],
        c,
        expect("DENY", None, Some("result_malformed"), "declared"),
    );
    // Members that carry meaning keep the rule: null is refused, never read as absent.
    for member in ["identity_assurance", "authority", "revises"] {
        for status in ["APPROVED", "DENIED"] {
            let mut c = if status == "APPROVED" {
                approve(a)
            } else {
                refuse(a)
            };
            c.result[member] = Value::Null;
            out.ev(
                &format!(
                    "null::result-{}-{}",
                    member.replace('_', "-"),
                    status.to_lowercase()
                ),
                &format!(
                    "a valid {status} result whose envelope has {member} null: not read as \
                     absent; the envelope is unusable"
                ),
                &["null-member", "result-malformed"],
                c,
                expect("DENY", None, Some("result_malformed"), "declared"),
            );
        }
    }
    let mut c = approve(a);
    c.result["status"] = Value::Null;
    out.ev(
        "null::result-status",
        "a valid approval whose envelope has status null: the status is required; the envelope \
         is unusable",
        &["null-member", "result-malformed"],
        c,
        expect("DENY", None, Some("result_malformed"), "declared"),
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
    for (name, policy, description) in [
        (
            "evidence-optional-min-aal1",
            json!({"require_evidence": false, "min_assurance": "AAL1"}),
            "require_evidence false with min_assurance AAL1",
        ),
        (
            "evidence-optional-min-aal3",
            json!({"require_evidence": false, "min_assurance": "AAL3"}),
            "require_evidence false with min_assurance AAL3",
        ),
        (
            "quorum-3-two-approvers",
            json!({"approvers": ["alice", "bob"], "quorum": 3}),
            "quorum 3 and two eligible principals",
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
            &format!("a bare \"APPROVED\" under a policy with {description}: the CASE is unusable"),
            &["policy-contradictory", "bare-string"],
            c,
            unusable_case("policy"),
        );
    }
    let mut c = approve(a);
    c.policy["require_evidence"] = json!(false);
    c.policy["min_assurance"] = json!("AAL2");
    out.ev(
        "contradictory::valid-evidence-does-not-rescue",
        "a valid AAL2 approval under require_evidence false with min_assurance AAL2: the policy \
         is contradictory whatever the result, so the CASE is unusable",
        &["policy-contradictory"],
        c,
        unusable_case("policy"),
    );
    let action = pay(ACCOUNT_A);
    let entries = vec![
        good(a, &action, Approved),
        good("bob-eddsa", &action, Approved),
    ];
    let mut c = Case::new(action, "APPROVED", entries, &[a, "bob-eddsa"]);
    c.policy["approvers"] = json!(["alice", "bob", "alice"]);
    c.policy["quorum"] = json!(2);
    out.ev(
        "contradictory::repeated-approver-quorum-reachable",
        "approvers alice, bob, alice with quorum 2: two distinct principals, consistent; both \
         approve",
        &["policy-contradictory", "policy-approvers", "quorum"],
        c,
        allow("AAL2"),
    );
    let mut c = bare();
    c.policy["require_evidence"] = json!(false);
    c.policy["quorum"] = json!(0);
    out.ev(
        "contradictory::evidence-optional-quorum-0",
        "a bare \"APPROVED\", require_evidence false with quorum 0 (read as 1): consistent",
        &[
            "policy-contradictory",
            "bare-string",
            "policy-evidence-optional",
        ],
        c,
        allow("declared"),
    );
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
