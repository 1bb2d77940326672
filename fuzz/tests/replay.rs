//! Replay every target's seed corpus and crash regressions on stable Rust, without the fuzzer.
//!
//! A seed is cut out of the conformance vectors (`countersign_fuzz::seeds`); a regression is an
//! input the fuzzer once found crashing, kept in `fuzz/regressions/TARGET/`. Each target panics
//! on a bug, so a replay that returns is a pass.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "test code: a panic is a failed test (clippy.toml covers #[test] fns, not helpers)"
)]

use countersign_fuzz::{TARGETS, run, seeds::seeds};
use std::path::Path;

fn regressions(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("regressions")
        .join(target);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut files: Vec<_> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p.display().to_string(), bytes)
        })
        .collect()
}

fn replay(target: &str) {
    let seeds = seeds(target);
    assert!(seeds.len() >= 5, "{target}: only {} seeds", seeds.len());
    for seed in &seeds {
        assert!(run(target, seed));
    }
    for (name, bytes) in regressions(target) {
        eprintln!("{target}: regression {name}");
        assert!(run(target, &bytes));
    }
}

#[test]
fn canon() {
    replay("canon");
}

#[test]
fn cbor() {
    replay("cbor");
}

#[test]
fn cose() {
    replay("cose");
}

#[test]
fn der() {
    replay("der");
}

#[test]
fn auth_data() {
    replay("auth_data");
}

#[test]
fn client_data() {
    replay("client_data");
}

#[test]
fn envelope() {
    replay("envelope");
}

#[test]
fn case() {
    replay("case");
}

#[test]
fn harness() {
    replay("harness");
}

#[test]
fn service() {
    replay("service");
}

#[test]
fn every_target_is_replayed_and_has_a_binary() {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(here.join("Cargo.toml")).unwrap();
    for target in TARGETS {
        assert!(
            here.join(format!("fuzz_targets/{target}.rs")).is_file(),
            "{target}"
        );
        assert!(
            manifest.contains(&format!("name = \"fuzz_{target}\"")),
            "{target}"
        );
    }
    assert!(!run("no-such-target", b""));
}

#[test]
fn mcp_relay() {
    replay("mcp_relay");
}

/// The frames of issue 25 section 1 (and their neighbours): each got a held tool executed by a
/// real reader on the relay before its strict admission; none may now.
#[test]
fn mcp_relay_issue_25_frames() {
    let held =
        r#""method":"tools/call","params":{"name":"write_file","arguments":{"path":"/tmp/a"}}"#;
    let frames = [
        format!(r#"{{"jsonrpc":"2.0","id":1,"x":{}1{},{held}}}"#, "[".repeat(200), "]".repeat(200)),
        format!(r#"{{"jsonrpc":"2.0","id":2,"s":"x\ud800",{held}}}"#),
        format!(r#"{{"jsonrpc":"2.0","id":3,"n":1e400,{held}}}"#),
        format!(r#"{{"jsonrpc":"2.0","id":4,"method":"ping"}}{}{{"jsonrpc":"2.0","id":5,{held}}}"#, '\r'),
        r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"read_file","Name":"write_file"}}"#.to_owned(),
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"read_file"},"paramſ":{"name":"write_file"}}"#.to_owned(),
    ];
    let executed: Vec<&String> = frames
        .iter()
        .filter(|frame| {
            let input = format!("{frame}\n");
            std::panic::catch_unwind(|| run("mcp_relay", input.as_bytes())).is_err()
        })
        .collect();
    assert!(executed.is_empty(), "held calls relayed: {executed:#?}");
}
