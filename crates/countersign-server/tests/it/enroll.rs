//! Enrollment through a one-time invite: the webauthn-rs ceremony, the registry record, the
//! attestation policy, and what an enrolled approver can then do.

use crate::support::{Approver, TestApp, config};
use countersign::{Decision, b64};
use countersign_server::Config;
use countersign_server::enroll::{CreatedInvite, create_invite};
use countersign_softkey::{
    Alg, Attestation, Ceremony, FIXTURE_AAGUID, RegistrationRequest, SoftKey,
};
use countersign_testkit::{ORIGIN, RP_ID};
use serde_json::{Value, json};

const DAY_MS: i64 = 86_400_000;

pub fn now_ms(app: &TestApp) -> i64 {
    use countersign_server::Clock as _;
    i64::try_from(app.clock.now().unix_timestamp_nanos() / 1_000_000).unwrap()
}

pub fn invite(app: &TestApp, principal: &str, group: Option<&str>) -> CreatedInvite {
    create_invite(
        app.state.store().as_ref(),
        &app.base,
        principal,
        group,
        now_ms(app),
        DAY_MS,
    )
    .unwrap()
}

/// A POST from the approver page (its Origin).
pub async fn page_post(app: &TestApp, path: &str, body: &Value) -> crate::support::Reply {
    app.send(
        app.http
            .post(app.url(path))
            .header("origin", ORIGIN)
            .json(body),
    )
    .await
}

pub fn softkey(seed: u8) -> SoftKey {
    SoftKey::from_seed(Alg::Es256, [seed; 32]).unwrap()
}

/// Start the ceremony for `token`; returns the challenge bytes.
async fn start(app: &TestApp, token: &str) -> Vec<u8> {
    let r = page_post(app, "/v1/enroll/start", &json!({"invite": token})).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let pk = &r.body["options"]["publicKey"];
    assert_eq!(pk["authenticatorSelection"]["residentKey"], "required");
    assert_eq!(pk["authenticatorSelection"]["userVerification"], "required");
    assert_eq!(pk["rp"]["id"], RP_ID);
    b64::decode(pk["challenge"].as_str().unwrap()).unwrap()
}

fn registration(key: &SoftKey, challenge: Vec<u8>, attestation: Attestation) -> Value {
    let req = RegistrationRequest {
        attestation,
        ..RegistrationRequest::from(Ceremony::create(RP_ID, ORIGIN, challenge))
    };
    key.register(&req).unwrap().to_json()
}

/// The whole ceremony with a software authenticator.
pub async fn enroll_key(app: &TestApp, token: &str, key: &SoftKey) -> crate::support::Reply {
    let challenge = start(app, token).await;
    let credential = registration(key, challenge, Attestation::None);
    page_post(
        app,
        "/v1/enroll/finish",
        &json!({"invite": token, "credential": credential}),
    )
    .await
}

#[tokio::test]
async fn an_invite_enrolls_one_key_whose_record_is_published_and_can_approve() {
    let app = TestApp::default_with(&[]).await;
    let created = invite(&app, "carol", Some("finance"));
    assert!(created.url.starts_with(&format!("{}/enroll#", app.base)));
    let key = softkey(7);

    let r = enroll_key(&app, &created.token, &key).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["principal"], "carol");
    assert_eq!(r.body["attestation_format"], "none");
    assert_eq!(r.body["chain_verified"], false);
    assert_eq!(r.body["assurance_ceiling"], "AAL2");

    // Published in the registry format the offline verifier takes, with the exact COSE key.
    let reg = app.get("/v1/credentials").await;
    assert_eq!(reg.status, 200);
    assert_eq!(reg.body, app.get("/v1/registry").await.body);
    let doc: countersign::RegistryDocument = serde_json::from_value(reg.body).unwrap();
    let [record] = doc.credentials.as_slice() else {
        panic!("one credential expected: {doc:?}")
    };
    assert_eq!(record.principal, "carol");
    assert_eq!(record.credential_id, key.credential_id());
    assert_eq!(record.public_key, key.cose_public_key());
    assert_eq!(record.aaguid.map(|a| a.0), Some(key.aaguid()));
    assert_eq!(record.backup_eligible, Some(false));
    let att = record.attestation.as_ref().unwrap();
    assert_eq!((att.format.as_str(), att.chain_verified), ("none", false));

    // Single use: the invite is spent.
    let again = page_post(&app, "/v1/enroll/start", &json!({"invite": created.token})).await;
    assert_eq!(again.status, 410, "{:?}", again.body);
    assert_eq!(again.body["error"]["code"], "invite_unusable");

    // The invite's group made carol eligible for payments (finance = alice, bob in the file).
    let id = app
        .create_pending(json!({"to": "DE89", "amount": "1.00"}))
        .await;
    let carol = Approver::with_key("carol", key);
    let r = carol.decide(&app, &id, Decision::Approved).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["status"], "APPROVED");
}

#[tokio::test]
async fn without_the_group_the_enrolled_principal_is_not_eligible() {
    let app = TestApp::default_with(&[]).await;
    let created = invite(&app, "dave", None);
    let key = softkey(8);
    assert_eq!(enroll_key(&app, &created.token, &key).await.status, 200);
    // dave is enrolled but in no group that may decide payments: settled at once.
    let r = app
        .create("payments.transfer", json!({"to": "DE89", "amount": "1.00"}))
        .await;
    assert_eq!(r.body["status"], "DENIED", "{:?}", r.body);
    assert_eq!(r.body["reason_code"], "no_eligible_approver");
    // A tool open to every enrolled principal is his to decide.
    let r = app.create("deploy", json!({})).await;
    assert_eq!(r.body["status"], "PENDING", "{:?}", r.body);
}

#[tokio::test]
async fn unknown_expired_and_cross_origin_invites_are_refused() {
    let app = TestApp::default_with(&[]).await;
    let r = page_post(&app, "/v1/enroll/start", &json!({"invite": "nope"})).await;
    assert_eq!(r.status, 410);

    let created = invite(&app, "erin", None);
    // No Origin header, or a foreign one: refused before the invite is looked at.
    let r = app
        .post("/v1/enroll/start", &json!({"invite": created.token}))
        .await;
    assert_eq!(
        (r.status, r.body["error"]["code"].as_str()),
        (403, Some("origin_required"))
    );
    let r = app
        .send(
            app.http
                .post(app.url("/v1/enroll/start"))
                .header("origin", "https://evil.example")
                .json(&json!({"invite": created.token})),
        )
        .await;
    assert_eq!(
        (r.status, r.body["error"]["code"].as_str()),
        (403, Some("origin_refused"))
    );

    app.advance(86_400);
    let r = page_post(&app, "/v1/enroll/start", &json!({"invite": created.token})).await;
    assert_eq!(r.status, 410, "expired at expires_at");
}

#[tokio::test]
async fn a_refused_registration_leaves_the_invite_usable() {
    let app = TestApp::default_with(&[]).await;
    let created = invite(&app, "frank", None);
    let key = softkey(9);

    // Finishing without a started ceremony.
    let bogus = registration(&key, vec![0; 32], Attestation::None);
    let r = page_post(
        &app,
        "/v1/enroll/finish",
        &json!({"invite": created.token, "credential": bogus}),
    )
    .await;
    assert_eq!(
        (r.status, r.body["error"]["code"].as_str()),
        (409, Some("no_ceremony"))
    );

    // A registration made for another origin (phishing page relaying the ceremony).
    let challenge = start(&app, &created.token).await;
    let req = RegistrationRequest::from(Ceremony::create(RP_ID, "https://evil.example", challenge));
    let credential = key.register(&req).unwrap().to_json();
    let r = page_post(
        &app,
        "/v1/enroll/finish",
        &json!({"invite": created.token, "credential": credential}),
    )
    .await;
    assert_eq!(r.status, 422, "{:?}", r.body);
    assert_eq!(r.body["error"]["code"], "registration_refused");
    assert!(
        app.get("/v1/credentials").await.body["credentials"]
            .as_array()
            .unwrap()
            .is_empty()
    );

    // The ceremony is consumed by a refusal; the invite is not.
    assert_eq!(enroll_key(&app, &created.token, &key).await.status, 200);
}

#[tokio::test]
async fn the_same_authenticator_cannot_be_enrolled_twice() {
    let app = TestApp::default_with(&[]).await;
    let key = softkey(10);
    let first = invite(&app, "gina", None);
    assert_eq!(enroll_key(&app, &first.token, &key).await.status, 200);
    // Another principal's invite cannot take over gina's credential id.
    let second = invite(&app, "mallory", None);
    let r = enroll_key(&app, &second.token, &key).await;
    assert_eq!(r.status, 409, "{:?}", r.body);
    assert_eq!(r.body["error"]["code"], "credential_exists");
    let doc = app.get("/v1/credentials").await.body;
    assert_eq!(doc["credentials"][0]["principal"], "gina");
    assert_eq!(doc["credentials"].as_array().unwrap().len(), 1);
}

fn aaguid_text(a: [u8; 16]) -> String {
    countersign::Aaguid(a).to_string()
}

async fn verified_app(aaguid: [u8; 16]) -> (TestApp, tempfile_dir::Dir) {
    let dir = tempfile_dir::Dir::new("verified");
    let root = dir.path().join("root.pem");
    std::fs::write(
        &root,
        countersign_softkey::pem(
            "CERTIFICATE",
            countersign_softkey::fixture_root_certificate(),
        ),
    )
    .unwrap();
    let mut cfg: Config = config();
    cfg.enrollment = toml_enrollment(&format!(
        "attestation = \"verified\"\nroots = [\"{}\"]\naaguids = [\"{}\"]",
        root.display(),
        aaguid_text(aaguid)
    ));
    (TestApp::start(cfg, &[]).await, dir)
}

fn toml_enrollment(text: &str) -> countersign_server::enroll::EnrollmentConfig {
    Config::from_toml(&format!("[enrollment]\n{text}"))
        .unwrap()
        .enrollment
}

#[tokio::test]
async fn verified_policy_records_the_chain_and_refuses_unattested_keys() {
    let (app, _dir) = verified_app(FIXTURE_AAGUID).await;
    let key = softkey(11);

    // `none` attestation: refused under the verified policy.
    let created = invite(&app, "hana", None);
    let challenge = start(&app, &created.token).await;
    let r = page_post(
        &app,
        "/v1/enroll/finish",
        &json!({"invite": created.token, "credential": registration(&key, challenge, Attestation::None)}),
    )
    .await;
    assert_eq!(r.status, 422, "{:?}", r.body);

    // A full packed attestation chaining to the configured root, allowed AAGUID: AAL3-capable.
    let challenge = start(&app, &created.token).await;
    let r = page_post(
        &app,
        "/v1/enroll/finish",
        &json!({"invite": created.token, "credential": registration(&key, challenge, Attestation::PackedFull)}),
    )
    .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["chain_verified"], true);
    assert_eq!(r.body["attestation_format"], "packed");
    assert_eq!(r.body["assurance_ceiling"], "AAL3");
    let doc = app.get("/v1/credentials").await.body;
    let att = &doc["credentials"][0]["attestation"];
    assert_eq!(att["chain_verified"], true);
    assert!(
        att["root"]
            .as_str()
            .unwrap()
            .contains("Countersign Softkey Test Root CA"),
        "{att}"
    );
}

#[tokio::test]
async fn verified_policy_refuses_an_aaguid_outside_the_allowlist() {
    let (app, _dir) = verified_app(*b"some-other-model").await;
    let key = softkey(12);
    let created = invite(&app, "ivan", None);
    let challenge = start(&app, &created.token).await;
    let r = page_post(
        &app,
        "/v1/enroll/finish",
        &json!({"invite": created.token, "credential": registration(&key, challenge, Attestation::PackedFull)}),
    )
    .await;
    assert_eq!(r.status, 422, "{:?}", r.body);
}

#[test]
fn verified_policy_without_roots_is_a_startup_error() {
    let mut cfg = config();
    cfg.enrollment = toml_enrollment("attestation = \"verified\"");
    let sealer = countersign_audit::AuditSealer::from_seed([1; 32]);
    let store = countersign_server::store::SqliteStore::in_memory(sealer.clone()).unwrap();
    let r = countersign_server::AppState::new(countersign_server::StateParts {
        config: cfg,
        public_url: "http://x".into(),
        store: std::sync::Arc::new(store),
        clock: std::sync::Arc::new(countersign_server::SystemClock),
        sealer,
        mirror: None,
    });
    assert!(r.unwrap_err().to_string().contains("root"));
}

/// A temporary directory removed on drop (no extra crate for one use).
mod tempfile_dir {
    pub struct Dir(std::path::PathBuf);
    impl Dir {
        pub fn new(tag: &str) -> Self {
            let mut raw = [0u8; 8];
            getrandom::fill(&mut raw).unwrap();
            let p = std::env::temp_dir().join(format!(
                "countersign-{tag}-{}",
                raw.iter().map(|b| format!("{b:02x}")).collect::<String>()
            ));
            std::fs::create_dir_all(&p).unwrap();
            Self(p)
        }
        pub fn path(&self) -> &std::path::Path {
            &self.0
        }
    }
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// `publicKey.hints` of the creation options for a start sent with `user_agent`.
async fn creation_hints(app: &TestApp, token: &str, user_agent: &str) -> Value {
    let r = app
        .send(
            app.http
                .post(app.url("/v1/enroll/start"))
                .header("origin", ORIGIN)
                .header("user-agent", user_agent)
                .json(&json!({"invite": token})),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    r.body["options"]["publicKey"]["hints"].clone()
}

#[tokio::test]
async fn create_options_carry_webauthn_hints_for_the_device() {
    let iphone = "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 \
        (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1";
    let mac = "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 \
        (KHTML, like Gecko) Version/18.1 Safari/605.1.15";
    let app = TestApp::default_with(&[]).await;
    let created = invite(&app, "ines", None);
    assert_eq!(
        creation_hints(&app, &created.token, iphone).await,
        json!(["client-device", "security-key", "hybrid"])
    );
    assert_eq!(
        creation_hints(&app, &created.token, mac).await,
        json!(["security-key", "hybrid", "client-device"])
    );
    // Verified attestation: a hybrid (synced phone) passkey would be refused, so it is not
    // offered.
    let (app, _dir) = verified_app(FIXTURE_AAGUID).await;
    let created = invite(&app, "ines", None);
    assert_eq!(
        creation_hints(&app, &created.token, iphone).await,
        json!(["client-device", "security-key"])
    );
    assert_eq!(
        creation_hints(&app, &created.token, mac).await,
        json!(["security-key", "client-device"])
    );
}
