//! Memory of the audit Merkle tree: `cargo bench -p countersign-server --bench merkle -- N`
//! (default 1,000,000 leaves).
//!
//! Grows the file-backed tree the service keeps (`StoredTree`, the hash file in a temporary
//! directory, batches of 4096 leaves as the service reads them) and then the whole-in-memory
//! `MerkleTree` to N leaves, printing the process's resident memory (VmRSS) before and after
//! each, the hash file's size, the time to grow each, and the mean time of an inclusion and a
//! consistency proof from each at size N.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "benchmark harness: a panic stops a measurement whose setup is broken"
)]

use countersign_audit::hashfile::StoredTree;
use countersign_audit::merkle::{MerkleTree, leaf_hash};
use std::time::Instant;

fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kib| kib.parse::<f64>().ok())
        .map_or(f64::NAN, |kib| kib / 1024.0)
}

fn leaves(from: u64, to: u64) -> Vec<[u8; 32]> {
    (from..to)
        .map(|i| leaf_hash(format!("audit line {i}").as_bytes()))
        .collect()
}

/// Mean microseconds per proof over `rounds` spread indices.
fn mean_us(rounds: u64, mut f: impl FnMut(u64)) -> f64 {
    let t = Instant::now();
    for r in 0..rounds {
        f(r);
    }
    t.elapsed().as_secs_f64() * 1e6 / rounds as f64
}

fn main() {
    let n: u64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let dir = std::env::temp_dir().join(format!("countersign-merkle-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("audit.merkle");
    let spread = |r: u64| (r * 7_919) % n;

    let before = rss_mib();
    let t = Instant::now();
    let mut stored = StoredTree::open(&path).unwrap();
    let mut at = 0;
    while at < n {
        let to = (at + 4096).min(n);
        stored.extend(&leaves(at, to)).unwrap();
        at = to;
    }
    let grow_file = t.elapsed().as_secs_f64();
    let after_file = rss_mib();
    let file_bytes = std::fs::metadata(&path).unwrap().len();
    let inc_file = mean_us(1000, |r| {
        stored.inclusion_proof(spread(r), n).unwrap();
    });
    let con_file = mean_us(1000, |r| {
        stored.consistency_proof(spread(r) + 1, n).unwrap();
    });
    let root = stored.root(n).unwrap();

    let t = Instant::now();
    let mut memory = MerkleTree::new();
    for chunk_start in (0..n).step_by(4096) {
        for leaf in leaves(chunk_start, (chunk_start + 4096).min(n)) {
            memory.push(leaf);
        }
    }
    let grow_memory = t.elapsed().as_secs_f64();
    let after_memory = rss_mib();
    assert_eq!(memory.root(n).unwrap(), root);
    let inc_memory = mean_us(1000, |r| {
        memory.inclusion_proof(spread(r), n).unwrap();
    });
    let con_memory = mean_us(1000, |r| {
        memory.consistency_proof(spread(r) + 1, n).unwrap();
    });
    let _ = std::fs::remove_dir_all(&dir);

    println!(
        "| tree of {n} leaves | RSS growth (MiB) | grow (s) | inclusion proof (µs) | consistency proof (µs) |"
    );
    println!("|---|---|---|---|---|");
    println!(
        "| hash file (`StoredTree`), {:.1} MiB on disk | {:.1} | {grow_file:.2} | {inc_file:.1} | {con_file:.1} |",
        file_bytes as f64 / 1048576.0,
        after_file - before,
    );
    println!(
        "| in memory (`MerkleTree`) | {:.1} | {grow_memory:.2} | {inc_memory:.1} | {con_memory:.1} |",
        after_memory - after_file,
    );
    println!(
        "RSS: start {before:.1} MiB, after the file-backed tree {after_file:.1}, after the in-memory tree {after_memory:.1}"
    );
}
