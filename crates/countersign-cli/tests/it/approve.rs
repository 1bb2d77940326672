//! `countersign approve` end to end: the real binary against a real `countersign serve`, signing
//! with the deterministic software key behind the CTAP2 command interface
//! (`countersign_softkey::ctap2`), driven by the real CTAP2 client (`webauthn-authenticator-rs`)
//! exactly as a USB key is once its HID framing is stripped. The hidden `--soft-ctap2-key` flag
//! exists only in debug builds with the `testing` feature, so this module needs it:
//! `cargo test -p countersign-cli --features testing --test it approve::`
//! (.ci/steps/terminal.sh).

use crate::support::{self, Api, Approver, BIN, Server, code, stderr, stdout};
use countersign::b64;
use countersign_testkit::{ORIGIN, RP_ID};
use serde_json::{Value, json};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const TOOL: &str = "payments.transfer";

/// A key file for the software key `fixture`, its credential made for the test RP ID.
fn key_file(dir: &Path, fixture: &str, user_verification: bool) -> PathBuf {
    let path = dir.join(format!("{fixture}-{user_verification}.key.json"));
    std::fs::write(
        &path,
        json!({"fixture": fixture, "rp_id": RP_ID, "user_verification": user_verification})
            .to_string(),
    )
    .unwrap();
    path
}

/// How many assertions the key in `path` has made.
fn touches(path: &Path) -> u64 {
    let file: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    file["sign_count"].as_u64().unwrap_or(0)
}

/// `countersign approve ARGS --service BASE --soft-ctap2-key KEY`, with `answers` on stdin.
fn approve(base: &str, key: &Path, args: &[&str], answers: &str) -> Output {
    let mut child = Command::new(BIN)
        .arg("approve")
        .args(args)
        .args(["--service", base, "--soft-ctap2-key"])
        .arg(key)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(answers.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// A service with alice enrolled (`alice-es256`), a gateway, and one pending approval of
/// agent-7's `payments.transfer` with the params `{"n": "41"}`.
struct Setup {
    dir: PathBuf,
    config: PathBuf,
    server: Server,
    gateway: Api,
    id: String,
}

async fn setup(label: &str) -> Setup {
    let dir = support::scratch_dir(label);
    let alice = Approver::new("alice", "alice-es256", false);
    let config = support::write_config(&dir, &[&alice], "");
    let server = Server::start(&dir);
    let token = server.add_gateway("gw").await;
    let gateway = Api::for_gateway(&server.base, &token);
    let id = gateway.create(TOOL, 41).await;
    Setup {
        dir,
        config,
        server,
        gateway,
        id,
    }
}

impl Setup {
    fn registry(&self) -> String {
        self.dir.join("registry.json").display().to_string()
    }

    async fn status(&self) -> String {
        let answer = self
            .gateway
            .get(&format!("/v1/approvals/{}", self.id))
            .await;
        answer["status"].as_str().unwrap().to_owned()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_security_key_approves_from_the_terminal_and_the_record_verifies_offline() {
    let s = setup("approve-e2e").await;
    let key = key_file(&s.dir, "alice-es256", true);
    let registry = s.registry();
    let out = approve(
        &s.server.base,
        &key,
        &[&s.id, "--registry", &registry],
        "a\n",
    );
    let (text, err) = (stdout(&out), stderr(&out));
    assert_eq!(code(&out), 0, "{text}{err}");
    assert!(text.contains("as alice."), "{text}");
    // The page's content: the sentence, every field, the exact JSON.
    assert!(
        text.contains("Request from agent agent-7 for tool payments.transfer"),
        "{text}"
    );
    assert!(text.contains("\"n\": \"41\""), "{text}");
    assert!(
        text.contains(&format!("recorded approval {} as APPROVED", s.id)),
        "{text}"
    );
    assert!(text.contains("ALLOW (identity assurance AAL"), "{text}");
    assert!(err.contains("touch your security key"), "{err}");
    assert_eq!(touches(&key), 2, "one sign-in, one decision");

    // The record, as a gateway fetches it, verifies offline like any other.
    let answer = s.gateway.get(&format!("/v1/approvals/{}", s.id)).await;
    assert_eq!(answer["status"], "APPROVED", "{answer}");
    let evidence = &answer["approver_evidence"][0];
    let client_data = b64::decode(evidence["client_data_json"].as_str().unwrap()).unwrap();
    let client_data = String::from_utf8(client_data).unwrap();
    assert!(
        client_data.starts_with("{\"type\":\"webauthn.get\",\"challenge\":\""),
        "{client_data}"
    );
    assert!(
        client_data.ends_with(&format!("\"origin\":\"{ORIGIN}\",\"crossOrigin\":false}}")),
        "the origin as configured, no trailing slash: {client_data}"
    );
    let request = s.dir.join("request.json");
    std::fs::write(
        &request,
        json!({"agent_id": "agent-7", "tool_name": TOOL, "params": {"n": "41"}}).to_string(),
    )
    .unwrap();
    let result = s.dir.join("answer.json");
    std::fs::write(&result, answer.to_string()).unwrap();
    let verified = Command::new(BIN)
        .arg("verify")
        .arg("--action")
        .arg(&request)
        .arg("--result")
        .arg(&result)
        .args(["--registry", &registry])
        .arg("--config")
        .arg(&s.config)
        .output()
        .unwrap();
    assert_eq!(code(&verified), 0, "{}", stderr(&verified));
    let verdict: Value = serde_json::from_str(&stdout(&verified)).unwrap();
    assert_eq!(verdict["effective"], "ALLOW", "{verdict}");
    assert_eq!(verdict["approvers"][0]["principal"], "alice", "{verdict}");
    assert_eq!(
        verdict["identity_assurance"]["basis"]["user_verified"], true,
        "{verdict}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_id_it_lists_what_waits_and_a_refusal_is_signed_too() {
    let s = setup("approve-list").await;
    let second = s.gateway.create(TOOL, 42).await;
    let key = key_file(&s.dir, "alice-es256", true);
    let registry = s.registry();
    // Picked by its id (a number picks by position in the list).
    let out = approve(
        &s.server.base,
        &key,
        &["--registry", &registry],
        &format!("{second}\nr\n"),
    );
    let text = stdout(&out);
    assert_eq!(code(&out), 0, "{text}{}", stderr(&out));
    assert!(text.contains(&s.id) && text.contains(&second), "{text}");
    assert!(
        text.contains("APPROVAL") && text.contains("SEVERITY"),
        "{text}"
    );
    assert!(
        text.contains(&format!("recorded approval {second} as DENIED")),
        "{text}"
    );
    assert!(text.contains("your signed refusal"), "{text}");
    assert_eq!(s.status().await, "PENDING", "the other one is untouched");

    // Skip signs nothing after the sign-in.
    let out = approve(&s.server.base, &key, &[&s.id], "s\n");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stdout(&out).contains("Skipped"), "{}", stdout(&out));
    assert_eq!(touches(&key), 3, "two sign-ins and one refusal");
    assert_eq!(s.status().await, "PENDING");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_origin_the_service_does_not_accept_is_refused_before_the_key_signs() {
    let s = setup("approve-origin").await;
    let key = key_file(&s.dir, "alice-es256", true);
    let out = approve(
        &s.server.base,
        &key,
        &[&s.id, "--origin", "https://evil.example"],
        "a\n",
    );
    assert_eq!(code(&out), 2, "{}", stdout(&out));
    let err = stderr(&out);
    assert!(
        err.contains("origin https://evil.example is not one the service accepts"),
        "{err}"
    );
    assert!(err.contains(ORIGIN), "names the accepted ones: {err}");
    assert!(!err.contains("touch"), "{err}");
    assert_eq!(touches(&key), 0);
    assert_eq!(s.status().await, "PENDING");
}

/// Run `approve` for the setup's approval with the key `fixture`, expecting exit 2 and `says` on
/// stderr, and the approval still pending: how many assertions the key made.
async fn refused(label: &str, fixture: &str, user_verification: bool, says: &[&str]) -> u64 {
    let s = setup(label).await;
    let key = key_file(&s.dir, fixture, user_verification);
    let out = approve(&s.server.base, &key, &[&s.id], "a\n");
    assert_eq!(code(&out), 2, "{}", stdout(&out));
    for text in says {
        assert!(stderr(&out).contains(text), "{}", stderr(&out));
    }
    assert_eq!(s.status().await, "PENDING");
    touches(&key)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_without_user_verification_is_refused_before_it_signs() {
    let says = ["cannot verify you", "set a PIN"];
    assert_eq!(
        refused("approve-no-uv", "alice-es256", false, &says).await,
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_the_service_does_not_know_is_told_so() {
    let says = ["HTTP 401: credential is not enrolled"];
    assert_eq!(
        refused("approve-unknown", "bob-es256", true, &says).await,
        1
    );
}

/// A service in the middle that shows other params than it has signed (`"41"` becomes `"42"`
/// in every answer): the op_hash computed from what is shown differs from the service's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_that_shows_other_fields_than_it_hashes_is_refused_before_signing() {
    let s = setup("approve-liar").await;
    let liar = lying_proxy(&s.server.base).await;
    let key = key_file(&s.dir, "alice-es256", true);
    let out = approve(&liar, &key, &[&s.id], "a\n");
    assert_eq!(code(&out), 2, "{}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("\"n\": \"42\""), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(
        err.contains("op_hash for APPROVED") && err.contains("nothing was signed"),
        "{err}"
    );
    assert_eq!(touches(&key), 1, "the sign-in only");
    assert_eq!(s.status().await, "PENDING");
}

/// Forward every request to `upstream`, answering with its status and body, `"n":"41"`
/// replaced by `"n":"42"`. Returns the proxy's base URL.
async fn lying_proxy(upstream: &str) -> String {
    use axum::body::Bytes;
    use axum::http::{HeaderMap, Method, StatusCode, Uri};
    let upstream = upstream.to_owned();
    let http = reqwest::Client::new();
    let app = axum::Router::new().fallback(
        move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
            let (http, upstream) = (http.clone(), upstream.clone());
            async move {
                let path = uri.path_and_query().map_or("/", |p| p.as_str());
                let method = reqwest::Method::from_bytes(method.as_str().as_bytes()).unwrap();
                let mut request = http.request(method, format!("{upstream}{path}")).body(body);
                for name in ["authorization", "content-type"] {
                    if let Some(v) = headers.get(name) {
                        request = request.header(name, v.to_str().unwrap());
                    }
                }
                let response = request.send().await.unwrap();
                let status = StatusCode::from_u16(response.status().as_u16()).unwrap();
                let text = response.text().await.unwrap();
                (
                    status,
                    [("content-type", "application/json")],
                    text.replace("\"n\":\"41\"", "\"n\":\"42\""),
                )
            }
        },
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{address}")
}
