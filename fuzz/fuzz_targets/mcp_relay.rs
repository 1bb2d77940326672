//! AFL++ entry point for the `mcp_relay` target: the body and its oracle are in
//! `countersign_fuzz::targets` so that `cargo test` replays them without the fuzzer.
//! Build with `cargo afl build -p countersign-fuzz --features afl`; see docs/RELIABILITY.md.

fn main() {
    afl::fuzz!(|data: &[u8]| {
        countersign_fuzz::targets::mcp_relay(data);
    });
}
