//! Issue 25 §3 "Tenants stay apart": who reads what from the audit log. Proofs go to anyone and
//! carry hashes only; a line's text goes to the gateway whose approval it records; the whole log
//! goes to an auditor (`countersign auditor add`), and a gateway token is not an auditor token.

use crate::support::{Approver, GATEWAY, TestApp, audit_of};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use countersign_audit::merkle::{leaf_hash, verify_inclusion};
use countersign_audit::{Checkpoint, CheckpointHash};
use serde_json::{Value, json};

/// The destination accounts of the two gateways' payments: what must not leak.
const IBAN_A: &str = "DE89370400440532013000";
const IBAN_B: &str = "FR1420041010050500013M02606";

/// Alice enrolled (line 1 is her enrollment), then gateway A ([`GATEWAY`]) and gateway B each
/// asked for a payment: the app, B's client, and the log's lines.
async fn two_tenants() -> (TestApp, reqwest::Client, Vec<String>) {
    let app = TestApp::default_with(&[&Approver::alice()]).await;
    let (_, b) = app.other_gateway("gateway-b").await;
    app.create_pending(countersign_testkit::payment_fields(IBAN_A))
        .await;
    let r = app
        .send(b.post(app.url("/v1/approvals")).json(&json!({
            "agent_id": "agent-b",
            "tool_name": "payments.transfer",
            "params": countersign_testkit::payment_fields(IBAN_B),
        })))
        .await;
    assert_eq!(r.body["status"], "PENDING", "{r:?}");
    let lines = app.audit_text().lines().map(str::to_owned).collect();
    (app, b, lines)
}

/// The sequence number of the first line of `kind` whose text contains `needle`.
fn seq_of(lines: &[String], kind: &str, needle: &str) -> u64 {
    let at = lines
        .iter()
        .position(|l| {
            serde_json::from_str::<Value>(l).unwrap()["kind"] == kind && l.contains(needle)
        })
        .unwrap_or_else(|| panic!("no {kind} line with {needle}"));
    at as u64 + 1
}

fn decode(h: &Value) -> [u8; 32] {
    STANDARD
        .decode(h.as_str().unwrap())
        .unwrap()
        .try_into()
        .unwrap()
}

async fn checkpoint(app: &TestApp) -> Checkpoint {
    let note = app.get_text("/v1/audit/checkpoint").await;
    let cp = Checkpoint::verify(&note, &app.sealer.public_key(), None).unwrap();
    assert_eq!(cp.kind, CheckpointHash::MerkleRoot);
    cp
}

fn proof_path(seq: u64, size: u64, include_line: bool) -> String {
    let include = if include_line { "&include=line" } else { "" };
    format!("/v1/audit/proof/inclusion?seq={seq}&size={size}{include}")
}

/// A raw answer: status, `WWW-Authenticate`, body text.
async fn raw(req: reqwest::RequestBuilder) -> (u16, Option<String>, String) {
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let challenge = resp
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_owned());
    (status, challenge, resp.text().await.unwrap())
}

fn code(body: &str) -> String {
    let v: Value = serde_json::from_str(body).unwrap();
    v["error"]["code"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn an_anonymous_inclusion_proof_carries_hashes_and_no_line() {
    let (app, _, lines) = two_tenants().await;
    let cp = checkpoint(&app).await;
    assert_eq!(cp.size, lines.len() as u64);
    for seq in 1..=cp.size {
        let (status, _, text) = raw(app.anon.get(app.url(&proof_path(seq, cp.size, false)))).await;
        assert_eq!(status, 200, "{text}");
        // Nothing a line says: no line, no argument, no agent, gateway or principal.
        let body: Value = serde_json::from_str(&text).unwrap();
        assert!(body.get("line").is_none(), "line {seq} leaked: {text}");
        for secret in [IBAN_A, IBAN_B, "agent-7", "agent-b", GATEWAY, "alice"] {
            assert!(
                !text.contains(secret),
                "{secret} in the proof of {seq}: {text}"
            );
        }
        // Still a proof: the line an owner kept verifies offline against the signed checkpoint.
        let line = &lines[usize::try_from(seq - 1).unwrap()];
        let leaf = leaf_hash(line.as_bytes());
        assert_eq!(decode(&body["leaf_hash"]), leaf);
        let path: Vec<[u8; 32]> = body["proof"]
            .as_array()
            .unwrap()
            .iter()
            .map(decode)
            .collect();
        assert_eq!(
            verify_inclusion(seq - 1, cp.size, &leaf, &path, &cp.hash),
            Ok(())
        );
        assert!(verify_inclusion(seq - 1, cp.size, &leaf_hash(b"{}"), &path, &cp.hash).is_err());
    }
    // Credentials change nothing for a proof without include=line: a gateway's token gets the
    // same hashes-only answer.
    let as_gateway = app.get(&proof_path(2, cp.size, false)).await;
    assert_eq!(as_gateway.status, 200);
    assert!(as_gateway.body.get("line").is_none());
}

#[tokio::test]
async fn a_gateway_reads_the_lines_of_its_own_approvals_and_no_other() {
    let (app, b, lines) = two_tenants().await;
    let size = checkpoint(&app).await.size;
    let a_request = seq_of(&lines, "request", IBAN_A);
    let b_request = seq_of(&lines, "request", IBAN_B);
    let a_id = serde_json::from_str::<Value>(&lines[usize::try_from(a_request - 1).unwrap()])
        .unwrap()["approval_id"]
        .as_str()
        .unwrap()
        .to_owned();
    // A's `outcome` line carries no gateway name; its approval is A's all the same.
    let a_outcome = seq_of(&lines, "outcome", &a_id);
    for seq in [a_request, a_outcome] {
        let r = app.get(&proof_path(seq, size, true)).await;
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(
            r.body["line"],
            lines[usize::try_from(seq - 1).unwrap()].as_str()
        );
        assert_eq!(
            decode(&r.body["leaf_hash"]),
            leaf_hash(r.body["line"].as_str().unwrap().as_bytes())
        );
    }
    // B's line to A, A's line to B, and alice's enrollment (no gateway's) to either: 403, and
    // nothing of the line in the answer.
    let enrollment = seq_of(&lines, "enrollment", "alice");
    for (client, seq, secret) in [
        (&app.http, b_request, IBAN_B),
        (&b, a_request, IBAN_A),
        (&b, a_outcome, a_id.as_str()),
        (&app.http, enrollment, "alice"),
        (&b, enrollment, "alice"),
    ] {
        let (status, _, text) = raw(client.get(app.url(&proof_path(seq, size, true)))).await;
        assert_eq!(
            (status, code(&text)),
            (403, "not_your_line".to_owned()),
            "{seq}: {text}"
        );
        assert!(!text.contains(secret), "{seq}: {text}");
    }
    // No token, or a token nobody issued: 401 before anything is read.
    let (status, challenge, text) =
        raw(app.anon.get(app.url(&proof_path(a_request, size, true)))).await;
    assert_eq!(
        (status, challenge.as_deref()),
        (401, Some("Bearer")),
        "{text}"
    );
    assert!(!text.contains(IBAN_A));
    let (status, challenge, _) = raw(app
        .anon
        .get(app.url(&proof_path(a_request, size, true)))
        .bearer_auth("csg_not-a-token"))
    .await;
    assert_eq!(status, 401);
    assert!(challenge.unwrap().contains("invalid_token"));
    // An unknown `include` is refused, not ignored.
    let r = app
        .get(&format!(
            "/v1/audit/proof/inclusion?seq={a_request}&size={size}&include=everything"
        ))
        .await;
    assert_eq!(
        (r.status, r.body["error"]["code"].as_str()),
        (400, Some("invalid_query"))
    );
}

#[tokio::test]
async fn an_auditor_reads_every_line_and_the_whole_log() {
    let (app, _, lines) = two_tenants().await;
    let (_, auditor) = app.auditor("compliance").await;
    let size = checkpoint(&app).await.size;
    for seq in 1..=size {
        let r = app.get_as(&auditor, &proof_path(seq, size, true)).await;
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(
            r.body["line"],
            lines[usize::try_from(seq - 1).unwrap()].as_str()
        );
    }
    // The whole log in one page, and in pages of two laid end to end: the log's exact bytes,
    // which verify as the log.
    let log = app.audit_text();
    let (status, _, whole) = raw(auditor.get(app.url("/v1/audit/lines"))).await;
    assert_eq!(status, 200);
    assert_eq!(whole, log);
    assert!(audit_of(whole.as_bytes(), &app.sealer).is_valid());
    let mut paged = String::new();
    let mut after = 0;
    loop {
        let (status, _, page) =
            raw(auditor.get(app.url(&format!("/v1/audit/lines?after={after}&limit=2")))).await;
        assert_eq!(status, 200);
        if page.is_empty() {
            break;
        }
        after += page.lines().count() as u64;
        paged.push_str(&page);
    }
    assert_eq!(paged, log);
    let (status, _, beyond) =
        raw(auditor.get(app.url(&format!("/v1/audit/lines?after={}", u64::MAX)))).await;
    assert_eq!((status, beyond.as_str()), (200, ""));
    // Out of bounds, or an unknown parameter: 400.
    for (query, expected) in [
        ("limit=0", "bad_range"),
        ("limit=10001", "bad_range"),
        ("from=3", "invalid_query"),
    ] {
        let (status, _, text) =
            raw(auditor.get(app.url(&format!("/v1/audit/lines?{query}")))).await;
        assert_eq!((status, code(&text)), (400, expected.to_owned()), "{query}");
    }
}

#[tokio::test]
async fn a_revoked_auditor_reads_nothing() {
    let (app, _, _) = two_tenants().await;
    let size = checkpoint(&app).await.size;
    let (_, here) = app.auditor("in-process").await;
    let (_, elsewhere) = app.auditor("by-the-cli").await;
    for auditor in [&here, &elsewhere] {
        let (status, _, _) = raw(auditor.get(app.url("/v1/audit/lines"))).await;
        assert_eq!(status, 200);
    }
    // Revoked by the running service: refused at once.
    app.state.revoke_auditor("in-process").await.unwrap();
    // Revoked in the store by another process (`countersign auditor revoke`): refused once the
    // service sees the credentials version move (its sweeper looks every 500 ms).
    countersign_server::auditors::revoke(app.state.store().as_ref(), "by-the-cli", 0).unwrap();
    assert!(app.state.refresh_registry().await.unwrap());
    for auditor in [&here, &elsewhere] {
        let (status, challenge, text) = raw(auditor.get(app.url("/v1/audit/lines"))).await;
        assert_eq!(status, 401, "{text}");
        assert!(challenge.unwrap().contains("invalid_token"));
        assert!(!text.contains(IBAN_A));
        let (status, _, text) = raw(auditor.get(app.url(&proof_path(1, size, true)))).await;
        assert_eq!(status, 401, "{text}");
        assert!(!text.contains("alice"));
    }
}

#[tokio::test]
async fn a_gateway_token_is_not_an_auditor_token_nor_the_reverse() {
    let (app, b, _) = two_tenants().await;
    // The same name as a gateway and as an auditor: still two credentials of two kinds.
    let (auditor_token, auditor) = app.auditor(GATEWAY).await;
    for gateway in [&app.http, &b] {
        let (status, challenge, text) = raw(gateway.get(app.url("/v1/audit/lines"))).await;
        assert_eq!((status, code(&text)), (401, "unauthenticated".to_owned()));
        assert!(challenge.unwrap().contains("invalid_token"));
        assert!(!text.contains(IBAN_A) && !text.contains(IBAN_B));
    }
    let (status, challenge, _) = raw(app.anon.get(app.url("/v1/audit/lines"))).await;
    assert_eq!((status, challenge.as_deref()), (401, Some("Bearer")));
    // An auditor token on the gateway API: 401, whatever it asks.
    let id = app
        .create_pending(countersign_testkit::payment_fields("X"))
        .await;
    let calls = [
        auditor.post(app.url("/v1/approvals")).json(&json!({
            "agent_id": "agent-7",
            "tool_name": "payments.transfer",
            "params": countersign_testkit::payment_fields("Y"),
        })),
        auditor.get(app.url(&format!("/v1/approvals/{id}"))),
        auditor.post(app.url(&format!("/v1/approvals/{id}/withdraw"))),
        auditor
            .post(app.url(&format!("/v1/approvals/{id}/grant")))
            .json(&json!({"fingerprint": "AAAA"})),
        auditor.get(app.url("/v1/credentials")),
    ];
    for call in calls {
        let (status, _, text) = raw(call).await;
        assert_eq!(
            (status, code(&text)),
            (401, "unauthenticated".to_owned()),
            "{text}"
        );
    }
    assert!(app.state.gateway_of_token(&auditor_token).is_none());
    assert!(app.state.auditor_of_token(&app.token).is_none());
}
