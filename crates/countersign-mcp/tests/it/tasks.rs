//! 2025-11-25 tasks: a held call answered with a task that runs once approved.

use crate::support::{
    Approver, Upstream, approval_id, approval_status, audit_lines, base_config, plain_client, rig,
    service, start_interposer, task_call, task_end, task_id, tasks_client, temp, ticket,
};

use countersign::Decision;
use countersign_audit::{AuditSealer, verify_log};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

#[tokio::test]
async fn a_held_call_sent_as_a_task_runs_once_when_approved_with_no_retry() {
    let alice = Approver::new("alice", "alice-es256");
    let svc = service(&[alice.record()]).await;
    let dir = temp("task-run");
    let config = base_config(&dir, &[alice.record()]);
    let audit = config.audit_log.clone().unwrap();
    let upstream = Arc::new(Upstream::default());
    let (mut client, _interposer, run) = start_interposer(&svc, config, upstream.clone()).await;
    // The interposer offers tasks for tools/call, and held tools say they can run as one.
    let init = client.request("initialize", tasks_client()).await;
    assert_eq!(
        init["result"]["capabilities"]["tasks"]["requests"]["tools"]["call"],
        json!({}),
        "{init}"
    );
    let listed = client.request("tools/list", json!({})).await;
    let tools = listed["result"]["tools"].as_array().unwrap();
    assert!(
        tools[0].get("execution").is_none(),
        "allowed tools untouched"
    );
    assert_eq!(tools[1]["execution"]["taskSupport"], "optional");

    let args = r#"{"path":"/t", "content":"hi"}"#;
    let created = task_call(&mut client, args).await;
    let task = &created["result"]["task"];
    assert_eq!(task["status"], "working", "{created}");
    let task_id = task_id(&created);
    let approval = approval_id(&created);
    assert!(task["statusMessage"].as_str().unwrap().contains(&approval));
    assert!(
        upstream.calls_of("write_file").is_empty(),
        "nothing runs before approval"
    );

    alice.decide(&svc, &approval, Decision::Approved).await;
    let ended = task_end(&mut client, &task_id).await;
    assert_eq!(ended["status"], "completed", "{ended}");
    let sent = upstream.calls_of("write_file");
    assert_eq!(sent.len(), 1, "executed exactly once, with no retry");
    assert!(
        sent[0].contains(args),
        "the hashed argument bytes: {}",
        sent[0]
    );
    assert!(
        !sent[0].contains("\"task\""),
        "the upstream runs a plain call"
    );
    let result = client
        .request("tasks/result", json!({ "taskId": task_id }))
        .await;
    assert_eq!(result["result"]["content"][0]["text"], "ran \"write_file\"");
    assert_eq!(
        result["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        task_id.as_str()
    );
    let list = client.request("tasks/list", json!({})).await;
    assert_eq!(list["result"]["tasks"][0]["taskId"], task_id.as_str());

    // The grant is spent: the same call as a task again is a new approval.
    let again = task_call(&mut client, args).await;
    assert_ne!(approval_id(&again), approval);
    assert_eq!(upstream.calls_of("write_file").len(), 1);

    drop(client);
    let _ = tokio::time::timeout(Duration::from_secs(10), run).await;
    let bytes = std::fs::read(&audit).unwrap();
    let lines: Vec<Value> = audit_lines(&audit);
    let executed: Vec<_> = lines
        .iter()
        .filter(|l| l["outcome"] == "executed")
        .collect();
    assert_eq!(executed.len(), 1);
    assert_eq!(executed[0]["approval_ref"], approval.as_str());
    assert_eq!(executed[0]["upstream"], "ok");
    let key = AuditSealer::load_or_create(&audit.with_extension("key")).unwrap();
    let report = verify_log(&bytes, &key.public_key());
    assert!(report.issues.is_empty(), "{report:?}");
}

#[tokio::test]
async fn tasks_cancel_withdraws_the_approval_and_nothing_runs() {
    let mut rig = rig("task-cancel", tasks_client()).await;
    let created = task_call(&mut rig.client, r#"{"path":"/c"}"#).await;
    let task_id = task_id(&created);
    let approval = approval_id(&created);
    let cancelled = rig
        .client
        .request("tasks/cancel", json!({ "taskId": task_id }))
        .await;
    assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");
    let status = approval_status(&rig.svc, &approval).await;
    assert_eq!(status["status"], "DENIED", "{status}");
    assert_eq!(status["reason_code"], "cancelled", "{status}");
    // A task that ended cannot be cancelled again; its result says it did not run.
    let twice = rig
        .client
        .request("tasks/cancel", json!({ "taskId": task_id }))
        .await;
    assert_eq!(twice["error"]["code"], -32602, "{twice}");
    let result = rig
        .client
        .request("tasks/result", json!({ "taskId": task_id }))
        .await;
    assert_eq!(result["result"]["isError"], true, "{result}");
    // The withdrawn approval cannot be approved any more, and nothing ran.
    assert!(rig.upstream.calls_of("write_file").is_empty());
}

#[tokio::test]
async fn a_refused_task_fails_and_its_result_is_the_refusal() {
    let mut rig = rig("task-refused", tasks_client()).await;
    let created = task_call(&mut rig.client, r#"{"path":"/r"}"#).await;
    let task_id = task_id(&created);
    let approval = approval_id(&created);
    rig.alice
        .decide(&rig.svc, &approval, Decision::Denied)
        .await;
    let ended = task_end(&mut rig.client, &task_id).await;
    assert_eq!(ended["status"], "failed", "{ended}");
    let message = ended["statusMessage"].as_str().unwrap();
    assert!(
        message.starts_with("Not run: refused (approver_refused)"),
        "{message}"
    );
    let result = rig
        .client
        .request("tasks/result", json!({ "taskId": task_id }))
        .await;
    assert_eq!(result["result"]["isError"], true, "{result}");
    assert_eq!(ticket(&result)["status"], "DENIED");
    assert!(rig.upstream.calls_of("write_file").is_empty());
}

#[tokio::test]
async fn task_ids_the_interposer_does_not_know_are_refused_or_left_to_the_upstream() {
    let mut rig = rig("task-unknown", tasks_client()).await;
    // One of ours it no longer knows (a restart, an expiry): answered here.
    let r = rig
        .client
        .request("tasks/get", json!({"taskId": "countersign-task-gone-1"}))
        .await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
    // The upstream's own task ids are the upstream's.
    let r = rig
        .client
        .request("tasks/get", json!({"taskId": "upstream-7"}))
        .await;
    assert_eq!(r["result"], json!({}), "{r}");
    assert!(
        rig.upstream
            .lines
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("upstream-7"))
    );
}

#[tokio::test]
async fn a_client_before_2025_11_25_gets_no_tasks_and_its_task_member_is_ignored() {
    let mut rig = rig("task-old", plain_client()).await;
    let created = task_call(&mut rig.client, r#"{"path":"/o"}"#).await;
    assert!(created["result"].get("task").is_none(), "{created}");
    assert_eq!(created["result"]["isError"], true, "the tool-error ticket");
}

#[tokio::test]
async fn tasks_result_waits_for_the_task_to_end() {
    let mut rig = rig("task-wait", tasks_client()).await;
    let created = task_call(&mut rig.client, r#"{"path":"/w"}"#).await;
    let task_id = task_id(&created);
    let approval = approval_id(&created);
    // Asked before anyone decided: answered only once the approved call ran.
    rig.client.next += 1;
    let waiting = rig.client.next;
    let ask = json!({"jsonrpc": "2.0", "id": waiting, "method": "tasks/result", "params": {"taskId": task_id}});
    rig.client.send_line(&ask.to_string()).await;
    let status = rig
        .client
        .request("tasks/get", json!({ "taskId": task_id }))
        .await;
    assert_eq!(status["result"]["status"], "working", "{status}");
    rig.alice
        .decide(&rig.svc, &approval, Decision::Approved)
        .await;
    let result = rig.client.response(waiting).await;
    assert_eq!(
        result["result"]["content"][0]["text"], "ran \"write_file\"",
        "{result}"
    );
    assert_eq!(rig.upstream.calls_of("write_file").len(), 1);
}

#[tokio::test]
async fn two_tasks_for_one_approval_run_the_call_once() {
    let mut rig = rig("task-twice", tasks_client()).await;
    let args = r#"{"path":"/twice"}"#;
    let a = task_call(&mut rig.client, args).await;
    let b = task_call(&mut rig.client, args).await;
    let approval = approval_id(&a);
    assert_eq!(approval_id(&b), approval, "one open ticket");
    rig.alice
        .decide(&rig.svc, &approval, Decision::Approved)
        .await;
    let mut ends = Vec::new();
    for created in [&a, &b] {
        ends.push(task_end(&mut rig.client, &task_id(created)).await["status"].clone());
    }
    ends.sort_by_key(Value::to_string);
    assert_eq!(
        ends,
        [json!("completed"), json!("failed")],
        "one grant, one run"
    );
    assert_eq!(rig.upstream.calls_of("write_file").len(), 1);
}
