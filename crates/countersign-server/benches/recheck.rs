//! Recheck rate (not a test): `countersign audit recheck` on a synthetic log of N approvals.
//!
//! `cargo bench -p countersign-server --bench recheck -- [APPROVALS]` (default 100000). The log
//! is built and sealed in memory the way the service writes it (request, outcome or a decision,
//! and a grant for the approved ones; a third of the approvals preauthorized, a third decided by
//! a human, a third waiting); then the chain and signatures are verified and every approval is
//! rechecked against a new config that parks the preauthorized calls and narrows the approvers.
//! Prints a markdown table for docs/PERFORMANCE.md.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "benchmark harness: a panic stops a measurement whose setup is broken"
)]

use countersign_audit::{AuditEvent, AuditSealer, GENESIS_HASH, RequestFacts};
use countersign_server::Config;
use countersign_server::audit::recheck;
use serde_json::{Map, Value, json};
use std::time::Instant;

fn main() {
    let approvals: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(100_000);
    let sealer = AuditSealer::from_seed([3; 32]);
    let t = Instant::now();
    let text = build_log(&sealer, approvals);
    let built = t.elapsed().as_secs_f64();
    let lines_total = text.lines().count();

    let key = sealer.public_key();
    let t = Instant::now();
    let report = countersign_audit::verify_log(text.as_bytes(), &key);
    let verified = t.elapsed().as_secs_f64();
    assert!(report.is_valid());

    let config = Config::from_toml(
        r#"
        [groups]
        finance = ["bob"]
        [[tools]]
        name = "payments.transfer"
        approvers = ["finance"]
        "#,
    )
    .unwrap();
    let t = Instant::now();
    let parsed: Vec<Map<String, Value>> = text
        .lines()
        .map(|l| match serde_json::from_str(l).unwrap() {
            Value::Object(m) => m,
            _ => unreachable!(),
        })
        .collect();
    let results = recheck(&parsed, &config);
    let rechecked = t.elapsed().as_secs_f64();
    assert_eq!(results.len(), approvals);
    let changed = results
        .iter()
        .filter(|r| r.verdict.as_str() != "unchanged")
        .count();

    println!("## Recheck\n");
    println!(
        "{approvals} approvals, {lines_total} lines ({} MiB)\n",
        text.len() / (1 << 20)
    );
    println!("| measure | value |\n|---|---|");
    println!("| log built and sealed | {built:.1} s |");
    println!(
        "| chain + signatures verified | {verified:.2} s ({:.0} lines/s) |",
        lines_total as f64 / verified
    );
    println!(
        "| parse + recheck | {rechecked:.2} s ({:.0} approvals/s, {:.0} lines/s) |",
        approvals as f64 / rechecked,
        lines_total as f64 / rechecked
    );
    println!("| verdicts that changed | {changed} |");
}

fn build_log(sealer: &AuditSealer, approvals: usize) -> String {
    let mut out = String::new();
    let mut prev = GENESIS_HASH;
    let mut seq = 0u64;
    let mut push = |e: AuditEvent, out: &mut String| {
        seq += 1;
        let sealed = sealer.seal(seq, &prev, &e);
        prev = sealed.hash;
        out.push_str(&sealed.line);
        out.push('\n');
    };
    let ts = "2026-12-01T10:00:00Z";
    let op_hash = [7u8; 32];
    let fp = countersign::b64::encode(&op_hash);
    for i in 0..approvals {
        let id = format!("apv_{i:08}");
        let params = json!({"to": "DE89", "amount": format!("{}.00", i % 500), "currency": "EUR"});
        let fields =
            json!({"agent_id": "agent-7", "tool_name": "payments.transfer", "params": params});
        let request = AuditEvent::request(&RequestFacts {
            approval_id: &id,
            ts,
            agent_id: "agent-7",
            tool_name: "payments.transfer",
            profile: "countersign.tool-call/1",
            fields: &fields,
            submitted_sha256: "00",
            submitted_text: None,
            severity: "normal",
            expires_at: "2026-12-01T10:05:00Z",
            fingerprint: &fp,
        });
        push(request, &mut out);
        let authority = countersign_audit::authority(
            Some(&op_hash),
            Some("2026-12-01T10:01:00Z"),
            "decision",
            None,
        );
        match i % 3 {
            0 => {
                let outcome = AuditEvent::outcome(&id, ts, "APPROVED", None);
                let outcome = AuditEvent::from_body({
                    let mut b = outcome.body().clone();
                    b.insert(
                        "preauthorization".into(),
                        json!({"slug": "s", "digest": "d", "use": i}),
                    );
                    b.insert("authority".into(), authority.clone());
                    b
                });
                push(outcome, &mut out);
                push(AuditEvent::grant(&id, ts, &fp), &mut out);
            }
            1 => {
                push(AuditEvent::outcome(&id, ts, "PENDING", None), &mut out);
                let decision = AuditEvent::decision(
                    &id,
                    ts,
                    "APPROVED",
                    if i % 2 == 0 { "alice" } else { "bob" },
                    &json!({"level": "AAL2", "source": "evidence"}),
                    &json!({}),
                );
                let decision = AuditEvent::from_body({
                    let mut b = decision.body().clone();
                    b.insert("authority".into(), authority.clone());
                    b
                });
                push(decision, &mut out);
                push(AuditEvent::grant(&id, ts, &fp), &mut out);
            }
            _ => push(AuditEvent::outcome(&id, ts, "PENDING", None), &mut out),
        }
    }
    out
}
