//! The 2026-07-28 tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663): a held call
//! answered with a task handle. No pinned SDK implements the extension, so the client is written
//! here from the SEP's wire shapes: `_meta` declares the extension per request, the call is
//! answered `resultType: "task"`, and `tasks/get`, `tasks/update`, `tasks/cancel` follow.

use crate::support::{
    Client, approval_id, approval_status, close, executed_once_and_verified, plain_client, rig,
    verified,
};

use countersign::Decision;
use serde_json::{Value, json};
use std::time::Duration;

const EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// The per-request `_meta` of a 2026-07-28 client that declares the extension.
fn declaring() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {EXTENSION: {}}},
    })
}

/// A held `tools/call` from a 2026-07-28 client declaring the extension, arguments as text.
async fn call(client: &mut Client, args: &str) -> Value {
    call_tool(client, "write_file", args).await
}

async fn call_tool(client: &mut Client, tool: &str, args: &str) -> Value {
    client.next += 1;
    let id = client.next;
    let line = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"{tool}\",\"arguments\":{args},\"_meta\":{}}}}}",
        declaring()
    );
    client.send_line(&line).await;
    client.response(id).await
}

/// A `tasks/*` request, declaring the extension as the SEP requires.
async fn tasks(client: &mut Client, method: &str, mut params: Value) -> Value {
    params["_meta"] = declaring();
    client.request(method, params).await
}

/// `tasks/get` until the task leaves `working` (bounded only against a hang).
async fn settled(client: &mut Client, task_id: &str) -> Value {
    for _ in 0..600 {
        let r = tasks(client, "tasks/get", json!({ "taskId": task_id })).await;
        if r["result"]["status"] != "working" {
            return r["result"].clone();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("task {task_id} never settled");
}

#[tokio::test]
async fn a_held_call_gets_a_task_handle_and_runs_once_approved() {
    let mut rig = rig("task-ext-run", plain_client()).await;
    let audit = rig.audit.clone();
    // server/discover declares the extension.
    let discover = tasks(&mut rig.client, "server/discover", json!({})).await;
    assert_eq!(
        discover["result"]["capabilities"]["extensions"][EXTENSION],
        json!({}),
        "{discover}"
    );
    let args = r#"{"path":"/x", "content":"hi"}"#;
    let created = call(&mut rig.client, args).await;
    let task = &created["result"];
    assert_eq!(task["resultType"], "task", "{created}");
    assert_eq!(task["status"], "working");
    assert!(task["ttlMs"].as_u64().unwrap() > 0);
    assert!(task["pollIntervalMs"].as_u64().unwrap() > 0);
    assert!(task.get("task").is_none(), "not the 2025-11-25 shape");
    let task_id = task["taskId"].as_str().unwrap().to_owned();
    let approval = approval_id(&created);
    assert!(task["statusMessage"].as_str().unwrap().contains(&approval));
    assert!(rig.upstream.calls_of("write_file").is_empty());

    // The handle answers right away, but only to a request that declares the extension.
    let working = tasks(&mut rig.client, "tasks/get", json!({ "taskId": task_id })).await;
    assert_eq!(working["result"]["resultType"], "complete", "{working}");
    assert_eq!(working["result"]["status"], "working");
    let bare = rig
        .client
        .request("tasks/get", json!({ "taskId": task_id }))
        .await;
    assert_eq!(bare["error"]["code"], -32021, "{bare}");
    assert_eq!(
        bare["error"]["data"]["requiredCapabilities"]["extensions"][EXTENSION],
        json!({})
    );
    // tasks/result is gone in the extension; tasks/update with nothing outstanding is an ack.
    let result = tasks(
        &mut rig.client,
        "tasks/result",
        json!({ "taskId": task_id }),
    )
    .await;
    assert_eq!(result["error"]["code"], -32601, "{result}");
    let update = tasks(
        &mut rig.client,
        "tasks/update",
        json!({ "taskId": task_id, "inputResponses": {"nothing": {"action": "accept"}} }),
    )
    .await;
    assert_eq!(
        update["result"],
        json!({"resultType": "complete"}),
        "{update}"
    );
    let unknown = tasks(
        &mut rig.client,
        "tasks/get",
        json!({ "taskId": "countersign-task-nope" }),
    )
    .await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");

    rig.alice
        .decide(&rig.svc, &approval, Decision::Approved)
        .await;
    let done = settled(&mut rig.client, &task_id).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["resultType"], "complete");
    assert_eq!(done["result"]["content"][0]["text"], "ran \"write_file\"");
    let sent = rig.upstream.calls_of("write_file");
    assert_eq!(sent.len(), 1, "executed exactly once, with no retry");
    assert!(sent[0].contains(args), "the hashed bytes: {}", sent[0]);
    assert!(
        !sent[0].contains(EXTENSION),
        "the upstream is not offered a task of its own: {}",
        sent[0]
    );
    // Read again: the same result (a pure read).
    let again = tasks(&mut rig.client, "tasks/get", json!({ "taskId": task_id })).await;
    assert_eq!(again["result"], done);

    let (lines, bytes) = close(rig).await;
    executed_once_and_verified(&lines, &bytes, &audit, &approval);
}

#[tokio::test]
async fn tasks_cancel_withdraws_the_approval_and_a_refusal_completes_as_a_tool_error() {
    let mut rig = rig("task-ext-cancel", plain_client()).await;
    let audit = rig.audit.clone();
    let created = call(&mut rig.client, r#"{"path":"/c"}"#).await;
    let task_id = created["result"]["taskId"].as_str().unwrap().to_owned();
    let approval = approval_id(&created);
    let ack = tasks(
        &mut rig.client,
        "tasks/cancel",
        json!({ "taskId": task_id }),
    )
    .await;
    assert_eq!(ack["result"], json!({"resultType": "complete"}), "{ack}");
    let status = approval_status(&rig.svc, &approval).await;
    assert_eq!(status["status"], "DENIED", "{status}");
    assert_eq!(status["reason_code"], "cancelled", "{status}");
    let cancelled = settled(&mut rig.client, &task_id).await;
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    assert!(cancelled.get("result").is_none() && cancelled.get("error").is_none());
    let twice = tasks(
        &mut rig.client,
        "tasks/cancel",
        json!({ "taskId": task_id }),
    )
    .await;
    assert_eq!(
        twice["result"],
        json!({"resultType": "complete"}),
        "{twice}"
    );

    // A human refuses: the call never runs; the task completes with the refusal as a tool error
    // (the extension keeps `failed` for JSON-RPC errors).
    let created = call(&mut rig.client, r#"{"path":"/d"}"#).await;
    let task_id = created["result"]["taskId"].as_str().unwrap().to_owned();
    let approval = approval_id(&created);
    rig.alice
        .decide(&rig.svc, &approval, Decision::Denied)
        .await;
    let refused = settled(&mut rig.client, &task_id).await;
    assert_eq!(refused["status"], "completed", "{refused}");
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    assert!(
        rig.upstream.calls_of("write_file").is_empty(),
        "nothing ran"
    );

    // Declaring the extension on a revision before 2026-07-28 asks for no task (SEP-2663).
    let old = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":900,\"method\":\"tools/call\",\"params\":{{\"name\":\"write_file\",\"arguments\":{{\"path\":\"/o\"}},\"_meta\":{{\"io.modelcontextprotocol/clientCapabilities\":{{\"extensions\":{{\"{EXTENSION}\":{{}}}}}}}}}}}}"
    );
    rig.client.send_line(&old).await;
    let plain = rig.client.response(900).await;
    assert_ne!(plain["result"]["resultType"], "task", "{plain}");
    assert!(plain["result"].get("taskId").is_none(), "{plain}");

    let (lines, bytes) = close(rig).await;
    assert!(lines.iter().all(|l| l["outcome"] != "executed"));
    verified(&bytes, &audit);
}

/// The approved call's upstream asks for input (its own multi round trip): the task turns
/// `input_required` with the upstream's requests under keys of its own, `tasks/update` answers
/// them, and the call goes on once, with the upstream's state, to its result.
#[tokio::test]
async fn input_the_upstream_asks_for_goes_through_tasks_update() {
    let mut rig = rig("task-ext-input", plain_client()).await;
    let created = call_tool(&mut rig.client, "ask_file", r#"{"path":"/a"}"#).await;
    let task_id = created["result"]["taskId"].as_str().unwrap().to_owned();
    let approval = approval_id(&created);
    rig.alice
        .decide(&rig.svc, &approval, Decision::Approved)
        .await;
    let asks = settled(&mut rig.client, &task_id).await;
    assert_eq!(asks["status"], "input_required", "{asks}");
    let requests = asks["inputRequests"].as_object().unwrap();
    assert_eq!(requests.len(), 1, "{asks}");
    let (key, request) = requests.iter().next().unwrap();
    assert_eq!(request["method"], "elicitation/create");
    assert!(
        !asks["inputRequests"]
            .to_string()
            .contains("upstream-state-1")
    );

    let update = tasks(
        &mut rig.client,
        "tasks/update",
        json!({ "taskId": task_id, "inputResponses": { key.as_str(): {"action": "accept", "content": {}} } }),
    )
    .await;
    assert_eq!(
        update["result"],
        json!({"resultType": "complete"}),
        "{update}"
    );
    let done = settled(&mut rig.client, &task_id).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"]["content"][0]["text"], "ran ask_file");
    let sent = rig.upstream.calls_of("ask_file");
    assert_eq!(
        sent.len(),
        2,
        "the approved call, then its continuation: {sent:?}"
    );
    let kept = [
        r#""requestState":"upstream-state-1""#,
        r#""inputResponses":{"q":"#,
        r#""arguments":{"path":"/a"}"#,
    ];
    for part in kept {
        assert!(sent[1].contains(part), "{part} in {}", sent[1]);
    }

    let (lines, _) = close(rig).await;
    let outcomes: Vec<_> = lines.iter().filter_map(|l| l["outcome"].as_str()).collect();
    assert!(
        outcomes.contains(&"executed") && outcomes.contains(&"continued"),
        "{outcomes:?}"
    );
    let continued = lines.iter().find(|l| l["outcome"] == "continued").unwrap();
    assert_eq!(continued["approval_ref"], approval.as_str());
}
