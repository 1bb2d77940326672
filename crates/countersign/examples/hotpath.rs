//! A fixed amount of hot-path work for instruction counting, which is repeatable on a busy machine
//! where wall-clock benchmarks are not:
//!
//! ```sh
//! cargo build --release -p countersign --features ring --example hotpath
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null \
//!     target/release/examples/hotpath verify_evidence ES256 ring 100
//! ```
//!
//! Arguments: `raw|verify_evidence`, `ES256|EdDSA`, a backend name, an iteration count. The fixture
//! (a 10,000-credential registry) is built first and counted too: subtract a 0-iteration run.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "a developer tool over fixed fixtures: a panic reports a broken fixture"
)]

use countersign::verify_evidence_with;
use countersign::webauthn::{DerPolicy, PreparedSignature, all_backends};
use countersign_testkit::{Forgetful, hot_path};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, mode, alg, backend_name, iterations] = args.as_slice() else {
        eprintln!("usage: hotpath raw|verify_evidence ES256|EdDSA BACKEND ITERATIONS");
        std::process::exit(2);
    };
    let iterations: usize = iterations.parse().expect("iterations");
    let fx = match alg.as_str() {
        "ES256" => hot_path("alice-es256", "bob-es256"),
        "EdDSA" => hot_path("alice-eddsa", "bob-eddsa"),
        other => panic!("unknown algorithm {other}"),
    };
    let backend = all_backends()
        .into_iter()
        .find(|b| b.name() == backend_name)
        .expect("backend compiled in");
    let enrolled = fx
        .registry
        .get(fx.key.credential_id())
        .expect("enrolled")
        .key()
        .expect("key");

    let mut allowed = 0usize;
    for _ in 0..iterations {
        let ok = match mode.as_str() {
            "raw" => {
                let prepared =
                    PreparedSignature::new(enrolled, &fx.response.signature, DerPolicy::Strict)
                        .expect("signature encoding");
                backend.verify(enrolled, &fx.signed, &prepared).is_ok()
            }
            "verify_evidence" => verify_evidence_with(
                backend,
                &fx.policy,
                &fx.action,
                &fx.result,
                &fx.registry,
                &mut Forgetful,
                fx.now,
            )
            .is_allow(),
            other => panic!("unknown mode {other}"),
        };
        allowed += usize::from(ok);
    }
    assert_eq!(allowed, iterations);
    println!("{mode} {alg} {backend_name}: {iterations} verified");
}
