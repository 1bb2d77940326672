//! `countersign credential list` and `credential revoke` against a data directory, as an
//! operator runs them: exit codes, what `registry export` then shows, and the audit log a
//! restarted service mirrors (with the revocation line, valid, the registry file not undoing it).

use crate::support;

use countersign::b64;
use countersign_softkey::{Alg, SoftKey};
use serde_json::Value;
use std::path::Path;
use support::{Api, Approver, Server, audit_verify, code, run_with_data_dir as run, stderr};

/// Open the data directory as `countersign serve` does at start (registry import, audit file
/// caught up with the database), then close it.
fn start_service(data: &Path, registry: &Path) {
    let config = countersign_server::Config {
        registry: Some(registry.to_owned()),
        ..countersign_server::Config::default()
    };
    let state =
        countersign_server::open_state(data, config, "http://127.0.0.1:1".to_owned()).unwrap();
    drop(state);
}

fn listed(data: &Path) -> Vec<Value> {
    let out = run(&["credential", "list", "--json"], data);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    serde_json::from_slice::<Value>(&out.stdout)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

#[test]
fn revoke_exit_codes_export_and_the_audit_log() {
    let dir = support::scratch_dir("credential");
    let data = dir.join("data");
    let (alice, bob) = (
        SoftKey::from_seed(Alg::Es256, [31; 32]).unwrap(),
        SoftKey::from_seed(Alg::EdDsa, [32; 32]).unwrap(),
    );
    let registry = support::write_registry(&dir, &[(&alice, "alice"), (&bob, "bob")]);
    start_service(&data, &registry);
    let alice_id = b64::encode(alice.credential_id());

    // The list shows both, active, with their algorithms.
    let rows = listed(&data);
    assert_eq!(rows.len(), 2);
    let alice_row = rows.iter().find(|r| r["principal"] == "alice").unwrap();
    assert_eq!(alice_row["credential_id"], alice_id.as_str());
    assert_eq!(alice_row["algorithm"], "ES256");
    assert_eq!(alice_row["revoked"], false);
    let bob_row = rows.iter().find(|r| r["principal"] == "bob").unwrap();
    assert_eq!(bob_row["algorithm"], "EdDSA");
    let table = run(&["credential", "list"], &data);
    assert_eq!(code(&table), 0);
    let table = String::from_utf8(table.stdout).unwrap();
    assert!(table.starts_with("PRINCIPAL"), "{table}");
    assert!(table.contains(&alice_id), "{table}");

    // Unusable input: exit 2, nothing changed.
    for args in [
        vec!["credential", "revoke", "not base64!", "--reason", "x"],
        vec!["credential", "revoke", &alice_id, "--reason", "  "],
        vec!["credential", "revoke", "AAAA", "--reason", "unknown id"],
        vec!["credential", "revoke", &alice_id],
    ] {
        let out = run(&args, &data);
        assert_eq!(code(&out), 2, "{args:?}: {}", stderr(&out));
    }
    let out = run(
        &["credential", "revoke", &alice_id, "--reason", "x"],
        &dir.join("nowhere"),
    );
    assert_eq!(code(&out), 2, "not a data directory");
    assert!(listed(&data).iter().all(|r| r["revoked"] == false));

    // Revoked: exit 0; again: exit 1.
    let out = run(
        &[
            "credential",
            "revoke",
            &alice_id,
            "--reason",
            "YubiKey lost",
        ],
        &data,
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let out = run(
        &["credential", "revoke", &alice_id, "--reason", "again"],
        &data,
    );
    assert_eq!(code(&out), 1, "{}", stderr(&out));

    // The export (what verifiers trust) says revoked; bob is untouched.
    let out = run(&["registry", "export"], &data);
    assert_eq!(code(&out), 0);
    let exported: countersign::RegistryDocument = serde_json::from_slice(&out.stdout).unwrap();
    for c in &exported.credentials {
        assert_eq!(c.revoked, c.principal == "alice", "{c:?}");
    }

    // The service starts again with the same registry file: the revocation stands, no line is
    // added by the import, and the audit file (now caught up) verifies with the story in it.
    start_service(&data, &registry);
    let rows = listed(&data);
    let alice_row = rows.iter().find(|r| r["principal"] == "alice").unwrap();
    assert_eq!(alice_row["revoked"], true);
    let log = std::fs::read_to_string(data.join("audit.jsonl")).unwrap();
    let kinds: Vec<String> = log
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["kind"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(kinds, ["enrollment", "enrollment", "revocation"]);
    let revocation: Value = serde_json::from_str(log.lines().last().unwrap()).unwrap();
    assert_eq!(revocation["credential_id"], alice_id.as_str());
    assert_eq!(revocation["principal"], "alice");
    assert_eq!(revocation["reason"], "YubiKey lost");
    let verified = audit_verify(&data.join("audit.jsonl"), &data.join("service-key.pub"));
    assert_eq!(code(&verified), 0, "{}", support::stdout(&verified));
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoking_while_the_service_runs_and_after_a_restart() {
    let dir = support::scratch_dir("credential");
    let data = dir.join("data");
    // Its first login signs counter 1, as a fresh authenticator does.
    let alice = Approver::new("alice", "alice-es256", true);
    support::write_config(&dir, &[&alice], "");

    let server = Server::start(&dir);
    let (status, body) = Api::new(&server.base).try_login(&alice).await;
    assert_eq!(status, 200, "{body:?}");
    // The CLI writes the database the running service holds open.
    let id = b64::encode(alice.key.credential_id());
    let out = run(&["credential", "revoke", &id, "--reason", "stolen"], &data);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    drop(server);

    // After a restart (same registry file, which still lists the key unrevoked) the key is
    // refused at once, and the audit file verifies with the revocation in it.
    let server = Server::start(&dir);
    let (status, body) = Api::new(&server.base).try_login(&alice).await;
    assert_eq!(status, 401, "{body:?}");
    assert_eq!(body["error"]["reason_code"], "credential_revoked");
    drop(server);
    let log = std::fs::read_to_string(data.join("audit.jsonl")).unwrap();
    assert_eq!(log.matches("\"kind\":\"revocation\"").count(), 1, "{log}");
    assert_eq!(log.matches("\"kind\":\"enrollment\"").count(), 1, "{log}");
    let verified = audit_verify(&data.join("audit.jsonl"), &data.join("service-key.pub"));
    assert_eq!(code(&verified), 0);
    let _ = std::fs::remove_dir_all(&dir);
}
