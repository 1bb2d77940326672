//! Countersign: verify that an enrolled human approved (or refused) exactly this action.
#![forbid(unsafe_code)]
// No input may panic the verifier: these lints keep panicking shortcuts out of library code.
#![cfg_attr(
    not(test),
    warn(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::indexing_slicing
    )
)]

mod canon;
mod reason;
pub mod webauthn;

pub use canon::{
    CanonError, CanonLimits, CanonicalFields, Decision, FieldKind, FieldSpec, MAX_DEPTH,
    MAX_FIELDS_BYTES, OpHash, PAYMENT_DEFINITION, Profile, ProfileError, ProfileRegistry,
    TOOL_CALL_DEFINITION, UNICODE_VERSION, admit_document, admit_fields, admit_json,
    canonical_bytes, op_hash, op_hash_document,
};
pub use reason::ReasonCode;
