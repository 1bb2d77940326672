//! The software key's CTAP2 front end on stdin/stdout, for checking it with an independent CTAP2
//! client (Yubico's python-fido2, `tests/ctap2_fido2.py`, run by .ci/steps/terminal.sh).
//!
//! `cargo run -p countersign-softkey --features ctap2 --example ctap2_stdio -- FIXTURE RP_ID [--no-uv]`
//!
//! First line out: the key's credential id and COSE public key, hex, space-separated. Then, for
//! every line in (a CTAP2 command: command byte and CBOR, hex), one line out: the
//! `CTAPHID_CBOR` reply (status byte, then CBOR), hex.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "a test tool: a bad argument or line ends it loudly"
)]

use countersign_softkey::SoftKey;
use countersign_softkey::ctap2::Ctap2Key;
use std::io::{BufRead as _, Write as _};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (fixture, rp_id) = (&args[1], &args[2]);
    let key = SoftKey::fixture(fixture).expect("a fixture key name");
    let mut key = Ctap2Key::new(key, rp_id.as_str());
    if args.get(3).map(String::as_str) == Some("--no-uv") {
        key = key.without_user_verification();
    }
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{} {}",
        hex::encode(key.key().credential_id()),
        hex::encode(key.key().cose_public_key())
    )
    .unwrap();
    out.flush().unwrap();
    for line in std::io::stdin().lock().lines() {
        let request = hex::decode(line.unwrap().trim()).expect("hex");
        writeln!(out, "{}", hex::encode(key.transmit_framed(&request))).unwrap();
        out.flush().unwrap();
    }
}
