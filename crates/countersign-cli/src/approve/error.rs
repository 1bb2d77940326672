//! Why `countersign approve` stopped: each variant names the check that failed. Every refusal
//! before signing is one of these, so the key is never touched for a request that would not
//! hold up.

use thiserror::Error;

/// A refusal or failure of the approve flow.
#[derive(Debug, Error)]
pub(crate) enum ApproveError {
    /// The origin to write into clientDataJSON is not one the service accepts.
    #[error(
        "origin {origin} is not one the service accepts ({}); nothing was signed",
        .allowed.join(", ")
    )]
    OriginNotAllowed {
        origin: String,
        allowed: Vec<String>,
    },
    /// No --origin, and the service names none.
    #[error("the service names no approver origin; pass --origin")]
    NoOrigin,
    /// The decision challenge's op_hash is not the one recomputed here from the fields shown.
    #[error(
        "the service's op_hash for {decision} ({service}) is not the one computed here from the \
         fields shown ({local}): it would have you sign something else; nothing was signed"
    )]
    OpHashMismatch {
        decision: &'static str,
        service: String,
        local: String,
    },
    /// The decision challenge carries other fields than the review showed.
    #[error(
        "the fields in the decision challenge differ from the fields shown; nothing was signed"
    )]
    FieldsChanged,
    /// The challenge bytes are not nonce || op_hash.
    #[error("the challenge is not nonce || op_hash of the fields shown; nothing was signed")]
    ChallengeMismatch,
    /// The decision challenge names another RP ID than the sign-in did.
    #[error(
        "the decision challenge names RP ID {decision}, the sign-in {login}; nothing was signed"
    )]
    RpIdChanged { login: String, decision: String },
    /// The fields shown as submitted do not normalize to the fields that are signed.
    #[error(
        "the submitted fields the service shows do not normalize (NFC) to the fields it asks to \
         sign; nothing was signed"
    )]
    SubmittedDiffer,
    /// The approval's profile is unknown here.
    #[error(
        "profile {0} is not built in; pass the operator's pinned profile with --profile FILE=SHA256"
    )]
    UnknownProfile(String),
    /// The fields are not admissible under their profile.
    #[error("the fields are not admissible under {profile}: {reason}")]
    Inadmissible { profile: String, reason: String },
    /// The service answered with an error.
    #[error("{what}: the service answered HTTP {status}: {message}")]
    Service {
        what: String,
        status: u16,
        message: String,
    },
    /// The service could not be reached or answered something that is not the API.
    #[error("{what}: {reason}")]
    Transport { what: String, reason: String },
    /// The security key refused or failed.
    #[error(transparent)]
    Key(#[from] super::key::KeyError),
}
