//! The `countersign` Python package's native module (`countersign._native`).
//!
//! Every rule lives in the core crate: this module only converts Python values into the core's
//! inputs, releases the GIL for the verification itself, and converts the verdict back. The
//! Python layer (`python/countersign/`) adds the `ReasonCode` enum, the gateway helper and the
//! decorator.

mod inputs;
mod replay;
#[cfg(feature = "testing")]
mod testing;
mod verdict;

use countersign::{
    ApprovalResult, Case, CaseError, Decision, ProfileRegistry, ReasonCode, verify_evidence_with,
    webauthn,
};
use inputs::{UnusableInput, json_bytes, unusable};
use pyo3::prelude::*;
use pyo3::types::PyString;
use std::sync::{Arc, LazyLock};
use verdict::Verdict;

pub use inputs::{Action, ParsedResult, Policy, Registry};
pub use replay::ReplayState;

/// The built-in canonicalization profiles, built once (op_hash and CASE verification use them).
static BUILTIN: LazyLock<ProfileRegistry> = LazyLock::new(ProfileRegistry::builtin);

/// `op_hash(profile, decision, fields) -> str`: base64url (no padding) of
/// SHA-256(JCS({"profile", "decision", "fields"})), after the profile admitted the fields.
///
/// Pass `fields` as the JSON text the tool will receive (str or bytes): admission then sees the
/// bytes (duplicate keys, lone surrogates, number ranges). A dict is serialized first.
#[pyfunction]
fn op_hash(
    py: Python<'_>,
    profile: &str,
    decision: &str,
    fields: &Bound<'_, PyAny>,
) -> PyResult<String> {
    let decision = Decision::from_wire(decision).ok_or_else(|| {
        unusable(
            "decision",
            format!("decision {decision:?} is not APPROVED or DENIED"),
            None,
        )
    })?;
    let profile = BUILTIN
        .resolve(profile)
        .map_err(|e| unusable("profile", e.to_string(), Some(e.reason_code())))?;
    let raw = json_bytes(py, fields, "fields")?;
    let admitted = py.detach(|| countersign::admit_fields(profile, &raw));
    let fields = admitted.map_err(|e| unusable("fields", e.to_string(), Some(e.reason_code())))?;
    Ok(countersign::op_hash(profile, decision, &fields).to_b64url())
}

/// `op_hash_document(document) -> str`: the op_hash of a `{"profile", "decision", "fields"}`
/// document, as `countersign op-hash` reads it from stdin.
#[pyfunction]
fn op_hash_document(py: Python<'_>, document: &Bound<'_, PyAny>) -> PyResult<String> {
    let raw = json_bytes(py, document, "document")?;
    py.detach(|| countersign::op_hash_document(&BUILTIN, &raw))
        .map(|h| h.to_b64url())
        .map_err(|e| unusable("document", e.to_string(), Some(e.reason_code())))
}

/// `verify_evidence(action, result, registry, policy, replay, now=None) -> Verdict`.
///
/// A DENY is a verdict; only input that cannot be read at all (a registry, a policy or an action
/// that is not what it claims to be) raises `UnusableInput`. An unreadable `result` is the
/// verdict DENY `result_malformed` (SPEC §2.1). The GIL is released while verifying.
#[pyfunction]
#[pyo3(signature = (action, result, registry, policy, replay, now = None))]
fn verify_evidence(
    py: Python<'_>,
    action: &Bound<'_, PyAny>,
    result: &Bound<'_, PyAny>,
    registry: &Registry,
    policy: &Policy,
    replay: &ReplayState,
    now: Option<&Bound<'_, PyAny>>,
) -> PyResult<Verdict> {
    let action = Action::from_py(py, action)?.inner;
    let now = inputs::now(now)?;
    let registry = Arc::clone(&registry.inner);
    let policy = Arc::clone(&policy.inner);
    let result = match result.cast::<ParsedResult>() {
        Ok(parsed) => Ok(Arc::clone(&parsed.get().inner)),
        Err(_) => {
            let raw = json_bytes(py, result, "result")?;
            ApprovalResult::from_json(&raw).map(Arc::new)
        }
    };
    let store = replay.store();
    py.detach(move || match result {
        Err(e) => Ok(Verdict::unusable_result(&e)),
        Ok(result) => replay::verify(store.as_ref(), &result, |state| {
            verify_evidence_with(
                webauthn::default_backend(),
                &policy,
                &action,
                &result,
                &registry,
                state,
                now,
            )
        }),
    })
    .map_err(replay::to_py)
}

/// `verify_case(case) -> Verdict`: a CASE document (`{"action", "result", "registry", "policy",
/// "now"}`), exactly as `countersign verify` reads it, with a fresh in-memory replay state.
#[pyfunction]
fn verify_case(py: Python<'_>, case: &Bound<'_, PyAny>) -> PyResult<Verdict> {
    let raw = json_bytes(py, case, "case")?;
    py.detach(move || match Case::from_json(&raw) {
        // An unusable result envelope is a verdict of its own (SPEC §2.1, §9), as in the CLI.
        Err(CaseError::Result(e)) => Ok(Verdict::unusable_result(&e)),
        Err(e) => Err(e),
        Ok(case) => {
            let mut state = countersign::MemoryReplayState::new();
            Ok(Verdict::from_core(
                case.verify_with(webauthn::default_backend(), &mut state),
            ))
        }
    })
    .map_err(|e| {
        let err = unusable("case", e.to_string(), None);
        // Which CASE member is at fault (`case` for its shape), as the harness protocol names it.
        Python::attach(|py| {
            let _ = err.value(py).setattr("member", e.member());
        });
        err
    })
}

/// The wire spelling of every reason code the core knows, in declaration order.
fn reason_codes(py: Python<'_>) -> Vec<Bound<'_, PyString>> {
    ReasonCode::ALL
        .iter()
        .map(|c| PyString::intern(py, c.as_str()))
        .collect()
}

#[pymodule]
#[pyo3(name = "_native")]
fn native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("UnusableInput", py.get_type::<UnusableInput>())?;
    m.add(
        "ReplayStateError",
        py.get_type::<replay::ReplayStateError>(),
    )?;
    m.add("REASON_CODES", reason_codes(py))?;
    m.add("BACKEND", webauthn::default_backend().name())?;
    m.add_class::<Action>()?;
    m.add_class::<ParsedResult>()?;
    m.add_class::<Policy>()?;
    m.add_class::<Registry>()?;
    m.add_class::<ReplayState>()?;
    m.add_class::<Verdict>()?;
    m.add_function(wrap_pyfunction!(op_hash, m)?)?;
    m.add_function(wrap_pyfunction!(op_hash_document, m)?)?;
    m.add_function(wrap_pyfunction!(verify_evidence, m)?)?;
    m.add_function(wrap_pyfunction!(verify_case, m)?)?;
    #[cfg(feature = "testing")]
    testing::register(m)?;
    Ok(())
}
