//! The store behaviour suite, run against every implementation: the embedded SQLite store always,
//! the PostgreSQL store when `COUNTERSIGN_TEST_POSTGRES` names a database
//! ([`ScratchSchema::if_configured`]; the ignored test `store_suite_on_postgres` says so when it
//! does not). Tests of PostgreSQL alone are ignored unless asked for (`--include-ignored`).

use super::*;
use crate::audit::{AuditSealer, GENESIS_HASH, line_hash};
use std::sync::Arc;

fn sealer() -> AuditSealer {
    AuditSealer::from_seed([5; 32])
}

/// A store of each kind; the schema guard keeps a PostgreSQL schema alive for the test.
fn stores(label: &str) -> Vec<(Box<dyn Store>, Option<ScratchSchema>)> {
    let mut all: Vec<(Box<dyn Store>, Option<ScratchSchema>)> =
        vec![(Box::new(SqliteStore::in_memory(sealer()).unwrap()), None)];
    if let Some(schema) = ScratchSchema::if_configured(label).unwrap() {
        let store = PostgresStore::connect(&schema.url(), sealer(), 2).unwrap();
        all.push((Box::new(store), Some(schema)));
    }
    all
}

/// A PostgreSQL schema, for a test of PostgreSQL alone (ignored unless asked for).
fn postgres(label: &str) -> ScratchSchema {
    ScratchSchema::required(label).unwrap()
}

/// Names, in the test runner's summary, the half of the suite a run without
/// `COUNTERSIGN_TEST_POSTGRES` leaves out; run (`--include-ignored`), it checks that the variable
/// is set, so the suite's PostgreSQL half did run beside it.
#[test]
#[ignore = "the store suite's PostgreSQL half runs only with COUNTERSIGN_TEST_POSTGRES set (.ci/steps/postgres.sh)"]
fn store_suite_on_postgres() {
    let schema = ScratchSchema::if_configured("suite_marker").unwrap();
    assert!(
        schema.is_some(),
        "set {TEST_DATABASE_ENV}=postgres://… to run the store suite on PostgreSQL"
    );
}

fn new(id: &str, expires_at: i64) -> NewApproval {
    NewApproval {
        id: id.into(),
        created_at: 0,
        expires_at,
        agent_id: "agent".into(),
        tool_name: "tool".into(),
        profile: "p".into(),
        fields_json: "{}".into(),
        severity: "high".into(),
        op_hash_approved: [1; 32],
        op_hash_denied: [2; 32],
        status: ApprovalStatus::Pending,
        reason_code: None,
        grant_expires_at: None,
        gateway: "gw".into(),
        revises: None,
    }
}

fn verdict(id: &str, now: i64, status: ApprovalStatus, nonce: u8, count: u32) -> Settlement {
    Settlement {
        approval_id: id.into(),
        now,
        status,
        reason_code: None,
        kind: SettleKind::Verdict {
            spend: Spend {
                nonce: vec![nonce; 32],
                credential_id: b"cred".to_vec(),
                sign_count: count,
            },
            evidence_json: "[]".into(),
        },
        grant_expires_at: Some(now + 1000),
        event: AuditEvent::test(id),
    }
}

/// `s`, with every event committed so far sealed into its chain (PostgreSQL seals after the
/// commit; a test reading lines wants them all).
fn sealed(s: &dyn Store) -> &dyn Store {
    s.seal_audit().unwrap();
    s
}

/// Every line's `prev_hash` is the hash of the line before it (one chain, no fork, no gap).
fn assert_one_chain(s: &dyn Store) {
    let lines = sealed(s).audit_lines_after(0, 100_000).unwrap();
    let mut prev = GENESIS_HASH;
    for (i, (seq, line)) in lines.iter().enumerate() {
        assert_eq!(*seq, i as u64 + 1, "seq gap");
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(
            v["prev_hash"].as_str().unwrap(),
            countersign::b64::encode(&prev),
            "line {seq} does not follow line {}",
            seq - 1
        );
        prev = line_hash(line);
    }
    assert_eq!(s.audit_head().unwrap(), (lines.len() as u64, prev));
}

#[test]
fn first_verdict_wins_and_later_ones_change_nothing() {
    for (s, _guard) in stores("first_verdict_wins") {
        s.create(&new("a", 100), &[]).unwrap();
        let first = s
            .settle(&verdict("a", 10, ApprovalStatus::Approved, 1, 1))
            .unwrap();
        assert!(matches!(first, SettleOutcome::Settled(r) if r.status == ApprovalStatus::Approved));
        let second = s
            .settle(&verdict("a", 11, ApprovalStatus::Denied, 2, 2))
            .unwrap();
        assert!(
            matches!(second, SettleOutcome::AlreadySettled(r) if r.status == ApprovalStatus::Approved)
        );
        // The loser's nonce was not spent.
        assert_eq!(
            s.replay_snapshot(&[2; 32], b"cred").unwrap(),
            (false, Some(1))
        );
        assert_eq!(
            s.replay_snapshot(&[1; 32], b"cred").unwrap(),
            (true, Some(1))
        );
        assert_eq!(s.audit_head().unwrap().0, 1);
        assert_eq!(
            s.settle(&verdict("zz", 11, ApprovalStatus::Denied, 3, 3))
                .unwrap(),
            SettleOutcome::NotFound
        );
        assert!(matches!(
            s.create(&new("a", 100), &[]),
            Err(StoreError::DuplicateId(id)) if id == "a"
        ));
        assert_one_chain(s.as_ref());
    }
}

#[test]
fn late_verdicts_expire_replays_and_regressions_are_refused() {
    for (s, _guard) in stores("late_replay_regression") {
        s.create(&new("late", 100), &[]).unwrap();
        let late = s
            .settle(&verdict("late", 100, ApprovalStatus::Approved, 1, 1))
            .unwrap();
        assert!(
            matches!(late, SettleOutcome::Expired(r) if r.reason_code.as_deref() == Some("expired_unanswered"))
        );

        s.create(&new("a", 100), &[]).unwrap();
        s.create(&new("b", 100), &[]).unwrap();
        s.create(&new("c", 100), &[]).unwrap();
        assert!(matches!(
            s.settle(&verdict("a", 1, ApprovalStatus::Approved, 7, 5))
                .unwrap(),
            SettleOutcome::Settled(_)
        ));
        assert_eq!(
            s.settle(&verdict("b", 1, ApprovalStatus::Approved, 7, 6))
                .unwrap(),
            SettleOutcome::Replayed
        );
        assert_eq!(
            s.settle(&verdict("c", 1, ApprovalStatus::Approved, 8, 5))
                .unwrap(),
            SettleOutcome::CounterRegression { stored: 5, got: 5 }
        );
        // The refused regression did not burn its nonce.
        assert!(!s.replay_snapshot(&[8; 32], b"cred").unwrap().0);
        assert_one_chain(s.as_ref());
    }
}

#[test]
fn grants_are_single_use_bound_and_expiring() {
    for (s, _guard) in stores("grants") {
        s.create(&new("a", 100), &[]).unwrap();
        let ev = AuditEvent::test("a");
        assert!(matches!(
            s.collect_grant("a", "gw", &[1; 32], None, 5, &ev).unwrap(),
            GrantOutcome::NotApproved(_)
        ));
        s.settle(&verdict("a", 10, ApprovalStatus::Approved, 1, 1))
            .unwrap();
        assert_eq!(
            s.collect_grant("a", "gw", &[9; 32], None, 11, &ev).unwrap(),
            GrantOutcome::FingerprintMismatch
        );
        assert_eq!(
            s.collect_grant("a", "gw", &[1; 32], None, 1010, &ev)
                .unwrap(),
            GrantOutcome::Expired
        );
        // The right fingerprint spent on another tool is refused, and spends nothing.
        assert_eq!(
            s.collect_grant("a", "gw", &[1; 32], Some("other.tool"), 11, &ev)
                .unwrap(),
            GrantOutcome::FingerprintMismatch
        );
        assert_eq!(
            s.collect_grant("a", "gw", &[1; 32], Some("tool"), 12, &ev)
                .unwrap(),
            GrantOutcome::Granted { collected_at: 12 }
        );
        assert_eq!(
            s.collect_grant("a", "gw", &[1; 32], None, 13, &ev).unwrap(),
            GrantOutcome::AlreadyCollected { collected_at: 12 }
        );
        assert_eq!(
            s.collect_grant("zz", "gw", &[1; 32], None, 13, &ev)
                .unwrap(),
            GrantOutcome::NotFound
        );
        assert_eq!(s.get("a").unwrap().unwrap().grant_collected_at, Some(12));
        assert_one_chain(s.as_ref());
    }
}

#[test]
fn sweeper_expires_only_overdue_pending_and_audits_it() {
    for (s, _guard) in stores("sweeper") {
        s.create(&new("a", 100), &[]).unwrap();
        s.create(&new("b", 200), &[]).unwrap();
        assert_eq!(s.expire_overdue(150, 10).unwrap(), vec!["a".to_owned()]);
        assert!(s.expire_overdue(150, 10).unwrap().is_empty());
        assert_eq!(s.pending_count().unwrap(), 1);
        let lines = sealed(s.as_ref()).audit_lines_after(0, 10).unwrap();
        assert_eq!(lines.len(), 1);
        assert!(lines[0].1.contains("expired_unanswered"));
        assert!(s.take_login_challenge(b"n", 0).is_ok_and(|ok| !ok));
        s.put_login_challenge(b"n", 10).unwrap();
        assert!(s.take_login_challenge(b"n", 5).unwrap());
        assert!(!s.take_login_challenge(b"n", 5).unwrap());
        s.put_login_challenge(b"old", 10).unwrap();
        assert!(!s.take_login_challenge(b"old", 10).unwrap());
    }
}

#[test]
fn challenges_sessions_and_credentials_round_trip() {
    for (s, _guard) in stores("challenges_sessions") {
        let c = IssuedChallenge {
            nonce: vec![4; 32],
            approval_id: "a".into(),
            decision: countersign::Decision::Denied,
            principal: "alice".into(),
            expires_at: 50,
        };
        s.put_challenge(&c).unwrap();
        assert_eq!(s.challenge(&[4; 32]).unwrap(), Some(c));
        assert_eq!(s.challenge(&[5; 32]).unwrap(), None);

        let session = Session {
            principal: "alice".into(),
            credential_id: b"cred".to_vec(),
            expires_at: 100,
        };
        assert!(s.create_session(&[1; 32], &session, 3).unwrap());
        assert_eq!(s.session(&[1; 32], 99).unwrap(), Some(session.clone()));
        assert_eq!(s.session(&[1; 32], 100).unwrap(), None);
        // A login whose counter did not advance creates nothing.
        assert!(!s.create_session(&[2; 32], &session, 3).unwrap());
        assert_eq!(s.session(&[2; 32], 0).unwrap(), None);
        assert_eq!(
            s.replay_snapshot(&[0; 32], b"cred").unwrap(),
            (false, Some(3))
        );
        // Counter-less authenticators (always 0) may log in again.
        let zero = Session {
            credential_id: b"zero".to_vec(),
            ..session
        };
        assert!(s.create_session(&[3; 32], &zero, 0).unwrap());
        assert!(s.create_session(&[4; 32], &zero, 0).unwrap());
        // Logout deletes the session: the token opens nothing, the other session stays.
        assert!(s.delete_session(&[3; 32]).unwrap());
        assert_eq!(s.session(&[3; 32], 0).unwrap(), None);
        assert!(!s.delete_session(&[3; 32]).unwrap(), "already gone");
        assert!(s.session(&[4; 32], 0).unwrap().is_some());

        // The sweep removes what expired.
        s.expire_overdue(100, 10).unwrap();
        assert_eq!(s.challenge(&[4; 32]).unwrap(), None);
        assert_eq!(s.session(&[3; 32], 0).unwrap(), None);

        assert!(s.credentials().unwrap().is_empty());
    }
}

#[test]
fn invites_are_single_use_and_never_replace_a_credential() {
    for (s, _guard) in stores("invites") {
        let invite = crate::enroll::Invite {
            token_hash: [7; 32],
            principal: "alice@example.com".into(),
            group: Some("payments".into()),
            created_at: 0,
            expires_at: 100,
        };
        s.put_invite(&invite).unwrap();
        assert_eq!(s.invite(&[7; 32], 99).unwrap(), Some(invite.clone()));
        assert_eq!(s.invite(&[7; 32], 100).unwrap(), None, "expired");
        assert_eq!(s.invite(&[8; 32], 0).unwrap(), None, "unknown token");

        let record = |id: &[u8]| CredentialRecord {
            credential_id: id.to_vec(),
            principal: "alice@example.com".into(),
            public_key: vec![1, 2, 3],
            aaguid: None,
            backup_eligible: Some(false),
            attestation: None,
            sign_count: 0,
            revoked: false,
        };
        let ev = |id: &[u8]| enrollment(&record(id), Some("payments"));
        let version = s.credentials_version().unwrap();
        assert_eq!(
            s.redeem_invite(&[7; 32], 100, &record(b"c1"), &ev(b"c1"))
                .unwrap(),
            RedeemOutcome::InviteUnusable
        );
        assert_eq!(s.audit_head().unwrap().0, 0, "a refusal appends nothing");
        assert_eq!(
            s.redeem_invite(&[7; 32], 10, &record(b"c1"), &ev(b"c1"))
                .unwrap(),
            RedeemOutcome::Redeemed
        );
        // The enrollment line was appended in the same transaction, and the version moved.
        assert_eq!(kinds(s.as_ref()), ["enrollment"]);
        assert!(s.credentials_version().unwrap() > version);
        let version = s.credentials_version().unwrap();
        assert_eq!(
            s.redeem_invite(&[7; 32], 11, &record(b"c2"), &ev(b"c2"))
                .unwrap(),
            RedeemOutcome::InviteUnusable
        );
        assert_eq!(
            s.invite(&[7; 32], 12).unwrap(),
            None,
            "a redeemed invite is gone"
        );
        assert_eq!(
            s.memberships().unwrap(),
            vec![("alice@example.com".to_owned(), "payments".to_owned())]
        );

        // An existing credential id is refused and leaves a fresh invite usable.
        let again = crate::enroll::Invite {
            token_hash: [9; 32],
            group: None,
            ..invite
        };
        s.put_invite(&again).unwrap();
        assert_eq!(
            s.redeem_invite(&[9; 32], 10, &record(b"c1"), &ev(b"c1"))
                .unwrap(),
            RedeemOutcome::CredentialExists
        );
        assert!(s.invite(&[9; 32], 10).unwrap().is_some());
        assert_eq!(s.credentials().unwrap(), vec![record(b"c1")]);
        assert_eq!(kinds(s.as_ref()), ["enrollment"], "refusals append nothing");
        assert_eq!(s.credentials_version().unwrap(), version);
        assert_one_chain(s.as_ref());
    }
}

fn credential(id: &[u8], principal: &str) -> CredentialRecord {
    CredentialRecord {
        credential_id: id.to_vec(),
        principal: principal.into(),
        public_key: vec![1, 2, 3],
        aaguid: None,
        backup_eligible: Some(false),
        attestation: None,
        sign_count: 0,
        revoked: false,
    }
}

fn enrollment(record: &CredentialRecord, group: Option<&str>) -> AuditEvent {
    AuditEvent::enrollment_of(
        "2026-01-01T00:00:00Z",
        record,
        group,
        crate::audit::EnrollmentSource::Invite,
    )
}

/// The `kind` of every audit line, in order.
fn kinds(s: &dyn Store) -> Vec<String> {
    sealed(s)
        .audit_lines_after(0, 10_000)
        .unwrap()
        .iter()
        .map(|(_, line)| {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            v["kind"].as_str().unwrap().to_owned()
        })
        .collect()
}

/// Every audit line parsed.
fn lines(s: &dyn Store) -> Vec<serde_json::Value> {
    sealed(s)
        .audit_lines_after(0, 10_000)
        .unwrap()
        .iter()
        .map(|(_, line)| serde_json::from_str(line).unwrap())
        .collect()
}

#[test]
fn importing_credentials_audits_only_new_and_changed_records() {
    for (s, _guard) in stores("import_credentials") {
        let v0 = s.credentials_version().unwrap();
        let a = credential(b"a", "alice");
        let b = credential(b"b", "bob");
        assert_eq!(s.put_credentials(&[a.clone(), b.clone()], 1000).unwrap(), 2);
        assert_eq!(kinds(s.as_ref()), ["enrollment", "enrollment"]);
        let first = &lines(s.as_ref())[0];
        assert_eq!(first["source"], "registry");
        assert_eq!(first["principal"], "alice");
        assert_eq!(first["credential_id"], countersign::b64::encode(b"a"));
        assert_eq!(first["group"], serde_json::Value::Null);
        assert_eq!(first["ts"], "1970-01-01T00:00:01Z");
        let v1 = s.credentials_version().unwrap();
        assert!(v1 > v0);

        // Importing the same file again (every start) writes nothing.
        assert_eq!(s.put_credentials(&[a.clone(), b.clone()], 2000).unwrap(), 0);
        assert_eq!(s.audit_head().unwrap().0, 2);
        assert_eq!(s.credentials_version().unwrap(), v1);

        // A changed record supersedes the stored one: revocation then enrollment, so the log
        // never shows two live enrollments of one id.
        let moved = CredentialRecord {
            public_key: vec![9],
            ..b.clone()
        };
        assert_eq!(
            s.put_credentials(&[a.clone(), moved.clone()], 3000)
                .unwrap(),
            1
        );
        assert_eq!(
            kinds(s.as_ref()),
            ["enrollment", "enrollment", "revocation", "enrollment"]
        );
        assert_eq!(lines(s.as_ref())[2]["reason"], REPLACED_BY_REGISTRY);
        assert!(s.credentials().unwrap().contains(&moved));
        let v2 = s.credentials_version().unwrap();
        assert!(v2 > v1);

        // A record the file marks revoked is revoked with one line.
        let gone = CredentialRecord {
            revoked: true,
            ..a.clone()
        };
        assert_eq!(
            s.put_credentials(std::slice::from_ref(&gone), 4000)
                .unwrap(),
            1
        );
        assert_eq!(kinds(s.as_ref()).last().unwrap(), "revocation");
        assert_eq!(
            lines(s.as_ref()).last().unwrap()["reason"],
            REVOKED_IN_REGISTRY
        );

        // A revocation is final: the old file (revoked: false) cannot bring the key back.
        let head = s.audit_head().unwrap().0;
        assert_eq!(
            s.put_credentials(std::slice::from_ref(&a), 5000).unwrap(),
            0
        );
        assert_eq!(s.audit_head().unwrap().0, head);
        assert!(s.credentials().unwrap().contains(&gone));
        assert_one_chain(s.as_ref());
    }
}

#[test]
fn revoking_marks_the_record_appends_one_line_and_refuses_twice() {
    for (s, _guard) in stores("revoke_credential") {
        let a = credential(b"a", "alice");
        s.put_credentials(std::slice::from_ref(&a), 0).unwrap();
        let before = s.credentials_version().unwrap();
        let event = AuditEvent::revocation("2026-01-01T00:00:00Z", "alice", b"a", "lost key");
        assert_eq!(
            s.revoke_credential(b"zz", 10, &event).unwrap(),
            RevokeOutcome::NotFound
        );
        assert_eq!(s.credentials_version().unwrap(), before);
        assert_eq!(s.audit_head().unwrap().0, 1, "nothing appended on refusal");

        assert_eq!(
            s.revoke_credential(b"a", 10, &event).unwrap(),
            RevokeOutcome::Revoked
        );
        let stored = s.credentials().unwrap();
        assert_eq!(
            stored,
            vec![CredentialRecord {
                revoked: true,
                ..a.clone()
            }]
        );
        assert_eq!(kinds(s.as_ref()), ["enrollment", "revocation"]);
        assert_eq!(lines(s.as_ref())[1]["reason"], "lost key");
        let after = s.credentials_version().unwrap();
        assert!(after > before);

        assert_eq!(
            s.revoke_credential(b"a", 11, &event).unwrap(),
            RevokeOutcome::AlreadyRevoked
        );
        assert_eq!(s.credentials_version().unwrap(), after);
        assert_eq!(s.audit_head().unwrap().0, 2);

        // The helper the CLI and the service use builds the line from the stored record.
        let b = credential(b"b", "bob");
        s.put_credentials(std::slice::from_ref(&b), 0).unwrap();
        assert_eq!(
            revoke(s.as_ref(), b"b", "left", 0).unwrap(),
            RevokeOutcome::Revoked
        );
        assert_eq!(
            revoke(s.as_ref(), b"b", "left", 0).unwrap(),
            RevokeOutcome::AlreadyRevoked
        );
        assert_eq!(
            revoke(s.as_ref(), b"q", "left", 0).unwrap(),
            RevokeOutcome::NotFound
        );
        let last = lines(s.as_ref()).pop().unwrap();
        assert_eq!(last["principal"], "bob");
        assert_eq!(last["reason"], "left");
        assert_one_chain(s.as_ref());

        // The whole log verifies, credential lines included.
        let mut text = String::new();
        for (_, line) in sealed(s.as_ref()).audit_lines_after(0, 100).unwrap() {
            text.push_str(&line);
            text.push('\n');
        }
        let report = crate::audit::verify_log(text.as_bytes(), &sealer().public_key());
        assert!(report.is_valid() && report.issues.is_empty(), "{report:?}");
    }
}

#[test]
fn the_credentials_version_is_shared_by_every_process_on_the_database() {
    // Two stores on one database stand for the service and the CLI (or two replicas).
    let dir = std::env::temp_dir().join(format!(
        "countersign-version-{}",
        countersign::b64::encode(&crate::random::bytes::<6>().unwrap())
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("db");
    let durability = crate::config::Durability::Normal;
    let one = SqliteStore::open(&path, sealer(), durability).unwrap();
    let two = SqliteStore::open(&path, sealer(), durability).unwrap();
    type Pair = (Box<dyn Store>, Box<dyn Store>, Option<ScratchSchema>);
    let mut pairs: Vec<Pair> = vec![(Box::new(one), Box::new(two), None)];
    if let Some(schema) = ScratchSchema::if_configured("credentials_version").unwrap() {
        let one = PostgresStore::connect(&schema.url(), sealer(), 1).unwrap();
        let two = PostgresStore::connect(&schema.url(), sealer(), 1).unwrap();
        pairs.push((Box::new(one), Box::new(two), Some(schema)));
    }
    for (one, two, _guard) in pairs {
        let seen = one.credentials_version().unwrap();
        two.put_credentials(&[credential(b"a", "alice")], 0)
            .unwrap();
        assert_ne!(one.credentials_version().unwrap(), seen);
        let seen = one.credentials_version().unwrap();
        revoke(two.as_ref(), b"a", "lost", 0).unwrap();
        assert_ne!(one.credentials_version().unwrap(), seen);
        assert!(one.credentials().unwrap()[0].revoked);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn gateway(name: &str, hash: u8, at: i64) -> GatewayRecord {
    GatewayRecord {
        name: name.into(),
        token_hash: [hash; 32],
        created_at: at,
        revoked_at: None,
    }
}

#[test]
fn gateways_are_unique_revocable_once_and_raise_the_version() {
    for (s, _guard) in stores("gateways") {
        let v0 = s.credentials_version().unwrap();
        assert!(s.put_gateway(&gateway("billing", 1, 10)).unwrap());
        let v1 = s.credentials_version().unwrap();
        assert!(v1 > v0, "adding a gateway raises the version");
        // A taken name, or a token hash already in use, stores nothing.
        assert!(!s.put_gateway(&gateway("billing", 2, 11)).unwrap());
        assert!(!s.put_gateway(&gateway("other", 1, 11)).unwrap());
        assert_eq!(s.credentials_version().unwrap(), v1);
        assert!(s.put_gateway(&gateway("alpha", 3, 12)).unwrap());
        let names: Vec<String> = s.gateways().unwrap().into_iter().map(|g| g.name).collect();
        assert_eq!(names, ["alpha", "billing"]);

        assert_eq!(
            s.revoke_gateway("billing", 20).unwrap(),
            RevokeOutcome::Revoked
        );
        let v2 = s.credentials_version().unwrap();
        assert!(v2 > v1, "revoking a gateway raises the version");
        assert_eq!(
            s.revoke_gateway("billing", 21).unwrap(),
            RevokeOutcome::AlreadyRevoked
        );
        assert_eq!(
            s.revoke_gateway("nobody", 21).unwrap(),
            RevokeOutcome::NotFound
        );
        assert_eq!(s.credentials_version().unwrap(), v2);
        let billing = s
            .gateways()
            .unwrap()
            .into_iter()
            .find(|g| g.name == "billing");
        assert_eq!(
            billing,
            Some(GatewayRecord {
                revoked_at: Some(20),
                ..gateway("billing", 1, 10)
            })
        );
        // A revoked name is never reused.
        assert!(!s.put_gateway(&gateway("billing", 4, 30)).unwrap());
        // Nothing of this is in the audit log.
        assert_eq!(s.audit_head().unwrap().0, 0);
    }
}

fn auditor(name: &str, hash: u8, at: i64) -> AuditorRecord {
    AuditorRecord {
        name: name.into(),
        token_hash: [hash; 32],
        created_at: at,
        revoked_at: None,
    }
}

#[test]
fn auditors_are_unique_revocable_once_and_raise_the_version() {
    for (s, _guard) in stores("auditors") {
        let v0 = s.credentials_version().unwrap();
        assert!(s.put_auditor(&auditor("compliance", 1, 10)).unwrap());
        let v1 = s.credentials_version().unwrap();
        assert!(v1 > v0, "adding an auditor raises the version");
        // A taken name, or a token hash already in use, stores nothing.
        assert!(!s.put_auditor(&auditor("compliance", 2, 11)).unwrap());
        assert!(!s.put_auditor(&auditor("other", 1, 11)).unwrap());
        assert_eq!(s.credentials_version().unwrap(), v1);
        assert!(s.put_auditor(&auditor("alpha", 3, 12)).unwrap());
        let names: Vec<String> = s.auditors().unwrap().into_iter().map(|a| a.name).collect();
        assert_eq!(names, ["alpha", "compliance"]);

        assert_eq!(
            s.revoke_auditor("compliance", 20).unwrap(),
            RevokeOutcome::Revoked
        );
        let v2 = s.credentials_version().unwrap();
        assert!(v2 > v1, "revoking an auditor raises the version");
        assert_eq!(
            s.revoke_auditor("compliance", 21).unwrap(),
            RevokeOutcome::AlreadyRevoked
        );
        assert_eq!(
            s.revoke_auditor("nobody", 21).unwrap(),
            RevokeOutcome::NotFound
        );
        assert_eq!(s.credentials_version().unwrap(), v2);
        let compliance = s
            .auditors()
            .unwrap()
            .into_iter()
            .find(|a| a.name == "compliance");
        assert_eq!(
            compliance,
            Some(AuditorRecord {
                revoked_at: Some(20),
                ..auditor("compliance", 1, 10)
            })
        );
        // A revoked name is never reused.
        assert!(!s.put_auditor(&auditor("compliance", 4, 30)).unwrap());
        // Nothing of this is in the audit log (gateway credentials are not either).
        assert_eq!(s.audit_head().unwrap().0, 0);
    }
}

#[test]
fn auditors_and_gateways_are_kept_apart() {
    for (s, _guard) in stores("auditors_apart") {
        assert!(s.put_gateway(&gateway("shared-name", 1, 10)).unwrap());
        assert!(s.put_auditor(&auditor("shared-name", 2, 10)).unwrap());
        assert!(s.put_auditor(&auditor("auditor-only", 3, 10)).unwrap());
        // Each list holds its own kind only; revoking one kind leaves the other live.
        let gateways: Vec<String> = s.gateways().unwrap().into_iter().map(|g| g.name).collect();
        assert_eq!(gateways, ["shared-name"]);
        assert_eq!(s.auditors().unwrap().len(), 2);
        assert_eq!(
            s.revoke_auditor("shared-name", 20).unwrap(),
            RevokeOutcome::Revoked
        );
        assert_eq!(s.gateways().unwrap()[0].revoked_at, None);
        assert_eq!(
            s.revoke_gateway("auditor-only", 20).unwrap(),
            RevokeOutcome::NotFound
        );
    }
}

#[test]
fn an_approval_remembers_its_gateway() {
    for (s, _guard) in stores("approval_gateway") {
        s.create(&new("a", 100), &[]).unwrap();
        assert_eq!(s.get("a").unwrap().unwrap().gateway.as_deref(), Some("gw"));
        let settled = s
            .settle(&verdict("a", 10, ApprovalStatus::Approved, 1, 1))
            .unwrap();
        assert!(matches!(settled, SettleOutcome::Settled(r) if r.gateway.as_deref() == Some("gw")));
    }
}

#[test]
fn a_new_approval_as_a_record_is_the_row_the_store_reads_back() {
    for (s, _guard) in stores("approval_into_record") {
        // PENDING: not decided, no reason.
        let pending = new("p", 100);
        s.create(&pending, &[]).unwrap();
        let record = pending.into_record(None);
        assert_eq!(
            (record.decided_at, record.reason_code.as_deref()),
            (None, None)
        );
        assert_eq!(s.get("p").unwrap().unwrap(), record);
        // Refused at once: decided at its creation, with its reason.
        let refused = NewApproval {
            created_at: 7,
            status: ApprovalStatus::Denied,
            reason_code: Some(ReasonCode::NoEligibleApprover),
            ..new("d", 100)
        };
        s.create(&refused, &[]).unwrap();
        let record = refused.into_record(None);
        assert_eq!(record.decided_at, Some(7));
        assert_eq!(record.reason_code.as_deref(), Some("no_eligible_approver"));
        assert_eq!(s.get("d").unwrap().unwrap(), record);
        // Another record is not equal to it: the comparison sees the fields.
        assert_ne!(s.get("p").unwrap().unwrap(), record);
    }
}

#[test]
fn only_the_owning_gateway_withdraws_or_collects() {
    for (s, _guard) in stores("gateway_ownership") {
        s.create(&new("w", 100), &[]).unwrap();
        let withdraw = |gateway: &str| Settlement {
            approval_id: "w".into(),
            now: 10,
            status: ApprovalStatus::Denied,
            reason_code: Some(ReasonCode::Cancelled),
            kind: SettleKind::Withdrawn {
                gateway: gateway.into(),
            },
            grant_expires_at: None,
            event: AuditEvent::test("w"),
        };
        // Another gateway: as if the id did not exist, nothing written.
        assert_eq!(
            s.settle(&withdraw("other")).unwrap(),
            SettleOutcome::NotFound
        );
        assert_eq!(s.get("w").unwrap().unwrap().status, ApprovalStatus::Pending);
        assert!(matches!(
            s.settle(&withdraw("gw")).unwrap(),
            SettleOutcome::Settled(_)
        ));

        s.create(&new("g", 100), &[]).unwrap();
        s.settle(&verdict("g", 10, ApprovalStatus::Approved, 7, 1))
            .unwrap();
        let ev = AuditEvent::test("g");
        assert_eq!(
            s.collect_grant("g", "other", &[1; 32], None, 11, &ev)
                .unwrap(),
            GrantOutcome::NotFound
        );
        assert_eq!(
            s.collect_grant("g", "gw", &[1; 32], None, 12, &ev).unwrap(),
            GrantOutcome::Granted { collected_at: 12 }
        );
        assert_eq!(
            s.audit_head().unwrap().0,
            3,
            "settlement, verdict, grant only"
        );
    }
}

#[test]
fn sqlite_adds_the_gateway_column_to_an_older_database() {
    let dir = std::env::temp_dir().join(format!(
        "countersign-sqlite-migrate-{}-{}",
        std::process::id(),
        countersign::b64::encode(&crate::random::bytes::<6>().unwrap())
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("db");
    {
        // The approvals table as the previous release created it, with one row.
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            "CREATE TABLE approvals (id TEXT PRIMARY KEY, created_at INTEGER NOT NULL, \
             expires_at INTEGER NOT NULL, agent_id TEXT NOT NULL, tool_name TEXT NOT NULL, \
             profile TEXT NOT NULL, fields_json TEXT NOT NULL, severity TEXT NOT NULL, \
             op_hash_approved BLOB NOT NULL, op_hash_denied BLOB NOT NULL, status TEXT NOT NULL, \
             reason_code TEXT, evidence_json TEXT, decided_at INTEGER, grant_expires_at INTEGER, \
             grant_collected_at INTEGER);
             INSERT INTO approvals VALUES ('old', 0, 1, 'a', 't', 'p', '{}', 'normal', \
             zeroblob(32), zeroblob(32), 'PENDING', NULL, NULL, NULL, NULL, NULL);",
        )
        .unwrap();
    }
    for _ in 0..2 {
        // Opening twice: the migration applies once and is then a no-op.
        let s = SqliteStore::open(&path, sealer(), crate::config::Durability::Normal).unwrap();
        let old = s.get("old").unwrap().unwrap();
        assert_eq!(old.gateway, None, "an older row belongs to no gateway");
        assert!(s.put_gateway(&gateway("gw", 1, 0)).unwrap() || s.gateways().unwrap().len() == 1);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A database made by the store before numbered migrations (its schema and rows from
/// `testdata/`) is upgraded in place: every row kept, the chain continued, migration 1 recorded.
#[test]
fn sqlite_upgrades_a_database_from_before_numbered_migrations_in_place() {
    let dir = std::env::temp_dir().join(format!(
        "countersign-sqlite-upgrade-{}-{}",
        std::process::id(),
        countersign::b64::encode(&crate::random::bytes::<6>().unwrap())
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("db");
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch(include_str!("testdata/sqlite-before-migrations.sql"))
        .unwrap();
    for round in 0..2 {
        // Opening twice: the upgrade applies once and is then a no-op.
        let s = SqliteStore::open(&path, sealer(), crate::config::Durability::Normal).unwrap();
        s.ready().unwrap();
        let old = s.get("old").unwrap().unwrap();
        assert_eq!(old.status, ApprovalStatus::Approved);
        assert_eq!(old.gateway.as_deref(), Some("gw"));
        assert_eq!(old.revises.as_deref(), Some("older"));
        assert_eq!((old.decided_at, old.grant_expires_at), (Some(7), Some(900)));
        assert_eq!(s.gateways().unwrap().len(), 1);
        assert_eq!(s.credentials_version().unwrap(), 3);
        assert_eq!(
            s.replay_snapshot(&[9; 32], &[1, 2]).unwrap(),
            (false, Some(41))
        );
        assert_eq!(s.audit_head().unwrap().0, round + 1);
        if round == 0 {
            assert_eq!(s.audit_head().unwrap(), (1, [1; 32]));
            s.create(&new("new", 100), &[AuditEvent::test("new")])
                .unwrap();
            let line = &sealed(&s).audit_lines_after(1, 10).unwrap()[0].1;
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            assert_eq!(v["prev_hash"], countersign::b64::encode(&[1; 32]));
        }
    }
    let conn = rusqlite::Connection::open(&path).unwrap();
    let versions: Vec<i64> = conn
        .prepare("SELECT version FROM countersign_migrations")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(versions, vec![1, 2, 3, 4]);
    drop(conn);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn database_urls_pick_the_backend() {
    assert_eq!(
        DatabaseUrl::parse("sqlite:///var/lib/cs.db").unwrap(),
        DatabaseUrl::Sqlite("/var/lib/cs.db".into())
    );
    assert_eq!(
        DatabaseUrl::parse("sqlite://rel.db").unwrap(),
        DatabaseUrl::Sqlite("rel.db".into())
    );
    for url in [
        "postgres://u@h/db",
        "postgresql://h:5433/db?sslmode=disable",
    ] {
        assert_eq!(
            DatabaseUrl::parse(url).unwrap(),
            DatabaseUrl::Postgres(url.into())
        );
    }
    for bad in ["", "sqlite://", "mysql://h/db", "/tmp/x.db", "postgres:/h"] {
        assert!(
            matches!(DatabaseUrl::parse(bad), Err(StoreError::BadUrl(_))),
            "{bad}"
        );
    }
}

#[test]
fn printed_urls_hide_passwords() {
    assert_eq!(
        redacted("postgres://cs:s3cret@db:5432/cs?x=1"),
        "postgres://cs:***@db:5432/cs?x=1"
    );
    for kept in ["postgres://cs@db/cs", "sqlite:///a:b@c", "sqlite://x.db"] {
        assert_eq!(redacted(kept), kept);
    }
}

#[test]
#[ignore = "needs PostgreSQL (.ci/steps/postgres.sh runs it)"]
fn postgres_migrations_are_idempotent_and_the_chain_key_is_pinned() {
    let schema = postgres("postgres_migrations");
    let first = PostgresStore::connect(&schema.url(), sealer(), 1).unwrap();
    first
        .create(&new("a", 100), &[AuditEvent::test("a")])
        .unwrap();
    drop(first);
    // A second start applies nothing again and sees the data.
    let again = PostgresStore::connect(&schema.url(), sealer(), 1).unwrap();
    assert!(again.get("a").unwrap().is_some());
    assert_eq!(again.audit_head().unwrap().0, 1);
    // A replica with another service key would fork the signer: refused at start.
    let other = PostgresStore::connect(&schema.url(), AuditSealer::from_seed([6; 32]), 1);
    assert!(
        matches!(&other, Err(StoreError::Database(m)) if m.contains("same service-key")),
        "{other:?}"
    );
    assert!(PostgresStore::connect("postgres://h:notaport/db", sealer(), 1).is_err());
}

/// Three stores over one schema stand for three replicas: racing verdicts, grants, nonces and
/// sweeps settle each thing exactly once, and the audit chain is one chain.
#[test]
#[ignore = "needs PostgreSQL (.ci/steps/postgres.sh runs it)"]
fn postgres_replicas_race_without_double_outcomes_or_forks() {
    let schema = postgres("postgres_replicas_race");
    let replicas: Vec<Arc<dyn Store>> = (0..3)
        .map(|_| {
            Arc::new(PostgresStore::connect(&schema.url(), sealer(), 3).unwrap()) as Arc<dyn Store>
        })
        .collect();
    let race = |work: &(dyn Fn(usize, &dyn Store) -> bool + Sync)| -> usize {
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..24)
                .map(|i| {
                    let r = Arc::clone(&replicas[i % 3]);
                    scope.spawn(move || work(i, r.as_ref()))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap())
                .filter(|won| *won)
                .count()
        })
    };

    // Contradictory verdicts on one approval: one wins.
    replicas[0].create(&new("v", 1_000), &[]).unwrap();
    let wins = race(&|i, s| {
        let status = if i % 2 == 0 {
            ApprovalStatus::Approved
        } else {
            ApprovalStatus::Denied
        };
        let mut v = verdict("v", 10, status, 100 + i as u8, 0);
        if let SettleKind::Verdict { spend, .. } = &mut v.kind {
            spend.credential_id = format!("cred-{i}").into_bytes();
        }
        matches!(s.settle(&v).unwrap(), SettleOutcome::Settled(_))
    });
    assert_eq!(wins, 1);

    // One nonce on many approvals: spent once.
    for i in 0..24 {
        replicas[i % 3]
            .create(&new(&format!("n{i}"), 1_000), &[])
            .unwrap();
    }
    let wins = race(&|i, s| {
        let mut v = verdict(&format!("n{i}"), 10, ApprovalStatus::Denied, 7, 0);
        if let SettleKind::Verdict { spend, .. } = &mut v.kind {
            spend.credential_id = format!("nonce-cred-{i}").into_bytes();
        }
        matches!(s.settle(&v).unwrap(), SettleOutcome::Settled(_))
    });
    assert_eq!(wins, 1);

    // One counter, many approvals, counts 1..=24 in any order: never goes backwards.
    for i in 0..24 {
        replicas[i % 3]
            .create(&new(&format!("c{i}"), 1_000), &[])
            .unwrap();
    }
    race(&|i, s| {
        let v = verdict(
            &format!("c{i}"),
            10,
            ApprovalStatus::Denied,
            150 + i as u8,
            i as u32 + 1,
        );
        !matches!(s.settle(&v).unwrap(), SettleOutcome::Replayed)
    });
    assert_eq!(
        replicas[1].replay_snapshot(&[0; 32], b"cred").unwrap().1,
        Some(24)
    );

    // A grant collected through every replica at once: granted once.
    let ev = AuditEvent::test("v");
    let approved = replicas[0].get("v").unwrap().unwrap();
    if approved.status == ApprovalStatus::Approved {
        let wins = race(&|_, s| {
            matches!(
                s.collect_grant("v", "gw", &[1; 32], None, 20, &ev).unwrap(),
                GrantOutcome::Granted { .. }
            )
        });
        assert_eq!(wins, 1);
    }

    // Overdue approvals swept by every replica at once: each expires once.
    for i in 0..40 {
        replicas[i % 3]
            .create(&new(&format!("e{i}"), 50), &[])
            .unwrap();
    }
    let swept = std::sync::Mutex::new(Vec::new());
    race(&|_, s| {
        let ids = s.expire_overdue(60, 7).unwrap();
        swept.lock().unwrap().extend(ids);
        true
    });
    let mut swept = swept.into_inner().unwrap();
    while let Ok(ids) = replicas[2].expire_overdue(60, 100) {
        if ids.is_empty() {
            break;
        }
        swept.extend(ids);
    }
    swept.sort();
    let before = swept.len();
    swept.dedup();
    assert_eq!((before, swept.len()), (40, 40));

    for r in &replicas {
        assert_one_chain(r.as_ref());
    }
    let lines = sealed(replicas[0].as_ref())
        .audit_lines_after(0, 100_000)
        .unwrap();
    // 1 verdict + 1 nonce winner + 24 counters (every count is distinct, but order decides
    // how many regress) + maybe a grant + 40 expiries.
    assert!(lines.len() >= 1 + 1 + 1 + 40, "{}", lines.len());
    let expiries = lines
        .iter()
        .filter(|(_, l)| l.contains("expired_unanswered"))
        .count();
    assert_eq!(expiries, 40);
}

#[test]
fn the_postgres_probe_finds_closed_ports_and_bad_urls() {
    assert!(!testing::port_open("postgres://u@127.0.0.1:1/db"));
    assert!(!testing::port_open("not a url"));
    if ScratchSchema::if_configured("probe").unwrap().is_some() {
        let url = std::env::var(TEST_DATABASE_ENV).unwrap_or(TEST_DATABASE_DEFAULT.into());
        assert!(testing::port_open(&url));
    }
}

/// Two first uses of one credential's counter, on two replicas at once: only one passes.
///
/// Made deterministic with an outside transaction that holds `audit_unsealed` locked against
/// inserts: each settlement then stops at its audit event, after its counter check, so neither
/// commits before the other has checked. Without serialization of the first use, both read "no
/// counter" and both settle.
#[test]
#[ignore = "needs PostgreSQL (.ci/steps/postgres.sh runs it)"]
fn postgres_first_use_of_a_counter_is_serialized() {
    let schema = postgres("postgres_first_counter_use");
    let app = format!("cs_{}", schema.name());
    let url = format!("{}&application_name={app}", schema.url());
    let a: Arc<dyn Store> = Arc::new(PostgresStore::connect(&url, sealer(), 1).unwrap());
    let b: Arc<dyn Store> = Arc::new(PostgresStore::connect(&url, sealer(), 1).unwrap());
    a.create(&new("first-a", 1_000), &[]).unwrap();
    a.create(&new("first-b", 1_000), &[]).unwrap();

    // The blocker runs on a thread of its own: the synchronous client must not share a
    // thread with the stores' workers.
    let (hold_tx, blocker) = hold_audit_inserts(&schema.url());

    // Both the first use of b"cred", with the same count.
    let first = settle_on_thread(&a, "first-a", 201, 5);
    let second = settle_on_thread(&b, "first-b", 202, 5);

    // Wait until both settlements are blocked on a lock (one on the audit table, the other on the
    // audit table or on the first's counter row), observed in pg_stat_activity, not by timing.
    wait_for_lock_waiters(&schema.url(), &app, 2, None);
    hold_tx.send(()).unwrap();
    blocker.join().unwrap();

    let outcomes = [first.join().unwrap(), second.join().unwrap()];
    let settled = outcomes
        .iter()
        .filter(|o| matches!(o, SettleOutcome::Settled(_)))
        .count();
    let regressed = outcomes
        .iter()
        .filter(|o| matches!(o, SettleOutcome::CounterRegression { stored: 5, got: 5 }))
        .count();
    assert_eq!((settled, regressed), (1, 1), "{outcomes:?}");
    assert_eq!(a.replay_snapshot(&[0; 32], b"cred").unwrap().1, Some(5));
    assert_one_chain(a.as_ref());
}

/// What a session waits for, to count in [`wait_for_lock_waiters`]: the pg_stat_activity
/// `wait_event` ('relation' for a table lock, 'transactionid' for another transaction's row)
/// and how the statement waiting begins.
type Waiting = Option<(&'static str, &'static str)>;

/// Block (in the calling thread) until `n` sessions named `app` wait on a lock (the one
/// `waiting` names, if any): observed, not timed.
fn wait_for_lock_waiters(url: &str, app: &str, n: i64, waiting: Waiting) {
    let (url, app) = (url.to_owned(), app.to_owned());
    let (event, statement) = waiting.unzip();
    std::thread::spawn(move || {
        let mut client = ::postgres::Client::connect(&url, ::postgres::NoTls).unwrap();
        for _ in 0..60_000 {
            let waiting: i64 = client
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 \
                     AND wait_event_type = 'Lock' AND ($2::text IS NULL OR wait_event = $2) \
                     AND ($3::text IS NULL OR starts_with(query, $3))",
                    &[&app, &event, &statement],
                )
                .unwrap()
                .get(0);
            if waiting >= n {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        panic!("never {n} sessions of {app} waiting on a lock ({event:?}, {statement:?})");
    })
    .join()
    .unwrap();
}

/// Approve `id` on `store` (at time 10, spending `nonce`, with signature count `count`) on a
/// thread of its own, so that the test can watch it wait on a lock.
fn settle_on_thread(
    store: &Arc<dyn Store>,
    id: &'static str,
    nonce: u8,
    count: u32,
) -> std::thread::JoinHandle<SettleOutcome> {
    let store = Arc::clone(store);
    std::thread::spawn(move || {
        store
            .settle(&verdict(id, 10, ApprovalStatus::Approved, nonce, count))
            .unwrap()
    })
}

/// A request transaction stopped at its audit event by [`hold_audit_inserts`].
const AT_AUDIT_INSERT: Waiting = Some(("relation", "INSERT INTO audit_unsealed"));

/// Hold `LOCK TABLE audit_unsealed IN EXCLUSIVE MODE` (inserts wait, reads pass) on a thread of
/// its own until the returned sender is used; returns once the lock is held.
fn hold_audit_inserts(url: &str) -> (std::sync::mpsc::Sender<()>, std::thread::JoinHandle<()>) {
    let (hold_tx, hold_rx) = std::sync::mpsc::channel::<()>();
    let (held_tx, held_rx) = std::sync::mpsc::channel::<()>();
    let url = url.to_owned();
    let blocker = std::thread::spawn(move || {
        let mut client = ::postgres::Client::connect(&url, ::postgres::NoTls).unwrap();
        let mut tx = client.transaction().unwrap();
        tx.batch_execute("LOCK TABLE audit_unsealed IN EXCLUSIVE MODE")
            .unwrap();
        held_tx.send(()).unwrap();
        hold_rx.recv().unwrap();
        tx.rollback().unwrap();
    });
    held_rx.recv().unwrap();
    (hold_tx, blocker)
}

/// Verdicts without a counter (0) from one credential, on two replicas at once, do not queue
/// behind each other's commits on the counter row: both reach their audit insert together
/// (both wait on the table lock, neither on the other's row). Then both settle.
#[test]
#[ignore = "needs PostgreSQL (.ci/steps/postgres.sh runs it)"]
fn postgres_zero_counter_verdicts_of_one_credential_do_not_queue() {
    let schema = postgres("postgres_zero_counter");
    let app = format!("cs_{}", schema.name());
    let url = format!("{}&application_name={app}", schema.url());
    let a: Arc<dyn Store> = Arc::new(PostgresStore::connect(&url, sealer(), 1).unwrap());
    let b: Arc<dyn Store> = Arc::new(PostgresStore::connect(&url, sealer(), 1).unwrap());
    a.create(&new("zero-a", 1_000), &[]).unwrap();
    a.create(&new("zero-b", 1_000), &[]).unwrap();
    // The credential's counter row exists (a first use created it): the case of every later
    // verdict.
    a.create(&new("zero-0", 1_000), &[]).unwrap();
    assert!(matches!(
        a.settle(&verdict("zero-0", 10, ApprovalStatus::Approved, 200, 0))
            .unwrap(),
        SettleOutcome::Settled(_)
    ));

    a.seal_audit().unwrap();
    let (hold, blocker) = hold_audit_inserts(&schema.url());
    let first = settle_on_thread(&a, "zero-a", 201, 0);
    let second = settle_on_thread(&b, "zero-b", 202, 0);
    // Both at their audit insert, waiting on the table lock; a wait on the other's counter row
    // would be on its transaction id instead.
    wait_for_lock_waiters(&schema.url(), &app, 2, AT_AUDIT_INSERT);
    hold.send(()).unwrap();
    blocker.join().unwrap();
    for outcome in [first.join().unwrap(), second.join().unwrap()] {
        assert!(matches!(outcome, SettleOutcome::Settled(_)), "{outcome:?}");
    }
    assert_one_chain(a.as_ref());
    assert_eq!(kinds(a.as_ref()).len(), 3);
}

/// A verdict with a counter raises it under the row's exclusive lock; a zero-counter verdict
/// racing it waits for that commit and then sees the raised count: refused, as it would be
/// one after the other.
#[test]
#[ignore = "needs PostgreSQL (.ci/steps/postgres.sh runs it)"]
fn postgres_a_zero_counter_verdict_sees_a_concurrent_raise() {
    let schema = postgres("postgres_zero_after_raise");
    let app = format!("cs_{}", schema.name());
    let url = format!("{}&application_name={app}", schema.url());
    let a: Arc<dyn Store> = Arc::new(PostgresStore::connect(&url, sealer(), 1).unwrap());
    let b: Arc<dyn Store> = Arc::new(PostgresStore::connect(&url, sealer(), 1).unwrap());
    for id in ["raise-0", "raise-a", "raise-b"] {
        a.create(&new(id, 1_000), &[]).unwrap();
    }
    assert!(matches!(
        a.settle(&verdict("raise-0", 10, ApprovalStatus::Approved, 200, 0))
            .unwrap(),
        SettleOutcome::Settled(_)
    ));
    a.seal_audit().unwrap();
    let (hold, blocker) = hold_audit_inserts(&schema.url());
    let raiser = settle_on_thread(&a, "raise-a", 201, 7);
    // The raise holds the counter row and waits at its audit insert.
    wait_for_lock_waiters(&schema.url(), &app, 1, AT_AUDIT_INSERT);
    let zero = settle_on_thread(&b, "raise-b", 202, 0);
    // The zero-counter verdict waits for the raiser's transaction, which holds the counter row
    // (at the placeholder insert, which must learn whether the updated row stays, or at the
    // shared lock).
    wait_for_lock_waiters(&schema.url(), &app, 1, Some(("transactionid", "")));
    hold.send(()).unwrap();
    blocker.join().unwrap();
    assert!(matches!(raiser.join().unwrap(), SettleOutcome::Settled(_)));
    let zero = zero.join().unwrap();
    assert!(
        matches!(zero, SettleOutcome::CounterRegression { stored: 7, got: 0 }),
        "{zero:?}"
    );
}

/// An event in `audit_unsealed` that does not carry the service key's tag (written by someone
/// with database access, not by a replica) is never signed into the chain: the round fails,
/// naming the row, and seals nothing; once the row is gone, sealing resumes.
#[test]
#[ignore = "needs PostgreSQL (.ci/steps/postgres.sh runs it)"]
fn postgres_an_untagged_unsealed_event_is_never_sealed() {
    let schema = postgres("postgres_untagged_unsealed");
    let s = PostgresStore::connect(&schema.url(), sealer(), 1).unwrap();
    s.create(&new("honest", 1_000), &[AuditEvent::test("honest")])
        .unwrap();
    assert_eq!(s.audit_head().unwrap().0, 1);
    let mut client = ::postgres::Client::connect(&schema.url(), ::postgres::NoTls).unwrap();
    let forged = r#"{"kind":"decision","approval_id":"honest","status":"APPROVED"}"#;
    // A tag under another service key, and a row with no valid tag at all.
    let other = AuditSealer::from_seed([6; 32])
        .tag_unsealed(forged)
        .to_vec();
    client
        .execute(
            "INSERT INTO audit_unsealed (event, tag) VALUES ($1, $2)",
            &[&forged, &other],
        )
        .unwrap();
    s.create(&new("after", 1_000), &[AuditEvent::test("after")])
        .unwrap();
    let err = s.seal_audit().unwrap_err();
    assert!(
        matches!(&err, StoreError::Corrupt(m) if m.contains("audit_unsealed row")),
        "{err:?}"
    );
    // Nothing of the batch was sealed: neither the forged row nor the honest one after it.
    assert_eq!(s.audit_lines_after(0, 10).unwrap().len(), 1);
    client
        .execute("DELETE FROM audit_unsealed WHERE event = $1", &[&forged])
        .unwrap();
    let lines = sealed(&s).audit_lines_after(0, 10).unwrap();
    assert_eq!(lines.len(), 2);
    assert!(lines[1].1.contains("\"after\""));
    assert_one_chain(&s);
}

/// Events a replica committed and never sealed (it died between the two) are chained by
/// another replica's sealer on its own (its poll), and by a replica that starts, before it
/// serves.
#[test]
#[ignore = "needs PostgreSQL (.ci/steps/postgres.sh runs it)"]
fn postgres_a_dead_replicas_committed_events_are_sealed_by_the_others() {
    let schema = postgres("postgres_orphan_events");
    let alive = PostgresStore::connect(&schema.url(), sealer(), 1).unwrap();
    // What a replica killed after its commit leaves: tagged rows, no sealer to chain them.
    let mut client = ::postgres::Client::connect(&schema.url(), ::postgres::NoTls).unwrap();
    let orphan = |id: &str| {
        let text = serde_json::to_string(AuditEvent::test(id).body()).unwrap();
        let tag = sealer().tag_unsealed(&text).to_vec();
        (text, tag)
    };
    let (text, tag) = orphan("orphan-1");
    client
        .execute(
            "INSERT INTO audit_unsealed (event, tag) VALUES ($1, $2)",
            &[&text, &tag],
        )
        .unwrap();
    // Nobody asks: the live replica's poll seals it (waited for, bounded, not timed).
    let mut polled = false;
    for _ in 0..600 {
        if alive.audit_lines_after(0, 10).unwrap().len() == 1 {
            polled = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(
        polled,
        "the live replica's sealer never chained the orphaned event"
    );
    drop(alive);
    let (text, tag) = orphan("orphan-2");
    client
        .execute(
            "INSERT INTO audit_unsealed (event, tag) VALUES ($1, $2)",
            &[&text, &tag],
        )
        .unwrap();
    // A replica starting chains what waits before `connect` returns.
    let starting = PostgresStore::connect(&schema.url(), sealer(), 1).unwrap();
    let lines = starting.audit_lines_after(0, 10).unwrap();
    assert_eq!(lines.len(), 2);
    assert!(lines[1].1.contains("orphan-2"));
    assert_one_chain(&starting);
}

#[test]
fn ready_probes_without_writing() {
    for (s, _guard) in stores("ready_probes") {
        assert_eq!(s.oldest_pending().unwrap(), None);
        s.create(&new("a", 100), &[]).unwrap();
        assert!(s.oldest_pending().unwrap().is_some());
        let head = s.audit_head().unwrap();
        s.ready().unwrap();
        s.ready().unwrap();
        assert_eq!(s.audit_head().unwrap(), head, "the probe rolled back");
    }
}

#[test]
#[ignore = "needs PostgreSQL (.ci/steps/postgres.sh runs it)"]
fn ready_fails_when_a_migration_is_missing() {
    let schema = postgres("ready_migration");
    let store = PostgresStore::connect(&schema.url(), sealer(), 1).unwrap();
    store.ready().unwrap();
    let mut other = ::postgres::Client::connect(&schema.url(), ::postgres::NoTls).unwrap();
    other
        .batch_execute(
            "DELETE FROM countersign_migrations \
             WHERE version = (SELECT MAX(version) FROM countersign_migrations)",
        )
        .unwrap();
    let e = store.ready().unwrap_err().to_string();
    assert!(e.contains("this build expects"), "{e}");
}

/// A database of the release with auditors and before the grants' gateways (PostgreSQL
/// migration 8) upgrades in place: the migrations after 8 only, its rows kept, the store ready
/// and the gateways table in use.
#[test]
#[ignore = "needs PostgreSQL (.ci/steps/postgres.sh runs it)"]
fn postgres_at_migration_8_upgrades_to_the_grant_gateways() {
    let schema = postgres("upgrade_from_8");
    drop(PostgresStore::connect(&schema.url(), sealer(), 1).unwrap());
    let mut client = ::postgres::Client::connect(&schema.url(), ::postgres::NoTls).unwrap();
    // Back to the schema of that release, with an auditor enrolled under it.
    client
        .batch_execute(
            "DROP TABLE notify_outbox;
             DROP TABLE standing_grant_gateways;
             DELETE FROM countersign_migrations WHERE version > 8;
             INSERT INTO auditors (name, token_hash, created_at)
             VALUES ('compliance', decode(repeat('01', 32), 'hex'), 10);",
        )
        .unwrap();
    let store = PostgresStore::connect(&schema.url(), sealer(), 1).unwrap();
    store.ready().unwrap();
    let versions: Vec<i32> = client
        .query(
            "SELECT version FROM countersign_migrations ORDER BY version",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let latest = i32::try_from(super::postgres::MIGRATIONS.len()).unwrap();
    assert_eq!(versions, (1..=latest).collect::<Vec<_>>());
    assert_eq!(store.auditors().unwrap().len(), 1, "the auditor is kept");
    let s: &dyn Store = &store;
    signed_grant(s, "g", 2);
    let live = s.live_standing_grants_of("gw", 100, 10).unwrap();
    assert_eq!(
        live.len(),
        1,
        "a new grant's gateways are recorded and read"
    );
}

// ---- standing grants ----------------------------------------------------------------------

fn standing_call(id: &str) -> NewApproval {
    NewApproval {
        status: ApprovalStatus::Approved,
        ..new(id, 10_000)
    }
}

/// A proposal `id` with `max_uses`, expiring at 5,000 ms, signed (APPROVED) at 50 ms.
fn signed_grant(s: &dyn Store, id: &str, max_uses: u32) {
    let proposal = NewApproval {
        profile: countersign::STANDING_GRANT_PROFILE.into(),
        ..new(id, 10_000)
    };
    let grant = standing::NewStandingGrant {
        id: id.into(),
        expires_at: 5_000,
        max_uses,
        gateways: vec!["gw".into()],
    };
    s.create_standing_proposal(&proposal, &grant, &[AuditEvent::test(id)])
        .unwrap();
    let nonce = id
        .bytes()
        .fold(7u8, |a, b| a.wrapping_mul(31).wrapping_add(b));
    let settled = s
        .settle(&verdict(id, 50, ApprovalStatus::Approved, nonce, 1))
        .unwrap();
    assert!(matches!(settled, SettleOutcome::Settled(_)), "{settled:?}");
}

fn use_records() -> standing::UseRecords {
    Arc::new(|n| Ok((format!("{{\"use\":{n}}}"), vec![AuditEvent::test("use")])))
}

#[test]
fn a_standing_grant_gives_each_use_once_up_to_max_uses_and_only_once_signed() {
    for (s, _schema) in stores("standing_uses") {
        let s = s.as_ref();
        let proposal = NewApproval {
            profile: countersign::STANDING_GRANT_PROFILE.into(),
            ..new("unsigned", 10_000)
        };
        let grant = standing::NewStandingGrant {
            id: "unsigned".into(),
            expires_at: 5_000,
            max_uses: 3,
            gateways: vec!["gw".into()],
        };
        s.create_standing_proposal(&proposal, &grant, &[]).unwrap();
        let used = s.use_standing_grant(&standing_call("c0"), "unsigned", 100, use_records());
        assert_eq!(used.unwrap(), None, "an unsigned proposal gives nothing");
        assert!(s.get("c0").unwrap().is_none());

        signed_grant(s, "g", 3);
        for n in 1..=3u32 {
            let id = format!("c{n}");
            let used = s.use_standing_grant(&standing_call(&id), "g", 100, use_records());
            assert_eq!(used.unwrap(), Some(n));
            let row = s.get(&id).unwrap().unwrap();
            assert_eq!(row.status, ApprovalStatus::Approved);
            assert_eq!(row.evidence_json, Some(format!("{{\"use\":{n}}}")));
        }
        let used = s.use_standing_grant(&standing_call("c4"), "g", 100, use_records());
        assert_eq!(used.unwrap(), None, "max_uses reached");
        assert!(
            s.get("c4").unwrap().is_none(),
            "nothing written for a refused use"
        );
        let g = s.standing_grant("g").unwrap().unwrap();
        assert_eq!((g.uses, g.max_uses), (3, 3));
        assert!(!g.is_live(100));
        assert!(s.live_standing_grants(100, 10).unwrap().is_empty());
        assert_one_chain(s);
    }
}

/// A call a standing grant covers keeps the revision link its gateway gave it (the grant insert
/// once dropped it, on both backends).
#[test]
fn a_standing_covered_call_keeps_its_revision_link() {
    for (s, _schema) in stores("standing_revises") {
        let s = s.as_ref();
        signed_grant(s, "g", 2);
        s.create(&new("v1", 1_000), &[]).unwrap();
        let v2 = NewApproval {
            revises: Some("v1".into()),
            ..standing_call("v2")
        };
        let used = s.use_standing_grant(&v2, "g", 100, use_records());
        assert_eq!(used.unwrap(), Some(1));
        let row = s.get("v2").unwrap().unwrap();
        assert_eq!(row.revises.as_deref(), Some("v1"));
        assert_eq!(row.evidence_json.as_deref(), Some("{\"use\":1}"));
        let proposal = NewApproval {
            profile: countersign::STANDING_GRANT_PROFILE.into(),
            revises: Some("v1".into()),
            ..new("p2", 10_000)
        };
        let grant = standing::NewStandingGrant {
            id: "p2".into(),
            expires_at: 5_000,
            max_uses: 1,
            gateways: vec!["gw".into()],
        };
        s.create_standing_proposal(&proposal, &grant, &[]).unwrap();
        assert_eq!(s.get("p2").unwrap().unwrap().revises.as_deref(), Some("v1"));
    }
}

#[test]
fn a_standing_grant_gives_uses_only_to_the_gateways_it_names() {
    for (s, _schema) in stores("standing_gateways") {
        let s = s.as_ref();
        signed_grant(s, "g", 10);
        let of = |gateway: &str| -> Vec<String> {
            s.live_standing_grants_of(gateway, 100, 10)
                .unwrap()
                .into_iter()
                .map(|g| g.proposal.id)
                .collect()
        };
        assert_eq!(of("gw"), ["g"]);
        assert!(
            of("other-team").is_empty(),
            "not a candidate for another gateway"
        );
        // Even asked directly, the guard refuses a use for a call of another gateway.
        let other = NewApproval {
            gateway: "other-team".into(),
            ..standing_call("theirs")
        };
        let used = s.use_standing_grant(&other, "g", 100, use_records());
        assert_eq!(used.unwrap(), None);
        assert!(s.get("theirs").unwrap().is_none());
        let used = s.use_standing_grant(&standing_call("ours"), "g", 100, use_records());
        assert_eq!(used.unwrap(), Some(1));
    }
}

#[test]
fn an_expired_or_revoked_standing_grant_gives_nothing() {
    for (s, _schema) in stores("standing_stop") {
        let s = s.as_ref();
        signed_grant(s, "g", 10);
        let live: Vec<String> = s
            .live_standing_grants(100, 10)
            .unwrap()
            .into_iter()
            .map(|g| g.proposal.id)
            .collect();
        assert_eq!(live, ["g"]);
        // Expiry is exclusive: at 5,000 ms the grant no longer covers.
        let used = s.use_standing_grant(&standing_call("late"), "g", 5_000, use_records());
        assert_eq!(used.unwrap(), None);
        let used = s.use_standing_grant(&standing_call("in-time"), "g", 4_999, use_records());
        assert_eq!(used.unwrap(), Some(1));
        assert!(
            s.revoke_standing_grant("g", "alice", 200, &AuditEvent::test("g"))
                .unwrap()
        );
        assert!(
            !s.revoke_standing_grant("g", "alice", 300, &AuditEvent::test("g"))
                .unwrap()
        );
        let used = s.use_standing_grant(&standing_call("after"), "g", 300, use_records());
        assert_eq!(used.unwrap(), None, "revoked");
        let g = s.standing_grant("g").unwrap().unwrap();
        assert_eq!(
            (g.revoked_at, g.revoked_by.as_deref()),
            (Some(200), Some("alice"))
        );
        assert_one_chain(s);
    }
}

#[test]
fn concurrent_uses_of_one_standing_grant_never_exceed_max_uses() {
    for (s, _schema) in stores("standing_race") {
        let s = s.as_ref();
        signed_grant(s, "g", 5);
        let uses: Vec<u32> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..32)
                .map(|i| {
                    scope.spawn(move || {
                        s.use_standing_grant(
                            &standing_call(&format!("c{i}")),
                            "g",
                            100,
                            use_records(),
                        )
                        .unwrap()
                    })
                })
                .collect();
            handles
                .into_iter()
                .filter_map(|h| h.join().unwrap())
                .collect()
        });
        let mut sorted = uses.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, [1, 2, 3, 4, 5], "{uses:?}");
        assert_one_chain(s);
    }
}

#[test]
fn open_approvals_are_the_pending_unexpired_ones_newest_first() {
    for (s, _schema) in stores("open_approvals") {
        let s = s.as_ref();
        for (id, created, expires) in [("a", 1, 1_000), ("b", 2, 1_000), ("c", 3, 50)] {
            let a = NewApproval {
                created_at: created,
                ..new(id, expires)
            };
            s.create(&a, &[]).unwrap();
        }
        s.settle(&verdict("a", 10, ApprovalStatus::Denied, 9, 1))
            .unwrap();
        let open: Vec<String> = s
            .open_approvals(100, 10)
            .unwrap()
            .into_iter()
            .map(|r| r.id)
            .collect();
        assert_eq!(open, ["b"], "a is settled, c has expired by 100 ms");
        let open: Vec<String> = s
            .open_approvals(20, 10)
            .unwrap()
            .into_iter()
            .map(|r| r.id)
            .collect();
        assert_eq!(open, ["c", "b"]);
    }
}

// --- operator preauthorizations --------------------------------------------------------------

/// Far in the future by any database clock.
const FUTURE_MS: i64 = 4_102_444_800_000; // 2100-01-01

fn preauth_def(slug: &str, digest: u8, max_uses: i64, expires_at: i64) -> PreauthDefinition {
    PreauthDefinition {
        slug: slug.into(),
        definition_json: format!("{{\"slug\":\"{slug}\",\"v\":{digest}}}"),
        digest: [digest; 32],
        expires_at,
        max_uses,
    }
}

fn approved(id: &str) -> NewApproval {
    NewApproval {
        status: ApprovalStatus::Approved,
        grant_expires_at: Some(FUTURE_MS),
        ..new(id, FUTURE_MS)
    }
}

fn outcome_with_preauth(id: &str) -> AuditEvent {
    AuditEvent::outcome(id, "2026-01-01T00:00:00Z", "APPROVED", None)
        .with_member("preauthorization", serde_json::json!({"slug": "s"}))
}

fn stored(s: &dyn Store, slug: &str) -> StoredPreauth {
    s.preauthorizations()
        .unwrap()
        .into_iter()
        .find(|p| p.slug == slug)
        .unwrap_or_else(|| panic!("{slug} not stored"))
}

#[test]
fn reconciling_keeps_uses_and_disables_replaces_changes_and_removes_the_absent() {
    for (s, _guard) in stores("preauth_reconcile") {
        let s = s.as_ref();
        let first = [
            preauth_def("a", 1, 5, FUTURE_MS),
            preauth_def("b", 2, 5, FUTURE_MS),
        ];
        let changes = s.reconcile_preauthorizations(&first, 0).unwrap();
        assert_eq!(changes.len(), 2);
        assert_eq!(kinds(s), ["preauthorization", "preauthorization"]);
        // Same config again: nothing changes, nothing is written.
        assert!(s.reconcile_preauthorizations(&first, 1).unwrap().is_empty());
        assert_eq!(kinds(s).len(), 2);

        // A use and a manual disable...
        assert_eq!(
            s.create_preauthorized(&approved("u1"), "a", &[1; 32], &[])
                .unwrap(),
            Some(1)
        );
        assert_eq!(
            s.disable_preauthorization("b", 5).unwrap(),
            DisableOutcome::Disabled
        );
        assert_eq!(
            s.disable_preauthorization("b", 6).unwrap(),
            DisableOutcome::AlreadyDisabled
        );
        assert_eq!(
            s.disable_preauthorization("zz", 6).unwrap(),
            DisableOutcome::NotFound
        );

        // ...survive a changed definition, which replaces the stored fields.
        let second = [
            preauth_def("a", 9, 7, FUTURE_MS),
            preauth_def("b", 2, 5, FUTURE_MS),
        ];
        let changes = s.reconcile_preauthorizations(&second, 10).unwrap();
        assert_eq!(changes, vec![PreauthChange::Replace(second[0].clone())]);
        let a = stored(s, "a");
        assert_eq!((a.uses, a.max_uses, a.digest), (1, 7, [9; 32]));
        assert_eq!(
            stored(s, "b").disabled_at,
            Some(5),
            "a manual disable is kept"
        );

        // A slug absent from the config is disabled, not deleted.
        let changes = s.reconcile_preauthorizations(&second[..1], 11).unwrap();
        assert_eq!(changes, vec![PreauthChange::Remove("b".into())]);
        assert!(!stored(s, "b").in_config);
        let last = lines(s).pop().unwrap();
        assert_eq!(last["change"], "removed");
        assert_one_chain(s);
    }
}

#[test]
fn a_preauthorized_create_consumes_a_use_atomically_with_its_row_and_lines() {
    for (s, _guard) in stores("preauth_consume") {
        let s = s.as_ref();
        s.reconcile_preauthorizations(&[preauth_def("s", 1, 2, FUTURE_MS)], 0)
            .unwrap();
        let used = s
            .create_preauthorized(
                &approved("p1"),
                "s",
                &[1; 32],
                &[outcome_with_preauth("p1")],
            )
            .unwrap();
        assert_eq!(used, Some(1));
        let record = s.get("p1").unwrap().unwrap();
        assert_eq!(
            record.preauthorization,
            Some(PreauthUse {
                slug: "s".into(),
                digest: [1; 32],
                use_number: 1
            })
        );
        let line = lines(s).pop().unwrap();
        assert_eq!(
            line["preauthorization"]["use"], 1,
            "the use is stamped in the line"
        );

        // A stale digest consumes nothing and writes nothing.
        let before = lines(s).len();
        assert_eq!(
            s.create_preauthorized(
                &approved("p2"),
                "s",
                &[7; 32],
                &[outcome_with_preauth("p2")]
            )
            .unwrap(),
            None
        );
        assert!(s.get("p2").unwrap().is_none());
        assert_eq!(lines(s).len(), before);

        assert_eq!(
            s.create_preauthorized(&approved("p3"), "s", &[1; 32], &[])
                .unwrap(),
            Some(2)
        );
        // max_uses = 2: the third is refused, and a duplicate id rolls the use back.
        assert_eq!(
            s.create_preauthorized(&approved("p4"), "s", &[1; 32], &[])
                .unwrap(),
            None
        );
        assert_eq!(stored(s, "s").uses, 2);
        s.reconcile_preauthorizations(&[preauth_def("s", 5, 3, FUTURE_MS)], 1)
            .unwrap();
        assert!(matches!(
            s.create_preauthorized(&approved("p1"), "s", &[5; 32], &[]),
            Err(StoreError::DuplicateId(_))
        ));
        assert_eq!(stored(s, "s").uses, 2, "the failed insert returned its use");
    }
}

#[test]
fn expired_disabled_and_removed_preauthorizations_approve_nothing_by_database_time() {
    for (s, _guard) in stores("preauth_refusals") {
        let s = s.as_ref();
        s.reconcile_preauthorizations(
            &[
                // Expired by the database's clock (2001), whatever the service clock says.
                preauth_def("old", 1, 5, 1_000_000_000_000),
                preauth_def("off", 2, 5, FUTURE_MS),
                preauth_def("gone", 3, 5, FUTURE_MS),
            ],
            0,
        )
        .unwrap();
        s.disable_preauthorization("off", 1).unwrap();
        s.reconcile_preauthorizations(
            &[
                preauth_def("old", 1, 5, 1_000_000_000_000),
                preauth_def("off", 2, 5, FUTURE_MS),
            ],
            2,
        )
        .unwrap();
        for (i, (slug, d)) in [("old", 1), ("off", 2), ("gone", 3), ("nobody", 4)]
            .into_iter()
            .enumerate()
        {
            let id = format!("r{i}");
            assert_eq!(
                s.create_preauthorized(&approved(&id), slug, &[d; 32], &[])
                    .unwrap(),
                None,
                "{slug}"
            );
        }
    }
}

#[test]
fn a_preauthorized_grant_is_rechecked_before_it_is_collected() {
    for (s, _guard) in stores("preauth_grant_recheck") {
        let s = s.as_ref();
        s.reconcile_preauthorizations(&[preauth_def("s", 1, 5, FUTURE_MS)], 0)
            .unwrap();
        for id in ["g1", "g2", "g3"] {
            s.create_preauthorized(&approved(id), "s", &[1; 32], &[])
                .unwrap();
        }
        let grant = |id: &str| {
            s.collect_grant(
                id,
                "gw",
                &[1; 32],
                None,
                10,
                &AuditEvent::grant(id, "t", "f"),
            )
            .unwrap()
        };
        assert_eq!(grant("g1"), GrantOutcome::Granted { collected_at: 10 });
        // A changed definition: the approval's digest no longer matches.
        s.reconcile_preauthorizations(&[preauth_def("s", 2, 5, FUTURE_MS)], 1)
            .unwrap();
        assert_eq!(grant("g2"), GrantOutcome::PreauthorizationWithdrawn);
        // Back to the approved definition, then disabled by hand.
        s.reconcile_preauthorizations(&[preauth_def("s", 1, 5, FUTURE_MS)], 2)
            .unwrap();
        assert_eq!(grant("g2"), GrantOutcome::Granted { collected_at: 10 });
        s.disable_preauthorization("s", 3).unwrap();
        assert_eq!(grant("g3"), GrantOutcome::PreauthorizationWithdrawn);
    }
}

#[test]
fn revisions_are_linked_in_the_row() {
    for (s, _guard) in stores("revisions") {
        let s = s.as_ref();
        s.create(&new("v1", 1_000), &[]).unwrap();
        let v2 = NewApproval {
            revises: Some("v1".into()),
            ..new("v2", 1_000)
        };
        s.create(&v2, &[]).unwrap();
        assert_eq!(s.get("v2").unwrap().unwrap().revises.as_deref(), Some("v1"));
        assert_eq!(s.get("v1").unwrap().unwrap().revises, None);
    }
}

#[test]
#[ignore = "needs PostgreSQL (.ci/steps/postgres.sh runs it)"]
fn postgres_max_uses_holds_across_replicas_under_64_concurrent_calls() {
    let schema = postgres("preauth_replicas");
    let replicas: Vec<Arc<dyn Store>> = (0..3)
        .map(|_| {
            Arc::new(PostgresStore::connect(&schema.url(), sealer(), 4).unwrap()) as Arc<dyn Store>
        })
        .collect();
    for r in &replicas {
        // Every replica reconciles the same config at its start.
        r.reconcile_preauthorizations(&[preauth_def("five", 1, 5, FUTURE_MS)], 0)
            .unwrap();
    }
    let approvals = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..64)
            .map(|i| {
                let r = Arc::clone(&replicas[i % 3]);
                scope.spawn(move || {
                    let id = format!("c{i}");
                    r.create_preauthorized(
                        &approved(&id),
                        "five",
                        &[1; 32],
                        &[outcome_with_preauth(&id)],
                    )
                    .unwrap()
                })
            })
            .collect();
        handles
            .into_iter()
            .filter_map(|h| h.join().unwrap())
            .collect::<Vec<_>>()
    });
    let mut uses = approvals.clone();
    uses.sort_unstable();
    assert_eq!(
        uses,
        [1, 2, 3, 4, 5],
        "exactly five approvals, numbered once each"
    );
    assert_eq!(stored(replicas[0].as_ref(), "five").uses, 5);
    let outcome_lines = lines(replicas[1].as_ref())
        .into_iter()
        .filter(|l| l["kind"] == "outcome")
        .count();
    assert_eq!(outcome_lines, 5, "a refused call writes no line");
    assert_one_chain(replicas[2].as_ref());
}
