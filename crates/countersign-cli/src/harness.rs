//! `countersign harness`: the conformance harness protocol (`conformance/HARNESS.md`,
//! `countersign-harness/1`) for this CLI.
//!
//! One hello line, then one JSON request per stdin line and one JSON response per stdout line,
//! until stdin closes. Each request is answered with the same library calls `verify` and
//! `op-hash` make, so the runner checks the CLI's own paths.

use anyhow::Context as _;
use base64::Engine as _;
use countersign::webauthn::SignatureBackend;
use countersign::{Case, CaseError, MemoryReplayState, ProfileRegistry};
use serde_json::{Value, json};
use std::io::{BufRead as _, Write as _};

/// The protocol version this harness speaks.
pub(crate) const PROTOCOL: &str = "countersign-harness/1";

/// Serve the protocol on stdin/stdout with `backend`.
pub(crate) fn serve(backend: &dyn SignatureBackend) -> anyhow::Result<u8> {
    let stdin = std::io::stdin().lock();
    let mut stdout = std::io::stdout().lock();
    let hello = json!({
        "protocol": PROTOCOL,
        "implementation": format!("countersign {} ({})", env!("CARGO_PKG_VERSION"), backend.name()),
        "kinds": ["evidence", "op_hash"],
        "unsupported_flags": {},
    });
    writeln!(stdout, "{hello}").context("writing the hello line")?;
    stdout.flush().context("writing the hello line")?;
    for line in stdin.lines() {
        let line = line.context("reading a request")?;
        if line.trim().is_empty() {
            continue;
        }
        let response = answer(&line, backend);
        writeln!(stdout, "{response}").context("writing a response")?;
        stdout.flush().context("writing a response")?;
    }
    Ok(0)
}

/// The response line for one request line. Never fails: problems become `{"id", "error"}`.
/// (Crate-visible for the fuzz crate, which compiles this file to fuzz it.)
pub(crate) fn answer(line: &str, backend: &dyn SignatureBackend) -> Value {
    let request: Value = match serde_json::from_str(line) {
        Ok(v) => v,
        Err(e) => return json!({"id": null, "error": format!("request is not JSON: {e}")}),
    };
    let id = request.get("id").cloned().unwrap_or(Value::Null);
    let bytes = match input_bytes(&request) {
        Ok(b) => b,
        Err(e) => return json!({"id": id, "error": format!("{e:#}")}),
    };
    match request.get("kind").and_then(Value::as_str) {
        Some("evidence") => match evidence(&bytes, backend) {
            Ok(verdict) => json!({"id": id, "verdict": verdict}),
            Err(e) => json!({"id": id, "error": e}),
        },
        Some("op_hash") => json!({"id": id, "verdict": op_hash(&bytes)}),
        other => json!({"id": id, "unsupported": format!("kind {other:?} is not implemented")}),
    }
}

/// The exact input bytes: `input` (any serialization), `input_text` or `input_base64`.
fn input_bytes(request: &Value) -> anyhow::Result<Vec<u8>> {
    if let Some(v) = request.get("input") {
        return Ok(serde_json::to_vec(v)?);
    }
    if let Some(t) = request.get("input_text").and_then(Value::as_str) {
        return Ok(t.as_bytes().to_vec());
    }
    if let Some(b) = request.get("input_base64").and_then(Value::as_str) {
        return base64::engine::general_purpose::STANDARD
            .decode(b)
            .context("input_base64 is not base64");
    }
    anyhow::bail!("request has no input, input_text or input_base64")
}

fn evidence(bytes: &[u8], backend: &dyn SignatureBackend) -> Result<Value, String> {
    let case = match Case::from_json(bytes) {
        Ok(case) => case,
        // An unusable result envelope is answered as a DENY (`verify` exits 2 for it).
        Err(CaseError::Result(e)) => {
            return Ok(json!({
                "effective": "DENY",
                "decision": null,
                "reason_code": "result_malformed",
                "identity_assurance": {"level": "declared", "source": "declared"},
                "detail": e.to_string(),
            }));
        }
        // Any other unusable CASE (`verify` exits 2) gets no verdict: name the member at fault
        // (conformance/HARNESS.md §3).
        Err(e) => {
            return Ok(json!({"unusable_case": e.member(), "detail": e.to_string()}));
        }
    };
    let verdict = case.verify_with(backend, &mut MemoryReplayState::new());
    serde_json::to_value(&verdict).map_err(|e| format!("verdict does not serialize: {e}"))
}

fn op_hash(bytes: &[u8]) -> Value {
    match countersign::op_hash_document(&ProfileRegistry::builtin(), bytes) {
        Ok(h) => json!({"op_hash": countersign::b64::encode(&h.0)}),
        Err(e) => json!({"error": e.reason_code().as_str(), "detail": e.to_string()}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn backend() -> &'static dyn SignatureBackend {
        countersign::webauthn::default_backend()
    }

    #[test]
    fn op_hash_requests_in_all_three_spellings() {
        let doc = r#"{"profile":"countersign.tool-call/1","decision":"APPROVED","fields":{"agent_id":"a","tool_name":"t","params":{}}}"#;
        let value: Value = serde_json::from_str(doc).unwrap_or_default();
        let b64 = base64::engine::general_purpose::STANDARD.encode(doc);
        let answers: Vec<Value> = [
            json!({"id": "1", "kind": "op_hash", "input": value}),
            json!({"id": "1", "kind": "op_hash", "input_text": doc}),
            json!({"id": "1", "kind": "op_hash", "input_base64": b64}),
        ]
        .iter()
        .map(|r| answer(&r.to_string(), backend()))
        .collect();
        assert!(
            answers[0]["verdict"]["op_hash"].is_string(),
            "{}",
            answers[0]
        );
        assert_eq!(answers[0], answers[1]);
        assert_eq!(answers[1], answers[2]);
    }

    #[test]
    fn refusals_errors_and_unknown_kinds() {
        let dup = r#"{"profile":"countersign.tool-call/1","decision":"APPROVED","fields":{"agent_id":"a","agent_id":"b","tool_name":"t","params":{}}}"#;
        let a = answer(
            &json!({"id": "d", "kind": "op_hash", "input_text": dup}).to_string(),
            backend(),
        );
        assert_eq!(a["verdict"]["error"], "action_inadmissible");
        let a = answer(
            &json!({"id": "x", "kind": "mystery", "input": {}}).to_string(),
            backend(),
        );
        assert!(a["unsupported"].is_string());
        let a = answer(
            &json!({"id": "y", "kind": "op_hash"}).to_string(),
            backend(),
        );
        assert!(a["error"].is_string());
        let a = answer("not json", backend());
        assert!(a["error"].is_string());
    }

    #[test]
    fn unusable_results_are_result_malformed() {
        let case = json!({"action": {"profile": "countersign.tool-call/1", "fields": {}},
            "result": "MAYBE", "registry": {"credentials": []},
            "policy": {"rp_id": "x", "origins": []}, "now": "2026-01-01T00:00:00Z"});
        let a = answer(
            &json!({"id": "u", "kind": "evidence", "input": case}).to_string(),
            backend(),
        );
        assert_eq!(a["verdict"]["reason_code"], "result_malformed");
        assert_eq!(a["verdict"]["decision"], Value::Null);
        let mut bad = case.clone();
        bad["result"] = json!("APPROVED");
        bad["now"] = json!("yesterday");
        let a = answer(
            &json!({"id": "v", "kind": "evidence", "input": bad}).to_string(),
            backend(),
        );
        assert_eq!(a["verdict"]["unusable_case"], "now", "{a}");
        let mut contradictory = case.clone();
        contradictory["result"] = json!("APPROVED");
        contradictory["policy"] =
            json!({"rp_id": "x", "origins": [], "require_evidence": false, "quorum": 2});
        let a = answer(
            &json!({"id": "w", "kind": "evidence", "input": contradictory}).to_string(),
            backend(),
        );
        assert_eq!(a["verdict"]["unusable_case"], "policy", "{a}");
    }
}
