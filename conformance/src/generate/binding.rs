//! Evidence vectors for the binding of evidence to one action and one decision: the worked
//! example, op_hash/nonce/profile binding, the action's own admission, the entry's structure and
//! the credential lookup.

use super::Out;
use super::case::*;
use countersign::Decision::Approved;
use serde_json::{Value, json};

/// The worked example's four CASEs, in the order of `fixtures/worked-example/`.
pub(crate) fn worked_example() -> Vec<(&'static str, &'static str, Case, Value)> {
    let a = "alice-es256";
    let approve_a = approve(a);
    let mut replay_b = approve_a.clone();
    replay_b.action = pay(ACCOUNT_B);
    let refuse_a = refuse(a);
    let mut flipped = refuse_a.clone();
    flipped.result["status"] = json!("APPROVED");
    flipped.entry(0)["decision"] = json!("APPROVED");
    vec![
        (
            "approve-account-a",
            "alice approves 40,000.00 EUR to account A with her security key",
            approve_a,
            allow("AAL2"),
        ),
        (
            "replay-to-account-b",
            "the same evidence presented for a payment to account B",
            replay_b,
            deny("binding_mismatch"),
        ),
        (
            "refuse-account-a",
            "alice refuses the payment: the refusal verifies and names her",
            refuse_a,
            deny_as("DENIED", "approver_refused", "AAL2"),
        ),
        (
            "flipped-decision",
            "a signed refusal whose decision field and status were rewritten to APPROVED",
            flipped,
            deny("binding_mismatch"),
        ),
    ]
}

pub(crate) fn worked(out: &mut Out) {
    for (name, description, case, expected) in worked_example() {
        out.ev(
            &format!("worked::{name}"),
            description,
            &["worked-example"],
            case,
            expected,
        );
    }
    let a = "alice-es256";
    // The flip done thoroughly: the op_hash beside the signature rewritten too.
    let mut c = refuse(a);
    c.result["status"] = json!("APPROVED");
    c.entry(0)["decision"] = json!("APPROVED");
    let approved_hash = countersign_testkit::op_hash_of(&pay(ACCOUNT_A), Approved);
    c.entry(0)["op_hash"] = json!(b64(&approved_hash));
    out.ev(
        "worked::flipped-decision-and-op-hash",
        "a signed refusal relabelled APPROVED with the APPROVED op_hash beside it",
        &["worked-example", "binding-decision"],
        c,
        deny("binding_mismatch"),
    );
    // The flip the other way: an approval relabelled as a refusal.
    let mut c = approve(a);
    c.result["status"] = json!("DENIED");
    c.entry(0)["decision"] = json!("DENIED");
    out.ev(
        "worked::approval-relabelled-refusal",
        "a signed approval whose decision field and status were rewritten to DENIED",
        &["worked-example", "binding-decision"],
        c,
        deny_as("DENIED", "binding_mismatch", "declared"),
    );
    let mut c = refuse(a);
    c.action = pay(ACCOUNT_B);
    out.ev(
        "worked::refusal-for-account-b",
        "alice's refusal of account A presented as a refusal of account B",
        &["worked-example", "binding-action"],
        c,
        deny_as("DENIED", "binding_mismatch", "declared"),
    );
    let mut c = approve(a);
    c.action = countersign::Action::new(
        "countersign.payment/1",
        json!({"amount": "40000.0", "currency": "EUR", "source_account": "ops-main",
               "destination_account": ACCOUNT_A, "reference": "INV-2291"})
        .to_string(),
    );
    out.ev(
        "worked::amount-respelled",
        "the approved amount 40000.00 presented as 40000.0 (decimals are compared as text)",
        &["worked-example", "binding-action"],
        c,
        deny("binding_mismatch"),
    );
}

/// The MCP interposer's profile: evidence for one relayed call binds the agent, the upstream
/// server, the tool and the arguments; changing any one is a different call.
pub(crate) fn mcp_calls(out: &mut Out) {
    let a = "alice-es256";
    let args = || json!({"path": "/srv/report.txt", "content": "Q3 figures"});
    let approved = mcp("agent-7", "filesystem", "write_file", args());
    let entry = good(a, &approved, Approved);
    out.ev(
        "binding::mcp-approved",
        "alice approves write_file on the filesystem server for agent-7",
        &["mcp-tool-call"],
        Case::new(approved.clone(), "APPROVED", vec![entry.clone()], &[a]),
        allow("AAL2"),
    );
    let changed = [
        (
            "mcp-changed-argument",
            "the same evidence for other content",
            mcp(
                "agent-7",
                "filesystem",
                "write_file",
                json!({"path": "/srv/report.txt", "content": "Q4 figures"}),
            ),
        ),
        (
            "mcp-changed-tool",
            "the same evidence for edit_file with the same arguments",
            mcp("agent-7", "filesystem", "edit_file", args()),
        ),
        (
            "mcp-changed-server",
            "the same evidence for another server's write_file",
            mcp("agent-7", "filesystem-2", "write_file", args()),
        ),
        (
            "mcp-changed-agent",
            "the same evidence presented for another agent's identical call",
            mcp("agent-8", "filesystem", "write_file", args()),
        ),
    ];
    for (name, description, action) in changed {
        out.ev(
            &format!("binding::{name}"),
            description,
            &["mcp-tool-call", "binding-action"],
            Case::new(action, "APPROVED", vec![entry.clone()], &[a]),
            deny("binding_mismatch"),
        );
    }
}

pub(crate) fn binding(out: &mut Out) {
    let a = "alice-es256";
    let mut c = approve(a);
    c.entry(0)["nonce"] = json!(b64(&countersign_testkit::nonce("another")));
    out.ev(
        "binding::nonce-field-differs",
        "the nonce beside the signature is not the signed one",
        &["binding-nonce"],
        c,
        deny("binding_mismatch"),
    );
    for (name, len) in [("31", 31usize), ("33", 33), ("empty", 0)] {
        let mut c = approve(a);
        c.entry(0)["nonce"] = json!(b64(&vec![7u8; len]));
        out.ev(
            &format!("binding::nonce-length-{name}"),
            &format!("a nonce field of {len} bytes"),
            &["binding-nonce", "entry-malformed"],
            c,
            deny("evidence_malformed"),
        );
    }
    let mut c = approve(a);
    c.entry(0)["op_hash"] = json!(b64(&[0u8; 32]));
    out.ev(
        "binding::op-hash-field-differs",
        "the op_hash beside the signature is not the signed one",
        &["binding-op-hash"],
        c,
        deny("binding_mismatch"),
    );
    let mut c = approve(a);
    c.entry(0)["op_hash"] = json!(b64(&[1u8; 31]));
    out.ev(
        "binding::op-hash-field-31-bytes",
        "an op_hash field of 31 bytes",
        &["binding-op-hash"],
        c,
        deny("binding_mismatch"),
    );
    let mut c = approve(a);
    c.entry(0)["decision"] = json!("DENIED");
    out.ev(
        "binding::decision-field-flipped",
        "the entry claims DENIED over a signed APPROVED (status APPROVED)",
        &["binding-decision"],
        c,
        deny("binding_mismatch"),
    );
    // Signed for another action of the same profile.
    let other = pay(ACCOUNT_B);
    let entry = good(a, &other, Approved);
    out.ev(
        "binding::signed-other-action",
        "evidence signed for account B, with B's op_hash beside it, presented for account A",
        &["binding-action"],
        Case::new(pay(ACCOUNT_A), "APPROVED", vec![entry], &[a]),
        deny("binding_mismatch"),
    );
    // Profiles.
    let tool_action = tool(json!({"x": 1}));
    let entry = good(a, &tool_action, Approved);
    out.ev(
        "binding::evidence-profile-other",
        "evidence made under countersign.tool-call/1 for a countersign.payment/1 action",
        &["binding-profile"],
        Case::new(pay(ACCOUNT_A), "APPROVED", vec![entry], &[a]),
        deny("binding_mismatch"),
    );
    for (name, profile) in [("unknown", "countersign.payment/2"), ("empty", "")] {
        let mut c = approve(a);
        c.entry(0)["canonicalization_profile"] = json!(profile);
        out.ev(
            &format!("binding::evidence-profile-{name}"),
            &format!("evidence names canonicalization profile {profile:?}"),
            &["profile-unknown"],
            c,
            deny("profile_unknown"),
        );
    }
    let mut c = approve(a);
    c.action.profile = "countersign.payment/9".into();
    out.ev(
        "binding::action-profile-unknown",
        "the action's profile is not registered",
        &["profile-unknown"],
        c,
        deny("profile_unknown"),
    );

    // Tool-call actions: the lexical form of the fields does not matter, their content does.
    let signed_params =
        json!({"amount_cents": 125000, "memo": "Caf\u{e9} Z\u{fc}rich", "to": "acct-9"});
    let action = tool(signed_params.clone());
    let entry = good(a, &action, Approved);
    let base = Case::new(action, "APPROVED", vec![entry], &[a]);
    let variants: [(&str, &str, &str, Value); 5] = [
        (
            "member-order",
            r#"{"tool_name":"payments.transfer","params":{"to":"acct-9","memo":"Café Zürich","amount_cents":125000},"agent_id":"agent-7"}"#,
            "canon-key-order",
            allow("AAL2"),
        ),
        (
            "whitespace",
            "{ \"agent_id\" : \"agent-7\" ,\n \"tool_name\":\"payments.transfer\",\t\"params\":{\"amount_cents\":125000,\"memo\":\"Café Zürich\",\"to\":\"acct-9\"} }",
            "canon-whitespace",
            allow("AAL2"),
        ),
        (
            "escapes",
            r#"{"agent_id":"agent-7","tool_name":"payments\u002etransfer","params":{"amount_cents":125000,"memo":"Caf\u00e9 Z\u00FCrich","\u0074o":"acct-9"}}"#,
            "canon-escape",
            allow("AAL2"),
        ),
        (
            "nfd-params",
            "{\"agent_id\":\"agent-7\",\"tool_name\":\"payments.transfer\",\"params\":{\"amount_cents\":125000,\"memo\":\"Cafe\u{301} Zu\u{308}rich\",\"to\":\"acct-9\"}}",
            "canon-nfc",
            allow("AAL2"),
        ),
        (
            "memo-changed",
            r#"{"agent_id":"agent-7","tool_name":"payments.transfer","params":{"amount_cents":125000,"memo":"Cafe Zurich","to":"acct-9"}}"#,
            "binding-action",
            deny("binding_mismatch"),
        ),
    ];
    for (name, text, flag, expected) in variants {
        let mut c = base.clone();
        c.fields_text = Some(text.to_owned());
        let mut flags = vec!["tool-call", flag];
        if flag == "canon-nfc" {
            // Admitted only by a verifier whose gateway executes the normalized form.
            c.policy["nfc"] = json!("normalize");
            flags.push("policy-nfc-normalize");
            let mut require = base.clone();
            require.fields_text = Some(text.to_owned());
            out.ev(
                &format!("binding::tool-call-{name}-nfc-require"),
                &format!(
                    "a tool call signed in one spelling, presented as: {name}, under the default \
                     nfc = require: the strings are not NFC"
                ),
                &["tool-call", flag, "canon-nfc-require"],
                require,
                deny("action_inadmissible"),
            );
        }
        out.ev(
            &format!("binding::tool-call-{name}"),
            &format!("a tool call signed in one spelling, presented as: {name}"),
            &flags,
            c,
            expected,
        );
    }

    // The action itself fails admission: nothing about the evidence matters then.
    let inadmissible: [(&str, &str, &str); 8] = [
        (
            "duplicate-key",
            r#"{"amount":"40000.00","currency":"EUR","source_account":"ops-main","destination_account":"account-A","destination_account":"account-B","reference":"INV-2291"}"#,
            "canon-duplicate-key",
        ),
        (
            "amount-with-comma",
            r#"{"amount":"40,000.00","currency":"EUR","source_account":"ops-main","destination_account":"account-A","reference":"INV-2291"}"#,
            "profile-fields",
        ),
        (
            "extra-field",
            r#"{"amount":"40000.00","currency":"EUR","source_account":"ops-main","destination_account":"account-A","reference":"INV-2291","note":"hi"}"#,
            "profile-fields",
        ),
        (
            "amount-number",
            r#"{"amount":40000,"currency":"EUR","source_account":"ops-main","destination_account":"account-A","reference":"INV-2291"}"#,
            "profile-fields",
        ),
        (
            "reference-nfd",
            "{\"amount\":\"40000.00\",\"currency\":\"EUR\",\"source_account\":\"ops-main\",\"destination_account\":\"account-A\",\"reference\":\"Cafe\u{301}\"}",
            "canon-nfc",
        ),
        (
            "lone-surrogate",
            r#"{"amount":"40000.00","currency":"EUR","source_account":"ops-main","destination_account":"account-A","reference":"\ud800"}"#,
            "canon-surrogate",
        ),
        (
            "unassigned-code-point",
            r#"{"amount":"40000.00","currency":"EUR","source_account":"ops-main","destination_account":"account-A","reference":"INV\u0378"}"#,
            "canon-unassigned",
        ),
        (
            "not-object",
            r#"["40000.00","EUR","ops-main","account-A","INV-2291"]"#,
            "profile-fields",
        ),
    ];
    for (name, text, flag) in inadmissible {
        let mut c = approve(a);
        c.fields_text = Some(text.to_owned());
        out.ev(
            &format!("binding::action-{name}"),
            &format!("the action's fields are inadmissible ({name}), evidence otherwise valid"),
            &["action-inadmissible", flag],
            c,
            deny("action_inadmissible"),
        );
    }
    let mut c = approve(a);
    c.action = tool(json!({"n": 1}));
    c.fields_text = Some(
        r#"{"agent_id":"agent-7","tool_name":"payments.transfer","params":{"n":9007199254740993}}"#
            .into(),
    );
    out.ev(
        "binding::action-big-integer",
        "a tool call whose params hold 2^53+1",
        &["action-inadmissible", "canon-big-integer", "tool-call"],
        c,
        deny("action_inadmissible"),
    );
}

/// A change made to an evidence entry's JSON.
type Tamper = Box<dyn Fn(&mut Value)>;

pub(crate) fn entry_structure(out: &mut Out) {
    let a = "alice-es256";
    let cases: Vec<(&str, &str, Tamper)> = vec![
        (
            "missing-signature",
            "no signature member",
            Box::new(|e| remove(e, "signature")),
        ),
        (
            "missing-nonce",
            "no nonce member",
            Box::new(|e| remove(e, "nonce")),
        ),
        (
            "missing-assertion-at",
            "no assertion_at member",
            Box::new(|e| remove(e, "assertion_at")),
        ),
        (
            "unknown-member",
            "an extra member",
            Box::new(|e| e["extra"] = json!(true)),
        ),
        (
            "credential-id-padded",
            "credential_id in padded base64url",
            Box::new(|e| padded(e, "credential_id")),
        ),
        (
            "signature-standard-alphabet",
            "signature in the standard base64 alphabet",
            Box::new(|e| e["signature"] = json!("MEUCIQ+/")),
        ),
        (
            "nonce-trailing-bits",
            "a base64url value with non-zero trailing bits",
            Box::new(|e| e["nonce"] = json!("AB")),
        ),
        (
            "decision-lowercase",
            "decision \"approved\"",
            Box::new(|e| e["decision"] = json!("approved")),
        ),
        (
            "decision-pending",
            "decision \"PENDING\"",
            Box::new(|e| e["decision"] = json!("PENDING")),
        ),
        (
            "format-number",
            "format is a number",
            Box::new(|e| e["format"] = json!(1)),
        ),
        (
            "signature-number",
            "signature is a number",
            Box::new(|e| e["signature"] = json!(42)),
        ),
        (
            "entry-string",
            "the entry is a string",
            Box::new(|e| *e = json!("webauthn.assertion/1")),
        ),
        (
            "entry-null",
            "the entry is null",
            Box::new(|e| *e = Value::Null),
        ),
    ];
    for (name, description, tamper) in cases {
        let mut c = approve(a);
        tamper(c.entry(0));
        out.ev(
            &format!("entry::{name}"),
            &format!("an undecodable evidence entry: {description}"),
            &["entry-malformed"],
            c,
            deny("evidence_malformed"),
        );
    }
    let mut c = approve(a);
    c.entry(0)["assertion_at"] = json!("yesterday");
    out.ev(
        "entry::assertion-at-not-rfc3339",
        "assertion_at is not an RFC 3339 timestamp",
        &["entry-malformed", "freshness"],
        c,
        deny("evidence_malformed"),
    );
    for (name, format) in [
        ("next-version", "webauthn.assertion/2"),
        ("upper-case", "WEBAUTHN.ASSERTION/1"),
        ("trailing-space", "webauthn.assertion/1 "),
        ("other-scheme", "x509.signature/1"),
    ] {
        let mut c = approve(a);
        c.entry(0)["format"] = json!(format);
        out.ev(
            &format!("entry::format-{name}"),
            &format!("format {format:?} with the /1 members"),
            &["unsupported-format"],
            c,
            deny("unsupported_format"),
        );
    }
    let informational: [(&str, &str, &str, Value); 3] = [
        (
            "co-signatures",
            "co_signatures present (reserved, carried, not verified)",
            "co_signatures",
            json!([{"format": "x"}]),
        ),
        (
            "aaguid-informational",
            "an aaguid beside the evidence that the registry contradicts",
            "aaguid",
            json!("00000000-0000-0000-0000-000000000000"),
        ),
        (
            "attestation-ref",
            "an attestation_ref URI",
            "attestation_ref",
            json!("https://mds.example/entry/1"),
        ),
    ];
    for (name, description, member, value) in informational {
        let mut c = approve(a);
        c.entry(0)[member] = value;
        out.ev(
            &format!("entry::{name}"),
            description,
            &["entry-informational"],
            c,
            allow("AAL2"),
        );
    }
    let mut c = approve(a);
    c.entry(0)["attestation_ref"] = Value::Null;
    out.ev(
        "entry::attestation-ref-null",
        "attestation_ref null (a string or null)",
        &["entry-informational"],
        c,
        allow("AAL2"),
    );
    // Informational members are still typed: aaguid is absent or a UUID string, attestation_ref
    // a string or null.
    for (name, member, value) in [
        ("aaguid-null", "aaguid", Value::Null),
        ("aaguid-not-uuid", "aaguid", json!("alice-authenticator")),
        (
            "aaguid-unhyphenated",
            "aaguid",
            json!("adce000235bcc60a648b0b25f1f05503"),
        ),
        ("aaguid-number", "aaguid", json!(16)),
        ("attestation-ref-number", "attestation_ref", json!(1)),
        (
            "attestation-ref-object",
            "attestation_ref",
            json!({"uri": "x"}),
        ),
    ] {
        let mut c = approve(a);
        c.entry(0)[member] = value.clone();
        out.ev(
            &format!("entry::{name}"),
            &format!("{member} is {value}: a wrong type for an informational member"),
            &["entry-malformed", "entry-informational-type"],
            c,
            deny("evidence_malformed"),
        );
    }
    // The timestamp is decoded with the entry, before any signature work.
    let mut c = approve_tampered(a, |r| {
        if let Some(b) = r.signature.last_mut() {
            *b ^= 0x01;
        }
    });
    c.entry(0)["assertion_at"] = json!("2026-11-20 09:59");
    out.ev(
        "entry::assertion-at-invalid-and-signature-flipped",
        "assertion_at is not RFC 3339 and a signature bit is flipped: the entry does not decode",
        &["entry-malformed", "check-order", "freshness"],
        c,
        deny("evidence_malformed"),
    );
}

fn remove(e: &mut Value, member: &str) {
    if let Some(o) = e.as_object_mut() {
        o.remove(member);
    }
}

fn padded(e: &mut Value, member: &str) {
    let text = e[member].as_str().unwrap_or_default().to_owned();
    let pad = (4 - text.len() % 4) % 4;
    let pad = if pad == 0 { 4 } else { pad };
    e[member] = json!(format!("{text}{}", "=".repeat(pad)));
}

pub(crate) fn credentials(out: &mut Out) {
    let a = "alice-es256";
    let action = pay(ACCOUNT_A);
    let entry = good(a, &action, Approved);
    out.ev(
        "credential::unknown",
        "the credential id is not in the registry (bob is)",
        &["credential-unknown"],
        Case::new(action, "APPROVED", vec![entry], &["bob-es256"]),
        deny("credential_unknown"),
    );
    let mut c = approve(a);
    c.entry(0)["credential_id"] = json!(b64(b"not-a-credential"));
    out.ev(
        "credential::id-rewritten",
        "the entry's credential id rewritten to an unknown one",
        &["credential-unknown"],
        c,
        deny("credential_unknown"),
    );
    let mut c = approve(a);
    c.record(a).revoked = true;
    out.ev(
        "credential::revoked",
        "the credential was revoked",
        &["credential-revoked"],
        c,
        deny("credential_revoked"),
    );
    let mut c = refuse(a);
    c.record(a).revoked = true;
    out.ev(
        "credential::revoked-refusal",
        "a refusal made with a revoked credential",
        &["credential-revoked", "refusal"],
        c,
        deny_as("DENIED", "credential_revoked", "declared"),
    );
    let mut c = approve(a);
    c.record(a).public_key = key("bob-es256").cose_public_key();
    out.ev(
        "credential::registry-key-swapped",
        "the registry maps alice's credential id to bob's public key",
        &["wrong-key"],
        c,
        deny("signature_invalid"),
    );
}
