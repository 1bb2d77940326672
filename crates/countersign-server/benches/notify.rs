//! Notification figures for docs/PERFORMANCE.md: measured and printed, never asserted.
//!
//! `cargo bench -p countersign-server --bench notify [-- APPROVALS [ROUNDS]]` (default 1000, 2).
//!
//! One process, two services on their own SQLite files (as `serve` opens them): one with four
//! channels — Slack, Teams and a webhook answered at once by receivers on 127.0.0.1, and a
//! webhook whose receiver never answers (stalled) — and one with none. Each round creates
//! APPROVALS PENDING approvals on each (16 at a time, through `AppState::create`, the path
//! behind `POST /v1/approvals`), alternating which goes first, and reports:
//! - creation throughput with all channels on and with none, and their ratio;
//! - per answering channel, the time from an approval's creation to its delivery (p50, p99),
//!   while the stalled channel holds its own deliveries open.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "a benchmark: a panic is a failed run"
)]

use axum::Router;
use axum::extract::Path;
use axum::routing::post;
use countersign_audit::AuditSealer;
use countersign_server::config::Durability;
use countersign_server::store::SqliteStore;
use countersign_server::{AppState, Config, CreateRequest, StateParts, SystemClock};
use countersign_testkit::{ORIGIN, RP_ID};
use serde_json::json;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

type Arrivals = Arc<Mutex<HashMap<(String, String), Instant>>>;

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let approvals = args.first().copied().unwrap_or(1000);
    let rounds = args.get(1).copied().unwrap_or(2);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(run(approvals, rounds));
}

/// The approval id in a delivered body (every channel's body names it).
fn approval_id(body: &str) -> Option<String> {
    let start = body.find("apv_")?;
    Some(
        body[start..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
            .collect(),
    )
}

async fn receivers(arrivals: Arrivals) -> String {
    let router = Router::new()
        .route(
            "/ok/{channel}",
            post(move |Path(channel): Path<String>, body: String| {
                let arrivals = arrivals.clone();
                async move {
                    if let Some(id) = approval_id(&body) {
                        arrivals
                            .lock()
                            .unwrap()
                            .entry((channel, id))
                            .or_insert_with(Instant::now);
                    }
                }
            }),
        )
        .route(
            "/stall",
            post(|| async { std::future::pending::<()>().await }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await });
    base
}

fn service(dir: &std::path::Path, name: &str, channels: &str) -> AppState {
    let config = Config::from_toml(&format!(
        "rp_id = \"{RP_ID}\"\norigins = [\"{ORIGIN}\"]\n[timeouts]\napproval_seconds = 3600\n\
         {channels}"
    ))
    .unwrap();
    let sealer = AuditSealer::from_seed([3; 32]);
    let store = SqliteStore::open(
        &dir.join(format!("{name}.db")),
        sealer.clone(),
        Durability::Normal,
    )
    .unwrap();
    AppState::new(StateParts {
        config,
        public_url: "http://127.0.0.1:1".into(),
        store: Arc::new(store),
        clock: Arc::new(SystemClock),
        sealer,
        mirror: None,
    })
    .unwrap()
}

/// Create `n` approvals, 16 at a time; returns each id's creation instant and the elapsed time.
async fn create(state: &AppState, round: usize, n: usize) -> (Vec<(String, Instant)>, Duration) {
    let started = Instant::now();
    let mut out = Vec::with_capacity(n);
    let mut next = 0;
    while next < n {
        let batch: Vec<_> = (next..n.min(next + 16))
            .map(|i| {
                let state = state.clone();
                tokio::spawn(async move {
                    let req: CreateRequest = serde_json::from_value(json!({
                        "agent_id": "bench",
                        "tool_name": "deploy",
                        "params": {"round": round, "n": i},
                    }))
                    .unwrap();
                    let at = Instant::now();
                    let r = state.create(req, "bench").await.unwrap();
                    (r.approval_id.unwrap(), at)
                })
            })
            .collect();
        next += batch.len();
        for task in batch {
            out.push(task.await.unwrap());
        }
    }
    (out, started.elapsed())
}

fn pct(v: &mut [Duration], p: f64) -> f64 {
    v.sort_unstable();
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v.get(i).map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

async fn run(n: usize, rounds: usize) {
    let dir = std::env::temp_dir().join(format!("countersign-bench-notify-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let arrivals: Arrivals = Arc::default();
    let base = receivers(arrivals.clone()).await;
    let mut channels = String::new();
    for (name, kind, path) in [
        ("slack", "slack", "ok/slack"),
        ("teams", "teams", "ok/teams"),
        ("hook", "webhook", "ok/hook"),
        ("stalled", "webhook", "stall"),
    ] {
        let file = dir.join(format!("{name}.url"));
        std::fs::write(&file, format!("{base}/{path}")).unwrap();
        channels.push_str(&format!(
            "[[notify.channels]]\nname = \"{name}\"\nkind = \"{kind}\"\nurl_file = {:?}\n",
            file.display().to_string()
        ));
    }
    let on = service(&dir, "on", &channels);
    let off = service(&dir, "off", "");
    let key = countersign_testkit::key("alice-es256");
    for state in [&on, &off] {
        state
            .enroll(vec![countersign_testkit::enroll(&key, "alice")])
            .await
            .unwrap();
        state.expire_overdue().await.unwrap();
    }
    println!("notify bench: {n} approvals per service per round, {rounds} round(s)");
    let mut created_on = Vec::new();
    for round in 0..rounds {
        let (first, second) = if round % 2 == 0 {
            (&off, &on)
        } else {
            (&on, &off)
        };
        let (a, ta) = create(first, round, n).await;
        let (b, tb) = create(second, round, n).await;
        let (t_on, t_off, ids_on) = if round % 2 == 0 {
            (tb, ta, b)
        } else {
            (ta, tb, a)
        };
        created_on.extend(ids_on);
        let (r_on, r_off) = (
            n as f64 / t_on.as_secs_f64(),
            n as f64 / t_off.as_secs_f64(),
        );
        println!(
            "round {round}: creation {r_on:.0}/s with 4 channels (one stalled), {r_off:.0}/s with none: ratio {:.3}",
            r_on / r_off
        );
    }
    // Wait (bounded) for every answering channel to have every approval.
    let want = created_on.len();
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let have = arrivals.lock().unwrap().len();
        if have >= 3 * want || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let got = arrivals.lock().unwrap().clone();
    for channel in ["slack", "teams", "hook"] {
        let mut latency: Vec<Duration> = created_on
            .iter()
            .filter_map(|(id, at)| {
                got.get(&(channel.to_owned(), id.clone()))
                    .map(|t| t.saturating_duration_since(*at))
            })
            .collect();
        let delivered = latency.len();
        println!(
            "{channel}: {delivered}/{want} delivered; creation to delivery p50 {:.1} ms, p99 {:.1} ms",
            pct(&mut latency, 0.5),
            pct(&mut latency, 0.99)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    std::process::exit(0);
}
