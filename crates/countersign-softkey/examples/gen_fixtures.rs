//! Regenerates the committed fixture files.
//!
//! `cargo run -p countersign-softkey --example gen_fixtures` rewrites `fixtures/ca/*` (the
//! certificates are a pure function of the seeds; a test checks the committed bytes match).
//! With `--rsa` it also (re)generates the RS256 PKCS#8 files from ChaCha20Rng seeded with each
//! key's seed. RSA generation depends on the `rsa` crate version, which is why those files are
//! committed and must not be regenerated casually: doing so changes every RS256 vector.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "a developer tool over fixed fixtures: a panic reports a broken fixture"
)]

use std::path::{Path, PathBuf};

use rand_core::SeedableRng as _;
use rsa::pkcs8::EncodePrivateKey as _;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    if std::env::args().any(|a| a == "--rsa") {
        let seeds: serde_json::Value =
            serde_json::from_slice(&std::fs::read(root.join("keys/seeds.json"))?)?;
        let keys = seeds["keys"].as_object().ok_or("seeds.json: no keys")?;
        for (name, entry) in keys {
            if entry["alg"] != "RS256" {
                continue;
            }
            let seed: [u8; 32] = hex::decode(entry["seed"].as_str().ok_or("seed")?)?
                .try_into()
                .map_err(|_| "seed length")?;
            let file = entry["pkcs8"].as_str().ok_or("pkcs8")?;
            let mut rng = rand_chacha::ChaCha20Rng::from_seed(seed);
            let key = rsa::RsaPrivateKey::new(&mut rng, 2048)?;
            let der = key.to_pkcs8_der()?;
            std::fs::write(root.join("keys").join(file), der.as_bytes())?;
            let pem_name = file.replace(".der", ".pem");
            std::fs::write(
                root.join("keys").join(pem_name),
                countersign_softkey::pem("PRIVATE KEY", der.as_bytes()),
            )?;
            println!("wrote {file} for {name}");
        }
    }
    let certs = countersign_softkey::build_fixture_certificates()?;
    for (stem, der) in [
        ("root", &certs.root_der),
        ("attestation", &certs.attestation_der),
    ] {
        std::fs::write(root.join(format!("ca/{stem}.der")), der)?;
        std::fs::write(
            root.join(format!("ca/{stem}.pem")),
            countersign_softkey::pem("CERTIFICATE", der),
        )?;
        println!("wrote ca/{stem}.der and .pem");
    }
    Ok(())
}
