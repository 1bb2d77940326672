//! Countersign: verify that an enrolled human approved (or refused) exactly this action.
//!
//! The entry point is [`verify_evidence`]: given the verifier's [`Policy`], the [`Action`] it is
//! about to authorize, the [`ApprovalResult`] the approval callback returned, the
//! [`CredentialRegistry`] of enrolled public keys and a [`ReplayState`], it returns a [`Verdict`]
//! that is ALLOW only when every check passed. Lower layers are public too: canonicalization and
//! op_hash ([`op_hash`]), and WebAuthn assertion verification ([`webauthn::verify_assertion`]),
//! which takes the expected challenge as bytes.
//!
//! The crate does no I/O, starts no threads and must not panic on any input.
#![forbid(unsafe_code)]
// Every public item says what it is and what it checks: auditors read the API from its docs. The
// no-panic lints come from the workspace (Cargo.toml, CONTRIBUTING.md).
#![warn(missing_docs)]

mod absent_or_value;
mod assurance;
pub mod b64;
mod binding;
mod browser_url;
mod canon;
mod case;
mod challenge;
mod policy;
mod reason;
mod registry;
pub mod replay;
mod result;
pub mod scope;
mod tool_call;
mod tool_rules;
mod verify;
pub mod webauthn;

pub use absent_or_value::present_not_null;
pub use assurance::{AssuranceBasis, AssuranceLevel, AssuranceSource, IdentityAssurance};
pub use binding::signs_operation;
pub use browser_url::{browser_url, is_this_machine};
pub use canon::{
    CanonError, CanonLimits, CanonicalFields, Decision, FieldKind, FieldSpec, MAX_DEPTH,
    MAX_FIELDS_BYTES, MCP_TOOL_CALL_DEFINITION, NfcMode, NonNfc, OpHash, PAYMENT_DEFINITION,
    Profile, ProfileError, ProfileRegistry, STANDING_GRANT_DEFINITION, STANDING_GRANT_PROFILE,
    TOOL_CALL_DEFINITION, UNICODE_VERSION, admit_document, admit_fields, admit_fields_with,
    admit_json, canonical_bytes, nfc_changes, op_hash, op_hash_document,
};
pub use case::{Case, CaseError};
pub use challenge::{
    DECISION_CHALLENGE_LEN, NONCE_LEN, decision_challenge, split_decision_challenge,
};
pub use policy::{DEFAULT_CLOCK_SKEW_SECONDS, DEFAULT_MAX_AGE_SECONDS, Policy, PolicyError};
pub use reason::ReasonCode;
pub use registry::{
    Aaguid, AttestationRecord, CredentialRecord, CredentialRegistry, EnrolledCredential,
    RegistryDocument, RegistryError,
};
pub use replay::{Enforcement, MemoryReplayState, ReplayState};
pub use result::{
    ApprovalResult, ApprovalStatus, EvidenceEntry, EvidenceSlot, ResultError, StandingGrantUse,
    WEBAUTHN_ASSERTION_FORMAT,
};
pub use scope::{Calls, OutOfScope, Scope, ScopeError};
pub use tool_call::{
    CallFieldsError, MCP_TOOL_CALL_PROFILE, TOOL_CALL_PROFILE, ToolCallParts, call_fields_json,
};
pub use tool_rules::{ApproverPolicy, ApproverRule, Groups, ToolRuleError, ToolRules};
pub use verify::{
    Action, Approver, Effect, EvidenceError, Finding, GrantScope, Verdict, VerifyError,
    grant_fields_of_scope, scope_of_grant_fields, verify_evidence, verify_evidence_with,
};
