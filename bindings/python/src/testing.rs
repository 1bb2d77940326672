//! `countersign._native.testing`: a software authenticator for the integration tests and the
//! benchmark's fixture. Built only with the `testing` feature, never into a release wheel: the
//! fixture keys are public, so this module signs as any fixture approver.

use countersign::b64;
use countersign_softkey::{AssertionRequest, Ceremony, SoftKey};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::sync::atomic::{AtomicU32, Ordering};

/// A deterministic software FIDO2 authenticator holding one fixture key (e.g. `alice-es256`).
#[pyclass(frozen, module = "countersign.testing")]
struct SoftAuthenticator {
    key: SoftKey,
    /// `None`: the authenticator reports counter 0 (no counter); `Some`: it counts 1, 2, 3...
    counter: Option<AtomicU32>,
}

#[pymethods]
impl SoftAuthenticator {
    #[new]
    #[pyo3(signature = (fixture, counting = false))]
    fn new(fixture: &str, counting: bool) -> PyResult<Self> {
        let key = SoftKey::fixture(fixture)
            .map_err(|e| PyValueError::new_err(format!("fixture key {fixture}: {e}")))?;
        Ok(Self {
            key,
            counter: counting.then(|| AtomicU32::new(0)),
        })
    }

    /// base64url of the credential id.
    #[getter]
    fn credential_id(&self) -> String {
        b64::encode(self.key.credential_id())
    }

    /// The registry record enrolling this key for `principal` (JSON text).
    fn registry_record(&self, principal: &str) -> PyResult<String> {
        let record = countersign_testkit::enroll(&self.key, principal);
        serde_json::to_string(&record).map_err(|e| PyValueError::new_err(e.to_string()))
    }

    /// Sign `challenge` (base64url) for `rp_id` and `origin` with UP and UV: the assertion as the
    /// service's approver API takes it (`credential_id`, `client_data_json`,
    /// `authenticator_data`, `signature`, all base64url).
    #[pyo3(signature = (challenge, rp_id = countersign_testkit::RP_ID, origin = countersign_testkit::ORIGIN))]
    fn sign<'py>(
        &self,
        py: Python<'py>,
        challenge: &str,
        rp_id: &str,
        origin: &str,
    ) -> PyResult<Bound<'py, PyDict>> {
        let challenge = b64::decode(challenge)
            .map_err(|_| PyValueError::new_err("challenge is not base64url"))?;
        let request = AssertionRequest::from(Ceremony {
            sign_count: self
                .counter
                .as_ref()
                .map_or(0, |c| c.fetch_add(1, Ordering::SeqCst).saturating_add(1)),
            ..Ceremony::get(rp_id, origin, challenge)
        });
        let r = self
            .key
            .assert(&request)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        let out = PyDict::new(py);
        out.set_item("credential_id", b64::encode(&r.credential_id))?;
        out.set_item("client_data_json", b64::encode(&r.client_data_json))?;
        out.set_item("authenticator_data", b64::encode(&r.authenticator_data))?;
        out.set_item("signature", b64::encode(&r.signature))?;
        Ok(out)
    }
}

/// The Rust benchmark's hot-path fixture (10,000-credential registry, one ES256 approval of a
/// tool call), as JSON texts: `{"profile", "fields", "result", "registry", "policy", "now"}`.
#[pyfunction]
#[pyo3(signature = (key = "alice-es256", filler = "bob-es256"))]
fn hot_path<'py>(py: Python<'py>, key: &str, filler: &str) -> PyResult<Bound<'py, PyDict>> {
    let fx = countersign_testkit::hot_path(key, filler);
    let records: Vec<_> = fx.registry.iter().map(|c| c.record().clone()).collect();
    let registry = countersign_testkit::registry(records);
    let json = |v: serde_json::Result<String>| v.map_err(|e| PyValueError::new_err(e.to_string()));
    let out = PyDict::new(py);
    out.set_item("profile", &fx.action.profile)?;
    out.set_item(
        "fields",
        String::from_utf8_lossy(&fx.action.fields_json).into_owned(),
    )?;
    out.set_item("result", json(serde_json::to_string(&fx.result))?)?;
    out.set_item("registry", json(serde_json::to_string(&registry))?)?;
    out.set_item("policy", json(serde_json::to_string(&fx.policy))?)?;
    out.set_item("now", countersign_testkit::NOW)?;
    Ok(out)
}

/// The same verification in Rust, in this process: `verify_evidence_with` on the [`hot_path`]
/// fixture, `iterations` times, with the criterion benchmark's non-recording replay state.
/// Returns seconds per verification (the GIL is released meanwhile).
#[pyfunction]
#[pyo3(signature = (iterations, key = "alice-es256", filler = "bob-es256"))]
fn rust_verify_seconds(py: Python<'_>, iterations: u32, key: &str, filler: &str) -> PyResult<f64> {
    let fx = countersign_testkit::hot_path(key, filler);
    let seconds = py.detach(|| {
        let backend = countersign::webauthn::default_backend();
        let start = std::time::Instant::now();
        let mut allowed = 0u32;
        for _ in 0..iterations {
            let v = countersign::verify_evidence_with(
                backend,
                &fx.policy,
                std::hint::black_box(&fx.action),
                std::hint::black_box(&fx.result),
                &fx.registry,
                &mut countersign_testkit::Forgetful,
                fx.now,
            );
            allowed += u32::from(v.is_allow());
        }
        (start.elapsed().as_secs_f64(), allowed)
    });
    if seconds.1 != iterations {
        return Err(PyValueError::new_err("the hot-path fixture did not verify"));
    }
    Ok(seconds.0 / f64::from(iterations.max(1)))
}

/// The signature share of that verification, alone: `PreparedSignature::new` (DER checks) and
/// the default backend's `verify` of the same signed bytes under the same enrolled key, as the
/// criterion benchmark's `raw_signature_verify`. Seconds per verification, GIL released.
#[pyfunction]
#[pyo3(signature = (iterations, key = "alice-es256", filler = "bob-es256"))]
fn rust_raw_verify_seconds(
    py: Python<'_>,
    iterations: u32,
    key: &str,
    filler: &str,
) -> PyResult<f64> {
    use countersign::webauthn::{DerPolicy, PreparedSignature};
    let fx = countersign_testkit::hot_path(key, filler);
    let enrolled = fx
        .registry
        .get(fx.key.credential_id())
        .and_then(|c| c.key().ok())
        .ok_or_else(|| PyValueError::new_err("the fixture key is not enrolled"))?;
    let (seconds, verified) = py.detach(|| {
        let backend = countersign::webauthn::default_backend();
        let start = std::time::Instant::now();
        let mut verified = 0u32;
        for _ in 0..iterations {
            let ok = PreparedSignature::new(
                enrolled,
                std::hint::black_box(&fx.response.signature),
                DerPolicy::Strict,
            )
            .is_ok_and(|sig| {
                backend
                    .verify(enrolled, std::hint::black_box(&fx.signed), &sig)
                    .is_ok()
            });
            verified += u32::from(ok);
        }
        (start.elapsed().as_secs_f64(), verified)
    });
    if verified != iterations {
        return Err(PyValueError::new_err(
            "the fixture signature did not verify",
        ));
    }
    Ok(seconds / f64::from(iterations.max(1)))
}

pub(crate) fn register(parent: &Bound<'_, PyModule>) -> PyResult<()> {
    let m = PyModule::new(parent.py(), "testing")?;
    m.add_class::<SoftAuthenticator>()?;
    m.add_function(wrap_pyfunction!(hot_path, &m)?)?;
    m.add_function(wrap_pyfunction!(rust_verify_seconds, &m)?)?;
    m.add_function(wrap_pyfunction!(rust_raw_verify_seconds, &m)?)?;
    m.add("RP_ID", countersign_testkit::RP_ID)?;
    m.add("ORIGIN", countersign_testkit::ORIGIN)?;
    m.add("NOW", countersign_testkit::NOW)?;
    parent.add_submodule(&m)?;
    Ok(())
}
