//! The verdict as Python sees it: the core's verdict, members converted on access.

use countersign::{
    ApprovalStatus, Approver, Effect, Finding, IdentityAssurance, ReasonCode, ResultError,
};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use serde::Serialize;

/// ALLOW or DENY, and why. `allowed` is the only thing a gateway may act on.
///
/// A verdict has no truth value (`if verdict:` raises TypeError): test `verdict.allowed`.
#[pyclass(frozen, module = "countersign")]
#[derive(Debug, Serialize)]
pub struct Verdict {
    effective: Effect,
    /// `None` only when the result itself was unreadable.
    decision: Option<ApprovalStatus>,
    reason_code: Option<ReasonCode>,
    identity_assurance: IdentityAssurance,
    approvers: Vec<Approver>,
    replay: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    detail: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    findings: Vec<Finding>,
}

impl Verdict {
    pub(crate) fn from_core(v: countersign::Verdict) -> Self {
        Self {
            effective: v.effective,
            decision: Some(v.decision),
            reason_code: v.reason_code,
            identity_assurance: v.identity_assurance,
            approvers: v.approvers,
            replay: v.replay,
            detail: v.detail,
            findings: v.findings,
        }
    }

    /// The verdict for a result envelope that cannot be read (SPEC §2.1): DENY
    /// `result_malformed`, no decision, declared assurance.
    pub(crate) fn unusable_result(e: &ResultError) -> Self {
        Self {
            effective: Effect::Deny,
            decision: None,
            reason_code: Some(ReasonCode::ResultMalformed),
            identity_assurance: IdentityAssurance::declared(None),
            approvers: Vec::new(),
            replay: "enforced",
            detail: Some(e.to_string()),
            findings: Vec::new(),
        }
    }
}

/// JSON text → Python objects (dicts, lists, str, int, bool, None).
fn to_python<'py>(py: Python<'py>, value: &impl Serialize) -> PyResult<Bound<'py, PyAny>> {
    let text = serde_json::to_string(value)
        .map_err(|e| PyTypeError::new_err(format!("verdict does not serialize: {e}")))?;
    py.import("json")?.call_method1("loads", (text,))
}

static REASON_CODE: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

#[pymethods]
impl Verdict {
    /// `"ALLOW"` or `"DENY"`.
    #[getter]
    fn effective(&self) -> &'static str {
        match self.effective {
            Effect::Allow => "ALLOW",
            Effect::Deny => "DENY",
        }
    }

    /// True exactly when the gateway may proceed.
    #[getter]
    fn allowed(&self) -> bool {
        self.effective == Effect::Allow
    }

    /// The signed decision when evidence verified, else the transport's status; None when the
    /// result could not be read at all.
    #[getter]
    fn decision(&self) -> Option<&'static str> {
        self.decision.map(ApprovalStatus::as_str)
    }

    /// Why the verdict is DENY (a `ReasonCode`); None exactly when it is ALLOW.
    #[getter]
    fn reason_code<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let Some(code) = self.reason_code else {
            return Ok(None);
        };
        let class = REASON_CODE.get_or_try_init(py, || {
            py.import("countersign")?
                .getattr("ReasonCode")
                .map(Bound::unbind)
        })?;
        class.bind(py).call1((code.as_str(),)).map(Some)
    }

    /// `{"level": "AAL2", "source": "evidence", "basis": {...}}`, derived from the evidence.
    #[getter]
    fn identity_assurance<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, &self.identity_assurance)
    }

    /// The level alone: `"declared"`, `"AAL1"`, `"AAL2"` or `"AAL3"`.
    #[getter]
    fn assurance_level(&self) -> &'static str {
        self.identity_assurance.level.as_str()
    }

    /// One dict per approver whose evidence verified (principal, credential_id, decision, ...).
    #[getter]
    fn approvers<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, &self.approvers)
    }

    /// `"enforced"` (always, for verdicts from this package).
    #[getter]
    fn replay(&self) -> &'static str {
        self.replay
    }

    /// A sentence naming the check that failed and its evidence; None on ALLOW.
    #[getter]
    fn detail(&self) -> Option<&str> {
        self.detail.as_deref()
    }

    /// The verdict as `countersign verify` prints it (a dict).
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, self)
    }

    /// The verdict as `countersign verify` prints it (JSON text).
    fn to_json(&self) -> PyResult<String> {
        serde_json::to_string(self)
            .map_err(|e| PyTypeError::new_err(format!("verdict does not serialize: {e}")))
    }

    fn __bool__(&self) -> PyResult<bool> {
        Err(PyTypeError::new_err(
            "a Verdict has no truth value (a DENY is an object too): test verdict.allowed",
        ))
    }

    fn __repr__(&self) -> String {
        match (self.effective, self.reason_code) {
            (Effect::Allow, _) => format!(
                "Verdict(ALLOW, {}, {})",
                self.decision().unwrap_or("-"),
                self.assurance_level()
            ),
            (Effect::Deny, code) => format!(
                "Verdict(DENY, {}, {})",
                code.map_or("-", ReasonCode::as_str),
                self.detail.as_deref().unwrap_or("")
            ),
        }
    }
}
