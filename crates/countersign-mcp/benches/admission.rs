//! What admission costs per frame, next to the serde_json tree the relay used to build for a held
//! call: `cargo bench -p countersign-mcp --bench admission`. Figures: docs/PERFORMANCE.md.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "benchmark harness: a panic stops a measurement whose setup is broken"
)]

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;

fn frames() -> [(&'static str, String); 3] {
    let small = r#"{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"/srv/data/report.txt"}}}"#.to_owned();
    let content: String = "Lorem ipsum dolor sit amet, caf\u{e9} \\n ".repeat(1700);
    let file = format!(
        r#"{{"jsonrpc":"2.0","id":18,"method":"tools/call","params":{{"name":"write_file","arguments":{{"path":"/srv/data/out.txt","content":"{content}"}}}}}}"#
    );
    let nested = format!(
        r#"{{"jsonrpc":"2.0","id":19,"method":"tools/call","params":{{"name":"query","arguments":{{"filter":{}1{}}}}}}}"#,
        "{\"and\":[".repeat(20),
        "]}".repeat(20)
    );
    [("small", small), ("file_64k", file), ("nested_20", nested)]
}

fn admission(c: &mut Criterion) {
    let mut group = c.benchmark_group("admission");
    for (name, frame) in frames() {
        assert!(countersign_mcp::admission::admit(&frame).is_ok(), "{name}");
        group.throughput(Throughput::Bytes(frame.len() as u64));
        group.bench_function(format!("admit/{name}"), |b| {
            b.iter(|| countersign_mcp::admission::admit(black_box(&frame)))
        });
        group.bench_function(format!("serde_value/{name}"), |b| {
            b.iter(|| serde_json::from_str::<serde_json::Value>(black_box(&frame)))
        });
    }
    group.finish();
}

criterion_group!(benches, admission);
criterion_main!(benches);
