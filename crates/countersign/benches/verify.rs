//! verify_evidence against a 10,000-credential registry, beside the raw signature verification of
//! the same message with the same backend, for ES256 and EdDSA, on every compiled-in backend.
//!
//! Run: `cargo bench -p countersign --features ring --bench verify`
//! Results and ratios: docs/PERFORMANCE.md.

use countersign::webauthn::{DerPolicy, PreparedSignature, all_backends};
use countersign::{
    ApprovalResult, ApprovalStatus, CredentialRegistry, Decision, Policy, ReplayState,
    verify_evidence_with,
};
use countersign_testkit::{self as kit, Signing};
use criterion::{Criterion, criterion_group, criterion_main};
use sha2::{Digest, Sha256};
use std::hint::black_box;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

const REGISTRY_SIZE: usize = 10_000;

/// A replay state that never remembers, so one record can be verified repeatedly. The lookups
/// still happen, as they would against a real state.
struct Forgetful;

impl ReplayState for Forgetful {
    fn is_spent(&self, _nonce: &[u8]) -> bool {
        false
    }
    fn sign_count(&self, _credential_id: &[u8]) -> Option<u32> {
        None
    }
    fn record(&mut self, _nonce: &[u8], _credential_id: &[u8], _sign_count: u32) {}
}

fn registry_with(approver: &countersign_softkey::SoftKey, filler: &str) -> CredentialRegistry {
    let filler_key = kit::key(filler);
    let mut records = Vec::with_capacity(REGISTRY_SIZE);
    for i in 0..REGISTRY_SIZE - 1 {
        let id = Sha256::digest(format!("filler credential {i}").as_bytes()).to_vec();
        records.push(kit::enroll(
            &filler_key.clone().with_credential_id(id),
            &format!("user{i}@example.com"),
        ));
    }
    records.push(kit::enroll(approver, "alice@example.com"));
    CredentialRegistry::from_document(kit::registry(records)).expect("registry")
}

fn bench_alg(c: &mut Criterion, alg: &str, key_name: &str, filler: &str) {
    let key = kit::key(key_name);
    let registry = registry_with(&key, filler);
    let policy = Policy::new(kit::RP_ID, [kit::ORIGIN]);
    let action = kit::tool_call_action(
        "agent-7",
        "payments.transfer",
        serde_json::json!({"amount": "40000.00", "currency": "EUR", "to": "account-A"}),
    );
    let signing = Signing::new(Decision::Approved, "bench");
    let response = kit::assert(&key, &action, &signing);
    let result: ApprovalResult = kit::result(
        ApprovalStatus::Approved,
        [kit::entry(&response, &action, &signing)],
    );
    let now = OffsetDateTime::parse(kit::NOW, &Rfc3339).expect("now");
    let enrolled = registry
        .get(key.credential_id())
        .expect("enrolled")
        .key()
        .expect("key");
    let signed = countersign_softkey::signed_message(
        &response.authenticator_data,
        &response.client_data_json,
    );

    let mut group = c.benchmark_group(alg);
    for backend in all_backends() {
        let verdict = verify_evidence_with(
            backend,
            &policy,
            &action,
            &result,
            &registry,
            &mut Forgetful,
            now,
        );
        assert!(verdict.is_allow(), "{verdict:?}");
        group.bench_function(format!("raw_signature_verify/{}", backend.name()), |b| {
            b.iter(|| {
                let prepared = PreparedSignature::new(
                    enrolled,
                    black_box(&response.signature),
                    DerPolicy::Strict,
                )
                .expect("prepared");
                backend
                    .verify(enrolled, black_box(&signed), &prepared)
                    .expect("valid")
            })
        });
        group.bench_function(format!("verify_evidence/{}", backend.name()), |b| {
            b.iter(|| {
                let v = verify_evidence_with(
                    backend,
                    &policy,
                    black_box(&action),
                    black_box(&result),
                    &registry,
                    &mut Forgetful,
                    now,
                );
                assert!(v.is_allow());
                v
            })
        });
    }
    group.finish();
}

/// The canonicalization share of the hot path: admit the action's fields and hash one decision.
fn bench_canon(c: &mut Criterion) {
    let registry = countersign::ProfileRegistry::builtin();
    let profile = registry.get("countersign.tool-call/1").expect("built in");
    let action = kit::tool_call_action(
        "agent-7",
        "payments.transfer",
        serde_json::json!({"amount": "40000.00", "currency": "EUR", "to": "account-A"}),
    );
    c.bench_function("canon/admit_fields+op_hash/tool-call", |b| {
        b.iter(|| {
            let fields = countersign::admit_fields(profile, black_box(&action.fields_json))
                .expect("admissible");
            countersign::op_hash(profile, Decision::Approved, &fields)
        })
    });
}

fn benches(c: &mut Criterion) {
    bench_canon(c);
    bench_alg(c, "ES256", "alice-es256", "bob-es256");
    bench_alg(c, "EdDSA", "alice-eddsa", "bob-eddsa");
}

criterion_group!(verify, benches);
criterion_main!(verify);
