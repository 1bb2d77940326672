//! `countersign serve` as a process: SIGKILL at a random point of a burst of verdicts, restart,
//! and check that nothing committed was lost, nothing was decided twice, overdue requests expired,
//! and the audit log verifies (and a tampered copy does not). Lives in the CLI crate because only
//! here does Cargo hand a test the path of the real binary (`CARGO_BIN_EXE_countersign`).

use countersign::{Decision, b64};
use countersign_softkey::{AssertionRequest, SoftKey};
use countersign_testkit::{ORIGIN, RP_ID};
use serde_json::{Value, json};
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

const BIN: &str = env!("CARGO_BIN_EXE_countersign");

struct Server {
    child: Child,
    base: String,
}

impl Server {
    fn start(dir: &Path) -> Self {
        let mut child = Command::new(BIN)
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir.join("data"))
            .arg("--config")
            .arg(dir.join("config.toml"))
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        let base = loop {
            let line = lines.next().expect("server printed its address").unwrap();
            if let Some(addr) = line.strip_prefix("countersign: listening on ") {
                break addr.trim().to_owned();
            }
        };
        // Keep draining stdout so the server never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Self { child, base }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Approver {
    principal: &'static str,
    key: SoftKey,
    /// `None`: the authenticator reports counter 0 (no counter), so assertions signed in one
    /// order and submitted concurrently in another are all legal.
    counter: Option<AtomicU32>,
}

impl Approver {
    fn new(principal: &'static str, fixture: &str, counting: bool) -> Self {
        Self {
            principal,
            key: countersign_testkit::key(fixture),
            counter: counting.then(|| AtomicU32::new(0)),
        }
    }
    fn sign(&self, challenge: Vec<u8>) -> Value {
        let request = AssertionRequest {
            sign_count: self
                .counter
                .as_ref()
                .map_or(0, |c| c.fetch_add(1, Ordering::SeqCst) + 1),
            ..AssertionRequest::new(RP_ID, ORIGIN, challenge)
        };
        let r = self.key.assert(&request).unwrap();
        json!({
            "credential_id": b64::encode(&r.credential_id),
            "client_data_json": b64::encode(&r.client_data_json),
            "authenticator_data": b64::encode(&r.authenticator_data),
            "signature": b64::encode(&r.signature),
        })
    }
}

struct Api {
    http: reqwest::Client,
    base: String,
}

impl Api {
    async fn post(&self, path: &str, token: Option<&str>, body: &Value) -> (u16, Value) {
        let mut req = self.http.post(format!("{}{path}", self.base)).json(body);
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let resp = req.send().await.unwrap();
        (resp.status().as_u16(), resp.json().await.unwrap())
    }
    async fn get(&self, path: &str) -> Value {
        let resp = self
            .http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap();
        resp.json().await.unwrap()
    }
    async fn create(&self, tool: &str, n: usize) -> String {
        let (status, body) = self
            .post(
                "/v1/approvals",
                None,
                &json!({"agent_id": "agent-7", "tool_name": tool, "params": {"n": n.to_string()}}),
            )
            .await;
        assert_eq!(status, 200, "{body:?}");
        assert_eq!(body["status"], "PENDING");
        body["approval_id"].as_str().unwrap().to_owned()
    }
    async fn login(&self, who: &Approver) -> String {
        let (_, c) = self
            .post("/v1/approver/login/challenge", None, &json!({}))
            .await;
        let challenge = b64::decode(c["challenge"].as_str().unwrap()).unwrap();
        let (status, body) = self
            .post("/v1/approver/login", None, &who.sign(challenge))
            .await;
        assert_eq!(status, 200, "{body:?}");
        body["token"].as_str().unwrap().to_owned()
    }
    async fn prepare(&self, who: &Approver, token: &str, id: &str, d: Decision) -> Value {
        let path = format!("/v1/approver/approvals/{id}/challenge");
        let (status, c) = self.post(&path, Some(token), &json!({"decision": d})).await;
        assert_eq!(status, 200, "{c:?}");
        who.sign(b64::decode(c["challenge"].as_str().unwrap()).unwrap())
    }
}

fn scratch_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "countersign-serve-test-{}-{}",
        std::process::id(),
        time::OffsetDateTime::now_utc().unix_timestamp_nanos()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn audit_verify(file: &Path, key: &Path) -> i32 {
    Command::new(BIN)
        .args(["audit", "verify"])
        .arg(file)
        .arg("--key")
        .arg(key)
        .stdout(Stdio::null())
        .status()
        .unwrap()
        .code()
        .unwrap_or(-1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_verdicts_loses_nothing_and_doubles_nothing() {
    let dir = scratch_dir();
    let alice = Approver::new("alice", "alice-es256", false);
    let bob = Approver::new("bob", "bob-es256", true);
    let registry = countersign_testkit::registry([
        countersign_testkit::enroll(&alice.key, alice.principal),
        countersign_testkit::enroll(&bob.key, bob.principal),
    ]);
    std::fs::write(
        dir.join("registry.json"),
        serde_json::to_vec(&registry).unwrap(),
    )
    .unwrap();
    std::fs::write(
        dir.join("config.toml"),
        format!(
            "rp_id = \"{RP_ID}\"\norigins = [\"{ORIGIN}\"]\nregistry = \"{}\"\n\
             [[tools]]\nname = \"quick\"\napproval_seconds = 1\n",
            dir.join("registry.json").display()
        ),
    )
    .unwrap();

    let mut server = Server::start(&dir);
    let api = Api {
        http: reqwest::Client::new(),
        base: server.base.clone(),
    };
    let token = api.login(&alice).await;
    let survivor = api.create("payments.transfer", 1000).await;
    let quick = api.create("quick", 1001).await;
    let quick_expires = api.get(&format!("/v1/approvals/{quick}")).await["expires_at"]
        .as_str()
        .unwrap()
        .to_owned();

    // A burst of verdicts, with the process killed partway through.
    let mut ids = Vec::new();
    let mut prepared = Vec::new();
    for n in 0..24 {
        let id = api.create("payments.transfer", n).await;
        let decision = if n % 3 == 0 {
            Decision::Denied
        } else {
            Decision::Approved
        };
        prepared.push(api.prepare(&alice, &token, &id, decision).await);
        ids.push(id);
    }
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    for (id, body) in ids.iter().cloned().zip(prepared) {
        let (http, base, token, tx) = (
            api.http.clone(),
            api.base.clone(),
            token.clone(),
            tx.clone(),
        );
        tokio::spawn(async move {
            let url = format!("{base}/v1/approver/approvals/{id}/decision");
            let answer = match http.post(url).bearer_auth(token).json(&body).send().await {
                Ok(r) if r.status().as_u16() == 200 => r.json::<Value>().await.ok(),
                _ => None,
            };
            let _ = tx.send((id, answer));
        });
    }
    drop(tx);
    let mut acknowledged: Vec<(String, Value)> = Vec::new();
    while let Some((id, answer)) = rx.recv().await {
        if let Some(a) = answer {
            acknowledged.push((id, a));
        }
        if acknowledged.len() == 8 {
            server.child.kill().unwrap(); // SIGKILL
            server.child.wait().unwrap();
        }
    }
    assert!(acknowledged.len() >= 8);

    // Wait (by the clock, not a fixed sleep) until the quick request is overdue.
    let overdue = time::OffsetDateTime::parse(
        &quick_expires,
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap();
    while time::OffsetDateTime::now_utc() <= overdue {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }

    let mut server = Server::start(&dir);
    let api = Api {
        http: reqwest::Client::new(),
        base: server.base.clone(),
    };
    // Every acknowledged verdict survived, unchanged.
    for (id, answer) in &acknowledged {
        let now = api.get(&format!("/v1/approvals/{id}")).await;
        assert_eq!(now["status"], answer["status"], "{id}");
        assert_eq!(
            now["approver_evidence"], answer["approver_evidence"],
            "{id}"
        );
    }
    // Unacknowledged ones either committed before the kill or are still pending.
    for id in &ids {
        let s = api.get(&format!("/v1/approvals/{id}")).await;
        assert!(matches!(
            s["status"].as_str(),
            Some("PENDING" | "APPROVED" | "DENIED")
        ));
    }
    // The overdue request expired while the process was down; it can never be approved now.
    let q = api.get(&format!("/v1/approvals/{quick}")).await;
    assert_eq!(q["status"], "DENIED");
    assert_eq!(q["reason_code"], "expired_unanswered");
    // A pending request survived and can still be decided, by another approver.
    let bob_token = api.login(&bob).await;
    let body = api
        .prepare(&bob, &bob_token, &survivor, Decision::Approved)
        .await;
    let (status, decided) = api
        .post(
            &format!("/v1/approver/approvals/{survivor}/decision"),
            Some(&bob_token),
            &body,
        )
        .await;
    assert_eq!(status, 200, "{decided:?}");

    // Graceful shutdown on SIGTERM.
    let pid = server.child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    assert!(server.child.wait().unwrap().success());

    // The audit log: complete, chained, signed; no approval decided twice. A tampered copy fails.
    let data = dir.join("data");
    let log = data.join("audit.jsonl");
    let key = data.join("service-key.pub");
    assert_eq!(audit_verify(&log, &key), 0);
    let text = std::fs::read_to_string(&log).unwrap();
    let decisions = text
        .lines()
        .filter(|l| l.contains("\"kind\":\"decision\""))
        .count();
    let settled = text
        .lines()
        .filter(|l| l.contains("\"kind\":\"settlement\""))
        .count();
    assert!(decisions > acknowledged.len());
    assert!(settled >= 1);
    let tampered = dir.join("tampered.jsonl");
    std::fs::write(&tampered, text.replacen("\"alice\"", "\"mallory\"", 1)).unwrap();
    assert_eq!(audit_verify(&tampered, &key), 1);
    let mut lines: Vec<&str> = text.lines().collect();
    lines.remove(2);
    std::fs::write(&tampered, lines.join("\n") + "\n").unwrap();
    assert_eq!(audit_verify(&tampered, &key), 1);
    assert_eq!(audit_verify(&log, Path::new("not-a-key")), 2);

    let export = Command::new(BIN)
        .args(["registry", "export", "--data-dir"])
        .arg(&data)
        .output()
        .unwrap();
    assert!(export.status.success());
    let doc: Value = serde_json::from_slice(&export.stdout).unwrap();
    assert_eq!(doc["credentials"].as_array().map(Vec::len), Some(2));
    let _ = std::fs::remove_dir_all(&dir);
}
