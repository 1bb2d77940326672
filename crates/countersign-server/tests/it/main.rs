//! Integration tests of the approval service (one binary: compile time matters).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "test code: a panic is a failed test (clippy.toml covers #[test] fns, not helpers)"
)]
#![allow(unreachable_pub)]

mod admission;
mod arap;
mod auditlog;
mod auditproof;
mod c2sp;
mod client;
mod enroll;
mod gateways;
mod hardening;
mod http_errors;
mod lifecycle;
mod merkle;
mod notify;
mod preauth;
mod readiness;
mod revoke;
mod standing;
mod support;
mod web;
mod webhook;
