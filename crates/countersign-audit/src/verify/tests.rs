use super::*;
use crate::{AuditEvent, AuditSealer};
use crate::{Checkpoint, CheckpointHash};
use crate::{GENESIS_HASH, line_hash};
use countersign::b64;
use serde_json::Value;

fn log(events: &[AuditEvent]) -> (AuditSealer, Vec<String>) {
    log_signed_at(events, |_| true)
}

fn verify(sealer: &AuditSealer, lines: &[String]) -> AuditReport {
    let mut text = lines.join("\n");
    text.push('\n');
    verify_log(text.as_bytes(), &sealer.public_key())
}

fn codes(r: &AuditReport, class: IssueClass) -> Vec<&'static str> {
    r.issues
        .iter()
        .filter(|i| i.class == class)
        .map(|i| i.code.as_str())
        .collect()
}

const T: &str = "2026-01-01T00:00:00Z";

/// An approval whose outcome records `one_call` authority for op_hash [1; 32] until `until`,
/// and a grant for `fingerprint` at `at`.
fn scoped(fingerprint: &[u8; 32], at: &str, until: &str) -> Vec<AuditEvent> {
    let granted = crate::authority(Some(&[1; 32]), Some(until), "tool_rule", None);
    vec![
        AuditEvent::outcome("s", T, "APPROVED", None).with_member("authority", granted),
        AuditEvent::grant("s", at, &b64::encode(fingerprint)),
    ]
}

#[test]
fn a_grant_outside_the_recorded_authority_is_a_violation() {
    let later = "2026-01-01T00:01:00Z";
    let (sealer, lines) = log(&scoped(&[1; 32], T, later));
    assert!(codes(&verify(&sealer, &lines), IssueClass::Violation).is_empty());
    let (sealer, lines) = log(&scoped(&[2; 32], T, later));
    assert_eq!(
        codes(&verify(&sealer, &lines), IssueClass::Violation),
        ["grant_outside_scope"]
    );
    let (sealer, lines) = log(&scoped(&[1; 32], later, later));
    assert_eq!(
        codes(&verify(&sealer, &lines), IssueClass::Violation),
        ["grant_outside_scope"]
    );
}

fn lifecycle(id: &str) -> Vec<AuditEvent> {
    let fields = serde_json::json!({"a": 1});
    vec![
        AuditEvent::request(&crate::events::RequestFacts {
            approval_id: id,
            ts: T,
            agent_id: "agent",
            tool_name: "tool",
            profile: "p",
            fields: &fields,
            submitted_sha256: "00",
            submitted_text: None,
            severity: "high",
            expires_at: T,
            fingerprint: "fp",
        }),
        AuditEvent::outcome(id, T, "PENDING", None),
        AuditEvent::decision(id, T, "APPROVED", "alice", &Value::Null, &Value::Null),
        AuditEvent::grant(id, T, "fp"),
    ]
}

fn mcp(kind: &str, call: &str, outcome: Option<&str>) -> AuditEvent {
    let mut body = serde_json::json!({"kind": kind, "ts": "2026-12-03T13:00:00Z"});
    if kind != "mcp_close" {
        body["call_id"] = call.into();
    }
    if let Some(o) = outcome {
        body["outcome"] = o.into();
    }
    if matches!(outcome, Some("executed" | "continued")) {
        body["approval_ref"] = "apr_1".into();
    }
    match body {
        Value::Object(map) => AuditEvent::from_body(map),
        _ => unreachable!(),
    }
}

#[test]
fn a_continued_call_names_its_approval() {
    let (sealer, lines) = log(&[
        mcp("mcp_call", "c1", None),
        mcp("mcp_outcome", "c1", Some("continued")),
        mcp("mcp_close", "", None),
    ]);
    let r = verify(&sealer, &lines);
    assert!(r.is_valid() && r.issues.is_empty(), "{r:?}");
    let body = serde_json::json!({"kind": "mcp_outcome", "ts": "2026-12-03T13:00:00Z",
                                  "call_id": "c1", "outcome": "continued"});
    let Value::Object(body) = body else {
        unreachable!()
    };
    let outcome = AuditEvent::from_body(body);
    let (sealer, lines) = log(&[mcp("mcp_call", "c1", None), outcome]);
    let r = verify(&sealer, &lines);
    assert_eq!(
        codes(&r, IssueClass::Violation),
        ["mcp_executed_without_approval_ref"]
    );
}

#[test]
fn mcp_intents_need_one_outcome_before_the_log_closes() {
    let (sealer, lines) = log(&[
        mcp("mcp_call", "c1", None),
        mcp("mcp_outcome", "c1", Some("pending_approval")),
        mcp("mcp_call", "c2", None),
        mcp("mcp_outcome", "c2", Some("executed")),
        mcp("mcp_close", "", None),
    ]);
    let r = verify(&sealer, &lines);
    assert!(r.is_valid(), "{r:?}");
    assert!(r.issues.is_empty(), "{r:?}");

    let (sealer, lines) = log(&[mcp("mcp_call", "c1", None), mcp("mcp_close", "", None)]);
    let r = verify(&sealer, &lines);
    assert_eq!(
        codes(&r, IssueClass::Violation),
        ["mcp_intent_without_outcome"]
    );

    // Not closed (the interposer was killed mid-call): informational only.
    let (sealer, lines) = log(&[mcp("mcp_call", "c1", None)]);
    let r = verify(&sealer, &lines);
    assert!(r.is_valid(), "{r:?}");
    assert_eq!(codes(&r, IssueClass::Informational), ["mcp_call_in_flight"]);

    let (sealer, lines) = log(&[
        mcp("mcp_call", "c1", None),
        mcp("mcp_outcome", "c1", Some("allowed")),
        mcp("mcp_outcome", "c1", Some("denied")),
    ]);
    let r = verify(&sealer, &lines);
    assert_eq!(codes(&r, IssueClass::Violation), ["mcp_two_outcomes"]);
}

/// `events` chained, with a signature only on the lines whose 1-based number `signed` accepts
/// (every line: as the service writes; the last of each write: as the interposer does).
fn log_signed_at(
    events: &[AuditEvent],
    signed: impl Fn(usize) -> bool,
) -> (AuditSealer, Vec<String>) {
    let sealer = AuditSealer::from_seed([9; 32]);
    let mut prev = GENESIS_HASH;
    let lines = events
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let seq = i as u64 + 1;
            let text = crate::unsigned_line(seq, &prev, e);
            let line = if signed(i + 1) {
                sealer.sign(seq, &text).line
            } else {
                text
            };
            prev = line_hash(&line);
            line
        })
        .collect();
    (sealer, lines)
}

fn calls(n: usize) -> Vec<AuditEvent> {
    (0..n)
        .flat_map(|i| {
            let id = format!("c{i}");
            [
                mcp("mcp_call", &id, None),
                mcp("mcp_outcome", &id, Some("executed")),
            ]
        })
        .collect()
}

#[test]
fn a_signed_interposer_line_covers_the_unsigned_lines_before_it() {
    // Two writes: lines 1-3 (3 signed), lines 4-6 (6 signed).
    let (sealer, lines) = log_signed_at(&calls(3), |n| [3, 6].contains(&n));
    assert!(!lines[0].contains("\"sig\""));
    let r = verify(&sealer, &lines);
    assert!(r.is_valid(), "{r:?}");
    assert!(r.issues.is_empty(), "{r:?}");
    // Sealing every line is the same log to the verifier.
    let (sealer, every) = log(&calls(3));
    assert!(verify(&sealer, &every).issues.is_empty());
}

#[test]
fn unsigned_lines_that_no_signature_covers_are_violations() {
    // The last write lost its signed line (or someone appended without the key).
    let (sealer, lines) = log_signed_at(&calls(3), |n| n == 3);
    let r = verify(&sealer, &lines);
    assert_eq!(codes(&r, IssueClass::Violation), ["unsigned_tail"], "{r:?}");
    assert_eq!(r.issues[0].line, 4);
    assert!(r.issues[0].detail.contains("lines 4 to 6"), "{r:?}");
    // An unsigned line edited: the next line's prev_hash no longer matches, and it is the
    // signed line's chain that says so.
    let (sealer, mut lines) = log_signed_at(&calls(2), |n| n == 4);
    lines[1] = lines[1].replace("executed", "denied");
    let r = verify(&sealer, &lines);
    assert_eq!(codes(&r, IssueClass::Violation), ["chain_break"], "{r:?}");
    assert_eq!(r.issues[0].line, 3);
    // A signature stripped from a signed line changes that line's hash: the chain breaks.
    let (sealer, mut lines) = log_signed_at(&calls(2), |n| [2, 4].contains(&n));
    let cut = lines[1].rfind(",\"sig\":").unwrap();
    lines[1] = format!("{}}}", &lines[1][..cut]);
    let r = verify(&sealer, &lines);
    assert_eq!(codes(&r, IssueClass::Violation), ["chain_break"], "{r:?}");
    // The service signs every line: an unsigned service line is a violation wherever it is.
    let mut events = lifecycle("a");
    events.extend(calls(1));
    let last = events.len();
    let (sealer, lines) = log_signed_at(&events, |n| n == last);
    let r = verify(&sealer, &lines);
    assert!(
        codes(&r, IssueClass::Violation)
            .iter()
            .all(|c| *c == "no_signature"),
        "{r:?}"
    );
    assert_eq!(codes(&r, IssueClass::Violation).len(), last - 2, "{r:?}");
}

#[test]
fn a_clean_lifecycle_verifies() {
    let (s, lines) = log(&lifecycle("a"));
    let r = verify(&s, &lines);
    assert!(r.is_valid(), "{r:?}");
    assert_eq!(r.lines, 4);
    assert!(r.issues.is_empty());
}

#[test]
fn edited_removed_and_reordered_lines_are_violations() {
    let (s, lines) = log(&lifecycle("a"));
    let mut edited = lines.clone();
    edited[2] = edited[2].replace("alice", "mallory");
    assert_eq!(
        codes(&verify(&s, &edited), IssueClass::Violation),
        ["bad_signature", "chain_break"]
    );
    let mut removed = lines.clone();
    removed.remove(1);
    let r = verify(&s, &removed);
    assert!(codes(&r, IssueClass::Violation).contains(&"chain_break"));
    assert!(codes(&r, IssueClass::Violation).contains(&"seq_gap"));
    let mut reordered = lines.clone();
    reordered.swap(1, 2);
    assert!(!verify(&s, &reordered).is_valid());
    let other = AuditSealer::from_seed([1; 32]);
    assert!(!verify(&other, &lines).is_valid());
    let unterminated = lines.join("\n");
    assert!(!verify_log(unterminated.as_bytes(), &s.public_key()).is_valid());
}

#[test]
fn seed_rules_pending_and_unknown_are_informational_two_verdicts_violate() {
    let (s, lines) = log(&[AuditEvent::outcome("p", T, "PENDING", None)]);
    let r = verify(&s, &lines);
    assert!(r.is_valid());
    assert_eq!(
        codes(&r, IssueClass::Informational),
        ["pending_without_decision"]
    );

    let (s, lines) = log(&[AuditEvent::decision(
        "x",
        T,
        "DENIED",
        "bob",
        &Value::Null,
        &Value::Null,
    )]);
    let r = verify(&s, &lines);
    assert!(r.is_valid());
    assert_eq!(
        codes(&r, IssueClass::Informational),
        ["decision_for_unknown_approval"]
    );

    let mut events = lifecycle("a");
    events.insert(
        3,
        AuditEvent::decision("a", T, "DENIED", "bob", &Value::Null, &Value::Null),
    );
    let (s, lines) = log(&events);
    assert_eq!(
        codes(&verify(&s, &lines), IssueClass::Violation),
        ["two_verdicts"]
    );

    let mut events = lifecycle("a");
    events.insert(2, AuditEvent::settlement("a", T, "expired_unanswered"));
    let (s, lines) = log(&events);
    let r = verify(&s, &lines);
    assert_eq!(
        codes(&r, IssueClass::Violation),
        ["two_verdicts", "grant_without_approval"]
    );

    let mut events = lifecycle("a");
    events.push(AuditEvent::grant("a", T, "fp"));
    let (s, lines) = log(&events);
    assert_eq!(
        codes(&verify(&s, &lines), IssueClass::Violation),
        ["grant_collected_twice"]
    );
}

fn decided_by(id: &str, credential: &str) -> AuditEvent {
    let evidence = serde_json::json!({"credential_id": credential, "format": "webauthn"});
    AuditEvent::decision(id, T, "APPROVED", "alice", &Value::Null, &evidence)
}

fn enrolled(credential: &[u8]) -> AuditEvent {
    let record = countersign::CredentialRecord {
        credential_id: credential.to_vec(),
        principal: "alice".into(),
        public_key: vec![1],
        aaguid: None,
        backup_eligible: None,
        attestation: None,
        sign_count: 0,
        revoked: false,
    };
    AuditEvent::enrollment_of(T, &record, Some("ops"), crate::EnrollmentSource::Invite)
}

fn revoked(credential: &[u8]) -> AuditEvent {
    AuditEvent::revocation(T, "alice", credential, "lost")
}

#[test]
fn credential_lines_need_no_approval_id_and_say_what_they_record() {
    let (s, lines) = log(&[enrolled(b"k1"), revoked(b"k1")]);
    let r = verify(&s, &lines);
    assert!(r.is_valid(), "{r:?}");
    assert!(r.issues.is_empty(), "{r:?}");
    let line: Value = serde_json::from_str(&lines[0]).unwrap_or_default();
    assert_eq!(line["kind"], "enrollment");
    assert_eq!(line["credential_id"], countersign::b64::encode(b"k1"));
    assert_eq!(line["aaguid"], Value::Null);
    assert_eq!(line["attestation_format"], "none");
    assert_eq!(line["chain_verified"], false);
    assert_eq!(line["group"], "ops");
    assert_eq!(line["source"], "invite");
    assert!(line.get("approval_id").is_none());
    let line: Value = serde_json::from_str(&lines[1]).unwrap_or_default();
    assert_eq!(line["kind"], "revocation");
    assert_eq!(line["reason"], "lost");
    // Without a credential id the line says nothing checkable.
    let mut bare = revoked(b"k1");
    bare.remove("credential_id");
    let (s, lines) = log(&[bare]);
    assert_eq!(
        codes(&verify(&s, &lines), IssueClass::Violation),
        ["no_credential_id"]
    );
    // Other kinds still need their approval id.
    let mut outcome = AuditEvent::outcome("a", T, "PENDING", None);
    outcome.remove("approval_id");
    let (s, lines) = log(&[outcome]);
    assert_eq!(
        codes(&verify(&s, &lines), IssueClass::Violation),
        ["no_approval_id"]
    );
}

#[test]
fn a_revocation_without_enrollment_in_the_file_is_informational() {
    let (s, lines) = log(&[revoked(b"k1")]);
    let r = verify(&s, &lines);
    assert!(r.is_valid());
    assert_eq!(
        codes(&r, IssueClass::Informational),
        ["revocation_for_unknown_credential"]
    );
    // Negative: enrolled in this file, nothing to report.
    let (s, lines) = log(&[enrolled(b"k1"), revoked(b"k1")]);
    assert!(verify(&s, &lines).issues.is_empty());
}

#[test]
fn a_second_enrollment_needs_a_revocation_in_between() {
    let (s, lines) = log(&[enrolled(b"k1"), enrolled(b"k2"), enrolled(b"k1")]);
    let r = verify(&s, &lines);
    assert_eq!(codes(&r, IssueClass::Violation), ["duplicate_enrollment"]);
    assert_eq!(r.issues.first().map(|i| i.line), Some(3));
    // Negative: revoked in between, the same id may be enrolled again.
    let (s, lines) = log(&[enrolled(b"k1"), revoked(b"k1"), enrolled(b"k1")]);
    let r = verify(&s, &lines);
    assert!(r.is_valid() && r.issues.is_empty(), "{r:?}");
}

#[test]
fn a_second_revocation_needs_an_enrollment_in_between() {
    let (s, lines) = log(&[enrolled(b"k1"), revoked(b"k1"), revoked(b"k1")]);
    assert_eq!(
        codes(&verify(&s, &lines), IssueClass::Violation),
        ["duplicate_revocation"]
    );
    let (s, lines) = log(&[revoked(b"k1"), enrolled(b"k1"), revoked(b"k1")]);
    assert!(verify(&s, &lines).is_valid());
}

#[test]
fn a_decision_by_a_revoked_credential_is_a_violation() {
    let k1 = countersign::b64::encode(b"k1");
    let mut events = vec![enrolled(b"k1"), revoked(b"k1")];
    events.extend(lifecycle("a"));
    events[4] = decided_by("a", &k1);
    let (s, lines) = log(&events);
    let r = verify(&s, &lines);
    assert_eq!(
        codes(&r, IssueClass::Violation),
        ["decision_by_revoked_credential"]
    );
    assert_eq!(r.issues.first().map(|i| i.line), Some(5));
    // Evidence as an array is read the same way.
    let array = AuditEvent::decision(
        "a",
        T,
        "DENIED",
        "alice",
        &Value::Null,
        &serde_json::json!([{"credential_id": k1}]),
    );
    let (s, lines) = log(&[revoked(b"k1"), array]);
    assert_eq!(
        codes(&verify(&s, &lines), IssueClass::Violation),
        ["decision_by_revoked_credential"]
    );
    // Negative: decided before the revocation, or by another credential, or after a
    // re-enrollment.
    let mut events = vec![enrolled(b"k1")];
    events.extend(lifecycle("a"));
    events[3] = decided_by("a", &k1);
    events.push(revoked(b"k1"));
    let (s, lines) = log(&events);
    let r = verify(&s, &lines);
    assert!(r.is_valid() && r.issues.is_empty(), "{r:?}");
    let mut events = vec![enrolled(b"k1"), revoked(b"k1")];
    events.extend(lifecycle("a"));
    events[4] = decided_by("a", &countersign::b64::encode(b"k2"));
    let (s, lines) = log(&events);
    assert!(verify(&s, &lines).is_valid());
    let mut events = vec![enrolled(b"k1"), revoked(b"k1"), enrolled(b"k1")];
    events.extend(lifecycle("a"));
    events[5] = decided_by("a", &k1);
    let (s, lines) = log(&events);
    assert!(verify(&s, &lines).is_valid());
}

proptest::proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..400)) {
        let key = AuditSealer::from_seed([3; 32]).public_key();
        let r = verify_log(&bytes, &key);
        proptest::prop_assert!(bytes.is_empty() || !r.is_valid() || r.lines == 0);
    }
}

/// `lines` as a log file's bytes.
fn file(lines: &[String]) -> Vec<u8> {
    let mut text = lines.join("\n");
    text.push('\n');
    text.into_bytes()
}

/// A log whose findings cover every checker: lifecycles, an edited seal, a second verdict,
/// interposer lines with one left open, a pending approval and credential lines.
fn eventful() -> (AuditSealer, Vec<String>) {
    let mut events = Vec::new();
    for i in 0..40 {
        events.extend(lifecycle(&format!("a{i}")));
    }
    events.push(AuditEvent::decision(
        "a3",
        T,
        "DENIED",
        "bob",
        &Value::Null,
        &Value::Null,
    ));
    events.push(AuditEvent::outcome("p", T, "PENDING", None));
    events.push(revoked(b"never-enrolled"));
    events.push(mcp("mcp_call", "c1", None));
    events.push(mcp("mcp_call", "c2", None));
    events.push(mcp("mcp_outcome", "c2", Some("allowed")));
    events.push(mcp("mcp_outcome", "c2", Some("denied")));
    let (sealer, mut lines) = log(&events);
    // A flipped signature byte on line 7: bad_signature there, nothing else.
    if let Some(line) = lines.get_mut(6) {
        let at = line.len() - 5;
        let flipped = if line.as_bytes()[at] == b'A' {
            "B"
        } else {
            "A"
        };
        line.replace_range(at..at + 1, flipped);
    }
    (sealer, lines)
}

#[test]
fn the_streaming_walk_reports_what_the_whole_file_walk_reports() {
    let (sealer, lines) = eventful();
    let bytes = file(&lines);
    let whole = verify_log(&bytes, &sealer.public_key());
    let found: Vec<&str> = whole.issues.iter().map(|i| i.code.as_str()).collect();
    assert!(
        found.contains(&"bad_signature") && found.contains(&"two_verdicts"),
        "{found:?}"
    );
    assert_eq!(found.last(), Some(&"pending_without_decision"));
    // Read through an 8-byte buffer: lines arrive in pieces; same report, issue for issue.
    let reader = std::io::BufReader::with_capacity(8, bytes.as_slice());
    let streamed = verify_reader(reader, &sealer.public_key(), &VerifyOptions::default()).unwrap();
    assert_eq!(streamed.issues, whole.issues);
    assert_eq!((streamed.lines, &streamed.head), (whole.lines, &whole.head));
}

#[test]
fn a_log_longer_than_one_flush_keeps_its_findings_in_line_order() {
    let mut events = Vec::new();
    for i in 0..(FLUSH_LINES / 4 + 10) {
        events.extend(lifecycle(&format!("a{i}")));
    }
    let (sealer, mut lines) = log(&events);
    // Edit a line in the first flush and one in the second: each is its own bad_signature.
    for at in [6, FLUSH_LINES + 6] {
        lines[at] = lines[at].replace("\"alice\"", "\"mallory\"");
    }
    let r = verify(&sealer, &lines);
    let bad: Vec<(usize, &str)> = r.issues.iter().map(|i| (i.line, i.code.as_str())).collect();
    assert_eq!(
        bad,
        [
            (7, "bad_signature"),
            (8, "chain_break"),
            (FLUSH_LINES + 7, "bad_signature"),
            (FLUSH_LINES + 8, "chain_break")
        ],
        "{r:?}"
    );
}

#[test]
fn invalid_utf8_anywhere_is_reported_alone_and_one_newline_is_an_empty_log() {
    let (sealer, lines) = log(&lifecycle("a"));
    let mut bytes = file(&lines);
    let at = bytes.len() / 2;
    bytes.insert(at, 0xff);
    let r = verify_log(&bytes, &sealer.public_key());
    assert_eq!(
        r.issues.iter().map(|i| i.code.as_str()).collect::<Vec<_>>(),
        ["not_utf8"]
    );
    assert_eq!((r.lines, r.head.as_str()), (0, ""));

    let r = verify_log(b"\n", &sealer.public_key());
    assert!(r.issues.is_empty() && r.lines == 0, "{r:?}");
    let r = verify_log(b"\n\n", &sealer.public_key());
    assert_eq!(r.lines, 2, "{r:?}");
    assert!(!r.is_valid());
}

/// A Merkle checkpoint of the first `size` lines, signed by `sealer`.
fn checkpoint_of(sealer: &AuditSealer, lines: &[String], size: usize) -> Checkpoint {
    let tree = crate::merkle::MerkleTree::from_lines(lines.iter().take(size).map(|l| l.as_bytes()));
    let cp = Checkpoint {
        origin: "log.example/countersign/audit".into(),
        size: size as u64,
        hash: tree.root(size as u64).unwrap(),
        time: T.into(),
        kind: CheckpointHash::MerkleRoot,
    };
    let note = sealer.sign_checkpoint(&cp).unwrap();
    Checkpoint::verify(&note, &sealer.public_key(), None).unwrap()
}

fn verify_from(sealer: &AuditSealer, lines: &[String], from: &Checkpoint) -> AuditReport {
    let bytes = file(lines);
    let options = VerifyOptions {
        from: Some(from),
        ..VerifyOptions::default()
    };
    verify_reader(bytes.as_slice(), &sealer.public_key(), &options).unwrap()
}

#[test]
fn from_a_checkpoint_the_appended_lines_are_verified_with_the_state_before_them() {
    let mut events = lifecycle("a");
    events.extend(lifecycle("b"));
    events.push(AuditEvent::outcome("c", T, "PENDING", None));
    let (sealer, lines) = log(&events);
    // "b" is requested before the checkpoint and decided after it: not "for an unknown
    // approval", and its evidence state carries over.
    let cp = checkpoint_of(&sealer, &lines, 5);
    let r = verify_from(&sealer, &lines, &cp);
    assert!(r.is_valid(), "{r:?}");
    assert_eq!(r.lines, lines.len());
    // The pending approval is still reported: the state at the end of the log.
    assert_eq!(
        codes(&r, IssueClass::Informational),
        ["pending_without_decision"]
    );

    // A finding before the checkpoint was reported when it was verified: not again. After it,
    // a second verdict for an approval settled before the checkpoint is still caught.
    let mut events = lifecycle("a");
    events.insert(1, AuditEvent::outcome("x", T, "BOGUS", None));
    events.push(AuditEvent::settlement("a", T, "expired_unanswered"));
    let (sealer, lines) = log(&events);
    let cp = checkpoint_of(&sealer, &lines, 5);
    let r = verify_from(&sealer, &lines, &cp);
    assert_eq!(codes(&r, IssueClass::Violation), ["two_verdicts"], "{r:?}");
    assert_eq!(r.issues[0].line, 6);
}

#[test]
fn from_a_checkpoint_a_rewritten_line_another_log_or_a_wrong_size_is_inconsistent() {
    let mut events = lifecycle("a");
    events.extend(lifecycle("b"));
    let (sealer, lines) = log(&events);
    let cp = checkpoint_of(&sealer, &lines, 4);

    // A line before the checkpoint rewritten (and re-sealed with the key, so only the Merkle
    // root can tell).
    let (_, other) = log(&{
        let mut e = lifecycle("a");
        e[2] = AuditEvent::decision("a", T, "DENIED", "alice", &Value::Null, &Value::Null);
        e.extend(lifecycle("b"));
        e
    });
    let r = verify_from(&sealer, &other, &cp);
    assert_eq!(
        codes(&r, IssueClass::Violation),
        ["checkpoint_inconsistent"],
        "{r:?}"
    );
    assert_eq!(r.issues[0].line, 5);

    // Another log's checkpoint, signed by the same key.
    let (_, unrelated) = log(&lifecycle("z"));
    let foreign = checkpoint_of(&sealer, &unrelated, 4);
    let r = verify_from(&sealer, &lines, &foreign);
    assert_eq!(
        codes(&r, IssueClass::Violation),
        ["checkpoint_inconsistent"]
    );

    // This log's root at 4 lines, claimed for 3 (a wrong size).
    let wrong = checkpoint_of(&sealer, &lines, 4);
    let wrong = Checkpoint { size: 3, ..wrong };
    let r = verify_from(&sealer, &lines, &wrong);
    assert_eq!(
        codes(&r, IssueClass::Violation),
        ["checkpoint_inconsistent"]
    );

    // A checkpoint beyond the log's end.
    let longer = checkpoint_of(&sealer, &lines, 8);
    let r = verify_from(&sealer, &lines[..6], &longer);
    assert_eq!(
        codes(&r, IssueClass::Violation),
        ["checkpoint_inconsistent"]
    );
}

#[test]
fn streamed_checkpoints_compare_as_the_whole_file_comparison_does() {
    let (sealer, lines) = log(&lifecycle("a"));
    let bytes = file(&lines);
    let covered = checkpoint_of(&sealer, &lines, 2);
    let (_, other) = log(&lifecycle("b"));
    let diverges = checkpoint_of(&sealer, &other, 3);
    let beyond = Checkpoint {
        size: 9,
        ..covered.clone()
    };
    let empty = checkpoint_of(&sealer, &lines, 0);
    let all = [covered, diverges, beyond, empty];
    let options = VerifyOptions {
        checkpoints: &all,
        ..VerifyOptions::default()
    };
    let streamed = verify_reader(bytes.as_slice(), &sealer.public_key(), &options).unwrap();
    let mut whole = verify_log(&bytes, &sealer.public_key());
    for cp in &all {
        whole.check_checkpoint(&bytes, cp);
    }
    assert_eq!(streamed.issues, whole.issues);
    let found: Vec<&str> = streamed.issues.iter().map(|i| i.code.as_str()).collect();
    assert_eq!(
        found,
        [
            "checkpoint_covered",
            "checkpoint_diverges",
            "checkpoint_truncated",
            "checkpoint_covered"
        ]
    );
}
