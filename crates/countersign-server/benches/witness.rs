//! Witness cosigning latency and rate: `cargo bench -p countersign-server --bench witness -- N`.
//!
//! A `countersign witness` router on loopback (HTTP/1.1, keep-alive), one log, N sequential
//! `add-checkpoint` calls, each growing the log by 16 lines and carrying the consistency proof
//! from the previous checkpoint, as the service sends them. Each call verifies the log's
//! signature and the proof, writes the new state (fsync, rename) and cosigns.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "benchmark harness: a panic stops a measurement whose setup is broken"
)]

use countersign_audit::merkle::MerkleTree;
use countersign_audit::note::{NoteSigner, NoteVerifier, TYPE_ED25519};
use countersign_audit::{AuditSealer, Checkpoint, CheckpointHash};
use countersign_server::witness::{Witness, WitnessRouter as _};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn main() {
    let n: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(2000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(run(n));
}

async fn run(n: usize) {
    const ORIGIN: &str = "bench.example/countersign/audit";
    let sealer = AuditSealer::from_seed([1; 32]);
    let dir =
        std::env::temp_dir().join(format!("countersign-witness-bench-{}", std::process::id()));
    let log = NoteVerifier {
        name: ORIGIN.into(),
        kind: TYPE_ED25519,
        key: sealer.public_key(),
    };
    let signer = NoteSigner::from_seed("bench.example/w1", [2; 32]).unwrap();
    let witness = Arc::new(Witness::new(signer, vec![log], &dir).unwrap());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/add-checkpoint", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, witness.router()).await });
    let http = reqwest::Client::new();
    let mut tree = MerkleTree::new();
    let mut old = 0u64;
    let mut latencies = Vec::with_capacity(n);
    let started = Instant::now();
    for i in 0..n {
        for j in 0..16 {
            tree.push(countersign_audit::merkle::leaf_hash(
                format!("line {i}.{j}").as_bytes(),
            ));
        }
        let size = tree.size();
        let note = sealer
            .sign_checkpoint(&Checkpoint {
                origin: ORIGIN.into(),
                size,
                hash: tree.root(size).unwrap(),
                time: "2026-12-03T10:00:00Z".into(),
                kind: CheckpointHash::MerkleRoot,
            })
            .unwrap();
        let mut body = format!("old {old}\n");
        for h in tree.consistency_proof(old, size).unwrap() {
            use base64::Engine as _;
            body.push_str(&base64::engine::general_purpose::STANDARD.encode(h));
            body.push('\n');
        }
        body.push('\n');
        body.push_str(&note);
        let t = Instant::now();
        let resp = http.post(&url).body(body).send().await.unwrap();
        assert_eq!(resp.status(), 200);
        let _ = resp.text().await.unwrap();
        latencies.push(t.elapsed());
        old = size;
    }
    let elapsed = started.elapsed().as_secs_f64();
    latencies.sort_unstable();
    let pct = |p: f64| {
        let i = ((latencies.len() as f64 - 1.0) * p).round() as usize;
        latencies
            .get(i)
            .map_or(0.0, |d: &Duration| d.as_secs_f64() * 1000.0)
    };
    println!("## Witness benchmark\n");
    println!("{n} sequential add-checkpoint calls, 16 new lines each, loopback HTTP/1.1\n");
    println!("| measure | value |\n|---|---|");
    println!(
        "| cosignatures per second (one client) | {:.0} |",
        n as f64 / elapsed
    );
    println!(
        "| latency p50 / p99 (ms) | {:.3} / {:.3} |",
        pct(0.5),
        pct(0.99)
    );
    let _ = std::fs::remove_dir_all(&dir);
}
