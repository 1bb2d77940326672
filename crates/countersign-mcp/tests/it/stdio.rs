//! The held-call life cycle over stdio: pass-through, holds, refusals, policy changes, evidence,
//! restarts and cancels.

use crate::support::{
    Approver, Upstream, approval_id, approval_status, as_client_sent, base_config, close,
    close_keeping_service, outcomes, plain_client, rig, start_interposer, temp, ticket,
};

use countersign::Decision;
use countersign_audit::{AuditSealer, IssueClass, verify_log};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

#[tokio::test]
async fn allowed_calls_and_other_frames_pass_through_unchanged() {
    let mut rig = rig("pass", plain_client()).await;
    let args = r#"{"path" : "/a",  "n":1}"#;
    let r = rig.client.call_raw("read_file", args).await;
    assert_eq!(r["result"]["content"][0]["text"], "ran \"read_file\"");
    assert_eq!(
        r["result"]["x-extension"]["kept"], true,
        "unknown fields kept"
    );
    let sent = rig.upstream.calls_of("read_file");
    assert_eq!(sent.len(), 1);
    assert!(sent[0].contains(args), "the exact bytes: {}", sent[0]);
    // An unknown method passes through too.
    let r = rig
        .client
        .request("vendor/thing", json!({"a": [1, 2]}))
        .await;
    assert!(r.get("result").is_some());
    let (lines, _) = close(rig).await;
    let outcomes: Vec<_> = lines
        .iter()
        .filter(|l| l["kind"] == "mcp_outcome")
        .collect();
    assert_eq!(outcomes[0]["outcome"], "allowed");
    assert_eq!(outcomes[0]["upstream"], "ok");
}

/// A `tools/list` answer with no held tool in it is relayed as the upstream wrote it, byte for
/// byte (members in its order), not parsed and written again; and with `allow = ["*"]` a call the
/// session never listed runs at once, as a reconnecting or stateless client expects.
#[tokio::test]
async fn a_list_with_nothing_to_mark_is_relayed_byte_for_byte_and_allowed_calls_need_no_list() {
    let alice = Approver::new("alice", "alice-es256");
    let svc = crate::support::service(&[alice.record()]).await;
    let dir = temp("relay-list");
    let mut config = base_config(&dir, &[alice.record()]);
    config.allow = vec!["*".into()];
    let upstream = Arc::new(Upstream::default());
    let (mut client, _interposer, _run) = start_interposer(&svc, config, upstream.clone()).await;
    let r = client.request("initialize", plain_client()).await;
    assert!(r.get("result").is_some(), "{r}");
    // Before any list: an allowed tool is relayed.
    let r = client.call_raw("write_file", r#"{"path":"/w"}"#).await;
    assert_eq!(
        r["result"]["content"][0]["text"], "ran \"write_file\"",
        "{r}"
    );
    client
        .send_line(r#"{"jsonrpc":"2.0","id":"l","method":"tools/list"}"#)
        .await;
    let line = loop {
        let line = client.lines.next_line().await.unwrap().unwrap();
        if line.contains(r#""id":"l""#) {
            break line;
        }
    };
    assert_eq!(
        line,
        format!(
            r#"{{"jsonrpc":"2.0","id":"l","result":{}}}"#,
            crate::support::TOOLS_LISTED
        )
    );
}

/// Every spelling of a held call that reads as one message is held however it is escaped or
/// spaced, and an allowed one passes; a frame that readers could take for different messages
/// (a duplicated member, a null id, a batch) is not admitted: answered with its error under the
/// id that can be read, and nothing of it reaches the upstream.
#[tokio::test]
async fn every_spelling_of_a_held_call_is_held_and_allowed_ones_pass() {
    let mut rig = rig("spellings", plain_client()).await;
    let held = [
        r#"{"jsonrpc":"2.0","id":102,"method":"tools\/call","params":{"name":"write_\u0066ile","arguments":{"a":1}}}"#,
        r#" { "params" : {"arguments":{"k":1},"name":"write_file"} , "method" : "tools/call" , "id" : 103 , "jsonrpc":"2.0" }"#,
    ];
    for (id, line) in (102..).zip(held) {
        rig.client.send_line(line).await;
        let r = rig.client.response(id).await;
        assert_eq!(r["result"]["isError"], true, "{line}: {r}");
        assert!(ticket(&r)["approval_id"].is_string(), "held: {r}");
    }
    // Two `method`s (readers keep the first, the last, or either) and two `name`s: which call
    // is meant depends on the reader, so none is made.
    for (id, line) in [
        (
            101,
            r#"{"jsonrpc":"2.0","id":101,"method":"tools/list","method":"tools/call","params":{"name":"write_file","arguments":{}}}"#,
        ),
        (
            104,
            r#"{"jsonrpc":"2.0","id":104,"method":"tools/call","params":{"name":"read_file","name":"write_file","arguments":{}}}"#,
        ),
    ] {
        rig.client.send_line(line).await;
        let r = rig.client.response(id).await;
        assert_eq!(r["error"]["code"], -32600, "{r}");
        assert_eq!(r["error"]["data"]["reason"], "duplicate_member", "{r}");
    }
    // MCP ids are never null: refused, and answered under the null id.
    rig.client
        .send_line(r#"{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"write_file","arguments":{"n":2}}}"#)
        .await;
    let r = rig.client.recv().await;
    assert_eq!(r["id"], Value::Null, "{r}");
    assert_eq!(r["error"]["code"], -32600, "{r}");
    // A batch is refused whole, each request answered under its id.
    rig.client
        .send_line(r#"[{"jsonrpc":"2.0","id":105,"method":"tools/call","params":{"name":"read_file","arguments":{}}},{"jsonrpc":"2.0","method":"notifications/initialized"}]"#)
        .await;
    let r = rig.client.recv().await;
    assert_eq!(r.as_array().map(Vec::len), Some(1), "{r}");
    assert_eq!(r[0]["id"], 105, "{r}");
    assert_eq!(r[0]["error"]["code"], -32600, "{r}");
    // Allowed, spaced and with a string id: forwarded as sent, under the interposer's own id.
    let line = r#"{ "id" : "s-1" , "jsonrpc" : "2.0" , "method" : "tools/call" , "params" : { "name" : "read_file" , "arguments" : { } } }"#;
    rig.client.send_line(line).await;
    let r = loop {
        let v = rig.client.recv().await;
        if v.get("id") == Some(&json!("s-1")) {
            break v;
        }
    };
    assert_eq!(
        r["result"]["content"][0]["text"], "ran \"read_file\"",
        "{r}"
    );
    let seen = rig.upstream.lines.lock().unwrap().clone();
    let calls: Vec<_> = seen
        .iter()
        .filter(|l| l.contains("tools") && l.contains("call"))
        .collect();
    assert_eq!(
        calls.len(),
        1,
        "nothing else reached the upstream: {seen:?}"
    );
    assert_eq!(as_client_sent(calls[0], r#""s-1""#), line, "the exact line");
    let (lines, _) = close(rig).await;
    let outcomes: Vec<_> = lines
        .iter()
        .filter(|l| l["kind"] == "mcp_outcome")
        .map(|l| (l["outcome"].as_str().unwrap(), l["upstream"].as_str()))
        .collect();
    assert_eq!(
        outcomes
            .iter()
            .filter(|o| o.0 == "pending_approval")
            .count(),
        2
    );
    assert!(outcomes.contains(&("allowed", Some("ok"))), "{outcomes:?}");
}

/// `tools/call` is a request in MCP; sent as a notification (no `id`) it could be neither held
/// nor refused to the client, so the interposer never relays it, held tool or allowed one, and
/// logs it as refused.
#[tokio::test]
async fn a_tools_call_without_an_id_never_reaches_the_upstream() {
    let mut rig = rig("noid", plain_client()).await;
    for line in [
        r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"write_file","arguments":{"p":"/x"}}}"#,
        r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"read_file","arguments":{}}}"#,
    ] {
        rig.client.send_line(line).await;
    }
    // A request after them is answered, so both were read before it.
    let r = rig.client.call_raw("read_file", "{}").await;
    assert_eq!(r["result"]["content"][0]["text"], "ran \"read_file\"");
    assert!(rig.upstream.calls_of("write_file").is_empty());
    assert_eq!(
        rig.upstream.calls_of("read_file").len(),
        1,
        "only the request ran"
    );
    let (lines, _) = close(rig).await;
    let refused: Vec<_> = lines
        .iter()
        .filter(|l| l["kind"] == "mcp_outcome" && l["reason_code"] == "tools_call_without_id")
        .collect();
    assert_eq!(refused.len(), 2, "{lines:?}");
    assert!(refused.iter().all(|l| l["outcome"] == "denied"));
}

#[tokio::test]
async fn a_held_call_runs_once_after_approval_and_a_third_is_held_again() {
    let mut rig = rig("once", plain_client()).await;
    let args = r#"{"path":"/x","content":"hi"}"#;
    let first = rig.client.call_raw("write_file", args).await;
    assert_eq!(first["result"]["isError"], true, "{first}");
    let text = first["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("Held for human approval (approval "),
        "{text}"
    );
    let id = approval_id(&first);
    assert_eq!(
        ticket(&first)["approve_url"],
        // The page as a browser opens it: localhost, the service's own port.
        format!(
            "{}/approve/{id}",
            rig.svc.base.replace("127.0.0.1", "localhost")
        )
    );
    assert!(
        !text.contains("/x"),
        "nothing about the arguments in the ticket"
    );
    assert!(rig.upstream.calls_of("write_file").is_empty());

    // Retry before anyone decided: parked for the budget, then "still awaiting".
    let waiting = rig.client.call_raw("write_file", args).await;
    let text = waiting["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("Still awaiting human approval"), "{text}");
    assert_eq!(approval_id(&waiting), id, "the same approval");

    rig.alice.decide(&rig.svc, &id, Decision::Approved).await;
    let ran = rig.client.call_raw("write_file", args).await;
    assert_eq!(
        ran["result"]["content"][0]["text"], "ran \"write_file\"",
        "{ran}"
    );
    let sent = rig.upstream.calls_of("write_file");
    assert_eq!(sent.len(), 1, "executed exactly once");
    assert!(sent[0].contains(args));

    let third = rig.client.call_raw("write_file", args).await;
    assert_eq!(third["result"]["isError"], true);
    assert_ne!(
        approval_id(&third),
        id,
        "a new approval: the grant is spent"
    );
    assert_eq!(rig.upstream.calls_of("write_file").len(), 1);

    // Changed arguments are a new approval too, never the old ticket.
    let other = rig
        .client
        .call_raw("write_file", r#"{"path":"/x","content":"bye"}"#)
        .await;
    let other_id = approval_id(&other);
    assert_ne!(other_id, id);
    assert_ne!(other_id, approval_id(&third));

    let audit = rig.audit.clone();
    let (lines, bytes) = close(rig).await;
    let executed: Vec<_> = lines
        .iter()
        .filter(|l| l["outcome"] == "executed")
        .collect();
    assert_eq!(executed.len(), 1);
    assert_eq!(executed[0]["approval_ref"], id.as_str());
    assert_eq!(executed[0]["upstream"], "ok");
    assert_eq!(lines.last().unwrap()["kind"], "mcp_close");
    // The log verifies under its own key, every intent closed by an outcome.
    let key = AuditSealer::load_or_create(&audit.with_extension("key")).unwrap();
    let report = verify_log(&bytes, &key.public_key());
    assert!(report.issues.is_empty(), "{report:?}");
}

#[tokio::test]
async fn a_refusal_reaches_the_client_as_a_tool_error_and_nothing_runs() {
    let mut rig = rig("refuse", plain_client()).await;
    let args = r#"{"path":"/r"}"#;
    let first = rig.client.call_raw("write_file", args).await;
    let id = approval_id(&first);
    rig.alice.decide(&rig.svc, &id, Decision::Denied).await;
    let r = rig.client.call_raw("write_file", args).await;
    let text = r["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("Not run: refused (approver_refused)"),
        "{text}"
    );
    assert_eq!(ticket(&r)["status"], "DENIED");
    assert!(rig.upstream.calls_of("write_file").is_empty());
}

#[tokio::test]
async fn deny_patterns_refuse_at_once_and_jsonrpc_error_mode_uses_its_codes() {
    let mut rig = rig("deny", plain_client()).await;
    let mut config = base_config(&temp("deny-cfg"), &[rig.alice.record()]);
    config.deny = vec!["write_*".into()];
    config.held_as = countersign_mcp::HeldAs::JsonrpcError;
    rig.interposer.set_config(config);
    let r = rig.client.call_raw("write_file", r#"{"path":"/d"}"#).await;
    assert_eq!(r["error"]["code"], -32011, "{r}");
    assert_eq!(r["error"]["data"]["reason_code"], "policy_denied");
    assert!(r["error"]["data"].get("approval_id").is_none());
    assert!(rig.upstream.calls_of("write_file").is_empty());
}

#[tokio::test]
async fn policy_hardened_after_approval_refuses_without_collecting_the_grant() {
    let mut rig = rig("harden", plain_client()).await;
    let args = r#"{"path":"/h"}"#;
    let first = rig.client.call_raw("write_file", args).await;
    let id = approval_id(&first);
    let op_hash = ticket(&first)["op_hash"].as_str().unwrap().to_owned();
    rig.alice.decide(&rig.svc, &id, Decision::Approved).await;
    let mut config = base_config(&temp("harden-cfg"), &[rig.alice.record()]);
    config.deny = vec!["write_file".into()];
    rig.interposer.set_config(config);
    let r = rig.client.call_raw("write_file", args).await;
    let text = r["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("Not run: refused (policy_denied)"),
        "{text}"
    );
    assert!(rig.upstream.calls_of("write_file").is_empty());
    // The grant was not collected: it is still there to collect (once).
    let grant = rig
        .svc
        .http
        .post(format!("{}/v1/approvals/{id}/grant", rig.svc.base))
        .bearer_auth(&rig.svc.token)
        .json(&json!({"fingerprint": op_hash, "tool_name": "write_file"}))
        .send()
        .await
        .unwrap();
    assert_eq!(grant.status(), 200, "{:?}", grant.text().await);
}

#[tokio::test]
async fn evidence_the_interposer_does_not_trust_does_not_burn_the_grant() {
    let mut rig = rig("forged", plain_client()).await;
    let args = r#"{"path":"/f"}"#;
    let first = rig.client.call_raw("write_file", args).await;
    let id = approval_id(&first);
    let op_hash = ticket(&first)["op_hash"].as_str().unwrap().to_owned();
    rig.alice.decide(&rig.svc, &id, Decision::Approved).await;
    // The interposer's own registry no longer lists alice (the service's still does).
    let bob = Approver::new("bob", "bob-es256");
    let config = base_config(&temp("forged-cfg"), &[bob.record()]);
    // Trust is the interposer's: a fresh one over the same audit log, trusting only bob.
    drop(rig.client);
    let _ = tokio::time::timeout(Duration::from_secs(10), rig.run).await;
    let mut config = config;
    config.audit_log = Some(rig.audit.clone());
    let upstream = Arc::new(Upstream::default());
    let (mut client, _i, _run) = start_interposer(&rig.svc, config, upstream.clone()).await;
    client.request("initialize", plain_client()).await;
    client.request("tools/list", json!({})).await;
    let r = client.call_raw("write_file", args).await;
    let text = r["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("Not run: refused (credential_unknown)"),
        "{text}"
    );
    assert!(upstream.calls_of("write_file").is_empty());
    let grant = rig
        .svc
        .http
        .post(format!("{}/v1/approvals/{id}/grant", rig.svc.base))
        .bearer_auth(&rig.svc.token)
        .json(&json!({"fingerprint": op_hash, "tool_name": "write_file"}))
        .send()
        .await
        .unwrap();
    assert_eq!(grant.status(), 200, "the grant was not burned");
}

#[tokio::test]
async fn a_restarted_interposer_releases_an_approval_made_before_the_restart() {
    let mut rig = rig("restart", plain_client()).await;
    let args = r#"{"path":"/s"}"#;
    let first = rig.client.call_raw("write_file", args).await;
    let id = approval_id(&first);
    drop(rig.client);
    let _ = tokio::time::timeout(Duration::from_secs(10), rig.run).await;
    rig.alice.decide(&rig.svc, &id, Decision::Approved).await;
    let mut config = base_config(&temp("restart-cfg"), &[rig.alice.record()]);
    config.audit_log = Some(rig.audit.clone());
    let upstream = Arc::new(Upstream::default());
    let (mut client, _i, run) = start_interposer(&rig.svc, config, upstream.clone()).await;
    client.request("initialize", plain_client()).await;
    client.request("tools/list", json!({})).await;
    let r = client.call_raw("write_file", args).await;
    assert_eq!(
        r["result"]["content"][0]["text"], "ran \"write_file\"",
        "{r}"
    );
    assert_eq!(upstream.calls_of("write_file").len(), 1);
    drop(client);
    let _ = tokio::time::timeout(Duration::from_secs(10), run).await;
    // Both runs' lines are one chain that verifies, each intent with its outcome.
    let bytes = std::fs::read(&rig.audit).unwrap();
    let key = AuditSealer::load_or_create(&rig.audit.with_extension("key")).unwrap();
    let report = verify_log(&bytes, &key.public_key());
    assert!(report.is_valid(), "{report:?}");
    assert!(
        !report
            .issues
            .iter()
            .any(|i| i.class == IssueClass::Violation),
        "{report:?}"
    );
}

#[tokio::test]
async fn a_client_cancel_during_a_park_drops_only_the_response() {
    let mut rig = rig("cancel", plain_client()).await;
    let mut config = base_config(&temp("cancel-cfg"), &[rig.alice.record()]);
    config.park_seconds = 30;
    rig.interposer.set_config(config);
    let args = r#"{"path":"/c"}"#;
    let first = rig.client.call_raw("write_file", args).await;
    let id = approval_id(&first);
    // A retry parks; the client gives up and says so.
    let line = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":99,\"method\":\"tools/call\",\"params\":{{\"name\":\"write_file\",\"arguments\":{args}}}}}"
    );
    rig.client.send_line(&line).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    rig.client
        .send_line(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99,"reason":"timeout"}}"#)
        .await;
    // The next answer the client gets is for its next request, not for 99.
    let r = rig.client.request("vendor/ping", json!({})).await;
    assert!(r.get("result").is_some());
    // The approval is still pending at the service, and the cancel was not forwarded.
    let status = rig
        .svc
        .http
        .get(format!("{}/v1/approvals/{id}", rig.svc.base))
        .bearer_auth(&rig.svc.token)
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(status["status"], "PENDING");
    assert!(
        !rig.upstream
            .lines
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("notifications/cancelled"))
    );
}

#[tokio::test]
async fn a_cancel_that_overtakes_the_park_still_drops_the_response() {
    // park_seconds = 2: were the cancel lost, the retry would be answered after 2 s.
    let mut rig = rig("cancel-race", plain_client()).await;
    let args = r#"{"path":"/race"}"#;
    let first = rig.client.call_raw("write_file", args).await;
    let id = approval_id(&first);
    // The retry and its cancel in one write: the relay reads the cancel before the retry's own
    // task has parked (on this single-threaded runtime it has not even started).
    let retry = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":99,\"method\":\"tools/call\",\"params\":{{\"name\":\"write_file\",\"arguments\":{args}}}}}"
    );
    let cancel = r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99,"reason":"timeout"}}"#;
    rig.client.send_line(&format!("{retry}\n{cancel}")).await;
    // The retry's record closes as a cancelled park, not as "still awaiting" after the budget.
    let lines = outcomes(&rig.audit, 2).await;
    assert_eq!(lines[1]["outcome"], "pending_approval", "{lines:?}");
    assert_eq!(lines[1]["reason_code"], "client_cancelled", "{lines:?}");
    // Its task is over without answering: the next answer is for the next request.
    let r = rig.client.request("vendor/ping", json!({})).await;
    assert!(r.get("result").is_some());
    assert_eq!(approval_status(&rig.svc, &id).await["status"], "PENDING");
    assert!(
        !rig.upstream
            .lines
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("notifications/cancelled")),
        "the upstream never saw request 99, nor its cancel"
    );
    let retry_call = lines[1]["call_id"].clone();
    let (lines, _) = close(rig).await;
    let of_retry = lines
        .iter()
        .filter(|l| l["kind"] == "mcp_outcome" && l["call_id"] == retry_call)
        .count();
    assert_eq!(
        of_retry, 1,
        "one outcome for the cancelled retry: {lines:?}"
    );
}

#[tokio::test]
async fn a_cancel_that_overtakes_an_approved_retry_collects_nothing() {
    let mut rig = rig("cancel-approved", plain_client()).await;
    let args = r#"{"path":"/ca"}"#;
    let first = rig.client.call_raw("write_file", args).await;
    let id = approval_id(&first);
    rig.alice.decide(&rig.svc, &id, Decision::Approved).await;
    let retry = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":98,\"method\":\"tools/call\",\"params\":{{\"name\":\"write_file\",\"arguments\":{args}}}}}"
    );
    let cancel =
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":98}}"#;
    rig.client.send_line(&format!("{retry}\n{cancel}")).await;
    let lines = outcomes(&rig.audit, 2).await;
    assert_eq!(lines[1]["reason_code"], "client_cancelled", "{lines:?}");
    assert!(rig.upstream.calls_of("write_file").is_empty());
    // The grant is still there: the next identical call runs, once.
    let ran = rig.client.call_raw("write_file", args).await;
    assert_eq!(
        ran["result"]["content"][0]["text"], "ran \"write_file\"",
        "{ran}"
    );
    assert_eq!(rig.upstream.calls_of("write_file").len(), 1);
}

#[tokio::test]
async fn cancel_on_disconnect_withdraws_what_the_client_left_pending_and_only_that() {
    // Off (the default): the client goes away, the approval stays pending for its next retry.
    let mut off = rig("disconnect-off", plain_client()).await;
    let kept = approval_id(&off.client.call_raw("write_file", r#"{"path":"/k"}"#).await);
    let svc = close_keeping_service(off).await;
    assert_eq!(approval_status(&svc, &kept).await["status"], "PENDING");

    // On: the approvals of calls held in this session and still pending are withdrawn; one
    // already decided is left as it was.
    let mut on = rig("disconnect-on", plain_client()).await;
    let mut config = base_config(&temp("disconnect-on-cfg"), &[on.alice.record()]);
    config.cancel_on_disconnect = true;
    on.interposer.set_config(config);
    let left = approval_id(&on.client.call_raw("write_file", r#"{"path":"/a"}"#).await);
    let refused = approval_id(&on.client.call_raw("write_file", r#"{"path":"/b"}"#).await);
    on.alice.decide(&on.svc, &refused, Decision::Denied).await;
    let svc = close_keeping_service(on).await;
    let status = approval_status(&svc, &left).await;
    assert_eq!(status["status"], "DENIED", "{status}");
    assert_eq!(status["reason_code"], "cancelled", "{status}");
    let status = approval_status(&svc, &refused).await;
    assert_eq!(status["reason_code"], "approver_refused", "{status}");
}
