//! The core crate's single integration-test binary; one module per concern.

mod canon;
mod policy_rules;
mod props;
mod standing;
mod strict_evidence;
mod verify;
mod webauthn;
