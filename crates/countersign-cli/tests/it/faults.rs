//! Faults injected into a running service, over real HTTP on loopback: the disk fills, the
//! database turns read-only, PostgreSQL connections are killed (or the server restarts) in the
//! middle of settlements, the webhook receiver never answers, the wall clock jumps, and
//! thousands of idle or slow connections are held open.
//!
//! Each test keeps a ledger of what the service acknowledged (200) and checks at the end that
//! every acknowledged request, verdict and grant is in the audit chain exactly once, that nothing
//! was decided or granted twice, and that `countersign audit verify` accepts the chain.
//!
//! The PostgreSQL tests run in a database of their own (created and dropped), so they may set
//! database-wide options and terminate that database's connections without touching anyone
//! else's. They are ignored unless asked for (`--include-ignored`), as is the disk-full test,
//! which mounts a small tmpfs and so needs root (CAP_SYS_ADMIN); the test runner lists each with
//! its reason. The full PostgreSQL restart also wants `COUNTERSIGN_FAULT_PG_RESTART=1` and runs
//! alone (`.ci/steps/postgres.sh` runs it after the others, by itself): it cuts every session on
//! the server, the other tests' included.

use crate::support::{self, Approver, Http, Server};
use countersign::{Decision, b64};
use countersign_audit::AuditSealer;
use countersign_server::store::{
    PostgresStore, ScratchSchema, SqliteStore, Store as _, TEST_DATABASE_DEFAULT, TEST_DATABASE_ENV,
};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

const TOOL: &str = "payments.transfer";

/// A bound on waiting for something that must happen; it asserts nothing about speed.
const PATIENCE: Duration = Duration::from_secs(90);

// ---------------------------------------------------------------------------------------------
// What the service acknowledged, and the check of the chain against it.

/// What clients were told succeeded.
#[derive(Default, Debug)]
struct Ledger {
    /// Approvals whose creation was answered 200.
    created: BTreeSet<String>,
    /// approval id -> the acknowledged verdict.
    verdicts: BTreeMap<String, String>,
    /// approval id -> the acknowledged grant's `collected_at`.
    grants: BTreeMap<String, String>,
}

impl Ledger {
    /// Every acknowledged fact is in `chain` exactly once, and nothing is decided or granted
    /// twice, acknowledged or not.
    fn check(&self, chain: &[Value]) {
        let of = |kind: &str, id: &str| -> Vec<&Value> {
            chain
                .iter()
                .filter(|l| l["kind"] == kind && l["approval_id"] == id)
                .collect()
        };
        for id in &self.created {
            assert_eq!(of("request", id).len(), 1, "request line of {id}");
        }
        for (id, verdict) in &self.verdicts {
            let lines = of("decision", id);
            assert_eq!(lines.len(), 1, "decision line of {id}");
            assert_eq!(lines[0]["verdict"], verdict.as_str(), "{id}");
        }
        for (id, at) in &self.grants {
            let lines = of("grant", id);
            assert_eq!(lines.len(), 1, "grant line of {id}");
            assert_eq!(lines[0]["ts"], at.as_str(), "{id}");
        }
        let (mut requested, mut decided, mut granted) =
            (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
        for line in chain {
            let id = line["approval_id"].as_str().unwrap_or_default().to_owned();
            match line["kind"].as_str() {
                Some("request") => assert!(requested.insert(id), "requested twice"),
                Some("decision") => assert!(decided.insert(id), "decided twice"),
                Some("grant") => assert!(granted.insert(id), "granted twice"),
                _ => {}
            }
        }
    }
}

/// `countersign audit verify` on `lines` written to `DIR/NAME`, under the data directory's key.
fn assert_verifies(dir: &Path, name: &str, lines: &[String], data: &Path) {
    let file = dir.join(name);
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let out = support::audit_verify(&file, &data.join("service-key.pub"));
    assert_eq!(support::code(&out), 0, "{}", support::stdout(&out));
}

/// The audit file of a stopped service, as lines.
fn file_lines(data: &Path) -> Vec<String> {
    std::fs::read_to_string(data.join("audit.jsonl"))
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn parsed(lines: &[String]) -> Vec<Value> {
    lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A 503 answer carries the documented JSON error and a `Retry-After`.
fn assert_unavailable(status: u16, body: &Value) {
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "store_unavailable", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty())
    );
}

// ---------------------------------------------------------------------------------------------
// A client that records what it was told.

/// A gateway and an approver talking to one service, recording acknowledgements.
#[derive(Clone)]
struct Client {
    http: Http,
    gateway: String,
    raw: reqwest::Client,
    base: String,
    token: String,
    alice: Arc<Approver>,
}

/// One HTTP answer: status, body, `Retry-After`.
struct Answer {
    status: u16,
    body: Value,
    retry_after: Option<String>,
}

impl Client {
    async fn new(base: &str, gateway: &str, alice: Arc<Approver>) -> Self {
        let http = Http(
            support::gateway_client(gateway)
                .timeout(Duration::from_secs(60))
                .build()
                .unwrap(),
        );
        let token = http.login(base, &alice).await;
        Self {
            raw: http.0.clone(),
            http,
            gateway: gateway.to_owned(),
            base: base.to_owned(),
            token,
            alice,
        }
    }

    async fn call(&self, path: &str, bearer: Option<&str>, body: &Value) -> Option<Answer> {
        let mut req = self.raw.post(format!("{}{path}", self.base)).json(body);
        if let Some(t) = bearer {
            req = req.bearer_auth(t);
        }
        let resp = req.send().await.ok()?;
        let status = resp.status().as_u16();
        let retry_after = resp
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let body = resp.json().await.ok()?;
        Some(Answer {
            status,
            body,
            retry_after,
        })
    }

    async fn create(&self, n: u64) -> Answer {
        let body =
            json!({"agent_id": "agent-7", "tool_name": TOOL, "params": {"n": n.to_string()}});
        self.call("/v1/approvals", None, &body).await.unwrap()
    }

    /// A decision challenge for `id`, signed: the body to submit (None unless 200).
    async fn prepare(&self, id: &str, d: Decision) -> Result<Value, Answer> {
        let path = format!("/v1/approver/approvals/{id}/challenge");
        let a = self
            .call(&path, Some(&self.token), &json!({"decision": d}))
            .await
            .unwrap();
        if a.status != 200 {
            return Err(a);
        }
        let challenge = b64::decode(a.body["challenge"].as_str().unwrap()).unwrap();
        Ok(self.alice.sign(challenge))
    }

    async fn decide(&self, id: &str, body: &Value) -> Answer {
        let path = format!("/v1/approver/approvals/{id}/decision");
        self.call(&path, Some(&self.token), body).await.unwrap()
    }

    async fn grant(&self, id: &str, n: u64) -> Answer {
        let path = format!("/v1/approvals/{id}/grant");
        let body = json!({"fingerprint": support::fingerprint(TOOL, n)});
        self.call(&path, None, &body).await.unwrap()
    }

    async fn status(&self, id: &str) -> Value {
        self.http
            .get(format!("{}/v1/approvals/{id}", self.base))
            .await
            .unwrap()
    }

    /// create → approve → grant, each step expected to succeed; recorded in `ledger`.
    async fn lifecycle(&self, n: u64, ledger: &mut Ledger) -> String {
        let a = self.create(n).await;
        assert_eq!(a.status, 200, "{}", a.body);
        let id = a.body["approval_id"].as_str().unwrap().to_owned();
        ledger.created.insert(id.clone());
        let body = self
            .prepare(&id, Decision::Approved)
            .await
            .unwrap_or_else(|a| panic!("challenge: {} {}", a.status, a.body));
        let a = self.decide(&id, &body).await;
        assert_eq!(a.status, 200, "{}", a.body);
        ledger.verdicts.insert(id.clone(), "APPROVED".into());
        let a = self.grant(&id, n).await;
        assert_eq!(a.status, 200, "{}", a.body);
        let at = a.body["collected_at"].as_str().unwrap().to_owned();
        ledger.grants.insert(id.clone(), at);
        id
    }
}

// ---------------------------------------------------------------------------------------------
// 1. Storage full / read-only.

/// A small tmpfs mounted at a path, unmounted on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    /// Mount `size` (e.g. `8m`) at `path`, or say why not.
    fn mount(path: &Path, size: &str) -> Result<Self, String> {
        std::fs::create_dir_all(path).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(path)
            .output()
            .map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(Self(path.to_owned()))
        } else {
            Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Write zeros to `path` until the file system is full.
fn fill(path: &Path) {
    use std::io::Write as _;
    let mut f = std::fs::File::create(path).unwrap();
    let chunk = vec![0u8; 16 * 1024];
    while f.write_all(&chunk).is_ok() {}
    // Whatever a short write left: one byte at a time until nothing more fits.
    while f.write_all(&[0]).is_ok() {}
    let _ = f.sync_all();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "mounts a tmpfs, which needs root (.ci/steps/postgres.sh runs it)"]
async fn a_full_disk_answers_503_and_the_service_recovers_when_space_returns() {
    let dir = support::scratch_dir("faults-full");
    let data = dir.join("data");
    let mount = Tmpfs::mount(&data, "6m")
        .unwrap_or_else(|why| panic!("mounting a tmpfs (needs root): {why}"));
    let alice = Arc::new(Approver::new("alice", "alice-es256", false));
    support::write_config(&dir, &[&alice], "");
    let mut server = Server::start(&dir);
    let gateway = server.add_gateway("faults").await;
    let c = Client::new(&server.base, &gateway, alice.clone()).await;
    let mut ledger = Ledger::default();
    for n in 0..3 {
        c.lifecycle(n, &mut ledger).await;
    }
    // One approval left pending across the fault, decided after it.
    let a = c.create(100).await;
    assert_eq!(a.status, 200);
    let pending = a.body["approval_id"].as_str().unwrap().to_owned();
    ledger.created.insert(pending.clone());
    let signed = c.prepare(&pending, Decision::Approved).await.ok().unwrap();

    // The disk fills. Commits go on while the write-ahead log has room it already owns; then
    // they fail. Every create until then is acknowledged and recorded.
    fill(&data.join("filler"));
    let mut refused = None;
    let mut n = 1000;
    while refused.is_none() {
        assert!(n < 20_000, "the service never ran out of space");
        let a = c.create(n).await;
        match a.status {
            200 => {
                ledger
                    .created
                    .insert(a.body["approval_id"].as_str().unwrap().to_owned());
            }
            _ => refused = Some(a),
        }
        n += 1;
    }
    let refused = refused.unwrap();
    assert_unavailable(refused.status, &refused.body);
    assert_eq!(refused.retry_after.as_deref(), Some("1"));
    // The process is up and says so; writes keep being refused cleanly.
    let health = reqwest::get(format!("{}/healthz", server.base))
        .await
        .unwrap();
    assert_eq!(health.status().as_u16(), 200);
    let a = c.decide(&pending, &signed).await;
    assert_unavailable(a.status, &a.body);
    assert_eq!(c.status(&pending).await["status"], "PENDING");

    // Space returns: the same calls succeed, without a restart (a gateway retries after the
    // Retry-After; here, until the first success).
    std::fs::remove_file(data.join("filler")).unwrap();
    let deadline = Instant::now() + PATIENCE;
    let a = loop {
        let a = c.decide(&pending, &signed).await;
        if a.status != 503 {
            break a;
        }
        assert!(Instant::now() < deadline, "never recovered: {}", a.body);
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(a.status, 200, "{}", a.body);
    ledger.verdicts.insert(pending.clone(), "APPROVED".into());
    let a = c.grant(&pending, 100).await;
    assert_eq!(a.status, 200, "{}", a.body);
    ledger
        .grants
        .insert(pending, a.body["collected_at"].as_str().unwrap().to_owned());
    for n in 3..6 {
        c.lifecycle(n, &mut ledger).await;
    }

    // The audit file is the database's chain, line for line, and verifies.
    server.sigterm();
    let file = file_lines(&data);
    let sealer = AuditSealer::load_or_create(&data.join("service-key")).unwrap();
    let store = SqliteStore::open(
        &data.join("countersign.db"),
        sealer,
        countersign_server::config::Durability::Normal,
    )
    .unwrap();
    store.seal_audit().unwrap();
    let chain: Vec<String> = store
        .audit_lines_after(0, 1_000_000)
        .unwrap()
        .into_iter()
        .map(|(_, l)| l)
        .collect();
    drop(store);
    assert_eq!(file, chain, "the audit file mirrors the database");
    ledger.check(&parsed(&chain));
    assert_verifies(&dir, "chain.jsonl", &chain, &data);
    drop(mount);
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL: a database of each test's own.

/// A database created for one test and dropped (with its connections) afterwards.
struct OwnDatabase {
    admin: String,
    name: String,
}

/// Run `sql` on a connection of its own (on a thread: the caller is inside a runtime).
fn admin(url: &str, sql: &str) {
    let (url, sql) = (url.to_owned(), sql.to_owned());
    std::thread::spawn(move || {
        let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        client.batch_execute(&sql).unwrap();
    })
    .join()
    .unwrap();
}

impl OwnDatabase {
    /// A fresh database (the test needs PostgreSQL: see [`ScratchSchema::required`]).
    fn create(label: &str) -> Self {
        // Fails, saying where it looked, when no PostgreSQL answers.
        drop(ScratchSchema::required(label).unwrap());
        let admin_url = std::env::var(TEST_DATABASE_ENV)
            .ok()
            .filter(|u| !u.is_empty())
            .unwrap_or_else(|| TEST_DATABASE_DEFAULT.to_owned());
        let mut random = [0u8; 6];
        getrandom::fill(&mut random).unwrap();
        let name = format!(
            "cs_faults_{}",
            random
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        );
        admin(&admin_url, &format!("CREATE DATABASE {name}"));
        Self {
            admin: admin_url,
            name,
        }
    }

    /// The URL of this database (the admin URL with its database name replaced).
    fn url(&self) -> String {
        let (head, query) = match self.admin.split_once('?') {
            Some((h, q)) => (h, format!("?{q}")),
            None => (self.admin.as_str(), String::new()),
        };
        let base = head.rsplit_once('/').map_or(head, |(b, _)| b);
        format!("{base}/{}{query}", self.name)
    }

    /// Terminate every connection to this database (only this one's): how many there were.
    fn kill_connections(&self) -> i64 {
        let (url, name) = (self.admin.clone(), self.name.clone());
        std::thread::spawn(move || {
            let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
            let row = client
                .query_one(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                     WHERE datname = $1 AND pid <> pg_backend_pid()",
                    &[&name],
                )
                .unwrap();
            row.get::<_, i64>(0)
        })
        .join()
        .unwrap()
    }

    fn read_only(&self, on: bool) {
        let sql = if on {
            format!(
                "ALTER DATABASE {} SET default_transaction_read_only = on",
                self.name
            )
        } else {
            format!(
                "ALTER DATABASE {} RESET default_transaction_read_only",
                self.name
            )
        };
        admin(&self.admin, &sql);
    }

    /// The chain as the database holds it.
    fn chain(&self, data: &Path) -> Vec<String> {
        let sealer = AuditSealer::load_or_create(&data.join("service-key")).unwrap();
        let store = PostgresStore::connect(&self.url(), sealer, 1).unwrap();
        store.seal_audit().unwrap();
        store
            .audit_lines_after(0, 1_000_000)
            .unwrap()
            .into_iter()
            .map(|(_, l)| l)
            .collect()
    }
}

impl Drop for OwnDatabase {
    fn drop(&mut self) {
        let sql = format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name);
        let (url, name) = (self.admin.clone(), self.name.clone());
        let done = std::thread::spawn(move || {
            postgres::Client::connect(&url, postgres::NoTls)
                .and_then(|mut c| c.batch_execute(&sql))
                .map_err(|e| format!("dropping {name}: {e}"))
        })
        .join();
        if let Ok(Err(e)) = done {
            eprintln!("{e}");
        }
    }
}

/// A service over its own database: the database, the process, a client.
struct PgService {
    dir: PathBuf,
    server: Server,
    client: Client,
    // Dropped last: the service disconnects before the database is dropped.
    db: OwnDatabase,
}

impl PgService {
    async fn start(label: &str, extra: &str) -> Self {
        let db = OwnDatabase::create(label);
        let dir = support::scratch_dir(label);
        let alice = Arc::new(Approver::new("alice", "alice-es256", false));
        support::write_config(&dir, &[&alice], extra);
        let data = dir.join("data");
        let url = db.url();
        let server = Server::spawn("127.0.0.1:0", &data, &dir.join("config.toml"), Some(&url));
        let gateway = server.add_gateway("faults").await;
        let client = Client::new(&server.base, &gateway, alice).await;
        Self {
            dir,
            server,
            client,
            db,
        }
    }

    /// Stop the service; the database's chain and the service's audit file are the same lines,
    /// they satisfy `ledger`, and they verify.
    fn finish(mut self, ledger: &Ledger) {
        self.server.sigterm();
        let data = self.server.data.clone();
        let chain = self.db.chain(&data);
        assert_eq!(
            file_lines(&data),
            chain,
            "the audit file mirrors the database"
        );
        ledger.check(&parsed(&chain));
        assert_verifies(&self.dir, "chain.jsonl", &chain, &data);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL (.ci/steps/postgres.sh runs it)"]
async fn a_read_only_postgres_answers_503_and_the_service_recovers() {
    let s = PgService::start("faults-readonly", "").await;
    let c = &s.client;
    let mut ledger = Ledger::default();
    c.lifecycle(0, &mut ledger).await;
    let a = c.create(1).await;
    assert_eq!(a.status, 200);
    let pending = a.body["approval_id"].as_str().unwrap().to_owned();
    ledger.created.insert(pending.clone());
    let signed = c.prepare(&pending, Decision::Approved).await.ok().unwrap();

    // The database turns read-only (as a demoted primary or hot standby is), for every session
    // from now on: the service's connections are cut so that theirs are new ones.
    s.db.read_only(true);
    s.db.kill_connections();
    let a = c.create(2).await;
    assert_unavailable(a.status, &a.body);
    assert_eq!(a.retry_after.as_deref(), Some("1"));
    let a = c.decide(&pending, &signed).await;
    assert_unavailable(a.status, &a.body);
    // Reads still work: the approval is still pending.
    // (A read on a connection that was cut may answer 503 once: retried.)
    let deadline = Instant::now() + PATIENCE;
    let now = loop {
        let now = c.status(&pending).await;
        if now["error"]["code"] != "store_unavailable" || Instant::now() > deadline {
            break now;
        }
    };
    assert_eq!(now["status"], "PENDING", "{now}");

    // Writable again: the service reconnects the connections that met the read-only database,
    // and the same calls succeed without a restart.
    s.db.read_only(false);
    let deadline = Instant::now() + PATIENCE;
    let a = loop {
        let a = c.decide(&pending, &signed).await;
        if a.status != 503 {
            break a;
        }
        assert!(Instant::now() < deadline, "never recovered: {}", a.body);
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(a.status, 200, "{}", a.body);
    ledger.verdicts.insert(pending.clone(), "APPROVED".into());
    // Retried like a gateway honouring Retry-After: connections still on a read-only session
    // give each one 503, then are replaced.
    let a = retry_503(|| c.grant(&pending, 1)).await;
    assert_eq!(a.status, 200, "{}", a.body);
    ledger
        .grants
        .insert(pending, a.body["collected_at"].as_str().unwrap().to_owned());
    for n in 3..12 {
        let a = retry_503(|| c.create(n)).await;
        assert_eq!(a.status, 200, "{}", a.body);
        ledger
            .created
            .insert(a.body["approval_id"].as_str().unwrap().to_owned());
    }
    s.finish(&ledger);
}

/// `call` until it answers something other than 503 (each 503 checked), within [`PATIENCE`].
async fn retry_503<F, Fut>(mut call: F) -> Answer
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Answer>,
{
    let deadline = Instant::now() + PATIENCE;
    loop {
        let a = call().await;
        if a.status != 503 {
            return a;
        }
        assert_unavailable(a.status, &a.body);
        assert!(Instant::now() < deadline, "still 503: {}", a.body);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

// ---------------------------------------------------------------------------------------------
// 2. PostgreSQL connections killed, or the server restarted, mid-settlement.

/// What one stream saw.
#[derive(Default)]
struct Seen {
    ledger: Ledger,
    /// 5xx answers (all must be 503 `store_unavailable`).
    unavailable: usize,
}

/// One lifecycle under faults, as a careful gateway runs it: each step is retried after a 503
/// (whose outcome, for a lost COMMIT, is unknown), and a retried verdict or grant that finds
/// its own earlier attempt committed (409 with the settled result) counts as that success.
async fn careful_lifecycle(c: Arc<Client>, n: u64) -> Seen {
    let mut seen = Seen::default();
    let step = async |seen: &mut Seen, a: Answer| -> Option<Answer> {
        if a.status >= 500 {
            assert_unavailable(a.status, &a.body);
            seen.unavailable += 1;
            return None;
        }
        Some(a)
    };
    let deadline = Instant::now() + PATIENCE;
    // Create: a retried create may make a second approval (creation is not idempotent without
    // a key); each acknowledged one is recorded.
    let id = loop {
        assert!(Instant::now() < deadline);
        if let Some(a) = step(&mut seen, c.create(n).await).await {
            assert_eq!(a.status, 200, "{}", a.body);
            let id = a.body["approval_id"].as_str().unwrap().to_owned();
            seen.ledger.created.insert(id.clone());
            break id;
        }
    };
    let d = if n.is_multiple_of(3) {
        Decision::Denied
    } else {
        Decision::Approved
    };
    let want = if d == Decision::Approved {
        "APPROVED"
    } else {
        "DENIED"
    };
    let signed = loop {
        assert!(Instant::now() < deadline);
        match c.prepare(&id, d).await {
            Ok(body) => break body,
            Err(a) => {
                if let Some(a) = step(&mut seen, a).await {
                    panic!("challenge: {} {}", a.status, a.body);
                }
            }
        }
    };
    let mut retried = false;
    loop {
        assert!(Instant::now() < deadline);
        let Some(a) = step(&mut seen, c.decide(&id, &signed).await).await else {
            retried = true;
            continue;
        };
        match a.status {
            200 => {
                assert_eq!(a.body["status"], want);
                seen.ledger.verdicts.insert(id.clone(), want.into());
            }
            // Our own earlier attempt committed though its answer was lost (or the nonce it
            // spent is recognised): the verdict stands, once.
            409 | 422 if retried => {
                // A 409 carries the settled result; a 422 (the nonce was spent) does not, so
                // it is read back, and that read may itself meet a cut connection (503): asked
                // again, as a careful gateway would.
                let settled = match a.body.pointer("/error/result/status") {
                    Some(status) => status.clone(),
                    None => loop {
                        assert!(Instant::now() < deadline);
                        let now = c.status(&id).await;
                        if let Some(status) = now.get("status") {
                            break status.clone();
                        }
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    },
                };
                assert_eq!(settled, want, "{}", a.body);
                seen.ledger.verdicts.insert(id.clone(), want.into());
            }
            _ => panic!("decision: {} {}", a.status, a.body),
        }
        break;
    }
    if d == Decision::Denied {
        return seen;
    }
    let mut retried = false;
    loop {
        assert!(Instant::now() < deadline);
        let Some(a) = step(&mut seen, c.grant(&id, n).await).await else {
            retried = true;
            continue;
        };
        match a.status {
            200 => {
                let at = a.body["collected_at"].as_str().unwrap().to_owned();
                seen.ledger.grants.insert(id.clone(), at);
            }
            // Collected by our own lost attempt: single use holds, nothing to acknowledge.
            409 if retried => {}
            _ => panic!("grant: {} {}", a.status, a.body),
        }
        break;
    }
    seen
}

/// After a fault: one lifecycle (approved, so `n` is not a multiple of 3), run as a careful
/// gateway runs it, into `ledger`. The first use of a pooled connection the fault cut may still
/// answer 503 once: a lone statement whose session ended has an unknown outcome, so the service
/// answers 503 rather than run it again (docs/OPERATIONS.md). Anything else fails the test.
async fn lifecycle_after_fault(c: &Arc<Client>, n: u64, ledger: &mut Ledger) {
    assert!(!n.is_multiple_of(3), "an approved lifecycle");
    let seen = careful_lifecycle(c.clone(), n).await;
    assert_eq!(
        seen.ledger.verdicts.len(),
        1,
        "the verdict was acknowledged"
    );
    ledger.created.extend(seen.ledger.created);
    ledger.verdicts.extend(seen.ledger.verdicts);
    ledger.grants.extend(seen.ledger.grants);
}

/// Run `streams` careful lifecycles while `fault` runs; merge what they saw.
async fn under_fault(
    c: &Arc<Client>,
    first: u64,
    streams: u64,
    fault: impl std::future::Future<Output = ()>,
) -> Seen {
    let mut set = tokio::task::JoinSet::new();
    for n in first..first + streams {
        set.spawn(careful_lifecycle(c.clone(), n));
    }
    fault.await;
    let mut all = Seen::default();
    while let Some(s) = set.join_next().await {
        let s = s.unwrap();
        all.unavailable += s.unavailable;
        all.ledger.created.extend(s.ledger.created);
        all.ledger.verdicts.extend(s.ledger.verdicts);
        all.ledger.grants.extend(s.ledger.grants);
    }
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL (.ci/steps/postgres.sh runs it)"]
async fn killed_postgres_connections_mid_settlement_lose_and_double_nothing() {
    let s = PgService::start("faults-kill", "").await;
    let c = Arc::new(s.client.clone());
    let mut ledger = Ledger::default();
    c.lifecycle(0, &mut ledger).await;
    // 48 lifecycles in flight while every connection of the database is terminated, again and
    // again: the service's and those of anything else connected to it.
    let db = &s.db;
    let mut killed = 0;
    let seen = under_fault(&c, 1, 48, async {
        for _ in 0..12 {
            tokio::time::sleep(Duration::from_millis(40)).await;
            killed += db.kill_connections();
        }
    })
    .await;
    assert!(killed > 0, "no connection was ever killed");
    eprintln!(
        "killed {killed} connections; {} acknowledged verdicts, {} grants, {} answers 503",
        seen.ledger.verdicts.len(),
        seen.ledger.grants.len(),
        seen.unavailable
    );
    assert_eq!(seen.ledger.verdicts.len(), 48, "every stream settled");
    ledger.created.extend(seen.ledger.created);
    ledger.verdicts.extend(seen.ledger.verdicts);
    ledger.grants.extend(seen.ledger.grants);
    // Afterwards the service works as before.
    for n in 100..104 {
        let id = retry_503(|| c.create(n)).await;
        assert_eq!(id.status, 200);
        ledger
            .created
            .insert(id.body["approval_id"].as_str().unwrap().to_owned());
    }
    lifecycle_after_fault(&c, 200, &mut ledger).await;
    s.finish(&ledger);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "restarts the whole PostgreSQL server (.ci/steps/postgres.sh runs it alone)"]
async fn a_postgres_restart_mid_settlement_loses_and_doubles_nothing() {
    assert_eq!(
        std::env::var("COUNTERSIGN_FAULT_PG_RESTART").as_deref(),
        Ok("1"),
        "this test restarts the whole PostgreSQL server: set COUNTERSIGN_FAULT_PG_RESTART=1 to \
         say that is fine here"
    );
    let s = PgService::start("faults-restart", "").await;
    let c = Arc::new(s.client.clone());
    let mut ledger = Ledger::default();
    c.lifecycle(0, &mut ledger).await;
    // Lifecycles start every 25 ms from before the restart until a second after it is done, so
    // that some are in flight while the server goes down and comes back.
    let restart = async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let version = std::fs::read_dir("/etc/postgresql")
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .max_by_key(|v| v.parse::<u32>().unwrap_or(0))
            .unwrap();
        let out = tokio::task::spawn_blocking(move || {
            Command::new("pg_ctlcluster")
                .args(["--skip-systemctl-redirect", &version, "main", "restart"])
                .output()
                .unwrap()
        })
        .await
        .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let mut set = tokio::task::JoinSet::new();
    let mut restart = std::pin::pin!(restart);
    let mut restarted: Option<Instant> = None;
    let mut started = 0u64;
    while restarted.is_none_or(|at| at.elapsed() < Duration::from_secs(1)) {
        started += 1;
        set.spawn(careful_lifecycle(c.clone(), started));
        tokio::select! {
            () = &mut restart, if restarted.is_none() => restarted = Some(Instant::now()),
            () = tokio::time::sleep(Duration::from_millis(25)) => {}
        }
    }
    let mut seen = Seen::default();
    while let Some(s) = set.join_next().await {
        let s = s.unwrap();
        seen.unavailable += s.unavailable;
        seen.ledger.created.extend(s.ledger.created);
        seen.ledger.verdicts.extend(s.ledger.verdicts);
        seen.ledger.grants.extend(s.ledger.grants);
    }
    eprintln!(
        "restart: {} acknowledged verdicts, {} grants, {} answers 503",
        seen.ledger.verdicts.len(),
        seen.ledger.grants.len(),
        seen.unavailable
    );
    assert_eq!(
        seen.ledger.verdicts.len() as u64,
        started,
        "every stream settled"
    );
    ledger.created.extend(seen.ledger.created);
    ledger.verdicts.extend(seen.ledger.verdicts);
    ledger.grants.extend(seen.ledger.grants);
    lifecycle_after_fault(&c, 10_001, &mut ledger).await;
    s.finish(&ledger);
}

// ---------------------------------------------------------------------------------------------
// 3. A webhook receiver that never answers.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_that_never_answers_slows_no_lifecycle_and_gets_at_most_five_attempts_each() {
    // Every attempt is counted (by Idempotency-Key: the approval id) and then held for ever;
    // the service gives up on it after its own timeout.
    let attempts = Arc::new(std::sync::Mutex::new(BTreeMap::<String, u32>::new()));
    let counted = attempts.clone();
    let router = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: axum::http::HeaderMap| {
            let counted = counted.clone();
            async move {
                let key = headers
                    .get("idempotency-key")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_owned();
                *counted.lock().unwrap().entry(key).or_default() += 1;
                std::future::pending::<()>().await;
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hook = format!("http://{}/hook", listener.local_addr().unwrap());
    let receiver = tokio::spawn(async move { axum::serve(listener, router).await });

    let dir = support::scratch_dir("faults-webhook");
    let alice = Arc::new(Approver::new("alice", "alice-es256", false));
    support::write_config(&dir, &[&alice], &format!("webhook_url = \"{hook}\"\n"));
    let mut server = Server::start(&dir);
    let gateway = server.add_gateway("faults").await;
    let c = Client::new(&server.base, &gateway, alice).await;
    let seen = |id: &str| attempts.lock().unwrap().get(id).copied().unwrap_or(0);

    // Each lifecycle: create, then (once its notification is being held by the receiver)
    // decide and collect the grant. All of it completes while the receiver holds the request:
    // no step waits for the webhook.
    let mut ledger = Ledger::default();
    let mut ids = Vec::new();
    for n in 0..8 {
        let a = c.create(n).await;
        assert_eq!(a.status, 200, "{}", a.body);
        let id = a.body["approval_id"].as_str().unwrap().to_owned();
        ledger.created.insert(id.clone());
        let deadline = Instant::now() + PATIENCE;
        while seen(&id) == 0 {
            assert!(Instant::now() < deadline, "no notification for {id}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let body = c.prepare(&id, Decision::Approved).await.ok().unwrap();
        let a = c.decide(&id, &body).await;
        assert_eq!(a.status, 200, "{}", a.body);
        ledger.verdicts.insert(id.clone(), "APPROVED".into());
        let a = c.grant(&id, n).await;
        assert_eq!(a.status, 200, "{}", a.body);
        ledger.grants.insert(
            id.clone(),
            a.body["collected_at"].as_str().unwrap().to_owned(),
        );
        ids.push(id);
    }

    // The retry budget: at most five attempts per notification (each abandoned after the
    // webhook timeout), and none once the approval is decided (every one was, at once): a late
    // "please decide" is noise. Watched for longer than the whole budget would take.
    tokio::time::sleep(Duration::from_secs(40)).await;
    let total: u32 = ids.iter().map(|id| seen(id)).sum();
    for id in &ids {
        assert!(
            (1..=5).contains(&seen(id)),
            "{id}: {:?}",
            attempts.lock().unwrap()
        );
    }
    let metrics = reqwest::get(format!("{}/metrics", server.base))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains(&format!(
            "countersign_webhook_attempts_total{{outcome=\"no_answer\"}} {total}"
        )),
        "{metrics}"
    );

    server.sigterm();
    let data = dir.join("data");
    let lines = file_lines(&data);
    ledger.check(&parsed(&lines));
    assert_verifies(&dir, "audit-copy.jsonl", &lines, &data);
    receiver.abort();
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------------------------------------
// 4. The wall clock jumps.

/// The service as `serve` runs it on SQLite (router, accept loop, the steady clock over a wall
/// clock), except that the wall clock is one the test can step, over `store`. (On PostgreSQL
/// `serve` runs on the database's clock instead, and the host's wall clock plays no part: see
/// `replicas::a_replica_whose_wall_clock_is_an_hour_slow_keeps_the_databases_time`. The
/// PostgreSQL run here checks the store's expiry rules under the same steps.)
async fn service_on_a_steppable_wall(
    store: Arc<dyn countersign_server::store::Store>,
    dir: &Path,
    alice: Arc<Approver>,
) -> (Client, Arc<countersign_server::ManualClock>) {
    use countersign_server::{AppState, Config, ManualClock, StateParts, SteadyClock};
    let wall = Arc::new(ManualClock::new(time::OffsetDateTime::now_utc()));
    let config = Config::from_toml(&format!(
        "rp_id = \"{}\"\norigins = [\"{}\"]\n{}",
        countersign_testkit::RP_ID,
        countersign_testkit::ORIGIN,
        support::QUICK_TOOL
    ))
    .unwrap();
    let sealer = AuditSealer::from_seed([7; 32]);
    std::fs::create_dir_all(dir.join("data")).unwrap();
    std::fs::write(
        dir.join("data/service-key.pub"),
        format!("{}\n", sealer.public_key_b64()),
    )
    .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let state = AppState::new(StateParts {
        config,
        public_url: base.clone(),
        store,
        clock: Arc::new(SteadyClock::new(wall.clone())),
        sealer,
        mirror: None,
    })
    .unwrap();
    state
        .enroll(vec![countersign_testkit::enroll(&alice.key, "alice")])
        .await
        .unwrap();
    let gateway = state.add_gateway("faults").await.unwrap();
    tokio::spawn(countersign_server::serve_http(
        listener,
        countersign_server::build_router(state),
        Duration::from_secs(10),
        std::future::pending(),
    ));
    (Client::new(&base, &gateway, alice).await, wall)
}

fn at(rfc3339: &Value) -> time::OffsetDateTime {
    time::OffsetDateTime::parse(
        rfc3339.as_str().unwrap(),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap()
}

/// A verdict refused because the approval expired: 409, `expired` (settled as expired by this
/// very call) or `already_settled` (by a read or the sweep before it), and the approval's result
/// DENIED `expired_unanswered` either way.
fn assert_refused_as_expired(r: &Answer) {
    assert_eq!(r.status, 409, "{}", r.body);
    let code = r.body["error"]["code"].as_str().unwrap_or_default();
    assert!(code == "expired" || code == "already_settled", "{}", r.body);
    assert_eq!(r.body["error"]["result"]["status"], "DENIED", "{}", r.body);
    assert_eq!(
        r.body["error"]["result"]["reason_code"], "expired_unanswered",
        "{}",
        r.body
    );
}

async fn clock_jumps(store: Arc<dyn countersign_server::store::Store>, label: &str) {
    let dir = support::scratch_dir(label);
    let alice = Arc::new(Approver::new("alice", "alice-es256", false));
    let (c, wall) = service_on_a_steppable_wall(store.clone(), &dir, alice).await;
    let mut ledger = Ledger::default();
    let quick = async |c: &Client, n: u64| -> Value {
        let body =
            json!({"agent_id": "agent-7", "tool_name": "quick", "params": {"n": n.to_string()}});
        let a = c.call("/v1/approvals", None, &body).await.unwrap();
        assert_eq!(a.status, 200, "{}", a.body);
        a.body
    };

    // Backward: an approval with two seconds to live; the wall clock steps back an hour; the
    // verdict, signed in time, arrives after the two seconds. It is refused: expired.
    let a = quick(&c, 1).await;
    let early = a["approval_id"].as_str().unwrap().to_owned();
    ledger.created.insert(early.clone());
    let signed = c.prepare(&early, Decision::Approved).await.ok().unwrap();
    wall.advance(time::Duration::hours(-1));
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let r = c.decide(&early, &signed).await;
    assert_refused_as_expired(&r);
    let now = c.status(&early).await;
    assert_eq!(now["status"], "DENIED");
    assert_eq!(now["reason_code"], "expired_unanswered");

    // Forward past expiry: a pending approval (300 s to live) is expired at once; the verdict
    // signed before the step is refused; stepping back does not reopen it.
    let a = c.create(2).await;
    assert_eq!(a.status, 200, "{}", a.body);
    let late = a.body["approval_id"].as_str().unwrap().to_owned();
    let late_expiry = at(&a.body["expires_at"]);
    ledger.created.insert(late.clone());
    let signed = c.prepare(&late, Decision::Approved).await.ok().unwrap();
    wall.advance(time::Duration::hours(2));
    let now = c.status(&late).await;
    assert_eq!(now["status"], "DENIED", "{now}");
    assert_eq!(now["reason_code"], "expired_unanswered");
    // The step also ended the approver's session (sessions expire by the same clock): signed
    // in again, the verdict signed before the step is refused all the same.
    let c = Client::new(&c.base, &c.gateway, c.alice.clone()).await;
    let r = c.decide(&late, &signed).await;
    assert!(r.status == 409 || r.status == 422, "{}", r.body);
    wall.advance(time::Duration::hours(-2));
    let now = c.status(&late).await;
    assert_eq!(now["status"], "DENIED", "{now}");

    // After the clock came back, time did not: a new approval's window starts after the
    // forward step, and still runs its full length (it can be approved and collected).
    let a = quick(&c, 3).await;
    let fresh = a["approval_id"].as_str().unwrap().to_owned();
    ledger.created.insert(fresh.clone());
    assert!(
        // (The wall clock went back one hour, then forward two: one hour ahead of real time.)
        at(&a["expires_at"]) > late_expiry + time::Duration::minutes(30),
        "{a}"
    );
    let signed = c.prepare(&fresh, Decision::Approved).await.ok().unwrap();
    let r = c.decide(&fresh, &signed).await;
    assert_eq!(r.status, 200, "{}", r.body);
    ledger.verdicts.insert(fresh.clone(), "APPROVED".into());
    let body = json!({"fingerprint": support::fingerprint("quick", 3)});
    let r = c
        .call(&format!("/v1/approvals/{fresh}/grant"), None, &body)
        .await
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    ledger.grants.insert(
        fresh.clone(),
        r.body["collected_at"].as_str().unwrap().to_owned(),
    );

    store.seal_audit().unwrap();
    let chain: Vec<String> = store
        .audit_lines_after(0, 1_000_000)
        .unwrap()
        .into_iter()
        .map(|(_, l)| l)
        .collect();
    let lines = parsed(&chain);
    ledger.check(&lines);
    for id in [&early, &late] {
        assert!(
            !lines
                .iter()
                .any(|l| l["kind"] == "decision" && l["approval_id"] == id.as_str()),
            "a verdict after expiry for {id}"
        );
    }
    assert_verifies(&dir, "chain.jsonl", &chain, &dir.join("data"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wall_clock_steps_never_let_a_verdict_in_after_expiry_sqlite() {
    let store = SqliteStore::in_memory(AuditSealer::from_seed([7; 32])).unwrap();
    clock_jumps(Arc::new(store), "faults-clock-sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL (.ci/steps/postgres.sh runs it)"]
async fn wall_clock_steps_never_let_a_verdict_in_after_expiry_postgres() {
    let schema = ScratchSchema::required("faults-clock").unwrap();
    let store = PostgresStore::connect(&schema.url(), AuditSealer::from_seed([7; 32]), 2).unwrap();
    clock_jumps(Arc::new(store), "faults-clock-postgres").await;
}

// ---------------------------------------------------------------------------------------------
// 5. Slowloris: thousands of idle connections and a client dribbling its headers.

/// The soft limit on open files of this process (`/proc/self/limits`).
fn open_files_limit() -> usize {
    std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|t| {
            let line = t.lines().find(|l| l.starts_with("Max open files"))?;
            line.split_whitespace().nth(3)?.parse().ok()
        })
        .unwrap_or(1024)
}

/// Read until the peer closes (EOF or reset): the connection was closed by the service.
async fn closed_by_peer(stream: &mut tokio::net::TcpStream) {
    use tokio::io::AsyncReadExt as _;
    let mut buf = [0u8; 1024];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_and_slow_connections_are_closed_and_others_are_served_meanwhile() {
    use tokio::io::AsyncWriteExt as _;
    let dir = support::scratch_dir("faults-slowloris");
    let alice = Arc::new(Approver::new("alice", "alice-es256", false));
    support::write_config(&dir, &[&alice], "[timeouts]\nheader_read_seconds = 3\n");
    let mut server = Server::start(&dir);
    let gateway = server.add_gateway("faults").await;
    let c = Client::new(&server.base, &gateway, alice).await;
    let addr = server.base.trim_start_matches("http://").to_owned();

    // 2,000 connections that send nothing (fewer if this process may not open that many files:
    // the service, a child, has the same limit).
    let idle_count = 2000.min(open_files_limit().saturating_sub(300) / 2);
    eprintln!("holding {idle_count} idle connections");
    let mut idle = Vec::with_capacity(idle_count);
    for _ in 0..idle_count {
        idle.push(tokio::net::TcpStream::connect(&addr).await.unwrap());
    }
    // An approver page client that sends one header line every half second, for ever.
    let slow = {
        let addr = addr.clone();
        tokio::spawn(async move {
            let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
            s.write_all(b"GET /approve/apv_slow HTTP/1.1\r\nHost: x\r\n")
                .await
                .unwrap();
            let mut n = 0u64;
            loop {
                tokio::time::sleep(Duration::from_millis(500)).await;
                n += 1;
                if s.write_all(format!("X-Slow-{n}: 1\r\n").as_bytes())
                    .await
                    .is_err()
                {
                    // The service closed it (a write can succeed once after the close).
                    return n;
                }
            }
        })
    };

    // Meanwhile other clients are served: full lifecycles complete.
    let mut ledger = Ledger::default();
    tokio::time::timeout(PATIENCE, async {
        for n in 0..10 {
            c.lifecycle(n, &mut ledger).await;
        }
    })
    .await
    .expect("lifecycles completed while the idle connections were held");

    // Every idle connection is closed by the service after the header read timeout, and so is
    // the slow client, though it never stopped sending.
    tokio::time::timeout(PATIENCE, async {
        for s in &mut idle {
            closed_by_peer(s).await;
        }
    })
    .await
    .expect("the service closed every idle connection");
    let lines_sent = tokio::time::timeout(PATIENCE, slow)
        .await
        .expect("the service closed the slow client")
        .unwrap();
    assert!(lines_sent >= 2, "{lines_sent}");
    drop(idle);

    c.lifecycle(100, &mut ledger).await;
    server.sigterm();
    let data = dir.join("data");
    let lines = file_lines(&data);
    ledger.check(&parsed(&lines));
    assert_verifies(&dir, "audit-copy.jsonl", &lines, &data);
    let _ = std::fs::remove_dir_all(&dir);
}
