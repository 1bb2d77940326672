//! Evidence vectors on the other side of a rule: near misses a check must let through, and the
//! refusals a lenient reader would let through. Each answers the coverage table (a reason code or
//! flag that had vectors on one side only) or a deviation the security review fixed: a
//! fractional age, `null` where an array or a boolean is required, bytes that are not UTF-8 in
//! clientDataJSON, a malformed `aaguid` / `attestation_ref` / `assertion_at`, a member named
//! twice in the result envelope.

use super::Out;
use super::case::*;
use countersign::Decision::Approved;
use countersign_testkit as tk;
use serde_json::{Value, json};

const A: &str = "alice-es256";

/// Merge `extra` into the CASE's policy.
fn with_policy(mut c: Case, extra: &Value) -> Case {
    if let (Some(p), Some(extra)) = (c.policy.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            p.insert(k.clone(), v.clone());
        }
    }
    c
}

/// The result envelope: transport members that must not change a verified verdict, and
/// duplicate members anywhere in the result text.
pub(crate) fn envelope(out: &mut Out) {
    // A transport reason on an approval with verified evidence: it speaks only for a DENIED
    // result without evidence (SPEC §6 step 2).
    for reason in [
        "approver_refused",
        "expired_unanswered",
        "no_eligible_approver",
        "callback_timeout",
        "cancelled",
    ] {
        let mut c = approve(A);
        c.result["reason_code"] = json!(reason);
        out.ev(
            &format!(
                "status::approved-with-evidence-reason-{}",
                reason.replace('_', "-")
            ),
            &format!(
                "APPROVED with a verified approval and transport reason_code {reason}: the \
                 reason is carried only for a DENIED result without evidence"
            ),
            &["transport-reason"],
            c,
            allow("AAL2"),
        );
    }
    let mut c = approve(A);
    c.result["expires_at"] = json!("2026-11-20T10:05:00Z");
    c.result["redrive_url"] = json!("https://approvals.example/apr_conformance");
    out.ev(
        "status::approved-with-pending-members",
        "APPROVED carrying approval_id, expires_at and redrive_url (what a pending result \
         has): the status decides, not the members beside it",
        &["pending", "result-malformed"],
        c,
        allow("AAL2"),
    );
    // A member name repeated at another depth is not a duplicate member.
    let mut c = approve(A);
    c.result["identity_assurance"] = json!({"status": "AAL3", "approver_evidence": "none"});
    out.ev(
        "status::member-names-repeated-at-another-depth",
        "the transport's identity_assurance object has members named status and \
         approver_evidence: names repeated in a nested object are not duplicates",
        &[
            "result-duplicate-member",
            "result-malformed",
            "transport-assurance-ignored",
        ],
        c,
        allow("AAL2"),
    );
    // Duplicates the review found a first-wins reader would take: each is unusable.
    let action = pay(ACCOUNT_A);
    let entry = good(A, &action, Approved);
    let entry_text = serde_json::to_string(&entry).unwrap_or_default();
    let entry_body = entry_text.trim_start_matches('{').to_owned();
    for (name, text, what) in [
        (
            "duplicate-evidence",
            format!(
                r#"{{"status":"APPROVED","approver_evidence":[],"approver_evidence":[{entry_text}]}}"#
            ),
            "approver_evidence twice, empty first",
        ),
        (
            "duplicate-reason-code",
            r#"{"status":"DENIED","reason_code":"cancelled","reason_code":"approver_refused"}"#
                .to_owned(),
            "reason_code twice on a DENIED result without evidence",
        ),
        (
            "duplicate-status-same-value",
            format!(
                r#"{{"status":"APPROVED","status":"APPROVED","approver_evidence":[{entry_text}]}}"#
            ),
            "status twice with the same value",
        ),
        (
            "duplicate-in-transport-assurance",
            format!(
                r#"{{"status":"APPROVED","identity_assurance":{{"level":"AAL1","level":"AAL3"}},"approver_evidence":[{entry_text}]}}"#
            ),
            "a member twice inside the transport's identity_assurance object",
        ),
        (
            "duplicate-signature-in-entry",
            format!(
                r#"{{"status":"APPROVED","approver_evidence":[{{"signature":"AAAA",{entry_body}]}}"#
            ),
            "signature twice inside the evidence entry, a bogus one first",
        ),
    ] {
        let mut c = Case::new(action.clone(), "APPROVED", vec![], &[A]);
        c.result_text = Some(text);
        out.ev(
            &format!("status::{name}"),
            &format!("{what}: a member named twice anywhere makes the result unusable"),
            &["result-duplicate-member", "result-malformed"],
            c,
            expect("DENY", None, Some("result_malformed"), "declared"),
        );
    }
}

/// Entries: informational members of the right and the wrong type, timestamps that are not
/// RFC 3339, `null` where an array or a string is required.
pub(crate) fn entries(out: &mut Out) {
    let mut c = approve(A);
    c.entry(0)["co_signatures"] = json!([{"format": "webauthn.assertion/2"}]);
    out.ev(
        "entry::co-signatures-nested-format",
        "co_signatures holds an object whose format is webauthn.assertion/2: the entry's own \
         format is /1, the reserved member is carried, not read",
        &["entry-informational", "unsupported-format"],
        c,
        allow("AAL2"),
    );
    for (name, member, value) in [
        ("aaguid-empty", "aaguid", json!("")),
        (
            "aaguid-braced",
            "aaguid",
            json!("{adce0002-35bc-c60a-648b-0b25f1f05503}"),
        ),
        (
            "aaguid-non-hex",
            "aaguid",
            json!("adce0002-35bc-c60a-648b-0b25f1f0550g"),
        ),
        (
            "aaguid-extra-group",
            "aaguid",
            json!("adce0002-35bc-c60a-648b-0b25f1f05503-00"),
        ),
        ("aaguid-boolean", "aaguid", json!(true)),
        ("attestation-ref-boolean", "attestation_ref", json!(false)),
        ("attestation-ref-array", "attestation_ref", json!(["x"])),
        ("co-signatures-null", "co_signatures", Value::Null),
        ("co-signatures-object", "co_signatures", json!({})),
    ] {
        let mut c = approve(A);
        c.entry(0)[member] = value.clone();
        out.ev(
            &format!("entry::{name}"),
            &format!("{member} is {value}: not the type the entry format requires"),
            &["entry-malformed", "entry-informational-type"],
            c,
            deny("evidence_malformed"),
        );
    }
    for (name, value) in [
        ("no-offset", json!("2026-11-20T09:59:00")),
        ("date-only", json!("2026-11-20")),
        ("unix-seconds", json!(1_795_168_740)),
        ("null", Value::Null),
        ("hour-24", json!("2026-11-20T24:00:00Z")),
        ("february-30", json!("2026-02-30T09:59:00Z")),
        ("empty-fraction", json!("2026-11-20T09:59:00.Z")),
        ("offset-without-colon", json!("2026-11-20T10:59:00+0100")),
    ] {
        let mut c = approve(A);
        c.entry(0)["assertion_at"] = value.clone();
        out.ev(
            &format!("entry::assertion-at-{name}"),
            &format!(
                "assertion_at is {value}: not an RFC 3339 date-time, the entry does not decode"
            ),
            &["entry-malformed", "freshness"],
            c,
            deny("evidence_malformed"),
        );
    }
    for member in ["decision", "nonce", "signature"] {
        let mut c = approve(A);
        c.entry(0)[member] = Value::Null;
        out.ev(
            &format!("entry::{member}-null"),
            &format!("{member} is null: a required string, null is not absent-and-fine"),
            &["entry-malformed"],
            c,
            deny("evidence_malformed"),
        );
    }
}

/// Freshness at fractional boundaries (exact durations, SPEC §10).
pub(crate) fn freshness(out: &mut Out) {
    // NOW is 2026-11-20T10:00:00Z.
    for (name, at, now, expected) in [
        (
            "age-299.999999999",
            "2026-11-20T09:55:00.000000001Z",
            tk::NOW,
            allow("AAL2"),
        ),
        (
            "future-60-and-1ns",
            "2026-11-20T10:01:00.000000001Z",
            tk::NOW,
            deny("stale"),
        ),
        (
            "now-fractional-age-300.25",
            "2026-11-20T09:55:00Z",
            "2026-11-20T10:00:00.25Z",
            deny("stale"),
        ),
        (
            "now-fractional-age-299.75",
            "2026-11-20T09:55:00.5Z",
            "2026-11-20T10:00:00.25Z",
            allow("AAL2"),
        ),
        (
            "negative-offset",
            "2026-11-20T04:59:00-05:00",
            tk::NOW,
            allow("AAL2"),
        ),
        (
            "offset-across-midnight-age-301",
            "2026-11-20T23:54:59+14:00",
            tk::NOW,
            deny("stale"),
        ),
    ] {
        let mut c = approve_with(A, |s| s.assertion_at = at.to_owned());
        c.now = now.to_owned();
        out.ev(
            &format!("freshness::{name}"),
            &format!("assertion_at {at} with now {now}, max_age 300 s, skew 60 s, exact durations"),
            &["freshness"],
            c,
            expected,
        );
    }
}

/// Credentials, algorithms, replay and assurance: the legal side of each refusal.
pub(crate) fn near_misses(out: &mut Out) {
    // The registry holds an ES512 key, but for another principal: only the key that signed matters.
    let mut c = approve(A);
    let id = b"conformance es512 credential".to_vec();
    c.extra_credentials.push(json!({
        "credential_id": b64(&id),
        "principal": "erin",
        "public_key": b64(&es512_cose_key()),
    }));
    out.ev(
        "alg::es512-enrolled-for-another",
        "alice's ES256 approval; the registry also holds an ES512 key for erin, which nothing \
         used: the registry is usable and the verdict ignores that key",
        &["alg-unsupported", "alg-es256"],
        c,
        allow("AAL2"),
    );

    // Lookup among many: the record that matches the credential id, not the first one.
    let all = [
        "alice-es256",
        "alice-eddsa",
        "alice-es384",
        "alice-rs256",
        "bob-es256",
        "bob-eddsa",
        "bob-es384",
        "carol-es256",
        "dave-es256",
        "bob-rs256",
    ];
    let action = pay(ACCOUNT_A);
    let entry = good("bob-rs256", &action, Approved);
    out.ev(
        "credential::found-among-many",
        "bob's RS256 approval; ten credentials enrolled, his last: lookup is by credential id",
        &["credential-unknown", "alg-rs256"],
        Case::new(action, "APPROVED", vec![entry], &all),
        allow("AAL2"),
    );
    let action = pay(ACCOUNT_A);
    let entry = good(A, &action, Approved);
    let mut c = Case::new(action, "APPROVED", vec![entry], &["alice-eddsa", A]);
    c.record("alice-eddsa").revoked = true;
    out.ev(
        "credential::other-credential-revoked",
        "alice approves with her ES256 key; her EdDSA key is revoked: revocation is per \
         credential, not per principal",
        &["credential-revoked"],
        c,
        allow("AAL2"),
    );

    // Replay is about nonces, not authenticators: one key, two nonces.
    let action = pay(ACCOUNT_A);
    let first = signed(A, &action, Approved, |s| {
        s.nonce = tk::nonce("one-key/first");
        s.request.ceremony.sign_count = 1;
    });
    let second = signed(A, &action, Approved, |s| {
        s.nonce = tk::nonce("one-key/second");
        s.request.ceremony.sign_count = 2;
    });
    out.ev(
        "replay::one-key-two-nonces",
        "two approvals by one credential with distinct nonces and increasing counters: \
         nothing is replayed, one principal counts once",
        &["replay", "quorum"],
        Case::new(action, "APPROVED", vec![first, second], &[A]),
        allow("AAL2"),
    );

    // The RP id is compared as the hash of the policy's rp_id; the origin is a registrable
    // subdomain of it, as WebAuthn allows.
    let mut c = approve_with(A, |s| s.request.ceremony.rp_id = "example.com".into());
    c.policy["rp_id"] = json!("example.com");
    out.ev(
        "rp::registrable-suffix",
        "rp_id example.com, origin https://pay.example.com (a subdomain): rpIdHash matches the \
         policy's rp_id",
        &["rp-id"],
        c,
        allow("AAL2"),
    );

    // The AAGUID list decides AAL3: an attested authenticator outside it is AAL2, which a
    // minimum of AAL3 refuses.
    let mut c = approve(A);
    attested(c.record(A));
    let c = with_policy(
        c,
        &json!({"aal3_aaguids": ["00000000-0000-0000-0000-000000000001"], "min_assurance": "AAL3"}),
    );
    out.ev(
        "assurance::min-aal3-aaguid-not-listed",
        "device-bound, attested, UV; its AAGUID is not in aal3_aaguids and min_assurance is AAL3",
        &["aal3-aaguid", "min-assurance", "attestation"],
        c,
        deny_as("APPROVED", "insufficient_assurance", "AAL2"),
    );
    let mut c = approve(A);
    attested(c.record(A));
    out.ev(
        "assurance::aal3-empty-list",
        "device-bound, attested, UV; aal3_aaguids is an empty list: no AAGUID is eligible",
        &["aal3-aaguid", "assurance-level", "attestation"],
        with_policy(c, &json!({"aal3_aaguids": []})),
        allow("AAL2"),
    );

    // The action: a boundary that is admissible, and the same action in another spelling.
    let action = tool(json!({"amount_cents": 9_007_199_254_740_991_i64}));
    let entry = good(A, &action, Approved);
    out.ev(
        "binding::action-max-safe-integer",
        "a tool call whose params hold 2^53-1, the largest admissible integer",
        &["action-inadmissible", "canon-big-integer", "tool-call"],
        Case::new(action, "APPROVED", vec![entry], &[A]),
        allow("AAL2"),
    );
    let mut c = approve(A);
    c.fields_text = Some(
        "{ \"reference\" : \"INV-2291\", \"destination_account\":\"account-A\",\
         \"source_account\":\"ops-main\",\"currency\":\"EUR\",\"amount\":\"40000.00\" }"
            .into(),
    );
    out.ev(
        "binding::payment-respelled",
        "the approved payment presented with its members in reverse order and extra \
         whitespace: the same action, the same op_hash",
        &["binding-action", "canon-key-order", "canon-whitespace"],
        c,
        allow("AAL2"),
    );
}

/// clientDataJSON: bytes that are UTF-8 only in part, and raw UTF-8 that is fine.
pub(crate) fn client_data(out: &mut Out) {
    let action = pay(ACCOUNT_A);
    let ch = b64(&tk::challenge(&tk::nonce("cd-utf8"), &action, Approved));
    let o = tk::ORIGIN;
    let signed_over = |bytes: Vec<u8>| {
        approve_with(A, move |s| {
            s.nonce = tk::nonce("cd-utf8");
            s.request.ceremony.client_data_override = Some(bytes);
        })
    };
    let raw = format!(
        "{{\"type\":\"webauthn.get\",\"challenge\":\"{ch}\",\"origin\":\"{o}\",\"note\":\"caf\u{e9} \u{20ac} \u{1f600}\"}}"
    );
    out.ev(
        "clientdata::raw-utf8-in-ignored-member",
        "clientDataJSON with raw two-, three- and four-byte UTF-8 in a member the verifier \
         ignores: valid UTF-8, admitted",
        &["client-data-utf8", "client-data-shape"],
        signed_over(raw.into_bytes()),
        allow("AAL2"),
    );
    for (name, what, bytes) in [
        ("overlong", "an overlong encoding of '/'", &b"\xc0\xaf"[..]),
        (
            "encoded-surrogate",
            "a UTF-8-encoded surrogate (CESU-8)",
            b"\xed\xa0\x80",
        ),
        ("truncated", "a three-byte sequence cut short", b"\xe2\x82"),
        ("latin1", "Latin-1 e-acute", b"caf\xe9"),
    ] {
        let mut text =
            format!(r#"{{"type":"webauthn.get","challenge":"{ch}","origin":"{o}","note":""#)
                .into_bytes();
        text.extend_from_slice(bytes);
        text.extend_from_slice(b"\"}");
        out.ev(
            &format!("clientdata::invalid-utf8-{name}"),
            &format!(
                "clientDataJSON with {what} inside a member the verifier ignores, signed as is: \
                 not UTF-8, so not clientDataJSON"
            ),
            &["client-data-malformed", "client-data-utf8"],
            signed_over(text),
            deny("evidence_malformed"),
        );
    }
    // The origin itself with a byte that is not UTF-8.
    let mut text =
        format!(r#"{{"type":"webauthn.get","challenge":"{ch}","origin":"https://pay.example.com"#)
            .into_bytes();
    text.extend_from_slice(b"\xff\"}");
    out.ev(
        "clientdata::invalid-utf8-in-origin",
        "clientDataJSON whose origin ends in a 0xFF byte: malformed before any origin comparison",
        &["client-data-malformed", "client-data-utf8", "check-order"],
        signed_over(text),
        deny("evidence_malformed"),
    );
    // Origins compare as tuples: the https default port is 443, but http on port 443 is another
    // scheme.
    out.ev(
        "clientdata::origin-http-on-port-443",
        "origin http://pay.example.com:443, the policy's origin https://pay.example.com: the \
         scheme differs, whatever the port",
        &["origin", "policy-origin-tuple"],
        approve_with(A, |s| {
            s.request.ceremony.origin = "http://pay.example.com:443".into()
        }),
        deny("origin_mismatch"),
    );
}
