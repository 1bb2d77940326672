//! `countersign demo`: the whole loop without a browser (the demo, `demo approve` in a second
//! process, the call run once, the printed offline checks run as printed), a clean Ctrl-C, and
//! the demo software key refused by every service but the demo's.

use crate::support::{
    Approver, BIN, KillOnDrop, Server, code, scratch_dir, stderr, stdout, write_config,
};
use countersign::b64;
use countersign_server::demo::{DEMO_AAGUID, DEMO_PRINCIPAL};
use countersign_softkey::{Alg, Attestation, Ceremony, RegistrationRequest, SoftKey};
use countersign_testkit::{ORIGIN, RP_ID};
use serde_json::{Value, json};
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// Bounds a hang only; nothing here asserts how fast anything is.
const HANG: Duration = Duration::from_secs(600);

/// A running `countersign demo` whose stdout lines arrive on a channel.
struct Demo {
    process: KillOnDrop,
    lines: mpsc::Receiver<String>,
    /// Every line read so far.
    seen: Vec<String>,
    data: PathBuf,
}

impl Demo {
    /// `countersign demo` on a free loopback port with the built-in tool server (no Node
    /// needed), in `DIR/demo`.
    fn start(dir: &Path) -> Self {
        Self::start_with(dir, "builtin", Path::new("."))
    }

    /// `countersign demo --mcp-server SERVER` run from `cwd`, in `DIR/demo`.
    fn start_with(dir: &Path, server: &str, cwd: &Path) -> Self {
        let data = dir.join("demo");
        let mut process = KillOnDrop(
            Command::new(BIN)
                .args(["demo", "--listen", "127.0.0.1:0", "--mcp-server", server])
                .arg("--data-dir")
                .arg(&data)
                .current_dir(cwd)
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .unwrap(),
        );
        let out = process.0.stdout.take().unwrap();
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                if send.send(line.unwrap()).is_err() {
                    break;
                }
            }
        });
        Self {
            process,
            lines,
            seen: Vec::new(),
            data: data.canonicalize().unwrap_or(data),
        }
    }

    /// Read until a line containing `text`; that line.
    fn until(&mut self, text: &str) -> String {
        loop {
            let line = self
                .lines
                .recv_timeout(HANG)
                .unwrap_or_else(|_| panic!("no line with {text:?} in {:#?}", self.seen));
            self.seen.push(line.clone());
            if line.contains(text) {
                return line;
            }
        }
    }

    /// Wait for the exit: its code and everything it printed.
    fn finish(mut self) -> (i32, String) {
        let status = self.process.0.wait().unwrap();
        self.seen.extend(self.lines.iter());
        (status.code().unwrap_or(-1), self.seen.join("\n"))
    }
}

/// The printed command `countersign PREFIX …` (the binary named by its full path when it is
/// not on PATH, as for these tests), run as printed: the paths in it have no spaces (the
/// scratch directory has none).
fn run_printed(output: &str, prefix: &str) -> std::process::Output {
    let line = output
        .lines()
        .map(str::trim)
        .find(|l| {
            l.split_once(' ').is_some_and(|(program, rest)| {
                program.ends_with("countersign") && rest.starts_with(prefix)
            })
        })
        .unwrap_or_else(|| panic!("no `countersign {prefix}` command printed:\n{output}"));
    let mut words = line.split_whitespace();
    let program = words.next().unwrap();
    assert_eq!(
        std::fs::canonicalize(program).unwrap(),
        std::fs::canonicalize(BIN).unwrap(),
        "the printed command names this binary"
    );
    Command::new(program).args(words).output().unwrap()
}

/// `countersign serve` on a free port, logging only warnings (its refusals are expected here).
fn quiet_server(data: &Path, config: &Path) -> Server {
    Server::spawn_with("127.0.0.1:0", data, config, None, |c| {
        c.env("COUNTERSIGN_LOG", "warn");
    })
}

fn approve(data: &Path) -> std::process::Output {
    Command::new(BIN)
        .args(["demo", "approve", "--data-dir"])
        .arg(data)
        .output()
        .unwrap()
}

#[test]
fn demo_approve_runs_the_held_call_once_and_the_printed_checks_pass() {
    let dir = scratch_dir("demo");
    let (data, _) = approve_and_check(Demo::start(&dir));

    // The same data directory served by `countersign serve` is not the demo: the demo key is
    // refused at login, so `demo approve` gets nowhere.
    let serve = quiet_server(&data, &data.join("config.toml"));
    let state_file = data.join("demo.json");
    let mut state: Value = serde_json::from_slice(&std::fs::read(&state_file).unwrap()).unwrap();
    state["service"] = json!(serve.base);
    std::fs::write(&state_file, state.to_string()).unwrap();
    let refused = approve(&data);
    assert_eq!(code(&refused), 1, "{}", stdout(&refused));
    assert!(
        stderr(&refused).contains("only the demo's own service accepts it"),
        "{}",
        stderr(&refused)
    );
    drop(serve);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
#[ignore = "needs Node and the pinned MCP peers (cd tests/mcp && npm ci), as .ci/steps/mcp.sh \
            installs them; run with --ignored"]
fn the_demo_runs_in_front_of_the_reference_filesystem_server() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = scratch_dir("demo-node");
    let (_, output) = approve_and_check(Demo::start_with(&dir, "filesystem", &root));
    assert!(
        output.contains("@modelcontextprotocol/server-filesystem"),
        "{output}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Follow a demo through: the relayed call, the held call and its link, `demo approve`, the
/// call run once, and the offline checks run as printed: the data directory and everything the
/// demo printed.
fn approve_and_check(mut demo: Demo) -> (PathBuf, String) {
    demo.until("1. The agent calls list_directory: relayed");
    let listed = demo.until("[FILE] notes.txt");
    assert!(listed.contains("[FILE] notes.txt"), "{listed}");
    demo.until("2. The agent calls write_file");
    demo.until("open this link");
    let link = demo.until("/approve/apv_");
    assert!(link.trim().starts_with("http://localhost:"), "{link}");
    demo.until("countersign demo approve --data-dir");
    let hello = demo.data.join("workspace/hello.txt");
    assert!(!hello.exists(), "a held call must not run before approval");

    let data = demo.data.clone();
    let approved = approve(&data);
    assert_eq!(code(&approved), 0, "{}", stderr(&approved));
    let said = stdout(&approved);
    assert!(
        said.contains(&format!("Signed in as: {DEMO_PRINCIPAL}")),
        "{said}"
    );
    assert!(said.contains("\"tool_name\": \"write_file\""), "{said}");

    let (exit, output) = demo.finish();
    assert_eq!(exit, 0, "{output}");
    assert!(
        output.contains(&format!("Decided: APPROVED, signed by {DEMO_PRINCIPAL}")),
        "{output}"
    );
    assert!(output.contains("Successfully wrote to"), "{output}");
    assert!(
        std::fs::read_to_string(&hello)
            .unwrap()
            .starts_with("Hello from an agent"),
    );
    // The third identical call was held anew, not run: one execution in the interposer's log.
    let mcp_log = std::fs::read_to_string(data.join("mcp-audit.jsonl")).unwrap();
    let executed = mcp_log
        .lines()
        .filter(|l| l.contains("\"outcome\":\"executed\""))
        .count();
    assert_eq!(executed, 1, "{mcp_log}");

    // The offline checks, exactly as printed.
    let verified = run_printed(&output, "verify");
    assert_eq!(code(&verified), 0, "{}", stderr(&verified));
    let verdict: Value = serde_json::from_slice(&verified.stdout).unwrap();
    assert_eq!(verdict["effective"], "ALLOW");
    // The software key verified nobody: user presence only, and the verdict says so.
    assert_eq!(verdict["identity_assurance"]["level"], "AAL1");
    assert_eq!(
        verdict["identity_assurance"]["basis"]["user_verified"],
        false
    );
    assert_eq!(verdict["approvers"][0]["principal"], DEMO_PRINCIPAL);
    let audited = run_printed(&output, "audit verify");
    assert_eq!(code(&audited), 0, "{}", stderr(&audited));
    let report = stdout(&audited);
    assert!(
        report.contains("cross-check valid: 1 executed held call(s), 1 grant(s)"),
        "{report}"
    );

    (data, output)
}

#[test]
fn a_refusal_with_demo_approve_deny_runs_nothing_and_is_evidence_too() {
    let dir = scratch_dir("demo-deny");
    let mut demo = Demo::start(&dir);
    demo.until("countersign demo approve --data-dir");
    let data = demo.data.clone();
    let refused = Command::new(BIN)
        .args(["demo", "approve", "--deny", "--data-dir"])
        .arg(&data)
        .output()
        .unwrap();
    assert_eq!(code(&refused), 0, "{}", stderr(&refused));
    assert!(stdout(&refused).contains("Refused with the demo software key"));
    let (exit, output) = demo.finish();
    assert_eq!(exit, 1, "{output}");
    assert!(output.contains("Decided: DENIED"), "{output}");
    assert!(
        output.contains("Not run: refused (approver_refused)"),
        "{output}"
    );
    assert!(!data.join("workspace/hello.txt").exists());
    let verified = run_printed(&output, "verify");
    assert_eq!(code(&verified), 1, "{}", stderr(&verified));
    let verdict: Value = serde_json::from_slice(&verified.stdout).unwrap();
    assert_eq!(verdict["effective"], "DENY");
    assert_eq!(verdict["reason_code"], "approver_refused");
    assert_eq!(verdict["approvers"][0]["principal"], DEMO_PRINCIPAL);
    let audited = run_printed(&output, "audit verify");
    assert_eq!(code(&audited), 0, "{}", stderr(&audited));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn ctrl_c_stops_the_demo_cleanly_and_withdraws_the_waiting_call() {
    let dir = scratch_dir("demo-stop");
    let mut demo = Demo::start(&dir);
    demo.until("Waiting for the decision");
    let pid = demo.process.0.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .unwrap()
            .success()
    );
    let data = demo.data.clone();
    let (exit, output) = demo.finish();
    assert_eq!(exit, 0, "{output}");
    assert!(output.contains("Stopped (Ctrl-C)"), "{output}");
    assert!(!data.join("workspace/hello.txt").exists());
    // Both logs end cleanly: the interposer wrote its close line, nothing is left unsigned, and
    // the call nobody approved was withdrawn.
    let mcp_log = std::fs::read_to_string(data.join("mcp-audit.jsonl")).unwrap();
    assert!(mcp_log.contains("\"mcp_close\""), "{mcp_log}");
    let out = Command::new(BIN)
        .args(["audit", "verify"])
        .arg(data.join("audit.jsonl"))
        .arg("--key")
        .arg(data.join("service-key.pub"))
        .arg("--config")
        .arg(data.join("config.toml"))
        .arg("--interposer-log")
        .arg(data.join("mcp-audit.jsonl"))
        .arg("--interposer-key")
        .arg(data.join("mcp-audit.key.pub"))
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    let service_log = std::fs::read_to_string(data.join("audit.jsonl")).unwrap();
    assert!(service_log.contains("cancelled"), "{service_log}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_demo_refuses_an_address_without_a_domain_and_a_used_directory() {
    let dir = scratch_dir("demo-usage");
    let out = Command::new(BIN)
        .args(["demo", "--listen", "0.0.0.0:0", "--data-dir"])
        .arg(dir.join("fresh"))
        .output()
        .unwrap();
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("loopback address only"),
        "{}",
        stderr(&out)
    );
    std::fs::write(dir.join("something"), "x").unwrap();
    let out = Command::new(BIN)
        .args(["demo", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("is not empty"), "{}", stderr(&out));
    let out = approve(&dir);
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("is not the data directory of a running `countersign demo`"),
        "{}",
        stderr(&out)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The demo key as `countersign demo` makes it (its AAGUID), from a fixed seed.
fn demo_key() -> SoftKey {
    SoftKey::from_seed(Alg::Es256, [9; 32])
        .unwrap()
        .with_aaguid(DEMO_AAGUID.0)
}

#[tokio::test]
async fn a_service_that_is_not_the_demo_refuses_the_demo_key_at_enrollment_and_login() {
    let dir = scratch_dir("demo-refused");
    // Imported into an ordinary service's registry: by its AAGUID, and by its name alone.
    let mut by_aaguid = Approver::new("mallory", "carol-es256", false);
    by_aaguid.key = demo_key();
    let by_name = Approver::new(DEMO_PRINCIPAL, "bob-es256", false);
    let ordinary = Approver::new("alice", "alice-es256", false);
    let config = write_config(&dir, &[&ordinary, &by_name], "");
    let mut doc: Value =
        serde_json::from_slice(&std::fs::read(dir.join("registry.json")).unwrap()).unwrap();
    let mut record =
        serde_json::to_value(countersign_testkit::enroll(&by_aaguid.key, "mallory")).unwrap();
    record["aaguid"] = json!(DEMO_AAGUID.to_string());
    doc["credentials"].as_array_mut().unwrap().push(record);
    std::fs::write(dir.join("registry.json"), doc.to_string()).unwrap();
    let server = quiet_server(&dir.join("data"), &config);
    let api = crate::support::Api::new(&server.base);

    api.login(&ordinary).await;
    for demo in [&by_aaguid, &by_name] {
        let (status, body) = api.try_login(demo).await;
        assert_eq!(status, 401, "{body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("demo software key"),
            "{body}"
        );
    }

    // Enrollment through an invite: an ordinary software key enrolls, the demo key does not.
    let http = reqwest::Client::new();
    let enroll = |key: SoftKey, principal: &'static str| {
        let (http, base, data, config) = (
            http.clone(),
            server.base.clone(),
            server.data.clone(),
            config.clone(),
        );
        async move {
            let out = Command::new(BIN)
                .args(["enroll", "invite", "--principal", principal, "--data-dir"])
                .arg(&data)
                .arg("--config")
                .arg(&config)
                .output()
                .unwrap();
            assert_eq!(code(&out), 0, "{}", stderr(&out));
            let link = stdout(&out);
            let token = link.trim().rsplit_once('#').unwrap().1.to_owned();
            let post = |path: &str, body: Value| {
                http.post(format!("{base}{path}"))
                    .header("origin", ORIGIN)
                    .json(&body)
                    .send()
            };
            let started: Value = post("/v1/enroll/start", json!({"invite": token}))
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            let challenge = b64::decode(
                started["options"]["publicKey"]["challenge"]
                    .as_str()
                    .unwrap(),
            )
            .unwrap();
            let credential = key
                .register(&RegistrationRequest {
                    attestation: Attestation::None,
                    ..RegistrationRequest::from(Ceremony::create(RP_ID, ORIGIN, challenge))
                })
                .unwrap()
                .to_json();
            let finished = post(
                "/v1/enroll/finish",
                json!({"invite": token, "credential": credential}),
            )
            .await
            .unwrap();
            let status = finished.status().as_u16();
            (status, finished.json::<Value>().await.unwrap())
        }
    };
    let (status, body) = enroll(SoftKey::from_seed(Alg::Es256, [8; 32]).unwrap(), "carol").await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = enroll(demo_key(), "eve").await;
    assert_eq!(status, 401, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("only the demo's own service accepts it"),
        "{body}"
    );
    drop(server);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The browser path: a person enrolls their own passkey through the demo's invite link and
/// approves on the approver page (Chromium with a virtual authenticator, driven over
/// WebDriver). Named `demo::browser::…` so that `.ci/steps/browser.sh` (`browser::`, with
/// `--include-ignored`) runs it.
mod browser {
    use super::{Demo, run_printed};
    use crate::browser::{Browser, CHROMEDRIVER, CHROMIUM, artifacts, wait_for};
    use crate::support::{code, scratch_dir, stderr};
    use serde_json::Value;
    use std::path::Path;

    #[test]
    #[ignore = "needs Debian's chromium and chromium-driver (.ci/steps/browser.sh installs them and runs it)"]
    fn a_passkey_enrolled_through_the_demo_approves_the_held_call_in_chromium() {
        assert!(
            Path::new(CHROMIUM).exists() && Path::new(CHROMEDRIVER).exists(),
            "{CHROMIUM} or {CHROMEDRIVER} is missing: apt-get install chromium chromium-driver"
        );
        let dir = scratch_dir("demo-browser");
        let mut demo = Demo::start(&dir);
        demo.until("open this link");
        let approve_link = demo.until("/approve/apv_").trim().to_owned();
        let enroll = demo.until("enroll it first at");
        let invite = enroll
            .split_whitespace()
            .find(|w| w.contains("/enroll#"))
            .unwrap()
            .to_owned();
        demo.until("Waiting for the decision");

        let shots = artifacts();
        let (_driver, browser) = Browser::launch(&dir.join("chromium-profile"), shots);
        browser.add_authenticator();

        // The person enrolls their passkey through the invite the demo printed…
        browser.goto(&invite);
        browser.wait_visible("invite");
        assert_eq!(browser.text("principal"), "you (your own passkey)");
        browser.click("register");
        wait_for("enrollment outcome", || {
            (browser.visible("done") || browser.visible("error")).then_some(())
        });
        assert!(
            browser.visible("done"),
            "enrollment: {}",
            browser.text("error")
        );

        // …and approves the held call on the page the demo linked to.
        browser.goto(&approve_link);
        browser.wait_visible("step1");
        browser.click("signin");
        browser.wait_visible("step2");
        let fields = browser.text("fields");
        for shown in ["write_file", "demo-agent", "hello.txt"] {
            assert!(fields.contains(shown), "{shown} missing from {fields}");
        }
        browser.screenshot("demo-01-review");
        browser.click("approve");
        browser.wait_visible("outcome");
        assert!(browser.text("outcome-text").contains("APPROVED"));
        browser.screenshot("demo-02-approved");

        let (exit, output) = demo.finish();
        assert_eq!(exit, 0, "{output}");
        assert!(
            output.contains("Decided: APPROVED, signed by you (your own passkey)"),
            "{output}"
        );
        assert!(output.contains("Successfully wrote to"), "{output}");
        let verified = run_printed(&output, "verify");
        assert_eq!(code(&verified), 0, "{}", stderr(&verified));
        let verdict: Value = serde_json::from_slice(&verified.stdout).unwrap();
        assert_eq!(verdict["effective"], "ALLOW");
        assert_eq!(
            verdict["approvers"][0]["principal"],
            "you (your own passkey)"
        );
        // A passkey that verified its user: AAL2 (no attestation was verified at enrollment).
        assert_eq!(verdict["identity_assurance"]["level"], "AAL2");
        let audited = run_printed(&output, "audit verify");
        assert_eq!(code(&audited), 0, "{}", stderr(&audited));
        drop(browser);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
