//! The closed vocabularies of the audit log: the codes of [`crate::AuditIssue`] and
//! [`crate::CrossIssue`] ([`AuditCode`]), and the words of an interposer's `mcp_outcome` line
//! ([`McpOutcome`]). Each is declared once, with its wire name, by one macro that also writes
//! `ALL` and `as_str`, so the three cannot drift apart; a test holds each list against the table
//! that documents it (docs/spec/service.md, "Audit issue codes"; docs/MCP.md, "Audit log").

use crate::verify::IssueClass;
use serde::{Deserialize, Serialize};

/// Declares [`AuditCode`] with each code's wire name and class.
macro_rules! audit_codes {
    ($($(#[$doc:meta])* $variant:ident => $wire:literal, $class:ident;)*) => {
        /// The stable `code` of an audit finding: what `audit verify` (and its cross-check)
        /// found, one name per finding. Auditors' tooling branches on these names: each is
        /// listed, with its class, in docs/spec/service.md ("Audit issue codes").
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
        #[non_exhaustive]
        pub enum AuditCode {
            $($(#[$doc])* #[serde(rename = $wire)] $variant,)*
        }

        impl AuditCode {
            /// Every code, in declaration order.
            pub const ALL: &[Self] = &[$(Self::$variant,)*];

            /// The wire name.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $wire,)*
                }
            }

            /// Whether the finding breaks the log or is only worth knowing. Fixed per code.
            pub const fn class(self) -> IssueClass {
                match self {
                    $(Self::$variant => IssueClass::$class,)*
                }
            }
        }
    };
}

audit_codes! {
    // The file as a whole.
    /// The log is not UTF-8 text (reported alone: nothing else is read).
    NotUtf8 => "not_utf8", Violation;
    /// The last line has no newline: a torn write.
    Unterminated => "unterminated", Violation;
    // Integrity: each line's seal and its place in the chain.
    /// The line is not JSON.
    NotJson => "not_json", Violation;
    /// The line is JSON but not an object with exactly one `sig`.
    NotObject => "not_object", Violation;
    /// The line does not end with a `sig` member (and is not an interposer line a later
    /// signature covers).
    NoSignature => "no_signature", Violation;
    /// The line's signature does not verify under the key.
    BadSignature => "bad_signature", Violation;
    /// `seq` is not the previous line's plus one: a line removed, inserted or reordered.
    SeqGap => "seq_gap", Violation;
    /// `prev_hash` is not the hash of the previous line.
    ChainBreak => "chain_break", Violation;
    /// Interposer lines without a signature that no signed line follows.
    UnsignedTail => "unsigned_tail", Violation;
    // Structure: kinds and the cross-line rules.
    /// A `kind` the format does not define.
    UnknownKind => "unknown_kind", Violation;
    /// An approval line without `approval_id`.
    NoApprovalId => "no_approval_id", Violation;
    /// A status or verdict the kind does not allow.
    BadStatus => "bad_status", Violation;
    /// A second `request` line for one approval.
    DuplicateRequest => "duplicate_request", Violation;
    /// Two terminal lines (decision, settlement, at-once outcome) for one approval.
    TwoVerdicts => "two_verdicts", Violation;
    /// A PENDING outcome with no terminal line in the file.
    PendingWithoutDecision => "pending_without_decision", Informational;
    /// A decision for an approval the file does not request (requested in an earlier file).
    DecisionForUnknownApproval => "decision_for_unknown_approval", Informational;
    /// A grant for an approval the file does not decide (decided in an earlier file).
    GrantForUnknownApproval => "grant_for_unknown_approval", Informational;
    /// A second grant for one approval.
    GrantCollectedTwice => "grant_collected_twice", Violation;
    /// A grant for an approval the file settles otherwise than APPROVED, or not at all.
    GrantWithoutApproval => "grant_without_approval", Violation;
    /// A grant outside the authority its verdict recorded (another op_hash, or too late).
    GrantOutsideScope => "grant_outside_scope", Violation;
    // Credentials.
    /// A credential line without `credential_id`.
    NoCredentialId => "no_credential_id", Violation;
    /// A second enrollment of a credential id with no revocation in between.
    DuplicateEnrollment => "duplicate_enrollment", Violation;
    /// A second revocation of a credential id with no enrollment in between.
    DuplicateRevocation => "duplicate_revocation", Violation;
    /// A revocation of a credential the file never enrolled (enrolled in an earlier file).
    RevocationForUnknownCredential => "revocation_for_unknown_credential", Informational;
    /// A decision whose evidence names a credential revoked earlier in the file.
    DecisionByRevokedCredential => "decision_by_revoked_credential", Violation;
    // Evidence re-verification.
    /// A decision whose approval has no request line in the file: its action cannot be rebuilt.
    EvidenceUnverifiable => "evidence_unverifiable", Violation;
    /// A decision's evidence does not verify, or does not say what the line says.
    EvidenceRejected => "evidence_rejected", Violation;
    /// A decision's evidence nonce was already used by another decision.
    EvidenceReplayed => "evidence_replayed", Violation;
    /// A decision's credential is not enrolled (with its public key) at that line.
    CredentialUnknown => "credential_unknown", Violation;
    // The interposer's lines.
    /// An interposer line without `call_id`.
    NoCallId => "no_call_id", Violation;
    /// A second `mcp_call` line for one call id.
    McpDuplicateCall => "mcp_duplicate_call", Violation;
    /// A second `mcp_outcome` line for one call id.
    McpTwoOutcomes => "mcp_two_outcomes", Violation;
    /// An `mcp_outcome` for a call the file does not log (logged in an earlier file).
    McpOutcomeForUnknownCall => "mcp_outcome_for_unknown_call", Informational;
    /// An `executed` or `continued` outcome without `approval_ref`.
    McpExecutedWithoutApprovalRef => "mcp_executed_without_approval_ref", Violation;
    /// An intent with no outcome before the log was closed.
    McpIntentWithoutOutcome => "mcp_intent_without_outcome", Violation;
    /// An intent with no outcome in a log that was not closed after it (killed mid-call).
    McpCallInFlight => "mcp_call_in_flight", Informational;
    // Checkpoints (`audit verify --checkpoint`, `--witness-key`).
    /// The log covers a signed checkpoint.
    CheckpointCovered => "checkpoint_covered", Informational;
    /// A signed checkpoint covers more lines than the log has: lines were cut from its end.
    CheckpointTruncated => "checkpoint_truncated", Violation;
    /// A signed checkpoint's hash differs from the log's at its size.
    CheckpointDiverges => "checkpoint_diverges", Violation;
    /// A checkpoint carries the quorum of valid witness cosignatures.
    CheckpointWitnessed => "checkpoint_witnessed", Informational;
    /// A checkpoint carries fewer valid witness cosignatures than the quorum.
    CheckpointNoQuorum => "checkpoint_no_quorum", Violation;
    /// `--from`: the checkpoint's size and root are not a prefix of this log (a rewritten
    /// line before it, another log's checkpoint, or a wrong size).
    CheckpointInconsistent => "checkpoint_inconsistent", Violation;
    // The two-log cross-check (`--interposer-log`).
    /// An approval executed twice by the interposer.
    McpExecutedTwice => "mcp_executed_twice", Violation;
    /// An execution with no verdict in the service's log.
    McpExecutedWithoutDecision => "mcp_executed_without_decision", Violation;
    /// An execution whose verdict is not APPROVED.
    McpExecutedDenied => "mcp_executed_denied", Violation;
    /// An execution (or continuation) for another op_hash than the verdict or grant.
    McpOpHashMismatch => "mcp_op_hash_mismatch", Violation;
    /// An executed approval with more than one verdict line.
    McpTwoDecisions => "mcp_two_decisions", Violation;
    /// An execution with no collected grant in the service's log.
    McpExecutedWithoutGrant => "mcp_executed_without_grant", Violation;
    /// An executed approval with more than one collected grant.
    McpTwoGrants => "mcp_two_grants", Violation;
    /// A continuation with no earlier execution of the approval.
    McpContinuedWithoutExecution => "mcp_continued_without_execution", Violation;
    /// A grant collected while the interposer's intent for its op_hash has no outcome.
    McpGrantInFlight => "mcp_grant_in_flight", Informational;
    /// A grant collected for an approval the interposer referenced but never executed.
    McpGrantNotExecuted => "mcp_grant_not_executed", Violation;
    /// A grant for this interposer's agent and server that its log never mentions.
    McpGrantUnattributed => "mcp_grant_unattributed", Informational;
}

impl std::fmt::Display for AuditCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<str> for AuditCode {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for AuditCode {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// Declares [`McpOutcome`] with each word's wire name.
macro_rules! mcp_outcomes {
    ($($(#[$doc:meta])* $variant:ident => $wire:literal,)*) => {
        /// What happened to an MCP call, as an interposer's `mcp_outcome` line says it
        /// (docs/MCP.md, "Audit log", where each word is listed; a test checks the list).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[non_exhaustive]
        pub enum McpOutcome {
            $($(#[$doc])* #[serde(rename = $wire)] $variant,)*
        }

        impl McpOutcome {
            /// Every word, in declaration order.
            pub const ALL: &[Self] = &[$(Self::$variant,)*];

            /// The wire name.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $wire,)*
                }
            }

            /// The word for `wire`, if it is one.
            pub fn from_wire(wire: &str) -> Option<Self> {
                match wire {
                    $($wire => Some(Self::$variant),)*
                    _ => None,
                }
            }
        }
    };
}

mcp_outcomes! {
    /// The call's rule let it through: forwarded to the upstream at once.
    Allowed => "allowed",
    /// The call is held; a human is asked (`approval_id` names the approval).
    PendingApproval => "pending_approval",
    /// The call was refused: by its rule, by the human, or because the approval could not be
    /// completed (`reason_code` says which).
    Denied => "denied",
    /// A held call, approved and its grant collected, was forwarded (`approval_ref`).
    Executed => "executed",
    /// The client's answer to the upstream's own input request was passed on for an approved
    /// call (a nested round trip; `approval_ref` names the approval).
    Continued => "continued",
}

impl std::fmt::Display for McpOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// The first-column names (`| \`name\` |`) of the table that follows `heading` in `doc`,
    /// up to the next heading.
    fn documented(doc: &str, heading: &str) -> BTreeSet<String> {
        let section = doc
            .split_once(heading)
            .map(|(_, rest)| rest)
            .unwrap_or_else(|| panic!("no {heading:?} section"));
        let section = section.split("\n#").next().unwrap_or(section);
        section
            .lines()
            .filter_map(|l| l.strip_prefix("| `"))
            .filter_map(|l| l.split_once('`'))
            .map(|(name, _)| name.to_owned())
            .collect()
    }

    fn differences(declared: &[&str], documented: &BTreeSet<String>) -> (Vec<String>, Vec<String>) {
        let declared: BTreeSet<String> = declared.iter().map(|s| (*s).to_owned()).collect();
        (
            declared.difference(documented).cloned().collect(),
            documented.difference(&declared).cloned().collect(),
        )
    }

    #[test]
    fn every_audit_code_is_documented_and_every_documented_code_exists() {
        let doc = include_str!("../../../docs/spec/service.md");
        let names: Vec<&str> = AuditCode::ALL.iter().map(|c| c.as_str()).collect();
        let (missing, extra) = differences(&names, &documented(doc, "#### Audit issue codes"));
        assert!(
            missing.is_empty(),
            "codes missing from the table: {missing:?}"
        );
        assert!(
            extra.is_empty(),
            "documented codes that do not exist: {extra:?}"
        );
    }

    #[test]
    fn the_documented_class_of_each_code_is_its_class() {
        let doc = include_str!("../../../docs/spec/service.md");
        for code in AuditCode::ALL {
            let row = format!(
                "| `{}` | {} |",
                code.as_str(),
                match code.class() {
                    IssueClass::Violation => "violation",
                    IssueClass::Informational => "informational",
                }
            );
            assert!(doc.contains(&row), "no row {row:?}");
        }
    }

    #[test]
    fn every_mcp_outcome_is_documented_and_every_documented_word_exists() {
        let doc = include_str!("../../../docs/MCP.md");
        let names: Vec<&str> = McpOutcome::ALL.iter().map(|c| c.as_str()).collect();
        let (missing, extra) = differences(&names, &documented(doc, "### Outcome words"));
        assert!(
            missing.is_empty(),
            "words missing from the table: {missing:?}"
        );
        assert!(
            extra.is_empty(),
            "documented words that do not exist: {extra:?}"
        );
    }

    #[test]
    fn the_table_reader_sees_a_missing_and_an_extra_name() {
        let doc = "#### T\n\n| name | x |\n|---|---|\n| `a` | 1 |\n| `c` | 2 |\n\n## next\n| `z` |";
        let (missing, extra) = differences(&["a", "b"], &documented(doc, "#### T"));
        assert_eq!(
            (missing, extra),
            (vec!["b".to_owned()], vec!["c".to_owned()])
        );
    }

    #[test]
    fn wire_names_are_unique_and_serialize_as_declared() {
        for code in AuditCode::ALL {
            assert_eq!(
                serde_json::to_value(code).unwrap(),
                serde_json::Value::from(code.as_str())
            );
        }
        let mut names: Vec<&str> = AuditCode::ALL.iter().map(|c| c.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), AuditCode::ALL.len(), "two codes share a name");
        for word in McpOutcome::ALL {
            let json = serde_json::to_value(word).unwrap();
            assert_eq!(json, serde_json::Value::from(word.as_str()));
            assert_eq!(serde_json::from_value::<McpOutcome>(json).unwrap(), *word);
            assert_eq!(McpOutcome::from_wire(word.as_str()), Some(*word));
        }
        assert_eq!(McpOutcome::from_wire("ALLOWED"), None);
        assert_eq!(McpOutcome::from_wire("maybe"), None);
    }
}
