//! The core crate's one integration-test binary: one module per concern.

#[path = "../webauthn/mod.rs"]
mod webauthn;
