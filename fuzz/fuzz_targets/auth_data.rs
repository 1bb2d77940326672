//! AFL++ entry point for the `auth_data` target: the body, its oracles and its seeds are in
//! `countersign_fuzz::targets` so that `cargo test` replays them without the fuzzer.
//! Build with `cargo afl build -p countersign-fuzz --features afl`; see docs/RELIABILITY.md.

fn main() {
    countersign_fuzz::targets::warm_up();
    afl::fuzz!(|data: &[u8]| {
        countersign_fuzz::targets::auth_data(data);
    });
}
