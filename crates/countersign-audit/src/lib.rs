//! The Countersign audit log: what the service and the MCP interposer write, and everything an
//! auditor needs to check it offline.
//!
//! - the line format and its seal ([`AuditSealer`], [`unsigned_line`], [`line_hash`]) and the
//!   events the lines record ([`AuditEvent`]);
//! - the RFC 9162 Merkle tree over the lines ([`merkle`]), its stored-hash file ([`hashfile`]),
//!   signed checkpoints ([`Checkpoint`]) as C2SP signed notes ([`note`]), and a tlog-witness
//!   ([`witness`]);
//! - the C2SP formats others read it with: tlog-tiles ([`tiles`]), tlog-proof ([`TlogProof`])
//!   and tlog-policy ([`Policy`]);
//! - offline verification of one log ([`verify_log`]) and the cross-check of a service log with
//!   an interposer log ([`cross_check`]).
//!
//! The line format is specified in docs/spec/service.md ("Audit log"). This crate links neither
//! the service's HTTP stack nor its stores: the interposer, the CLI and the fuzz targets use it
//! without the service.
#![forbid(unsafe_code)]

mod checkpoint;
mod code;
mod crosscheck;
mod events;
pub mod hashfile;
pub mod merkle;
pub mod note;
mod policy;
mod proof;
mod seal;
pub mod tiles;
mod verify;
pub mod witness;

pub use checkpoint::{
    CHECKPOINT_VERSION, CHECKPOINT_VERSION_1, Checkpoint, CheckpointError, CheckpointHash,
    LogComparison, ORIGIN_PATH, default_origin, key_id, valid_origin,
};
pub use code::{AuditCode, McpOutcome};
pub use crosscheck::{CrossIssue, CrossReport, cross_check};
pub use events::{
    AuditEvent, EnrollmentFacts, EnrollmentSource, NotificationFacts, PreauthFacts, RequestFacts,
    authority,
};
pub use policy::{Policy, PolicyError, Witnessing};
pub use proof::{
    TLOG_PROOF_EXTENSION, TLOG_PROOF_V1, TlogProof, TlogProofError, VerifiedTlogProof,
};
pub use seal::{AUDIT_DOMAIN, AuditSealer, GENESIS_HASH, SealedLine, line_hash, unsigned_line};
pub use verify::{
    AuditIssue, AuditReport, EvidenceCheck, IssueClass, VerifyOptions, verify_log, verify_log_with,
    verify_reader,
};

/// `N` random bytes from the operating system's generator.
fn random_bytes<const N: usize>() -> Result<[u8; N], getrandom::Error> {
    let mut out = [0u8; N];
    getrandom::fill(&mut out)?;
    Ok(out)
}
