//! What the CLI's process-level tests share: the real `countersign` binary run as a command or as
//! a `countersign serve` process, a scratch directory with a registry and a config for it, a
//! software authenticator that signs the service's challenges, and the HTTP calls an agent and an
//! approver make. The modules of this test binary (`tests/it/main.rs`) reach it as `crate::support`.

use countersign::{Decision, b64};
use countersign_softkey::{AssertionRequest, Ceremony, SoftKey};
use countersign_testkit::{ORIGIN, RP_ID};
use serde_json::{Value, json};
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

/// The `countersign` binary Cargo built for these tests.
pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_countersign");

/// The line `countersign serve` prints first, before its address (docs/spec/service.md).
const LISTENING: &str = "countersign: listening on ";

/// A TOML `[[tools]]` entry for `write_config`: the tool `quick`, whose requests expire after one
/// second.
pub(crate) const QUICK_TOOL: &str = "[[tools]]\nname = \"quick\"\napproval_seconds = 1\n";

/// `countersign ARGS`, waited for, with stdout and stderr captured.
pub(crate) fn run(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().unwrap()
}

/// `countersign ARGS --data-dir DATA`, waited for, with stdout and stderr captured.
pub(crate) fn run_with_data_dir(args: &[&str], data: &Path) -> Output {
    Command::new(BIN)
        .args(args)
        .arg("--data-dir")
        .arg(data)
        .output()
        .unwrap()
}

/// `countersign audit verify FILE --key KEY`, stdout and stderr captured; see [`code`].
pub(crate) fn audit_verify(file: &Path, key: &Path) -> Output {
    audit_verify_with(file, key, &[])
}

/// [`audit_verify`] with more options after the usual ones (`--floor`, ...).
pub(crate) fn audit_verify_with(file: &Path, key: &Path, options: &[&str]) -> Output {
    Command::new(BIN)
        .args(["audit", "verify"])
        .arg(file)
        .arg("--key")
        .arg(key)
        // Every test service runs under the worked example's RP (write_config): the evidence of
        // its Decisions is re-verified under it.
        .args(["--rp-id", RP_ID, "--origin", ORIGIN])
        .args(options)
        .output()
        .unwrap()
}

/// A finished command's exit code; -1 if a signal ended it.
pub(crate) fn code(out: &Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

/// A finished command's stdout, lossily decoded.
pub(crate) fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A finished command's stderr, lossily decoded.
pub(crate) fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A fresh directory under the system's temporary directory, unique to this process and moment:
/// `countersign-LABEL-test-PID-NANOS`. The test removes it when it passes.
pub(crate) fn scratch_dir(label: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "countersign-{label}-test-{}-{}",
        std::process::id(),
        time::OffsetDateTime::now_utc().unix_timestamp_nanos()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes `DIR/registry.json`, enrolling each `(key, principal)`; returns its path.
pub(crate) fn write_registry(dir: &Path, enrolled: &[(&SoftKey, &str)]) -> PathBuf {
    let doc = countersign_testkit::registry(
        enrolled
            .iter()
            .map(|(key, principal)| countersign_testkit::enroll(key, principal)),
    );
    let path = dir.join("registry.json");
    std::fs::write(&path, serde_json::to_vec(&doc).unwrap()).unwrap();
    path
}

/// Writes `DIR/registry.json` enrolling `approvers`, and `DIR/config.toml` naming it, with the
/// test RP ID and origin and then `extra` (TOML, e.g. [`QUICK_TOOL`]); returns the config's path.
pub(crate) fn write_config(dir: &Path, approvers: &[&Approver], extra: &str) -> PathBuf {
    let enrolled: Vec<(&SoftKey, &str)> = approvers.iter().map(|a| (&a.key, a.principal)).collect();
    let registry = write_registry(dir, &enrolled);
    let config = dir.join("config.toml");
    std::fs::write(
        &config,
        format!(
            "rp_id = \"{RP_ID}\"\norigins = [\"{ORIGIN}\"]\nregistry = \"{}\"\n{extra}",
            registry.display()
        ),
    )
    .unwrap();
    config
}

/// Where a child process's stderr goes: a file beside `path`, printed with the test's output only
/// if the test fails. A passing run stays quiet, although the services and tools it starts log
/// the errors and warnings the test provokes; a failing one shows them.
pub(crate) struct ShownOnFailure(PathBuf);

impl ShownOnFailure {
    /// A new log file named after `path` and `what` (unique in this test process).
    pub(crate) fn next_to(path: &Path, what: &str) -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let mut name = path.as_os_str().to_owned();
        name.push(format!(".{what}-{n}.stderr.log"));
        Self(PathBuf::from(name))
    }

    /// The file, opened for the child's stderr.
    pub(crate) fn stdio(&self) -> Stdio {
        std::fs::File::create(&self.0).unwrap().into()
    }
}

impl Drop for ShownOnFailure {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // eprintln! goes to the test harness's capture: it is shown with the failure.
            let text = std::fs::read_to_string(&self.0).unwrap_or_default();
            eprintln!("--- stderr of {} ---\n{text}--- end ---", self.0.display());
        }
    }
}

/// A child process, killed (SIGKILL) and reaped when dropped.
pub(crate) struct KillOnDrop(pub(crate) Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `countersign gateway add NAME --data-dir DATA [--database URL]`, asserting exit 0 and exactly
/// one line on stdout: the new gateway's bearer token.
pub(crate) fn add_gateway(data: &Path, database: Option<&str>, name: &str) -> String {
    let mut command = Command::new(BIN);
    command
        .args(["gateway", "add", name, "--data-dir"])
        .arg(data);
    if let Some(url) = database {
        command.arg("--database").arg(url);
    }
    let out = command.output().unwrap();
    assert_eq!(code(&out), 0, "gateway add: {}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "exactly one line: {text:?}");
    lines[0].to_owned()
}

/// A client sending `token` as its gateway bearer token with every request that sets no
/// `Authorization` of its own (the approver calls set their session token instead).
pub(crate) fn gateway_client(token: &str) -> reqwest::ClientBuilder {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        reqwest::header::AUTHORIZATION,
        format!("Bearer {token}").parse().unwrap(),
    );
    reqwest::Client::builder().default_headers(headers)
}

/// Whether the service at `base` answers `token` as a live gateway's: an unknown approval id is
/// then 404 rather than 401.
pub(crate) async fn gateway_accepted(base: &str, token: &str) -> bool {
    let response = reqwest::Client::new()
        .get(format!("{base}/v1/approvals/apv_probe"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    match response.status().as_u16() {
        404 => true,
        401 => false,
        other => panic!("probing a gateway token: HTTP {other}"),
    }
}

/// Poll until the service at `base` gives the answer `accepted` for `token` (a running service
/// picks up gateways added or revoked by the CLI on its next refresh, every half second). The
/// deadline only bounds a hang; it asserts nothing about speed.
pub(crate) async fn until_gateway(base: &str, token: &str, accepted: bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while gateway_accepted(base, token).await != accepted {
        assert!(
            std::time::Instant::now() < deadline,
            "the service never saw the gateway change"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// One `countersign serve` process, killed on drop.
pub(crate) struct Server {
    process: KillOnDrop,
    /// What it wrote to stderr, shown only if the test fails.
    _log: ShownOnFailure,
    /// `http://ADDR:PORT`, as the process printed it.
    pub(crate) base: String,
    /// Its data directory.
    pub(crate) data: PathBuf,
    /// Its `--database URL`, if any.
    pub(crate) database: Option<String>,
}

impl Server {
    /// `countersign serve` on a free loopback port with the data directory `DIR/data` and the
    /// config `DIR/config.toml`.
    pub(crate) fn start(dir: &Path) -> Self {
        Self::spawn(
            "127.0.0.1:0",
            &dir.join("data"),
            &dir.join("config.toml"),
            None,
        )
    }

    /// `countersign serve --listen LISTEN --data-dir DATA --config CONFIG [--database URL]`.
    /// Returns once the process has printed its address (which must be its first line); stdout
    /// is drained from then on, so the service never blocks on a full pipe.
    pub(crate) fn spawn(listen: &str, data: &Path, config: &Path, database: Option<&str>) -> Self {
        Self::spawn_with(listen, data, config, database, |_| {})
    }

    /// [`Server::spawn`], with `adjust` applied to the command last (extra flags, environment,
    /// where stderr goes).
    pub(crate) fn spawn_with(
        listen: &str,
        data: &Path,
        config: &Path,
        database: Option<&str>,
        adjust: impl FnOnce(&mut Command),
    ) -> Self {
        let mut command = Command::new(BIN);
        command
            .args(["serve", "--listen", listen, "--data-dir"])
            .arg(data)
            .arg("--config")
            .arg(config);
        if let Some(url) = database {
            command.arg("--database").arg(url);
        }
        let log = ShownOnFailure::next_to(data, "serve");
        command.stdout(Stdio::piped()).stderr(log.stdio());
        adjust(&mut command);
        let mut process = KillOnDrop(command.spawn().unwrap());
        let stdout = process.0.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        let first = lines
            .next()
            .expect("countersign serve printed its address")
            .unwrap();
        let base = first
            .strip_prefix(LISTENING)
            .unwrap_or_else(|| panic!("countersign serve's first line: {first:?}"))
            .trim()
            .to_owned();
        std::thread::spawn(move || for _ in lines {});
        Self {
            process,
            _log: log,
            base,
            data: data.to_owned(),
            database: database.map(str::to_owned),
        }
    }

    /// Add a gateway named `name` with the CLI (`countersign gateway add`) and wait until this
    /// service accepts its token: the token.
    pub(crate) async fn add_gateway(&self, name: &str) -> String {
        let token = add_gateway(&self.data, self.database.as_deref(), name);
        until_gateway(&self.base, &token, true).await;
        token
    }

    /// SIGKILL, and wait for the process to end.
    pub(crate) fn sigkill(&mut self) {
        self.process.0.kill().unwrap();
        self.process.0.wait().unwrap();
    }

    /// SIGTERM, and assert that the process shuts down gracefully (exit 0).
    pub(crate) fn sigterm(&mut self) {
        let pid = self.process.0.id().to_string();
        assert!(
            Command::new("kill")
                .args(["-TERM", &pid])
                .status()
                .unwrap()
                .success()
        );
        assert!(self.process.0.wait().unwrap().success());
    }

    /// Pause (SIGSTOP) or resume (SIGCONT) the process: a paused replica serves nothing and runs
    /// no background work.
    pub(crate) fn pause(&self, paused: bool) {
        let signal = if paused { "-STOP" } else { "-CONT" };
        let pid = self.process.0.id().to_string();
        assert!(
            Command::new("kill")
                .args([signal, &pid])
                .status()
                .unwrap()
                .success()
        );
    }
}

/// A software authenticator enrolled for `principal`, signing challenges into the JSON body the
/// service takes at login and with a decision.
pub(crate) struct Approver {
    pub(crate) principal: &'static str,
    pub(crate) key: SoftKey,
    /// `None`: the authenticator reports counter 0 (no counter), so assertions signed in one
    /// order and submitted concurrently in another are all legal. `Some`: it counts 1, 2, 3, ...
    counter: Option<AtomicU32>,
}

impl Approver {
    /// The testkit key `fixture` (e.g. `alice-es256`), with a signature counter if `counting`.
    pub(crate) fn new(principal: &'static str, fixture: &str, counting: bool) -> Self {
        Self {
            principal,
            key: countersign_testkit::key(fixture),
            counter: counting.then(|| AtomicU32::new(0)),
        }
    }

    /// Sign `challenge` for the test RP ID and origin: the assertion as the service's JSON body.
    pub(crate) fn sign(&self, challenge: Vec<u8>) -> Value {
        let request = AssertionRequest::from(Ceremony {
            sign_count: self
                .counter
                .as_ref()
                .map_or(0, |c| c.fetch_add(1, Ordering::SeqCst) + 1),
            ..Ceremony::get(RP_ID, ORIGIN, challenge)
        });
        let r = self.key.assert(&request).unwrap();
        json!({
            "credential_id": b64::encode(&r.credential_id),
            "client_data_json": b64::encode(&r.client_data_json),
            "authenticator_data": b64::encode(&r.authenticator_data),
            "signature": b64::encode(&r.signature),
        })
    }
}

/// The grant fingerprint of agent-7's approved call of `tool` with the params `{"n": n}`.
pub(crate) fn fingerprint(tool: &str, n: u64) -> String {
    let action =
        countersign_testkit::tool_call_action("agent-7", tool, json!({"n": n.to_string()}));
    b64::encode(&countersign_testkit::op_hash_of(
        &action,
        Decision::Approved,
    ))
}

/// HTTP calls to any service (`base` is `http://ADDR:PORT`); a transport error or a body that is
/// not JSON (a killed service) is `None`. The gateway calls send whatever gateway token the
/// client carries (see [`gateway_client`]).
#[derive(Clone)]
pub(crate) struct Http(pub(crate) reqwest::Client);

impl Http {
    /// POST `body` as JSON to `url`, with `token` as the bearer if given: `(status, body)`.
    pub(crate) async fn post(
        &self,
        url: String,
        token: Option<&str>,
        body: &Value,
    ) -> Option<(u16, Value)> {
        let mut req = self.0.post(url).json(body);
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let resp = req.send().await.ok()?;
        let status = resp.status().as_u16();
        Some((status, resp.json().await.ok()?))
    }

    /// GET `url`: the JSON body, whatever the status.
    pub(crate) async fn get(&self, url: String) -> Option<Value> {
        self.0.get(url).send().await.ok()?.json().await.ok()
    }

    /// agent-7 asks to call `tool` with the params `{"n": n}`: asserts 200; the response body.
    pub(crate) async fn request_approval(&self, base: &str, tool: &str, n: u64) -> Option<Value> {
        let (status, body) = self
            .post(
                format!("{base}/v1/approvals"),
                None,
                &json!({"agent_id": "agent-7", "tool_name": tool, "params": {"n": n.to_string()}}),
            )
            .await?;
        assert_eq!(status, 200, "{body:?}");
        Some(body)
    }

    /// [`Http::request_approval`]: the new approval's id.
    pub(crate) async fn create(&self, base: &str, tool: &str, n: u64) -> Option<String> {
        let body = self.request_approval(base, tool, n).await?;
        Some(body["approval_id"].as_str()?.to_owned())
    }

    /// Fetch a login challenge, have `who` sign it, and log in: `(status, body)`. Panics if the
    /// challenge cannot be fetched.
    pub(crate) async fn try_login(&self, base: &str, who: &Approver) -> Option<(u16, Value)> {
        let (_, c) = self
            .post(
                format!("{base}/v1/approver/login/challenge"),
                None,
                &json!({}),
            )
            .await
            .unwrap();
        let challenge = b64::decode(c["challenge"].as_str().unwrap()).unwrap();
        self.post(
            format!("{base}/v1/approver/login"),
            None,
            &who.sign(challenge),
        )
        .await
    }

    /// [`Http::try_login`], asserting 200: the session token.
    pub(crate) async fn login(&self, base: &str, who: &Approver) -> String {
        let (status, body) = self.try_login(base, who).await.unwrap();
        assert_eq!(status, 200, "{body:?}");
        body["token"].as_str().unwrap().to_owned()
    }

    /// Fetch a decision challenge from `base` (asserting 200) and have `who` sign it.
    pub(crate) async fn prepare(
        &self,
        base: &str,
        who: &Approver,
        token: &str,
        id: &str,
        d: Decision,
    ) -> Option<Value> {
        let url = format!("{base}/v1/approver/approvals/{id}/challenge");
        let (status, c) = self.post(url, Some(token), &json!({"decision": d})).await?;
        assert_eq!(status, 200, "{c:?}");
        Some(who.sign(b64::decode(c["challenge"].as_str()?).ok()?))
    }

    /// Submit a signed decision `body` for approval `id`.
    pub(crate) async fn decide(
        &self,
        base: &str,
        token: &str,
        id: &str,
        body: &Value,
    ) -> Option<(u16, Value)> {
        let url = format!("{base}/v1/approver/approvals/{id}/decision");
        self.post(url, Some(token), body).await
    }

    /// Collect the grant of approval `id`, agent-7's call of `tool` with the params `{"n": n}`.
    pub(crate) async fn grant(
        &self,
        base: &str,
        id: &str,
        n: u64,
        tool: &str,
    ) -> Option<(u16, Value)> {
        let url = format!("{base}/v1/approvals/{id}/grant");
        self.post(url, None, &json!({"fingerprint": fingerprint(tool, n)}))
            .await
    }
}

/// [`Http`] bound to one service, for tests where every call must get an answer: a transport
/// error panics.
#[derive(Clone)]
pub(crate) struct Api {
    pub(crate) http: Http,
    pub(crate) base: String,
}

impl Api {
    /// A fresh client for the service at `base`, without a gateway token (enough for the
    /// approver calls).
    pub(crate) fn new(base: &str) -> Self {
        Self {
            http: Http(reqwest::Client::new()),
            base: base.to_owned(),
        }
    }

    /// A fresh client for the service at `base` that calls as the gateway whose token this is.
    pub(crate) fn for_gateway(base: &str, token: &str) -> Self {
        Self {
            http: Http(gateway_client(token).build().unwrap()),
            base: base.to_owned(),
        }
    }

    /// [`Http::post`] to `path` on this service.
    pub(crate) async fn post(&self, path: &str, token: Option<&str>, body: &Value) -> (u16, Value) {
        let url = format!("{}{path}", self.base);
        self.http.post(url, token, body).await.unwrap()
    }

    /// [`Http::get`] of `path` on this service.
    pub(crate) async fn get(&self, path: &str) -> Value {
        self.http.get(format!("{}{path}", self.base)).await.unwrap()
    }

    /// A new approval request (asserting 200 and `PENDING`): its id.
    pub(crate) async fn create(&self, tool: &str, n: u64) -> String {
        let body = self
            .http
            .request_approval(&self.base, tool, n)
            .await
            .unwrap();
        assert_eq!(body["status"], "PENDING");
        body["approval_id"].as_str().unwrap().to_owned()
    }

    /// A login as `who`, whatever the answer: `(status, body)`.
    pub(crate) async fn try_login(&self, who: &Approver) -> (u16, Value) {
        self.http.try_login(&self.base, who).await.unwrap()
    }

    /// A login as `who` (asserting 200): the session token.
    pub(crate) async fn login(&self, who: &Approver) -> String {
        self.http.login(&self.base, who).await
    }

    /// A signed decision body for approval `id`.
    pub(crate) async fn prepare(
        &self,
        who: &Approver,
        token: &str,
        id: &str,
        d: Decision,
    ) -> Value {
        let body = self.http.prepare(&self.base, who, token, id, d).await;
        body.unwrap()
    }
}
