//! Evidence vectors for the WebAuthn layer: algorithms and signature encodings, authenticator
//! flags and the assurance level they yield, clientDataJSON, the RP id and the counter.

use super::Out;
use super::case::*;
use countersign::Decision::{Approved, Denied};
use countersign_softkey::{CHROME_EXTRA_KEY, Flags, Part, SignatureQuirk};
use serde_json::{Value, json};

const ALGS: &[(&str, &str)] = &[
    ("es256", "alg-es256"),
    ("eddsa", "alg-eddsa"),
    ("rs256", "alg-rs256"),
    ("es384", "alg-es384"),
];

pub(crate) fn algorithms(out: &mut Out) {
    for &(alg, flag) in ALGS {
        let alice = format!("alice-{alg}");
        let bob = format!("bob-{alg}");
        let a = alice.as_str();
        out.ev(
            &format!("alg::{alg}-approve"),
            &format!("{alg}: a valid approval of the worked example's payment"),
            &[flag],
            approve(a),
            allow("AAL2"),
        );
        out.ev(
            &format!("alg::{alg}-refuse"),
            &format!("{alg}: a valid refusal is a DENY with the approver's assurance"),
            &[flag, "refusal"],
            refuse(a),
            deny_as("DENIED", "approver_refused", "AAL2"),
        );
        let action = tool(json!({"to": "acct-9", "amount_cents": 125000, "memo": "Q3"}));
        let entry = good(a, &action, Approved);
        out.ev(
            &format!("alg::{alg}-tool-call"),
            &format!("{alg}: a valid approval of a tool call"),
            &[flag, "tool-call"],
            Case::new(action, "APPROVED", vec![entry], &[a]),
            allow("AAL2"),
        );
        out.ev(
            &format!("alg::{alg}-signature-bit-flip"),
            &format!("{alg}: one bit of the signature flipped after signing"),
            &[flag, "signature-tamper"],
            approve_tampered(a, |r| {
                let bit = (r.signature.len() - 2) * 8 + 7;
                must(r.flip_bit(Part::Signature, bit));
            }),
            deny("signature_invalid"),
        );
        out.ev(
            &format!("alg::{alg}-authdata-counter-bit-flip"),
            &format!("{alg}: the signed counter changed after signing (1 -> 0)"),
            &[flag, "authdata-tamper"],
            approve_tampered(a, |r| must(r.flip_bit(Part::AuthenticatorData, 36 * 8 + 7))),
            deny("signature_invalid"),
        );
        out.ev(
            &format!("alg::{alg}-clientdata-whitespace"),
            &format!("{alg}: clientDataJSON re-spaced after signing (same members, other bytes)"),
            &[flag, "clientdata-tamper"],
            approve_tampered(a, |r| {
                let text = String::from_utf8_lossy(&r.client_data_json).replacen(',', ", ", 1);
                r.client_data_json = text.into_bytes();
            }),
            deny("signature_invalid"),
        );
        let alice_id = key(a).credential_id().to_vec();
        let action = pay(ACCOUNT_A);
        let entry = signed_with(
            &bob,
            &action,
            Approved,
            |_| {},
            |r| r.credential_id = alice_id,
        );
        out.ev(
            &format!("alg::{alg}-wrong-key"),
            &format!(
                "{alg}: signed by another key of the same algorithm under alice's credential id"
            ),
            &[flag, "wrong-key"],
            Case::new(action, "APPROVED", vec![entry], &[a]),
            deny("signature_invalid"),
        );
        out.ev(
            &format!("alg::{alg}-counter-zero"),
            &format!(
                "{alg}: counter 0 with 0 stored (an authenticator without a counter) is legal"
            ),
            &[flag, "counter-zero"],
            approve_with(a, |s| s.request.ceremony.sign_count = 0),
            allow("AAL2"),
        );
        let mut c = approve_with(a, |s| s.request.ceremony.flags = Flags::from_byte(0x01));
        c.policy["require_user_verification"] = json!(false);
        out.ev(
            &format!("alg::{alg}-up-only"),
            &format!("{alg}: user presence only, UV not required: AAL1"),
            &[
                flag,
                "flags-up",
                "flags-uv",
                "policy-uv-optional",
                "assurance-level",
            ],
            c,
            allow("AAL1"),
        );
    }

    // An enrolled key whose algorithm this verifier does not implement.
    for (decision, status, expected) in [
        (Approved, "APPROVED", deny("unsupported_algorithm")),
        (
            Denied,
            "DENIED",
            deny_as("DENIED", "unsupported_algorithm", "declared"),
        ),
    ] {
        let action = pay(ACCOUNT_A);
        let id = b"conformance es512 credential".to_vec();
        let entry = signed_with(
            "alice-es256",
            &action,
            decision,
            |_| {},
            |r| r.credential_id = id.clone(),
        );
        let mut c = Case::new(action, status, vec![entry], &[]);
        c.extra_credentials.push(json!({
            "credential_id": b64(&id),
            "principal": "alice",
            "public_key": b64(&es512_cose_key()),
        }));
        out.ev(
            &format!("alg::es512-enrolled-{}", status.to_lowercase()),
            "the registry holds an ES512 (P-521) key: the algorithm is not implemented",
            &["alg-unsupported"],
            c,
            expected,
        );
    }

    // ECDSA encodings: high S is a valid signature; non-canonical DER is refused under strict DER.
    for (alg, flag) in [("es256", "alg-es256"), ("es384", "alg-es384")] {
        let a = format!("alice-{alg}");
        out.ev(
            &format!("alg::{alg}-high-s"),
            &format!("{alg}: the other valid signature (n - s), canonical DER"),
            &[flag, "policy-ecdsa-high-s"],
            approve_with(&a, |s| {
                s.request.ceremony.signature_quirk = SignatureQuirk::EcdsaNegateS
            }),
            allow("AAL2"),
        );
        for (quirk, name, what) in [
            (SignatureQuirk::EcdsaRaw, "raw-r-s", "r || s without DER"),
            (
                SignatureQuirk::DerExtraLeadingZero,
                "extra-leading-zero",
                "a superfluous 0x00 before r",
            ),
            (
                SignatureQuirk::DerMissingPad,
                "missing-pad",
                "r or s without its 0x00 pad (reads negative)",
            ),
            (
                SignatureQuirk::DerLongFormLength,
                "long-form-length",
                "the SEQUENCE length in long form",
            ),
        ] {
            out.ev(
                &format!("alg::{alg}-der-{name}"),
                &format!("{alg}: a correct signature encoded as {what}: strict DER refuses it"),
                &[flag, "policy-der-strict"],
                der_quirk(&a, quirk),
                deny("evidence_malformed"),
            );
        }
    }
    out.ev(
        "alg::eddsa-signature-63-bytes",
        "eddsa: a signature one byte short",
        &["alg-eddsa", "signature-encoding"],
        approve_tampered("alice-eddsa", |r| {
            r.signature.pop();
        }),
        deny("evidence_malformed"),
    );
    out.ev(
        "alg::es256-signature-empty",
        "es256: an empty signature",
        &["alg-es256", "signature-encoding"],
        approve_tampered("alice-es256", |r| r.signature.clear()),
        deny("evidence_malformed"),
    );
}

/// An approval whose signature carries `quirk`; nonces are tried in turn until the quirk applies
/// (a missing pad needs r or s with its top bit set).
fn der_quirk(name: &str, quirk: SignatureQuirk) -> Case {
    for attempt in 0..64 {
        let action = pay(ACCOUNT_A);
        let mut signing = Signing::new(Approved, &format!("{name}/der/{attempt}"));
        signing.request.ceremony.signature_quirk = quirk;
        signing.request.ceremony.challenge =
            countersign_testkit::challenge(&signing.nonce, &action, Approved);
        if let Ok(response) = key(name).assert(&signing.request) {
            let entry = entry_value(&countersign_testkit::entry(&response, &action, &signing));
            return Case::new(action, "APPROVED", vec![entry], &[name]);
        }
    }
    panic!("quirk {quirk:?} never applied for {name}")
}

fn must<E: std::fmt::Debug>(r: Result<(), E>) {
    if let Err(e) = r {
        panic!("tamper failed: {e:?}")
    }
}

fn with_flags(byte: u8) -> impl FnOnce(&mut Signing) {
    move |s| s.request.ceremony.flags = Flags::from_byte(byte)
}

const UP: u8 = 0x01;
const UV: u8 = 0x04;
const BE: u8 = 0x08;
const BS: u8 = 0x10;

pub(crate) fn flags(out: &mut Out) {
    let a = "alice-es256";
    out.ev(
        "flags::up-clear",
        "UP clear (UV set): no human presence",
        &["flags-up"],
        approve_with(a, with_flags(UV)),
        deny("user_not_present"),
    );
    out.ev(
        "flags::up-uv-clear",
        "UP and UV clear: presence is checked first",
        &["flags-up", "check-order"],
        approve_with(a, with_flags(0)),
        deny("user_not_present"),
    );
    let mut c = approve_with(a, with_flags(0));
    c.policy["require_user_verification"] = json!(false);
    out.ev(
        "flags::up-clear-uv-optional",
        "UP clear with UV not required: presence is always required",
        &["flags-up", "policy-uv-optional"],
        c,
        deny("user_not_present"),
    );
    out.ev(
        "flags::uv-clear-required",
        "UV clear while the policy requires user verification",
        &["flags-uv"],
        approve_with(a, with_flags(UP)),
        deny("user_not_verified"),
    );
    let mut c = approve_with(a, with_flags(UP));
    c.policy
        .as_object_mut()
        .map(|p| p.remove("require_user_verification"));
    out.ev(
        "flags::uv-clear-default-policy",
        "UV clear, require_user_verification absent: the default requires it",
        &["flags-uv"],
        c,
        deny("user_not_verified"),
    );

    // BE/BS combinations against what enrollment recorded, with and without a verified chain.
    // (flags, enrolled BE, attested, expected)
    let table: &[(u8, Option<bool>, bool, &str, Value)] = &[
        (UP | UV, None, false, "be0-bs0", allow("AAL2")),
        (UP | UV, None, true, "be0-bs0-attested", allow("AAL3")),
        (UP | UV | BE, None, false, "be1-bs0", allow("AAL2")),
        (UP | UV | BE, None, true, "be1-bs0-attested", allow("AAL2")),
        (UP | UV | BE | BS, None, false, "be1-bs1", allow("AAL2")),
        (
            UP | UV | BE | BS,
            None,
            true,
            "be1-bs1-attested",
            allow("AAL2"),
        ),
        (
            UP | UV | BS,
            None,
            false,
            "be0-bs1",
            deny("evidence_malformed"),
        ),
        (
            UP | UV | BS,
            None,
            true,
            "be0-bs1-attested",
            deny("evidence_malformed"),
        ),
        (
            UP | UV,
            Some(false),
            false,
            "be0-enrolled-be0",
            allow("AAL2"),
        ),
        (
            UP | UV,
            Some(false),
            true,
            "be0-enrolled-be0-attested",
            allow("AAL3"),
        ),
        (
            UP | UV | BE,
            Some(false),
            false,
            "be1-enrolled-be0",
            deny("backup_eligibility_mismatch"),
        ),
        (
            UP | UV | BE | BS,
            Some(false),
            true,
            "be1-bs1-enrolled-be0",
            deny("backup_eligibility_mismatch"),
        ),
        (
            UP | UV,
            Some(true),
            false,
            "be0-enrolled-be1",
            deny("backup_eligibility_mismatch"),
        ),
        (
            UP | UV,
            Some(true),
            true,
            "be0-enrolled-be1-attested",
            deny("backup_eligibility_mismatch"),
        ),
        (
            UP | UV | BE,
            Some(true),
            false,
            "be1-bs0-enrolled-be1",
            allow("AAL2"),
        ),
        (
            UP | UV | BE | BS,
            Some(true),
            true,
            "be1-bs1-enrolled-be1-attested",
            allow("AAL2"),
        ),
        (
            UP | BE | BS,
            Some(true),
            true,
            "uv0-be1-bs1-enrolled-be1",
            allow("AAL1"),
        ),
        (
            UP,
            Some(false),
            true,
            "uv0-be0-enrolled-be0-attested",
            allow("AAL1"),
        ),
    ];
    for (byte, enrolled, attest, name, expected) in table {
        let mut c = approve_with(a, with_flags(*byte));
        c.record(a).backup_eligible = *enrolled;
        if *attest {
            attested(c.record(a));
        }
        let mut flags = vec!["flags-be-bs", "assurance-level"];
        if *attest {
            flags.push("attestation");
        }
        if byte & UV == 0 {
            c.policy["require_user_verification"] = json!(false);
            flags.push("policy-uv-optional");
        }
        if *enrolled == Some(*byte & BE != 0) || enrolled.is_none() {
            // consistent with enrollment (or nothing recorded)
        } else {
            flags.push("backup-eligibility");
        }
        out.ev(
            &format!("flags::{name}"),
            &format!(
                "flags {byte:#04x}, enrolled backup_eligible {enrolled:?}, attestation {}",
                if *attest { "verified" } else { "none" }
            ),
            &flags,
            c,
            expected.clone(),
        );
    }

    // Attestation and the AAGUID allow-list.
    let fixture = countersign::Aaguid(countersign_softkey::FIXTURE_AAGUID).to_string();
    let mut c = approve(a);
    attested(c.record(a));
    c.policy["aal3_aaguids"] = json!([fixture]);
    out.ev(
        "assurance::aal3-aaguid-listed",
        "device-bound, chain verified, AAGUID on the policy's AAL3 list",
        &["assurance-level", "attestation", "aal3-aaguid"],
        c,
        allow("AAL3"),
    );
    let mut c = approve(a);
    attested(c.record(a));
    c.policy["aal3_aaguids"] = json!(["00000000-0000-0000-0000-000000000001"]);
    out.ev(
        "assurance::aal3-aaguid-not-listed",
        "device-bound, chain verified, AAGUID not on the AAL3 list: AAL2",
        &["assurance-level", "attestation", "aal3-aaguid"],
        c,
        allow("AAL2"),
    );
    let mut c = approve(a);
    attested(c.record(a));
    c.record(a).aaguid = None;
    c.policy["aal3_aaguids"] = json!([fixture]);
    out.ev(
        "assurance::aal3-list-record-without-aaguid",
        "an AAL3 list and a record without an AAGUID: AAL2",
        &["assurance-level", "attestation", "aal3-aaguid"],
        c,
        allow("AAL2"),
    );
    let mut c = approve(a);
    attested(c.record(a));
    if let Some(att) = c.record(a).attestation.as_mut() {
        att.chain_verified = false;
    }
    out.ev(
        "assurance::attestation-unverified",
        "packed attestation whose chain was not verified at enrollment: AAL2",
        &["assurance-level", "attestation"],
        c,
        allow("AAL2"),
    );
    let mut c = approve(a);
    c.record(a).attestation = Some(countersign::AttestationRecord {
        format: "none".into(),
        chain_verified: false,
        root: None,
    });
    out.ev(
        "assurance::attestation-none",
        "`none` attestation at enrollment: AAL2",
        &["assurance-level", "attestation"],
        c,
        allow("AAL2"),
    );

    // min_assurance.
    let mut c = approve(a);
    attested(c.record(a));
    c.policy["min_assurance"] = json!("AAL3");
    out.ev(
        "assurance::min-aal3-met",
        "min_assurance AAL3 met by a device-bound attested key",
        &["min-assurance", "attestation"],
        c,
        allow("AAL3"),
    );
    let mut c = approve(a);
    c.policy["min_assurance"] = json!("AAL3");
    out.ev(
        "assurance::min-aal3-unattested",
        "min_assurance AAL3, unattested key (AAL2)",
        &["min-assurance"],
        c,
        deny_as("APPROVED", "insufficient_assurance", "AAL2"),
    );
    let mut c = approve_with(a, with_flags(UP | UV | BE | BS));
    attested(c.record(a));
    c.policy["min_assurance"] = json!("AAL3");
    out.ev(
        "assurance::min-aal3-synced",
        "min_assurance AAL3, synced passkey with a verified chain (AAL2)",
        &["min-assurance", "flags-be-bs", "attestation"],
        c,
        deny_as("APPROVED", "insufficient_assurance", "AAL2"),
    );
    let mut c = approve_with(a, with_flags(UP));
    c.policy["min_assurance"] = json!("AAL2");
    c.policy["require_user_verification"] = json!(false);
    out.ev(
        "assurance::min-aal2-up-only",
        "min_assurance AAL2, presence only (AAL1)",
        &["min-assurance", "policy-uv-optional"],
        c,
        deny_as("APPROVED", "insufficient_assurance", "AAL1"),
    );
    let mut c = approve_with(a, with_flags(UP));
    c.policy["min_assurance"] = json!("AAL1");
    c.policy["require_user_verification"] = json!(false);
    out.ev(
        "assurance::min-aal1-up-only",
        "min_assurance AAL1 met by presence only",
        &["min-assurance", "policy-uv-optional"],
        c,
        allow("AAL1"),
    );
    let mut c = approve_with(a, with_flags(UP | UV | BE | BS));
    c.policy["min_assurance"] = json!("AAL2");
    out.ev(
        "assurance::min-aal2-synced",
        "min_assurance AAL2 met by a synced passkey",
        &["min-assurance", "flags-be-bs"],
        c,
        allow("AAL2"),
    );

    // AT and ED: legal on an assertion when well formed, malformed when the flag lies.
    out.ev(
        "flags::at-with-attested-data",
        "AT set with attested credential data in the assertion (some platform authenticators)",
        &["flags-at-ed"],
        approve_with(a, with_flags(UP | UV | 0x40)),
        allow("AAL2"),
    );
    let ext = countersign_softkey::cbor::Value::Map(vec![(
        countersign_softkey::cbor::Value::text("credProtect"),
        countersign_softkey::cbor::Value::Int(2),
    )])
    .encode();
    out.ev(
        "flags::ed-with-extensions",
        "ED set with a CBOR extensions map",
        &["flags-at-ed"],
        approve_with(a, |s| {
            s.request.ceremony.flags = Flags::from_byte(UP | UV | 0x80);
            s.request.ceremony.extensions = Some(ext);
        }),
        allow("AAL2"),
    );
    out.ev(
        "flags::at-set-no-data",
        "AT set after signing, no attested credential data follows",
        &["flags-at-ed", "authdata-malformed"],
        approve_tampered(a, |r| r.authenticator_data[32] |= 0x40),
        deny("evidence_malformed"),
    );
    out.ev(
        "flags::ed-set-no-extensions",
        "ED set after signing, no extensions map follows",
        &["flags-at-ed", "authdata-malformed"],
        approve_tampered(a, |r| r.authenticator_data[32] |= 0x80),
        deny("evidence_malformed"),
    );
    out.ev(
        "flags::authdata-trailing-byte",
        "a byte appended to authenticator data",
        &["authdata-malformed"],
        approve_tampered(a, |r| r.authenticator_data.push(0)),
        deny("evidence_malformed"),
    );
    out.ev(
        "flags::authdata-truncated",
        "authenticator data cut to 36 bytes",
        &["authdata-malformed"],
        approve_tampered(a, |r| r.authenticator_data.truncate(36)),
        deny("evidence_malformed"),
    );
}

pub(crate) fn client_data(out: &mut Out) {
    let a = "alice-es256";
    let action = pay(ACCOUNT_A);
    let challenge =
        countersign_testkit::challenge(&countersign_testkit::nonce("cd"), &action, Approved);
    let ch = b64(&challenge);
    let with_cd = |text: String| {
        move |s: &mut Signing| {
            s.nonce = countersign_testkit::nonce("cd");
            s.request.ceremony.client_data_override = Some(text.into_bytes());
        }
    };

    out.ev(
        "clientdata::type-create",
        "type webauthn.create (a registration's client data)",
        &["client-data-type"],
        approve_with(a, |s| {
            s.request.ceremony.client_data_type = "webauthn.create".into()
        }),
        deny("evidence_malformed"),
    );
    out.ev(
        "clientdata::type-payment-get",
        "type payment.get",
        &["client-data-type"],
        approve_with(a, |s| {
            s.request.ceremony.client_data_type = "payment.get".into()
        }),
        deny("evidence_malformed"),
    );
    for (name, origin, expected, extra) in [
        (
            "other-site",
            "https://evil.example.com",
            deny("origin_mismatch"),
            None,
        ),
        (
            "http-scheme",
            "http://pay.example.com",
            deny("origin_mismatch"),
            None,
        ),
        (
            "suffix-attack",
            "https://pay.example.com.evil.com",
            deny("origin_mismatch"),
            None,
        ),
        (
            "parent-domain",
            "https://example.com",
            deny("origin_mismatch"),
            None,
        ),
        (
            "other-port",
            "https://pay.example.com:8443",
            deny("origin_mismatch"),
            None,
        ),
        (
            "trailing-slash",
            "https://pay.example.com/",
            deny("origin_mismatch"),
            None,
        ),
        (
            "with-path",
            "https://pay.example.com/approve",
            deny("origin_mismatch"),
            None,
        ),
        ("null", "null", deny("origin_mismatch"), None),
        (
            "default-port",
            "https://pay.example.com:443",
            allow("AAL2"),
            Some("policy-origin-tuple"),
        ),
        (
            "upper-case-host",
            "https://PAY.EXAMPLE.COM",
            allow("AAL2"),
            Some("policy-origin-tuple"),
        ),
    ] {
        let mut flags = vec!["origin"];
        flags.extend(extra);
        out.ev(
            &format!("clientdata::origin-{name}"),
            &format!("origin {origin:?}, policy allows https://pay.example.com"),
            &flags,
            approve_with(a, |s| s.request.ceremony.origin = origin.into()),
            expected,
        );
    }

    // crossOrigin and topOrigin.
    let top = "https://shop.example.net";
    let cross = |top_origin: Option<&str>| {
        let top_origin = top_origin.map(str::to_owned);
        move |s: &mut Signing| {
            s.request.ceremony.cross_origin = Some(true);
            s.request.ceremony.top_origin = top_origin;
        }
    };
    out.ev(
        "clientdata::cross-origin-not-allowed",
        "crossOrigin true, the policy does not allow cross-origin",
        &["cross-origin"],
        approve_with(a, cross(None)),
        deny("origin_mismatch"),
    );
    let mut c = approve_with(a, cross(None));
    c.policy["allow_cross_origin"] = json!(true);
    out.ev(
        "clientdata::cross-origin-allowed",
        "crossOrigin true, allowed by the policy, no topOrigin",
        &["cross-origin"],
        c,
        allow("AAL2"),
    );
    let mut c = approve_with(a, cross(Some(top)));
    c.policy["allow_cross_origin"] = json!(true);
    c.policy["top_origins"] = json!([top]);
    out.ev(
        "clientdata::top-origin-allowed",
        "crossOrigin true with an allowed topOrigin",
        &["cross-origin", "top-origin"],
        c,
        allow("AAL2"),
    );
    let mut c = approve_with(a, cross(Some("https://evil.example.com")));
    c.policy["allow_cross_origin"] = json!(true);
    c.policy["top_origins"] = json!([top]);
    out.ev(
        "clientdata::top-origin-not-allowed",
        "crossOrigin true with a topOrigin the policy does not list",
        &["cross-origin", "top-origin"],
        c,
        deny("origin_mismatch"),
    );
    out.ev(
        "clientdata::top-origin-cross-origin-not-allowed",
        "crossOrigin true with a topOrigin, cross-origin not allowed",
        &["cross-origin", "top-origin"],
        approve_with(a, cross(Some(top))),
        deny("origin_mismatch"),
    );
    let mut c = approve_with(a, |s| s.request.ceremony.top_origin = Some(top.into()));
    c.policy["allow_cross_origin"] = json!(true);
    c.policy["top_origins"] = json!([top]);
    out.ev(
        "clientdata::top-origin-without-cross-origin",
        "topOrigin present with crossOrigin false: inconsistent client data",
        &["top-origin", "client-data-malformed"],
        c,
        deny("evidence_malformed"),
    );
    out.ev(
        "clientdata::cross-origin-absent",
        "no crossOrigin member (older clients)",
        &["client-data-shape"],
        approve_with(a, |s| s.request.ceremony.cross_origin = None),
        allow("AAL2"),
    );
    out.ev(
        "clientdata::extra-keys",
        "Chrome's extra key appended to clientDataJSON",
        &["client-data-shape"],
        approve_with(a, |s| {
            s.request.ceremony.extra_client_data =
                vec![(CHROME_EXTRA_KEY.0.to_owned(), json!(CHROME_EXTRA_KEY.1))]
        }),
        allow("AAL2"),
    );

    // Hand-written clientDataJSON.
    let o = "https://pay.example.com";
    for (name, text, expected, flags) in [
        (
            "member-order",
            format!(r#"{{"origin":"{o}","challenge":"{ch}","type":"webauthn.get"}}"#),
            allow("AAL2"),
            &["client-data-shape"][..],
        ),
        (
            "legacy-members",
            format!(
                r#"{{"challenge":"{ch}","clientExtensions":{{}},"hashAlgorithm":"SHA-256","origin":"{o}","type":"webauthn.get"}}"#
            ),
            allow("AAL2"),
            &["client-data-shape"][..],
        ),
        (
            "not-json",
            "webauthn.get".to_owned(),
            deny("evidence_malformed"),
            &["client-data-malformed"][..],
        ),
        (
            "missing-origin",
            format!(r#"{{"type":"webauthn.get","challenge":"{ch}"}}"#),
            deny("evidence_malformed"),
            &["client-data-malformed"][..],
        ),
        (
            "duplicate-challenge",
            format!(
                r#"{{"type":"webauthn.get","challenge":"{ch}","challenge":"{ch}","origin":"{o}"}}"#
            ),
            deny("evidence_malformed"),
            &["client-data-malformed"][..],
        ),
        (
            "duplicate-origin",
            format!(
                r#"{{"type":"webauthn.get","challenge":"{ch}","origin":"https://evil.example.com","origin":"{o}"}}"#
            ),
            deny("evidence_malformed"),
            &["client-data-malformed"][..],
        ),
        (
            "challenge-padded",
            format!(r#"{{"type":"webauthn.get","challenge":"{ch}==","origin":"{o}"}}"#),
            deny("evidence_malformed"),
            &["challenge"][..],
        ),
        (
            "challenge-not-string",
            format!(r#"{{"type":"webauthn.get","challenge":64,"origin":"{o}"}}"#),
            deny("evidence_malformed"),
            &["challenge"][..],
        ),
        (
            "cross-origin-string",
            format!(
                r#"{{"type":"webauthn.get","challenge":"{ch}","origin":"{o}","crossOrigin":"false"}}"#
            ),
            deny("evidence_malformed"),
            &["client-data-malformed", "cross-origin"][..],
        ),
        (
            "cross-origin-null",
            format!(
                r#"{{"type":"webauthn.get","challenge":"{ch}","origin":"{o}","crossOrigin":null}}"#
            ),
            deny("evidence_malformed"),
            &["client-data-malformed"][..],
        ),
        (
            "top-origin-null",
            format!(
                r#"{{"type":"webauthn.get","challenge":"{ch}","origin":"{o}","crossOrigin":false,"topOrigin":null}}"#
            ),
            deny("evidence_malformed"),
            &["client-data-malformed"][..],
        ),
        (
            "ignored-member-escaped-non-ascii",
            format!(
                r#"{{"type":"webauthn.get","challenge":"{ch}","origin":"{o}","other":"\u00ff"}}"#
            ),
            allow("AAL2"),
            &["client-data-shape"][..],
        ),
    ] {
        out.ev(
            &format!("clientdata::{name}"),
            &format!("clientDataJSON: {name}"),
            flags,
            approve_with(a, with_cd(text)),
            expected,
        );
    }

    // Invalid UTF-8 inside a member the verifier ignores: still not clientDataJSON.
    let mut bytes =
        format!(r#"{{"type":"webauthn.get","challenge":"{ch}","origin":"{o}","other":""#)
            .into_bytes();
    bytes.extend_from_slice(b"\xff\"}");
    out.ev(
        "clientdata::invalid-utf8-in-ignored-member",
        "clientDataJSON with a 0xFF byte inside a member the verifier ignores, signed as is",
        &["client-data-malformed", "client-data-utf8"],
        approve_with(a, |s| {
            s.nonce = countersign_testkit::nonce("cd");
            s.request.ceremony.client_data_override = Some(bytes);
        }),
        deny("evidence_malformed"),
    );

    // The challenge's length.
    for (name, len) in [
        ("63", 63usize),
        ("65", 65),
        ("96", 96),
        ("32", 32),
        ("empty", 0),
    ] {
        let mut bytes = challenge.clone();
        bytes.resize(len, 0x5a);
        out.ev(
            &format!("clientdata::challenge-length-{name}"),
            &format!("a signed challenge of {len} bytes instead of nonce(32) || op_hash(32)"),
            &["challenge", "binding-challenge"],
            approve_with(a, |s| {
                s.nonce = countersign_testkit::nonce("cd");
                s.keep_challenge = true;
                s.request.ceremony.challenge = bytes;
            }),
            deny("binding_mismatch"),
        );
    }

    // RP id.
    for (name, rp) in [
        ("other", "evil.example.com"),
        ("parent", "example.com"),
        ("case", "PAY.example.com"),
    ] {
        out.ev(
            &format!("rp::{name}"),
            &format!("rpIdHash of {rp:?}, the policy's RP id is pay.example.com"),
            &["rp-id"],
            approve_with(a, |s| s.request.ceremony.rp_id = rp.into()),
            deny("rp_mismatch"),
        );
    }
    let mut c = approve(a);
    c.policy["rp_id"] = json!("bank.example.com");
    out.ev(
        "rp::policy-other",
        "signed for pay.example.com, the verifier's RP id is bank.example.com",
        &["rp-id"],
        c,
        deny("rp_mismatch"),
    );
}

pub(crate) fn counter(out: &mut Out) {
    let a = "alice-es256";
    for (name, stored, got, expected, flag) in [
        (
            "equal",
            5u32,
            5u32,
            deny("counter_regression"),
            "counter-regression",
        ),
        (
            "lower",
            5,
            4,
            deny("counter_regression"),
            "counter-regression",
        ),
        (
            "zero-after-nonzero",
            5,
            0,
            deny("counter_regression"),
            "counter-regression",
        ),
        (
            "max-equal",
            u32::MAX,
            u32::MAX,
            deny("counter_regression"),
            "counter-regression",
        ),
        ("higher", 5, 6, allow("AAL2"), "counter"),
        ("jump", 5, 1_000_000, allow("AAL2"), "counter"),
        ("max-from-zero", 0, u32::MAX, allow("AAL2"), "counter"),
        ("zero-zero", 0, 0, allow("AAL2"), "counter-zero"),
    ] {
        let mut c = approve_with(a, |s| s.request.ceremony.sign_count = got);
        c.record(a).sign_count = stored;
        out.ev(
            &format!("counter::{name}"),
            &format!("signature counter {got}, registry holds {stored}"),
            &[flag],
            c,
            expected,
        );
    }
}
