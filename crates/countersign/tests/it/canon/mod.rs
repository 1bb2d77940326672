//! Canonicalization: admission, profiles, op_hash, RFC 8785 vectors and properties.

/// Assert that `$result` is an `Err` matching `$pattern`, printing what it was otherwise.
macro_rules! refused {
    ($result:expr, $pattern:pat $(if $guard:expr)?) => {{
        let result = $result;
        assert!(matches!(result, Err($pattern) $(if $guard)?), "got {result:?}");
    }};
}

mod admission;
mod fields;
mod jcs_vectors;
mod op_hash;
mod profiles;
mod props;

use countersign::{CanonError, CanonLimits, Profile, ProfileRegistry};
use serde_json::Value;
use std::path::PathBuf;

/// The shared third-party vectors, or `None` (with a message) when they are not beside the repo.
pub(crate) fn vectors_dir(sub: &str) -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/vectors")
        .join(sub);
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!("skipping: {} not found", dir.display());
        None
    }
}

pub(crate) fn strict(raw: &str) -> Result<Value, CanonError> {
    countersign::admit_json(raw.as_bytes(), CanonLimits::STRICT)
}

pub(crate) fn floats(raw: &str) -> Result<Value, CanonError> {
    countersign::admit_json(raw.as_bytes(), CanonLimits::STRICT.with_floats(true))
}

pub(crate) fn builtin(id: &str) -> Profile {
    match ProfileRegistry::builtin().get(id) {
        Some(p) => p.clone(),
        None => panic!("built-in profile {id} missing"),
    }
}

pub(crate) fn tool_call() -> Profile {
    builtin("countersign.tool-call/1")
}

pub(crate) fn payment() -> Profile {
    builtin("countersign.payment/1")
}

pub(crate) fn hex32(b: &[u8; 32]) -> String {
    hex::encode(b)
}
