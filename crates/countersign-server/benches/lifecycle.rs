//! Load benchmark (not a test): full lifecycles over loopback HTTP against a file-backed SQLite
//! service, then memory with a large number of pending approvals.
//!
//! `cargo bench -p countersign-server --bench lifecycle -- [LIFECYCLES] [CONCURRENCY] [PENDING]`
//! (defaults 5000, 16, 1000000). Prints a markdown report for docs/PERFORMANCE.md.
//! `COUNTERSIGN_BENCH_KEY` names the approver's fixture key (default `alice-es256`);
//! `COUNTERSIGN_BENCH_DURABILITY=full` runs SQLite with an fsync per commit.
//!
//! With `COUNTERSIGN_BENCH_DATABASE=postgres://…` the service runs over PostgreSQL (in a scratch
//! schema, dropped afterwards), and `COUNTERSIGN_BENCH_REPLICAS=N` starts N replicas (each its own
//! state, store and connection pool, on its own port, in this process) over that one database;
//! each step of a lifecycle then goes to the next replica round robin, so verdicts, grants and
//! audit appends from different replicas interleave.
//!
//! `COUNTERSIGN_BENCH_PREAUTH=1` measures preauthorized calls instead: the config carries a
//! `[[preauthorizations]]` entry covering every lifecycle's call (a `max`, a `currency` and a
//! `prefix` constraint, `max_uses` far above the run), so each lifecycle is create (APPROVED at
//! once, the use consumed in the create's transaction) → grant (the preauthorization rechecked by
//! database time).
//!
//! `COUNTERSIGN_BENCH_SOAK_MINUTES=M` turns the run into a soak (see [`soak`]): M minutes of
//! full lifecycles paced at `COUNTERSIGN_BENCH_SOAK_RATE` per second (measure the maximum with a
//! plain run first and give half of it), with a webhook receiver on loopback answering every
//! notification and `audit verify` over the growing audit file every
//! `COUNTERSIGN_BENCH_SOAK_VERIFY_MINUTES` (default 10; in process, or as `countersign audit
//! verify` in a child process when `COUNTERSIGN_BENCH_SOAK_VERIFY_BIN` names the binary),
//! printing one table row per minute:
//! throughput, p99 of create / decision / grant, RSS, webhook deliveries, schedule lag.
//!
//! The gateway calls carry a gateway bearer token, as every gateway's must (one gateway, `bench`,
//! added before the clock starts).
//!
//! Each lifecycle: create (POST /v1/approvals) → decision challenge → software-authenticator
//! assertion (ES256, signed in this process, so it competes for the same cores) → decision (the
//! service runs the core verifier) → redrive (GET) → grant. Counters are 0 (a legal "no counter"
//! authenticator) so concurrent workers sharing one credential do not trip the regression rule.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "benchmark harness: a panic stops a measurement whose setup is broken"
)]

use countersign::b64;
use countersign_audit::AuditSealer;
use countersign_server::store::{POSTGRES_POOL, PostgresStore, ScratchSchema};
use countersign_server::{AppState, Config, CreateRequest, StateParts, SystemClock, open_state};
use countersign_softkey::{AssertionRequest, Ceremony};
use countersign_testkit::{ORIGIN, RP_ID};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let lifecycles = args.first().copied().unwrap_or(5000);
    let concurrency = args.get(1).copied().unwrap_or(16);
    let pending = args.get(2).copied().unwrap_or(1_000_000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(run(lifecycles, concurrency, pending));
}

/// The approver's authenticator, derived once (deriving a fixture key costs a scalar
/// multiplication, which is not part of any lifecycle).
fn approver_key() -> &'static countersign_softkey::SoftKey {
    static KEY: std::sync::OnceLock<countersign_softkey::SoftKey> = std::sync::OnceLock::new();
    // The approver's algorithm: `COUNTERSIGN_BENCH_KEY=alice-eddsa` measures the service with a
    // cheaper load generator (Ed25519 signing is several times cheaper than P-256 in pure Rust).
    KEY.get_or_init(|| {
        let name = std::env::var("COUNTERSIGN_BENCH_KEY").unwrap_or_else(|_| "alice-es256".into());
        countersign_testkit::key(&name)
    })
}

fn sign(challenge: Vec<u8>) -> Value {
    let key = approver_key();
    let request = AssertionRequest::from(Ceremony {
        sign_count: 0,
        ..Ceremony::get(RP_ID, ORIGIN, challenge)
    });
    let r = key.assert(&request).unwrap();
    json!({
        "credential_id": b64::encode(&r.credential_id),
        "client_data_json": b64::encode(&r.client_data_json),
        "authenticator_data": b64::encode(&r.authenticator_data),
        "signature": b64::encode(&r.signature),
    })
}

async fn post(http: &reqwest::Client, url: String, token: Option<&str>, body: &Value) -> Value {
    let mut req = http.post(url).json(body);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.unwrap();
    assert!(resp.status().is_success(), "{}", resp.status());
    resp.json().await.unwrap()
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn pct(v: &mut [Duration], p: f64) -> f64 {
    v.sort_unstable();
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v.get(i).map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

async fn run(lifecycles: usize, concurrency: usize, pending: usize) {
    let dir = std::env::temp_dir().join(format!("countersign-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // `COUNTERSIGN_BENCH_DURABILITY=full` measures the power-loss setting (an fsync per commit).
    let durability =
        std::env::var("COUNTERSIGN_BENCH_DURABILITY").unwrap_or_else(|_| "normal".into());
    let preauth = std::env::var_os("COUNTERSIGN_BENCH_PREAUTH").is_some();
    let preauthorization = if preauth {
        "[[preauthorizations]]\nslug = \"bench\"\nagent = \"bench\"\ntool = \"payments.*\"\n\
         expires_at = 2100-01-01T00:00:00Z\nmax_uses = 1000000000\nconstraints = [\n\
         { kind = \"max\", arg = \"/amount\", max = \"100.00\" },\n\
         { kind = \"currency\", arg = \"/currency\", allowed = [\"EUR\", \"USD\"] },\n\
         { kind = \"prefix\", arg = \"/to\", prefix = \"A\" },\n]\n"
    } else {
        ""
    };
    let soak = Soak::from_env();
    // The soak's webhook receiver runs before the service exists: its URL is in the config.
    let receiver = match &soak {
        Some(_) => Some(Receiver::start().await),
        None => None,
    };
    let webhook = receiver
        .as_ref()
        .map(|r| format!("webhook_url = \"{}\"\n", r.url))
        .unwrap_or_default();
    // The soak's approver signs in once: a session that outlives the run (the default, 15
    // minutes, ended the first long run with 401s).
    let session = if soak.is_some() {
        "session_seconds = 86400\n"
    } else {
        ""
    };
    let config = Config::from_toml(&format!(
        "rp_id = \"{RP_ID}\"\norigins = [\"{ORIGIN}\"]\ndurability = \"{durability}\"\n\
         {webhook}{preauthorization}[timeouts]\napproval_seconds = 3600\n{session}"
    ))
    .unwrap();
    let sealer = AuditSealer::from_seed([1; 32]);
    let database = std::env::var("COUNTERSIGN_BENCH_DATABASE").ok();
    let replicas: usize = std::env::var("COUNTERSIGN_BENCH_REPLICAS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let schema = database
        .as_deref()
        .map(|url| ScratchSchema::create(url).unwrap());
    let backend = match &schema {
        Some(_) => format!("PostgreSQL, {replicas} replica(s), {POSTGRES_POOL} connections each"),
        None => {
            format!("SQLite WAL (durability {durability}), audit file mirrored as `serve` does")
        }
    };
    let mut bases = Vec::new();
    let mut states = Vec::new();
    let mut pg_stores = Vec::new();
    for replica in 0..replicas {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let state = match &schema {
            // Exactly what `countersign serve` runs: the data directory's SQLite database, its
            // audit signing key, and the audit file kept in step with the database.
            None => {
                assert_eq!(
                    replicas, 1,
                    "SQLite is one process: replicas need PostgreSQL"
                );
                open_state(&dir, config.clone(), base.clone()).unwrap()
            }
            // As `serve --database postgres://…` runs each replica: its pool, its sealer, and
            // its own audit file kept in step with the shared chain.
            Some(schema) => {
                let store = Arc::new(
                    PostgresStore::connect(&schema.url(), sealer.clone(), POSTGRES_POOL).unwrap(),
                );
                pg_stores.push(Arc::clone(&store));
                let mirror = countersign_server::audit::AuditMirror::open(
                    &dir.join(format!("audit-replica-{replica}.jsonl")),
                    store.as_ref(),
                )
                .unwrap();
                AppState::new(StateParts {
                    config: config.clone(),
                    public_url: base.clone(),
                    store,
                    clock: Arc::new(SystemClock),
                    sealer: sealer.clone(),
                    mirror: Some(mirror),
                })
                .unwrap()
            }
        };
        let alice = approver_key();
        state
            .enroll(vec![countersign_testkit::enroll(alice, "alice")])
            .await
            .unwrap();
        // Served as `countersign serve` serves (its accept loop and header read timeout).
        let router = countersign_server::build_router(state.clone());
        let header_read = Duration::from_secs(config.timeouts.header_read_seconds);
        tokio::spawn(countersign_server::serve_http(
            listener,
            router,
            header_read,
            std::future::pending(),
        ));
        bases.push(base);
        states.push(state);
    }
    let state = states[0].clone();
    let base = bases[0].clone();
    // The gateway's token goes with every call; the approver calls below set their own session
    // token, which takes its place.
    let gateway = state.add_gateway("bench").await.unwrap();
    for other in &states[1..] {
        other.refresh_registry().await.unwrap();
    }
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        reqwest::header::AUTHORIZATION,
        format!("Bearer {gateway}").parse().unwrap(),
    );
    // The service closes a connection idle for `timeouts.header_read_seconds` (10 s by
    // default); a pooled connection kept longer can be closed just as a request is sent on it.
    let http = reqwest::Client::builder()
        .default_headers(headers)
        .pool_idle_timeout(Duration::from_secs(5))
        .build()
        .unwrap();

    let c = post(
        &http,
        format!("{base}/v1/approver/login/challenge"),
        None,
        &json!({}),
    )
    .await;
    let login = sign(b64::decode(c["challenge"].as_str().unwrap()).unwrap());
    let token = post(&http, format!("{base}/v1/approver/login"), None, &login).await["token"]
        .as_str()
        .unwrap()
        .to_owned();

    if let (Some(soak), Some(receiver)) = (soak, receiver) {
        assert!(
            schema.is_none() && !preauth,
            "the soak runs full lifecycles over SQLite"
        );
        soak.run(&http, &base, &token, &receiver, &dir, concurrency)
            .await;
        drop(states);
        drop(state);
        let _ = std::fs::remove_dir_all(&dir);
        return;
    }

    let started = Instant::now();
    let mut workers = Vec::new();
    for w in 0..concurrency {
        let (http, bases, token) = (http.clone(), bases.clone(), token.clone());
        let share = lifecycles / concurrency + usize::from(w < lifecycles % concurrency);
        workers.push(tokio::spawn(async move {
            let mut lat = (Vec::new(), Vec::new(), Vec::new());
            for n in 0..share {
                // Each step on the next replica (all the same one when there is one).
                let at = |step: usize| bases[(w + n + step) % bases.len()].clone();
                let params = json!({"to": "A", "worker": w.to_string(), "n": n.to_string(),
                                    "amount": "12.50", "currency": "EUR"});
                let body = json!({"agent_id": "bench", "tool_name": "payments.transfer", "params": params});
                let t = Instant::now();
                let created = post(&http, format!("{}/v1/approvals", at(0)), None, &body).await;
                lat.0.push(t.elapsed());
                let id = created["approval_id"].as_str().unwrap().to_owned();
                if preauth {
                    // Approved at once: straight to the grant, for the recorded op_hash.
                    assert_eq!(created["status"], "APPROVED", "{created}");
                    let t = Instant::now();
                    let g = post(
                        &http,
                        format!("{}/v1/approvals/{id}/grant", at(1)),
                        None,
                        &json!({"fingerprint": created["authority"]["op_hash"]}),
                    )
                    .await;
                    assert!(g.get("collected_at").is_some(), "{g}");
                    lat.2.push(t.elapsed());
                    continue;
                }
                let ch = post(
                    &http,
                    format!("{}/v1/approver/approvals/{id}/challenge", at(1)),
                    Some(&token),
                    &json!({"decision": "APPROVED"}),
                )
                .await;
                let assertion = sign(b64::decode(ch["challenge"].as_str().unwrap()).unwrap());
                post(
                    &http,
                    format!("{}/v1/approver/approvals/{id}/decision", at(2)),
                    Some(&token),
                    &assertion,
                )
                .await;
                let t = Instant::now();
                let r: Value = http
                    .get(format!("{}/v1/approvals/{id}", at(3)))
                    .send()
                    .await
                    .unwrap()
                    .json()
                    .await
                    .unwrap();
                lat.1.push(t.elapsed());
                assert_eq!(r["status"], "APPROVED");
                let t = Instant::now();
                post(
                    &http,
                    format!("{}/v1/approvals/{id}/grant", at(4)),
                    None,
                    &json!({"fingerprint": ch["op_hash"]}),
                )
                .await;
                lat.2.push(t.elapsed());
            }
            lat
        }));
    }
    let (mut create, mut redrive, mut grant) = (Vec::new(), Vec::new(), Vec::new());
    for w in workers {
        let (c, r, g) = w.await.unwrap();
        create.extend(c);
        redrive.extend(r);
        grant.extend(g);
    }
    let elapsed = started.elapsed().as_secs_f64();
    println!("## Service load benchmark\n");
    let what = if preauth {
        "preauthorized calls (create APPROVED at once, then grant)"
    } else {
        "full lifecycles"
    };
    println!(
        "{lifecycles} {what}, {concurrency} concurrent workers, loopback HTTP/1.1, {backend}\n"
    );
    println!("| measure | value |\n|---|---|");
    println!(
        "| lifecycles per second | {:.0} |",
        lifecycles as f64 / elapsed
    );
    for (name, v) in [
        ("create", &mut create),
        ("redrive", &mut redrive),
        ("grant", &mut grant),
    ] {
        if v.is_empty() {
            continue;
        }
        println!(
            "| {name} p50 / p99 (ms) | {:.2} / {:.2} |",
            pct(v, 0.5),
            pct(v, 0.99)
        );
    }
    // PostgreSQL: the only cluster-wide lock is the sealer's (store/postgres.rs); what it cost.
    let sealed = pg_stores
        .iter()
        .filter_map(|s| s.seal_stats())
        .fold((0u64, 0u64, 0u64), |(r, l, n), st| {
            (r + st.rounds, l + st.lines, n + st.busy_nanos)
        });
    if sealed.1 > 0 {
        let (rounds, lines, nanos) = sealed;
        let per_lifecycle_us = nanos as f64 / 1000.0 / lifecycles as f64;
        println!(
            "| audit lines sealed / sealing transactions | {lines} / {rounds} ({:.1} lines each) |",
            lines as f64 / rounds as f64
        );
        println!(
            "| chain lock held, per line / per lifecycle (µs) | {:.1} / {per_lifecycle_us:.1} |",
            nanos as f64 / 1000.0 / lines as f64
        );
        println!(
            "| lifecycles/s the chain lock alone allows | {:.0} |",
            1e6 / per_lifecycle_us
        );
    }

    if pending > 0 {
        let before = rss_kib();
        let t = Instant::now();
        for n in 0..pending {
            let params =
                serde_json::value::RawValue::from_string(format!("{{\"n\":\"{n}\"}}")).unwrap();
            state
                .create(
                    CreateRequest {
                        agent_id: "bench".into(),
                        tool_name: "payments.transfer".into(),
                        params,
                        profile: None,
                        severity: None,
                        server_id: None,
                        revises: None,
                    },
                    "bench",
                )
                .await
                .unwrap();
            if n == 10_000 {
                println!(
                    "| RSS after 10,000 pending (MiB) | {:.1} |",
                    rss_kib() as f64 / 1024.0
                );
            }
        }
        let fill = t.elapsed().as_secs_f64();
        let after = rss_kib();
        let mut late = Vec::new();
        for n in 0..2000 {
            let body =
                json!({"agent_id": "bench", "tool_name": "t", "params": {"late": n.to_string()}});
            let t = Instant::now();
            post(&http, format!("{base}/v1/approvals"), None, &body).await;
            late.push(t.elapsed());
        }
        println!("| pending approvals inserted | {pending} in {fill:.0} s |");
        println!(
            "| RSS before / after (MiB) | {:.1} / {:.1} |",
            before as f64 / 1024.0,
            after as f64 / 1024.0
        );
        println!(
            "| create p50 / p99 with {pending} pending (ms) | {:.2} / {:.2} |",
            pct(&mut late, 0.5),
            pct(&mut late, 0.99)
        );
    }
    drop(states);
    drop(state);
    drop(pg_stores);
    drop(schema);
    // `COUNTERSIGN_BENCH_KEEP=1` keeps the data directory (its audit.jsonl and service key) for
    // `countersign audit verify` measurements.
    if std::env::var_os("COUNTERSIGN_BENCH_KEEP").is_some() {
        println!("data directory kept: {}", dir.display());
    } else {
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// A webhook receiver on loopback that answers 204 at once and counts what it received.
struct Receiver {
    url: String,
    received: Arc<std::sync::atomic::AtomicU64>,
}

impl Receiver {
    async fn start() -> Self {
        let received = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let count = received.clone();
        let app = axum::Router::new().route(
            "/hook",
            axum::routing::post(move || {
                let count = count.clone();
                async move {
                    count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    axum::http::StatusCode::NO_CONTENT
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { url, received }
    }
    fn received(&self) -> u64 {
        self.received.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// The soak's settings (from the environment).
struct Soak {
    minutes: u64,
    /// Lifecycles started per second, paced (open loop up to the worker count).
    rate: f64,
    verify_every: u64,
}

/// Latencies of the minute under way.
#[derive(Default)]
struct Window {
    done: u64,
    create: Vec<Duration>,
    decision: Vec<Duration>,
    grant: Vec<Duration>,
    /// How late the latest lifecycle of the minute started against its schedule.
    lag: Duration,
}

impl Soak {
    fn from_env() -> Option<Self> {
        let var = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<f64>().ok());
        let minutes = var("COUNTERSIGN_BENCH_SOAK_MINUTES")?;
        Some(Self {
            minutes: minutes as u64,
            rate: var("COUNTERSIGN_BENCH_SOAK_RATE").unwrap_or(100.0),
            verify_every: var("COUNTERSIGN_BENCH_SOAK_VERIFY_MINUTES").map_or(10, |v| v as u64),
        })
    }

    #[allow(clippy::too_many_arguments)]
    async fn run(
        self,
        http: &reqwest::Client,
        base: &str,
        token: &str,
        receiver: &Receiver,
        dir: &std::path::Path,
        concurrency: usize,
    ) {
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
        let window = Arc::new(std::sync::Mutex::new(Window::default()));
        let next = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let started = tokio::time::Instant::now();
        let interval = Duration::from_secs_f64(1.0 / self.rate);
        println!("## Soak\n");
        println!(
            "{} minutes of full lifecycles paced at {:.0}/s, {concurrency} workers, loopback \
             HTTP/1.1, SQLite WAL, webhook receiver on loopback, audit verify every {} min\n",
            self.minutes, self.rate, self.verify_every
        );
        println!(
            "| minute | lifecycles/s | create p99 (ms) | decision p99 (ms) | grant p99 (ms) | \
             RSS (MiB) | webhooks received | schedule lag (ms) | audit verify |"
        );
        println!("|---|---|---|---|---|---|---|---|---|");
        let mut workers = Vec::new();
        for w in 0..concurrency {
            let (http, base, token) = (http.clone(), base.to_owned(), token.to_owned());
            let (window, next, stop) = (window.clone(), next.clone(), stop.clone());
            workers.push(tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    // The k-th lifecycle is due at start + k / rate, whichever worker runs it.
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    let due = started + interval.mul_f64(k as f64);
                    tokio::time::sleep_until(due).await;
                    let lag = due.elapsed();
                    let params = json!({"to": "A", "worker": w.to_string(), "n": k.to_string(),
                                        "amount": "12.50", "currency": "EUR"});
                    let body = json!({"agent_id": "bench", "tool_name": "payments.transfer",
                                      "params": params});
                    let t = Instant::now();
                    let created = post(&http, format!("{base}/v1/approvals"), None, &body).await;
                    let create = t.elapsed();
                    let id = created["approval_id"].as_str().unwrap().to_owned();
                    let ch = post(
                        &http,
                        format!("{base}/v1/approver/approvals/{id}/challenge"),
                        Some(&token),
                        &json!({"decision": "APPROVED"}),
                    )
                    .await;
                    let assertion = sign(b64::decode(ch["challenge"].as_str().unwrap()).unwrap());
                    let t = Instant::now();
                    post(
                        &http,
                        format!("{base}/v1/approver/approvals/{id}/decision"),
                        Some(&token),
                        &assertion,
                    )
                    .await;
                    let decision = t.elapsed();
                    let t = Instant::now();
                    let g = post(
                        &http,
                        format!("{base}/v1/approvals/{id}/grant"),
                        None,
                        &json!({"fingerprint": ch["op_hash"]}),
                    )
                    .await;
                    assert!(g.get("collected_at").is_some(), "{g}");
                    let grant = t.elapsed();
                    let mut win = window.lock().unwrap();
                    win.done += 1;
                    win.create.push(create);
                    win.decision.push(decision);
                    win.grant.push(grant);
                    win.lag = win.lag.max(lag);
                }
            }));
        }
        let audit = dir.join(countersign_server::files::AUDIT_LOG);
        let key = AuditSealer::load_or_create(&dir.join(countersign_server::files::SERVICE_KEY))
            .unwrap()
            .public_key();
        let mut total = 0;
        for minute in 1..=self.minutes {
            tokio::time::sleep_until(started + Duration::from_secs(60 * minute)).await;
            let mut win = std::mem::take(&mut *window.lock().unwrap());
            total += win.done;
            let verify = if minute % self.verify_every.max(1) == 0 || minute == self.minutes {
                // What `countersign audit verify` checks (seals, chain, cross-line rules), on
                // the file as it is now, while the load runs.
                let (path, key, dir) = (audit.clone(), key, dir.to_owned());
                let t = Instant::now();
                tokio::task::spawn_blocking(move || {
                    let mut bytes = std::fs::read(&path).unwrap();
                    // The mirror may be half way through appending a line: up to the last
                    // complete one.
                    let end = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
                    bytes.truncate(end);
                    let lines = bytes.iter().filter(|&&b| b == b'\n').count();
                    // With the `countersign` binary named, the very command an auditor runs, in
                    // a process of its own (its memory is not this process's RSS).
                    let valid = match std::env::var_os("COUNTERSIGN_BENCH_SOAK_VERIFY_BIN") {
                        Some(bin) => {
                            let snapshot = dir.join("verify-snapshot.jsonl");
                            std::fs::write(&snapshot, &bytes).unwrap();
                            drop(bytes);
                            let ok = std::process::Command::new(bin)
                                .args(["audit", "verify"])
                                .arg(&snapshot)
                                .arg("--key")
                                .arg(dir.join(countersign_server::files::SERVICE_PUBLIC_KEY))
                                // Every Decision's evidence is re-verified under the RP the
                                // bench's approver signs for.
                                .args(["--rp-id", RP_ID, "--origin", ORIGIN])
                                .stdout(std::process::Stdio::null())
                                .status()
                                .unwrap()
                                .success();
                            let _ = std::fs::remove_file(&snapshot);
                            ok
                        }
                        None => countersign_audit::verify_log(&bytes, &key).is_valid(),
                    };
                    format!(
                        "{lines} lines {} in {:.1} s",
                        if valid { "valid" } else { "INVALID" },
                        t.elapsed().as_secs_f64()
                    )
                })
                .await
                .unwrap()
            } else {
                String::new()
            };
            println!(
                "| {minute} | {:.0} | {:.2} | {:.2} | {:.2} | {:.1} | {} | {:.0} | {verify} |",
                win.done as f64 / 60.0,
                pct(&mut win.create, 0.99),
                pct(&mut win.decision, 0.99),
                pct(&mut win.grant, 0.99),
                rss_kib() as f64 / 1024.0,
                receiver.received(),
                win.lag.as_secs_f64() * 1000.0,
            );
        }
        stop.store(true, Ordering::Relaxed);
        for w in workers {
            // A worker may be sleeping until a slot far ahead: it is not waited for.
            w.abort();
        }
        // Every created approval was notified once (the receiver never fails, so no retries).
        tokio::time::sleep(Duration::from_secs(2)).await;
        println!(
            "\n{total} lifecycles completed in the measured minutes; webhooks received: {}",
            receiver.received()
        );
    }
}
