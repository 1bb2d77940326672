//! The core crate's single integration-test binary; one module per concern.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "test code: a panic is a failed test (clippy.toml covers #[test] fns, not helpers)"
)]

mod canon;
mod policy_rules;
mod props;
mod standing;
mod strict_evidence;
mod verify;
mod webauthn;
