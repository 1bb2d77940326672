//! `countersign gateway add`, `list` and `revoke` as an operator runs them: one line of stdout
//! with the token, only its SHA-256 in the database, the exit codes, SQLite and PostgreSQL, and a
//! running service that follows additions and revocations without a restart.

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

fn listed(data: &Path, database: Option<&str>) -> Vec<Value> {
    let out = run(&["gateway", "list", "--json"], data, database);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    serde_json::from_slice::<Value>(&out.stdout)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
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

/// The whole command surface on one database: what `add`, `list` and `revoke` print and exit.
fn add_list_revoke(data: &Path, database: Option<&str>) {
    assert!(listed(data, database).is_empty());

    let token = support::add_gateway(data, database, "billing-agent");
    assert!(token.starts_with("csg_"), "{token}");
    let secret = countersign::b64::decode(&token["csg_".len()..]).unwrap();
    assert_eq!(secret.len(), 32, "32 random bytes");
    let other = support::add_gateway(data, database, "ops.bot_2");
    assert_ne!(token, other);

    // The database holds the token's SHA-256, never the token.
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
    let stored = store.gateways().unwrap();
    let billing = stored.iter().find(|g| g.name == "billing-agent").unwrap();
    assert_eq!(billing.token_hash, <[u8; 32]>::from(Sha256::digest(&token)));
    drop(store);
    if database.is_none() {
        for file in ["countersign.db", "countersign.db-wal"] {
            let bytes = std::fs::read(data.join(file)).unwrap_or_default();
            assert!(
                !bytes.windows(token.len()).any(|w| w == token.as_bytes()),
                "the token is in {file}"
            );
        }
    }

    // Listed, by name, live; the table says the same; no token anywhere.
    let rows = listed(data, database);
    let names: Vec<&str> = rows.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["billing-agent", "ops.bot_2"]);
    assert!(rows.iter().all(|r| r["revoked_at"].is_null()));
    assert!(rows[0]["created_at"].as_str().unwrap().ends_with('Z'));
    let table = run(&["gateway", "list"], data, database);
    assert_eq!(code(&table), 0);
    let table = stdout(&table);
    assert!(table.starts_with("NAME"), "{table}");
    assert!(table.contains("billing-agent"), "{table}");
    assert!(
        !table.contains(&token) && !table.contains("csg_"),
        "{table}"
    );

    // A taken name: exit 1, nothing printed on stdout, nothing changed.
    let again = run(&["gateway", "add", "billing-agent"], data, database);
    assert_eq!(code(&again), 1, "{}", stderr(&again));
    assert!(stdout(&again).is_empty());
    // Unusable names: exit 2.
    for bad in ["", "has space", "slash/y", "ünicode", &"x".repeat(65)] {
        let out = run(&["gateway", "add", bad], data, database);
        assert_eq!(code(&out), 2, "{bad:?}: {}", stderr(&out));
        assert!(stdout(&out).is_empty());
    }
    assert_eq!(listed(data, database).len(), 2);

    // Revoked: exit 0; again: exit 1; an unknown name: exit 2.
    let out = run(&["gateway", "revoke", "billing-agent"], data, database);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let out = run(&["gateway", "revoke", "billing-agent"], data, database);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let out = run(&["gateway", "revoke", "nobody"], data, database);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    let rows = listed(data, database);
    assert!(rows[0]["revoked_at"].is_string(), "{rows:?}");
    assert!(rows[1]["revoked_at"].is_null(), "{rows:?}");
    // A revoked name stays taken.
    let out = run(&["gateway", "add", "billing-agent"], data, database);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
}

#[test]
fn add_list_and_revoke_on_sqlite() {
    let dir = support::scratch_dir("gateway");
    let data = data_dir(&dir, None);
    add_list_revoke(&data, None);
    // Not a data directory: exit 2 for each command.
    let nowhere = dir.join("nowhere");
    for args in [
        vec!["gateway", "add", "gw"],
        vec!["gateway", "list"],
        vec!["gateway", "revoke", "gw"],
    ] {
        let out = run(&args, &nowhere, None);
        assert_eq!(code(&out), 2, "{args:?}: {}", stderr(&out));
    }
    assert!(!nowhere.exists(), "nothing was created");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[ignore = "needs PostgreSQL (.ci/steps/postgres.sh runs it)"]
fn add_list_and_revoke_on_postgres() {
    let schema = ScratchSchema::required("gateway_cli").unwrap();
    let url = schema.url();
    let dir = support::scratch_dir("gateway-pg");
    let data = data_dir(&dir, Some(&url));
    add_list_revoke(&data, Some(&url));
    // The SQLite file of the data directory was not where any of it went.
    assert!(listed(&data, None).is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_service_follows_added_and_revoked_gateways() {
    let dir = support::scratch_dir("gateway-serve");
    let alice = Approver::new("alice", "alice-es256", false);
    support::write_config(&dir, &[&alice], "");
    let server = Server::start(&dir);

    // Added while it runs: accepted without a restart (Server::add_gateway waits for it).
    let token = server.add_gateway("live").await;
    let api = Api::for_gateway(&server.base, &token);
    let id = api.create("payments.transfer", 1).await;
    // Without the token, or with another gateway's, the approval is out of reach.
    assert_eq!(
        Api::new(&server.base)
            .post("/v1/approvals", None, &serde_json::json!({}))
            .await
            .0,
        401
    );
    let other = server.add_gateway("other").await;
    let (status, _) = Api::for_gateway(&server.base, &other)
        .post(
            &format!("/v1/approvals/{id}/withdraw"),
            None,
            &serde_json::json!({}),
        )
        .await;
    assert_eq!(status, 404);

    // Revoked while it runs: refused without a restart.
    let out = run(&["gateway", "revoke", "live"], &server.data, None);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    support::until_gateway(&server.base, &token, false).await;
    let (status, body) = api
        .post(
            &format!("/v1/approvals/{id}/withdraw"),
            None,
            &serde_json::json!({}),
        )
        .await;
    assert_eq!(status, 401, "{body:?}");
    assert_eq!(body["error"]["code"], "unauthenticated");
    // The other gateway is untouched.
    assert!(support::gateway_accepted(&server.base, &other).await);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
