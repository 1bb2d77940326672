//! op_hash vectors: `{"profile", "decision", "fields"}` in, op_hash or a refusal out.
//!
//! Expected hashes are computed here independently of the library's admission code: the
//! generator writes down the value the rules say is admitted, applies NFC itself, serializes with
//! `serde_json_canonicalizer` (another JCS implementation than the library's) and hashes.

use super::Out;
use base64::Engine as _;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use unicode_normalization::UnicodeNormalization as _;

const PAY: &str = "countersign.payment/1";
const TOOL: &str = "countersign.tool-call/1";
const MCP: &str = "countersign.mcp-tool-call/1";

/// What the rules say about one input.
enum Outcome {
    /// Admitted; the value is the fields as written (NFC is applied when hashing).
    Hash(Value),
    /// Refused with this reason code.
    Refused(&'static str),
}
use Outcome::{Hash, Refused};

const INADMISSIBLE: Outcome = Refused("action_inadmissible");

fn nfc(v: &Value) -> Value {
    match v {
        Value::String(s) => Value::String(s.nfc().collect()),
        Value::Array(a) => Value::Array(a.iter().map(nfc).collect()),
        Value::Object(o) => {
            let mut m = Map::new();
            for (k, v) in o {
                m.insert(k.nfc().collect(), nfc(v));
            }
            Value::Object(m)
        }
        other => other.clone(),
    }
}

/// SHA-256 of the JCS of the op-hash document, base64url.
pub(crate) fn expected_op_hash(profile: &str, decision: &str, fields: &Value) -> String {
    let doc = json!({"profile": profile, "decision": decision, "fields": nfc(fields)});
    let bytes = match serde_json_canonicalizer::to_vec(&doc) {
        Ok(b) => b,
        Err(e) => panic!("JCS of an expected value failed: {e}"),
    };
    countersign_softkey::b64url(&Sha256::digest(&bytes))
}

fn expected(profile: &str, decision: &str, outcome: &Outcome) -> Value {
    match outcome {
        Hash(fields) => json!({"op_hash": expected_op_hash(profile, decision, fields)}),
        Refused(reason) => json!({"error": reason}),
    }
}

fn pf(amount: Value, currency: Value, src: Value, dst: Value, reference: Value) -> Value {
    json!({"amount": amount, "currency": currency, "source_account": src,
           "destination_account": dst, "reference": reference})
}

fn payment(amount: &str) -> Value {
    pf(
        json!(amount),
        json!("EUR"),
        json!("ops-main"),
        json!("account-A"),
        json!("INV-2291"),
    )
}

fn tool(params: Value) -> Value {
    json!({"agent_id": "agent-7", "tool_name": "payments.transfer", "params": params})
}

/// The exact text of a tool call whose params are `params_text`.
fn tool_text(params_text: &str) -> String {
    format!(r#"{{"agent_id":"agent-7","tool_name":"payments.transfer","params":{params_text}}}"#)
}

fn doc_text(profile: &str, decision: &str, fields_text: &str) -> String {
    format!(r#"{{"profile":"{profile}","decision":"{decision}","fields":{fields_text}}}"#)
}

impl Out {
    /// An op_hash vector whose input is a JSON value.
    #[allow(clippy::too_many_arguments)] // one argument per column of the vector tables below
    fn oh(
        &mut self,
        id: &str,
        desc: &str,
        flags: &[&str],
        profile: &str,
        decision: &str,
        fields: Value,
        outcome: Outcome,
    ) {
        let input = json!({"profile": profile, "decision": decision, "fields": fields});
        let exp = expected(profile, decision, &outcome);
        self.op(id, desc, flags, crate::vectors::Input::Json(input), exp);
    }

    /// An op_hash vector whose fields are exact text.
    fn oh_text(
        &mut self,
        id: &str,
        desc: &str,
        flags: &[&str],
        profile: &str,
        fields_text: &str,
        outcome: Outcome,
    ) {
        let exp = expected(profile, "APPROVED", &outcome);
        let input = crate::vectors::Input::Text(doc_text(profile, "APPROVED", fields_text));
        self.op(id, desc, flags, input, exp);
    }

    /// An op_hash vector whose fields are bytes that are not UTF-8.
    fn oh_bytes(&mut self, id: &str, desc: &str, flags: &[&str], fields: &[u8]) {
        let mut doc =
            format!(r#"{{"profile":"{TOOL}","decision":"APPROVED","fields":"#).into_bytes();
        doc.extend_from_slice(fields);
        doc.push(b'}');
        let b64 = base64::engine::general_purpose::STANDARD.encode(&doc);
        self.op(
            id,
            desc,
            flags,
            crate::vectors::Input::Base64(b64),
            json!({"error": "action_inadmissible"}),
        );
    }
}

pub(crate) fn op_hash(out: &mut Out) {
    worked_and_fields(out);
    tool_calls(out);
    mcp_calls(out);
    lexical(out);
    unicode(out);
    caps_and_documents(out);
}

fn worked_and_fields(out: &mut Out) {
    for dst in ["account-A", "account-B"] {
        for decision in ["APPROVED", "DENIED"] {
            let f = pf(
                json!("40000.00"),
                json!("EUR"),
                json!("ops-main"),
                json!(dst),
                json!("INV-2291"),
            );
            out.oh(
                &format!(
                    "ophash::worked-{}-{}",
                    dst.to_lowercase(),
                    decision.to_lowercase()
                ),
                &format!("the worked example's payment to {dst}, {decision}"),
                &["worked-example"],
                PAY,
                decision,
                f.clone(),
                Hash(f),
            );
        }
    }
    let spec = pf(
        json!("40000.00"),
        json!("EUR"),
        json!("OPS-1"),
        json!("A"),
        json!("Q3 supplier"),
    );
    out.oh(
        "ophash::spec-worked-example",
        "docs/spec/canon.md's pinned example",
        &["worked-example"],
        PAY,
        "APPROVED",
        spec.clone(),
        Hash(spec),
    );

    let decimals: &[(&str, bool)] = &[
        ("40000", true),
        ("40000.0", true),
        ("0", true),
        ("0.00", true),
        ("-0.5", true),
        ("-12.345", true),
        ("-0", false),
        ("-0.00", false),
        ("01", false),
        ("1.", false),
        (".5", false),
        ("1e3", false),
        ("+1", false),
        (" 1", false),
        ("1,000", false),
        ("", false),
        ("NaN", false),
    ];
    for (i, &(amount, ok)) in decimals.iter().enumerate() {
        let f = payment(amount);
        out.oh(
            &format!("ophash::decimal-{i:02}"),
            &format!("amount {amount:?}"),
            &["profile-fields"],
            PAY,
            "APPROVED",
            f.clone(),
            if ok { Hash(f) } else { INADMISSIBLE },
        );
    }
    let long_ok = format!("1.{}", "0".repeat(62));
    let long_bad = format!("1.{}", "0".repeat(63));
    out.oh(
        "ophash::decimal-64-chars",
        "a 64-character decimal",
        &["profile-fields"],
        PAY,
        "APPROVED",
        payment(&long_ok),
        Hash(payment(&long_ok)),
    );
    out.oh(
        "ophash::decimal-65-chars",
        "a 65-character decimal",
        &["profile-fields"],
        PAY,
        "APPROVED",
        payment(&long_bad),
        INADMISSIBLE,
    );

    let base = |k: &str, v: Value| {
        let mut f = payment("40000.00");
        f[k] = v;
        f
    };
    let field_cases: Vec<(&str, &str, Value, bool)> = vec![
        ("amount-number", "amount", json!(40000), false),
        ("amount-null", "amount", Value::Null, false),
        ("currency-lowercase", "currency", json!("eur"), false),
        ("currency-four", "currency", json!("EURO"), false),
        ("currency-two", "currency", json!("EU"), false),
        ("currency-xts", "currency", json!("XTS"), true),
        ("currency-non-ascii", "currency", json!("\u{20ac}UR"), false),
        (
            "identifier-space",
            "destination_account",
            json!("account A"),
            false,
        ),
        ("identifier-empty", "destination_account", json!(""), false),
        (
            "identifier-256",
            "destination_account",
            json!("x".repeat(256)),
            true,
        ),
        (
            "identifier-257",
            "destination_account",
            json!("x".repeat(257)),
            false,
        ),
        (
            "identifier-non-ascii",
            "destination_account",
            json!("kont\u{f6}-1"),
            false,
        ),
        (
            "identifier-tab",
            "source_account",
            json!("ops\tmain"),
            false,
        ),
        (
            "identifier-punctuation",
            "source_account",
            json!("~!ops-main@{1}"),
            true,
        ),
        ("reference-empty", "reference", json!(""), true),
        ("reference-nfc", "reference", json!("Caf\u{e9}"), true),
        ("reference-nfd", "reference", json!("Cafe\u{301}"), false),
        ("reference-number", "reference", json!(2291), false),
        ("reference-object", "reference", json!({"id": 1}), false),
    ];
    for (name, key, value, ok) in field_cases {
        let f = base(key, value);
        let flags: &[&str] = if name.contains("nfd") || name.contains("nfc") {
            &["profile-fields", "canon-nfc"]
        } else {
            &["profile-fields"]
        };
        out.oh(
            &format!("ophash::payment-{name}"),
            &format!("payment field {key}: {name}"),
            flags,
            PAY,
            "APPROVED",
            f.clone(),
            if ok { Hash(f) } else { INADMISSIBLE },
        );
    }
    let mut missing = payment("40000.00");
    missing.as_object_mut().map(|o| o.remove("reference"));
    out.oh(
        "ophash::payment-missing-field",
        "reference missing",
        &["profile-fields"],
        PAY,
        "APPROVED",
        missing,
        INADMISSIBLE,
    );
    let mut extra = payment("40000.00");
    extra["memo"] = json!("hi");
    out.oh(
        "ophash::payment-extra-field",
        "an undeclared field",
        &["profile-fields"],
        PAY,
        "APPROVED",
        extra,
        INADMISSIBLE,
    );
    for (name, v) in [
        ("array", json!(["40000.00"])),
        ("string", json!("fields")),
        ("null", Value::Null),
        ("number", json!(1)),
    ] {
        out.oh(
            &format!("ophash::fields-{name}"),
            &format!("fields is a JSON {name}"),
            &["profile-fields"],
            PAY,
            "APPROVED",
            v,
            INADMISSIBLE,
        );
    }
}

/// The MCP interposer's profile: four fields, the arguments as the client sent them.
fn mcp_calls(out: &mut Out) {
    let fields = json!({"agent_id": "agent-7", "server_id": "filesystem",
        "tool_name": "write_file", "params": {"path": "/srv/a.txt", "content": "hi"}});
    out.oh(
        "ophash::mcp-basic",
        "an MCP tool call: agent, server, tool and arguments",
        &["mcp-tool-call"],
        MCP,
        "APPROVED",
        fields.clone(),
        Hash(fields.clone()),
    );
    out.oh_text(
        "ophash::mcp-arguments-as-sent",
        "the arguments' own text (member order, spacing) hashes as its value",
        &["mcp-tool-call"],
        MCP,
        r#"{"tool_name":"write_file","params":{ "content" : "hi", "path":"/srv/a.txt" },"server_id":"filesystem","agent_id":"agent-7"}"#,
        Hash(fields),
    );
    let mut no_server = json!({"agent_id": "agent-7", "tool_name": "write_file", "params": {}});
    out.oh(
        "ophash::mcp-missing-server",
        "an MCP tool call without server_id",
        &["mcp-tool-call", "action-inadmissible"],
        MCP,
        "APPROVED",
        no_server.clone(),
        INADMISSIBLE,
    );
    no_server["server_id"] = json!(7);
    out.oh(
        "ophash::mcp-server-not-a-string",
        "server_id is a number",
        &["mcp-tool-call", "action-inadmissible"],
        MCP,
        "APPROVED",
        no_server,
        INADMISSIBLE,
    );
}

fn tool_calls(out: &mut Out) {
    let t = |p: Value| tool(p);
    let ok: Vec<(&str, &str, Value, &[&str])> = vec![
        (
            "basic",
            "a plain tool call",
            t(json!({"to": "acct-9", "amount_cents": 125000})),
            &["tool-call"],
        ),
        ("empty-params", "params {}", t(json!({})), &["tool-call"]),
        (
            "nested",
            "nested arrays, booleans and null",
            t(json!({"a": [1, [true, false, null], {"b": []}], "c": {"d": {"e": "f"}}})),
            &["tool-call"],
        ),
        (
            "max-safe",
            "2^53-1",
            t(json!({"n": 9007199254740991i64})),
            &["canon-big-integer"],
        ),
        (
            "min-safe",
            "-(2^53-1)",
            t(json!({"n": -9007199254740991i64})),
            &["canon-big-integer"],
        ),
        (
            "params-nfd",
            "params with NFD text: hashed as NFC",
            t(json!({"memo": "Cafe\u{301} Zu\u{308}rich"})),
            &["canon-nfc"],
        ),
        (
            "params-nfc",
            "params with NFC text: the same op_hash as the NFD spelling",
            t(json!({"memo": "Caf\u{e9} Z\u{fc}rich"})),
            &["canon-nfc"],
        ),
        (
            "key-nfd",
            "an NFD key alone: hashed under its NFC form",
            t(json!({"e\u{301}": 1})),
            &["canon-nfc"],
        ),
        (
            "hangul-jamo",
            "conjoining jamo compose under NFC",
            t(json!({"k": "\u{1100}\u{1161}\u{11a8}"})),
            &["canon-nfc"],
        ),
        (
            "singleton-ohm",
            "U+2126 OHM SIGN normalizes to U+03A9",
            t(json!({"k": "\u{2126}"})),
            &["canon-nfc"],
        ),
        (
            "utf16-order",
            "keys U+E000 and U+1F600: JCS sorts by UTF-16 code units",
            t(json!({"\u{e000}": 1, "\u{1f600}": 2})),
            &["canon-utf16-order"],
        ),
        (
            "mixed-key-order",
            "keys a, B, e-acute, 10, 9 and the empty key",
            t(json!({"a": 1, "B": 2, "\u{e9}": 3, "10": 4, "9": 5, "": 6})),
            &["canon-utf16-order"],
        ),
        (
            "private-use",
            "U+E000 (private use) is assigned",
            t(json!({"k": "\u{e000}"})),
            &["canon-unassigned"],
        ),
        (
            "escaped-controls",
            "control characters, escaped",
            t(json!({"k": "\u{0}\u{8}\u{c}\n\r\t\u{1f}"})),
            &["canon-escape"],
        ),
        (
            "recent-emoji",
            "U+1FAE9, assigned in Unicode 16.0",
            t(json!({"k": "\u{1fae9}"})),
            &["canon-unassigned", "policy-unicode-18"],
        ),
    ];
    for (name, desc, f, flags) in ok {
        out.oh(
            &format!("ophash::tool-{name}"),
            desc,
            flags,
            TOOL,
            "APPROVED",
            f.clone(),
            Hash(f),
        );
    }
    let f = t(json!({"x": 1}));
    out.oh(
        "ophash::tool-denied",
        "a tool call refused",
        &["tool-call"],
        TOOL,
        "DENIED",
        f.clone(),
        Hash(f),
    );
    let bad: Vec<(&str, &str, Value, &[&str])> = vec![
        (
            "params-array",
            "params is an array",
            t(json!([1])),
            &["profile-fields"],
        ),
        (
            "params-null",
            "params is null",
            t(Value::Null),
            &["profile-fields"],
        ),
        (
            "agent-number",
            "agent_id is a number",
            json!({"agent_id": 7, "tool_name": "t", "params": {}}),
            &["profile-fields"],
        ),
        (
            "tool-missing",
            "tool_name missing",
            json!({"agent_id": "a", "params": {}}),
            &["profile-fields"],
        ),
        (
            "agent-nfd",
            "agent_id is exact and not NFC",
            json!({"agent_id": "age\u{301}nt", "tool_name": "t", "params": {}}),
            &["profile-fields", "canon-nfc"],
        ),
        (
            "nfc-key-collision",
            "keys e-acute and e + U+0301 collide under NFC",
            t(json!({"\u{e9}": 1, "e\u{301}": 2})),
            &["canon-nfc-collision"],
        ),
        (
            "nfc-key-collision-nested",
            "an NFC key collision inside an array",
            t(json!({"list": [{"\u{c5}": 1, "A\u{30a}": 2}]})),
            &["canon-nfc-collision"],
        ),
        (
            "nfc-key-collision-angstrom",
            "U+212B ANGSTROM SIGN and U+00C5 collide under NFC",
            t(json!({"\u{212b}": 1, "\u{c5}": 2})),
            &["canon-nfc-collision"],
        ),
        (
            "big-integer",
            "2^53",
            t(json!({"n": 9007199254740992i64})),
            &["canon-big-integer"],
        ),
        (
            "big-negative",
            "-(2^53)",
            t(json!({"n": -9007199254740992i64})),
            &["canon-big-integer"],
        ),
        (
            "u64-max",
            "2^64-1",
            t(json!({"n": u64::MAX})),
            &["canon-big-integer"],
        ),
        (
            "float",
            "1.5 (the built-in profiles refuse floats)",
            t(json!({"n": 1.5})),
            &["canon-float"],
        ),
        (
            "noncharacter-fdd0",
            "U+FDD0 is a noncharacter",
            t(json!({"k": "\u{fdd0}"})),
            &["canon-noncharacter"],
        ),
        (
            "noncharacter-fffe",
            "U+FFFE is a noncharacter",
            t(json!({"k": "\u{fffe}"})),
            &["canon-noncharacter"],
        ),
        (
            "noncharacter-10ffff",
            "U+10FFFF is a noncharacter",
            t(json!({"k": "\u{10ffff}"})),
            &["canon-noncharacter"],
        ),
        (
            "noncharacter-key",
            "U+1FFFF as a key",
            t(json!({"\u{1ffff}": 1})),
            &["canon-noncharacter"],
        ),
        (
            "unassigned-0378",
            "U+0378 is unassigned",
            t(json!({"k": "\u{378}"})),
            &["canon-unassigned"],
        ),
        (
            "unassigned-key",
            "U+0378 in a key",
            t(json!({"\u{378}": 1})),
            &["canon-unassigned"],
        ),
        (
            "unassigned-e0000",
            "U+E0000 is unassigned",
            t(json!({"k": "\u{e0000}"})),
            &["canon-unassigned"],
        ),
    ];
    for (name, desc, f, flags) in bad {
        out.oh(
            &format!("ophash::tool-{name}"),
            desc,
            flags,
            TOOL,
            "APPROVED",
            f,
            INADMISSIBLE,
        );
    }
}

fn lexical(out: &mut Out) {
    let t = |p: Value| tool(p);
    let ok: Vec<(&str, &str, String, Value, &[&str])> = vec![
        ("member-order", "members in another order", r#"{"params":{"b":2,"a":1},"tool_name":"payments.transfer","agent_id":"agent-7"}"#.into(), t(json!({"a": 1, "b": 2})), &["canon-key-order"]),
        ("whitespace", "all four whitespace characters between tokens", "{ \"agent_id\" :\t\"agent-7\" ,\r\n\"tool_name\":\"payments.transfer\" , \"params\" : { } }".into(), t(json!({})), &["canon-whitespace"]),
        ("escape-u00e9", "\\u00e9 is the same string as the literal", tool_text(r#"{"k":"caf\u00e9"}"#), t(json!({"k": "caf\u{e9}"})), &["canon-escape"]),
        ("escape-uppercase-hex", "\\u00E9 with upper-case hex", tool_text(r#"{"k":"caf\u00E9"}"#), t(json!({"k": "caf\u{e9}"})), &["canon-escape"]),
        ("escape-solidus", "\\/ is /", tool_text(r#"{"k":"a\/b"}"#), t(json!({"k": "a/b"})), &["canon-escape"]),
        ("escape-key", "an escaped key", tool_text(r#"{"\u006b":1}"#), t(json!({"k": 1})), &["canon-escape"]),
        ("escape-nfd", "NFD spelled with escapes", tool_text(r#"{"k":"e\u0301"}"#), t(json!({"k": "\u{e9}"})), &["canon-escape", "canon-nfc"]),
        ("surrogate-pair", "a surrogate pair escape is one code point", tool_text(r#"{"k":"\ud83d\ude00"}"#), t(json!({"k": "\u{1f600}"})), &["canon-surrogate", "canon-escape"]),
        ("surrogate-pair-upper", "a surrogate pair in upper-case hex", tool_text(r#"{"k":"\uD83D\uDE00"}"#), t(json!({"k": "\u{1f600}"})), &["canon-surrogate", "canon-escape"]),
        ("negative-zero", "-0 is the integer zero", tool_text(r#"{"n":-0}"#), t(json!({"n": 0})), &["canon-big-integer"]),
        ("max-safe-text", "9007199254740991 as text", tool_text(r#"{"n":9007199254740991}"#), t(json!({"n": 9007199254740991i64})), &["canon-big-integer"]),
        ("escaped-nul", "\\u0000 is admitted", tool_text(r#"{"k":"\u0000"}"#), t(json!({"k": "\u{0}"})), &["canon-escape"]),
    ];
    for (name, desc, text, f, flags) in ok {
        out.oh_text(
            &format!("ophash::text-{name}"),
            desc,
            flags,
            TOOL,
            &text,
            Hash(f),
        );
    }
    let bad: Vec<(&str, &str, String, &[&str])> = vec![
        (
            "duplicate-key",
            "params {\"a\":1,\"a\":2}",
            tool_text(r#"{"a":1,"a":2}"#),
            &["canon-duplicate-key"],
        ),
        (
            "duplicate-key-same-value",
            "the same key twice with the same value",
            tool_text(r#"{"a":1,"a":1}"#),
            &["canon-duplicate-key"],
        ),
        (
            "duplicate-key-escaped",
            "\"a\" and \"\\u0061\"",
            tool_text(r#"{"a":1,"\u0061":2}"#),
            &["canon-duplicate-key", "canon-escape"],
        ),
        (
            "duplicate-key-nested",
            "a duplicate inside an array's object",
            tool_text(r#"{"l":[{"x":1,"x":2}]}"#),
            &["canon-duplicate-key"],
        ),
        (
            "duplicate-top-level",
            "agent_id twice",
            r#"{"agent_id":"agent-7","agent_id":"agent-8","tool_name":"t","params":{}}"#.into(),
            &["canon-duplicate-key"],
        ),
        (
            "lone-high-surrogate",
            "\\ud800 alone",
            tool_text(r#"{"k":"\ud800"}"#),
            &["canon-surrogate"],
        ),
        (
            "lone-low-surrogate",
            "\\udc00 alone",
            tool_text(r#"{"k":"\udc00"}"#),
            &["canon-surrogate"],
        ),
        (
            "high-then-letter",
            "\\ud800 followed by \\u0041",
            tool_text(r#"{"k":"\ud800\u0041"}"#),
            &["canon-surrogate"],
        ),
        (
            "reversed-pair",
            "low then high surrogate",
            tool_text(r#"{"k":"\ude00\ud83d"}"#),
            &["canon-surrogate"],
        ),
        (
            "surrogate-in-key",
            "a lone surrogate in a key",
            tool_text(r#"{"\ud800":1}"#),
            &["canon-surrogate"],
        ),
        (
            "big-integer-text",
            "9007199254740993",
            tool_text(r#"{"n":9007199254740993}"#),
            &["canon-big-integer"],
        ),
        (
            "huge-integer",
            "a 40-digit integer",
            tool_text(r#"{"n":1234567890123456789012345678901234567890}"#),
            &["canon-big-integer"],
        ),
        (
            "float-integral",
            "1.0 is a float",
            tool_text(r#"{"n":1.0}"#),
            &["canon-float"],
        ),
        (
            "float-exponent",
            "1e2 is a float",
            tool_text(r#"{"n":1e2}"#),
            &["canon-float"],
        ),
        (
            "float-negative-zero",
            "-0.0 is a float",
            tool_text(r#"{"n":-0.0}"#),
            &["canon-float"],
        ),
        (
            "float-huge",
            "1e400",
            tool_text(r#"{"n":1e400}"#),
            &["canon-float"],
        ),
        ("nan", "NaN", tool_text(r#"{"n":NaN}"#), &["canon-syntax"]),
        (
            "infinity",
            "Infinity",
            tool_text(r#"{"n":Infinity}"#),
            &["canon-syntax"],
        ),
        (
            "leading-zero",
            "01",
            tool_text(r#"{"n":01}"#),
            &["canon-syntax"],
        ),
        (
            "leading-plus",
            "+1",
            tool_text(r#"{"n":+1}"#),
            &["canon-syntax"],
        ),
        (
            "invalid-escape",
            "\\x41",
            tool_text(r#"{"k":"\x41"}"#),
            &["canon-escape"],
        ),
        (
            "short-unicode-escape",
            "\\u12 with two digits",
            tool_text(r#"{"k":"\u12"}"#),
            &["canon-escape"],
        ),
        (
            "raw-control",
            "an unescaped U+0001",
            tool_text("{\"k\":\"a\u{1}b\"}"),
            &["canon-control-char"],
        ),
        (
            "raw-tab",
            "an unescaped tab inside a string",
            tool_text("{\"k\":\"a\tb\"}"),
            &["canon-control-char"],
        ),
        (
            "raw-newline",
            "an unescaped newline inside a string",
            tool_text("{\"k\":\"a\nb\"}"),
            &["canon-control-char"],
        ),
        (
            "trailing-comma",
            "a trailing comma",
            tool_text(r#"{"a":1,}"#),
            &["canon-syntax"],
        ),
        (
            "comment",
            "a comment",
            tool_text(r#"{"a":1/* c */}"#),
            &["canon-syntax"],
        ),
        (
            "single-quotes",
            "single-quoted strings",
            tool_text(r#"{'a':1}"#),
            &["canon-syntax"],
        ),
        (
            "bare-key",
            "an unquoted key",
            tool_text(r#"{a:1}"#),
            &["canon-syntax"],
        ),
        (
            "vertical-tab",
            "U+000B between tokens",
            tool_text("{\"a\":\u{b}1}"),
            &["canon-syntax", "canon-whitespace"],
        ),
        (
            "nbsp",
            "U+00A0 between tokens",
            tool_text("{\"a\":\u{a0}1}"),
            &["canon-syntax", "canon-whitespace"],
        ),
        (
            "bom",
            "a byte order mark before the fields",
            format!("\u{feff}{}", tool_text("{}")),
            &["canon-syntax"],
        ),
    ];
    for (name, desc, text, flags) in bad {
        out.oh_text(
            &format!("ophash::text-{name}"),
            desc,
            flags,
            TOOL,
            &text,
            INADMISSIBLE,
        );
    }
}

fn unicode(out: &mut Out) {
    // Byte-level traps: the fields are not valid UTF-8.
    let cases: &[(&str, &str, &[u8])] = &[
        ("overlong-slash", "an overlong encoding of '/'", b"\xc0\xaf"),
        ("bare-continuation", "a lone continuation byte", b"\x80"),
        (
            "encoded-surrogate",
            "a UTF-8-encoded surrogate (CESU)",
            b"\xed\xa0\x80",
        ),
        ("truncated", "a sequence cut short", b"\xe2\x82"),
        ("latin1", "Latin-1 e-acute", b"caf\xe9"),
        (
            "beyond-10ffff",
            "a code point above U+10FFFF",
            b"\xf4\x90\x80\x80",
        ),
    ];
    for (name, desc, bytes) in cases {
        let mut fields =
            br#"{"agent_id":"agent-7","tool_name":"payments.transfer","params":{"k":""#.to_vec();
        fields.extend_from_slice(bytes);
        fields.extend_from_slice(br#""}}"#);
        out.oh_bytes(
            &format!("ophash::utf8-{name}"),
            desc,
            &["canon-utf8"],
            &fields,
        );
    }
}

fn nest(depth: usize, open: &str, close: &str, inner: &str) -> String {
    format!("{}{inner}{}", open.repeat(depth), close.repeat(depth))
}

fn caps_and_documents(out: &mut Out) {
    // Depth: the fields object is level 1, params level 2; 32 containers in all are allowed.
    let obj = |n: usize| nest(n, r#"{"d":"#, "}", "{}");
    let arr = |n: usize| nest(n, "[", "]", "[]");
    let mut deep_ok = json!({});
    for _ in 0..30 {
        deep_ok = json!({"d": deep_ok});
    }
    out.oh_text(
        "ophash::depth-32-objects",
        "fields nested 32 containers deep (the cap)",
        &["canon-depth"],
        TOOL,
        &tool_text(&obj(30)),
        Hash(tool(deep_ok)),
    );
    out.oh_text(
        "ophash::depth-33-objects",
        "fields nested 33 containers deep",
        &["canon-depth"],
        TOOL,
        &tool_text(&obj(31)),
        INADMISSIBLE,
    );
    let mut deep_arr = json!([]);
    for _ in 0..29 {
        deep_arr = json!([deep_arr]);
    }
    out.oh_text(
        "ophash::depth-32-arrays",
        "arrays nested to the cap",
        &["canon-depth"],
        TOOL,
        &tool_text(&format!(r#"{{"a":{}}}"#, arr(29))),
        Hash(tool(json!({"a": deep_arr}))),
    );
    out.oh_text(
        "ophash::depth-33-arrays",
        "arrays nested one past the cap",
        &["canon-depth"],
        TOOL,
        &tool_text(&format!(r#"{{"a":{}}}"#, arr(30))),
        INADMISSIBLE,
    );

    // Size: the fields text at most 65,536 bytes, whitespace included.
    let body = tool_text(r#"{"pad":""}"#);
    let pad = 65_536 - body.len();
    let at_cap = tool_text(&format!(r#"{{"pad":"{}"}}"#, "x".repeat(pad)));
    let over = tool_text(&format!(r#"{{"pad":"{}"}}"#, "x".repeat(pad + 1)));
    out.oh_text(
        "ophash::size-65536",
        "fields of exactly 65,536 bytes",
        &["canon-size"],
        TOOL,
        &at_cap,
        Hash(tool(json!({"pad": "x".repeat(pad)}))),
    );
    out.oh_text(
        "ophash::size-65537",
        "fields of 65,537 bytes",
        &["canon-size"],
        TOOL,
        &over,
        INADMISSIBLE,
    );
    // Whitespace inside the fields value counts (whitespace around it belongs to the document).
    let small = tool_text("{}");
    let spaced = format!("{} }}", &small[..small.len() - 1])
        .replace(" }", &format!("{}}}", " ".repeat(65_537 - small.len())));
    out.oh_text(
        "ophash::size-whitespace",
        "small fields padded with whitespace past 65,536 bytes",
        &["canon-size", "canon-whitespace"],
        TOOL,
        &spaced,
        INADMISSIBLE,
    );

    // The op-hash document itself.
    let f = tool(json!({}));
    let docs: Vec<(&str, &str, String, Outcome)> = vec![
        (
            "profile-unknown",
            "an unregistered profile",
            doc_text("countersign.payment/2", "APPROVED", &tool_text("{}")),
            Refused("profile_unknown"),
        ),
        (
            "profile-empty",
            "profile \"\"",
            doc_text("", "APPROVED", &tool_text("{}")),
            Refused("profile_unknown"),
        ),
        (
            "decision-lowercase",
            "decision \"approved\"",
            doc_text(TOOL, "approved", &tool_text("{}")),
            INADMISSIBLE,
        ),
        (
            "decision-pending",
            "decision \"PENDING\"",
            doc_text(TOOL, "PENDING", &tool_text("{}")),
            INADMISSIBLE,
        ),
        (
            "decision-number",
            "decision 1",
            format!(
                r#"{{"profile":"{TOOL}","decision":1,"fields":{}}}"#,
                tool_text("{}")
            ),
            INADMISSIBLE,
        ),
        (
            "missing-fields",
            "no fields member",
            format!(r#"{{"profile":"{TOOL}","decision":"APPROVED"}}"#),
            INADMISSIBLE,
        ),
        (
            "extra-member",
            "an extra member",
            format!(
                r#"{{"profile":"{TOOL}","decision":"APPROVED","fields":{},"note":1}}"#,
                tool_text("{}")
            ),
            INADMISSIBLE,
        ),
        (
            "duplicate-decision",
            "decision twice",
            format!(
                r#"{{"profile":"{TOOL}","decision":"DENIED","decision":"APPROVED","fields":{}}}"#,
                tool_text("{}")
            ),
            INADMISSIBLE,
        ),
        (
            "member-order",
            "members in another order",
            format!(
                r#"{{"fields":{},"decision":"APPROVED","profile":"{TOOL}"}}"#,
                tool_text("{}")
            ),
            Hash(f.clone()),
        ),
        (
            "trailing-data",
            "a second value after the document",
            format!("{} {{}}", doc_text(TOOL, "APPROVED", &tool_text("{}"))),
            INADMISSIBLE,
        ),
    ];
    for (name, desc, text, outcome) in docs {
        let flags: &[&str] = match name {
            n if n.starts_with("profile") => &["profile-unknown"],
            n if n.starts_with("decision") || n == "duplicate-decision" => &["decision-invalid"],
            "member-order" => &["canon-key-order"],
            _ => &["document"],
        };
        let exp = expected(TOOL, "APPROVED", &outcome);
        out.op(
            &format!("ophash::document-{name}"),
            desc,
            flags,
            crate::vectors::Input::Text(text),
            exp,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn independent_computation_matches_the_spec_pin() {
        let spec = pf(
            json!("40000.00"),
            json!("EUR"),
            json!("OPS-1"),
            json!("A"),
            json!("Q3 supplier"),
        );
        let b64 = expected_op_hash(PAY, "APPROVED", &spec);
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(b64)
            .unwrap_or_default();
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            "0464522cf64b2f6b2f34034c80877595bb1bf41424e77afa03cbbcde2953791e"
        );
    }

    #[test]
    fn nfc_changes_nfd_and_leaves_nfc_alone() {
        assert_eq!(
            nfc(&json!({"e\u{301}": "A\u{30a}"})),
            json!({"\u{e9}": "\u{c5}"})
        );
        assert_eq!(nfc(&json!("abc")), json!("abc"));
    }
}
