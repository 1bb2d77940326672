//! Issue 29 §4: the audit log as C2SP tlog-tiles, and tlog-proof@v1 on grant receipts and
//! settled reads. The tiles must say what the JSON proofs say (one tree), the entry bundles must
//! be the lines the leaves hash, and Go's golang.org/x/mod/sumdb/tlog must read them (ignored
//! here; `.ci/steps/c2sp.sh` runs it).

use crate::support::{Approver, TestApp};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use countersign::{Decision, b64};
use countersign_audit::merkle::{MerkleTree, leaf_hash};
use countersign_audit::tiles::{TileKind, parse_entry_bundle, tiles_for_size};
use countersign_audit::{Checkpoint, Policy, TlogProof};
use countersign_testkit::payment_fields;
use serde_json::{Value, json};

const PREFIX: &str = "/countersign/audit";

/// GET as raw bytes: status, content type, cache control, body.
async fn raw(
    app: &TestApp,
    client: &reqwest::Client,
    path: &str,
) -> (u16, String, String, Vec<u8>) {
    let r = client.get(app.url(path)).send().await.unwrap();
    let header = |name: &str| {
        r.headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default()
    };
    let (ct, cc) = (header("content-type"), header("cache-control"));
    (
        r.status().as_u16(),
        ct,
        cc,
        r.bytes().await.unwrap().to_vec(),
    )
}

/// A log of more than `lines` lines: calls of a tool that needs no approval (two lines each).
async fn grow(app: &TestApp, lines: u64) -> Checkpoint {
    let mut i = 0;
    loop {
        let note = app.get_text(&format!("{PREFIX}/checkpoint")).await;
        let cp = Checkpoint::verify(&note, &app.sealer.public_key(), None).unwrap();
        if cp.size > lines {
            return cp;
        }
        for _ in 0..32 {
            let r = app
                .create("read_file", json!({"path": format!("/srv/{i}")}))
                .await;
            assert_eq!(r.status, 200, "{:?}", r.body);
            i += 1;
        }
    }
}

fn hash(v: &Value) -> [u8; 32] {
    STANDARD
        .decode(v.as_str().unwrap())
        .unwrap()
        .try_into()
        .unwrap()
}

#[tokio::test]
async fn tiles_agree_with_the_inclusion_proofs_and_bundles_with_the_lines() {
    let app = TestApp::default_with(&[&Approver::alice()]).await;
    let cp = grow(&app, 300).await;
    let anon = reqwest::Client::new();
    // Every tile of the checkpoint's tree, for anyone, immutable.
    let mut leaves = Vec::new();
    let mut level1 = Vec::new();
    for tile in tiles_for_size(cp.size) {
        let (status, ct, cc, body) = raw(&app, &anon, &format!("{PREFIX}/{}", tile.path())).await;
        assert_eq!(status, 200, "{}", tile.path());
        assert_eq!(ct, "application/octet-stream");
        assert!(cc.contains("immutable") && cc.starts_with("public"), "{cc}");
        assert_eq!(body.len(), usize::from(tile.width) * 32, "{}", tile.path());
        let hashes = body
            .chunks_exact(32)
            .map(|h| <[u8; 32]>::try_from(h).unwrap());
        match tile.kind {
            TileKind::Hashes { level: 0 } => leaves.extend(hashes),
            TileKind::Hashes { level: 1 } => level1.extend(hashes),
            other => panic!("a tree of {} has no {other:?} tile", cp.size),
        }
    }
    // Level 0 is the leaf hashes the JSON proofs start from; the tree they make is the
    // checkpoint's.
    assert_eq!(leaves.len() as u64, cp.size);
    for seq in [1, 2, 200, 256, 257, cp.size] {
        let p = app
            .get(&format!(
                "/v1/audit/proof/inclusion?seq={seq}&size={}",
                cp.size
            ))
            .await;
        assert_eq!(
            hash(&p.body["leaf_hash"]),
            leaves[seq as usize - 1],
            "{seq}"
        );
    }
    let mut tree = MerkleTree::new();
    for leaf in &leaves {
        tree.push(*leaf);
    }
    assert_eq!(tree.root(cp.size).unwrap(), cp.hash);
    // Level 1's hash is the root of the first 256 lines, as the consistency proof says.
    let c = app
        .get(&format!(
            "/v1/audit/proof/consistency?from=256&to={}",
            cp.size
        ))
        .await;
    assert_eq!(level1, [hash(&c.body["from_root"])]);

    // Entry bundles: auditors only (not anyone, not a gateway), the lines the leaves hash.
    let bundle = format!("{PREFIX}/tile/entries/000");
    assert_eq!(raw(&app, &anon, &bundle).await.0, 401);
    assert_eq!(raw(&app, &app.http, &bundle).await.0, 401);
    let (_, auditor) = app.auditor("auditor").await;
    let text = app.audit_text();
    let lines: Vec<&str> = text.lines().collect();
    for tile in ["000", "001.p/44"] {
        let (status, ct, cc, body) =
            raw(&app, &auditor, &format!("{PREFIX}/tile/entries/{tile}")).await;
        let width = if tile == "000" { 256 } else { 44 };
        assert_eq!(
            (status, ct.as_str()),
            (200, "application/octet-stream"),
            "{tile}"
        );
        assert!(
            cc.starts_with("private") && cc.contains("immutable"),
            "{cc}"
        );
        let entries = parse_entry_bundle(&body).unwrap();
        assert_eq!(entries.len(), width);
        let first = if tile == "000" { 0 } else { 256 };
        for (k, entry) in entries.iter().enumerate() {
            assert_eq!(leaf_hash(entry), leaves[first + k]);
            assert_eq!(*entry, lines[first + k].as_bytes());
        }
    }
    // Not canonical, not yet in the log, not a C2SP path: 404.
    let beyond = format!("{:03}", cp.size / 256 + 1);
    for path in [
        "tile/0/0".to_owned(),
        "tile/0/x000/000".to_owned(),
        format!("tile/0/{beyond}"),
        "tile/1/000".to_owned(),
        "tile/8/0/000".to_owned(),
        "tile/data/000".to_owned(),
    ] {
        let (status, _, _, body) = raw(&app, &anon, &format!("{PREFIX}/{path}")).await;
        assert_eq!(status, 404, "{path}: {}", String::from_utf8_lossy(&body));
    }
    let (status, _, _, _) = raw(&app, &auditor, &format!("{PREFIX}/tile/entries/{beyond}")).await;
    assert_eq!(status, 404);
}

/// The log's key as the service publishes it, in a tlog-policy without witnesses.
async fn policy(app: &TestApp) -> Policy {
    let vkey = app.get("/v1/service-key").await.body["checkpoint_vkey"]
        .as_str()
        .unwrap()
        .to_owned();
    Policy::parse(format!("log {vkey}\nquorum none\n").as_bytes()).unwrap()
}

/// The proof holds, and its `extra` is the line of `kind` for approval `id`.
fn check(proof: &str, policy: &Policy, kind: &str, id: &str) -> TlogProof {
    let proof = TlogProof::parse(proof).unwrap();
    let line = proof.extra.clone().unwrap();
    proof.verify(&line, policy, None).unwrap();
    let v: Value = serde_json::from_slice(&line).unwrap();
    assert_eq!(
        (v["kind"].as_str(), v["approval_id"].as_str()),
        (Some(kind), Some(id))
    );
    assert_eq!(v["seq"].as_u64(), Some(proof.index + 1));
    proof
}

/// Approval `A` of the payment tool decided by alice; the grant collected: (id, receipt).
async fn granted(app: &TestApp, alice: &Approver) -> (String, Value) {
    let params = payment_fields("A");
    let id = app.create_pending(params.clone()).await;
    assert_eq!(alice.decide(app, &id, Decision::Approved).await.status, 200);
    let action = countersign_testkit::tool_call_action("agent-7", "payments.transfer", params);
    let fp = b64::encode(&countersign_testkit::op_hash_of(
        &action,
        Decision::Approved,
    ));
    let receipt = app
        .post(
            &format!("/v1/approvals/{id}/grant"),
            &json!({"fingerprint": fp}),
        )
        .await;
    assert_eq!(receipt.status, 200, "{:?}", receipt.body);
    (id, receipt.body)
}

/// A command's output, run off the async workers (the service under test runs on them).
async fn output(mut cmd: std::process::Command) -> std::process::Output {
    tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap()
}

#[tokio::test]
async fn a_grant_receipt_and_a_settled_read_carry_tlog_proofs_that_verify_offline() {
    let alice = Approver::alice();
    let app = TestApp::default_with(&[&alice]).await;
    let policy = policy(&app).await;
    // The grant receipt: the grant line, under the receipt's own checkpoint.
    let (id, receipt) = granted(&app, &alice).await;
    let grant = check(
        receipt["tlog_proof"].as_str().unwrap(),
        &policy,
        "grant",
        &id,
    );
    assert_eq!(grant.checkpoint, receipt["checkpoint"].as_str().unwrap());
    // The settled read: the Decision line (before the grant).
    let read = app.get(&format!("/v1/approvals/{id}")).await;
    assert_eq!(read.body["status"], "APPROVED");
    let decision = check(
        read.body["tlog_proof"].as_str().unwrap(),
        &policy,
        "decision",
        &id,
    );
    assert!(grant.index > decision.index);
    // Another line's bytes on the Decision's path: refused.
    assert!(decision.verify(b"{}", &policy, None).is_err());
    // PENDING: no proof. Settled by withdrawal: the settlement line.
    let other = app.create_pending(payment_fields("B")).await;
    let pending = app.get(&format!("/v1/approvals/{other}")).await;
    assert!(
        pending.body.get("tlog_proof").is_none(),
        "{:?}",
        pending.body
    );
    let withdrawn = app
        .post(&format!("/v1/approvals/{other}/withdraw"), &json!({}))
        .await;
    assert_eq!(withdrawn.status, 200);
    let read = app.get(&format!("/v1/approvals/{other}")).await;
    check(
        read.body["tlog_proof"].as_str().unwrap(),
        &policy,
        "settlement",
        &other,
    );
}

/// Go's golang.org/x/mod/sumdb (Debian's golang-golang-x-mod-dev 0.7.0) reads the served tiles
/// through tlog.TileHashReader, verifies the checkpoint with sumdb/note, proves entries with
/// tlog.ProveRecord / CheckRecord, finds the service's JSON proof equal to its own, and checks
/// a grant receipt's tlog-proof.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Go 1.19 and Debian's golang-golang-x-mod-dev (.ci/steps/c2sp.sh installs them)"]
async fn go_sumdb_tlog_reads_the_tiles_and_checks_the_proofs() {
    let alice = Approver::alice();
    let app = TestApp::default_with(&[&alice]).await;
    let (_, receipt) = granted(&app, &alice).await;
    let proof_text = receipt["tlog_proof"].as_str().unwrap().to_owned();
    let grant_index = TlogProof::parse(&proof_text).unwrap().index;
    let cp = grow(&app, 520).await;
    let dir = std::env::temp_dir().join(format!("countersign-c2sp-go-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let proof_file = dir.join("grant.tlog-proof");
    std::fs::write(&proof_file, &proof_text).unwrap();
    let vkey = app.get("/v1/service-key").await.body["checkpoint_vkey"]
        .as_str()
        .unwrap()
        .to_owned();
    let (token, _) = app.auditor("go").await;
    let base = app.url("");
    let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/c2sp-go");
    let bin = dir.join("c2sp-check");
    let mut build = std::process::Command::new("go");
    build
        .args(["build", "-o"])
        .arg(&bin)
        .arg(".")
        .current_dir(&source)
        .env("GOPROXY", "off")
        .env("GOFLAGS", "-mod=readonly");
    let out = output(build).await;
    assert!(
        out.status.success(),
        "go build: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    for index in [0, 255, 256, 511, 512, cp.size - 1, grant_index] {
        let mut cmd = std::process::Command::new(&bin);
        cmd.arg("-prefix")
            .arg(format!("{base}{PREFIX}"))
            .arg("-service")
            .arg(&base)
            .arg("-vkey")
            .arg(&vkey)
            .arg("-token")
            .arg(&token)
            .arg("-index")
            .arg(index.to_string());
        if index == grant_index {
            cmd.arg("-proof").arg(&proof_file);
        }
        let out = output(cmd).await;
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "index {index}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.contains("c2sp-check: ok"), "{stdout}");
        assert!(stdout.contains("service: its inclusion proof is the one the tiles give"));
        if index == grant_index {
            assert!(stdout.contains("tlog-proof: entry"), "{stdout}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
