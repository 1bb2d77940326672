//! `countersign audit verify SERVICE_LOG --key K --interposer-log LOG --interposer-key K2`: both
//! logs verify under their own keys, then every held call the interposer executed must have one
//! verdict and one collected grant in the service's log for that approval and op_hash.

use crate::support::{BIN, code, scratch_dir, stdout};
use countersign_audit::{AuditEvent, AuditSealer, GENESIS_HASH, authority};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const T: &str = "2026-12-03T10:00:00Z";
const UNTIL: &str = "2026-12-03T10:05:00Z";

fn seal(sealer: &AuditSealer, events: &[AuditEvent]) -> String {
    let mut prev = GENESIS_HASH;
    let mut out = String::new();
    for (i, e) in events.iter().enumerate() {
        let line = sealer.seal(i as u64 + 1, &prev, e);
        prev = line.hash;
        out.push_str(&line.line);
        out.push('\n');
    }
    out
}

fn event(v: Value) -> AuditEvent {
    match v {
        Value::Object(map) => AuditEvent::from_body(map),
        _ => unreachable!(),
    }
}

/// The service's side of one held MCP call approved at once by a tool rule (no human evidence
/// to re-verify) for op_hash `[h; 32]`, and the grant collected for `[g; 32]`.
fn service(id: &str, h: u8, g: Option<u8>) -> Vec<AuditEvent> {
    let op_hash = [h; 32];
    let mut outcome = json!({"kind": "outcome", "approval_id": id, "ts": T, "status": "APPROVED",
                             "reason_code": null});
    outcome["authority"] = authority(Some(&op_hash), Some(UNTIL), "tool_rule", None);
    let mut events = vec![event(outcome)];
    if let Some(g) = g {
        events.push(AuditEvent::grant(
            id,
            T,
            &countersign::b64::encode(&[g; 32]),
        ));
    }
    events
}

fn mcp(kind: &str, call: &str, outcome: Option<(&str, &str)>, h: u8) -> AuditEvent {
    let op_hash = countersign::b64::encode(&[h; 32]);
    let mut v = json!({"kind": kind, "ts": T, "call_id": call, "op_hash": op_hash});
    if kind == "mcp_call" {
        v["agent_id"] = "agent-7".into();
        v["server_id"] = "fs".into();
        v["tool_name"] = "write_file".into();
        v["rule"] = "hold".into();
    }
    if let Some((outcome, id)) = outcome {
        v["outcome"] = outcome.into();
        let key = if outcome == "executed" {
            "approval_ref"
        } else {
            "approval_id"
        };
        v[key] = id.into();
    }
    event(v)
}

fn close() -> AuditEvent {
    event(json!({"kind": "mcp_close", "ts": T}))
}

struct Pair {
    dir: PathBuf,
    service: AuditSealer,
    interposer: AuditSealer,
}

impl Pair {
    fn new(label: &str) -> Self {
        let dir = scratch_dir(label);
        let pair = Self {
            dir,
            service: AuditSealer::from_seed([1; 32]),
            interposer: AuditSealer::from_seed([2; 32]),
        };
        std::fs::write(pair.dir.join("service.pub"), pair.service.public_key_b64()).unwrap();
        std::fs::write(
            pair.dir.join("mcp-audit.key.pub"),
            pair.interposer.public_key_b64(),
        )
        .unwrap();
        pair
    }

    fn verify(&self, service: &[AuditEvent], interposer: &[AuditEvent], json: bool) -> Output {
        let s = self.dir.join("audit.jsonl");
        let i = self.dir.join("mcp-audit.jsonl");
        std::fs::write(&s, seal(&self.service, service)).unwrap();
        std::fs::write(&i, seal(&self.interposer, interposer)).unwrap();
        let mut command = Command::new(BIN);
        command
            .args(["audit", "verify"])
            .arg(&s)
            .arg("--key")
            .arg(self.dir.join("service.pub"))
            .arg("--interposer-log")
            .arg(&i)
            .arg("--interposer-key")
            .arg(self.dir.join("mcp-audit.key.pub"));
        if json {
            command.arg("--json");
        }
        command.output().unwrap()
    }
}

/// A clean interposer log: held once (pending), then executed on the retry.
fn executed_once(id: &str, h: u8) -> Vec<AuditEvent> {
    vec![
        mcp("mcp_call", "c1", None, h),
        mcp("mcp_outcome", "c1", Some(("pending_approval", id)), h),
        mcp("mcp_call", "c2", None, h),
        mcp("mcp_outcome", "c2", Some(("executed", id)), h),
        close(),
    ]
}

fn cross_codes(out: &Output) -> Vec<String> {
    let report: Value = serde_json::from_str(&stdout(out)).unwrap();
    report["cross_check"]["issues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["code"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn a_clean_pair_passes() {
    let pair = Pair::new("cross-clean");
    let out = pair.verify(
        &service("apv_1", 7, Some(7)),
        &executed_once("apv_1", 7),
        false,
    );
    let text = stdout(&out);
    assert_eq!(code(&out), 0, "{text}");
    assert!(
        text.contains("cross-check valid: 1 executed held call(s), 1 grant(s)"),
        "{text}"
    );
    assert!(text.ends_with("valid\n"), "{text}");
}

#[test]
fn an_executed_call_with_no_grant_fails_by_name() {
    let pair = Pair::new("cross-nogrant");
    let out = pair.verify(
        &service("apv_1", 7, None),
        &executed_once("apv_1", 7),
        false,
    );
    let text = stdout(&out);
    assert_eq!(code(&out), 1, "{text}");
    assert!(
        text.contains("cross-check: VIOLATION mcp_executed_without_grant (approval apv_1, interposer line 4, service line -)"),
        "{text}"
    );
    assert!(text.ends_with("INVALID\n"), "{text}");
}

#[test]
fn two_executions_for_one_grant_fail() {
    let pair = Pair::new("cross-twice");
    let mut log = executed_once("apv_1", 7);
    log.insert(4, mcp("mcp_call", "c3", None, 7));
    log.insert(5, mcp("mcp_outcome", "c3", Some(("executed", "apv_1")), 7));
    let out = pair.verify(&service("apv_1", 7, Some(7)), &log, true);
    assert_eq!(code(&out), 1);
    assert_eq!(cross_codes(&out), ["mcp_executed_twice"]);
}

#[test]
fn a_mismatched_op_hash_fails() {
    let pair = Pair::new("cross-mismatch");
    // The service granted op_hash 7; the interposer says it ran op_hash 8 under that approval.
    let out = pair.verify(
        &service("apv_1", 7, Some(7)),
        &executed_once("apv_1", 8),
        true,
    );
    assert_eq!(code(&out), 1);
    assert_eq!(
        cross_codes(&out),
        ["mcp_op_hash_mismatch", "mcp_op_hash_mismatch"]
    );
}

#[test]
fn a_grant_collected_but_never_executed_is_a_violation() {
    let pair = Pair::new("cross-unspent");
    let log = vec![
        mcp("mcp_call", "c1", None, 7),
        mcp("mcp_outcome", "c1", Some(("pending_approval", "apv_1")), 7),
        close(),
    ];
    let out = pair.verify(&service("apv_1", 7, Some(7)), &log, true);
    assert_eq!(code(&out), 1);
    assert_eq!(cross_codes(&out), ["mcp_grant_not_executed"]);
}

#[test]
fn an_interposer_log_under_another_key_is_invalid_and_a_bad_key_unusable() {
    let pair = Pair::new("cross-key");
    let wrong: &Path = &pair.dir.join("service.pub");
    let s = pair.dir.join("audit.jsonl");
    let i = pair.dir.join("mcp-audit.jsonl");
    std::fs::write(&s, seal(&pair.service, &service("apv_1", 7, Some(7)))).unwrap();
    std::fs::write(&i, seal(&pair.interposer, &executed_once("apv_1", 7))).unwrap();
    let run = |key: &Path| {
        Command::new(BIN)
            .args(["audit", "verify"])
            .arg(&s)
            .arg("--key")
            .arg(pair.dir.join("service.pub"))
            .arg("--interposer-log")
            .arg(&i)
            .arg("--interposer-key")
            .arg(key)
            .output()
            .unwrap()
    };
    let out = run(wrong);
    assert_eq!(code(&out), 1);
    assert!(stdout(&out).contains("interposer line 1: VIOLATION bad_signature"));
    std::fs::write(pair.dir.join("junk"), "not a key").unwrap();
    assert_eq!(code(&run(&pair.dir.join("junk"))), 2);
}
