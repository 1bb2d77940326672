//! verify_evidence against a 10,000-credential registry, beside the raw signature verification of
//! the same message with the same backend, for ES256 and EdDSA, on every compiled-in backend.
//!
//! Run: `cargo bench -p countersign --features ring --bench verify`
//! Results and ratios: docs/PERFORMANCE.md.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "benchmark harness: a panic stops a measurement whose setup is broken"
)]

use countersign::webauthn::{DerPolicy, PreparedSignature, all_backends};
use countersign::{Decision, verify_evidence_with};
use countersign_testkit::{self as kit, Forgetful, hot_path};
use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;

fn bench_alg(c: &mut Criterion, alg: &str, key_name: &str, filler: &str) {
    let fx = hot_path(key_name, filler);
    let enrolled = fx
        .registry
        .get(fx.key.credential_id())
        .expect("enrolled")
        .key()
        .expect("key");
    let mut group = c.benchmark_group(alg);
    for backend in all_backends() {
        let verdict = verify_evidence_with(
            backend,
            &fx.policy,
            &fx.action,
            &fx.result,
            &fx.registry,
            &mut Forgetful,
            fx.now,
        );
        assert!(verdict.is_allow(), "{verdict:?}");
        group.bench_function(format!("raw_signature_verify/{}", backend.name()), |b| {
            b.iter(|| {
                let prepared = PreparedSignature::new(
                    enrolled,
                    black_box(&fx.response.signature),
                    DerPolicy::Strict,
                )
                .expect("prepared");
                backend
                    .verify(enrolled, black_box(&fx.signed), &prepared)
                    .expect("valid")
            })
        });
        group.bench_function(format!("verify_evidence/{}", backend.name()), |b| {
            b.iter(|| {
                let v = verify_evidence_with(
                    backend,
                    &fx.policy,
                    black_box(&fx.action),
                    black_box(&fx.result),
                    &fx.registry,
                    &mut Forgetful,
                    fx.now,
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
