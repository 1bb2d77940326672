//! Seed inputs for every target, cut out of the conformance vectors (`vectors/evidence.json` and
//! `vectors/op_hash.json`, compiled in). `cargo run -p countersign-fuzz --bin seed -- DIR` writes
//! them as AFL corpora; `tests/replay.rs` replays them directly.

use crate::fixtures::{EVIDENCE_VECTORS, evidence_cases};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde_json::{Value, json};
use std::collections::BTreeSet;

const OP_HASH_VECTORS: &str = include_str!("../../vectors/op_hash.json");

/// The distinct seeds of `target` (empty for an unknown target).
pub fn seeds(target: &str) -> Vec<Vec<u8>> {
    let cases: Vec<Value> = evidence_cases(EVIDENCE_VECTORS)
        .into_iter()
        .filter_map(|(_, bytes)| serde_json::from_slice(&bytes).ok())
        .collect();
    let entries: Vec<&Value> = cases
        .iter()
        .filter_map(|c| c["result"]["approver_evidence"].as_array())
        .flatten()
        .collect();
    let member = |name: &str| -> Vec<Vec<u8>> {
        entries
            .iter()
            .filter_map(|e| e[name].as_str())
            .filter_map(|text| URL_SAFE_NO_PAD.decode(text).ok())
            .collect()
    };
    let json = |v: &Value| serde_json::to_vec(v).unwrap_or_default();
    let set: BTreeSet<Vec<u8>> = match target {
        "canon" => op_hash_inputs()
            .into_iter()
            .chain(op_hash_fields())
            .chain(cases.iter().map(|c| json(&c["action"]["fields"])))
            .collect(),
        "cbor" | "cose" => {
            let keys = cases
                .iter()
                .filter_map(|c| c["registry"]["credentials"].as_array())
                .flatten()
                .filter_map(|c| c["public_key"].as_str())
                .filter_map(|k| URL_SAFE_NO_PAD.decode(k).ok());
            // authenticatorData tails after the 37-byte head: attested data and extensions.
            let tails = member("authenticator_data")
                .into_iter()
                .filter_map(|a| a.get(37..).map(<[u8]>::to_vec))
                .filter(|t| !t.is_empty());
            keys.chain(tails).collect()
        }
        "der" => member("signature")
            .into_iter()
            .filter(|s| s.first() == Some(&0x30))
            .collect(),
        "auth_data" => member("authenticator_data").into_iter().collect(),
        "client_data" => member("client_data_json").into_iter().collect(),
        "envelope" => cases.iter().map(|c| json(&c["result"])).collect(),
        "case" => evidence_cases(EVIDENCE_VECTORS)
            .into_iter()
            .map(|(_, bytes)| bytes)
            .collect(),
        "harness" => harness_lines(),
        "service" => service_bodies(&cases, &entries),
        "mcp_relay" => mcp_client_frames(),
        _ => BTreeSet::new(),
    };
    set.into_iter().collect()
}

/// The op-hash documents, in whichever spelling each vector carries.
fn op_hash_inputs() -> Vec<Vec<u8>> {
    op_hash_vectors()
        .iter()
        .filter_map(|v| {
            if let Some(text) = v["input_text"].as_str() {
                Some(text.as_bytes().to_vec())
            } else if let Some(b64) = v["input_base64"].as_str() {
                STANDARD.decode(b64).ok()
            } else {
                serde_json::to_vec(&v["input"]).ok()
            }
        })
        .collect()
}

/// The `fields` objects of the op-hash documents, alone (what `admit_fields` reads).
fn op_hash_fields() -> Vec<Vec<u8>> {
    op_hash_vectors()
        .iter()
        .filter(|v| v["input"]["fields"].is_object())
        .filter_map(|v| serde_json::to_vec(&v["input"]["fields"]).ok())
        .collect()
}

fn op_hash_vectors() -> Vec<Value> {
    serde_json::from_str::<Value>(OP_HASH_VECTORS)
        .ok()
        .and_then(|d| d["vectors"].as_array().cloned())
        .unwrap_or_default()
}

/// Request lines as the conformance runner sends them, for both kinds.
fn harness_lines() -> BTreeSet<Vec<u8>> {
    let evidence: Vec<Value> = serde_json::from_str::<Value>(EVIDENCE_VECTORS)
        .ok()
        .and_then(|d| d["vectors"].as_array().cloned())
        .unwrap_or_default();
    let line = |kind: &str, v: &Value| {
        let mut request = json!({"id": v["id"], "kind": kind});
        for input in ["input", "input_text", "input_base64"] {
            if !v[input].is_null() {
                request[input] = v[input].clone();
            }
        }
        request.to_string().into_bytes()
    };
    evidence
        .iter()
        .map(|v| line("evidence", v))
        .chain(op_hash_vectors().iter().map(|v| line("op_hash", v)))
        .collect()
}

/// Route byte + body, for every route of `crate::service::ROUTES`.
fn service_bodies(cases: &[Value], entries: &[&Value]) -> BTreeSet<Vec<u8>> {
    let with_route = |route: u8, body: Value| {
        let mut out = vec![route];
        out.extend(body.to_string().into_bytes());
        out
    };
    let mut out = BTreeSet::new();
    for case in cases {
        let action = &case["action"];
        let fields = &action["fields"];
        let body = match action["profile"].as_str() {
            Some("countersign.tool-call/1") => json!({
                "agent_id": fields["agent_id"], "tool_name": fields["tool_name"],
                "params": fields["params"]}),
            Some("countersign.mcp-tool-call/1") => json!({
                "agent_id": fields["agent_id"], "tool_name": fields["tool_name"],
                "server_id": fields["server_id"], "params": fields["params"],
                "profile": "countersign.mcp-tool-call/1"}),
            Some(profile) => json!({
                "agent_id": "agent-7", "tool_name": "payments.transfer", "params": fields,
                "profile": profile, "severity": "high"}),
            None => continue,
        };
        out.insert(with_route(0, body));
    }
    for entry in entries {
        out.insert(with_route(
            1,
            json!({"fingerprint": entry["op_hash"], "tool_name": "read_file"}),
        ));
        out.insert(with_route(
            3,
            json!({"credential_id": entry["credential_id"],
                "client_data_json": entry["client_data_json"],
                "authenticator_data": entry["authenticator_data"],
                "signature": entry["signature"]}),
        ));
    }
    out.insert(with_route(
        2,
        json!({"agent_id": "agent-7", "tool_name": "vendor.*",
            "constraints": [{"kind": "max", "arg": "/amount", "max": "100.00"},
                {"kind": "currency", "arg": "/currency", "allowed": ["EUR"]},
                {"kind": "one_of", "arg": "/to", "values": ["a", "b"]},
                {"kind": "path", "arg": "/path", "under": "/srv"}],
            "max_uses": 3, "expires_at": "2100-01-01T00:00:00Z", "severity": "high"}),
    ));
    out.insert(with_route(4, json!({"invite": "inv_0123456789abcdef"})));
    out.insert(with_route(
        5,
        json!({"invite": "inv_0123456789abcdef", "credential": {
            "id": "AAEC", "rawId": "AAEC", "type": "public-key", "extensions": {},
            "response": {"attestationObject": "o2NmbXRkbm9uZQ", "clientDataJSON": "e30"}}}),
    ));
    out
}

/// What an MCP client writes: the allowed and the held tool called plainly, as a notification,
/// in a batch, with odd members, and two frames on one line; none gets a held call executed.
fn mcp_client_frames() -> BTreeSet<Vec<u8>> {
    let call = |id: &str, tool: &str, extra: &str| {
        format!(
            r#"{{"jsonrpc":"2.0",{id}"method":"tools/call","params":{{"name":"{tool}","arguments":{{"path":"/tmp/a"}}{extra}}}}}"#
        )
    };
    let allowed = call(r#""id":1,"#, "read_file", "");
    let held = call(r#""id":2,"#, "write_file", "");
    let ping = r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#;
    [
        format!("{allowed}\n"),
        format!("{held}\n"),
        format!("{ping}\n{allowed}\n{held}\r\n"),
        format!("{}\n", call("", "write_file", "")),
        format!("[{allowed},{held}]\n"),
        format!(
            "{}\n",
            call(
                r#""id":4,"#,
                "read_file",
                r#","_meta":{"progressToken":"t"}"#
            )
        ),
        format!("{allowed}\r{ping}\n"),
        format!(
            "{}\n",
            call(r#""id":"x","#, "read_file", r#","Name":"read_file""#)
        ),
    ]
    .into_iter()
    .map(String::into_bytes)
    .collect()
}
