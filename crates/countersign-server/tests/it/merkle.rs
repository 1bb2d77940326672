//! Issue 16 items 3 and 4 over HTTP: inclusion and consistency proofs of the audit log's Merkle
//! tree check against the service's signed checkpoints, and the service has its checkpoints
//! cosigned by a C2SP witness it is configured with.

use crate::support::{Approver, TestApp, config};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use countersign_audit::merkle::{leaf_hash, verify_consistency, verify_inclusion};
use countersign_audit::note::{NoteSigner, NoteVerifier, TYPE_ED25519, valid_cosignatures};
use countersign_audit::{Checkpoint, CheckpointHash};
use countersign_server::witness::{Witness, WitnessRouter as _};
use serde_json::Value;
use std::sync::Arc;

fn hashes(v: &Value) -> Vec<[u8; 32]> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|h| {
            STANDARD
                .decode(h.as_str().unwrap())
                .unwrap()
                .try_into()
                .unwrap()
        })
        .collect()
}

async fn checkpoint(app: &TestApp) -> Checkpoint {
    let note = app.get_text("/v1/audit/checkpoint").await;
    let cp = Checkpoint::verify(&note, &app.sealer.public_key(), None).unwrap();
    assert_eq!(cp.kind, CheckpointHash::MerkleRoot);
    cp
}

#[tokio::test]
async fn inclusion_and_consistency_proofs_check_against_signed_checkpoints() {
    let app = TestApp::default_with(&[&Approver::alice()]).await;
    app.create_pending(countersign_testkit::payment_fields("A"))
        .await;
    let old = checkpoint(&app).await;
    for to in ["B", "C", "D"] {
        app.create_pending(countersign_testkit::payment_fields(to))
            .await;
    }
    let new = checkpoint(&app).await;
    assert!(new.size > old.size && old.size >= 2);
    let log = app.audit_text();
    // Every line of the newer checkpoint is provably in it (an auditor reads every line).
    let (_, auditor) = app.auditor("auditor").await;
    for seq in 1..=new.size {
        let p = app
            .get_as(
                &auditor,
                &format!(
                    "/v1/audit/proof/inclusion?seq={seq}&size={}&include=line",
                    new.size
                ),
            )
            .await;
        assert_eq!(p.status, 200, "{:?}", p.body);
        let line = p.body["line"].as_str().unwrap();
        assert_eq!(
            Some(line),
            log.lines().nth(usize::try_from(seq - 1).unwrap())
        );
        let proof = hashes(&p.body["proof"]);
        let leaf = leaf_hash(line.as_bytes());
        assert_eq!(
            verify_inclusion(seq - 1, new.size, &leaf, &proof, &new.hash),
            Ok(())
        );
        // Another line's bytes do not verify on this path.
        let other = leaf_hash(b"{\"forged\":true}");
        assert!(verify_inclusion(seq - 1, new.size, &other, &proof, &new.hash).is_err());
    }
    let p = app
        .get(&format!(
            "/v1/audit/proof/consistency?from={}&to={}",
            old.size, new.size
        ))
        .await;
    assert_eq!(p.status, 200, "{:?}", p.body);
    let proof = hashes(&p.body["proof"]);
    assert_eq!(
        verify_consistency(old.size, new.size, &old.hash, &new.hash, &proof),
        Ok(())
    );
    // The old checkpoint of another history does not verify against the same proof.
    let forked = leaf_hash(b"another history");
    assert!(verify_consistency(old.size, new.size, &forked, &new.hash, &proof).is_err());
    // Out of range: 400 with a code, never a 500.
    for bad in [
        format!("/v1/audit/proof/inclusion?seq=0&size={}", new.size),
        "/v1/audit/proof/inclusion?seq=2&size=1".to_owned(),
        format!("/v1/audit/proof/inclusion?seq=1&size={}", new.size + 1),
        format!(
            "/v1/audit/proof/consistency?from={}&to={}",
            new.size, old.size
        ),
        format!("/v1/audit/proof/consistency?from=1&to={}", new.size + 1),
    ] {
        assert_eq!(app.get(&bad).await.status, 400, "{bad}");
    }
}

#[tokio::test]
async fn the_service_has_its_checkpoints_cosigned_by_its_witnesses() {
    // A witness on loopback, trusting this service's checkpoint key.
    let origin_app = TestApp::default_with(&[]).await;
    let log_key = NoteVerifier {
        name: origin_app.state.audit_origin().to_owned(),
        kind: TYPE_ED25519,
        key: origin_app.sealer.public_key(),
    };
    assert_eq!(
        origin_app.get("/v1/service-key").await.body["checkpoint_vkey"],
        log_key.vkey()
    );
    let dir = std::env::temp_dir().join(format!("countersign-it-witness-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let signer = NoteSigner::from_seed("witness.example/w1", [3; 32]).unwrap();
    let cosigner = signer.cosigner();
    let witness = Arc::new(Witness::new(signer, vec![log_key], &dir).unwrap());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, witness.router()).await;
    });
    // The same service (same key and public URL, so the same origin) configured with it.
    let mut c = config();
    c.audit_origin = Some(origin_app.state.audit_origin().to_owned());
    c.witnesses = vec![countersign_server::config::WitnessConfig {
        url: url.clone(),
        key: cosigner.vkey(),
    }];
    let app = TestApp::start(c, &[&Approver::alice()]).await;
    assert_eq!(app.get("/v1/audit/checkpoint/witnessed").await.status, 404);
    app.create_pending(countersign_testkit::payment_fields("A"))
        .await;
    let (note, n) = app.state.witness_checkpoint().await.unwrap();
    assert_eq!(n, 1);
    let found = valid_cosignatures(&note, std::slice::from_ref(&cosigner)).unwrap();
    assert_eq!(found.len(), 1);
    // The log grows; the next checkpoint goes with a consistency proof from the last one.
    app.create_pending(countersign_testkit::payment_fields("B"))
        .await;
    let (note2, n) = app.state.witness_checkpoint().await.unwrap();
    assert_eq!(n, 1);
    let published = app.get_text("/v1/audit/checkpoint/witnessed").await;
    assert_eq!(published, note2);
    let cp2 = Checkpoint::verify(&note2, &app.sealer.public_key(), None).unwrap();
    let cp1 = Checkpoint::verify(&note, &app.sealer.public_key(), None).unwrap();
    assert!(cp2.size > cp1.size);
    assert_eq!(
        valid_cosignatures(&note2, std::slice::from_ref(&cosigner)).map(|v| v.len()),
        Ok(1)
    );
    server.abort();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every line of the log's first `size` is provably in the checkpoint, and the tree of `from`
/// lines is a prefix of it, by the proofs `state` serves.
async fn assert_proofs_check(state: &countersign_server::AppState, from: u64, cp: &Checkpoint) {
    for seq in 1..=cp.size {
        let p = state.inclusion_proof(seq, cp.size).await.unwrap();
        let proof: Vec<[u8; 32]> = p
            .proof
            .iter()
            .map(|h| STANDARD.decode(h).unwrap().try_into().unwrap())
            .collect();
        let leaf = STANDARD.decode(&p.leaf_hash).unwrap().try_into().unwrap();
        assert_eq!(p.line, None, "a proof carries no line unless asked for");
        assert_eq!(
            verify_inclusion(seq - 1, cp.size, &leaf, &proof, &cp.hash),
            Ok(()),
            "{seq}/{}",
            cp.size
        );
    }
    let p = state.consistency_proof(from, cp.size).await.unwrap();
    let old = STANDARD.decode(&p.from_root).unwrap().try_into().unwrap();
    let proof: Vec<[u8; 32]> = p
        .proof
        .iter()
        .map(|h| STANDARD.decode(h).unwrap().try_into().unwrap())
        .collect();
    assert_eq!(
        verify_consistency(from, cp.size, &old, &cp.hash, &proof),
        Ok(())
    );
}

#[tokio::test]
async fn the_hash_file_beside_the_audit_log_is_checked_against_the_log() {
    let dir = std::env::temp_dir().join(format!("countersign-it-hashfile-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let open =
        || countersign_server::open_state(&dir, config(), "http://127.0.0.1:1".to_owned()).unwrap();
    let hash_file = dir.join("audit.merkle");
    let state = open();
    // One audit line per enrolled credential.
    for i in 0..23u8 {
        let key = countersign_softkey::SoftKey::from_seed(countersign_softkey::Alg::Es256, [i; 32])
            .unwrap();
        let approver = Approver::with_key(&format!("approver-{i}"), key);
        state.enroll(vec![approver.record()]).await.unwrap();
    }
    let note = state.checkpoint().await.unwrap();
    let cp = Checkpoint::verify(&note, &state_key(&dir), None).unwrap();
    assert!(cp.size > 20);
    assert_proofs_check(&state, 5, &cp).await;
    // 2n - popcount(n) hashes after the 32-byte header.
    let stored = 2 * cp.size - u64::from(cp.size.count_ones());
    let written = std::fs::read(&hash_file).unwrap();
    assert_eq!(written.len() as u64, 32 * (1 + stored));

    // Edited while the service runs (leaf 1's hash, on leaf 0's path): the proof that reads it
    // fails its check and is not served; the tree is rebuilt from the log for the next call.
    let mut edited = written.clone();
    edited[32 + 32] ^= 1;
    std::fs::write(&hash_file, &edited).unwrap();
    assert!(state.inclusion_proof(1, cp.size).await.is_err());
    assert_proofs_check(&state, 5, &cp).await;
    assert_eq!(std::fs::read(&hash_file).unwrap(), written);
    drop(state);

    // Edited, then cut mid-hash, while the service is down: found and repaired at the restart.
    for damaged in [edited.clone(), written[..written.len() - 40].to_vec()] {
        std::fs::write(&hash_file, &damaged).unwrap();
        let state = open();
        assert_eq!(
            Checkpoint::verify(&state.checkpoint().await.unwrap(), &state_key(&dir), None)
                .unwrap()
                .hash,
            cp.hash
        );
        assert_proofs_check(&state, 5, &cp).await;
        assert_eq!(std::fs::read(&hash_file).unwrap(), written);
    }
    // Gone: written again from the log.
    std::fs::remove_file(&hash_file).unwrap();
    let state = open();
    assert_proofs_check(&state, 1, &cp).await;
    assert_eq!(std::fs::read(&hash_file).unwrap(), written);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The data directory's audit key.
fn state_key(dir: &std::path::Path) -> ed25519_dalek::VerifyingKey {
    let text = std::fs::read_to_string(dir.join("service-key.pub")).unwrap();
    let bytes = countersign::b64::decode(text.trim()).unwrap();
    ed25519_dalek::VerifyingKey::from_bytes(&bytes.try_into().unwrap()).unwrap()
}
