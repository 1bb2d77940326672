//! A fixed amount of hot-path work for instruction counting, which is repeatable on a busy machine
//! where wall-clock benchmarks are not:
//!
//! ```sh
//! cargo build --release -p countersign --features ring --example hotpath
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null \
//!     target/release/examples/hotpath verify_evidence ES256 ring 200
//! ```
//!
//! Arguments: `raw|verify_evidence`, `ES256|EdDSA`, a backend name, an iteration count. The
//! registry holds 10,000 credentials, as in the criterion benchmark; its construction is counted
//! too, so compare runs with the same iteration counts, or subtract a run with 0 iterations.

use countersign::webauthn::{DerPolicy, PreparedSignature, all_backends};
use countersign::{
    ApprovalStatus, CredentialRegistry, Decision, Policy, ReplayState, verify_evidence_with,
};
use countersign_testkit::{self as kit, Signing};
use sha2::{Digest, Sha256};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

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

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, mode, alg, backend_name, iterations] = args.as_slice() else {
        eprintln!("usage: hotpath raw|verify_evidence ES256|EdDSA BACKEND ITERATIONS");
        std::process::exit(2);
    };
    let iterations: usize = iterations.parse().expect("iterations");
    let (key_name, filler_name) = match alg.as_str() {
        "ES256" => ("alice-es256", "bob-es256"),
        "EdDSA" => ("alice-eddsa", "bob-eddsa"),
        other => panic!("unknown algorithm {other}"),
    };
    let backend = all_backends()
        .into_iter()
        .find(|b| b.name() == backend_name)
        .expect("backend compiled in");
    let key = kit::key(key_name);
    let filler = kit::key(filler_name);
    let mut records: Vec<_> = (0..9_999)
        .map(|i| {
            let id = Sha256::digest(format!("filler credential {i}").as_bytes()).to_vec();
            kit::enroll(
                &filler.clone().with_credential_id(id),
                &format!("user{i}@example.com"),
            )
        })
        .collect();
    records.push(kit::enroll(&key, "alice@example.com"));
    let registry = CredentialRegistry::from_document(kit::registry(records)).expect("registry");
    let policy = Policy::new(kit::RP_ID, [kit::ORIGIN]);
    let action = kit::tool_call_action(
        "agent-7",
        "payments.transfer",
        serde_json::json!({"amount": "40000.00", "currency": "EUR", "to": "account-A"}),
    );
    let signing = Signing::new(Decision::Approved, "bench");
    let response = kit::assert(&key, &action, &signing);
    let result = kit::result(
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

    let mut allowed = 0usize;
    for _ in 0..iterations {
        match mode.as_str() {
            "raw" => {
                let prepared =
                    PreparedSignature::new(enrolled, &response.signature, DerPolicy::Strict)
                        .expect("sig");
                allowed += usize::from(backend.verify(enrolled, &signed, &prepared).is_ok());
            }
            "verify_evidence" => {
                let v = verify_evidence_with(
                    backend,
                    &policy,
                    &action,
                    &result,
                    &registry,
                    &mut Forgetful,
                    now,
                );
                allowed += usize::from(v.is_allow());
            }
            other => panic!("unknown mode {other}"),
        }
    }
    assert_eq!(allowed, iterations);
    println!("{mode} {alg} {backend_name}: {iterations} verified");
}
