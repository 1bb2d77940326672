//! The CLI's single integration-test binary: one module per concern, one build of `support`
//! (compile time matters on a 2-core machine; nine binaries compiled it nine times).
//!
//! Run one concern with a filter: `cargo test -p countersign-cli --test it replicas::`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "test code: a panic is a failed test (clippy.toml covers #[test] fns, not helpers)"
)]

#[cfg(feature = "testing")]
mod approve;
mod audit;
mod auditor;
mod browser;
mod contract;
mod credential;
mod crosscheck;
mod demo;
mod faults;
mod gateway;
mod origins;
mod preauth;
mod readme;
mod replicas;
mod serve;
mod support;
mod verify;
mod witness;
