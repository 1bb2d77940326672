//! The command-line contract: outputs and exit codes scripts depend on (docs/SPEC.md §11).

use crate::support;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use support::{BIN, stderr, stdout};

const ACME_PIN: &str = "8fcf6d8b6400dc4466cd2b91094e76c60ed2eaeef10085f1e098e1ae3f7d7501";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn countersign(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .current_dir(repo())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn countersign");
    // A command that does not read stdin may exit before we finish writing: that is not an error.
    if let Err(e) = child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
    {
        assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "write stdin: {e}");
    }
    child.wait_with_output().expect("wait")
}

fn verdict(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("verdict JSON: {e}: {}", stdout(o)))
}

const PAYMENT: &str = r#"{"profile":"countersign.payment/1","decision":"APPROVED","fields":{"amount":"40000.00","currency":"EUR","source_account":"ops-main","destination_account":"account-A","reference":"INV-2291"}}"#;

#[test]
fn op_hash_prints_base64url_or_hex_and_a_newline() {
    let b64 = countersign(&["op-hash"], PAYMENT);
    assert_eq!(b64.status.code(), Some(0), "{}", stderr(&b64));
    let text = stdout(&b64);
    assert!(text.ends_with('\n'));
    let b64 = text.trim_end();
    assert_eq!(b64.len(), 43, "32 bytes unpadded: {b64}");
    assert!(
        b64.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    );

    let hex = countersign(&["op-hash", "--hex"], PAYMENT);
    let hex = stdout(&hex).trim_end().to_owned();
    assert_eq!(hex.len(), 64);
    let decoded = countersign::b64::decode(b64).expect("base64url");
    let from_hex: Vec<u8> = (0..32)
        .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).expect("hex"))
        .collect();
    assert_eq!(decoded, from_hex);
}

#[test]
fn op_hash_refuses_inadmissible_input_with_exit_2_and_the_reason() {
    let duplicate = PAYMENT.replace(
        r#""amount":"40000.00","#,
        r#""amount":"40000.00","amount":"1.00","#,
    );
    let out = countersign(&["op-hash"], &duplicate);
    assert_eq!(out.status.code(), Some(2));
    assert!(stdout(&out).is_empty());
    assert!(
        stderr(&out).contains("action_inadmissible"),
        "{}",
        stderr(&out)
    );

    let unknown = PAYMENT.replace("countersign.payment/1", "acme.payment/1");
    let out = countersign(&["op-hash"], &unknown);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("profile_unknown"), "{}", stderr(&out));
}

#[test]
fn verify_exit_codes_follow_the_verdict() {
    let allow = countersign(
        &[
            "verify",
            "fixtures/worked-example/approve-account-a.case.json",
        ],
        "",
    );
    assert_eq!(allow.status.code(), Some(0), "{}", stderr(&allow));
    let v = verdict(&allow);
    assert_eq!(v["effective"], "ALLOW");
    assert_eq!(v["reason_code"], serde_json::Value::Null);
    assert_eq!(v["identity_assurance"]["level"], "AAL2");

    let deny = countersign(
        &[
            "verify",
            "fixtures/worked-example/replay-to-account-b.case.json",
        ],
        "",
    );
    assert_eq!(deny.status.code(), Some(1));
    assert_eq!(verdict(&deny)["reason_code"], "binding_mismatch");

    let refused = countersign(
        &["verify", "-"],
        &std::fs::read_to_string(repo().join("fixtures/worked-example/refuse-account-a.case.json"))
            .expect("fixture"),
    );
    assert_eq!(refused.status.code(), Some(1));
    assert_eq!(verdict(&refused)["reason_code"], "approver_refused");

    let unusable = countersign(&["verify", "-"], r#"{"action": 1}"#);
    assert_eq!(unusable.status.code(), Some(2));
    assert!(stdout(&unusable).is_empty());
    assert!(
        stderr(&unusable).contains("unusable CASE"),
        "{}",
        stderr(&unusable)
    );
}

#[test]
fn verify_exits_2_for_a_contradictory_policy_or_an_unusable_result() {
    let worked: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            repo().join("fixtures/worked-example/approve-account-a.case.json"),
        )
        .expect("fixture"),
    )
    .expect("fixture JSON");
    let run = |case: &serde_json::Value| countersign(&["verify", "-"], &case.to_string());

    // require_evidence = false beside a quorum of two: refused where it is loaded, no verdict.
    let mut contradictory = worked.clone();
    contradictory["policy"]["require_evidence"] = false.into();
    contradictory["policy"]["quorum"] = 2.into();
    contradictory["result"] = "APPROVED".into();
    let out = run(&contradictory);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    assert!(stdout(&out).is_empty());
    assert!(
        stderr(&out).contains("require_evidence, quorum"),
        "{}",
        stderr(&out)
    );
    // The same bare APPROVED under a consistent evidence-optional policy is a verdict.
    contradictory["policy"]["quorum"] = 1.into();
    assert_eq!(run(&contradictory).status.code(), Some(0));

    // approver_evidence: null is not an array: the result envelope is unusable.
    let mut null = worked.clone();
    null["result"]["approver_evidence"] = serde_json::Value::Null;
    assert_eq!(run(&null).status.code(), Some(2));

    // A duplicate member in the result envelope: unusable, whichever one a reader would keep.
    let text = worked.to_string().replacen(
        r#""status":"APPROVED""#,
        r#""status":"DENIED","status":"APPROVED""#,
        1,
    );
    assert_ne!(text, worked.to_string());
    let out = countersign(&["verify", "-"], &text);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
}

#[test]
fn both_backends_give_the_same_verdict() {
    let path = "fixtures/worked-example/approve-account-a.case.json";
    let pure = verdict(&countersign(
        &["verify", "--backend", "rustcrypto", path],
        "",
    ));
    let ring = verdict(&countersign(&["verify", "--backend", "ring", path], ""));
    assert_eq!(pure, ring);
}

#[test]
fn audit_mode_says_it_does_not_enforce() {
    let out = countersign(
        &[
            "verify",
            "--audit",
            "fixtures/worked-example/approve-account-a.case.json",
        ],
        "",
    );
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(verdict(&out)["replay"], "report_only");
}

#[test]
fn operator_profiles_are_loaded_only_with_a_matching_pin() {
    let deploy = r#"{"profile":"acme.deploy/1","decision":"APPROVED","fields":{"service":"billing","version":"2.4.1","environment":"prod"}}"#;
    let unpinned = countersign(&["op-hash"], deploy);
    assert_eq!(
        unpinned.status.code(),
        Some(2),
        "an operator profile is never found without a pin"
    );
    assert!(stderr(&unpinned).contains("profile_unknown"));

    let pin = format!("fixtures/profiles/acme.deploy.1.json={ACME_PIN}");
    let pinned = countersign(&["op-hash", "--profile", &pin], deploy);
    assert_eq!(pinned.status.code(), Some(0), "{}", stderr(&pinned));

    let wrong = format!("fixtures/profiles/acme.deploy.1.json={}", "00".repeat(32));
    let refused = countersign(&["op-hash", "--profile", &wrong], deploy);
    assert_eq!(refused.status.code(), Some(2));
    assert!(stderr(&refused).contains("digest"), "{}", stderr(&refused));

    let digest = countersign(
        &["profile-digest", "fixtures/profiles/acme.deploy.1.json"],
        "",
    );
    assert_eq!(stdout(&digest), format!("{ACME_PIN}  acme.deploy/1\n"));
}
