//! op_hash: the worked example, binding properties and the op-hash document.

use super::{hex32, payment, tool_call};
use countersign::{
    CanonError, Decision, MAX_DEPTH, MAX_FIELDS_BYTES, OpHash, Profile, ProfileRegistry,
    ReasonCode, admit_document, admit_fields, canonical_bytes, op_hash, op_hash_document,
};
use sha2::{Digest, Sha256};

fn hash(profile: &Profile, decision: Decision, raw: &str) -> OpHash {
    match admit_fields(profile, raw.as_bytes()) {
        Ok(f) => op_hash(profile, decision, &f),
        Err(e) => panic!("{raw}: {e}"),
    }
}

fn transfer(to: &str) -> String {
    format!(
        r#"{{"amount":"40000.00","currency":"EUR","source_account":"OPS-1","destination_account":"{to}","reference":"Q3 supplier"}}"#
    )
}

/// The seed's worked example, pinned: any change to admission, NFC or JCS that moves these bytes
/// breaks every approval already signed.
#[test]
fn worked_example_is_pinned() {
    let p = payment();
    let Ok(f) = admit_fields(&p, transfer("A").as_bytes()) else {
        panic!()
    };
    let bytes = canonical_bytes(&p, Decision::Approved, &f);
    assert_eq!(
        String::from_utf8_lossy(&bytes),
        r#"{"decision":"APPROVED","fields":{"amount":"40000.00","currency":"EUR","destination_account":"A","reference":"Q3 supplier","source_account":"OPS-1"},"profile":"countersign.payment/1"}"#
    );
    let h = op_hash(&p, Decision::Approved, &f);
    assert_eq!(h.0, <[u8; 32]>::from(Sha256::digest(&bytes)));
    // Cross-checked with `printf %s <bytes> | sha256sum`.
    assert_eq!(
        hex32(&h.0),
        "0464522cf64b2f6b2f34034c80877595bb1bf41424e77afa03cbbcde2953791e"
    );
}

#[test]
fn worked_example_binds_account_and_decision() {
    let p = payment();
    let a = hash(&p, Decision::Approved, &transfer("A"));
    let b = hash(&p, Decision::Approved, &transfer("B"));
    let a_denied = hash(&p, Decision::Denied, &transfer("A"));
    assert_ne!(a, b);
    assert_ne!(a, a_denied);
    assert_ne!(b, a_denied);
    // The amount is text: a different spelling is a different action.
    let other = transfer("A").replace("40000.00", "40000.0");
    assert_ne!(a, hash(&p, Decision::Approved, &other));
}

#[test]
fn the_profile_id_is_bound() {
    // Same fields under two profiles with the same field set: different op_hash.
    let def = |id: &str| {
        format!(
            r#"{{"id":"{id}","title":"T","fields":[{{"name":"a","type":"string","label":"A"}}]}}"#
        )
    };
    let (Ok(p1), Ok(p2)) = (
        Profile::from_definition(def("x.a/1").as_bytes()),
        Profile::from_definition(def("x.a/2").as_bytes()),
    ) else {
        panic!()
    };
    assert_ne!(
        hash(&p1, Decision::Approved, r#"{"a":"v"}"#),
        hash(&p2, Decision::Approved, r#"{"a":"v"}"#)
    );
}

#[test]
fn nfc_and_nfd_inputs_hash_the_same() {
    let p = tool_call();
    let nfc = "{\"agent_id\":\"a\",\"tool_name\":\"t\",\"params\":{\"caf\u{e9}\":\"\u{c5}ngstr\u{f6}m\"}}";
    let nfd = "{\"agent_id\":\"a\",\"tool_name\":\"t\",\"params\":{\"cafe\u{301}\":\"A\u{30a}ngstro\u{308}m\"}}";
    let escaped =
        r#"{"agent_id":"a","tool_name":"t","params":{"cafe\u0301":"\u212bngstro\u0308m"}}"#;
    let h = hash(&p, Decision::Approved, nfc);
    assert_eq!(h, hash(&p, Decision::Approved, nfd));
    assert_eq!(h, hash(&p, Decision::Approved, escaped));
}

#[test]
fn key_order_and_whitespace_do_not_matter() {
    let p = tool_call();
    let a = r#"{"agent_id":"a","tool_name":"t","params":{"x":1,"y":[2,{"p":1,"q":2}]}}"#;
    let b = "{ \"params\" : { \"y\" : [ 2 , { \"q\":2, \"p\":1 } ], \"x\" : 1 },\n\t\"tool_name\":\"t\", \"agent_id\":\"a\" }";
    assert_eq!(hash(&p, Decision::Denied, a), hash(&p, Decision::Denied, b));
    // Array order does.
    let c = a.replace("[2,{\"p\":1,\"q\":2}]", "[{\"p\":1,\"q\":2},2]");
    assert_ne!(
        hash(&p, Decision::Denied, a),
        hash(&p, Decision::Denied, &c)
    );
}

#[test]
fn keys_sort_by_utf16_code_units() {
    // UTF-8 byte order would put U+E000 first; JCS sorts by UTF-16, where U+1F600 starts with the
    // surrogate 0xD83D < 0xE000.
    let p = tool_call();
    let raw = r#"{"agent_id":"a","tool_name":"t","params":{"\ue000":1,"\ud83d\ude00":2,"z":3}}"#;
    let Ok(f) = admit_fields(&p, raw.as_bytes()) else {
        panic!()
    };
    let jcs = String::from_utf8_lossy(f.jcs()).into_owned();
    assert_eq!(
        jcs,
        "{\"agent_id\":\"a\",\"params\":{\"z\":3,\"\u{1F600}\":2,\"\u{E000}\":1},\"tool_name\":\"t\"}"
    );
}

#[test]
fn canonical_bytes_agree_with_an_independent_jcs() {
    let p = tool_call();
    let raw = r#"{"agent_id":"a","tool_name":"t","params":{"s":"\u0000\u001f\"\\/</script>","n":-9007199254740991,"e":"\ue000\ud83d\ude00"}}"#;
    let Ok(f) = admit_fields(&p, raw.as_bytes()) else {
        panic!()
    };
    for d in [Decision::Approved, Decision::Denied] {
        let doc =
            serde_json::json!({"profile": p.id, "decision": d.as_str(), "fields": f.as_value()});
        assert_eq!(
            canonical_bytes(&p, d, &f),
            serde_json_canonicalizer::to_vec(&doc).unwrap_or_default()
        );
    }
}

fn document(profile: &str, decision: &str, fields: &str) -> String {
    format!(r#"{{"profile":{profile},"decision":{decision},"fields":{fields}}}"#)
}

#[test]
fn op_hash_document_matches_the_library_path() {
    let r = ProfileRegistry::builtin();
    let p = payment();
    for (d, wire) in [
        (Decision::Approved, "\"APPROVED\""),
        (Decision::Denied, "\"DENIED\""),
    ] {
        let doc = document("\"countersign.payment/1\"", wire, &transfer("A"));
        assert_eq!(
            op_hash_document(&r, doc.as_bytes()),
            Ok(hash(&p, d, &transfer("A")))
        );
    }
    let doc = format!(
        "\n {}\n",
        document("\"countersign.payment/1\"", "\"DENIED\"", &transfer("B"))
    );
    let parts = admit_document(&r, doc.as_bytes());
    assert!(matches!(parts, Ok((p, Decision::Denied, _)) if p.id == "countersign.payment/1"));
}

#[test]
fn op_hash_document_is_strict() {
    let r = ProfileRegistry::builtin();
    let fields = transfer("A");
    let run = |doc: String| op_hash_document(&r, doc.as_bytes());
    let e = run(document(
        "\"countersign.payment/9\"",
        "\"APPROVED\"",
        &fields,
    ));
    assert_eq!(
        e.as_ref().err().map(|e| e.reason_code()),
        Some(ReasonCode::ProfileUnknown)
    );
    refused!(run(document("\"countersign.payment/1\"", "\"approved\"", &fields)), CanonError::InvalidDecision { ref got } if got == "approved");
    refused!(
        run(document("\"countersign.payment/1\"", "true", &fields)),
        CanonError::InvalidDecision { .. }
    );
    refused!(run(document("1", "\"APPROVED\"", &fields)), CanonError::Document { ref member, .. } if member == "profile");
    refused!(
        run(document("\"countersign.payment/1\"", "\"APPROVED\"", &fields).replace("{\"profile\"", "{\"extra\":0,\"profile\"")),
        CanonError::Document { ref member, .. } if member == "extra"
    );
    refused!(run(format!(r#"{{"profile":"countersign.payment/1","fields":{fields}}}"#)), CanonError::Document { ref member, .. } if member == "decision");
    refused!(run(r#"{"profile":"countersign.payment/1","decision":"DENIED"}"#.into()), CanonError::Document { ref member, .. } if member == "fields");
    refused!(
        run(document("\"countersign.payment/1\"", "\"APPROVED\"", &fields).replace("{\"profile\"", "{\"decision\":\"DENIED\",\"profile\"")),
        CanonError::DuplicateKey { ref key, .. } if key == "decision"
    );
    refused!(run("[]".into()), CanonError::Syntax { .. });
    refused!(
        run(document(
            "\"countersign.payment/1\"",
            "\"APPROVED\"",
            &transfer("A B")
        )),
        CanonError::FieldFormat { .. }
    );
    // Floats are checked against the resolved profile's policy, with the path in the document.
    let tool = r#"{"agent_id":"a","tool_name":"t","params":{"x":[0.5]}}"#;
    refused!(run(document("\"countersign.tool-call/1\"", "\"APPROVED\"", tool)), CanonError::FloatNotAllowed { ref path, .. } if path == "/fields/params/x/0");
}

#[test]
fn op_hash_document_holds_fields_to_the_same_caps() {
    let r = ProfileRegistry::builtin();
    let p = tool_call();
    let with_params =
        |params: &str| format!(r#"{{"agent_id":"a","tool_name":"t","params":{params}}}"#);
    // Depth: the fields object is level 1, so params may nest MAX_DEPTH - 1 levels in total.
    let nested = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    for n in [MAX_DEPTH - 2, MAX_DEPTH - 1] {
        let fields = with_params(&format!(r#"{{"x":{}}}"#, nested(n)));
        let direct =
            admit_fields(&p, fields.as_bytes()).map(|f| op_hash(&p, Decision::Approved, &f));
        let doc = op_hash_document(
            &r,
            document("\"countersign.tool-call/1\"", "\"APPROVED\"", &fields).as_bytes(),
        );
        assert_eq!(direct.is_ok(), n + 2 <= MAX_DEPTH, "depth {n}");
        assert_eq!(
            direct.is_ok(),
            doc.is_ok(),
            "depth {n}: {direct:?} vs {doc:?}"
        );
    }
    // Size: the fields text is capped at MAX_FIELDS_BYTES in both paths.
    let overhead = with_params(r#"{"x":""}"#).len();
    for len in [MAX_FIELDS_BYTES, MAX_FIELDS_BYTES + 1] {
        let fields = with_params(&format!(r#"{{"x":"{}"}}"#, "a".repeat(len - overhead)));
        assert_eq!(fields.len(), len);
        let direct = admit_fields(&p, fields.as_bytes());
        let doc = op_hash_document(
            &r,
            document("\"countersign.tool-call/1\"", "\"APPROVED\"", &fields).as_bytes(),
        );
        assert_eq!(direct.is_ok(), len <= MAX_FIELDS_BYTES);
        assert_eq!(direct.is_ok(), doc.is_ok(), "{len}");
        if len > MAX_FIELDS_BYTES {
            assert!(matches!(doc, Err(CanonError::TooLarge { .. })), "{doc:?}");
        }
    }
}
