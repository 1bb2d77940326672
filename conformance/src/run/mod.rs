//! The runner: vectors in, one result per vector out, a report, JUnit XML and baselines.

pub mod harness;
pub mod inproc;

use crate::vectors::{Kind, Loaded};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// What an implementation answered for one vector.
#[derive(Clone, Debug, PartialEq)]
pub enum Response {
    Verdict(Value),
    Unsupported(String),
    Error(String),
}

/// The judgement of one vector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Pass,
    /// Wrong answer, or an error; the text says which and what came back.
    Fail(String),
    Skip(String),
}

/// One vector's result (for in-process runs: on one backend).
#[derive(Clone, Debug)]
pub struct Result1 {
    pub id: String,
    pub kind: Kind,
    pub flags: Vec<String>,
    /// The backend, for in-process runs over several.
    pub backend: Option<String>,
    pub outcome: Outcome,
}

/// Judge a response against the vector's expectation.
pub fn judge(v: &Loaded, response: Response) -> Outcome {
    match response {
        Response::Verdict(got) => {
            let got = inproc::compact(v.kind, &got);
            if got == v.vector.expected {
                Outcome::Pass
            } else {
                Outcome::Fail(format!("expected {}, got {got}", v.vector.expected))
            }
        }
        Response::Unsupported(why) => Outcome::Skip(why),
        Response::Error(e) => Outcome::Fail(format!("error: {e}")),
    }
}

/// Results of a whole run.
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub implementation: String,
    pub results: Vec<Result1>,
}

/// Counts of one group of results.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub passed: usize,
    pub failed: usize,
    pub skipped: usize,
}

impl Report {
    /// Per-vector outcomes: a vector fails if it failed on any backend, is skipped if skipped on
    /// every one.
    pub fn by_vector(&self) -> BTreeMap<&str, (&Result1, Outcome)> {
        let mut out: BTreeMap<&str, (&Result1, Outcome)> = BTreeMap::new();
        for r in &self.results {
            out.entry(r.id.as_str())
                .and_modify(|(_, o)| {
                    *o = match (&*o, &r.outcome) {
                        (Outcome::Fail(a), _) => Outcome::Fail(a.clone()),
                        (_, Outcome::Fail(b)) => Outcome::Fail(b.clone()),
                        (Outcome::Pass, _) | (_, Outcome::Pass) => Outcome::Pass,
                        (Outcome::Skip(a), Outcome::Skip(_)) => Outcome::Skip(a.clone()),
                    }
                })
                .or_insert((r, r.outcome.clone()));
        }
        out
    }

    pub fn tally(&self) -> Tally {
        let mut t = Tally::default();
        for (_, (_, o)) in self.by_vector() {
            match o {
                Outcome::Pass => t.passed += 1,
                Outcome::Fail(_) => t.failed += 1,
                Outcome::Skip(_) => t.skipped += 1,
            }
        }
        t
    }

    /// The human report: failing lines, a per-flag summary, and the closing count line.
    pub fn text(&self) -> String {
        let mut s = String::new();
        for r in &self.results {
            if let Outcome::Fail(why) = &r.outcome {
                let backend = r
                    .backend
                    .as_deref()
                    .map(|b| format!(" [{b}]"))
                    .unwrap_or_default();
                let _ = writeln!(s, "FAIL {}{backend}: {why}", r.id);
            }
        }
        let mut per_flag: BTreeMap<&str, Tally> = BTreeMap::new();
        for (_, (r, o)) in self.by_vector() {
            for f in &r.flags {
                let t = per_flag.entry(f.as_str()).or_default();
                match o {
                    Outcome::Pass => t.passed += 1,
                    Outcome::Fail(_) => t.failed += 1,
                    Outcome::Skip(_) => t.skipped += 1,
                }
            }
        }
        let _ = writeln!(s, "\nimplementation: {}", self.implementation);
        let _ = writeln!(
            s,
            "{:<34} {:>6} {:>6} {:>7}",
            "flag", "passed", "failed", "skipped"
        );
        for (flag, t) in &per_flag {
            let _ = writeln!(
                s,
                "{flag:<34} {:>6} {:>6} {:>7}",
                t.passed, t.failed, t.skipped
            );
        }
        let t = self.tally();
        if t.skipped > 0 {
            let _ = writeln!(
                s,
                "{} passed, {} failed, {} skipped",
                t.passed, t.failed, t.skipped
            );
        } else {
            let _ = writeln!(s, "{} passed, {} failed", t.passed, t.failed);
        }
        s
    }

    /// JUnit XML, one test case per vector and backend.
    pub fn junit(&self) -> String {
        let t = self.tally();
        let mut s = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        let _ = writeln!(
            s,
            "<testsuites><testsuite name=\"countersign-conformance {}\" tests=\"{}\" failures=\"{}\" skipped=\"{}\">",
            xml(&self.implementation),
            self.results.len(),
            self.results
                .iter()
                .filter(|r| matches!(r.outcome, Outcome::Fail(_)))
                .count(),
            self.results
                .iter()
                .filter(|r| matches!(r.outcome, Outcome::Skip(_)))
                .count(),
        );
        let _ = t;
        for r in &self.results {
            let class = match &r.backend {
                Some(b) => format!("{}.{b}", r.kind.as_str()),
                None => r.kind.as_str().to_owned(),
            };
            let _ = write!(
                s,
                "  <testcase classname=\"{}\" name=\"{}\"",
                xml(&class),
                xml(&r.id)
            );
            match &r.outcome {
                Outcome::Pass => s.push_str("/>\n"),
                Outcome::Fail(why) => {
                    let _ = writeln!(s, "><failure message=\"{}\"/></testcase>", xml(why));
                }
                Outcome::Skip(why) => {
                    let _ = writeln!(s, "><skipped message=\"{}\"/></testcase>", xml(why));
                }
            }
        }
        s.push_str("</testsuite></testsuites>\n");
        s
    }

    /// The baseline document: every vector's outcome, for side-by-side comparison.
    pub fn baseline(&self) -> Baseline {
        let results = self
            .by_vector()
            .into_iter()
            .map(|(id, (_, o))| {
                let text = match o {
                    Outcome::Pass => "pass".to_owned(),
                    Outcome::Fail(why) => format!("fail: {why}"),
                    Outcome::Skip(why) => format!("skip: {why}"),
                };
                (id.to_owned(), text)
            })
            .collect();
        let t = self.tally();
        Baseline {
            implementation: self.implementation.clone(),
            passed: t.passed,
            failed: t.failed,
            skipped: t.skipped,
            results,
        }
    }
}

/// A committed record of one implementation's results.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Baseline {
    pub implementation: String,
    pub passed: usize,
    pub failed: usize,
    pub skipped: usize,
    pub results: BTreeMap<String, String>,
}

/// A side-by-side table of the vectors on which baselines do not all say the same.
pub fn compare(baselines: &[Baseline]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<56} {}",
        "vector",
        baselines
            .iter()
            .map(|b| format!("{:<24}", b.implementation))
            .collect::<String>()
    );
    let mut ids: Vec<&String> = baselines.iter().flat_map(|b| b.results.keys()).collect();
    ids.sort();
    ids.dedup();
    let mut differing = 0;
    let short = |r: Option<&String>| -> String {
        match r {
            None => "-".into(),
            Some(r) => r.split(':').next().unwrap_or("").to_owned(),
        }
    };
    for id in ids {
        let cells: Vec<String> = baselines.iter().map(|b| short(b.results.get(id))).collect();
        if cells.windows(2).all(|w| matches!(w, [a, b] if a == b)) {
            continue;
        }
        differing += 1;
        let _ = writeln!(
            s,
            "{id:<56} {}",
            cells.iter().map(|c| format!("{c:<24}")).collect::<String>()
        );
    }
    for b in baselines {
        let _ = writeln!(
            s,
            "{}: {} passed, {} failed, {} skipped",
            b.implementation, b.passed, b.failed, b.skipped
        );
    }
    let _ = writeln!(s, "{differing} vectors where the implementations differ");
    s
}

fn xml(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Run every vector in process on each of `backends`.
pub fn run_in_process(
    vectors: &[Loaded],
    backends: &[&'static dyn countersign::webauthn::SignatureBackend],
) -> Report {
    let mut report = Report {
        implementation: format!(
            "countersign (in process: {})",
            backends
                .iter()
                .map(|b| b.name())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        results: Vec::new(),
    };
    for v in vectors {
        // op_hash does not touch a signature backend: run it once.
        let on: Vec<Option<&'static dyn countersign::webauthn::SignatureBackend>> = match v.kind {
            Kind::OpHash => vec![backends.first().copied()],
            Kind::Evidence => backends.iter().copied().map(Some).collect(),
        };
        for backend in on {
            let Some(backend) = backend else { continue };
            let response = inproc::evaluate(v.kind, &v.vector.input, backend);
            report.results.push(Result1 {
                id: v.vector.id.clone(),
                kind: v.kind,
                flags: v.vector.flags.clone(),
                backend: (v.kind == Kind::Evidence && backends.len() > 1)
                    .then(|| backend.name().to_owned()),
                outcome: judge(v, response),
            });
        }
    }
    report
}

/// Run every vector through a harness command.
pub fn run_harness(vectors: &[Loaded], command: &str) -> anyhow::Result<Report> {
    let mut h = harness::Harness::start(command)?;
    let mut report = Report {
        implementation: h.hello.implementation.clone(),
        results: Vec::new(),
    };
    for v in vectors {
        let outcome = match h.skip_reason(v) {
            Some(why) => Outcome::Skip(why),
            None => judge(v, h.ask(v)?),
        };
        report.results.push(Result1 {
            id: v.vector.id.clone(),
            kind: v.kind,
            flags: v.vector.flags.clone(),
            backend: None,
            outcome,
        });
    }
    h.finish()?;
    Ok(report)
}
