//! The service's address and origins, as `serve` settles and records them and as `enroll
//! invite` and `audit verify` find them again (countersign_server::address). README.md run on a
//! system-picked port (readme.rs) is the whole positive path; here the refusals and warnings.

use crate::support::{BIN, Server, code, scratch_dir, stderr, stdout};
use countersign_audit::{AuditEvent, AuditSealer, GENESIS_HASH};
use serde_json::json;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `countersign ARGS`, waited for.
fn countersign(args: &[&str], paths: &[&Path]) -> std::process::Output {
    Command::new(BIN).args(args).args(paths).output().unwrap()
}

/// A data directory as `serve` leaves it, except for the record of the start.
fn data_dir_never_served(dir: &Path) -> std::path::PathBuf {
    let data = dir.join("data");
    let state = countersign_server::open_state(
        &data,
        countersign_server::Config::default(),
        "http://127.0.0.1:1".to_owned(),
    )
    .unwrap();
    drop(state);
    data
}

#[test]
fn serve_records_a_configured_origin_and_warns_that_it_names_another_port() {
    let dir = scratch_dir("origin-warn");
    let config = dir.join("config.toml");
    std::fs::write(&config, "origins = [\"http://localhost:1\"]\n").unwrap();
    let log = dir.join("serve.err");
    let file = std::fs::File::create(&log).unwrap();
    let server = Server::spawn_with("127.0.0.1:0", &dir.join("data"), &config, None, |command| {
        command
            .env("COUNTERSIGN_LOG", "warn")
            .stderr(Stdio::from(file));
    });
    let port = server.base.rsplit(':').next().unwrap().to_owned();
    // The record names the address listened on and the configured origin, unchanged.
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(server.data.join("serve.json")).unwrap()).unwrap();
    assert_eq!(record["listen"], format!("127.0.0.1:{port}"));
    assert_eq!(record["origins"], json!(["http://localhost:1"]));
    assert_eq!(record["public_url"], format!("http://localhost:{port}"));
    // The deadline only bounds a hang: the warning is printed before the service serves.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains("origin http://localhost:1 names this machine") {
            assert!(
                text.contains(&format!("listens on 127.0.0.1:{port}")),
                "{text}"
            );
            break;
        }
        assert!(Instant::now() < deadline, "no warning on stderr: {text}");
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn enroll_invite_refuses_to_guess_the_address_and_follows_a_config_that_names_it() {
    let dir = scratch_dir("invite-address");
    let data = data_dir_never_served(&dir);
    let args = ["enroll", "invite", "--principal", "bob", "--data-dir"];
    let out = countersign(&args, &[&data]);
    assert_eq!(code(&out), 2, "{}", stdout(&out));
    assert!(stdout(&out).is_empty(), "no link: {}", stdout(&out));
    let text = stderr(&out);
    assert!(
        text.contains("no record of a `countersign serve` start") && text.contains("--config"),
        "{text}"
    );

    let config = dir.join("config.toml");
    std::fs::write(&config, "public_url = \"https://approve.example.org\"\n").unwrap();
    let out = countersign(&args, &[&data, Path::new("--config"), &config]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stdout(&out).starts_with("https://approve.example.org/enroll#"),
        "{}",
        stdout(&out)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A log of one sealed Decision (its evidence is never looked at here).
fn log_with_a_decision(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let sealer = AuditSealer::from_seed([5; 32]);
    let body = json!({"kind": "decision", "approval_id": "apv_1", "ts": "2026-12-05T10:00:00Z",
                      "verdict": "APPROVED", "evidence": []});
    let serde_json::Value::Object(body) = body else {
        unreachable!()
    };
    let line = sealer.seal(1, &GENESIS_HASH, &AuditEvent::from_body(body));
    let log = dir.join("audit.jsonl");
    std::fs::write(&log, format!("{}\n", line.line)).unwrap();
    let key = dir.join("key.pub");
    std::fs::write(&key, sealer.public_key_b64()).unwrap();
    (log, key)
}

#[test]
fn audit_verify_of_decisions_needs_the_services_settings_and_finds_them_in_its_record() {
    let dir = scratch_dir("verify-settings");
    let (log, key) = log_with_a_decision(&dir);
    let out = countersign(&["audit", "verify"], &[&log, Path::new("--key"), &key]);
    assert_eq!(code(&out), 2, "{}", stdout(&out));
    let text = stderr(&out);
    assert!(
        text.contains("nothing says what they are") && text.contains("--data-dir"),
        "{text}"
    );

    // Beside the log, the record `serve` wrote: its origin is the one evidence is judged under.
    let mut config = countersign_server::Config::default();
    countersign_server::address::settle(&mut config, "127.0.0.1:18080".parse().unwrap());
    countersign_server::address::LastStart::new("127.0.0.1:18080".parse().unwrap(), None, &config)
        .write(&dir)
        .unwrap();
    let out = countersign(&["audit", "verify"], &[&log, Path::new("--key"), &key]);
    assert_ne!(code(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("origins http://localhost:18080 (from the address"),
        "{}",
        stderr(&out)
    );
    let _ = std::fs::remove_dir_all(&dir);
}
