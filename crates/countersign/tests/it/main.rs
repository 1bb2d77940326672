//! The core crate's single integration-test binary; one module per concern.

#[path = "../canon/mod.rs"]
mod canon;
mod policy_rules;
mod props;
mod standing;
mod strict_evidence;
mod verify;
#[path = "../webauthn/mod.rs"]
mod webauthn;
