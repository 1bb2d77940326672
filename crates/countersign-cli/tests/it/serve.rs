//! `countersign serve` as a process: SIGKILL at a random point of a burst of verdicts, restart,
//! and check that nothing committed was lost, nothing was decided twice, overdue requests expired,
//! and the audit log verifies (and a tampered copy does not). Lives in the CLI crate because only
//! here does Cargo hand a test the path of the real binary (`CARGO_BIN_EXE_countersign`).

use crate::support;

use countersign::Decision;
use serde_json::Value;
use std::path::Path;
use support::{Api, Approver, QUICK_TOOL, Server, audit_verify, code, run_with_data_dir};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_verdicts_loses_nothing_and_doubles_nothing() {
    let dir = support::scratch_dir("serve");
    let alice = Approver::new("alice", "alice-es256", false);
    let bob = Approver::new("bob", "bob-es256", true);
    support::write_config(&dir, &[&alice, &bob], QUICK_TOOL);

    let mut server = Server::start(&dir);
    let gateway = server.add_gateway("serve-test").await;
    let api = Api::for_gateway(&server.base, &gateway);
    let token = api.login(&alice).await;
    let survivor = api.create("payments.transfer", 1000).await;
    let quick = api.create("quick", 1001).await;
    let quick_expires = api.get(&format!("/v1/approvals/{quick}")).await["expires_at"]
        .as_str()
        .unwrap()
        .to_owned();

    // A burst of verdicts, with the process killed partway through.
    let mut ids = Vec::new();
    let mut prepared = Vec::new();
    for n in 0..24 {
        let id = api.create("payments.transfer", n).await;
        let decision = if n % 3 == 0 {
            Decision::Denied
        } else {
            Decision::Approved
        };
        prepared.push(api.prepare(&alice, &token, &id, decision).await);
        ids.push(id);
    }
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    for (id, body) in ids.iter().cloned().zip(prepared) {
        let (http, base, token, tx) = (
            api.http.clone(),
            api.base.clone(),
            token.clone(),
            tx.clone(),
        );
        tokio::spawn(async move {
            let answer = match http.decide(&base, &token, &id, &body).await {
                Some((200, answer)) => Some(answer),
                _ => None,
            };
            let _ = tx.send((id, answer));
        });
    }
    drop(tx);
    let mut acknowledged: Vec<(String, Value)> = Vec::new();
    while let Some((id, answer)) = rx.recv().await {
        if let Some(a) = answer {
            acknowledged.push((id, a));
        }
        if acknowledged.len() == 8 {
            server.sigkill();
        }
    }
    assert!(acknowledged.len() >= 8);

    // Wait (by the clock, not a fixed sleep) until the quick request is overdue.
    let overdue = time::OffsetDateTime::parse(
        &quick_expires,
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap();
    while time::OffsetDateTime::now_utc() <= overdue {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }

    let mut server = Server::start(&dir);
    // The gateway's token survives the restart: it is in the database.
    let api = Api::for_gateway(&server.base, &gateway);
    // Every acknowledged verdict survived, unchanged.
    for (id, answer) in &acknowledged {
        let now = api.get(&format!("/v1/approvals/{id}")).await;
        assert_eq!(now["status"], answer["status"], "{id}");
        assert_eq!(
            now["approver_evidence"], answer["approver_evidence"],
            "{id}"
        );
    }
    // Unacknowledged ones either committed before the kill or are still pending.
    for id in &ids {
        let s = api.get(&format!("/v1/approvals/{id}")).await;
        assert!(matches!(
            s["status"].as_str(),
            Some("PENDING" | "APPROVED" | "DENIED")
        ));
    }
    // The overdue request expired while the process was down; it can never be approved now.
    let q = api.get(&format!("/v1/approvals/{quick}")).await;
    assert_eq!(q["status"], "DENIED");
    assert_eq!(q["reason_code"], "expired_unanswered");
    // A pending request survived and can still be decided, by another approver.
    let bob_token = api.login(&bob).await;
    let body = api
        .prepare(&bob, &bob_token, &survivor, Decision::Approved)
        .await;
    let (status, decided) = api
        .post(
            &format!("/v1/approver/approvals/{survivor}/decision"),
            Some(&bob_token),
            &body,
        )
        .await;
    assert_eq!(status, 200, "{decided:?}");

    // Graceful shutdown on SIGTERM.
    server.sigterm();

    // The audit log: complete, chained, signed; no approval decided twice. A tampered copy fails.
    let data = dir.join("data");
    let log = data.join("audit.jsonl");
    let key = data.join("service-key.pub");
    assert_eq!(code(&audit_verify(&log, &key)), 0);
    let text = std::fs::read_to_string(&log).unwrap();
    let decisions = text
        .lines()
        .filter(|l| l.contains("\"kind\":\"decision\""))
        .count();
    let settled = text
        .lines()
        .filter(|l| l.contains("\"kind\":\"settlement\""))
        .count();
    assert!(decisions > acknowledged.len());
    assert!(settled >= 1);
    // `--floor` times the signatures the log requires: every line's seal and every Decision's
    // evidence, all of which verify here.
    let floor = support::audit_verify_with(&log, &key, &["--floor"]);
    assert_eq!(code(&floor), 0);
    let report = String::from_utf8_lossy(&floor.stderr);
    let lines = text.lines().count();
    assert!(
        report.contains(&format!("floor: {lines} seals in ")),
        "{report}"
    );
    let evidence = report
        .split_once("0 failed), ")
        .and_then(|(_, rest)| rest.split_once(" evidence signatures of "))
        .and_then(|(n, _)| n.parse::<usize>().ok());
    assert!(evidence.is_some_and(|n| n >= decisions), "{report}");
    assert!(
        report.contains(&format!("signatures of {decisions} Decisions in ")),
        "{report}"
    );
    assert!(report.contains(", 0 failed, backend "), "{report}");
    let tampered = dir.join("tampered.jsonl");
    std::fs::write(&tampered, text.replacen("\"alice\"", "\"mallory\"", 1)).unwrap();
    assert_eq!(code(&audit_verify(&tampered, &key)), 1);
    let mut lines: Vec<&str> = text.lines().collect();
    lines.remove(2);
    std::fs::write(&tampered, lines.join("\n") + "\n").unwrap();
    assert_eq!(code(&audit_verify(&tampered, &key)), 1);
    assert_eq!(code(&audit_verify(&log, Path::new("not-a-key"))), 2);

    let export = run_with_data_dir(&["registry", "export"], &data);
    assert!(export.status.success());
    let doc: Value = serde_json::from_slice(&export.stdout).unwrap();
    assert_eq!(doc["credentials"].as_array().map(Vec::len), Some(2));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The log lines of a `--log-format json` run, each parsed (a line that is not a JSON object
/// fails the test: a log pipeline would choke on it).
fn json_log_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| {
            let v: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("log line is not JSON ({e}): {line:?}"));
            assert!(v.is_object(), "{line}");
            v
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_name_the_approval_and_gateway_on_every_line_of_a_request() {
    let dir = support::scratch_dir("serve-json-logs");
    let alice = Approver::new("alice", "alice-es256", false);
    support::write_config(&dir, &[&alice], "");
    let log = dir.join("serve.log");
    let log_file = std::fs::File::create(&log).unwrap();
    let mut server = Server::spawn_with(
        "127.0.0.1:0",
        &dir.join("data"),
        &dir.join("config.toml"),
        None,
        |command| {
            command
                .args(["--log-format", "json"])
                .env("COUNTERSIGN_LOG", "info")
                .stderr(log_file);
        },
    );
    let gateway = server.add_gateway("billing-gw").await;
    let api = Api::for_gateway(&server.base, &gateway);
    let id = api.create("payments.transfer", 7).await;
    let token = api.login(&alice).await;
    let body = api.prepare(&alice, &token, &id, Decision::Approved).await;
    let (status, _) = api
        .http
        .decide(&api.base, &token, &id, &body)
        .await
        .unwrap();
    assert_eq!(status, 200);
    let (status, _) = api
        .http
        .grant(&api.base, &id, 7, "payments.transfer")
        .await
        .unwrap();
    assert_eq!(status, 200);
    // A path id that is not of our shape (here with a newline) is never written to the log.
    let forged = "x%0A%7B%22level%22%3A%22ERROR%22%7D";
    let (status, _) = api
        .post(
            &format!("/v1/approvals/{forged}/withdraw"),
            None,
            &Value::Null,
        )
        .await;
    assert!(status >= 400);
    server.sigterm();

    let lines = json_log_lines(&log);
    let about_id: Vec<&Value> = lines
        .iter()
        .filter(|l| l["span"]["approval_id"] == id.as_str())
        .collect();
    let messages: Vec<&str> = about_id
        .iter()
        .filter_map(|l| l["message"].as_str())
        .collect();
    for expected in ["approval created", "decision recorded", "grant collected"] {
        assert!(messages.contains(&expected), "{expected:?} in {messages:?}");
    }
    // Every line a request caused names its route; the gateway's lines name the gateway.
    let created = about_id
        .iter()
        .find(|l| l["message"] == "approval created")
        .unwrap();
    assert_eq!(created["span"]["route"], "/v1/approvals");
    assert_eq!(created["span"]["gateway"], "billing-gw");
    assert_eq!(created["status"], "PENDING");
    let decided = about_id
        .iter()
        .find(|l| l["message"] == "decision recorded")
        .unwrap();
    assert_eq!(
        decided["span"]["route"],
        "/v1/approver/approvals/{id}/decision"
    );
    assert_eq!(decided["status"], "APPROVED");
    // The closing line of each request carries the same span plus its status.
    assert!(about_id.iter().any(|l| l["message"] == "served"
        && l["span"]["route"] == "/v1/approvals/{id}/grant"
        && l["status"] == 200));
    // The forged id reached the log as nothing: no line carries it, the request is still logged.
    assert!(lines.iter().all(|l| !l.to_string().contains("ERROR\\\"}")));
    assert!(
        lines
            .iter()
            .any(|l| l["span"]["route"] == "/v1/approvals/{id}/withdraw"
                && l["span"]["approval_id"].is_null()
                && l["message"] == "served")
    );
}
