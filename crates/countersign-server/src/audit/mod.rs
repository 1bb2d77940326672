//! The audit log as the service keeps it: the format, seal, Merkle tree, checkpoints and
//! verifier come from `countersign_audit`; the service adds the database mirror of the log file
//! ([`AuditMirror`]) and the recheck of the log against its own configuration ([`recheck`]).

mod mirror;
mod recheck;

pub use countersign_audit::{
    AUDIT_DOMAIN, AuditEvent, AuditSealer, CHECKPOINT_VERSION, CHECKPOINT_VERSION_1, Checkpoint,
    CheckpointError, CheckpointHash, EnrollmentFacts, EnrollmentSource, GENESIS_HASH,
    NotificationFacts, ORIGIN_PATH, PreauthFacts, RequestFacts, authority, default_origin,
    hashfile, line_hash, merkle, note, unsigned_line, valid_origin, verify_log,
};
pub use mirror::AuditMirror;
pub use recheck::{RecheckLine, RecheckVerdict, recheck};

impl<'a> From<&'a crate::store::PreauthDefinition> for PreauthFacts<'a> {
    fn from(d: &'a crate::store::PreauthDefinition) -> Self {
        Self {
            definition_json: &d.definition_json,
            digest: &d.digest,
        }
    }
}
