//! README.md, run as a new user would run it: every ```sh block in order, on a port the system
//! picks instead of 8080, in a scratch directory, with this build's `countersign` in place of
//! `cargo run --release [-q] -p countersign-cli --` (and of the `countersign` alias).
//!
//! Each command is held to what its comment promises: [`EXPECTED`] lists, in README order, a
//! piece of each command's text, its exit code and words its output must contain (or files it
//! must write). A README command without an expectation, or an expectation left without its
//! command, fails the test: the README and this list change together.
//!
//! A block the test must not run carries a marker on the line before its fence, with the reason:
//! `<!-- readme-test: skip (why) -->` (GitHub does not render it). Where the README has a person
//! act in a browser, the test acts instead ([`Hook`]): it redeems the enrollment link and approves
//! the pending request with a software authenticator, on the origin the service derived from its
//! listen address (`http://localhost:PORT`), so the later audit commands see honest evidence.
//!
//! `.ci/steps/readme.sh` runs this module alone with its output shown.

use crate::support::{BIN, KillOnDrop, scratch_dir};
use countersign::b64;
use countersign_softkey::{Alg, AssertionRequest, Ceremony, RegistrationRequest, SoftKey};
use serde_json::{Value, json};
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The marker that makes the test skip the next block.
const SKIP_MARKER: &str = "<!-- readme-test: skip";

/// The longest any one README command may take here (the build is already done).
const COMMAND_TIMEOUT_SECONDS: u32 = 120;

/// What one README command must do.
struct Expect {
    /// A piece of the command's text, to find it (and to notice the README changed).
    command: &'static str,
    run: Run,
    /// What the test does in the person's place once the command succeeded.
    then: Option<Hook>,
}

enum Run {
    /// Exit code, words in stdout or stderr (`PORT` stands for the service's port), and files
    /// (relative to the working directory) that must contain a word.
    Check {
        exit: i32,
        words: &'static [&'static str],
        files: &'static [(&'static str, &'static str)],
    },
    /// Not run, with the reason.
    Skip(&'static str),
    /// `countersign serve`: started in the background, kept until the test ends.
    Serve,
}

#[derive(Clone, Copy)]
enum Hook {
    /// Open the printed enrollment link and register a key, as the browser would.
    Enroll,
    /// Sign in and approve the approval the output names, as the approver page would.
    Approve,
    /// Wait until the running service knows the token the command wrote to this file: it reads
    /// tokens the CLI added on its next refresh (every half second), as a person never notices.
    UntilKnown(&'static str, &'static str),
}

const fn ok(words: &'static [&'static str]) -> Run {
    Run::Check {
        exit: 0,
        words,
        files: &[],
    }
}

const fn writes(files: &'static [(&'static str, &'static str)]) -> Run {
    Run::Check {
        exit: 0,
        words: &[],
        files,
    }
}

const fn fails(exit: i32, words: &'static [&'static str]) -> Run {
    Run::Check {
        exit,
        words,
        files: &[],
    }
}

const fn plain(command: &'static str, run: Run) -> Expect {
    Expect {
        command,
        run,
        then: None,
    }
}

const EXPECTED: &[Expect] = &[
    // Two commands
    plain("approve-account-a.case.json --pretty", ok(&["ALLOW"])),
    plain(
        "cargo test --workspace",
        Run::Skip("CI runs the workspace's tests itself"),
    ),
    // A two-minute tour
    plain("approve-account-a.case.json", ok(&["ALLOW", "AAL2"])),
    plain(
        "replay-to-account-b.case.json",
        fails(1, &["DENY", "binding_mismatch"]),
    ),
    plain(
        "refuse-account-a.case.json",
        fails(1, &["DENY", "approver_refused", "alice"]),
    ),
    plain(
        "flipped-decision.case.json",
        fails(1, &["binding_mismatch"]),
    ),
    plain("countersign op-hash", ok(&[])),
    // The approval service, step by step
    plain("serve --listen 127.0.0.1:8080", Run::Serve),
    Expect {
        command: "gateway add my-gateway",
        run: writes(&[("my-gateway.token", "csg_")]),
        then: Some(Hook::UntilKnown(
            "my-gateway.token",
            "/v1/approvals/apv_none",
        )),
    },
    Expect {
        command: "enroll invite --principal alice@example.com",
        run: ok(&["http://localhost:PORT/enroll#"]),
        then: Some(Hook::Enroll),
    },
    plain("credential list", ok(&["alice@example.com"])),
    Expect {
        command: "/v1/approvals \\",
        run: Run::Check {
            exit: 0,
            words: &["PENDING", "http://localhost:PORT/v1/approvals/"],
            files: &[("pending.json", "redrive_url")],
        },
        then: Some(Hook::Approve),
    },
    plain("?wait=30", ok(&["APPROVED", "approver_evidence"])),
    plain(
        "audit verify ./countersign-data/audit.jsonl",
        ok(&["valid", "http://localhost:PORT"]),
    ),
    plain(
        "/v1/audit/checkpoint > today.cp",
        writes(&[("today.cp", "localhost:PORT/countersign/audit")]),
    ),
    plain(
        "--checkpoint today.cp",
        ok(&["valid", "checkpoint_covered"]),
    ),
    plain("proof/inclusion?seq=3", writes(&[("p.json", "leaf_hash")])),
    plain(
        "sed -n 3p",
        writes(&[("line3.json", "\"kind\":\"outcome\"")]),
    ),
    plain(
        "audit prove inclusion",
        ok(&["included: line 3 is in the log"]),
    ),
    Expect {
        command: "auditor add compliance",
        run: writes(&[("compliance.token", "csa_")]),
        then: Some(Hook::UntilKnown(
            "compliance.token",
            "/v1/audit/lines?limit=1",
        )),
    },
    plain(
        "audit fetch",
        writes(&[("audit.jsonl", "\"kind\":\"decision\"")]),
    ),
    plain("> new.toml", writes(&[("new.toml", "finance")])),
    plain("audit recheck", fails(1, &["newly_denied", "would change"])),
    plain("preauth list", ok(&[])),
];

/// One command of a README block, with the comment lines above it.
#[derive(Debug)]
struct ReadmeCommand {
    text: String,
    comment: String,
}

/// The commands of every ```sh block not marked with [`SKIP_MARKER`], in order. A line ending
/// in `\` continues on the next; `alias countersign=…` lines are set-up, provided here.
fn commands(readme: &str) -> Vec<ReadmeCommand> {
    let mut out = Vec::new();
    let (mut in_block, mut skip, mut skip_next) = (false, false, false);
    let (mut comment, mut text) = (String::new(), String::new());
    for line in readme.lines() {
        if !in_block {
            if line.trim_start().starts_with(SKIP_MARKER) {
                skip_next = true;
            } else if line.starts_with("```") {
                in_block = true;
                skip = skip_next || line.trim() != "```sh";
                skip_next = false;
            } else if !line.trim().is_empty() {
                skip_next = false;
            }
            continue;
        }
        if line.starts_with("```") {
            in_block = false;
            comment.clear();
            continue;
        }
        if skip {
            continue;
        }
        if text.is_empty() && line.trim_start().starts_with('#') {
            comment.push_str(line.trim_start().trim_start_matches('#').trim());
            comment.push(' ');
            continue;
        }
        if text.is_empty() && (line.trim().is_empty() || line.starts_with("alias countersign=")) {
            continue;
        }
        text.push_str(line);
        if line.ends_with('\\') {
            text.push('\n');
            continue;
        }
        out.push(ReadmeCommand {
            text: std::mem::take(&mut text),
            comment: std::mem::take(&mut comment),
        });
    }
    out
}

/// The command as the test runs it: this build's binary, the service's port.
fn rewrite(text: &str, port: Option<u16>) -> String {
    let text = text
        .replace(
            "cargo run --release -q -p countersign-cli --",
            "\"$COUNTERSIGN_BIN\"",
        )
        .replace(
            "cargo run --release -p countersign-cli --",
            "\"$COUNTERSIGN_BIN\"",
        );
    match port {
        Some(port) => text.replace("8080", &port.to_string()),
        None => text.replace("127.0.0.1:8080", "127.0.0.1:0"),
    }
}

/// The README's working directory: fresh, with the repository's fixtures where the tour finds
/// them.
fn workdir() -> PathBuf {
    let dir = scratch_dir("readme");
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    std::os::unix::fs::symlink(fixtures.canonicalize().unwrap(), dir.join("fixtures")).unwrap();
    dir
}

/// Run one command under bash with a time limit: (exit code, stdout and stderr).
fn sh(dir: &Path, text: &str) -> (i32, String) {
    let script = format!("countersign() {{ \"$COUNTERSIGN_BIN\" \"$@\"; }}\n{text}");
    let out = Command::new("timeout")
        .arg(COMMAND_TIMEOUT_SECONDS.to_string())
        .args(["bash", "-o", "pipefail", "-c", &script])
        .current_dir(dir)
        .env("COUNTERSIGN_BIN", BIN)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

/// Start `countersign serve` from the README's command on a port the system picks; returns the
/// process and the port once it printed its settings.
fn serve(dir: &Path, text: &str) -> (KillOnDrop, u16, String) {
    let mut child = Command::new("bash")
        .args(["-c", &format!("exec {}", rewrite(text, None))])
        .current_dir(dir)
        .env("COUNTERSIGN_BIN", BIN)
        // Its per-request log would drown the test's output; warnings still show.
        .env("COUNTERSIGN_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let child = KillOnDrop(child);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if tx.send(line.unwrap_or_default()).is_err() {
                break;
            }
        }
    });
    let mut printed = String::new();
    loop {
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("serve printed no settings in 60 s:\n{printed}"));
        printed.push_str(&line);
        printed.push('\n');
        if line.starts_with("countersign: API at") {
            break;
        }
    }
    let port = printed
        .split("listening on http://127.0.0.1:")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in:\n{printed}"));
    (child, port, printed)
}

/// The approver's software authenticator, on the page's origin.
struct Person {
    key: SoftKey,
    origin: String,
    base: String,
    http: reqwest::Client,
}

impl Person {
    fn new(port: u16) -> Self {
        Self {
            key: SoftKey::from_seed(Alg::Es256, [7; 32]).unwrap(),
            origin: format!("http://localhost:{port}"),
            base: format!("http://127.0.0.1:{port}"),
            http: reqwest::Client::new(),
        }
    }

    async fn post(&self, path: &str, bearer: Option<&str>, body: &Value) -> Value {
        let mut request = self
            .http
            .post(format!("{}{path}", self.base))
            .header("origin", &self.origin)
            .json(body);
        if let Some(token) = bearer {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.unwrap();
        let status = response.status();
        let body: Value = response.json().await.unwrap();
        assert!(status.is_success(), "{path}: {status} {body}");
        body
    }

    fn sign(&self, challenge: &Value) -> Value {
        let challenge = b64::decode(challenge.as_str().unwrap()).unwrap();
        let r = self
            .key
            .assert(&AssertionRequest::from(Ceremony {
                // No signature counter, as passkeys that sync report.
                sign_count: 0,
                ..Ceremony::get("localhost", &self.origin, challenge)
            }))
            .unwrap();
        json!({
            "credential_id": b64::encode(&r.credential_id),
            "client_data_json": b64::encode(&r.client_data_json),
            "authenticator_data": b64::encode(&r.authenticator_data),
            "signature": b64::encode(&r.signature),
        })
    }

    /// Open the link: the ceremony the enrollment page runs, for rp_id `localhost`.
    async fn enroll(&self, link: &str) {
        let token = link.split_once("/enroll#").unwrap().1.trim();
        let started = self
            .post("/v1/enroll/start", None, &json!({"invite": token}))
            .await;
        let options = &started["options"]["publicKey"];
        assert_eq!(options["rp"]["id"], "localhost", "{started}");
        let challenge = b64::decode(options["challenge"].as_str().unwrap()).unwrap();
        let credential = self
            .key
            .register(&RegistrationRequest::from(Ceremony::create(
                "localhost",
                &self.origin,
                challenge,
            )))
            .unwrap()
            .to_json();
        self.post(
            "/v1/enroll/finish",
            None,
            &json!({"invite": token, "credential": credential}),
        )
        .await;
    }

    /// Sign in and approve `id`, as on the approver page.
    async fn approve(&self, id: &str) {
        let c = self
            .post("/v1/approver/login/challenge", None, &json!({}))
            .await;
        let session = self
            .post("/v1/approver/login", None, &self.sign(&c["challenge"]))
            .await;
        let session = session["token"].as_str().unwrap();
        let path = format!("/v1/approver/approvals/{id}");
        let c = self
            .post(
                &format!("{path}/challenge"),
                Some(session),
                &json!({"decision": "APPROVED"}),
            )
            .await;
        self.post(
            &format!("{path}/decision"),
            Some(session),
            &self.sign(&c["challenge"]),
        )
        .await;
    }
}

impl Person {
    /// Poll `path` with the token in `file` until the answer is not 401.
    async fn until_known(&self, file: &Path, path: &str) {
        let token = std::fs::read_to_string(file).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let status = self
                .http
                .get(format!("{}{path}", self.base))
                .bearer_auth(token.trim())
                .send()
                .await
                .unwrap()
                .status();
            if status != reqwest::StatusCode::UNAUTHORIZED {
                return;
            }
            // The deadline only bounds a hang; it asserts nothing about speed.
            assert!(std::time::Instant::now() < deadline, "{path}: still 401");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

fn act(hook: Hook, person: &Person, dir: &Path, output: &str) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    match hook {
        Hook::Enroll => {
            let link = output
                .lines()
                .find(|l| l.contains("/enroll#"))
                .unwrap_or_else(|| panic!("no link in {output}"));
            runtime.block_on(person.enroll(link));
        }
        Hook::Approve => {
            let start = output.find('{').unwrap();
            let answer: Value = serde_json::from_str(output[start..].trim()).unwrap();
            runtime.block_on(person.approve(answer["approval_id"].as_str().unwrap()));
        }
        Hook::UntilKnown(file, path) => runtime.block_on(person.until_known(&dir.join(file), path)),
    }
}

#[test]
fn every_readme_command_does_what_its_comment_says_on_another_port() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let found = commands(&readme);
    let dir = workdir();
    let mut service: Option<(KillOnDrop, u16)> = None;
    let mut person = None;
    for (n, command) in found.iter().enumerate() {
        let expect = EXPECTED.get(n).unwrap_or_else(|| {
            panic!(
                "README command {} has no expectation in tests/it/readme.rs:\n{}",
                n + 1,
                command.text
            )
        });
        assert!(
            command.text.contains(expect.command),
            "README command {} is\n  {}\nbut the next expectation is for `{}`: update EXPECTED",
            n + 1,
            command.text,
            expect.command
        );
        let port = service.as_ref().map(|(_, p)| *p);
        let shown = port.map_or(String::new(), |p| p.to_string());
        eprintln!("readme: [{}] {}", n + 1, rewrite(&command.text, port));
        match &expect.run {
            Run::Skip(why) => eprintln!("readme:     skipped: {why}"),
            Run::Serve => {
                let (child, port, printed) = serve(&dir, &command.text);
                let page = format!("approver page http://localhost:{port}/approve");
                assert!(printed.contains(&page), "{printed}");
                assert!(printed.contains("rp_id localhost"), "{printed}");
                person = Some(Person::new(port));
                service = Some((child, port));
            }
            Run::Check { exit, words, files } => {
                let (code, output) = sh(&dir, &rewrite(&command.text, port));
                let context = format!(
                    "README command {} ({}):\n  {}\nexit {code}, output:\n{output}",
                    n + 1,
                    command.comment.trim(),
                    command.text
                );
                assert_eq!(code, *exit, "{context}");
                for word in *words {
                    let word = word.replace("PORT", &shown);
                    assert!(output.contains(&word), "missing {word:?} in {context}");
                }
                assert!(!output.contains("VIOLATION"), "{context}");
                for (file, word) in *files {
                    let text = std::fs::read_to_string(dir.join(file)).unwrap_or_default();
                    let word = word.replace("PORT", &shown);
                    assert!(
                        text.contains(&word),
                        "{file} lacks {word:?}: {text}\n{context}"
                    );
                }
                if let (Some(hook), Some(person)) = (expect.then, &person) {
                    act(hook, person, &dir, &output);
                }
            }
        }
    }
    assert_eq!(
        found.len(),
        EXPECTED.len(),
        "expectations left without a README command: the first is `{}`",
        EXPECTED.get(found.len()).map_or("", |e| e.command)
    );
    drop(service);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn marked_blocks_and_other_languages_are_not_run_and_continuations_join() {
    let text = "intro\n```sh\n# one\necho a \\\n  b\nalias countersign='x'\n\n# two\necho c\n```\n\
                <!-- readme-test: skip (a reason) -->\n```sh\necho skipped\n```\n\
                ```rust\nlet x = 1;\n```\n```sh\necho d\n```\n";
    let found = commands(text);
    let texts: Vec<&str> = found.iter().map(|c| c.text.as_str()).collect();
    assert_eq!(texts, vec!["echo a \\\n  b", "echo c", "echo d"]);
    assert_eq!(found[0].comment.trim(), "one");
    assert_eq!(found[1].comment.trim(), "two");
    // The marker covers only the block right after it.
    let text = "<!-- readme-test: skip (x) -->\n\nprose\n```sh\necho runs\n```\n";
    assert_eq!(commands(text).len(), 1);
}
