//! Notification channels, the durable outbox, reminders, escalation and extensions, against
//! real HTTP receivers started here (and a real SMTP server, `aiosmtpd`, in the ignored test).

use crate::support::{Approver, START, TestApp};
use axum::Router;
use axum::extract::Path;
use axum::http::HeaderMap;
use axum::routing::post;
use countersign::Decision;
use countersign_server::{AppState, Config, ManualClock, StateParts};
use countersign_testkit::{ORIGIN, RP_ID};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// Values of the call that must never leave the service in a notification.
const SECRETS: [&str; 5] = [
    "IBAN-DE89-SECRET-370400440532013000",
    "40000.00",
    "quarterly-bonus-memo",
    "agent-7",
    "payments.transfer",
];

fn secret_params() -> Value {
    json!({"to": SECRETS[0], "amount": SECRETS[1], "memo": SECRETS[2]})
}

/// One request a receiver got.
#[derive(Debug, Clone)]
struct Received {
    /// The receiver path: which channel.
    path: String,
    key: Option<String>,
    body: String,
}

/// HTTP receivers on 127.0.0.1:0: `/ok/{name}` answers 200 and records; `/stall/{name}`
/// records and never answers.
struct Receivers {
    base: String,
    seen: Arc<Mutex<Vec<Received>>>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for Receivers {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl Receivers {
    async fn start() -> Self {
        let seen = Arc::new(Mutex::new(Vec::<Received>::new()));
        let record = |seen: Arc<Mutex<Vec<Received>>>, path: String, h: &HeaderMap, body| {
            let key = h
                .get("idempotency-key")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            seen.lock().unwrap().push(Received { path, key, body });
        };
        let (ok, stall) = (seen.clone(), seen.clone());
        let router = Router::new()
            .route(
                "/ok/{name}",
                post(
                    move |Path(name): Path<String>, h: HeaderMap, body: String| {
                        let seen = ok.clone();
                        async move { record(seen, format!("ok/{name}"), &h, body) }
                    },
                ),
            )
            .route(
                "/stall/{name}",
                post(
                    move |Path(name): Path<String>, h: HeaderMap, body: String| {
                        let seen = stall.clone();
                        async move {
                            record(seen, format!("stall/{name}"), &h, body);
                            std::future::pending::<()>().await;
                        }
                    },
                ),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Self { base, seen, server }
    }

    /// Everything `path` got so far.
    fn of(&self, path: &str) -> Vec<Received> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.path == path)
            .cloned()
            .collect()
    }

    /// Wait (bounded) until `path` has got `n` requests; returns them.
    async fn wait_for(&self, path: &str, n: usize) -> Vec<Received> {
        for _ in 0..600 {
            let got = self.of(path);
            if got.len() >= n {
                return got;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("{path} got {:?}, expected {n}", self.of(path));
    }
}

/// A file holding `url`, for a channel's `url_file` (the only ways to give a secret are a file
/// or an environment variable).
fn url_file(label: &str, url: &str) -> String {
    let dir =
        std::env::temp_dir().join(format!("countersign-notify-{label}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("url");
    std::fs::write(&path, format!("{url}\n")).unwrap();
    path.display().to_string()
}

/// The test service's configuration (the default 300 s window) with `extra` TOML appended.
fn config_with(extra: &str) -> Config {
    Config::from_toml(&format!(
        r#"
        rp_id = "{RP_ID}"
        origins = ["{ORIGIN}"]
        [groups]
        finance = ["alice", "bob"]
        leads = ["bob"]
        {extra}
        "#
    ))
    .unwrap()
}

fn channel(name: &str, kind: &str, url: &str) -> String {
    format!(
        "[[notify.channels]]\nname = \"{name}\"\nkind = \"{kind}\"\nurl_file = {:?}\n",
        url_file(name, url)
    )
}

/// The payment tool with extra rule lines.
fn payment_tool(extra: &str) -> String {
    format!(
        "[[tools]]\nname = \"payments.transfer\"\napprovers = [\"finance\", \"leads\"]\n\
         severity = \"high\"\nprofile = \"countersign.payment/1\"\n{extra}\n"
    )
}

/// Keep a received body for the payload validation step (.ci/steps/notify.sh), when asked to.
fn keep_payload(name: &str, body: &str) {
    if let Some(dir) = std::env::var_os("COUNTERSIGN_NOTIFY_PAYLOADS") {
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(std::path::Path::new(&dir).join(name), body).unwrap();
    }
}

fn assert_no_parameters(what: &str, text: &str) {
    for secret in SECRETS {
        assert!(!text.contains(secret), "{what} carries {secret:?}: {text}");
    }
}

#[tokio::test]
async fn slack_teams_and_the_webhook_each_get_the_notice_without_any_parameter() {
    let rx = Receivers::start().await;
    let config = config_with(&format!(
        "{}{}{}{}{}",
        channel("ops-slack", "slack", &format!("{}/ok/slack", rx.base)),
        channel("ops-teams", "teams", &format!("{}/ok/teams", rx.base)),
        channel("hook", "webhook", &format!("{}/ok/hook", rx.base)),
        channel("stuck", "webhook", &format!("{}/stall/stuck", rx.base)),
        payment_tool(""),
    ));
    let app = TestApp::start(config, &[&Approver::alice()]).await;
    let id = app.create_pending(secret_params()).await;
    let approver_url = app.url(&format!("/approve/{id}"));

    let slack = rx.wait_for("ok/slack", 1).await;
    let teams = rx.wait_for("ok/teams", 1).await;
    let hook = rx.wait_for("ok/hook", 1).await;
    let stuck = rx.wait_for("stall/stuck", 1).await;
    for (what, r) in [
        ("slack", &slack[0]),
        ("teams", &teams[0]),
        ("webhook", &hook[0]),
        ("stalled webhook", &stuck[0]),
    ] {
        assert_no_parameters(what, &r.body);
    }
    keep_payload("slack.json", &slack[0].body);
    keep_payload("teams.json", &teams[0].body);
    keep_payload("webhook.json", &hook[0].body);

    // Slack: Block Kit, one button to this approval's page, the time left shown.
    let s: Value = serde_json::from_str(&slack[0].body).unwrap();
    let blocks = s["blocks"].as_array().unwrap();
    assert!(blocks.len() <= 50);
    assert_eq!(blocks[0]["type"], "header");
    let button = &blocks[2]["elements"][0];
    assert_eq!(button["type"], "button");
    assert_eq!(button["url"], approver_url.as_str());
    assert!(
        slack[0].body.contains("Time left: 5 min"),
        "{}",
        slack[0].body
    );
    assert!(slack[0].body.contains("high"), "{}", slack[0].body);

    // Teams: one Adaptive Card 1.5 whose action opens this approval's page.
    let t: Value = serde_json::from_str(&teams[0].body).unwrap();
    let card = &t["attachments"][0];
    assert_eq!(
        card["contentType"],
        "application/vnd.microsoft.card.adaptive"
    );
    assert_eq!(card["content"]["version"], "1.5");
    assert_eq!(card["content"]["actions"][0]["type"], "Action.OpenUrl");
    assert_eq!(card["content"]["actions"][0]["url"], approver_url.as_str());
    assert!(teams[0].body.contains("5 min"), "{}", teams[0].body);

    // The generic webhook: the body it always had, the approval id as idempotency key.
    let h: Value = serde_json::from_str(&hook[0].body).unwrap();
    let mut keys: Vec<&str> = h.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        ["approval_id", "approver_url", "expires_at", "severity"]
    );
    assert_eq!(hook[0].key.as_deref(), Some(id.as_str()));

    // The stalled channel holds its request open; a second approval is created and announced
    // on every other channel while it does.
    let second = app
        .create_pending(json!({"to": "A", "amount": "1.00"}))
        .await;
    let slack = rx.wait_for("ok/slack", 2).await;
    assert!(slack[1].body.contains(&second));
    rx.wait_for("ok/teams", 2).await;
    rx.wait_for("ok/hook", 2).await;
    let held: Vec<Received> = rx.of("stall/stuck");
    assert!(
        held.iter()
            .all(|r| r.key.as_deref() != Some(second.as_str()))
            || held.len() >= 2,
        "the stalled channel's own queue is its own"
    );

    // Each delivery is an audit line naming the channel's kind and name, never its URL.
    let mut delivered: Vec<(String, String)> = Vec::new();
    for _ in 0..200 {
        delivered = app
            .audit_lines("notification")
            .into_iter()
            .filter(|l| l["approval_id"] == id.as_str() && l["outcome"] == "delivered")
            .map(|l| {
                (
                    l["channel"].as_str().unwrap().to_owned(),
                    l["target"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        if delivered.len() == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    delivered.sort();
    assert_eq!(
        delivered,
        [
            ("slack", "ops-slack"),
            ("teams", "ops-teams"),
            ("webhook", "hook")
        ]
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
    );
    let audit = app.audit_text();
    assert!(
        !audit.contains(&rx.base),
        "an audit line carries a channel URL"
    );
    assert!(app.audit().is_valid(), "{:?}", app.audit());
}

#[tokio::test]
async fn reminders_and_escalation_come_once_each_by_the_services_clock_and_stop_at_the_verdict() {
    let rx = Receivers::start().await;
    let config = config_with(&format!(
        "{}{}[[notify.routes]]\nchannels = [\"team\"]\n{}",
        channel("team", "webhook", &format!("{}/ok/team", rx.base)),
        channel("leads", "webhook", &format!("{}/ok/leads", rx.base)),
        payment_tool(
            "reminder_every = 60\n\
             escalation = [{after = 150, group = \"leads\", channels = [\"leads\"]}]"
        ),
    ));
    let alice = Approver::alice();
    let app = TestApp::start(config, &[&alice, &Approver::bob()]).await;
    let id = app.create_pending(secret_params()).await;
    let key = |step: &str| Some(format!("{id}.{step}"));

    let team = rx.wait_for("ok/team", 1).await;
    assert_eq!(team[0].key.as_deref(), Some(id.as_str()));
    app.advance(61);
    let team = rx.wait_for("ok/team", 2).await;
    assert_eq!(team[1].key, key("reminder-1"));
    app.advance(60);
    let team = rx.wait_for("ok/team", 3).await;
    assert_eq!(team[2].key, key("reminder-2"));
    app.advance(30);
    let leads = rx.wait_for("ok/leads", 1).await;
    assert_eq!(leads[0].key, key("escalation-1"));
    assert!(
        rx.of("ok/team").len() == 3,
        "the escalation went to its own channel only"
    );
    for r in rx.of("ok/team").iter().chain(&leads) {
        assert_no_parameters("a reminder or escalation", &r.body);
    }

    // Decided: the reminder already written is closed, not sent.
    assert_eq!(
        alice.decide(&app, &id, Decision::Approved).await.status,
        200
    );
    app.advance(60);
    let store = app.state.store().clone();
    let mut rows = Vec::new();
    for _ in 0..200 {
        rows = store.deliveries_of(&id).unwrap();
        if rows.iter().all(|r| r.outcome.is_some()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let summary: Vec<(String, String, Option<String>)> = rows
        .into_iter()
        .map(|r| (r.step, r.channel, r.outcome))
        .collect();
    let row = |s: &str, c: &str, o: &str| (s.to_owned(), c.to_owned(), Some(o.to_owned()));
    assert_eq!(
        summary,
        [
            row("escalation-1", "leads", "delivered"),
            row("new", "team", "delivered"),
            row("reminder-1", "team", "delivered"),
            row("reminder-2", "team", "delivered"),
            row("reminder-3", "team", "moot"),
        ]
    );
    assert_eq!(rx.of("ok/team").len(), 3);
    let steps: Vec<String> = app
        .audit_lines("notification")
        .iter()
        .map(|l| l["step"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(steps, ["new", "reminder-1", "reminder-2", "escalation-1"]);
}

/// A second service process over the same database: nothing of the first one's memory, its own
/// clock (so a leftover task of the first, reading the old clock, finds nothing due).
async fn restarted(app: &TestApp, config: Config, at: OffsetDateTime) -> AppState {
    let clock = Arc::new(ManualClock::new(at));
    let state = AppState::new(StateParts {
        config,
        public_url: app.base.clone(),
        store: app.state.store().clone(),
        clock,
        sealer: app.sealer.clone(),
        mirror: None,
    })
    .unwrap();
    // What `serve` does at startup: sweep expiries, which starts the notifier.
    state.expire_overdue().await.unwrap();
    state
}

#[tokio::test]
async fn a_notice_that_fell_due_while_the_service_was_stopped_goes_out_once_after_restart() {
    let rx = Receivers::start().await;
    let config = || {
        config_with(&format!(
            "{}{}",
            channel("team", "webhook", &format!("{}/ok/team", rx.base)),
            payment_tool("reminder_every = 60"),
        ))
    };
    let app = TestApp::start(config(), &[&Approver::alice()]).await;
    let id = app.create_pending(secret_params()).await;
    rx.wait_for("ok/team", 1).await;
    // Stopped with reminder-1 written and not yet due; it falls due while nothing runs.
    let start = OffsetDateTime::parse(START, &Rfc3339).unwrap();
    let later = start + time::Duration::seconds(90);
    let after = restarted(&app, config(), later).await;
    let team = rx.wait_for("ok/team", 2).await;
    assert_eq!(
        team[1].key.as_deref(),
        Some(format!("{id}.reminder-1").as_str())
    );
    // Started again: nothing more is due, nothing is sent twice.
    let again = restarted(&app, config(), later).await;
    drop(after);
    let store = app.state.store().clone();
    for _ in 0..100 {
        let rows = store.deliveries_of(&id).unwrap();
        if rows
            .iter()
            .filter(|r| r.outcome.as_deref() == Some("delivered"))
            .count()
            == 2
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let rows = store.deliveries_of(&id).unwrap();
    let delivered: Vec<&str> = rows
        .iter()
        .filter(|r| r.outcome.as_deref() == Some("delivered"))
        .map(|r| r.step.as_str())
        .collect();
    assert_eq!(delivered, ["new", "reminder-1"]);
    assert_eq!(rx.of("ok/team").len(), 2);
    drop(again);
}

#[tokio::test]
async fn an_approver_extends_a_waiting_approval_up_to_the_tools_maximum_and_no_further() {
    let config = config_with(&format!(
        "{}[[tools]]\nname = \"fixed\"\napprovers = [\"finance\"]\n",
        payment_tool("max_approval_seconds = 600")
    ));
    let alice = Approver::alice();
    let app = TestApp::start(config, &[&alice]).await;
    let id = app.create_pending(secret_params()).await;
    let token = alice.login(&app).await;
    let extend = |id: &str, seconds: u64| {
        let (app, token, id) = (&app, token.clone(), id.to_owned());
        async move {
            app.post_auth(
                &format!("/v1/approver/approvals/{id}/extend"),
                &token,
                &json!({"add_seconds": seconds}),
            )
            .await
        }
    };
    let r = extend(&id, 200).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["previous_expires_at"], "2026-11-20T10:05:00Z");
    assert_eq!(r.body["expires_at"], "2026-11-20T10:08:20Z");
    // Capped at creation + max_approval_seconds.
    let r = extend(&id, 3600).await;
    assert_eq!(r.body["expires_at"], "2026-11-20T10:10:00Z", "{:?}", r.body);
    let r = extend(&id, 60).await;
    assert_eq!(
        (r.status, r.body["error"]["code"].as_str()),
        (409, Some("not_extendable"))
    );
    // The gateway sees the new expiry; the window still closes at it.
    let seen = app.get(&format!("/v1/approvals/{id}")).await;
    assert_eq!(seen.body["expires_at"], "2026-11-20T10:10:00Z");
    app.advance(599);
    assert_eq!(
        app.get(&format!("/v1/approvals/{id}")).await.body["status"],
        "PENDING"
    );
    app.advance(1);
    assert_eq!(
        app.get(&format!("/v1/approvals/{id}")).await.body["status"],
        "DENIED"
    );
    // Every extension is an audit line naming who asked.
    let lines = app.audit_lines("extension");
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["principal"], "alice");
    assert!(app.audit().is_valid(), "{:?}", app.audit());

    // A tool without a maximum cannot be extended.
    let r = app.create("fixed", json!({"x": 1})).await;
    let other = r.body["approval_id"].as_str().unwrap().to_owned();
    let r = extend(&other, 60).await;
    assert_eq!(
        (r.status, r.body["error"]["code"].as_str()),
        (409, Some("not_extendable"))
    );
}

#[tokio::test]
#[ignore = "needs PostgreSQL (.ci/steps/postgres.sh or notify.sh)"]
async fn two_replicas_on_one_postgresql_deliver_each_step_exactly_once() {
    use countersign_server::store::{PostgresStore, ScratchSchema};
    let schema = ScratchSchema::required("notify exactly-once").unwrap();
    let rx = Receivers::start().await;
    let config = || {
        config_with(&format!(
            "{}{}",
            channel("team", "webhook", &format!("{}/ok/team", rx.base)),
            payment_tool(""),
        ))
    };
    let sealer = countersign_audit::AuditSealer::from_seed([9; 32]);
    let clock = Arc::new(ManualClock::new(
        OffsetDateTime::parse(START, &Rfc3339).unwrap(),
    ));
    let replica = |n: usize| {
        let store = PostgresStore::connect(&schema.url(), sealer.clone(), 4).unwrap();
        AppState::new(StateParts {
            config: config(),
            public_url: format!("http://replica-{n}.invalid"),
            store: Arc::new(store),
            clock: clock.clone(),
            sealer: sealer.clone(),
            mirror: None,
        })
        .unwrap()
    };
    let a = replica(1);
    a.enroll(vec![Approver::alice().record()]).await.unwrap();
    // Started after the enrollment, so it loads the credential from the database.
    let b = replica(2);
    b.expire_overdue().await.unwrap();
    a.expire_overdue().await.unwrap();
    let mut ids = Vec::new();
    for n in 0..40 {
        let req: countersign_server::CreateRequest = serde_json::from_value(json!({
            "agent_id": "agent-7",
            "tool_name": "payments.transfer",
            "params": {"to": "A", "amount": format!("{n}.00")},
        }))
        .unwrap();
        // Half through each replica: both workers see rows they did not write.
        let state = if n % 2 == 0 { &a } else { &b };
        let r = state.create(req, "gw").await.unwrap();
        assert_eq!(r.status, countersign::ApprovalStatus::Pending);
        ids.push(r.approval_id.clone().unwrap());
    }
    rx.wait_for("ok/team", ids.len()).await;
    // Longer than a claim round, so a second delivery would have had its chance.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let got = rx.of("ok/team");
    assert_eq!(got.len(), ids.len(), "{got:?}");
    let mut keys: Vec<String> = got.into_iter().filter_map(|r| r.key).collect();
    keys.sort();
    ids.sort();
    assert_eq!(keys, ids);
    drop((a, b));
}

/// A running `smtp_server.py`: killed on drop.
struct SmtpServer {
    child: std::process::Child,
    port: u16,
    out: std::path::PathBuf,
}

impl Drop for SmtpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl SmtpServer {
    fn start(mode: &str, dir: &std::path::Path) -> Self {
        use std::io::BufRead as _;
        let python = std::env::var("COUNTERSIGN_AIOSMTPD_PYTHON")
            .expect("COUNTERSIGN_AIOSMTPD_PYTHON: a python with aiosmtpd (.ci/steps/notify.sh)");
        let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/notify-payloads/smtp_server.py");
        let out = dir.join(format!("{mode}-mail"));
        let mut child = std::process::Command::new(python)
            .arg(script)
            .args([
                "--mode",
                mode,
                "--user",
                "countersign",
                "--password",
                "s3cret-smtp",
            ])
            .arg("--cert")
            .arg(dir.join("cert.pem"))
            .arg("--key")
            .arg(dir.join("key.pem"))
            .arg("--out")
            .arg(&out)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line.trim().parse().unwrap();
        Self { child, port, out }
    }

    /// Wait (bounded) for the Nth message; returns it and the user it authenticated as.
    async fn message(&self, n: usize) -> (String, String) {
        for _ in 0..600 {
            if let (Ok(mail), Ok(user)) = (
                std::fs::read_to_string(self.out.join(format!("{n}.eml"))),
                std::fs::read_to_string(self.out.join(format!("{n}.auth"))),
            ) {
                return (mail, user);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("no message {n} in {}", self.out.display());
    }
}

#[tokio::test]
#[ignore = "needs aiosmtpd (.ci/steps/notify.sh)"]
async fn email_goes_out_over_starttls_and_implicit_tls_with_auth_in_plain_text_and_html() {
    let dir = std::env::temp_dir().join(format!("countersign-notify-smtp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // A certificate made here, trusted through the channel's ca_file only.
    let made = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).unwrap();
    std::fs::write(dir.join("cert.pem"), made.cert.pem()).unwrap();
    std::fs::write(dir.join("key.pem"), made.signing_key.serialize_pem()).unwrap();
    std::fs::write(dir.join("password"), "s3cret-smtp\n").unwrap();
    for mode in ["starttls", "implicit"] {
        let smtp = SmtpServer::start(mode, &dir);
        let config = config_with(&format!(
            "[[notify.channels]]\nname = \"mail\"\nkind = \"email\"\n\
             smtp_host = \"127.0.0.1\"\nsmtp_port = {}\ntls = \"{mode}\"\nca_file = {:?}\n\
             username = \"countersign\"\npassword_file = {:?}\n\
             from = \"Countersign <countersign@example.org>\"\n\
             to = [\"approvers@example.org\", \"oncall@example.org\"]\n{}",
            smtp.port,
            dir.join("cert.pem").display().to_string(),
            dir.join("password").display().to_string(),
            payment_tool(""),
        ));
        let app = TestApp::start(config, &[&Approver::alice()]).await;
        let id = app.create_pending(secret_params()).await;
        let (mail, user) = smtp.message(1).await;
        assert_eq!(user, "countersign", "{mode}: AUTH");
        assert_no_parameters(&format!("{mode} e-mail"), &mail);
        assert!(
            !mail.contains("s3cret-smtp"),
            "{mode}: the password in the mail"
        );
        keep_payload(&format!("{mode}.eml"), &mail);
        let lower = mail.to_ascii_lowercase();
        assert!(lower.contains("multipart/alternative"), "{mail}");
        assert!(lower.contains("text/plain"), "{mail}");
        assert!(lower.contains("text/html"), "{mail}");
        assert!(
            mail.contains(&format!("Message-ID: <{id}.new@example.org>")),
            "{mail}"
        );
        assert!(mail.contains(&app.url(&format!("/approve/{id}"))), "{mail}");
        assert!(mail.contains("5 min"), "{mail}");
        // The delivery is an audit line naming the channel, never the server or the password.
        let mut lines = Vec::new();
        for _ in 0..200 {
            lines = app.audit_lines("notification");
            if !lines.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(lines[0]["channel"], "email");
        assert_eq!(lines[0]["target"], "mail");
        assert_eq!(lines[0]["outcome"], "delivered");
        assert!(!app.audit_text().contains("s3cret-smtp"));
    }
    let _ = std::fs::remove_dir_all(&dir);
}
