//! The second external review's findings at the stdio edge (issue 25): the interposer admits
//! only frames every common reader reads as the same one message, forwards requests under ids
//! of its own, and lets an approved call go on only with the bytes that were approved.

use crate::support::{Client, Rig, approval_id, plain_client, rig};

use countersign::Decision;
use serde_json::Value;

/// How many lines the upstream has seen, once everything sent before is surely read: a `ping`
/// goes through and is answered.
async fn settled_count(rig: &mut Rig, ping_id: u64) -> usize {
    rig.client
        .send_line(&format!(
            r#"{{"jsonrpc":"2.0","id":{ping_id},"method":"ping"}}"#
        ))
        .await;
    rig.client.response(ping_id).await;
    rig.upstream.lines.lock().unwrap().len()
}

fn held_call(id: u64, params: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{params}}}"#)
}

#[tokio::test]
async fn frames_other_readers_take_differently_are_answered_and_never_relayed() {
    let mut rig = rig("edge-admission", plain_client()).await;
    let before = settled_count(&mut rig, 900).await;
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    let cases = [
        // What Python's json and the TypeScript SDK's JSON.parse read, and serde_json does not.
        (201, held_call(201, &format!(r#"{{"name":"write_file","arguments":{{"path":"/etc/x","pad":{deep}}}}}"#)), -32700, "too_deep"),
        (202, held_call(202, r#"{"name":"write_file","arguments":{"path":"x\ud800"}}"#), -32700, "lone_surrogate"),
        (203, held_call(203, r#"{"name":"write_file","arguments":{"path":"/etc/x","n":1e400}}"#), -32700, "number_out_of_range"),
        // What Go's encoding/json matches case-insensitively.
        (204, held_call(204, r#"{"name":"read_file","Name":"write_file","arguments":{}}"#), -32600, "case_collision"),
        (205, held_call(205, r#"{"NAME":"write_file","arguments":{}}"#), -32600, "case_variant"),
        (206, held_call(206, "{\"name\":\"read_file\",\"argument\u{17f}\":{\"path\":\"/etc/x\"}}"), -32600, "case_variant"),
        (207, r#"{"jsonrpc":"2.0","id":207,"method":"ping","Method":"tools/call","params":{"name":"write_file"}}"#.to_owned(), -32600, "case_collision"),
        (208, r#"{"jsonrpc":"2.0","id":208,"Method":"tools/call","params":{"name":"write_file"}}"#.to_owned(), -32600, "case_variant"),
        // A raw line separator in a string, and a read_file whose arguments collide in case.
        (209, held_call(209, "{\"name\":\"write_file\",\"arguments\":{\"path\":\"/a\u{2028}b\"}}"), -32700, "line_break"),
        (210, held_call(210, r#"{"name":"read_file","arguments":{"path":"/ok","PATH":"/etc/shadow"}}"#), -32600, "case_collision"),
    ];
    for (id, line, code, reason) in &cases {
        rig.client.send_line(line).await;
        let r = rig.client.response(*id).await;
        assert_eq!(r["error"]["code"], *code, "{reason}: {r}");
        assert_eq!(r["error"]["data"]["reason"], *reason, "{r}");
    }
    let after = settled_count(&mut rig, 901).await;
    assert_eq!(after, before + 1, "only the ping reached the upstream");
    assert!(rig.upstream.calls_of("write_file").is_empty());
}

#[tokio::test]
async fn a_bare_cr_smuggles_no_second_frame_and_a_crlf_ends_a_line() {
    let mut rig = rig("edge-cr", plain_client()).await;
    let before = settled_count(&mut rig, 900).await;
    // One line for a reader that splits on LF; two (a ping, then a write) for one with
    // universal newlines, such as the Python SDK's stdio server.
    let smuggled = format!(
        "{}\r{}",
        r#"{"jsonrpc":"2.0","id":20,"method":"ping"}"#,
        held_call(21, r#"{"name":"write_file","arguments":{"path":"/etc/x"}}"#)
    );
    rig.client.send_line(&smuggled).await;
    let r = rig.client.response(20).await;
    assert_eq!(r["error"]["code"], -32700, "{r}");
    assert_eq!(r["error"]["data"]["reason"], "line_break", "{r}");
    let after = settled_count(&mut rig, 901).await;
    assert_eq!(
        after,
        before + 1,
        "nothing of the smuggled line went upstream"
    );
    assert!(rig.upstream.calls_of("write_file").is_empty());
    // A CRLF at the end of a line is a line end for every reader: the frame is read as usual.
    rig.client
        .send_line(&format!(
            "{}\r",
            held_call(22, r#"{"name":"read_file","arguments":{}}"#)
        ))
        .await;
    let r = rig.client.response(22).await;
    assert_eq!(
        r["result"]["content"][0]["text"], "ran \"read_file\"",
        "{r}"
    );
}

#[tokio::test]
async fn the_upstream_sees_only_the_interposers_own_request_ids() {
    let mut rig = rig("edge-ids", plain_client()).await;
    for (id, tool) in [(30, "read_file"), (31, "read_file")] {
        let line = held_call(
            id,
            &format!(r#"{{"name":"{tool}","arguments":{{"n":{id}}}}}"#),
        );
        rig.client.send_line(&line).await;
        let r = rig.client.response(id).await;
        assert_eq!(
            r["result"]["content"][0]["text"], "ran \"read_file\"",
            "{r}"
        );
    }
    let seen = rig.upstream.lines.lock().unwrap().clone();
    let mut ids = Vec::new();
    for line in &seen {
        let v: Value = serde_json::from_str(line).unwrap();
        if v.get("method").is_some()
            && let Some(id) = v.get("id")
        {
            let id = id
                .as_str()
                .unwrap_or_else(|| panic!("a client id went upstream: {line}"));
            assert!(id.starts_with("cs-"), "{line}");
            ids.push(id.to_owned());
        }
    }
    let distinct: std::collections::HashSet<_> = ids.iter().collect();
    assert_eq!(
        distinct.len(),
        ids.len(),
        "never the same id twice: {ids:?}"
    );
    assert_eq!(
        ids.len(),
        4,
        "initialize, tools/list and two calls: {ids:?}"
    );
}

/// The review's chain: an allowed slow call in flight under id 7, then an approved held call
/// under the same id 7. Were both to go upstream as 7, the slow call's answer (and any
/// `requestState` in it) could be booked to the held call. The second id 7 is refused while the
/// first is in flight; afterwards each call gets its own answer, and the held one runs once.
#[tokio::test]
async fn a_request_id_in_flight_is_not_taken_twice() {
    let mut rig = rig("edge-inflight", plain_client()).await;
    let args = r#"{"path":"/x","content":"hi"}"#;
    let first = rig.client.call_raw("write_file", args).await;
    rig.alice
        .decide(&rig.svc, &approval_id(&first), Decision::Approved)
        .await;

    rig.client
        .send_line(&held_call(7, r#"{"name":"read_slow","arguments":{}}"#))
        .await;
    rig.client
        .send_line(&held_call(
            7,
            &format!(r#"{{"name":"write_file","arguments":{args}}}"#),
        ))
        .await;
    let refused = rig.client.response(7).await;
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("already in flight"),
        "{refused}"
    );
    assert!(rig.upstream.calls_of("write_file").is_empty());

    // The slow call's answer comes back under 7, and only to it.
    rig.client
        .send_line(r#"{"jsonrpc":"2.0","id":8,"method":"vendor/release"}"#)
        .await;
    let slow = rig.client.response(7).await;
    assert_eq!(
        slow["result"]["content"][0]["text"], "ran read_slow",
        "{slow}"
    );
    // Now 7 is free again: the approved call runs, once.
    let ran = {
        rig.client
            .send_line(&held_call(
                7,
                &format!(r#"{{"name":"write_file","arguments":{args}}}"#),
            ))
            .await;
        rig.client.response(7).await
    };
    assert_eq!(
        ran["result"]["content"][0]["text"], "ran \"write_file\"",
        "{ran}"
    );
    assert_eq!(rig.upstream.calls_of("write_file").len(), 1);
}

#[tokio::test]
async fn a_cancel_goes_upstream_under_the_id_the_upstream_knows() {
    let mut rig = rig("edge-cancel", plain_client()).await;
    rig.client
        .send_line(&held_call(40, r#"{"name":"read_slow","arguments":{}}"#))
        .await;
    for id in [40, 41] {
        rig.client
            .send_line(&format!(
                r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{id}}}}}"#
            ))
            .await;
    }
    settled_count(&mut rig, 900).await;
    let seen = rig.upstream.lines.lock().unwrap().clone();
    let slow: Value = seen
        .iter()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|v| v["params"]["name"] == "read_slow")
        .unwrap();
    let cancels: Vec<Value> = seen
        .iter()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["method"] == "notifications/cancelled")
        .collect();
    assert_eq!(
        cancels.len(),
        1,
        "the cancel of no request in flight went nowhere"
    );
    assert_eq!(cancels[0]["params"]["requestId"], slow["id"]);
}

/// A 2026-07-28 call of `ask_file` with `arguments` as exact text and `tail` appended to params.
async fn ask_with(client: &mut Client, arguments: &str, tail: &str) -> Value {
    client.next += 1;
    let id = client.next;
    let line = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"ask_file\",\"arguments\":{arguments},\"_meta\":{{\"io.modelcontextprotocol/clientCapabilities\":{{\"elicitation\":{{\"url\":{{}}}}}}}}{tail}}}}}"
    );
    client.send_line(&line).await;
    client.response(id).await
}

/// The op_hash reads text in its NFC form, so the NFD spelling of an approved path has the same
/// op_hash, and names another file to the upstream. A continuation must carry the approved
/// call's argument bytes exactly.
#[tokio::test]
async fn a_continuation_goes_on_only_with_the_approved_bytes() {
    let mut rig = rig("edge-nfd", plain_client()).await;
    let nfc = "{\"path\":\"/srv/caf\u{e9}\"}";
    let nfd = "{\"path\":\"/srv/cafe\u{301}\"}";
    let held = ask_with(&mut rig.client, nfc, "").await;
    let ours = held["result"]["requestState"].as_str().unwrap().to_owned();
    rig.alice
        .decide(&rig.svc, &approval_id(&held), Decision::Approved)
        .await;
    let approve = format!(
        ",\"requestState\":\"{ours}\",\"inputResponses\":{{\"countersign.approval\":{{\"action\":\"accept\"}}}}"
    );
    let asked = ask_with(&mut rig.client, nfc, &approve).await;
    assert_eq!(
        asked["result"]["requestState"], "upstream-state-1",
        "{asked}"
    );
    let answer = ",\"requestState\":\"upstream-state-1\",\"inputResponses\":{\"q\":{\"action\":\"accept\",\"content\":{}}}";
    let other_spelling = ask_with(&mut rig.client, nfd, answer).await;
    let text = other_spelling["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        text.starts_with("Not run: refused (binding_mismatch)"),
        "{other_spelling}"
    );
    let sent = rig.upstream.calls_of("ask_file");
    assert_eq!(sent.len(), 1, "only the approved call went upstream");
    // The pass was spent on the refused attempt: the approved spelling does not run either.
    let again = ask_with(&mut rig.client, nfc, answer).await;
    assert_eq!(again["result"]["isError"], true, "{again}");
    assert_eq!(rig.upstream.calls_of("ask_file").len(), 1);
}
