//! End to end in a real browser: Debian's headless Chromium, driven over WebDriver by
//! chromedriver, with a virtual CTAP2 authenticator (user verification on).
//!
//! The real `countersign` binary serves; `countersign enroll invite` prints the link; the page
//! enrolls the virtual key; two actions are approved and refused through the page; both results
//! are verified offline by `countersign verify` against `countersign registry export`. A second,
//! unenrolled authenticator cannot sign in, and the page before sign-in shows no parameter.
//! Screenshots of each step go to `target/e2e-artifacts/`.
//!
//! The walk runs on a desktop window and on a phone (Chromium's mobile emulation at 360 × 740).
//! Before every screenshot the page is measured from inside the browser (no sideways scrolling,
//! 44 px targets, every mark and field on the screen) and the console is read for errors; the
//! WebAuthn hints each ceremony carried are checked against the device.
//!
//! It needs `/usr/bin/chromium` and `/usr/bin/chromedriver`, so it is ignored unless asked for
//! (the test runner lists it as ignored, with the reason): `.ci/steps/browser.sh` installs both
//! and runs it with `--include-ignored`, where a missing browser fails it.

use crate::support;

use serde_json::{Value, json};
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::{BIN, KillOnDrop, Server, run, run_with_data_dir, stderr};

pub(crate) const CHROMIUM: &str = "/usr/bin/chromium";
pub(crate) const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";
/// How long any one step may take before the test fails (polled, never slept through).
const STEP_TIMEOUT: Duration = Duration::from_secs(60);

const ACCOUNT_A: &str = "DE89 3704 0044 0532 0130 00";
const AMOUNT_A: &str = "40000.00";
const ACCOUNT_B: &str = "GB33BUKB2020155555555\u{200B}5";

/// A file name that a right-to-left override shows as "invoiceexe.pdf" when not isolated.
const SPOOFED_FILE: &str = "invoice\u{202E}fdp.exe";
/// "payments.transfer" with a Cyrillic small a (U+0430).
const SPOOFED_TOOL: &str = "p\u{0430}yments.transfer";

/// A script answering whether the text `start` (in the first text node under `root` holding it)
/// is laid out left to right: each character is drawn right of the one before it on the same
/// line, or on a lower line where the text wraps (as it does on a narrow screen). Layout, not the
/// DOM order, is what a bidi control changes, so the rendered boxes are compared.
fn reads_left_to_right(root: &str, start: &str) -> String {
    format!(
        "const root = document.querySelector({root:?});
         const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
         const start = {start:?};
         for (let n = walker.nextNode(); n; n = walker.nextNode()) {{
           const i = n.data.indexOf(start);
           if (i < 0) continue;
           const box = (k) => {{
             const r = document.createRange();
             r.setStart(n, k);
             r.setEnd(n, k + 1);
             return r.getBoundingClientRect();
           }};
           for (let k = i; k + 1 < i + start.length; k++) {{
             const a = box(k), b = box(k + 1);
             const sameLine = Math.abs(a.top - b.top) < a.height / 2;
             if (sameLine ? !(a.left < b.left) : !(b.top > a.top)) return false;
           }}
           return true;
         }}
         return 'not found';"
    )
}

pub(crate) fn artifacts() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    let dir = target.join("e2e-artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    // Chromium's DevToolsActivePort handshake fails with a `..` in --user-data-dir.
    dir.canonicalize().unwrap()
}

pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One HTTP/1.1 exchange over a fresh connection (WebDriver and the service both speak it).
pub(crate) fn http(addr: &str, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    http_as(addr, method, path, body, None)
}

/// [`http`] with `Authorization: Bearer TOKEN` (a gateway's calls).
fn http_as(
    addr: &str,
    method: &str,
    path: &str,
    body: Option<&Value>,
    bearer: Option<&str>,
) -> (u16, Value) {
    let mut stream = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    stream.set_read_timeout(Some(STEP_TIMEOUT)).unwrap();
    let payload = body.map(Value::to_string).unwrap_or_default();
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    if let Some(token) = bearer {
        req.push_str(&format!("Authorization: Bearer {token}\r\n"));
    }
    if body.is_some() {
        req.push_str("Content-Type: application/json\r\n");
    }
    req.push_str(&format!(
        "Content-Length: {}\r\n\r\n{payload}",
        payload.len()
    ));
    stream.write_all(req.as_bytes()).unwrap();
    let mut reader = BufReader::new(stream);
    let mut status_line = String::new();
    reader.read_line(&mut status_line).unwrap();
    let status: u16 = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
    let mut chunked = false;
    let mut length: Option<usize> = None;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        if line == "\r\n" || line.is_empty() {
            break;
        }
        let lower = line.to_ascii_lowercase();
        if lower.starts_with("transfer-encoding:") && lower.contains("chunked") {
            chunked = true;
        }
        if let Some(v) = lower.strip_prefix("content-length:") {
            length = v.trim().parse().ok();
        }
    }
    let mut raw = Vec::new();
    if chunked {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size).unwrap();
            let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
            if n == 0 {
                break;
            }
            let mut chunk = vec![0; n + 2];
            reader.read_exact(&mut chunk).unwrap();
            raw.extend_from_slice(&chunk[..n]);
        }
    } else if let Some(n) = length {
        // chromedriver keeps the connection open whatever the request says: read exactly.
        raw.resize(n, 0);
        reader.read_exact(&mut raw).unwrap();
    } else {
        reader.read_to_end(&mut raw).unwrap();
    }
    let value = if raw.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&raw)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&raw).into()))
    };
    (status, value)
}

/// Poll `f` until it returns `Some`, failing after [`STEP_TIMEOUT`].
pub(crate) fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + STEP_TIMEOUT;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The screen a page is driven on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Device {
    /// A desktop window, 1000 × 1300 CSS px, with a USB security key.
    Desktop,
    /// A phone: Chromium's own mobile emulation, 360 × 740 CSS px at 3 device pixels each,
    /// touch, a phone's user agent and client hints, with the phone's own (internal)
    /// authenticator.
    Phone,
}

/// The phone the mobile emulation presents (an Android Chrome user agent).
const PHONE_USER_AGENT: &str = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 \
    (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36";

impl Device {
    /// The prefix of this device's screenshot names.
    fn prefix(self) -> &'static str {
        match self {
            Self::Desktop => "",
            Self::Phone => "phone-",
        }
    }

    /// The WebAuthn hints the service sends this device (countersign_server::hints).
    fn hints(self) -> Value {
        match self {
            Self::Desktop => json!(["security-key", "hybrid", "client-device"]),
            Self::Phone => json!(["client-device", "security-key", "hybrid"]),
        }
    }

    /// `goog:chromeOptions.mobileEmulation`, for the phone.
    fn emulation(self) -> Option<Value> {
        (self == Self::Phone).then(|| {
            json!({
                "deviceMetrics": {"width": 360, "height": 740, "pixelRatio": 3.0,
                    "touch": true, "mobile": true},
                "userAgent": PHONE_USER_AGENT,
                "clientHints": {"platform": "Android", "mobile": true},
            })
        })
    }
}

/// A WebDriver session.
pub(crate) struct Browser {
    pub(crate) driver: String,
    pub(crate) session: String,
    pub(crate) shots: PathBuf,
    pub(crate) device: Device,
}

/// A script listing what a person on this screen could not use: sideways scrolling of the page,
/// a control smaller than 44 × 44 CSS px (a fingertip, WCAG 2.5.5), any shown element (every
/// deceptive-character mark and every field among them) reaching outside the viewport's width,
/// or content wider than the box holding it (scrolling inside it, or drawn over its neighbours).
/// Measured in the laid-out page, as the person sees it.
const LAYOUT_PROBLEMS: &str = "
    const problems = [];
    const vw = window.innerWidth;
    const root = document.documentElement;
    if (root.scrollWidth > vw) problems.push('the page scrolls sideways: ' + root.scrollWidth + ' > ' + vw);
    const shown = (e) => e.getClientRects().length > 0 && getComputedStyle(e).visibility !== 'hidden';
    const name = (e) => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '')
      + (typeof e.className === 'string' && e.className ? '.' + e.className.trim().split(/\\s+/).join('.') : '')
      + ' ' + JSON.stringify((e.textContent || '').trim().slice(0, 40));
    for (const e of document.querySelectorAll('button, a[href], summary, input, select, textarea')) {
      if (!shown(e)) continue;
      const r = e.getBoundingClientRect();
      if (r.width < 44 || r.height < 44) problems.push('target ' + name(e) + ' is ' + r.width.toFixed(1) + ' x ' + r.height.toFixed(1));
    }
    for (const e of document.body.querySelectorAll('*')) {
      if (!shown(e)) continue;
      const r = e.getBoundingClientRect();
      if (r.left < -0.5 || r.right > vw + 0.5) problems.push(name(e) + ' spans ' + r.left.toFixed(1) + '..' + r.right.toFixed(1) + ' of ' + vw);
      // Content wider than its box: it scrolls sideways inside it, or spills over its neighbours.
      if (e.clientWidth > 0 && e.scrollWidth > e.clientWidth + 1) problems.push(name(e) + ' holds content ' + e.scrollWidth + ' px wide in ' + e.clientWidth);
    }
    return problems;";

impl Browser {
    /// chromedriver on a free port, and a new headless Chromium session on it with virtual
    /// WebAuthn authenticators enabled and its profile in `profile`: the driver process (killed
    /// on drop) and the session.
    pub(crate) fn launch(profile: &Path, shots: PathBuf) -> (KillOnDrop, Self) {
        Self::launch_on(Device::Desktop, profile, shots)
    }

    /// [`Browser::launch`] on `device`.
    pub(crate) fn launch_on(device: Device, profile: &Path, shots: PathBuf) -> (KillOnDrop, Self) {
        let driver_port = free_port();
        let process = KillOnDrop(
            Command::new(CHROMEDRIVER)
                .arg(format!("--port={driver_port}"))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let driver = format!("127.0.0.1:{driver_port}");
        wait_for("chromedriver", || {
            TcpStream::connect(&driver).ok().and_then(|_| {
                (http(&driver, "GET", "/status", None).1["value"]["ready"] == true).then_some(())
            })
        });
        let mut options = json!({
            "binary": CHROMIUM,
            "args": [
                "--headless=new", "--no-sandbox", "--disable-gpu",
                "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--no-first-run", "--disable-quic",
                "--window-size=1000,1300",
                format!("--user-data-dir={}", profile.display()),
            ],
        });
        if let Some(emulation) = device.emulation() {
            options["mobileEmulation"] = emulation;
        }
        let (status, created) = http(
            &driver,
            "POST",
            "/session",
            Some(&json!({"capabilities": {"alwaysMatch": {
                "browserName": "chrome",
                "webauthn:virtualAuthenticators": true,
                "goog:loggingPrefs": {"browser": "ALL"},
                "goog:chromeOptions": options,
            }}})),
        );
        assert_eq!(status, 200, "new session: {created}");
        let session = created["value"]["sessionId"].as_str().unwrap().to_owned();
        (
            process,
            Self {
                driver,
                session,
                shots,
                device,
            },
        )
    }

    fn cmd(&self, method: &str, path: &str, body: Option<&Value>) -> Value {
        let (status, v) = http(
            &self.driver,
            method,
            &format!("/session/{}{path}", self.session),
            body,
        );
        assert_eq!(status, 200, "WebDriver {method} {path}: {v}");
        v["value"].clone()
    }

    pub(crate) fn goto(&self, url: &str) {
        self.cmd("POST", "/url", Some(&json!({"url": url})));
    }

    pub(crate) fn js(&self, script: &str) -> Value {
        self.cmd(
            "POST",
            "/execute/sync",
            Some(&json!({"script": script, "args": []})),
        )
    }

    pub(crate) fn visible(&self, id: &str) -> bool {
        self.js(&format!(
            "const e = document.getElementById('{id}'); return !!e && !e.hidden;"
        ))
        .as_bool()
            == Some(true)
    }

    pub(crate) fn wait_visible(&self, id: &str) {
        wait_for(&format!("#{id} to show"), || self.visible(id).then_some(()));
    }

    pub(crate) fn text(&self, id: &str) -> String {
        self.js(&format!(
            "return document.getElementById('{id}').innerText;"
        ))
        .as_str()
        .unwrap_or_default()
        .to_owned()
    }

    /// Assert that `#id`'s text contains `needle`; the failure message is the text.
    fn assert_text_contains(&self, id: &str, needle: &str) {
        let text = self.text(id);
        assert!(text.contains(needle), "{text}");
    }

    pub(crate) fn click(&self, id: &str) {
        let el = self.cmd(
            "POST",
            "/element",
            Some(&json!({"using": "css selector", "value": format!("#{id}")})),
        );
        let eid = el[ELEMENT_KEY].as_str().unwrap().to_owned();
        self.cmd("POST", &format!("/element/{eid}/click"), Some(&json!({})));
    }

    /// Save what the page shows as `NAME.png` (prefixed with the device), after checking that
    /// it is usable on this screen and that the page raised no false alarm in the console.
    pub(crate) fn screenshot(&self, name: &str) {
        let problems = self.js(LAYOUT_PROBLEMS);
        assert_eq!(
            problems,
            json!([]),
            "{name} on {:?}: {}",
            self.device,
            self.js("return location.href;")
        );
        self.assert_quiet_console(name);
        let b64 = self.cmd("GET", "/screenshot", None);
        let png = base64::Engine::decode(
            &base64::engine::general_purpose::STANDARD,
            b64.as_str().unwrap(),
        )
        .unwrap();
        let file = format!("{}{name}.png", self.device.prefix());
        std::fs::write(self.shots.join(file), png).unwrap();
    }

    /// No error in the browser's console since the last look, but the network's notes on the
    /// answers the page expects: 401 while it checks for a session before sign-in or when an
    /// unenrolled key tries, 410 for a spent invite.
    fn assert_quiet_console(&self, step: &str) {
        let log = self.cmd("POST", "/se/log", Some(&json!({"type": "browser"})));
        let alarms: Vec<&Value> = log
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["level"] == "SEVERE")
            .filter(|e| {
                let text = e["message"].as_str().unwrap_or_default();
                !(e["source"] == "network"
                    && ["status of 401", "status of 410"]
                        .iter()
                        .any(|s| text.contains(s)))
            })
            .collect();
        assert!(alarms.is_empty(), "console errors by {step}: {alarms:?}");
    }

    /// Record the `hints` of every `navigator.credentials` call this page makes from now on
    /// (read with [`Browser::recorded_hints`]).
    pub(crate) fn record_hints(&self) {
        self.js("window.recordedHints = [];
             for (const m of ['create', 'get']) {
               const real = navigator.credentials[m].bind(navigator.credentials);
               navigator.credentials[m] = (o) => {
                 window.recordedHints.push([m, o.publicKey.hints]);
                 return real(o);
               };
             }
             return null;");
    }

    pub(crate) fn recorded_hints(&self) -> Value {
        self.js("return window.recordedHints;")
    }

    /// A virtual CTAP2 authenticator with user verification: a USB security key on the
    /// desktop, the phone's own (internal) authenticator on the phone.
    pub(crate) fn add_authenticator(&self) -> String {
        let transport = match self.device {
            Device::Desktop => "usb",
            Device::Phone => "internal",
        };
        let v = self.cmd(
            "POST",
            "/webauthn/authenticator",
            Some(&json!({
                "protocol": "ctap2",
                "transport": transport,
                "hasResidentKey": true,
                "hasUserVerification": true,
                "isUserConsenting": true,
                "isUserVerified": true,
            })),
        );
        v.as_str().unwrap().to_owned()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = http(
            &self.driver,
            "DELETE",
            &format!("/session/{}", self.session),
            None,
        );
    }
}

/// PKCS#8 of a P-256 private scalar (RFC 5208 around RFC 5915, no public key).
fn p256_pkcs8(scalar: [u8; 32]) -> Vec<u8> {
    let mut der =
        hex_bytes("3041020100301306072a8648ce3d020106082a8648ce3d030107042730250201010420");
    der.extend_from_slice(&scalar);
    der
}

fn hex_bytes(h: &str) -> Vec<u8> {
    (0..h.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap())
        .collect()
}

fn b64url(bytes: &[u8]) -> String {
    base64::Engine::encode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, bytes)
}

#[test]
#[ignore = "needs Debian's chromium and chromium-driver (.ci/steps/browser.sh installs them and runs it)"]
fn enroll_approve_refuse_and_verify_offline_in_chromium() {
    walk_through(Device::Desktop);
}

/// The same walk on a phone's screen: every step also measured for sideways scrolling, small
/// targets and marks off the screen (in [`Browser::screenshot`]).
#[test]
#[ignore = "needs Debian's chromium and chromium-driver (.ci/steps/browser.sh installs them and runs it)"]
fn enroll_approve_refuse_and_verify_offline_on_a_phone_in_chromium() {
    walk_through(Device::Phone);
}

/// Enroll, sign in, review, approve, refuse, the inbox and a standing grant, through the page
/// on `device`; both results verified offline.
fn walk_through(device: Device) {
    assert!(
        Path::new(CHROMIUM).exists() && Path::new(CHROMEDRIVER).exists(),
        "{CHROMIUM} or {CHROMEDRIVER} is missing: apt-get install chromium chromium-driver"
    );
    let shots = artifacts();
    let work = shots.join(format!("run-{}-{device:?}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();

    // --- the service, on http://localhost:PORT (a secure context for WebAuthn) ---
    let port = free_port();
    let origin = format!("http://localhost:{port}");
    let data = work.join("data");
    let config = work.join("countersign.toml");
    std::fs::write(
        &config,
        format!(
            "rp_id = \"localhost\"\norigins = [\"{origin}\"]\npublic_url = \"{origin}\"\n\
             [groups]\npayments = []\n\
             [[tools]]\nname = \"payments.transfer\"\napprovers = [\"payments\"]\nseverity = \"high\"\n"
        ),
    )
    .unwrap();
    // Its first line on stdout says where it listens (asserted by `Server::spawn`).
    let _server = Server::spawn(&format!("127.0.0.1:{port}"), &data, &config, None);
    let service = format!("127.0.0.1:{port}");

    // --- the operator adds the agent's gateway; the running service picks it up ---
    let gateway = support::add_gateway(&data, None, "browser-agent");
    wait_for("the gateway token", || {
        let (status, _) = http_as(
            &service,
            "GET",
            "/v1/approvals/apv_probe",
            None,
            Some(&gateway),
        );
        (status == 404).then_some(())
    });

    // --- the operator invites alice ---
    let out = Command::new(BIN)
        .args([
            "enroll",
            "invite",
            "--principal",
            "alice@example.com",
            "--group",
            "payments",
        ])
        .arg("--data-dir")
        .arg(&data)
        .arg("--config")
        .arg(&config)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let invite_url = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    assert!(
        invite_url.starts_with(&format!("{origin}/enroll#")),
        "{invite_url}"
    );

    // --- chromedriver and a fresh Chromium profile ---
    let (_driver, browser) =
        Browser::launch_on(device, &work.join("chromium-profile"), shots.clone());
    let enrolled_authenticator = browser.add_authenticator();

    // --- step 0: enrollment through the invite ---
    browser.goto(&invite_url);
    browser.wait_visible("invite");
    assert_eq!(browser.text("principal"), "alice@example.com");
    assert!(
        !browser
            .js("return location.href;")
            .as_str()
            .unwrap()
            .contains('#'),
        "the invite token is taken out of the address bar"
    );
    browser.screenshot("01-enroll-invite");
    browser.record_hints();
    browser.click("register");
    wait_for("enrollment outcome", || {
        (browser.visible("done") || browser.visible("error")).then_some(())
    });
    assert!(
        browser.visible("done"),
        "enrollment failed: {}",
        browser.text("error")
    );
    assert!(browser.text("done-text").contains("alice@example.com"));
    assert_eq!(
        browser.recorded_hints(),
        json!([["create", device.hints()]])
    );
    browser.screenshot("02-enrolled");

    // The invite is spent.
    browser.goto("about:blank");
    browser.goto(&invite_url);
    browser.wait_visible("error");
    browser.assert_text_contains("error", "already used");
    browser.screenshot("02b-invite-spent");

    // --- two actions from an agent ---
    let create = |params: Value| -> String {
        let (status, r) = http_as(
            &service,
            "POST",
            "/v1/approvals",
            Some(
                &json!({"agent_id": "agent-7", "tool_name": "payments.transfer", "params": params}),
            ),
            Some(&gateway),
        );
        assert_eq!(status, 200, "{r}");
        assert_eq!(r["status"], "PENDING", "{r}");
        r["approval_id"].as_str().unwrap().to_owned()
    };
    // A memo over two lines, as a text field often is: its line breaks are layout, no alarm.
    let params_a =
        json!({"to": ACCOUNT_A, "amount": AMOUNT_A, "memo": "Invoice 2026-114\nwith thanks\n"});
    let params_b = json!({"to": ACCOUNT_B, "amount": "99.00"});
    let id_a = create(params_a.clone());
    let id_b = create(params_b.clone());

    // --- approve A: before sign-in the page shows nothing material ---
    browser.goto(&format!("{origin}/approve/{id_a}"));
    browser.wait_visible("step1");
    wait_for("the summary", || {
        (browser.text("severity") == "high").then_some(())
    });
    let html = browser.js("return document.documentElement.outerHTML;");
    let html = html.as_str().unwrap();
    for secret in [
        ACCOUNT_A,
        AMOUNT_A,
        "agent-7",
        "payments.transfer",
        "Invoice",
    ] {
        assert!(!html.contains(secret), "{secret} shown before sign-in");
    }
    assert!(!browser.visible("step2") && !browser.visible("step3"));
    browser.screenshot("03-before-sign-in");
    browser.record_hints();
    browser.click("signin");
    browser.wait_visible("step2");
    let table = browser.text("fields");
    for shown in [
        ACCOUNT_A,
        AMOUNT_A,
        "Invoice 2026-114",
        "agent-7",
        "payments.transfer",
    ] {
        assert!(table.contains(shown), "{shown} missing from {table}");
    }
    assert!(!browser.visible("banner"), "nothing deceptive in A");
    // The memo's two line breaks are drawn quietly, and the text is kept: no deceptive badge.
    let quiet = browser.js(
        "return [document.querySelectorAll('#fields .quiet.line').length, document.querySelectorAll('#fields mark.deceptive').length];",
    );
    assert_eq!(quiet, json!([2, 0]));
    // The amount is shown exactly, with a grouped reading aid beside it.
    let grouped = browser.js(
        "return Array.from(document.querySelectorAll('#fields .grouped .num')).map(e => e.textContent);",
    );
    assert_eq!(grouped, json!(["40\u{2009}000.00"]));
    browser.screenshot("04-review");
    browser.click("approve");
    browser.wait_visible("outcome");
    browser.assert_text_contains("outcome-text", "APPROVED");
    // Sign-in and the decision both asked with this device's hints.
    assert_eq!(
        browser.recorded_hints(),
        json!([["get", device.hints()], ["get", device.hints()]])
    );
    browser.screenshot("05-approved");

    // --- refuse B, whose account holds a zero-width space: marked ---
    browser.goto(&format!("{origin}/approve/{id_b}"));
    wait_for("B's sign-in or review", || {
        (browser.visible("step1") || browser.visible("step2")).then_some(())
    });
    if browser.visible("step1") {
        browser.click("signin");
    }
    browser.wait_visible("step2");
    assert!(
        browser.visible("banner"),
        "the deceptive character must raise the banner"
    );
    let marks = browser
        .js("return Array.from(document.querySelectorAll('mark.deceptive')).map(m => m.title);");
    assert!(marks.to_string().contains("U+200B"), "{marks}");
    browser.screenshot("06-review-marked");
    // The fields and the decision, as a phone shows them once scrolled to (docs/img).
    browser.js("document.getElementById('title').scrollIntoView(); return null;");
    browser.screenshot("06b-review-marked-fields");
    browser.click("refuse");
    browser.wait_visible("outcome");
    browser.assert_text_contains("outcome-text", "REFUSED");
    browser.screenshot("07-refused");

    // --- a request built to deceive: a right-to-left override in a file name, a Cyrillic "а"
    // in the tool name. Both are marked in the JSON view and the sentence, and the override
    // reorders nothing: the text after it and its badge are laid out left to right. ---
    let (status, r) = http_as(
        &service,
        "POST",
        "/v1/approvals",
        Some(&json!({"agent_id": "agent-7", "tool_name": SPOOFED_TOOL,
            "params": {"attachment": SPOOFED_FILE}})),
        Some(&gateway),
    );
    assert_eq!((status, &r["status"]), (200, &json!("PENDING")), "{r}");
    let id_d = r["approval_id"].as_str().unwrap().to_owned();
    browser.goto(&format!("{origin}/approve/{id_d}"));
    wait_for("D's sign-in or review", || {
        (browser.visible("step1") || browser.visible("step2")).then_some(())
    });
    if browser.visible("step1") {
        browser.click("signin");
    }
    browser.wait_visible("step2");
    assert!(browser.visible("banner"));
    browser.js("document.querySelector('details').open = true; return null;");
    // Without the badges, the JSON view holds the exact signed text.
    let raw = browser.js("const c = document.getElementById('raw').cloneNode(true);
         c.querySelectorAll('.cp').forEach(e => e.remove());
         return c.textContent;");
    let raw = raw.as_str().unwrap();
    assert!(raw.contains(SPOOFED_FILE), "{raw}");
    assert!(raw.contains(SPOOFED_TOOL), "{raw}");
    let raw_marks =
        browser.js("return Array.from(document.querySelectorAll('#raw mark')).map(m => m.title);");
    assert_eq!(
        raw_marks,
        json!(["U+202E RIGHT-TO-LEFT OVERRIDE", "U+0430 looks like \"a\""])
    );
    let who_marks =
        browser.js("return Array.from(document.querySelectorAll('#who mark')).map(m => m.title);");
    assert_eq!(
        who_marks,
        json!(["U+0430 looks like \"a\""]),
        "{}",
        browser.text("who")
    );
    let who = browser.js("const c = document.getElementById('who').cloneNode(true);
         c.querySelectorAll('.cp').forEach(e => e.remove());
         return c.textContent;");
    assert!(
        who.as_str()
            .unwrap()
            .contains(&format!("for tool {SPOOFED_TOOL} (")),
        "{who}"
    );
    for (root, start) in [
        ("#raw", "fdp.exe"),
        ("#fields", "fdp.exe"),
        ("#raw mark.bidi .cp", "U+202E RIGHT-TO-LEFT OVERRIDE"),
        ("#fields mark.bidi .cp", "U+202E RIGHT-TO-LEFT OVERRIDE"),
    ] {
        assert_eq!(
            browser.js(&reads_left_to_right(root, start)),
            json!(true),
            "{start:?} in {root} is laid out right to left"
        );
    }
    browser.screenshot("07b-review-spoofed");

    // --- offline verification of both results against the exported registry ---
    let export = run_with_data_dir(&["registry", "export"], &data);
    assert!(export.status.success());
    let registry: Value = serde_json::from_slice(&export.stdout).unwrap();
    assert_eq!(registry["credentials"][0]["principal"], "alice@example.com");
    let (status, _) = http(&service, "GET", "/v1/credentials", None);
    assert_eq!(status, 401, "the registry is for gateways unless published");
    let (_, http_registry) = http_as(&service, "GET", "/v1/credentials", None, Some(&gateway));
    assert_eq!(http_registry, registry);
    // The CASE a gateway about to run `tool` would verify, under `policy` (the service's
    // eligible approvers for the payment tool by default).
    let verify_as = |name: &str, id: &str, params: &Value, tool: &str, policy: Value| {
        let (_, result) = http_as(
            &service,
            "GET",
            &format!("/v1/approvals/{id}"),
            None,
            Some(&gateway),
        );
        let now = result["approver_evidence"][0]["assertion_at"].clone();
        let case = json!({
            "action": {"profile": "countersign.tool-call/1", "tool": tool, "fields": {
                "agent_id": "agent-7", "tool_name": "payments.transfer", "params": params}},
            "result": result,
            "registry": registry,
            "policy": policy,
            "now": now,
        });
        let path = work.join(format!("{id}.case.json"));
        std::fs::write(&path, case.to_string()).unwrap();
        // Kept as artifacts: anyone can re-run `countersign verify` on them.
        std::fs::copy(&path, shots.join(format!("{name}.case.json"))).unwrap();
        let out = run(&["verify", path.to_str().unwrap()]);
        (
            out.status.code().unwrap(),
            serde_json::from_slice::<Value>(&out.stdout).unwrap(),
        )
    };
    let service_policy = json!({"rp_id": "localhost", "origins": [origin],
        "approvers": ["alice@example.com"]});
    let verify = |name: &str, id: &str, params: &Value| {
        verify_as(
            name,
            id,
            params,
            "payments.transfer",
            service_policy.clone(),
        )
    };
    let (code, verdict) = verify("approved", &id_a, &params_a);
    assert_eq!(code, 0, "{verdict}");
    assert_eq!(verdict["effective"], "ALLOW");
    assert_eq!(verdict["approvers"][0]["principal"], "alice@example.com");
    let (code, verdict) = verify("refused", &id_b, &params_b);
    assert_eq!(code, 1, "{verdict}");
    assert_eq!(verdict["reason_code"], "approver_refused");
    assert_eq!(verdict["approvers"][0]["principal"], "alice@example.com");
    // A's evidence does not verify for another account.
    let mut swapped = params_a.clone();
    swapped["to"] = json!("DE89 3704 0044 0532 0130 01");
    let (code, verdict) = verify("approved-other-account", &id_a, &swapped);
    assert_eq!(
        (code, verdict["reason_code"].as_str()),
        (1, Some("binding_mismatch"))
    );
    // Nor for another tool: the tool-call profile signs the tool name.
    let (code, verdict) = verify_as(
        "approved-other-tool",
        &id_a,
        &params_a,
        "payments.transfer.v2",
        service_policy.clone(),
    );
    assert_eq!(
        (code, verdict["reason_code"].as_str()),
        (1, Some("binding_mismatch")),
        "{verdict}"
    );
    // A verifier whose policy names other approvers refuses alice's evidence offline.
    let (code, verdict) = verify_as(
        "approved-ineligible",
        &id_a,
        &params_a,
        "payments.transfer",
        json!({"rp_id": "localhost", "origins": [origin], "approvers": ["bob@example.com"]}),
    );
    assert_eq!(
        (code, verdict["reason_code"].as_str()),
        (1, Some("approver_ineligible")),
        "{verdict}"
    );

    // --- the inbox and a standing grant, through the page ---
    // A gateway proposes a standing grant: payments.transfer by agent-7 up to 100.00, twice.
    let (status, r) = http_as(
        &service,
        "POST",
        "/v1/standing-grants",
        Some(
            &json!({"agent_id": "agent-7", "tool_name": "payments.transfer",
            "constraints": [{"kind": "max", "arg": "/amount", "max": "100.00"}],
            "max_uses": 2, "expires_at": "2099-01-01T00:00:00Z"}),
        ),
        Some(&gateway),
    );
    assert_eq!((status, &r["status"]), (200, &json!("PENDING")), "{r}");
    let grant = r["approval_id"].as_str().unwrap().to_owned();
    // Signed out, the inbox lists nothing.
    browser.cmd("DELETE", "/cookie", None);
    browser.goto(&format!("{origin}/approve"));
    browser.wait_visible("step1");
    assert!(!browser.visible("inbox") && !browser.visible("summary"));
    let html = browser.js("return document.documentElement.outerHTML;");
    assert!(
        !html.as_str().unwrap().contains(&grant),
        "listed before sign-in"
    );
    browser.screenshot("09-inbox-before-sign-in");
    browser.click("signin");
    browser.wait_visible("inbox");
    // Newest first: the proposal, then the spoofed request still pending.
    let rows = browser.js(
        "return Array.from(document.querySelectorAll('#inbox-pending tbody tr')).map(r => r.dataset.id);",
    );
    assert_eq!(rows[0], json!(grant), "{rows}");
    assert!(rows.as_array().unwrap().contains(&json!(id_d)), "{rows}");
    browser.assert_text_contains("inbox-pending", "standing grant");
    assert!(browser.visible("grants-empty"));
    browser.screenshot("10-inbox");

    // The proposal in full, with the standing-grant banner; approved with the same ceremony.
    browser.goto(&format!("{origin}/approve/{grant}"));
    browser.wait_visible("step2");
    assert!(browser.visible("standing-banner"));
    browser.assert_text_contains("standing-banner", "at most 2 times");
    // The gateway whose calls it covers is named before anyone signs.
    browser.assert_text_contains("standing-banner", "browser-agent");
    let table = browser.text("fields");
    for shown in ["agent-7", "payments.transfer", "/amount", "100.00", "max"] {
        assert!(table.contains(shown), "{shown} missing from {table}");
    }
    browser.screenshot("11-standing-review");
    browser.click("approve");
    browser.wait_visible("outcome");
    browser.assert_text_contains("outcome-text", "APPROVED");

    // A covered call is approved at once with the grant's evidence and its use number, and
    // verifies offline; one outside the scope waits for a human.
    let params_e = json!({"to": ACCOUNT_A, "amount": "40.00"});
    let (status, r) = http_as(
        &service,
        "POST",
        "/v1/approvals",
        Some(&json!({"agent_id": "agent-7", "tool_name": "payments.transfer", "params": params_e})),
        Some(&gateway),
    );
    assert_eq!((status, &r["status"]), (200, &json!("APPROVED")), "{r}");
    assert_eq!(r["standing_grant"]["use"], 1, "{r}");
    let id_e = r["approval_id"].as_str().unwrap().to_owned();
    let (code, verdict) = verify("standing-covered", &id_e, &params_e);
    assert_eq!(code, 0, "{verdict}");
    assert_eq!(verdict["approvers"][0]["principal"], "alice@example.com");
    let over = create(json!({"to": ACCOUNT_A, "amount": "100.01"}));
    assert!(over.starts_with("apv_"));

    // The inbox lists alice's grant with its uses; she revokes it from its page.
    browser.goto(&format!("{origin}/approve"));
    browser.wait_visible("inbox");
    browser.assert_text_contains("inbox-grants", "1 of 2");
    browser.goto(&format!("{origin}/approve/{grant}"));
    browser.wait_visible("revoke");
    browser.screenshot("12-standing-in-force");
    browser.click("revoke");
    wait_for("the revocation", || {
        browser
            .text("standing-details")
            .contains("Revoked")
            .then_some(())
    });
    assert!(!browser.visible("revoke"));
    browser.screenshot("13-standing-revoked");
    let (_, r) = http_as(
        &service,
        "POST",
        "/v1/approvals",
        Some(&json!({"agent_id": "agent-7", "tool_name": "payments.transfer", "params": params_e})),
        Some(&gateway),
    );
    assert_eq!(
        r["status"], "PENDING",
        "a revoked grant approves nothing: {r}"
    );

    // --- a second authenticator, not enrolled, holding its own credential for this site ---
    browser.cmd(
        "DELETE",
        &format!("/webauthn/authenticator/{enrolled_authenticator}"),
        None,
    );
    let stranger = browser.add_authenticator();
    browser.cmd(
        "POST",
        &format!("/webauthn/authenticator/{stranger}/credential"),
        Some(&json!({
            "credentialId": b64url(b"not-enrolled-credential-0001"),
            "isResidentCredential": true,
            "rpId": "localhost",
            "privateKey": b64url(&p256_pkcs8([0x11; 32])),
            "userHandle": b64url(b"mallory"),
            "signCount": 0,
        })),
    );
    browser.cmd("DELETE", "/cookie", None);
    let id_c = create(json!({"to": ACCOUNT_A, "amount": "1.00"}));
    browser.goto(&format!("{origin}/approve/{id_c}"));
    browser.wait_visible("step1");
    browser.click("signin");
    browser.wait_visible("error");
    browser.assert_text_contains("error", "not enrolled");
    assert!(
        !browser.visible("step2"),
        "no parameters for an unenrolled key"
    );
    browser.screenshot("08-unenrolled-refused");
    let (_, c) = http_as(
        &service,
        "GET",
        &format!("/v1/approvals/{id_c}"),
        None,
        Some(&gateway),
    );
    assert_eq!(c["status"], "PENDING");
    eprintln!("browser e2e: screenshots in {}", shots.display());
    let _ = std::fs::remove_dir_all(&work);
}

/// `enroll invite` without a browser: where it refuses, and that a link is single-line stdout.
#[test]
fn enroll_invite_needs_a_data_dir_and_a_defined_group() {
    let work = artifacts().join(format!("invite-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    let data = work.join("data");
    // `countersign enroll invite --principal a@example.com ARGS --data-dir DATA`
    let invite = |args: &[&str]| {
        let args = [&["enroll", "invite", "--principal", "a@example.com"], args].concat();
        run_with_data_dir(&args, &data)
    };

    // Not a data directory yet.
    let out = invite(&[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("not a countersign data directory"));

    // A data directory as `serve` leaves it: the service key.
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("service-key"), b64url(&[7; 32])).unwrap();
    // No record of a start and no --config: nothing says where the link points.
    let out = invite(&[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--config"), "{}", stderr(&out));
    let out = invite(&[
        "--group",
        "nope",
        "--public-url",
        "https://approve.example.org/",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("not defined"));

    let out = invite(&[
        "--expires-in",
        "60",
        "--public-url",
        "https://approve.example.org/",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let url = String::from_utf8(out.stdout).unwrap();
    assert_eq!(url.lines().count(), 1);
    assert!(
        url.starts_with("https://approve.example.org/enroll#"),
        "{url}"
    );
    // Two invites never share a token.
    let again = invite(&["--public-url", "https://approve.example.org/"]);
    assert_ne!(String::from_utf8(again.stdout).unwrap(), url);
    let _ = std::fs::remove_dir_all(&work);
}
