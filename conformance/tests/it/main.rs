//! The suite's own guarantees: generated files are current, the flag registry is closed, coverage
//! is complete, and our library agrees with every vector on every backend.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "test code: a panic is a failed test (clippy.toml covers #[test] fns, not helpers)"
)]

use countersign::ReasonCode;
use countersign_conformance::run::{self, Outcome};
use countersign_conformance::vectors::{self, Kind, Loaded};
use countersign_conformance::{coverage, flags, generate, repo_root};
use std::collections::{BTreeMap, BTreeSet};

/// Reason codes no vector can pin, with why. Empty: see vectors/README.md.
const EXEMPT: &[(ReasonCode, &str)] = &[];

fn all() -> Vec<Loaded> {
    match vectors::load_dir(&repo_root().join("vectors")) {
        Ok(v) => v,
        Err(e) => panic!("loading vectors: {e:#}"),
    }
}

#[test]
fn committed_files_match_the_generator() {
    let stale = generate::stale(&repo_root()).unwrap_or_else(|e| panic!("{e:#}"));
    assert!(
        stale.is_empty(),
        "regenerate with `cargo run -p countersign-conformance -- generate`; stale: {stale:?}"
    );
}

#[test]
fn generation_is_deterministic() {
    let a = generate::files().unwrap_or_else(|e| panic!("{e:#}"));
    let b = generate::files().unwrap_or_else(|e| panic!("{e:#}"));
    assert_eq!(a, b);
}

#[test]
fn flag_registry_is_closed() {
    let readme = std::fs::read_to_string(repo_root().join("vectors/README.md")).unwrap_or_default();
    let documented: BTreeSet<String> = flags::documented(&readme).into_keys().collect();
    let used: BTreeSet<String> = all().into_iter().flat_map(|v| v.vector.flags).collect();
    let undocumented: Vec<_> = used.difference(&documented).collect();
    let unused: Vec<_> = documented.difference(&used).collect();
    assert!(
        undocumented.is_empty(),
        "flags used but not documented: {undocumented:?}"
    );
    assert!(unused.is_empty(), "flags documented but unused: {unused:?}");
}

#[test]
fn vectors_are_well_formed_and_numerous() {
    let all = all();
    assert!(all.len() >= 600, "only {} vectors", all.len());
    let mut ids = BTreeSet::new();
    for v in &all {
        assert!(
            ids.insert(v.vector.id.clone()),
            "duplicate id {}",
            v.vector.id
        );
        assert!(!v.vector.flags.is_empty(), "{} has no flag", v.vector.id);
        assert!(
            v.vector.id.contains("::"),
            "{} is not module::name",
            v.vector.id
        );
        match v.kind {
            Kind::Evidence if v.vector.expected.get("unusable_case").is_some() => {
                let u: Result<vectors::UnusableCase, _> =
                    serde_json::from_value(v.vector.expected.clone());
                let u = u.unwrap_or_else(|err| panic!("{}: {err}", v.vector.id));
                assert!(
                    vectors::UNUSABLE_CASE_MEMBERS.contains(&u.unusable_case.as_str()),
                    "{}",
                    v.vector.id
                );
            }
            Kind::Evidence => {
                let e: Result<vectors::EvidenceExpected, _> =
                    serde_json::from_value(v.vector.expected.clone());
                let e = e.unwrap_or_else(|err| panic!("{}: {err}", v.vector.id));
                assert_eq!(
                    e.effective == "ALLOW",
                    e.reason_code.is_none(),
                    "{}",
                    v.vector.id
                );
            }
            Kind::OpHash => {
                let keys: Vec<&String> = v
                    .vector
                    .expected
                    .as_object()
                    .map(|o| o.keys().collect())
                    .unwrap_or_default();
                assert!(keys == ["op_hash"] || keys == ["error"], "{}", v.vector.id);
            }
        }
    }
}

#[test]
fn every_reason_code_is_pinned() {
    let mut used = BTreeSet::new();
    for v in all() {
        for key in ["reason_code", "error"] {
            if let Some(code) = v.vector.expected.get(key).and_then(|c| c.as_str()) {
                let parsed = ReasonCode::from_wire(code)
                    .unwrap_or_else(|| panic!("{}: {code} is not a reason code", v.vector.id));
                used.insert(parsed);
            }
        }
    }
    let missing: Vec<_> = ReasonCode::ALL
        .iter()
        .filter(|c| !used.contains(c) && !EXEMPT.iter().any(|(e, _)| e == *c))
        .collect();
    assert!(
        missing.is_empty(),
        "reason codes no vector pins: {missing:?}"
    );
}

#[test]
fn worked_example_fixtures_are_evidence_vectors() {
    let all = all();
    for name in [
        "approve-account-a",
        "replay-to-account-b",
        "refuse-account-a",
        "flipped-decision",
    ] {
        let text = std::fs::read_to_string(
            repo_root().join(format!("fixtures/worked-example/{name}.case.json")),
        )
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        let fixture: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        let vector = all
            .iter()
            .find(|v| v.vector.id == format!("worked::{name}"))
            .unwrap_or_else(|| panic!("no vector worked::{name}"));
        assert_eq!(vector.vector.input, vectors::Input::Json(fixture), "{name}");
    }
}

/// Whether the WebAuthn layer is the real one (main carried a stub until the webauthn branch
/// merged; with the stub every signature fails and evidence vectors cannot agree).
fn webauthn_is_real() -> bool {
    let key = countersign_softkey::SoftKey::fixture("alice-es256").map(|k| k.cose_public_key());
    key.is_ok_and(|k| countersign::webauthn::CosePublicKey::from_cose(&k).is_ok())
}

#[test]
fn our_library_agrees_with_every_vector_on_every_backend() {
    let mut all = all();
    if !webauthn_is_real() {
        eprintln!(
            "SKIP evidence vectors: the WebAuthn layer is still the stub; checking op_hash only"
        );
        all.retain(|v| v.kind == Kind::OpHash);
    }
    let report = run::run_in_process(&all, &countersign::webauthn::all_backends());
    let failures: BTreeMap<String, String> = report
        .results
        .iter()
        .filter_map(|r| match &r.outcome {
            Outcome::Fail(why) => Some((format!("{} {:?}", r.id, r.backend), why.clone())),
            _ => None,
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} failures:\n{failures:#?}",
        failures.len()
    );
}

#[test]
fn every_reason_code_and_flag_has_a_positive_and_a_negative_vector() {
    let readme = std::fs::read_to_string(repo_root().join("vectors/README.md")).unwrap_or_default();
    let documented: BTreeSet<String> = flags::documented(&readme).into_keys().collect();
    let gaps = coverage::measure(&all(), &documented).gaps();
    assert!(
        gaps.is_empty(),
        "coverage gaps (add vectors through the generator; see vectors/README.md#coverage):\n{}",
        gaps.join("\n")
    );
}
