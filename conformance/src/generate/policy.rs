//! Evidence vectors for what surrounds the signature: the result envelope and transport claims,
//! freshness, nonce replay inside one case, quorum and vetoes, and the order of checks when a
//! record has several defects.

use super::Out;
use super::case::*;
use countersign::Decision::{Approved, Denied};
use countersign_softkey::{Flags, Part};
use serde_json::{Value, json};

pub(crate) fn status(out: &mut Out) {
    let a = "alice-es256";
    let bare = |status: Value| {
        let mut c = Case::new(pay(ACCOUNT_A), "APPROVED", vec![], &[a]);
        c.result = status;
        c
    };
    out.ev(
        "status::bare-approved",
        "the bare string \"APPROVED\" with evidence required",
        &["bare-string", "no-evidence"],
        bare(json!("APPROVED")),
        deny("evidence_missing"),
    );
    let mut c = bare(json!("APPROVED"));
    c.policy["require_evidence"] = json!(false);
    out.ev(
        "status::bare-approved-evidence-optional",
        "the bare string \"APPROVED\" with evidence not required: ALLOW, declared",
        &["bare-string", "no-evidence", "policy-evidence-optional"],
        c,
        allow("declared"),
    );
    out.ev(
        "status::bare-denied",
        "the bare string \"DENIED\"",
        &["bare-string", "no-evidence"],
        bare(json!("DENIED")),
        deny_as("DENIED", "approver_refused", "declared"),
    );
    out.ev(
        "status::bare-pending",
        "the bare string \"PENDING\" reads as {\"status\":\"PENDING\"}, which lacks approval_id",
        &["bare-string", "result-malformed", "pending"],
        bare(json!("PENDING")),
        unusable(),
    );
    out.ev(
        "status::pending",
        "PENDING with an approval_id",
        &["pending"],
        bare(json!({"status": "PENDING", "approval_id": "apr_1"})),
        deny_as("PENDING", "pending", "declared"),
    );
    let mut c = approve(a);
    c.result["status"] = json!("PENDING");
    out.ev(
        "status::pending-with-valid-evidence",
        "PENDING carrying a valid approval: a pending result is never permission",
        &["pending", "check-order"],
        c,
        deny_as("PENDING", "pending", "declared"),
    );
    out.ev(
        "status::approved-empty-evidence",
        "APPROVED with an empty approver_evidence array",
        &["no-evidence"],
        bare(json!({"status": "APPROVED", "approver_evidence": []})),
        deny("evidence_missing"),
    );
    out.ev(
        "status::approved-null-evidence",
        "APPROVED with approver_evidence null: not an array, so the envelope is unusable",
        &["no-evidence", "result-malformed"],
        bare(json!({"status": "APPROVED", "approver_evidence": null})),
        unusable(),
    );
    out.ev(
        "status::denied-null-evidence",
        "DENIED with approver_evidence null: not an array, so the envelope is unusable",
        &["no-evidence", "result-malformed"],
        bare(json!({"status": "DENIED", "approver_evidence": null})),
        unusable(),
    );
    // Duplicate members: a first-wins reader and a last-wins reader would see different results.
    let mut c = refuse(a);
    let refusal = serde_json::to_string(&c.result).unwrap_or_default();
    c.result_text = Some(refusal.replacen('{', r#"{"status":"APPROVED","#, 1));
    out.ev(
        "status::duplicate-status",
        "the envelope names its status twice (APPROVED, then DENIED)",
        &["result-malformed", "result-duplicate-member"],
        c,
        unusable(),
    );
    let mut c = approve(a);
    let text = serde_json::to_string(&c.result).unwrap_or_default();
    c.result_text = Some(text.replacen(
        r#""decision":"APPROVED""#,
        r#""decision":"DENIED","decision":"APPROVED""#,
        1,
    ));
    out.ev(
        "status::duplicate-member-in-entry",
        "an evidence entry names its decision twice (DENIED, then APPROVED)",
        &["result-malformed", "result-duplicate-member"],
        c,
        unusable(),
    );
    out.ev(
        "status::approved-transport-reason-ignored",
        "APPROVED without evidence carrying reason_code callback_timeout",
        &["no-evidence", "transport-reason"],
        bare(json!({"status": "APPROVED", "reason_code": "callback_timeout"})),
        deny("evidence_missing"),
    );
    for reason in [
        "approver_refused",
        "expired_unanswered",
        "no_eligible_approver",
        "callback_timeout",
        "cancelled",
    ] {
        out.ev(
            &format!("status::denied-{}", reason.replace('_', "-")),
            &format!("DENIED without evidence, transport reason {reason}: carried through"),
            &["no-evidence", "transport-reason"],
            bare(json!({"status": "DENIED", "reason_code": reason})),
            deny_as("DENIED", reason, "declared"),
        );
    }
    for (name, reason) in [
        ("unknown", json!("banana")),
        ("not-transport", json!("signature_invalid")),
        ("uppercase", json!("EXPIRED_UNANSWERED")),
    ] {
        out.ev(
            &format!("status::denied-reason-{name}"),
            &format!("DENIED without evidence, transport reason {reason}: a plain refusal"),
            &["no-evidence", "transport-reason"],
            bare(json!({"status": "DENIED", "reason_code": reason})),
            deny_as("DENIED", "approver_refused", "declared"),
        );
    }
    for (name, result) in [
        ("unknown-status", json!("MAYBE")),
        ("lowercase-status", json!("approved")),
        ("number", json!(42)),
        ("null", Value::Null),
        ("array", json!(["APPROVED"])),
        ("status-number", json!({"status": 1})),
        ("status-missing", json!({"approval_id": "apr_1"})),
        (
            "evidence-object",
            json!({"status": "APPROVED", "approver_evidence": {}}),
        ),
        ("pending-without-id", json!({"status": "PENDING"})),
        (
            "approval-id-number",
            json!({"status": "APPROVED", "approval_id": 7}),
        ),
    ] {
        out.ev(
            &format!("status::unusable-{name}"),
            &format!("an unusable result envelope: {result}"),
            &["result-malformed"],
            bare(result),
            unusable(),
        );
    }

    // Transport-asserted identity_assurance is never used once evidence verifies.
    let mut c = approve_with(a, |s| s.request.ceremony.flags = Flags::from_byte(0x01));
    c.policy["require_user_verification"] = json!(false);
    c.result["identity_assurance"] = json!("AAL3");
    out.ev(
        "status::transport-assurance-ignored",
        "transport claims AAL3, the evidence shows presence only: AAL1",
        &["transport-assurance-ignored", "policy-uv-optional"],
        c,
        allow("AAL1"),
    );
    let mut c = approve_with(a, |s| s.request.ceremony.flags = Flags::from_byte(0x01));
    c.policy["require_user_verification"] = json!(false);
    c.policy["min_assurance"] = json!("AAL2");
    c.result["identity_assurance"] = json!({"level": "AAL3", "source": "evidence"});
    out.ev(
        "status::transport-assurance-cannot-lift",
        "transport claims AAL3 as if derived, min_assurance AAL2, the evidence shows AAL1",
        &[
            "transport-assurance-ignored",
            "min-assurance",
            "policy-uv-optional",
        ],
        c,
        deny_as("APPROVED", "insufficient_assurance", "AAL1"),
    );
    let mut c = approve(a);
    c.result["identity_assurance"] = json!("AAL1");
    c.policy["min_assurance"] = json!("AAL2");
    out.ev(
        "status::transport-assurance-cannot-lower",
        "transport claims AAL1, the evidence shows AAL2, min_assurance AAL2",
        &["transport-assurance-ignored", "min-assurance"],
        c,
        allow("AAL2"),
    );
    let mut c = bare(json!({"status": "APPROVED", "identity_assurance": "AAL3"}));
    c.policy["require_evidence"] = json!(false);
    out.ev(
        "status::transport-assurance-declared",
        "no evidence, evidence optional, transport claims AAL3: the level stays declared",
        &[
            "transport-assurance-ignored",
            "no-evidence",
            "policy-evidence-optional",
        ],
        c,
        allow("declared"),
    );
    out.ev(
        "status::denied-transport-assurance",
        "DENIED without evidence claiming AAL3",
        &["transport-assurance-ignored", "no-evidence"],
        bare(json!({"status": "DENIED", "identity_assurance": "AAL3"})),
        deny_as("DENIED", "approver_refused", "declared"),
    );

    // Nothing fails open: evidence that is present must verify even when not required.
    let mut c = approve_tampered(a, |r| {
        let bit = (r.signature.len() - 2) * 8 + 7;
        let _ = r.flip_bit(Part::Signature, bit);
    });
    c.policy["require_evidence"] = json!(false);
    out.ev(
        "status::optional-evidence-must-verify",
        "evidence not required, but the evidence present has a bad signature",
        &["policy-evidence-optional", "signature-tamper"],
        c,
        deny("signature_invalid"),
    );
    let mut c = refuse(a);
    c.result["status"] = json!("DENIED");
    c.result["reason_code"] = json!("expired_unanswered");
    out.ev(
        "status::verified-refusal-overrides-transport-reason",
        "a verified refusal under DENIED with transport reason expired_unanswered",
        &["refusal", "transport-reason"],
        c,
        deny_as("DENIED", "approver_refused", "AAL2"),
    );
}

/// The verdict for a CASE whose result envelope is unusable.
fn unusable() -> Value {
    expect("DENY", None, Some("result_malformed"), "declared")
}

pub(crate) fn freshness(out: &mut Out) {
    let a = "alice-es256";
    // NOW is 2026-11-20T10:00:00Z.
    for (name, at, policy, expected) in [
        ("age-300", "2026-11-20T09:55:00Z", json!({}), allow("AAL2")),
        ("age-301", "2026-11-20T09:54:59Z", json!({}), deny("stale")),
        (
            "age-one-day",
            "2026-11-19T10:00:00Z",
            json!({}),
            deny("stale"),
        ),
        (
            "age-zero",
            "2026-11-20T10:00:00Z",
            json!({"max_age_seconds": 0}),
            allow("AAL2"),
        ),
        (
            "max-age-30",
            "2026-11-20T09:59:00Z",
            json!({"max_age_seconds": 30}),
            deny("stale"),
        ),
        (
            "age-300.5",
            "2026-11-20T09:54:59.5Z",
            json!({}),
            deny("stale"),
        ),
        (
            "age-300-and-1ns",
            "2026-11-20T09:54:59.999999999Z",
            json!({}),
            deny("stale"),
        ),
        (
            "future-60.5",
            "2026-11-20T10:01:00.5Z",
            json!({}),
            deny("stale"),
        ),
        (
            "future-60",
            "2026-11-20T10:01:00Z",
            json!({}),
            allow("AAL2"),
        ),
        (
            "future-61",
            "2026-11-20T10:01:01Z",
            json!({}),
            deny("stale"),
        ),
        (
            "future-skew-0",
            "2026-11-20T10:00:01Z",
            json!({"clock_skew_seconds": 0}),
            deny("stale"),
        ),
        (
            "offset-timezone",
            "2026-11-20T10:59:00+01:00",
            json!({}),
            allow("AAL2"),
        ),
        (
            "fractional-seconds",
            "2026-11-20T09:55:00.000Z",
            json!({}),
            allow("AAL2"),
        ),
    ] {
        let mut c = approve_with(a, |s| s.assertion_at = at.to_owned());
        if let (Some(p), Some(extra)) = (c.policy.as_object_mut(), policy.as_object()) {
            for (k, v) in extra {
                p.insert(k.clone(), v.clone());
            }
        }
        out.ev(
            &format!("freshness::{name}"),
            &format!(
                "assertion_at {at} with now {}, policy {policy}",
                countersign_testkit::NOW
            ),
            &["freshness"],
            c,
            expected,
        );
    }
}

pub(crate) fn replay(out: &mut Out) {
    let a = "alice-es256";
    let mut c = approve(a);
    let e = c.entry(0).clone();
    c.result["approver_evidence"] = json!([e.clone(), e]);
    out.ev(
        "replay::same-entry-twice",
        "one approval listed twice in one result",
        &["replay"],
        c,
        deny("replayed"),
    );
    let mut c = refuse(a);
    let e = c.entry(0).clone();
    c.result["approver_evidence"] = json!([e.clone(), e]);
    out.ev(
        "replay::same-refusal-twice",
        "one refusal listed twice in one result",
        &["replay", "refusal"],
        c,
        deny_as("DENIED", "replayed", "declared"),
    );
    let action = pay(ACCOUNT_A);
    let shared = countersign_testkit::nonce("shared");
    let e1 = signed("alice-es256", &action, Approved, |s| s.nonce = shared);
    let e2 = signed("bob-es256", &action, Approved, |s| s.nonce = shared);
    let mut c = Case::new(
        action,
        "APPROVED",
        vec![e1, e2],
        &["alice-es256", "bob-es256"],
    );
    c.policy["quorum"] = json!(2);
    out.ev(
        "replay::two-approvers-one-nonce",
        "two approvers signed over the same nonce (quorum 2)",
        &["replay", "quorum"],
        c,
        deny("replayed"),
    );
    let action = pay(ACCOUNT_A);
    let e1 = signed("alice-es256", &action, Approved, |s| s.nonce = shared);
    let e2 = signed("alice-eddsa", &action, Approved, |s| s.nonce = shared);
    out.ev(
        "replay::two-keys-one-nonce",
        "two keys of one approver signed over the same nonce",
        &["replay"],
        Case::new(
            action,
            "APPROVED",
            vec![e1, e2],
            &["alice-es256", "alice-eddsa"],
        ),
        deny("replayed"),
    );
}

pub(crate) fn quorum(out: &mut Out) {
    let action = pay(ACCOUNT_A);
    let sign = |name: &str, d| good(name, &action, d);
    let case = |entries: Vec<Value>, enrolled: &[&str], quorum: u32, status: &str| {
        let mut c = Case::new(pay(ACCOUNT_A), status, entries, enrolled);
        c.policy["quorum"] = json!(quorum);
        c
    };
    let ab = ["alice-es256", "bob-es256"];
    out.ev(
        "quorum::two-of-two",
        "quorum 2, alice and bob approve",
        &["quorum"],
        case(
            vec![sign(ab[0], Approved), sign(ab[1], Approved)],
            &ab,
            2,
            "APPROVED",
        ),
        allow("AAL2"),
    );
    out.ev(
        "quorum::one-of-two",
        "quorum 2, only alice approves",
        &["quorum"],
        case(vec![sign(ab[0], Approved)], &ab, 2, "APPROVED"),
        deny_as("APPROVED", "quorum_not_met", "AAL2"),
    );
    let aa = ["alice-es256", "alice-eddsa"];
    out.ev(
        "quorum::one-principal-two-keys",
        "quorum 2, alice approves with two keys: one principal counts once",
        &["quorum"],
        case(
            vec![sign(aa[0], Approved), sign(aa[1], Approved)],
            &aa,
            2,
            "APPROVED",
        ),
        deny_as("APPROVED", "quorum_not_met", "AAL2"),
    );
    out.ev(
        "quorum::zero-reads-as-one",
        "quorum 0 reads as 1",
        &["quorum"],
        case(vec![sign(ab[0], Approved)], &ab, 0, "APPROVED"),
        allow("AAL2"),
    );
    out.ev(
        "quorum::one-with-two-approvers",
        "quorum 1, two approvers",
        &["quorum"],
        case(
            vec![sign(ab[0], Approved), sign(ab[1], Approved)],
            &ab,
            1,
            "APPROVED",
        ),
        allow("AAL2"),
    );
    let abc = ["alice-es256", "bob-eddsa", "carol-es256"];
    out.ev(
        "quorum::three-of-three-mixed-algs",
        "quorum 3 with ES256, EdDSA and ES256 keys",
        &["quorum", "alg-eddsa"],
        case(
            abc.iter().map(|k| sign(k, Approved)).collect(),
            &abc,
            3,
            "APPROVED",
        ),
        allow("AAL2"),
    );
    out.ev(
        "quorum::three-needs-three",
        "quorum 3, two approvers",
        &["quorum"],
        case(
            vec![sign(abc[0], Approved), sign(abc[1], Approved)],
            &abc,
            3,
            "APPROVED",
        ),
        deny_as("APPROVED", "quorum_not_met", "AAL2"),
    );
    let mut c = case(
        vec![sign(ab[0], Approved), sign(ab[1], Approved)],
        &ab,
        2,
        "APPROVED",
    );
    attested(c.record(ab[0]));
    out.ev(
        "quorum::weakest-level",
        "alice at AAL3 and bob at AAL2: the verdict carries the weakest",
        &["quorum", "assurance-level", "attestation"],
        c,
        allow("AAL2"),
    );
    let mut c = case(
        vec![sign(ab[0], Approved), sign(ab[1], Approved)],
        &ab,
        2,
        "APPROVED",
    );
    attested(c.record(ab[0]));
    c.policy["min_assurance"] = json!("AAL3");
    out.ev(
        "quorum::min-assurance-each",
        "min_assurance AAL3 applies to every approver: bob is AAL2",
        &["quorum", "min-assurance", "attestation", "check-order"],
        c,
        deny_as("APPROVED", "insufficient_assurance", "AAL2"),
    );
    out.ev(
        "quorum::veto",
        "quorum 2, alice approves and bob refuses (status APPROVED): a refusal is a veto",
        &["quorum", "refusal-veto"],
        case(
            vec![sign(ab[0], Approved), sign(ab[1], Denied)],
            &ab,
            2,
            "APPROVED",
        ),
        deny_as("DENIED", "approver_refused", "AAL2"),
    );
    let mut c = case(
        vec![sign(ab[0], Approved), sign(ab[1], Denied)],
        &ab,
        1,
        "APPROVED",
    );
    attested(c.record(ab[1]));
    out.ev(
        "quorum::veto-level",
        "the veto's assurance is the refusing approver's (bob, attested: AAL3)",
        &["refusal-veto", "attestation"],
        c,
        deny_as("DENIED", "approver_refused", "AAL3"),
    );
    out.ev(
        "quorum::veto-before-quorum",
        "quorum 3, alice refuses alone: the veto is reported, not the quorum",
        &["refusal-veto", "check-order"],
        case(vec![sign(ab[0], Denied)], &ab, 3, "DENIED"),
        deny_as("DENIED", "approver_refused", "AAL2"),
    );
    out.ev(
        "quorum::status-denied-evidence-approves",
        "status DENIED while every entry signs APPROVED",
        &["status-contradiction"],
        case(
            vec![sign(ab[0], Approved), sign(ab[1], Approved)],
            &ab,
            1,
            "DENIED",
        ),
        deny_as("DENIED", "binding_mismatch", "AAL2"),
    );
    let bad = signed_with(
        ab[1],
        &action,
        Approved,
        |_| {},
        |r| {
            let bit = (r.signature.len() - 2) * 8 + 7;
            let _ = r.flip_bit(Part::Signature, bit);
        },
    );
    out.ev(
        "quorum::second-entry-bad",
        "quorum 2, bob's signature is broken: the first failing entry decides",
        &["quorum", "signature-tamper"],
        case(vec![sign(ab[0], Approved), bad], &ab, 2, "APPROVED"),
        deny("signature_invalid"),
    );
    let uv0 = signed(ab[1], &action, Approved, |s| {
        s.request.ceremony.flags = Flags::from_byte(0x01)
    });
    out.ev(
        "quorum::second-entry-uv-clear",
        "quorum 2, bob's assertion lacks UV",
        &["quorum", "flags-uv"],
        case(vec![sign(ab[0], Approved), uv0], &ab, 2, "APPROVED"),
        deny("user_not_verified"),
    );
    let unknown = sign("mallory-es256", Approved);
    out.ev(
        "quorum::unenrolled-third-party",
        "quorum 2, alice and an unenrolled key (mallory)",
        &["quorum", "credential-unknown"],
        case(vec![sign(ab[0], Approved), unknown], &ab, 2, "APPROVED"),
        deny("credential_unknown"),
    );
}

pub(crate) fn check_order(out: &mut Out) {
    let a = "alice-es256";
    let flip_sig = |r: &mut countersign_softkey::AssertionResponse| {
        let bit = (r.signature.len() - 2) * 8 + 7;
        let _ = r.flip_bit(Part::Signature, bit);
    };
    let mut c = approve(a);
    c.entry(0)["format"] = json!("webauthn.assertion/2");
    c.entry(0)["credential_id"] = json!(b64(b"unknown"));
    out.ev(
        "order::format-before-credential",
        "unsupported format and unknown credential",
        &["check-order"],
        c,
        deny("unsupported_format"),
    );

    // Another format need not carry this format's members: the format is read first, on the raw
    // entry, so the answer names the format rather than calling the entry malformed.
    let mut c = approve(a);
    *c.entry(0) = json!({"format": "x509.cosign/1", "certificate": "MIIB", "sig": "AA"});
    out.ev(
        "order::format-before-decoding",
        "an entry of another format with entirely different members",
        &["check-order", "unsupported-format"],
        c,
        deny("unsupported_format"),
    );
    let mut c = approve(a);
    if let Some(entry) = c.entry(0).as_object_mut() {
        entry.remove("format");
    }
    out.ev(
        "order::missing-format-is-malformed",
        "an entry without a format member",
        &["check-order", "entry-malformed"],
        c,
        deny("evidence_malformed"),
    );

    let mut c = approve(a);
    c.entry(0)["canonicalization_profile"] = json!("countersign.payment/2");
    c.entry(0)["credential_id"] = json!(b64(b"unknown"));
    out.ev(
        "order::profile-before-credential",
        "unknown evidence profile and unknown credential",
        &["check-order"],
        c,
        deny("profile_unknown"),
    );

    let mut c = approve(a);
    c.entry(0)["credential_id"] = json!(b64(b"unknown"));
    c.action = pay(ACCOUNT_B);
    out.ev(
        "order::credential-before-binding",
        "unknown credential and another action",
        &["check-order"],
        c,
        deny("credential_unknown"),
    );

    let mut c = approve_tampered(a, flip_sig);
    c.record(a).revoked = true;
    out.ev(
        "order::revoked-before-signature",
        "revoked credential and a bad signature",
        &["check-order"],
        c,
        deny("credential_revoked"),
    );

    let mut c = approve_tampered(a, flip_sig);
    c.action = pay(ACCOUNT_B);
    out.ev(
        "order::binding-before-signature",
        "another action and a bad signature",
        &["check-order"],
        c,
        deny("binding_mismatch"),
    );

    let c = approve_with(a, |s| {
        s.request.ceremony.client_data_type = "webauthn.create".into();
        s.request.ceremony.origin = "https://evil.example.com".into();
    });
    out.ev(
        "order::type-before-origin",
        "wrong type and wrong origin",
        &["check-order"],
        c,
        deny("evidence_malformed"),
    );

    let c = approve_with(a, |s| {
        s.request.ceremony.origin = "https://evil.example.com".into();
        s.request.ceremony.rp_id = "evil.example.com".into();
    });
    out.ev(
        "order::origin-before-rp",
        "wrong origin and wrong RP id",
        &["check-order"],
        c,
        deny("origin_mismatch"),
    );

    let c = approve_with(a, |s| {
        s.request.ceremony.rp_id = "evil.example.com".into();
        s.request.ceremony.flags = Flags::from_byte(0);
    });
    out.ev(
        "order::rp-before-up",
        "wrong RP id and UP clear",
        &["check-order"],
        c,
        deny("rp_mismatch"),
    );

    let mut c = approve_with(a, |s| {
        s.request.ceremony.flags = Flags::from_byte(0x01 | 0x08)
    });
    c.record(a).backup_eligible = Some(false);
    out.ev(
        "order::uv-before-backup",
        "UV clear and BE contradicting enrollment",
        &["check-order"],
        c,
        deny("user_not_verified"),
    );

    let c = {
        let action = pay(ACCOUNT_A);
        let e = signed_with(
            a,
            &action,
            Approved,
            |s| s.request.ceremony.flags = Flags::from_byte(0x05 | 0x08),
            flip_sig,
        );
        let mut c2 = Case::new(action, "APPROVED", vec![e], &[a]);
        c2.record(a).backup_eligible = Some(false);
        c2
    };
    out.ev(
        "order::backup-before-signature",
        "BE contradicting enrollment and a bad signature",
        &["check-order"],
        c,
        deny("backup_eligibility_mismatch"),
    );

    let mut c = approve_tampered(a, flip_sig);
    c.record(a).sign_count = 9;
    out.ev(
        "order::signature-before-counter",
        "bad signature and counter regression",
        &["check-order"],
        c,
        deny("signature_invalid"),
    );

    let mut c = approve_with(a, |s| s.assertion_at = "2026-11-19T10:00:00Z".into());
    c.record(a).sign_count = 9;
    out.ev(
        "order::counter-before-freshness",
        "counter regression and a stale assertion",
        &["check-order"],
        c,
        deny("counter_regression"),
    );

    let mut c = approve_with(a, |s| s.assertion_at = "2026-11-19T10:00:00Z".into());
    let e = c.entry(0).clone();
    c.result["approver_evidence"] = json!([e.clone(), e]);
    out.ev(
        "order::freshness-before-replay",
        "stale, and listed twice",
        &["check-order"],
        c,
        deny("stale"),
    );

    let mut c = approve_with(a, |s| s.assertion_at = "2026-11-19T10:00:00Z".into());
    c.entry(0)["signature"] = json!(42);
    out.ev(
        "order::malformed-before-everything",
        "undecodable entry, stale",
        &["check-order"],
        c,
        deny("evidence_malformed"),
    );

    let mut c = approve(a);
    c.entry(0)["signature"] = json!(42);
    c.fields_text = Some(r#"{"amount":"40000.00","currency":"eur","source_account":"ops-main","destination_account":"account-A","reference":"INV-2291"}"#.into());
    out.ev(
        "order::action-before-evidence",
        "inadmissible action and an undecodable entry",
        &["check-order", "action-inadmissible", "profile-fields"],
        c,
        deny("action_inadmissible"),
    );

    let mut c = Case::new(pay(ACCOUNT_A), "APPROVED", vec![], &[a]);
    c.fields_text = Some(r#"{"amount":"40000.00","currency":"eur"}"#.into());
    out.ev(
        "order::no-evidence-before-action",
        "inadmissible action and no evidence: the action is not bound",
        &["check-order", "no-evidence"],
        c,
        deny("evidence_missing"),
    );

    let mut c = approve(a);
    c.entry(0)["nonce"] = json!(b64(&[9u8; 31]));
    c.action = pay(ACCOUNT_B);
    out.ev(
        "order::nonce-length-before-op-hash",
        "a 31-byte nonce field and another action",
        &["check-order", "binding-nonce"],
        c,
        deny("evidence_malformed"),
    );

    let action = pay(ACCOUNT_A);
    let e1 = good(a, &action, Denied);
    let e2 = signed_with("bob-es256", &action, Approved, |_| {}, flip_sig);
    let c = Case::new(action, "DENIED", vec![e1, e2], &[a, "bob-es256"]);
    out.ev(
        "order::bad-entry-beats-veto",
        "alice refuses, bob's approval has a bad signature: every entry must verify",
        &["check-order", "refusal-veto"],
        c,
        deny_as("DENIED", "signature_invalid", "declared"),
    );
}
