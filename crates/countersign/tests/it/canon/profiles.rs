//! Profiles as data: built-ins, pinning by digest, malformed definitions.

use super::hex32;
use countersign::{
    CanonError, FieldKind, MCP_TOOL_CALL_DEFINITION, PAYMENT_DEFINITION, Profile, ProfileError,
    ProfileRegistry, ReasonCode, TOOL_CALL_DEFINITION,
};
use sha2::{Digest, Sha256};
use std::path::PathBuf;

/// The built-in digests, as published in docs/spec/canon.md. Changing a built-in definition
/// changes every op_hash computed under it: it needs a new profile version instead.
const TOOL_CALL_DIGEST: &str = "39217c22c55fa94c8cb267018a6aa3c4c936c7c56d65760d9258c271596f66d0";
const PAYMENT_DIGEST: &str = "a9e63706ff5fac5c1f0ddf69f5ebcc75e70d8383d66724564dd08335604d74cb";

fn definition(id: &str, fields: &str) -> String {
    format!(r#"{{"id":"{id}","title":"T","fields":[{fields}]}}"#)
}

fn parse(def: &str) -> Result<Profile, ProfileError> {
    Profile::from_definition(def.as_bytes())
}

#[test]
fn builtin_constants_equal_the_fixture_files() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/profiles");
    for (file, builtin) in [
        ("countersign.tool-call.1.json", TOOL_CALL_DEFINITION),
        ("countersign.payment.1.json", PAYMENT_DEFINITION),
        ("countersign.mcp-tool-call.1.json", MCP_TOOL_CALL_DEFINITION),
    ] {
        let on_disk = std::fs::read_to_string(dir.join(file));
        assert_eq!(on_disk.as_deref().ok(), Some(builtin), "{file}");
    }
}

#[test]
fn builtin_profiles_are_pinned() {
    let r = ProfileRegistry::builtin();
    let tool = r.get("countersign.tool-call/1");
    let pay = r.get("countersign.payment/1");
    assert_eq!(
        tool.map(|p| hex32(&p.digest)).as_deref(),
        Some(TOOL_CALL_DIGEST)
    );
    assert_eq!(
        pay.map(|p| hex32(&p.digest)).as_deref(),
        Some(PAYMENT_DIGEST)
    );
    let names = |p: Option<&Profile>| -> Vec<(String, FieldKind, bool)> {
        p.map(|p| {
            p.fields
                .iter()
                .map(|f| (f.name.clone(), f.kind, f.exact))
                .collect()
        })
        .unwrap_or_default()
    };
    assert_eq!(
        names(tool),
        [
            ("agent_id".into(), FieldKind::String, true),
            ("tool_name".into(), FieldKind::String, true),
            ("params".into(), FieldKind::Object, false)
        ]
    );
    assert_eq!(
        names(pay),
        [
            ("amount".into(), FieldKind::Decimal, true),
            ("currency".into(), FieldKind::Currency, true),
            ("source_account".into(), FieldKind::Identifier, true),
            ("destination_account".into(), FieldKind::Identifier, true),
            ("reference".into(), FieldKind::String, true)
        ]
    );
    assert_eq!(tool.map(|p| (p.version, p.allow_floats)), Some((1, false)));
}

#[test]
fn digest_is_sha256_of_the_jcs_definition() {
    let p = parse(TOOL_CALL_DEFINITION);
    let value: serde_json::Value = serde_json::from_str(TOOL_CALL_DEFINITION).unwrap_or_default();
    let jcs = serde_json_canonicalizer::to_vec(&value).unwrap_or_default();
    assert_eq!(
        p.map(|p| p.digest).ok(),
        Some(<[u8; 32]>::from(Sha256::digest(jcs)))
    );
    // Layout and member order do not change it.
    let compact = definition("x.y/1", r#"{"name":"a","type":"string","label":"A"}"#);
    let spread = r#"{ "fields" : [ {"label":"A", "type":"string", "name":"a"} ], "title":"T", "id":"x.y/1" }"#;
    assert_eq!(
        parse(&compact).map(|p| p.digest),
        parse(spread).map(|p| p.digest)
    );
    // Content does.
    let other = definition("x.y/1", r#"{"name":"a","type":"string","label":"B"}"#);
    assert_ne!(
        parse(&compact).map(|p| p.digest),
        parse(&other).map(|p| p.digest)
    );
}

#[test]
fn unknown_profiles_never_fall_back() {
    let r = ProfileRegistry::builtin();
    assert!(r.get("countersign.payment/2").is_none());
    let e = r.resolve("countersign.payment/2").err();
    assert_eq!(
        e,
        Some(CanonError::UnknownProfile("countersign.payment/2".into()))
    );
    assert_eq!(e.map(|e| e.reason_code()), Some(ReasonCode::ProfileUnknown));
    assert!(
        ProfileRegistry::empty()
            .resolve("countersign.payment/1")
            .is_err()
    );
}

#[test]
fn insert_pinned_checks_the_digest() {
    let def = definition(
        "acme.wire/1",
        r#"{"name":"iban","type":"identifier","label":"IBAN"}"#,
    );
    let Ok(expected) = parse(&def).map(|p| p.digest) else {
        panic!("definition refused")
    };
    let mut r = ProfileRegistry::builtin();
    let mut wrong = expected;
    wrong[0] ^= 1;
    refused!(r.insert_pinned(def.as_bytes(), wrong), ProfileError::DigestMismatch { got, .. } if got == expected);
    assert!(r.get("acme.wire/1").is_none());
    assert_eq!(
        r.insert_pinned(def.as_bytes(), expected)
            .map(|p| p.id.clone())
            .ok(),
        Some("acme.wire/1".into())
    );
    // Idempotent for the same definition, even laid out differently.
    let relaid = def.replace(",", ", ");
    assert!(r.insert_pinned(relaid.as_bytes(), expected).is_ok());
    assert_eq!(r.iter().count(), 5, "four built-ins and acme.wire/1");
}

#[test]
fn insert_pinned_refuses_id_collisions() {
    let mut r = ProfileRegistry::builtin();
    let a = definition("acme.wire/1", r#"{"name":"a","type":"string","label":"A"}"#);
    let b = definition("acme.wire/1", r#"{"name":"b","type":"string","label":"B"}"#);
    let digest = |d: &str| parse(d).map(|p| p.digest).unwrap_or_default();
    assert!(r.insert_pinned(a.as_bytes(), digest(&a)).is_ok());
    refused!(r.insert_pinned(b.as_bytes(), digest(&b)), ProfileError::IdCollision { ref id } if id == "acme.wire/1");
    // A built-in id cannot be redefined either.
    let fake = definition(
        "countersign.payment/1",
        r#"{"name":"amount","type":"string","label":"Amount"}"#,
    );
    refused!(
        r.insert_pinned(fake.as_bytes(), digest(&fake)),
        ProfileError::IdCollision { .. }
    );
    assert_eq!(
        r.get("countersign.payment/1").map(|p| p.fields.len()),
        Some(5)
    );
}

#[test]
fn malformed_definitions_are_refused() {
    let f = r#"{"name":"a","type":"string","label":"A"}"#;
    refused!(
        parse(&definition("x/1", f).replace("\"A\"", "\"A\",\"exakt\":true")),
        ProfileError::Shape { .. }
    );
    refused!(
        parse(&definition("x/1", f).replace("\"string\"", "\"str\"")),
        ProfileError::Shape { .. }
    );
    refused!(
        parse(r#"{"id":"x/1","fields":[]}"#),
        ProfileError::Shape { .. }
    );
    refused!(
        parse(&definition("x/1", &format!("{f},{f}"))),
        ProfileError::DuplicateField { .. }
    );
    refused!(parse(&definition("x", f)), ProfileError::InvalidId { .. });
    refused!(parse(&definition("X/1", f)), ProfileError::InvalidId { .. });
    refused!(
        parse(&definition("x/01", f)),
        ProfileError::InvalidId { .. }
    );
    refused!(
        parse(&definition("x/1", "")),
        ProfileError::FieldCount { count: 0 }
    );
    refused!(
        parse(&definition(
            "x/1",
            r#"{"name":"n","type":"integer","label":"N","exact":true}"#
        )),
        ProfileError::ExactNotApplicable {
            kind: FieldKind::Integer,
            ..
        }
    );
    refused!(
        parse(&definition(
            "x/1",
            r#"{"name":"A","type":"string","label":"A"}"#
        )),
        ProfileError::InvalidFieldName { .. }
    );
    refused!(
        parse(&definition(
            "x/1",
            r#"{"name":"a","type":"string","label":""}"#
        )),
        ProfileError::InvalidLabel { .. }
    );
    refused!(
        parse(
            &definition("x/1", r#"{"name":"a","type":"string","label":"A\u202eB"}"#)
                .replace("\\u202e", "\n")
        ),
        ProfileError::Inadmissible(CanonError::UnescapedControl { .. })
    );
    refused!(
        parse(&definition(
            "x/1",
            r#"{"name":"a","type":"string","label":"A\u0007"}"#
        )),
        ProfileError::InvalidLabel { .. }
    );
    refused!(
        parse(&definition("x/1", f).replace("\"T\"", "\"\"")),
        ProfileError::InvalidTitle
    );
    // Strings must be NFC as written, so the digest does not depend on who normalizes.
    refused!(parse(&definition("x/1", r#"{"name":"a","type":"string","label":"Cafe\u0301"}"#)), ProfileError::NotNfc { ref path } if path == "/fields/0/label");
    // The definition goes through the same strict admission as action fields.
    refused!(
        parse(&definition("x/1", f).replace("\"title\":\"T\"", "\"title\":\"T\",\"title\":\"U\"")),
        ProfileError::Inadmissible(CanonError::DuplicateKey { .. })
    );
    refused!(
        parse("{}garbage"),
        ProfileError::Inadmissible(CanonError::TrailingData { .. })
    );
    let too_many = (0..65)
        .map(|i| format!(r#"{{"name":"f{i}","type":"string","label":"L"}}"#))
        .collect::<Vec<_>>()
        .join(",");
    refused!(
        parse(&definition("x/1", &too_many)),
        ProfileError::FieldCount { count: 65 }
    );
    assert!(parse(&definition("x/1", f)).is_ok());
}

#[test]
fn profile_errors_leave_the_profile_unknown() {
    let e = parse("{").err();
    assert_eq!(e.map(|e| e.reason_code()), Some(ReasonCode::ProfileUnknown));
}
