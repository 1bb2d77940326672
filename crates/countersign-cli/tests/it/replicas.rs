//! Three replicas of the real `countersign serve` binary over one PostgreSQL database.
//!
//! Each test gets a schema of its own (created and dropped), so the tests run in parallel. Without
//! a reachable PostgreSQL (and without `COUNTERSIGN_TEST_POSTGRES` set) they are skipped and say
//! so; `.ci/steps/postgres.sh` sets the variable, so in CI they must run.

use crate::support;

use countersign::{Decision, b64};
use countersign_audit::AuditSealer;
use countersign_server::store::{PostgresStore, ScratchSchema, Store as _};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use support::{Approver, Http, QUICK_TOOL, Server};

/// A schema, a config, one service key shared by three data directories, three replicas.
struct Cluster {
    dir: PathBuf,
    url: String,
    /// One `countersign serve` process each, with a data directory of its own.
    replicas: Vec<Server>,
    http: Http,
    // Dropped last: the replicas disconnect before the schema is dropped.
    _schema: ScratchSchema,
}

impl Cluster {
    fn start(label: &str, approvers: &[&Approver]) -> Self {
        Self::start_with(label, approvers, QUICK_TOOL)
    }

    /// [`Cluster::start`] with `extra` TOML in the shared config.
    fn start_with(label: &str, approvers: &[&Approver], extra: &str) -> Self {
        let schema = ScratchSchema::required(label).unwrap();
        let url = schema.url();
        let dir = std::env::temp_dir().join(format!("countersign-{label}-{}", schema.name()));
        std::fs::create_dir_all(&dir).unwrap();
        support::write_config(&dir, approvers, extra);
        // Replicas must seal with one key: create it once, copy it to every data directory.
        let key = dir.join("service-key");
        AuditSealer::load_or_create(&key).unwrap();
        for n in 0..3 {
            let data = dir.join(format!("data{n}"));
            std::fs::create_dir_all(&data).unwrap();
            std::fs::copy(&key, data.join("service-key")).unwrap();
        }
        // The gateway the tests call as, added before any replica starts: each loads it.
        let token = support::add_gateway(&dir.join("data0"), Some(&url), "replicas-test");
        let replicas = (0..3)
            .map(|n| Self::replica(&dir, &dir.join(format!("data{n}")), &url))
            .collect();
        Self {
            dir,
            url,
            replicas,
            http: Http(
                support::gateway_client(&token)
                    .timeout(std::time::Duration::from_secs(60))
                    .build()
                    .unwrap(),
            ),
            _schema: schema,
        }
    }

    fn replica(dir: &Path, data: &Path, url: &str) -> Server {
        Server::spawn("127.0.0.1:0", data, &dir.join("config.toml"), Some(url))
    }

    fn base(&self, n: usize) -> String {
        self.replicas[n % 3].base.clone()
    }

    fn restart(&mut self, n: usize) {
        let data = self.replicas[n].data.clone();
        self.replicas[n] = Self::replica(&self.dir, &data, &self.url);
    }

    /// The whole chain as the database holds it, written to a file.
    fn dump_chain(&self) -> (PathBuf, Vec<String>) {
        let sealer = AuditSealer::load_or_create(&self.dir.join("service-key")).unwrap();
        let store = PostgresStore::connect(&self.url, sealer, 1).unwrap();
        store.seal_audit().unwrap();
        let lines: Vec<String> = store
            .audit_lines_after(0, 1_000_000)
            .unwrap()
            .into_iter()
            .map(|(_, l)| l)
            .collect();
        let path = self.dir.join("chain.jsonl");
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        (path, lines)
    }

    /// `countersign audit verify` on `file` with the shared key: its exit code.
    fn verify(&self, file: &Path) -> i32 {
        let key = self.replicas[0].data.join("service-key.pub");
        support::code(&support::audit_verify(file, &key))
    }

    /// Every replica's own audit file and the database's chain verify, and each file is a
    /// prefix of the one chain.
    fn assert_one_verified_chain(&mut self) -> Vec<Value> {
        for r in &mut self.replicas {
            r.sigterm();
        }
        let (chain_file, chain) = self.dump_chain();
        assert_eq!(self.verify(&chain_file), 0, "the database's chain verifies");
        for r in &self.replicas {
            let file = r.data.join("audit.jsonl");
            assert_eq!(self.verify(&file), 0, "{}", file.display());
            let text = std::fs::read_to_string(&file).unwrap();
            for (i, line) in text.lines().enumerate() {
                assert_eq!(line, chain[i], "{} line {}", file.display(), i + 1);
            }
        }
        chain
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.replicas.clear();
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

fn lines_of<'a>(chain: &'a [Value], kind: &str, id: &str) -> Vec<&'a Value> {
    chain
        .iter()
        .filter(|l| l["kind"] == kind && l["approval_id"] == id)
        .collect()
}

/// A preauthorization's uses are taken in the same transaction as the approval they approve, so
/// three `countersign serve` processes racing on one database never hand out more than
/// `max_uses`: 64 concurrent covered calls, spread over the three, give exactly 5 approvals; the
/// other 59 wait for a human like any uncovered call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL (.ci/steps/postgres.sh runs it)"]
async fn a_preauthorization_is_used_exactly_max_uses_times_across_three_services() {
    const PREAUTH: &str = r#"
[[preauthorizations]]
slug = "small-transfers"
agent = "agent-*"
tool = "payments.transfer"
expires_at = 2099-01-01T00:00:00Z
max_uses = 5
constraints = [{ kind = "max", arg = "/n", max = "1000" }]
"#;
    let alice = Approver::new("alice", "alice-es256", false);
    let mut c = Cluster::start_with("replicas-preauth", &[&alice], PREAUTH);
    let mut racing = tokio::task::JoinSet::new();
    for n in 0..64_u64 {
        let (http, base) = (c.http.clone(), c.base(n as usize));
        racing.spawn(async move {
            http.request_approval(&base, "payments.transfer", n)
                .await
                .unwrap()
        });
    }
    let mut by_status = BTreeMap::<String, Vec<Value>>::new();
    while let Some(answer) = racing.join_next().await {
        let body = answer.unwrap();
        let status = body["status"].as_str().unwrap_or("?").to_owned();
        by_status.entry(status).or_default().push(body);
    }
    let count = |s: &str| by_status.get(s).map_or(0, Vec::len);
    assert_eq!(count("APPROVED"), 5, "{by_status:?}");
    assert_eq!(count("PENDING"), 59, "{by_status:?}");
    // Each approval names the preauthorization and its own use: 1 to 5, none twice.
    let uses: BTreeSet<i64> = by_status["APPROVED"]
        .iter()
        .map(|b| {
            assert_eq!(b["authority"]["by"], "preauthorization", "{b}");
            b["authority"]["preauthorization"]["use"].as_i64().unwrap()
        })
        .collect();
    assert_eq!(uses, (1..=5).collect::<BTreeSet<i64>>());
    // The one chain verifies, and it records exactly five approvals made by the preauthorization.
    let chain = c.assert_one_verified_chain();
    let approved: BTreeSet<&str> = by_status["APPROVED"]
        .iter()
        .map(|b| b["approval_id"].as_str().unwrap())
        .collect();
    let preauthorized: BTreeSet<&str> = chain
        .iter()
        .filter(|l| l.to_string().contains("small-transfers"))
        .filter_map(|l| l["approval_id"].as_str())
        .collect();
    assert_eq!(preauthorized, approved);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL (.ci/steps/postgres.sh runs it)"]
async fn replicas_settle_everything_exactly_once_on_one_chain() {
    let alice = Arc::new(Approver::new("alice", "alice-es256", false));
    let bob = Approver::new("bob", "bob-es256", true);
    let mut c = Cluster::start("replicas", &[&alice, &bob]);
    let http = c.http.clone();
    // A session made on one replica is honoured by the others: sessions live in the database.
    let token = http.login(&c.base(0), &alice).await;

    // 64 contradictory verdicts on one approval, challenges from one replica, submitted to
    // another: exactly one wins, every other one gets 409.
    let contested = http
        .create(&c.base(1), "payments.transfer", 1)
        .await
        .unwrap();
    let mut bodies = Vec::new();
    for i in 0..64 {
        let d = if i % 2 == 0 {
            Decision::Approved
        } else {
            Decision::Denied
        };
        let body = http
            .prepare(&c.base(i), &alice, &token, &contested, d)
            .await
            .unwrap();
        bodies.push((c.base(i + 1), body));
    }
    let mut racing = tokio::task::JoinSet::new();
    for (base, body) in bodies {
        let (http, token, id) = (http.clone(), token.clone(), contested.clone());
        racing.spawn(async move { http.decide(&base, &token, &id, &body).await.unwrap() });
    }
    let mut answers = BTreeMap::<u16, Vec<Value>>::new();
    while let Some(answer) = racing.join_next().await {
        let (status, body) = answer.unwrap();
        answers.entry(status).or_default().push(body);
    }
    assert_eq!(answers.get(&200).map(Vec::len), Some(1), "{answers:?}");
    assert_eq!(answers.get(&409).map(Vec::len), Some(63), "{answers:?}");
    assert!(
        answers[&409]
            .iter()
            .all(|b| b["error"]["code"] == "already_settled")
    );
    let winner = answers[&200][0]["status"].as_str().unwrap().to_owned();

    // A grant collected concurrently through two replicas succeeds exactly once.
    let granted = http
        .create(&c.base(0), "payments.transfer", 2)
        .await
        .unwrap();
    let body = http
        .prepare(&c.base(0), &alice, &token, &granted, Decision::Approved)
        .await
        .unwrap();
    let (status, _) = http
        .decide(&c.base(2), &token, &granted, &body)
        .await
        .unwrap();
    assert_eq!(status, 200);
    let mut racing = tokio::task::JoinSet::new();
    for i in 0..16 {
        let (http, base, id) = (http.clone(), c.base(1 + i % 2), granted.clone());
        racing.spawn(async move {
            http.grant(&base, &id, 2, "payments.transfer")
                .await
                .unwrap()
        });
    }
    let mut grants = BTreeMap::<u16, usize>::new();
    while let Some(answer) = racing.join_next().await {
        *grants.entry(answer.unwrap().0).or_default() += 1;
    }
    assert_eq!(grants, BTreeMap::from([(200, 1), (409, 15)]));

    // The same signed verdict sent to all three replicas at once: one settles, none twice.
    let twice = http
        .create(&c.base(2), "payments.transfer", 3)
        .await
        .unwrap();
    let body = http
        .prepare(&c.base(2), &alice, &token, &twice, Decision::Denied)
        .await
        .unwrap();
    let mut racing = tokio::task::JoinSet::new();
    for i in 0..3 {
        let (http, base, token, id, body) = (
            http.clone(),
            c.base(i),
            token.clone(),
            twice.clone(),
            body.clone(),
        );
        racing.spawn(async move { http.decide(&base, &token, &id, &body).await.unwrap() });
    }
    let mut statuses = Vec::new();
    while let Some(answer) = racing.join_next().await {
        let (status, body) = answer.unwrap();
        // A loser is told the approval is settled, or (if it read after the winner's commit)
        // that the nonce is spent; either way nothing changes.
        match status {
            409 => assert_eq!(body["error"]["code"], "already_settled"),
            422 => assert_eq!(body["error"]["reason_code"], "replayed"),
            _ => {}
        }
        statuses.push(status);
    }
    statuses.sort_unstable();
    assert_eq!(statuses[0], 200, "{statuses:?}");
    assert!(
        statuses[1..].iter().all(|s| *s == 409 || *s == 422),
        "{statuses:?}"
    );

    // A login nonce spent on one replica is refused on another.
    let (_, lc) = http
        .post(
            format!("{}/v1/approver/login/challenge", c.base(0)),
            None,
            &json!({}),
        )
        .await
        .unwrap();
    let signed = bob.sign(b64::decode(lc["challenge"].as_str().unwrap()).unwrap());
    let first = http
        .post(format!("{}/v1/approver/login", c.base(1)), None, &signed)
        .await
        .unwrap();
    assert_eq!(first.0, 200, "{first:?}");
    let bob_token = first.1["token"].as_str().unwrap().to_owned();
    let again = http
        .post(format!("{}/v1/approver/login", c.base(2)), None, &signed)
        .await
        .unwrap();
    assert_eq!(
        (again.0, &again.1["error"]["reason_code"]),
        (401, &json!("replayed"))
    );

    // A counter never goes backwards: bob signs x then y (y counts higher); y lands on one
    // replica, then x on another is refused as a regression.
    let x = http
        .create(&c.base(0), "payments.transfer", 4)
        .await
        .unwrap();
    let y = http
        .create(&c.base(0), "payments.transfer", 5)
        .await
        .unwrap();
    let x_body = http
        .prepare(&c.base(0), &bob, &bob_token, &x, Decision::Approved)
        .await
        .unwrap();
    let y_body = http
        .prepare(&c.base(0), &bob, &bob_token, &y, Decision::Approved)
        .await
        .unwrap();
    let (status, _) = http
        .decide(&c.base(1), &bob_token, &y, &y_body)
        .await
        .unwrap();
    assert_eq!(status, 200);
    let (status, refused) = http
        .decide(&c.base(2), &bob_token, &x, &x_body)
        .await
        .unwrap();
    assert_eq!(status, 422, "{refused:?}");
    assert_eq!(refused["error"]["reason_code"], "counter_regression");
    let x_now = http
        .get(format!("{}/v1/approvals/{x}", c.base(0)))
        .await
        .unwrap();
    assert_eq!(x_now["status"], "PENDING");

    // Expiry sweeps run on every replica (every 500 ms, and on reads): each overdue request
    // settles once.
    let mut quick = Vec::new();
    for n in 0..30 {
        quick.push(
            http.create(&c.base(n), "quick", 100 + n as u64)
                .await
                .unwrap(),
        );
    }
    let last = http
        .get(format!("{}/v1/approvals/{}", c.base(0), quick[29]))
        .await
        .unwrap();
    let overdue = time::OffsetDateTime::parse(
        last["expires_at"].as_str().unwrap(),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap()
        // `expires_at` is printed in whole seconds; the stored deadline may be up to 1 s later.
        + time::Duration::seconds(1);
    while time::OffsetDateTime::now_utc() <= overdue {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    // Reads on every replica at once race the background sweepers.
    let mut racing = tokio::task::JoinSet::new();
    for (n, id) in quick.iter().enumerate() {
        for r in 0..3 {
            let (http, url) = (http.clone(), format!("{}/v1/approvals/{id}", c.base(n + r)));
            racing.spawn(async move { http.get(url).await.unwrap() });
        }
    }
    while let Some(read) = racing.join_next().await {
        let read = read.unwrap();
        assert_eq!(read["status"], "DENIED");
        assert_eq!(read["reason_code"], "expired_unanswered");
    }

    // One chain, whichever replica wrote; one line per outcome.
    let chain = c.assert_one_verified_chain();
    let decisions = lines_of(&chain, "decision", &contested);
    assert_eq!(decisions.len(), 1);
    assert_eq!(decisions[0]["verdict"], winner.as_str());
    assert_eq!(lines_of(&chain, "grant", &granted).len(), 1);
    assert_eq!(lines_of(&chain, "decision", &twice).len(), 1);
    assert_eq!(lines_of(&chain, "decision", &x).len(), 0);
    for id in &quick {
        assert_eq!(lines_of(&chain, "settlement", id).len(), 1, "{id}");
    }
}

/// A small deterministic generator (xorshift64*), seeded per run and printed, so a failing run
/// can be replayed with `COUNTERSIGN_CRASH_SEED`.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// What the clients were told succeeded.
#[derive(Default)]
struct Acks {
    /// approval id -> the acknowledged verdict's status.
    verdicts: BTreeMap<String, String>,
    /// approval ids whose grant collection was acknowledged, with `collected_at`.
    grants: BTreeMap<String, String>,
}

/// One client's stream: create, fetch a challenge, decide, and (if approved) collect the
/// grant, each step on a randomly chosen replica. Stops at the first transport error.
async fn stream(
    http: Http,
    bases: [String; 3],
    alice: Arc<Approver>,
    token: String,
    n: u64,
    pick: [usize; 4],
    acks: tokio::sync::mpsc::UnboundedSender<(String, &'static str, String)>,
) {
    let Some(id) = http.create(&bases[pick[0]], "payments.transfer", n).await else {
        return;
    };
    let d = if n.is_multiple_of(4) {
        Decision::Denied
    } else {
        Decision::Approved
    };
    let Some(body) = http.prepare(&bases[pick[1]], &alice, &token, &id, d).await else {
        return;
    };
    let Some((status, result)) = http.decide(&bases[pick[2]], &token, &id, &body).await else {
        return;
    };
    assert_eq!(status, 200, "{result:?}");
    let verdict = result["status"].as_str().unwrap().to_owned();
    let _ = acks.send((id.clone(), "verdict", verdict.clone()));
    if verdict != "APPROVED" {
        return;
    }
    let Some((status, receipt)) = http
        .grant(&bases[pick[3]], &id, n, "payments.transfer")
        .await
    else {
        return;
    };
    assert_eq!(status, 200, "{receipt:?}");
    let _ = acks.send((
        id,
        "grant",
        receipt["collected_at"].as_str().unwrap().to_owned(),
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL (.ci/steps/postgres.sh runs it)"]
async fn sigkill_random_replicas_mid_stream_loses_and_doubles_nothing() {
    let iterations: u64 = std::env::var("COUNTERSIGN_CRASH_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let seed = std::env::var("COUNTERSIGN_CRASH_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            let t = time::OffsetDateTime::now_utc().unix_timestamp_nanos();
            (t as u64) | 1
        });
    eprintln!("crash test: {iterations} iterations, COUNTERSIGN_CRASH_SEED={seed}");
    let mut rng = Rng(seed);
    let alice = Arc::new(Approver::new("alice", "alice-es256", false));
    let mut c = Cluster::start("crash", &[&alice]);
    let http = c.http.clone();
    let token = http.login(&c.base(0), &alice).await;
    let mut acks = Acks::default();
    let mut n = 0u64;
    for _ in 0..iterations {
        let victim = rng.below(3) as usize;
        let kill_after = 1 + rng.below(4) as usize;
        let bases = [c.base(0), c.base(1), c.base(2)];
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let mut streams = tokio::task::JoinSet::new();
        for _ in 0..6 {
            n += 1;
            let pick = [0, 0, 0, 0].map(|_: usize| rng.below(3) as usize);
            streams.spawn(stream(
                http.clone(),
                bases.clone(),
                alice.clone(),
                token.clone(),
                n,
                pick,
                tx.clone(),
            ));
        }
        drop(tx);
        // SIGKILL the victim once this round has had `kill_after` acknowledgements (or at the
        // end of the round if it never gets that many): it dies with requests in flight.
        let mut seen = 0;
        let mut killed = false;
        while let Some((id, what, value)) = rx.recv().await {
            match what {
                "verdict" => assert!(acks.verdicts.insert(id, value).is_none()),
                _ => assert!(acks.grants.insert(id, value).is_none()),
            }
            seen += 1;
            if seen == kill_after {
                c.replicas[victim].sigkill();
                killed = true;
            }
        }
        while let Some(done) = streams.join_next().await {
            done.unwrap();
        }
        if !killed {
            c.replicas[victim].sigkill();
        }
        c.restart(victim);
    }
    assert!(
        acks.verdicts.len() as u64 >= iterations,
        "too few acknowledgements"
    );

    // Every acknowledged verdict and grant is there, as acknowledged, exactly once.
    for (id, status) in &acks.verdicts {
        let now = http
            .get(format!("{}/v1/approvals/{id}", c.base(0)))
            .await
            .unwrap();
        assert_eq!(now["status"], status.as_str(), "{id}");
    }
    let chain = c.assert_one_verified_chain();
    for (id, status) in &acks.verdicts {
        let lines = lines_of(&chain, "decision", id);
        assert_eq!(lines.len(), 1, "{id}");
        assert_eq!(lines[0]["verdict"], status.as_str(), "{id}");
    }
    for (id, collected_at) in &acks.grants {
        let lines = lines_of(&chain, "grant", id);
        assert_eq!(lines.len(), 1, "{id}");
        assert_eq!(lines[0]["ts"], collected_at.as_str(), "{id}");
    }
    // Nothing was decided or granted twice, acknowledged or not.
    let mut decided = BTreeSet::new();
    let mut collected = BTreeSet::new();
    for line in &chain {
        let id = line["approval_id"].as_str().unwrap_or_default().to_owned();
        match line["kind"].as_str() {
            Some("decision") => assert!(decided.insert(id), "decided twice"),
            Some("grant") => assert!(collected.insert(id), "granted twice"),
            _ => {}
        }
    }
    eprintln!(
        "crash test: {} acknowledged verdicts, {} acknowledged grants, {} audit lines",
        acks.verdicts.len(),
        acks.grants.len(),
        chain.len()
    );
}

/// `enroll invite --database postgres://…` writes the invite where the replicas look: in
/// PostgreSQL, not in the data directory's SQLite file.
#[test]
#[ignore = "needs PostgreSQL (.ci/steps/postgres.sh runs it)"]
fn enroll_invite_writes_the_invite_to_postgres() {
    let schema = ScratchSchema::required("enroll_invite_postgres").unwrap();
    let dir = support::scratch_dir("invite-postgres");
    let data = dir.join("data");
    std::fs::create_dir_all(&data).unwrap();
    let sealer = AuditSealer::load_or_create(&data.join("service-key")).unwrap();
    let out = support::run_with_data_dir(
        &[
            "enroll",
            "invite",
            "--principal",
            "carol@example.com",
            "--public-url",
            "https://approve.example.org",
            "--database",
            &schema.url(),
        ],
        &data,
    );
    assert_eq!(support::code(&out), 0, "{}", support::stderr(&out));
    let link = support::stdout(&out);
    assert_eq!(link.lines().count(), 1, "{link}");
    let token = link
        .trim()
        .strip_prefix("https://approve.example.org/enroll#")
        .unwrap_or_else(|| panic!("{link}"));
    let hash = countersign_server::enroll::invite_token_hash(token);
    let now = countersign_server::clock::to_ms(time::OffsetDateTime::now_utc());
    let store = PostgresStore::connect(&schema.url(), sealer, 1).unwrap();
    let invite = store
        .invite(&hash, now)
        .unwrap()
        .expect("the invite is in PostgreSQL");
    assert_eq!(invite.principal, "carol@example.com");
    assert!(
        !data.join(countersign_server::files::DATABASE).exists(),
        "nothing was written to the local SQLite file"
    );
    drop(store);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Debian's `libfaketime` (package `libfaketime`): preloaded, it shifts a process's wall clock.
const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/// The `Date` header of `base`'s answer: that process's wall clock, to the second.
async fn wall_clock_of(base: &str) -> time::OffsetDateTime {
    let r = reqwest::get(format!("{base}/healthz")).await.unwrap();
    let date = r.headers()["date"].to_str().unwrap().to_owned();
    time::OffsetDateTime::parse(&date, &time::format_description::well_known::Rfc2822)
        .unwrap_or_else(|e| panic!("Date: {date}: {e}"))
}

fn rfc3339(v: &Value) -> time::OffsetDateTime {
    let text = v.as_str().unwrap_or_else(|| panic!("not a timestamp: {v}"));
    time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL and Debian's libfaketime (.ci/steps/postgres.sh runs it)"]
async fn a_replica_whose_wall_clock_is_an_hour_slow_keeps_the_databases_time() {
    assert!(
        Path::new(LIBFAKETIME).exists(),
        "{LIBFAKETIME} is missing: install Debian's libfaketime"
    );
    let alice = Approver::new("alice", "alice-es256", false);
    let mut c = Cluster::start("replicas-skew", &[&alice]);
    // Replica 2 comes back with its wall clock an hour behind (an unsynchronised host); its
    // monotonic clock, which timers use, is left alone.
    let data = c.replicas[2].data.clone();
    c.replicas[2] = Server::spawn_with(
        "127.0.0.1:0",
        &data,
        &c.dir.join("config.toml"),
        Some(&c.url),
        |command| {
            command
                .env("LD_PRELOAD", LIBFAKETIME)
                .env("FAKETIME", "-1h")
                .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
        },
    );
    let (right, slow) = (c.base(0), c.base(2));
    let behind = wall_clock_of(&right).await - wall_clock_of(&slow).await;
    assert!(
        behind > time::Duration::minutes(59),
        "the slow replica's wall clock is {behind} behind: libfaketime did not take"
    );
    let http = c.http.clone();

    // What the slow replica stamps is the database's time (this host's here), not its own.
    let created = http.request_approval(&slow, "quick", 1).await.unwrap();
    let off = rfc3339(&created["expires_at"]) - time::OffsetDateTime::now_utc();
    assert!(
        off.abs() < time::Duration::minutes(5),
        "expires_at is {off} from now: {created}"
    );

    // An approval with one second to live, created and challenged on a replica with the right
    // time. The right replicas then pause (so no sweep of theirs settles it), and the verdict,
    // signed in time, reaches the slow replica after the second: refused, expired, as the
    // database's clock has it. By its own wall clock the slow replica would have an hour left.
    let token = http.login(&right, &alice).await;
    let id = http.create(&right, "quick", 2).await.unwrap();
    let body = http
        .prepare(&right, &alice, &token, &id, Decision::Approved)
        .await
        .unwrap();
    c.replicas[0].pause(true);
    c.replicas[1].pause(true);
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let (status, answer) = http.decide(&slow, &token, &id, &body).await.unwrap();
    c.replicas[0].pause(false);
    c.replicas[1].pause(false);
    assert_eq!(status, 409, "{answer}");
    let code = answer["error"]["code"].as_str().unwrap_or_default();
    assert!(code == "expired" || code == "already_settled", "{answer}");
    assert_eq!(answer["error"]["result"]["status"], "DENIED", "{answer}");
    assert_eq!(
        answer["error"]["result"]["reason_code"], "expired_unanswered",
        "{answer}"
    );

    let chain = c.assert_one_verified_chain();
    assert!(
        lines_of(&chain, "decision", &id).is_empty(),
        "a verdict after expiry"
    );
    assert_eq!(lines_of(&chain, "settlement", &id).len(), 1);
}
