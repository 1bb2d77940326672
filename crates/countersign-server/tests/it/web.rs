//! The approver page and its cookie-session API: nothing disclosed before sign-in, hardening
//! (CSP, cookie flags, CSRF, Origin, rate limit), the display model, decisions through the page.

use crate::support::{Approver, Reply, TestApp};
use countersign::{Decision, b64};
use countersign_server::Config;
use countersign_testkit::ORIGIN;
use serde_json::{Value, json};

const SECRET_ACCOUNT: &str = "DE89-SECRET-ACCOUNT-7731";
const SECRET_AMOUNT: &str = "31337.42";

async fn pending(app: &TestApp) -> String {
    app.create_pending(json!({"to": SECRET_ACCOUNT, "amount": SECRET_AMOUNT}))
        .await
}

/// Every byte an unauthenticated visitor can get for `id`: status line, headers and body.
async fn raw(app: &TestApp, req: reqwest::RequestBuilder) -> (u16, String) {
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let mut text = String::new();
    for (k, v) in resp.headers() {
        text.push_str(&format!("{k}: {}\n", v.to_str().unwrap_or("")));
    }
    text.push_str(&resp.text().await.unwrap());
    let _ = app;
    (status, text)
}

fn assert_no_material(text: &str) {
    for needle in [
        SECRET_ACCOUNT,
        SECRET_AMOUNT,
        "agent-7",
        "payments.transfer",
        "params",
    ] {
        assert!(!text.contains(needle), "{needle:?} disclosed in {text}");
    }
}

#[tokio::test]
async fn before_sign_in_nothing_material_is_sent() {
    let app = TestApp::default_with(&[&Approver::alice()]).await;
    let id = pending(&app).await;
    for path in [
        format!("/approve/{id}"),
        "/assets/approve.js".to_owned(),
        "/assets/common.js".to_owned(),
        "/assets/style.css".to_owned(),
        format!("/v1/web/approvals/{id}/summary"),
        format!("/v1/web/approvals/{id}"),
    ] {
        let (status, text) = raw(&app, app.http.get(app.url(&path))).await;
        assert!(status == 200 || status == 401, "{path}: {status}");
        assert_no_material(&text);
    }
    // The page is the same bytes for every request: it cannot carry data.
    let (_, a) = raw(&app, app.http.get(app.url(&format!("/approve/{id}")))).await;
    let (_, b) = raw(&app, app.http.get(app.url("/approve/apv_other"))).await;
    assert_eq!(a, b);
    assert!(!a.contains(&id));

    // The summary is exactly reference, severity and expiry, with the time left.
    let s = app.get(&format!("/v1/web/approvals/{id}/summary")).await;
    let keys: Vec<&String> = s.body.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["approval_id", "expires_at", "severity", "time_left"]);
    assert_eq!(s.body["severity"], "high");
    assert_eq!(s.body["time_left"], "5 min");
    // The session endpoints refuse without a cookie.
    let r = app.get(&format!("/v1/web/approvals/{id}")).await;
    assert_eq!(r.status, 401);
    // And the bearer API is not a way around it.
    let r = app.get(&format!("/v1/approver/approvals/{id}")).await;
    assert_eq!(r.status, 401);
    assert_no_material(&r.body.to_string());
}

#[tokio::test]
async fn pages_carry_a_strict_csp_and_no_framing_or_caching() {
    let app = TestApp::default_with(&[]).await;
    for path in [
        "/approve/x",
        "/enroll",
        "/assets/approve.js",
        "/v1/web/approvals/x/summary",
    ] {
        let resp = app.http.get(app.url(path)).send().await.unwrap();
        let h = resp.headers();
        let csp = h["content-security-policy"].to_str().unwrap();
        assert!(csp.contains("script-src 'self'"), "{csp}");
        assert!(csp.contains("default-src 'none'"), "{csp}");
        assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
        assert!(
            !csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"),
            "{csp}"
        );
        assert_eq!(h["x-frame-options"], "DENY");
        assert_eq!(h["x-content-type-options"], "nosniff");
        assert_eq!(h["cache-control"], "no-store");
        assert_eq!(h["referrer-policy"], "no-referrer");
    }
    let js = app
        .http
        .get(app.url("/assets/approve.js"))
        .send()
        .await
        .unwrap();
    assert!(
        js.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/javascript")
    );
}

/// A page session: the cookie and the CSRF token.
pub(crate) struct WebSession {
    pub(crate) cookie: String,
    csrf: String,
}

pub(crate) async fn page_post(
    app: &TestApp,
    path: &str,
    body: &Value,
    s: Option<&WebSession>,
) -> Reply {
    page_post_with(app, path, body, s, &[]).await
}

/// [`page_post`] with more request headers (a browser's `User-Agent`, say).
async fn page_post_with(
    app: &TestApp,
    path: &str,
    body: &Value,
    s: Option<&WebSession>,
    headers: &[(&str, &str)],
) -> Reply {
    let mut req = app
        .http
        .post(app.url(path))
        .header("origin", ORIGIN)
        .json(body);
    if let Some(s) = s {
        req = req
            .header("cookie", &s.cookie)
            .header("x-countersign-csrf", &s.csrf);
    }
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    app.send(req).await
}

pub(crate) async fn page_get(app: &TestApp, path: &str, s: &WebSession) -> Reply {
    app.send(app.http.get(app.url(path)).header("cookie", &s.cookie))
        .await
}

pub(crate) async fn sign_in(app: &TestApp, who: &Approver) -> WebSession {
    let c = page_post(app, "/v1/web/login/challenge", &json!({}), None).await;
    assert_eq!(c.status, 200, "{:?}", c.body);
    let challenge = b64::decode(c.body["challenge"].as_str().unwrap()).unwrap();
    let body = serde_json::to_value(who.sign(challenge)).unwrap();
    let resp = app
        .http
        .post(app.url("/v1/web/login"))
        .header("origin", ORIGIN)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let set = resp.headers()["set-cookie"].to_str().unwrap().to_owned();
    for flag in ["Secure", "HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(
            set.split("; ").any(|p| p == flag),
            "{flag} missing in {set}"
        );
    }
    assert!(set.starts_with("__Host-countersign-session="), "{set}");
    assert!(!set.to_ascii_lowercase().contains("domain="), "{set}");
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["principal"], who.principal.as_str());
    WebSession {
        cookie: set.split(';').next().unwrap().to_owned(),
        csrf: body["csrf_token"].as_str().unwrap().to_owned(),
    }
}

#[tokio::test]
async fn after_sign_in_every_signed_field_is_displayed_with_its_label() {
    let alice = Approver::alice();
    let app = TestApp::default_with(&[&alice]).await;
    let id = app
        .create_pending(json!({"to": "DE89\u{200B}3704", "amount": "40000.00", "memo": "раураl"}))
        .await;
    let s = sign_in(&app, &alice).await;
    let r = page_get(&app, &format!("/v1/web/approvals/{id}"), &s).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["status"], "PENDING");
    let rows = r.body["display"]["rows"].as_array().unwrap();
    let text = |segs: &Value| -> String {
        segs.as_array()
            .unwrap()
            .iter()
            .map(|s| s["text"].as_str().unwrap())
            .collect()
    };
    let shown: Vec<(String, String)> = rows
        .iter()
        .map(|r| (text(&r["label"]), text(&r["value"])))
        .collect();
    assert_eq!(
        shown,
        [
            ("Agent".to_owned(), "agent-7".to_owned()),
            ("Tool".to_owned(), "payments.transfer".to_owned()),
            ("Parameters › amount".to_owned(), "40000.00".to_owned()),
            ("Parameters › memo".to_owned(), "раураl".to_owned()),
            ("Parameters › to".to_owned(), "DE89\u{200B}3704".to_owned()),
        ]
    );
    // Exactly the signed fields: the same value the op_hash covers.
    assert_eq!(r.body["fields"]["params"]["to"], "DE89\u{200B}3704");
    assert_eq!(r.body["display"]["marked"], true);
    let to = &rows[4]["value"];
    assert!(
        to.as_array()
            .unwrap()
            .iter()
            .any(|s| s["mark"]["kind"] == "invisible")
    );
    assert!(
        rows[3]["value"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["mark"]["kind"] == "confusable")
    );
}

#[tokio::test]
async fn decisions_through_the_page_need_cookie_csrf_and_origin() {
    let alice = Approver::alice();
    let app = TestApp::default_with(&[&alice]).await;
    let id = pending(&app).await;
    let s = sign_in(&app, &alice).await;
    let path = format!("/v1/web/approvals/{id}/challenge");
    let body = json!({"decision": "APPROVED"});

    // No CSRF token.
    let r = app
        .send(
            app.http
                .post(app.url(&path))
                .header("origin", ORIGIN)
                .header("cookie", &s.cookie)
                .json(&body),
        )
        .await;
    assert_eq!(
        (r.status, r.body["error"]["code"].as_str()),
        (403, Some("csrf"))
    );
    // A CSRF token of another session.
    let other = WebSession {
        cookie: s.cookie.clone(),
        csrf: "AAAA".into(),
    };
    assert_eq!(
        page_post(&app, &path, &body, Some(&other)).await.status,
        403
    );
    // A foreign origin, even with the right token.
    let r = app
        .send(
            app.http
                .post(app.url(&path))
                .header("origin", "https://evil.example")
                .header("cookie", &s.cookie)
                .header("x-countersign-csrf", &s.csrf)
                .json(&body),
        )
        .await;
    assert_eq!(
        (r.status, r.body["error"]["code"].as_str()),
        (403, Some("origin_refused"))
    );
    // No cookie.
    let r = app
        .send(
            app.http
                .post(app.url(&path))
                .header("origin", ORIGIN)
                .header("x-countersign-csrf", &s.csrf)
                .json(&body),
        )
        .await;
    assert_eq!(r.status, 401);

    // All three: the challenge, then the verdict.
    let c = page_post(&app, &path, &body, Some(&s)).await;
    assert_eq!(c.status, 200, "{:?}", c.body);
    let challenge = b64::decode(c.body["challenge"].as_str().unwrap()).unwrap();
    assert_eq!(challenge.len(), 64);
    let assertion = serde_json::to_value(alice.sign(challenge)).unwrap();
    let r = page_post(
        &app,
        &format!("/v1/web/approvals/{id}/decision"),
        &assertion,
        Some(&s),
    )
    .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["status"], "APPROVED");

    // Already decided: the review says so with the result, a new challenge is a 409.
    let v = page_get(&app, &format!("/v1/web/approvals/{id}"), &s).await;
    assert_eq!(v.body["status"], "APPROVED");
    assert_eq!(v.body["result"]["status"], "APPROVED");
    let r = page_post(&app, &path, &json!({"decision": "DENIED"}), Some(&s)).await;
    assert_eq!(
        (r.status, r.body["error"]["code"].as_str()),
        (409, Some("already_settled"))
    );
}

#[tokio::test]
async fn an_expired_request_is_reported_as_expired() {
    let alice = Approver::alice();
    let app = TestApp::default_with(&[&alice]).await;
    let id = pending(&app).await;
    let s = sign_in(&app, &alice).await;
    app.advance(301);
    let v = page_get(&app, &format!("/v1/web/approvals/{id}"), &s).await;
    assert_eq!(v.body["status"], "DENIED");
    assert_eq!(v.body["result"]["reason_code"], "expired_unanswered");
    let _ = Decision::Approved;
}

#[tokio::test]
async fn sign_in_attempts_are_rate_limited_and_need_the_page_origin() {
    let app = TestApp::default_with(&[]).await;
    let r = app.post("/v1/web/login/challenge", &json!({})).await;
    assert_eq!(
        (r.status, r.body["error"]["code"].as_str()),
        (403, Some("origin_required"))
    );
    let mut statuses = Vec::new();
    for _ in 0..21 {
        statuses.push(
            page_post(&app, "/v1/web/login/challenge", &json!({}), None)
                .await
                .status,
        );
    }
    assert!(statuses[..20].iter().all(|s| *s == 200), "{statuses:?}");
    assert_eq!(statuses[20], 429);
    // A minute later the budget is back (the service clock, not a sleep).
    app.advance(60);
    assert_eq!(
        page_post(&app, "/v1/web/login/challenge", &json!({}), None)
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn an_unenrolled_key_cannot_sign_in() {
    let app = TestApp::default_with(&[&Approver::alice()]).await;
    let stranger = Approver::with_key("alice", crate::enroll::softkey(99));
    let c = page_post(&app, "/v1/web/login/challenge", &json!({}), None).await;
    let challenge = b64::decode(c.body["challenge"].as_str().unwrap()).unwrap();
    let body = serde_json::to_value(stranger.sign(challenge)).unwrap();
    let r = page_post(&app, "/v1/web/login", &body, None).await;
    assert_eq!(r.status, 401);
    assert_eq!(r.body["error"]["reason_code"], "credential_unknown");
}

/// The segments of a display row's value, as (text, mark kind) pairs.
fn marked(segments: &Value) -> Vec<(String, Option<String>)> {
    segments
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["text"].as_str().unwrap().to_owned(),
                s["mark"]["kind"].as_str().map(str::to_owned),
            )
        })
        .collect()
}

#[tokio::test]
async fn under_normalize_the_page_shows_the_submitted_text_and_marks_what_nfc_changed() {
    let alice = Approver::alice();
    let app = TestApp::default_with(&[&alice]).await;
    // Refused where the rule requires NFC (the default) ...
    let r = app
        .create("payments.transfer", json!({"user": "\u{212A}evin"}))
        .await;
    assert_eq!(r.body["error"]["code"], "not_nfc", "{:?}", r.body);
    // ... admitted where it normalizes, and then marked on the page.
    let r = app
        .create("directory.update", json!({"user": "\u{212A}evin"}))
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let id = r.body["approval_id"].as_str().unwrap();
    let s = sign_in(&app, &alice).await;
    let view = page_get(&app, &format!("/v1/web/approvals/{id}"), &s).await;
    assert_eq!(view.status, 200, "{:?}", view.body);
    let display = &view.body["display"];
    assert_eq!(display["marked"], true);
    assert_eq!(display["nfc_changed"], true);
    let row = display["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["path"] == "params.user")
        .unwrap();
    assert_eq!(
        marked(&row["value"]),
        vec![
            ("\u{212A}".to_owned(), Some("nfc".to_owned())),
            ("evin".to_owned(), None)
        ]
    );
    assert_eq!(
        row["value"][0]["mark"]["name"],
        "U+212A KELVIN SIGN becomes \"K\" (U+004B) in NFC"
    );
    // The JSON view marks it too.
    let json_marks: Vec<_> = marked(&display["json"])
        .into_iter()
        .filter(|(_, kind)| kind.is_some())
        .collect();
    assert_eq!(
        json_marks,
        vec![("\u{212A}".to_owned(), Some("nfc".to_owned()))]
    );
    // An NFC request under the same rule is shown without any mark.
    let r = app
        .create("directory.update", json!({"user": "Kevin"}))
        .await;
    let id = r.body["approval_id"].as_str().unwrap();
    let view = page_get(&app, &format!("/v1/web/approvals/{id}"), &s).await;
    assert_eq!(view.body["display"]["marked"], false);
    assert!(view.body.get("not_nfc").is_none(), "{:?}", view.body);
}

#[tokio::test]
async fn logout_ends_the_session_on_the_server_not_only_in_the_browser() {
    let alice = Approver::alice();
    let app = TestApp::default_with(&[&alice]).await;
    let id = pending(&app).await;
    let s = sign_in(&app, &alice).await;
    let path = format!("/v1/web/approvals/{id}");
    assert_eq!(page_get(&app, &path, &s).await.status, 200);
    let resp = app
        .http
        .post(app.url("/v1/web/logout"))
        .header("origin", ORIGIN)
        .header("cookie", &s.cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 204);
    assert!(
        resp.headers()["set-cookie"]
            .to_str()
            .unwrap()
            .contains("Max-Age=0")
    );
    // A copy of the old cookie (the browser was told to drop it) no longer reads anything.
    let r = page_get(&app, &path, &s).await;
    assert_eq!(r.status, 401, "{:?}", r.body);
    assert_no_material(&r.body.to_string());
}

/// An ordinary file write (content with line breaks, a tab, a final newline) reaches the page
/// with its line structure quietly marked and no banner; a line break slipped into a member name
/// still raises it (issue 27: approvers who see alarms on every call learn to ignore them).
#[tokio::test]
async fn an_ordinary_multi_line_value_raises_no_banner_on_the_page() {
    let alice = Approver::alice();
    let app = TestApp::default_with(&[&alice]).await;
    let content = "# notes\n\tfirst\nsecond\n";
    let r = app
        .create(
            "payments.transfer",
            json!({"path": "/srv/notes.md", "content": content}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let id = r.body["approval_id"].as_str().unwrap();
    let s = sign_in(&app, &alice).await;
    let view = page_get(&app, &format!("/v1/web/approvals/{id}"), &s).await;
    let display = &view.body["display"];
    assert_eq!(display["marked"], false, "{display}");
    let row = display["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["path"] == "params.content")
        .unwrap();
    assert_eq!(row["warnings"], json!([]));
    let kinds: Vec<_> = marked(&row["value"])
        .into_iter()
        .filter_map(|(_, kind)| kind)
        .collect();
    assert_eq!(kinds, ["line", "tab", "line", "line"]);

    let r = app
        .create("payments.transfer", json!({"pa\nth": "/srv/notes.md"}))
        .await;
    let id = r.body["approval_id"].as_str().unwrap();
    let view = page_get(&app, &format!("/v1/web/approvals/{id}"), &s).await;
    assert_eq!(view.body["display"]["marked"], true);
}

const PHONE_UA: &str = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 \
    (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36";
const DESKTOP_UA: &str = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 \
    (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36";

/// The `hints` of a challenge the page was given.
fn hints_of(r: Reply) -> Value {
    assert_eq!(r.status, 200, "{:?}", r.body);
    r.body["hints"].clone()
}

#[tokio::test]
async fn get_options_carry_webauthn_hints_for_the_device() {
    let phone = json!(["client-device", "security-key", "hybrid"]);
    let other = json!(["security-key", "hybrid", "client-device"]);
    let alice = Approver::alice();
    let app = TestApp::default_with(&[&alice]).await;
    let id = pending(&app).await;
    let s = sign_in(&app, &alice).await;
    for (headers, expected) in [
        (vec![("user-agent", PHONE_UA)], &phone),
        (vec![("user-agent", DESKTOP_UA)], &other),
        (vec![], &other),
        // Chromium's client hint decides when sent.
        (
            vec![("user-agent", DESKTOP_UA), ("sec-ch-ua-mobile", "?1")],
            &phone,
        ),
    ] {
        let login = hints_of(
            page_post_with(&app, "/v1/web/login/challenge", &json!({}), None, &headers).await,
        );
        assert_eq!(&login, expected, "sign-in with {headers:?}");
        let decision = format!("/v1/web/approvals/{id}/challenge");
        let approve = json!({"decision": "APPROVED"});
        let decide = hints_of(page_post_with(&app, &decision, &approve, Some(&s), &headers).await);
        assert_eq!(&decide, expected, "decision with {headers:?}");
    }

    // An operator's list holds on every device.
    let mut cfg = crate::support::config();
    cfg.webauthn_hints = Config::from_toml("webauthn_hints = [\"hybrid\", \"security-key\"]")
        .unwrap()
        .webauthn_hints;
    let app = TestApp::start(cfg, &[]).await;
    for ua in [PHONE_UA, DESKTOP_UA] {
        let headers = [("user-agent", ua)];
        let login = hints_of(
            page_post_with(&app, "/v1/web/login/challenge", &json!({}), None, &headers).await,
        );
        assert_eq!(login, json!(["hybrid", "security-key"]));
    }
    // A hint WebAuthn does not define is a configuration error, not a silent default.
    let e = Config::from_toml("webauthn_hints = [\"platform\"]").unwrap_err();
    assert!(e.to_string().contains("platform"), "{e}");
}
