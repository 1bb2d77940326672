//! `countersign preauth list|disable` and `countersign audit recheck` as an operator runs them.

use crate::support;

use countersign_server::{Config, CreateRequest};
use serde_json::Value;
use std::path::Path;
use std::process::Output;
use support::{code, stderr};

const CONFIG: &str = r#"
[[preauthorizations]]
slug = "small"
agent = "agent-*"
tool = "payments.transfer"
expires_at = 2099-01-01T00:00:00Z
max_uses = 3
constraints = [{ kind = "max", arg = "/amount", max = "100" }]
"#;

fn run(args: &[&str]) -> Output {
    std::process::Command::new(support::BIN)
        .args(args)
        .output()
        .unwrap()
}

fn data_dir(dir: &Path, config: &str) -> std::path::PathBuf {
    let data = dir.join("data");
    let config = Config::from_toml(config).unwrap();
    let state =
        countersign_server::open_state(&data, config, "http://127.0.0.1:1".to_owned()).unwrap();
    // One covered call, so the log has something to recheck.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let params = serde_json::value::RawValue::from_string(r#"{"amount":"5"}"#.into()).unwrap();
    let r = rt
        .block_on(state.create(
            CreateRequest {
                agent_id: "agent-7".into(),
                tool_name: "payments.transfer".into(),
                params,
                profile: None,
                severity: None,
                server_id: None,
                revises: None,
            },
            "gw",
        ))
        .unwrap();
    assert_eq!(r.status, countersign::ApprovalStatus::Approved);
    state.store().seal_audit().unwrap();
    let lines = state.store().audit_lines_after(0, 1000).unwrap();
    let text: String = lines.into_iter().map(|(_, l)| l + "\n").collect();
    std::fs::write(dir.join("audit.log"), text).unwrap();
    data
}

fn listed(data: &Path) -> Vec<Value> {
    let out = run(&[
        "preauth",
        "list",
        "--json",
        "--data-dir",
        data.to_str().unwrap(),
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    serde_json::from_slice::<Value>(&out.stdout)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

#[test]
fn list_and_disable_report_state_uses_and_exit_codes() {
    let dir = tempdir("list");
    let data = data_dir(&dir, CONFIG);
    let rows = listed(&data);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["slug"], "small");
    assert_eq!(rows[0]["state"], "active");
    assert_eq!(
        (rows[0]["uses"].as_i64(), rows[0]["max_uses"].as_i64()),
        (Some(1), Some(3))
    );

    let d = data.to_str().unwrap();
    assert_eq!(
        code(&run(&["preauth", "disable", "small", "--data-dir", d])),
        0
    );
    assert_eq!(
        code(&run(&["preauth", "disable", "small", "--data-dir", d])),
        1
    );
    assert_eq!(
        code(&run(&["preauth", "disable", "nope", "--data-dir", d])),
        2
    );
    assert_eq!(listed(&data)[0]["state"], "disabled");
    let table = run(&["preauth", "list", "--data-dir", d]);
    assert!(String::from_utf8_lossy(&table.stdout).contains("small"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn recheck_reports_newly_parked_calls_and_exits_by_whether_anything_changed() {
    let dir = tempdir("recheck");
    let data = data_dir(&dir, CONFIG);
    let log = dir.join("audit.log");
    let key = data.join(countersign_server::files::SERVICE_PUBLIC_KEY);
    let same = dir.join("same.toml");
    std::fs::write(&same, CONFIG).unwrap();
    let stricter = dir.join("stricter.toml");
    std::fs::write(&stricter, "").unwrap();
    let args = |config: &Path| {
        run(&[
            "audit",
            "recheck",
            log.to_str().unwrap(),
            "--key",
            key.to_str().unwrap(),
            "--config",
            config.to_str().unwrap(),
            "--json",
        ])
    };
    let out = args(&same);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let out = args(&stricter);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let rows: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rows[0]["verdict"], "newly_parked");
    assert_eq!(rows[0]["was"], "APPROVED by preauthorization");

    // Unusable input: a wrong key, a missing config.
    let wrong = run(&[
        "audit",
        "recheck",
        log.to_str().unwrap(),
        "--key",
        "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        "--config",
        same.to_str().unwrap(),
    ]);
    assert_eq!(code(&wrong), 2);
    let missing = args(&dir.join("nope.toml"));
    assert_eq!(code(&missing), 2);
    let _ = std::fs::remove_dir_all(&dir);
}

fn tempdir(tag: &str) -> std::path::PathBuf {
    let dir =
        std::env::temp_dir().join(format!("countersign-preauth-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
