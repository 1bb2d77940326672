//! Multi round trips (2026-07-28) and URL elicitation: the interposer's own state, and the
//! upstream's, carried by the client.

use crate::support::{Client, approval_id, as_client_sent, close, plain_client, rig};

use countersign::Decision;
use countersign_audit::{AuditSealer, verify_log};
use countersign_mcp::answer::APPROVAL_KEY;
use serde_json::{Value, json};

#[tokio::test]
async fn url_elicitation_clients_on_2025_11_25_get_32042() {
    let init = json!({"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {"form": {}, "url": {}}}, "clientInfo": {"name": "t", "version": "1"}});
    let mut rig = rig("elicit", init).await;
    let r = rig.client.call_raw("write_file", r#"{"path":"/e"}"#).await;
    assert_eq!(r["error"]["code"], -32042, "{r}");
    let e = &r["error"]["data"]["elicitations"][0];
    let id = r["error"]["data"][APPROVAL_KEY]["approval_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(e["mode"], "url");
    assert_eq!(e["elicitationId"], id.as_str());
    rig.alice.decide(&rig.svc, &id, Decision::Approved).await;
    let ran = rig.client.call_raw("write_file", r#"{"path":"/e"}"#).await;
    assert_eq!(ran["result"]["content"][0]["text"], "ran \"write_file\"");
}

/// A 2026-07-28 tools/call declaring URL elicitation in `_meta`, optionally echoing a state.
fn mrtr_line(id: u64, args: &str, state: Option<&str>) -> String {
    let state = state
        .map(|s| format!(",\"requestState\":\"{s}\",\"inputResponses\":{{\"countersign.approval\":{{\"action\":\"accept\"}}}}"))
        .unwrap_or_default();
    format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"write_file\",\"arguments\":{args},\"_meta\":{{\"io.modelcontextprotocol/clientCapabilities\":{{\"elicitation\":{{\"url\":{{}}}}}}}}{state}}}}}"
    )
}

async fn mrtr_call(client: &mut Client, args: &str, state: Option<&str>) -> Value {
    client.next += 1;
    let id = client.next;
    client.send_line(&mrtr_line(id, args, state)).await;
    client.response(id).await
}

#[tokio::test]
async fn the_2026_07_28_round_trip_and_its_state_refusals() {
    let mut rig = rig("mrtr", plain_client()).await;
    let args = r#"{"path":"/m"}"#;
    let first = mrtr_call(&mut rig.client, args, None).await;
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    let request = &first["result"]["inputRequests"]["countersign.approval"];
    assert_eq!(request["params"]["mode"], "url");
    let state = first["result"]["requestState"].as_str().unwrap().to_owned();
    assert!(!state.contains("/m"));
    let id = approval_id(&first);
    rig.alice.decide(&rig.svc, &id, Decision::Approved).await;

    // Tampered: one character of the MAC changed.
    let mut tampered = state.clone();
    let last = tampered.pop().unwrap();
    tampered.push(if last == 'A' { 'B' } else { 'A' });
    let r = mrtr_call(&mut rig.client, args, Some(&tampered)).await;
    let text = r["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("Not run: refused (request_state_invalid)"),
        "{text}"
    );
    // Moved onto other arguments.
    let r = mrtr_call(&mut rig.client, r#"{"path":"/other"}"#, Some(&state)).await;
    let text = r["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("Not run: refused (binding_mismatch)"),
        "{text}"
    );
    assert!(rig.upstream.calls_of("write_file").is_empty());

    let ran = mrtr_call(&mut rig.client, args, Some(&state)).await;
    assert_eq!(
        ran["result"]["content"][0]["text"], "ran \"write_file\"",
        "{ran}"
    );
    // The upstream got the call without the interposer's own state and input response.
    let sent = rig.upstream.calls_of("write_file");
    assert!(!sent[0].contains("requestState"), "{}", sent[0]);
    assert!(!sent[0].contains("countersign.approval"), "{}", sent[0]);
    assert!(sent[0].contains(&format!("\"arguments\":{args}")));
    // Replayed after use: the grant is spent, nothing runs twice.
    let again = mrtr_call(&mut rig.client, args, Some(&state)).await;
    assert_eq!(again["result"]["isError"], true, "{again}");
    assert_eq!(rig.upstream.calls_of("write_file").len(), 1);
}

#[tokio::test]
async fn a_2026_07_28_request_gets_results_that_carry_result_type() {
    let mut rig = rig("modern-rt", plain_client()).await;
    // A modern request without URL elicitation: the tool-error ticket, tagged complete.
    let meta = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}"#;
    let line = |id: u64, tool: &str| {
        format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"{tool}\",\"arguments\":{{\"path\":\"/rt\"}},{meta}}}}}"
        )
    };
    rig.client.send_line(&line(50, "write_file")).await;
    let held = rig.client.response(50).await;
    assert_eq!(held["result"]["isError"], true, "{held}");
    assert_eq!(held["result"]["resultType"], "complete", "{held}");
    // Still awaiting, and refused, answers too.
    rig.client.send_line(&line(51, "write_file")).await;
    let waiting = rig.client.response(51).await;
    assert_eq!(waiting["result"]["resultType"], "complete", "{waiting}");
    let id = approval_id(&held);
    rig.alice.decide(&rig.svc, &id, Decision::Denied).await;
    rig.client.send_line(&line(52, "write_file")).await;
    let refused = rig.client.response(52).await;
    let text = refused["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("Not run: refused (approver_refused)"));
    assert_eq!(refused["result"]["resultType"], "complete", "{refused}");
    // A 2025 client's answers stay as they were.
    let old = rig
        .client
        .call_raw("write_file", r#"{"path":"/old"}"#)
        .await;
    assert!(old["result"].get("resultType").is_none(), "{old}");
}

#[tokio::test]
async fn an_approved_mrtr_retry_reaches_the_upstream_without_the_interposers_members() {
    let mut rig = rig("mrtr-strip", plain_client()).await;
    // Odd spacing and escapes: the upstream must see these exact bytes.
    let args = r#"{ "path" : "/m\u00e9",  "n":[1, 2] }"#;
    let first = mrtr_call(&mut rig.client, args, None).await;
    let state = first["result"]["requestState"].as_str().unwrap().to_owned();
    let id = approval_id(&first);
    rig.alice.decide(&rig.svc, &id, Decision::Approved).await;
    // The retry answers the interposer's request and, too, one the upstream asked earlier.
    let line = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":77,\"method\":\"tools/call\",\"params\":{{\"requestState\":\"{state}\",\"name\":\"write_file\",\"arguments\":{args},\"inputResponses\":{{\"countersign.approval\":{{\"action\":\"accept\"}}, \"upstream.ask\":{{\"action\":\"accept\",\"content\":{{\"ok\":true}}}}}},\"_meta\":{{\"io.modelcontextprotocol/clientCapabilities\":{{\"elicitation\":{{\"url\":{{}}}}}}}}}}}}"
    );
    rig.client.send_line(&line).await;
    let ran = rig.client.response(77).await;
    assert_eq!(
        ran["result"]["content"][0]["text"], "ran \"write_file\"",
        "{ran}"
    );
    let sent = rig.upstream.calls_of("write_file");
    assert_eq!(sent.len(), 1);
    let expected = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":77,\"method\":\"tools/call\",\"params\":{{\"name\":\"write_file\",\"arguments\":{args},\"inputResponses\":{{ \"upstream.ask\":{{\"action\":\"accept\",\"content\":{{\"ok\":true}}}}}},\"_meta\":{{\"io.modelcontextprotocol/clientCapabilities\":{{\"elicitation\":{{\"url\":{{}}}}}}}}}}}}"
    );
    assert_eq!(
        as_client_sent(&sent[0], "77"),
        expected,
        "only the interposer's members are cut out"
    );

    // Without other responses, `inputResponses` goes as a whole.
    let args = r#"{"path":"/m2"}"#;
    let first = mrtr_call(&mut rig.client, args, None).await;
    let state = first["result"]["requestState"].as_str().unwrap().to_owned();
    rig.alice
        .decide(&rig.svc, &approval_id(&first), Decision::Approved)
        .await;
    let ran = mrtr_call(&mut rig.client, args, Some(&state)).await;
    assert_eq!(
        ran["result"]["content"][0]["text"], "ran \"write_file\"",
        "{ran}"
    );
    let sent = rig.upstream.calls_of("write_file");
    let last: Value = serde_json::from_str(&sent[1]).unwrap();
    let params = last["params"].as_object().unwrap();
    let keys: Vec<&str> = params.keys().map(String::as_str).collect();
    assert_eq!(keys, ["_meta", "arguments", "name"], "{}", sent[1]);
    assert!(sent[1].contains(&format!("\"arguments\":{args}")));
}

/// A 2026-07-28 `tools/call` of `ask_file` declaring URL elicitation, with `tail` (state and
/// input responses) appended to its params.
async fn ask_call(client: &mut Client, tail: &str) -> Value {
    client.next += 1;
    let id = client.next;
    let line = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"ask_file\",\"arguments\":{{\"p\":1}},\"_meta\":{{\"io.modelcontextprotocol/clientCapabilities\":{{\"elicitation\":{{\"url\":{{}}}}}}}}{tail}}}}}"
    );
    client.send_line(&line).await;
    client.response(id).await
}

#[tokio::test]
async fn an_approved_call_whose_upstream_asks_for_input_goes_on_once_without_a_new_approval() {
    let mut rig = rig("nested", plain_client()).await;
    let held = ask_call(&mut rig.client, "").await;
    assert_eq!(held["result"]["resultType"], "input_required", "{held}");
    let ours = held["result"]["requestState"].as_str().unwrap().to_owned();
    let id = approval_id(&held);
    rig.alice.decide(&rig.svc, &id, Decision::Approved).await;

    // The approved retry reaches the upstream, which asks its own question: passed through.
    let approve = format!(
        ",\"requestState\":\"{ours}\",\"inputResponses\":{{\"countersign.approval\":{{\"action\":\"accept\"}}}}"
    );
    let asked = ask_call(&mut rig.client, &approve).await;
    assert_eq!(
        asked["result"]["requestState"], "upstream-state-1",
        "{asked}"
    );
    assert_eq!(
        asked["result"]["inputRequests"]["q"]["params"]["message"],
        "Sure?"
    );

    // The client answers it with the upstream's state: the same approved call goes on, once.
    let answer = ",\"requestState\":\"upstream-state-1\",\"inputResponses\":{\"q\":{\"action\":\"accept\",\"content\":{}}}";
    let ran = ask_call(&mut rig.client, answer).await;
    assert_eq!(ran["result"]["content"][0]["text"], "ran ask_file", "{ran}");
    let sent = rig.upstream.calls_of("ask_file");
    assert_eq!(sent.len(), 2, "the approved call and its answer");
    assert!(sent[1].contains(answer), "passed as it came: {}", sent[1]);

    // The pass is spent: the same answer again is refused and nothing reaches the upstream.
    let again = ask_call(&mut rig.client, answer).await;
    let text = again["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("Not run: refused (request_state_invalid)"),
        "{text}"
    );
    assert_eq!(rig.upstream.calls_of("ask_file").len(), 2);

    let audit = rig.audit.clone();
    let (lines, bytes) = close(rig).await;
    let outcome = |o: &str| {
        lines
            .iter()
            .filter(|l| l["outcome"] == o)
            .cloned()
            .collect::<Vec<_>>()
    };
    let executed = outcome("executed");
    assert_eq!(executed.len(), 1);
    assert_eq!(executed[0]["upstream"], "input_required");
    let continued = outcome("continued");
    assert_eq!(continued.len(), 1);
    assert_eq!(continued[0]["approval_ref"], id.as_str());
    assert_eq!(continued[0]["upstream"], "ok");
    let key = AuditSealer::load_or_create(&audit.with_extension("key")).unwrap();
    let report = verify_log(&bytes, &key.public_key());
    assert!(report.issues.is_empty(), "{report:?}");
}
