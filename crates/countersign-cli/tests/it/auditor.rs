//! `countersign auditor add`, `list` and `revoke`, and `countersign audit fetch`: an auditor's
//! token reads the whole log, which then verifies offline; a gateway token does not; a revoked
//! auditor reads nothing. Public proofs carry no line, and `audit prove inclusion` checks the
//! line an owner kept against them.

use crate::support;

use countersign_server::store::ScratchSchema;
use serde_json::Value;
use sha2::{Digest as _, Sha256};
use std::path::Path;
use std::process::Output;
use support::{Api, Approver, Server, code, stderr, stdout};

/// `countersign ARGS --data-dir DATA [--database URL]`.
fn run(args: &[&str], data: &Path, database: Option<&str>) -> Output {
    let mut command = std::process::Command::new(support::BIN);
    command.args(args).arg("--data-dir").arg(data);
    if let Some(url) = database {
        command.arg("--database").arg(url);
    }
    command.output().unwrap()
}

fn listed(kind: &str, data: &Path, database: Option<&str>) -> Vec<Value> {
    let out = run(&[kind, "list", "--json"], data, database);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    serde_json::from_slice::<Value>(&out.stdout)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

/// `countersign auditor add NAME`: its one line of stdout.
fn add_auditor(data: &Path, database: Option<&str>, name: &str) -> String {
    let out = run(&["auditor", "add", name], data, database);
    assert_eq!(code(&out), 0, "auditor add: {}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "exactly one line: {text:?}");
    lines[0].to_owned()
}

/// A data directory as `countersign serve` leaves it (service key, database migrated).
fn data_dir(dir: &Path, database: Option<&str>) -> std::path::PathBuf {
    let data = dir.join("data");
    let config = countersign_server::Config {
        database: database.map(str::to_owned),
        ..countersign_server::Config::default()
    };
    drop(countersign_server::open_state(&data, config, "http://127.0.0.1:1".to_owned()).unwrap());
    data
}

/// The whole command surface on one database.
fn add_list_revoke(data: &Path, database: Option<&str>) {
    assert!(listed("auditor", data, database).is_empty());
    let token = add_auditor(data, database, "compliance");
    assert!(token.starts_with("csa_"), "{token}");
    assert_eq!(countersign::b64::decode(&token[4..]).unwrap().len(), 32);
    let other = add_auditor(data, database, "external.audit_1");
    assert_ne!(token, other);

    // The database holds the token's SHA-256, never the token; and no gateway was added.
    let sealer = countersign_audit::AuditSealer::load_or_create(
        &data.join(countersign_server::files::SERVICE_KEY),
    )
    .unwrap();
    let url = match database {
        Some(url) => countersign_server::store::DatabaseUrl::parse(url).unwrap(),
        None => countersign_server::store::DatabaseUrl::default_in(data),
    };
    let store = url
        .open(sealer, countersign_server::config::Durability::Normal)
        .unwrap();
    let stored = store.auditors().unwrap();
    let compliance = stored.iter().find(|a| a.name == "compliance").unwrap();
    assert_eq!(
        compliance.token_hash,
        <[u8; 32]>::from(Sha256::digest(&token))
    );
    assert!(store.gateways().unwrap().is_empty());
    drop(store);
    assert!(listed("gateway", data, database).is_empty());

    let rows = listed("auditor", data, database);
    let names: Vec<&str> = rows.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["compliance", "external.audit_1"]);
    assert!(rows.iter().all(|r| r["revoked_at"].is_null()));
    let table = run(&["auditor", "list"], data, database);
    assert_eq!(code(&table), 0);
    let table = stdout(&table);
    assert!(
        table.starts_with("NAME") && table.contains("compliance"),
        "{table}"
    );
    assert!(!table.contains("csa_"), "{table}");

    // A taken name: exit 1; unusable names: exit 2; nothing on stdout either way.
    let again = run(&["auditor", "add", "compliance"], data, database);
    assert_eq!(code(&again), 1, "{}", stderr(&again));
    assert!(stdout(&again).is_empty());
    for bad in ["", "has space", "slash/y", &"x".repeat(65)] {
        let out = run(&["auditor", "add", bad], data, database);
        assert_eq!(code(&out), 2, "{bad:?}: {}", stderr(&out));
        assert!(stdout(&out).is_empty());
    }

    // Revoked: exit 0; again: exit 1; an unknown name (a gateway's is not an auditor's): 2.
    let out = run(&["auditor", "revoke", "compliance"], data, database);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let out = run(&["auditor", "revoke", "compliance"], data, database);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    support::add_gateway(data, database, "billing-agent");
    let out = run(&["auditor", "revoke", "billing-agent"], data, database);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    let rows = listed("auditor", data, database);
    assert!(rows[0]["revoked_at"].is_string(), "{rows:?}");
    assert!(rows[1]["revoked_at"].is_null(), "{rows:?}");
    assert!(listed("gateway", data, database)[0]["revoked_at"].is_null());
    let out = run(&["auditor", "add", "compliance"], data, database);
    assert_eq!(
        code(&out),
        1,
        "a revoked name stays taken: {}",
        stderr(&out)
    );
}

#[test]
fn auditor_add_list_and_revoke_on_sqlite() {
    let dir = support::scratch_dir("auditor");
    let data = data_dir(&dir, None);
    add_list_revoke(&data, None);
    let nowhere = dir.join("nowhere");
    for args in [
        vec!["auditor", "add", "a"],
        vec!["auditor", "list"],
        vec!["auditor", "revoke", "a"],
    ] {
        let out = run(&args, &nowhere, None);
        assert_eq!(code(&out), 2, "{args:?}: {}", stderr(&out));
    }
    assert!(!nowhere.exists(), "nothing was created");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[ignore = "needs PostgreSQL (.ci/steps/postgres.sh runs it)"]
fn auditor_add_list_and_revoke_on_postgres() {
    let schema = ScratchSchema::required("auditor_cli").unwrap();
    let url = schema.url();
    let dir = support::scratch_dir("auditor-pg");
    let data = data_dir(&dir, Some(&url));
    add_list_revoke(&data, Some(&url));
    assert!(listed("auditor", &data, None).is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

/// The status `GET /v1/audit/lines?limit=1` answers `token` with.
async fn lines_status(base: &str, token: &str) -> u16 {
    reqwest::Client::new()
        .get(format!("{base}/v1/audit/lines?limit=1"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// Poll until the service answers `token` with `status` (it sees CLI changes on its next
/// refresh, every half second); the deadline only bounds a hang.
async fn until_lines(base: &str, token: &str, status: u16) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while lines_status(base, token).await != status {
        assert!(
            std::time::Instant::now() < deadline,
            "the service never saw the change"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

fn fetch(base: &str, token_file: &Path, out: &Path) -> Output {
    std::process::Command::new(support::BIN)
        .args(["audit", "fetch", "--service", base, "--auditor-token-file"])
        .arg(token_file)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_auditor_fetches_the_log_that_verifies_and_a_revoked_one_cannot() {
    let dir = support::scratch_dir("auditor-fetch");
    let alice = Approver::new("alice", "alice-es256", false);
    support::write_config(&dir, &[&alice], "");
    let server = Server::start(&dir);
    let gateway = server.add_gateway("billing-agent").await;
    let api = Api::for_gateway(&server.base, &gateway);
    for n in 1..=3 {
        api.create("payments.transfer", n).await;
    }
    let token = add_auditor(&server.data, None, "compliance");
    until_lines(&server.base, &token, 200).await;
    let token_file = dir.join("compliance.token");
    std::fs::write(&token_file, format!("{token}\n")).unwrap();
    let checkpoint = reqwest::get(format!("{}/v1/audit/checkpoint", server.base))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let cp = dir.join("cp.txt");
    std::fs::write(&cp, &checkpoint).unwrap();
    let size: u64 = checkpoint.lines().nth(1).unwrap().parse().unwrap();

    // The whole log, as the auditor downloads it, verifies against the signed checkpoint.
    let log = dir.join("audit.jsonl");
    let out = fetch(&server.base, &token_file, &log);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let key = server
        .data
        .join(countersign_server::files::SERVICE_PUBLIC_KEY);
    let verified = std::process::Command::new(support::BIN)
        .args(["audit", "verify"])
        .arg(&log)
        .arg("--key")
        .arg(&key)
        .arg("--checkpoint")
        .arg(&cp)
        .args([
            "--rp-id",
            countersign_testkit::RP_ID,
            "--origin",
            countersign_testkit::ORIGIN,
        ])
        .output()
        .unwrap();
    assert_eq!(code(&verified), 0, "{}", stdout(&verified));
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.lines().count() as u64 >= size);

    // A public proof carries no line: prove it with the line the auditor downloaded.
    let seq = 2;
    let proof: Value = reqwest::get(format!(
        "{}/v1/audit/proof/inclusion?seq={seq}&size={size}",
        server.base
    ))
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert!(proof.get("line").is_none(), "{proof}");
    let proof_file = dir.join("p.json");
    std::fs::write(&proof_file, proof.to_string()).unwrap();
    let prove = |line: Option<&str>| {
        let mut c = std::process::Command::new(support::BIN);
        c.args(["audit", "prove", "inclusion", "--proof"])
            .arg(&proof_file)
            .arg("--checkpoint")
            .arg(&cp)
            .arg("--key")
            .arg(&key);
        if let Some(line) = line {
            let file = dir.join("line.json");
            std::fs::write(&file, format!("{line}\n")).unwrap();
            c.arg("--line").arg(file);
        }
        c.output().unwrap()
    };
    let lines: Vec<&str> = text.lines().collect();
    let out = prove(Some(lines[1]));
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    let out = prove(Some(lines[2]));
    assert_eq!(code(&out), 1, "another line: {}", stdout(&out));
    let out = prove(None);
    assert_eq!(code(&out), 2, "no line to prove: {}", stdout(&out));
    assert!(stderr(&out).contains("--line"), "{}", stderr(&out));

    // A gateway token is not an auditor token: refused, nothing written.
    let gateway_file = dir.join("gateway.token");
    std::fs::write(&gateway_file, &gateway).unwrap();
    let refused = dir.join("refused.jsonl");
    let out = fetch(&server.base, &gateway_file, &refused);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(stderr(&out).contains("401"), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&refused).unwrap_or_default(), "");

    // Revoked with the CLI while the service runs: refused once the service has seen it.
    let out = run(&["auditor", "revoke", "compliance"], &server.data, None);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    until_lines(&server.base, &token, 401).await;
    let out = fetch(&server.base, &token_file, &refused);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&refused).unwrap_or_default(), "");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
