//! `countersign verify` without a hand-built CASE: the action, the service's answer, the
//! enrolled keys and the verifier's rules given one by one.

use crate::support::{self, Api, Approver, BIN, Server, code, stderr, stdout};
use countersign::Decision;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn verify(args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("verify")
        .args(args)
        .output()
        .expect("run countersign verify")
}

fn write(dir: &Path, name: &str, value: &Value) -> String {
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_vec(value).unwrap()).unwrap();
    path.display().to_string()
}

/// A worked-example CASE taken apart into files: (action, result, registry, policy, now).
fn parts_of(case: &str, dir: &Path) -> (String, String, String, String, String) {
    let text = std::fs::read(repo().join("fixtures/worked-example").join(case)).unwrap();
    let case: Value = serde_json::from_slice(&text).unwrap();
    (
        write(dir, "action.json", &case["action"]),
        write(dir, "result.json", &case["result"]),
        write(dir, "registry.json", &case["registry"]),
        write(dir, "policy.json", &case["policy"]),
        case["now"].as_str().unwrap().to_owned(),
    )
}

/// `countersign verify` given a CASE's parts (as [`parts_of`] wrote them).
fn verify_parts(
    (action, result, registry, policy, now): &(String, String, String, String, String),
) -> Output {
    verify(&[
        "--action",
        action,
        "--result",
        result,
        "--registry",
        registry,
        "--policy",
        policy,
        "--now",
        now,
    ])
}

#[test]
fn the_parts_of_a_case_give_the_cases_verdict() {
    let dir = support::scratch_dir("verify-parts");
    for case in ["approve-account-a.case.json", "refuse-account-a.case.json"] {
        let whole = verify(&[&repo()
            .join("fixtures/worked-example")
            .join(case)
            .display()
            .to_string()]);
        let parts = verify_parts(&parts_of(case, &dir));
        assert_eq!(code(&parts), code(&whole), "{case}: {}", stderr(&parts));
        assert_eq!(stdout(&parts), stdout(&whole), "{case}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_answer_for_another_action_is_a_deny() {
    let dir = support::scratch_dir("verify-parts-other");
    let mut parts = parts_of("approve-account-a.case.json", &dir);
    // The replay case's action: the same approval presented for a transfer to account B.
    let other = support::scratch_dir("verify-parts-other-b");
    parts.0 = parts_of("replay-to-account-b.case.json", &other).0;
    let out = verify_parts(&parts);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let verdict: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(verdict["effective"], "DENY");
    assert_eq!(verdict["reason_code"], "binding_mismatch", "{verdict}");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&other);
}

#[test]
fn a_case_and_parts_together_or_parts_missing_are_usage_errors() {
    let case = repo().join("fixtures/worked-example/approve-account-a.case.json");
    let case = case.display().to_string();
    let both = verify(&[
        &case,
        "--action",
        &case,
        "--result",
        &case,
        "--registry",
        &case,
    ]);
    assert_eq!(code(&both), 2, "{}", stderr(&both));
    let no_result = verify(&["--action", &case, "--policy", &case]);
    assert_eq!(code(&no_result), 2, "{}", stderr(&no_result));
    assert!(
        stderr(&no_result).contains("--result"),
        "{}",
        stderr(&no_result)
    );
    // Parts but no rules: neither --policy nor --config.
    let no_rules = verify(&["--action", &case, "--result", &case, "--registry", &case]);
    assert_eq!(code(&no_rules), 2, "{}", stderr(&no_rules));
    assert!(
        stderr(&no_rules).contains("--policy"),
        "{}",
        stderr(&no_rules)
    );
}

/// A live service: the gateway's request body, the service's answer, its published registry and
/// its configuration are all `verify` needs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_services_answer_verifies_against_its_registry_and_config() {
    let dir = support::scratch_dir("verify-live");
    let alice = Approver::new("alice", "alice-es256", false);
    let config = support::write_config(&dir, &[&alice], "")
        .display()
        .to_string();
    let server = Server::start(&dir);
    let token = server.add_gateway("verifier").await;
    let token_file = dir.join("gw.token");
    std::fs::write(&token_file, &token).unwrap();
    let token_file = token_file.display().to_string();

    let api = Api::for_gateway(&server.base, &token);
    let request =
        json!({"agent_id": "agent-7", "tool_name": "payments.transfer", "params": {"n": "1"}});
    let id = api.create("payments.transfer", 1).await;
    let session = api.login(&alice).await;
    let signed = api.prepare(&alice, &session, &id, Decision::Approved).await;
    let (status, body) = api
        .post(
            &format!("/v1/approver/approvals/{id}/decision"),
            Some(&session),
            &signed,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let answer = api.get(&format!("/v1/approvals/{id}")).await;
    assert_eq!(answer["status"], "APPROVED", "{answer}");

    let request_file = write(&dir, "request.json", &request);
    let answer_file = write(&dir, "answer.json", &answer);
    let live = |action: &str, token: Option<&str>| {
        let mut args = vec![
            "--action",
            action,
            "--result",
            &answer_file,
            "--registry",
            &server.base,
            "--config",
            &config,
        ];
        if let Some(t) = token {
            args.extend(["--gateway-token-file", t]);
        }
        verify(&args)
    };

    let out = live(&request_file, Some(&token_file));
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    let verdict: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(verdict["effective"], "ALLOW");
    assert_eq!(verdict["approvers"][0]["principal"], "alice", "{verdict}");

    // Other params than the ones approved: the evidence does not cover them.
    let other = write(
        &dir,
        "other.json",
        &json!({"agent_id": "agent-7", "tool_name": "payments.transfer", "params": {"n": "2"}}),
    );
    let out = live(&other, Some(&token_file));
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(
        stdout(&out).contains("binding_mismatch"),
        "{}",
        stdout(&out)
    );

    // A configuration under which alice may not approve this tool: the same answer is a DENY.
    let text = std::fs::read_to_string(&config).unwrap();
    let strict = dir.join("strict.toml");
    std::fs::write(
        &strict,
        format!("{text}\n[groups]\nfinance = [\"bob\"]\n[[tools]]\nname = \"payments.transfer\"\napprovers = [\"finance\"]\n"),
    )
    .unwrap();
    let strict = strict.display().to_string();
    let data = server.data.display().to_string();
    for with_store in [false, true] {
        let mut args = vec![
            "--action",
            &request_file,
            "--result",
            &answer_file,
            "--registry",
            &server.base,
            "--gateway-token-file",
            &token_file,
            "--config",
            &strict,
        ];
        if with_store {
            args.extend(["--data-dir", &data]);
        }
        let out = verify(&args);
        assert_eq!(code(&out), 1, "{}{}", stdout(&out), stderr(&out));
        let verdict: Value = serde_json::from_str(&stdout(&out)).unwrap();
        assert_eq!(verdict["effective"], "DENY");
        // Without the database, the note says who might be missing from the group.
        assert_eq!(
            stderr(&out).contains("--data-dir"),
            !with_store,
            "{}",
            stderr(&out)
        );
    }

    // The registry is not published: without the token the fetch is refused, and says why.
    let out = live(&request_file, None);
    assert_eq!(code(&out), 2, "{}", stdout(&out));
    assert!(
        stderr(&out).contains("--gateway-token-file"),
        "{}",
        stderr(&out)
    );

    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
