//! Coverage-guided fuzz targets for Countersign, runnable on stable Rust.
//!
//! Each target in [`targets`] is a plain function over the fuzzer's bytes. It panics on a bug:
//! a panic inside the code under test, a verdict or parse that differs between two runs of the
//! same input, an ALLOW for evidence whose signature bytes were changed, or another invariant the
//! target names. The AFL++ binaries in `fuzz_targets/` (feature `afl`) only call these functions,
//! so the tests in `tests/replay.rs` can replay every seed ([`seeds`]) and every crash regression
//! (`fuzz/regressions/TARGET/`) under plain `cargo test`. How to run the fuzzer:
//! docs/RELIABILITY.md, section "Fuzzing".
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "a fuzz target reports a bug by panicking; its fixtures are fixed inputs"
)]

mod fixtures;
#[allow(dead_code, unreachable_pub)]
#[path = "../../crates/countersign-cli/src/harness.rs"]
// The harness protocol lives in the CLI binary crate, which has no library to link against; its
// line reader (`answer`) uses only external crates, so the fuzz crate compiles the same file.
mod harness;
mod readers;
pub mod seeds;
mod service;
pub mod targets;

/// Every target's name, as its corpus directory, its regression directory and its binary
/// (`fuzz_NAME`) are named.
pub const TARGETS: [&str; 11] = [
    "canon",
    "cbor",
    "cose",
    "der",
    "auth_data",
    "client_data",
    "envelope",
    "case",
    "harness",
    "service",
    "mcp_relay",
];

/// Run the target called `name` on `data`; `false` if there is no such target.
pub fn run(name: &str, data: &[u8]) -> bool {
    let target: fn(&[u8]) = match name {
        "canon" => targets::canon,
        "cbor" => targets::cbor,
        "cose" => targets::cose,
        "der" => targets::der,
        "auth_data" => targets::auth_data,
        "client_data" => targets::client_data,
        "envelope" => targets::envelope,
        "case" => targets::case,
        "harness" => targets::harness,
        "service" => targets::service,
        "mcp_relay" => targets::mcp_relay,
        _ => return false,
    };
    target(data);
    true
}
