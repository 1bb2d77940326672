//! Python values in, core inputs out: the action, the result, the registry, the policy, "now".
//!
//! JSON arrives as text (str or bytes, preferred: admission and the result parser see the exact
//! bytes) or as a dict/list, which is serialized with `json.dumps` first. Anything that cannot be
//! read raises `UnusableInput`, naming the argument and the reason.

use countersign::{ApprovalResult, CredentialRegistry, ReasonCode};
use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyString};
use std::sync::Arc;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

create_exception!(
    countersign,
    UnusableInput,
    PyValueError,
    "An input that cannot be read at all (not a DENY: there is nothing to decide on).\n\n\
     Attributes: `input` (which argument), `reason` (why), `reason_code` (the core's reason \
     code when it has one, else None), `member` (for `verify_case`: the CASE member at fault, \
     `case` for its shape; else None)."
);

/// An `UnusableInput` naming the argument `input`, with `reason` and an optional reason code.
pub(crate) fn unusable(input: &str, reason: String, code: Option<ReasonCode>) -> PyErr {
    let err = UnusableInput::new_err(format!("{input}: {reason}"));
    Python::attach(|py| {
        let value = err.value(py);
        // Setting attributes on a fresh exception instance cannot fail in practice; if it did,
        // the exception is still raised with its message.
        let _ = value.setattr("input", input);
        let _ = value.setattr("reason", reason);
        let _ = value.setattr("reason_code", code.map(ReasonCode::as_str));
        let _ = value.setattr("member", py.None());
    });
    err
}

/// The JSON text of `value`: str and bytes as given, anything else through `json.dumps` (no NaN,
/// no ASCII escaping, compact separators).
pub(crate) fn json_bytes(
    py: Python<'_>,
    value: &Bound<'_, PyAny>,
    input: &str,
) -> PyResult<Vec<u8>> {
    if let Ok(s) = value.cast::<PyString>() {
        // `extract::<String>` is the limited-API path; it refuses lone surrogates, which cannot
        // be UTF-8 (admission would refuse them anyway).
        return s
            .extract::<String>()
            .map(String::into_bytes)
            .map_err(|e| unusable(input, format!("not encodable as UTF-8: {e}"), None));
    }
    if let Ok(b) = value.cast::<PyBytes>() {
        return Ok(b.as_bytes().to_vec());
    }
    if let Ok(b) = value.cast::<PyByteArray>() {
        return Ok(b.to_vec());
    }
    let kwargs = PyDict::new(py);
    kwargs.set_item("ensure_ascii", false)?;
    kwargs.set_item("allow_nan", false)?;
    kwargs.set_item("separators", (",", ":"))?;
    let text = py
        .import("json")?
        .call_method("dumps", (value,), Some(&kwargs))
        .map_err(|e| unusable(input, format!("not serializable as JSON: {e}"), None))?;
    text.extract::<String>()
        .map(String::into_bytes)
        .map_err(|e| unusable(input, format!("not encodable as UTF-8: {e}"), None))
}

/// "now": None (the system clock), an RFC 3339 string, or a timezone-aware `datetime`.
pub(crate) fn now(value: Option<&Bound<'_, PyAny>>) -> PyResult<OffsetDateTime> {
    let Some(value) = value.filter(|v| !v.is_none()) else {
        return Ok(OffsetDateTime::now_utc());
    };
    if let Ok(s) = value.cast::<PyString>() {
        let text = s.extract::<String>()?;
        return OffsetDateTime::parse(&text, &Rfc3339).map_err(|_| {
            unusable(
                "now",
                format!("{text:?} is not an RFC 3339 timestamp"),
                None,
            )
        });
    }
    // A naive datetime has no instant: refuse it rather than guess a zone.
    let offset = value.call_method0("utcoffset").map_err(|_| {
        unusable(
            "now",
            "expected None, an RFC 3339 str or a datetime".into(),
            None,
        )
    })?;
    if offset.is_none() {
        return Err(unusable(
            "now",
            "a naive datetime has no time zone; pass an aware one (e.g. tz=timezone.utc)".into(),
            None,
        ));
    }
    let seconds: f64 = value.call_method0("timestamp")?.extract()?;
    let nanos = (seconds * 1e9).round();
    if !nanos.is_finite() || nanos.abs() > 1e27 {
        return Err(unusable("now", "timestamp out of range".into(), None));
    }
    // In range by the check above; `as` saturates anyway.
    #[allow(clippy::cast_possible_truncation)]
    OffsetDateTime::from_unix_timestamp_nanos(nanos as i128)
        .map_err(|e| unusable("now", e.to_string(), None))
}

/// The action about to be authorized: a profile id and the JSON text of its fields.
///
/// Shared, not copied, into each verification (a gateway verifies one action per call, but a
/// benchmark or a retry loop passes the same object many times).
#[pyclass(frozen, module = "countersign")]
#[derive(Clone, Debug)]
pub struct Action {
    pub(crate) inner: Arc<countersign::Action>,
}

#[pymethods]
impl Action {
    /// `Action(profile, fields, tool=None)`: `fields` as JSON text (preferred) or a dict; `tool`
    /// the tool the gateway will run (checked against the signed `tool_name`, or against the
    /// policy's `profile_tools` for a profile that does not sign its operation).
    #[new]
    #[pyo3(signature = (profile, fields, tool = None))]
    fn new(
        py: Python<'_>,
        profile: String,
        fields: &Bound<'_, PyAny>,
        tool: Option<String>,
    ) -> PyResult<Self> {
        let fields = json_bytes(py, fields, "action.fields")?;
        let mut inner = countersign::Action::new(profile, fields);
        inner.tool = tool;
        Ok(Self {
            inner: Arc::new(inner),
        })
    }

    /// The canonicalization profile id.
    #[getter]
    fn profile(&self) -> &str {
        &self.inner.profile
    }

    /// The tool the gateway will run, if named.
    #[getter]
    fn tool(&self) -> Option<&str> {
        self.inner.tool.as_deref()
    }

    /// The JSON text of the fields, exactly as given.
    #[getter]
    fn fields_json(&self) -> String {
        String::from_utf8_lossy(&self.inner.fields_json).into_owned()
    }

    fn __repr__(&self) -> String {
        format!(
            "Action(profile={:?}, fields={})",
            self.inner.profile,
            self.fields_json()
        )
    }
}

impl Action {
    /// An `Action`, or a dict `{"profile": str, "fields": ..., "tool": str (optional)}`.
    pub(crate) fn from_py(py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<Self> {
        if let Ok(a) = value.cast::<Action>() {
            return Ok(a.get().clone());
        }
        let Ok(d) = value.cast::<PyDict>() else {
            return Err(unusable(
                "action",
                "expected an Action or a dict {\"profile\": str, \"fields\": ...}".into(),
                None,
            ));
        };
        let profile: String = match d.get_item("profile")? {
            Some(p) => p
                .extract()
                .map_err(|_| unusable("action", "profile must be a string".into(), None))?,
            None => return Err(unusable("action", "profile is missing".into(), None)),
        };
        let Some(fields) = d.get_item("fields")? else {
            return Err(unusable("action", "fields is missing".into(), None));
        };
        let tool: Option<String> = match d.get_item("tool")? {
            Some(t) if !t.is_none() => Some(
                t.extract()
                    .map_err(|_| unusable("action", "tool must be a string".into(), None))?,
            ),
            _ => None,
        };
        Self::new(py, profile, &fields, tool)
    }
}

/// A parsed approval result (what `approval_callback` returned), to verify more than once.
#[pyclass(frozen, name = "ApprovalResult", module = "countersign")]
#[derive(Debug)]
pub struct ParsedResult {
    pub(crate) inner: Arc<ApprovalResult>,
}

#[pymethods]
impl ParsedResult {
    /// Parse JSON text (or a dict); raises `UnusableInput` when it is not an approval result.
    #[staticmethod]
    fn from_json(py: Python<'_>, text: &Bound<'_, PyAny>) -> PyResult<Self> {
        let raw = json_bytes(py, text, "result")?;
        ApprovalResult::from_json(&raw)
            .map(|r| Self { inner: Arc::new(r) })
            .map_err(|e| unusable("result", e.to_string(), Some(ReasonCode::ResultMalformed)))
    }

    /// `APPROVED`, `DENIED` or `PENDING`, as the transport says (never trusted by itself).
    #[getter]
    fn status(&self) -> &'static str {
        self.inner.status.as_str()
    }

    #[getter]
    fn approval_id(&self) -> Option<&str> {
        self.inner.approval_id.as_deref()
    }

    #[getter]
    fn expires_at(&self) -> Option<&str> {
        self.inner.expires_at.as_deref()
    }

    #[getter]
    fn redrive_url(&self) -> Option<&str> {
        self.inner.redrive_url.as_deref()
    }

    /// How many evidence entries it carries.
    #[getter]
    fn evidence_count(&self) -> usize {
        self.inner.approver_evidence.len()
    }

    fn __repr__(&self) -> String {
        format!(
            "ApprovalResult(status={:?}, approval_id={:?}, evidence={})",
            self.status(),
            self.approval_id(),
            self.evidence_count()
        )
    }
}

/// The enrolled public keys this verifier trusts.
#[pyclass(frozen, module = "countersign")]
#[derive(Debug)]
pub struct Registry {
    pub(crate) inner: Arc<CredentialRegistry>,
}

#[pymethods]
impl Registry {
    /// A registry from its JSON document `{"credentials": [...]}` (text, bytes or dict).
    #[staticmethod]
    fn from_json(py: Python<'_>, document: &Bound<'_, PyAny>) -> PyResult<Self> {
        let raw = json_bytes(py, document, "registry")?;
        py.detach(|| CredentialRegistry::from_json(&raw))
            .map(|r| Self { inner: Arc::new(r) })
            .map_err(|e| unusable("registry", e.to_string(), None))
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }

    /// The principals with at least one enrolled credential, sorted, without duplicates.
    #[getter]
    fn principals(&self) -> Vec<String> {
        let mut all: Vec<String> = self
            .inner
            .iter()
            .map(|c| c.principal().to_owned())
            .collect();
        all.sort();
        all.dedup();
        all
    }

    fn __repr__(&self) -> String {
        format!("Registry({} credentials)", self.inner.len())
    }
}

/// A verifier policy: what evidence this gateway demands before it lets an action run.
#[pyclass(frozen, module = "countersign")]
#[derive(Debug)]
pub struct Policy {
    pub(crate) inner: Arc<countersign::Policy>,
}

#[pymethods]
impl Policy {
    /// `Policy(rp_id, origins, **members)`: the members of the CASE `policy` object
    /// (`min_assurance="AAL2"`, `quorum=2`, `approvers=["alice"]`, `nfc="normalize"`,
    /// `profile_tools={...}`, ...). Unknown members are refused; omitted ones take the fail-closed
    /// defaults; a contradictory policy (`require_evidence=False` with `quorum=2`, `approvers=[]`)
    /// is refused.
    #[new]
    #[pyo3(signature = (rp_id, origins, **members))]
    fn new(
        py: Python<'_>,
        rp_id: String,
        origins: Vec<String>,
        members: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let all = PyDict::new(py);
        if let Some(m) = members {
            all.update(m.as_mapping())?;
        }
        all.set_item("rp_id", rp_id)?;
        all.set_item("origins", origins)?;
        Self::from_json(py, all.as_any())
    }

    /// A policy from the JSON of a CASE `policy` object (text, bytes or dict).
    #[staticmethod]
    fn from_json(py: Python<'_>, document: &Bound<'_, PyAny>) -> PyResult<Self> {
        let raw = json_bytes(py, document, "policy")?;
        let policy: countersign::Policy =
            serde_json::from_slice(&raw).map_err(|e| unusable("policy", e.to_string(), None))?;
        // Refused where it is loaded, as a CASE's policy is: the binding never holds one.
        policy
            .validate()
            .map_err(|e| unusable("policy", e.to_string(), None))?;
        Ok(Self {
            inner: Arc::new(policy),
        })
    }

    /// The policy as CASE JSON (every member, defaults included).
    fn to_json(&self) -> PyResult<String> {
        serde_json::to_string(self.inner.as_ref())
            .map_err(|e| unusable("policy", e.to_string(), None))
    }

    #[getter]
    fn rp_id(&self) -> &str {
        &self.inner.rp_id
    }

    #[getter]
    fn origins(&self) -> Vec<String> {
        self.inner.origins.clone()
    }

    #[getter]
    fn quorum(&self) -> u32 {
        self.inner.quorum
    }

    #[getter]
    fn min_assurance(&self) -> Option<&'static str> {
        self.inner.min_assurance.map(|l| l.as_str())
    }

    /// The principals allowed to decide; None: every principal of the registry.
    #[getter]
    fn approvers(&self) -> Option<Vec<String>> {
        self.inner.approvers.clone()
    }

    fn __repr__(&self) -> String {
        format!("Policy({})", self.to_json().unwrap_or_default())
    }
}
