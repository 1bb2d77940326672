//! Evaluating a vector with this repository's library, in process.

use super::Response;
use crate::vectors::{Input, Kind};
use countersign::webauthn::SignatureBackend;
use countersign::{Case, CaseError, MemoryReplayState, ProfileRegistry};
use serde_json::{Value, json};

/// Evaluate one vector input with `backend`.
pub fn evaluate(kind: Kind, input: &Input, backend: &dyn SignatureBackend) -> Response {
    let bytes = match input.bytes() {
        Ok(b) => b,
        Err(e) => return Response::Error(format!("{e:#}")),
    };
    match kind {
        Kind::Evidence => evidence(&bytes, backend),
        Kind::OpHash => op_hash(&bytes),
    }
}

fn evidence(bytes: &[u8], backend: &dyn SignatureBackend) -> Response {
    let case = match Case::from_json(bytes) {
        Ok(case) => case,
        // An unusable result envelope is a verdict of its own (docs/SPEC.md §2.1, §9).
        Err(CaseError::Result(_)) => return Response::Verdict(unusable_result()),
        // Any other unusable CASE gets no verdict; the answer names the member at fault.
        Err(e) => return Response::Verdict(json!({"unusable_case": e.member()})),
    };
    let verdict = case.verify_with(backend, &mut MemoryReplayState::new());
    match serde_json::to_value(&verdict) {
        Ok(v) => Response::Verdict(compact(Kind::Evidence, &v)),
        Err(e) => Response::Error(format!("verdict does not serialize: {e}")),
    }
}

fn op_hash(bytes: &[u8]) -> Response {
    match countersign::op_hash_document(&ProfileRegistry::builtin(), bytes) {
        Ok(h) => Response::Verdict(json!({"op_hash": h.to_b64url()})),
        Err(e) => Response::Verdict(json!({"error": e.reason_code().as_str()})),
    }
}

/// The verdict for a CASE whose `result` is unusable.
pub fn unusable_result() -> Value {
    json!({
        "effective": "DENY",
        "decision": null,
        "reason_code": "result_malformed",
        "identity_assurance_level": "declared",
    })
}

/// Reduce a verdict to the members a vector's `expected` names.
///
/// Evidence verdicts may carry the level as `identity_assurance_level` or, as `countersign
/// verify` prints it, `identity_assurance.level`; other members are ignored. An answer with
/// `unusable_case` (no verdict for an unusable CASE) is reduced to that member alone.
pub fn compact(kind: Kind, verdict: &Value) -> Value {
    match kind {
        Kind::Evidence if verdict.get("unusable_case").is_some() => {
            json!({"unusable_case": verdict.get("unusable_case")})
        }
        Kind::Evidence => {
            let level = verdict
                .get("identity_assurance_level")
                .or_else(|| verdict.pointer("/identity_assurance/level"))
                .cloned()
                .unwrap_or(Value::Null);
            let member = |k: &str| verdict.get(k).cloned().unwrap_or(Value::Null);
            json!({
                "effective": member("effective"),
                "decision": member("decision"),
                "reason_code": member("reason_code"),
                "identity_assurance_level": level,
            })
        }
        Kind::OpHash => match (verdict.get("op_hash"), verdict.get("error")) {
            (Some(h), None) => json!({"op_hash": h}),
            (None, Some(e)) => json!({"error": e}),
            _ => verdict.clone(),
        },
    }
}
