//! The side-by-side report: every vector down, every implementation's committed baseline across,
//! grouped by flag, as Markdown (`REPORT.md`) and one self-contained HTML page (`report.html`).
//!
//! The report is built only from committed files (the vectors, the flag registry and the
//! baselines), holds no timestamp and orders everything by a fixed rule, so regenerating it from
//! the same inputs gives the same bytes: CI regenerates it and fails on any difference.

use crate::coverage::{Coverage, Row};
use crate::run::Baseline;
use crate::vectors::{Kind, Loaded};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The baselines the committed report shows, in column order (file stems under
/// `conformance/baselines/`): our library in process on each signature backend, our CLI through
/// the harness protocol, the two independent adapters, and the declared-only baseline last.
pub const DEFAULT_COLUMNS: &[&str] = &[
    "countersign-rustcrypto",
    "countersign-ring",
    "countersign-harness",
    "py_webauthn",
    "simplewebauthn",
    "declared-only",
];

/// The two files the report consists of.
pub const FILES: [&str; 2] = ["REPORT.md", "report.html"];

/// One implementation's column.
#[derive(Clone, Debug)]
pub struct Column {
    /// Short name (the baseline's file stem), used as the column header.
    pub key: String,
    pub baseline: Baseline,
}

/// One cell: what a baseline says about one vector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cell {
    Pass,
    /// The runner's failure text (`expected ..., got ...` or `error: ...`).
    Fail(String),
    /// Why the harness skipped it (an unsupported flag or kind, with its reason).
    Skip(String),
    /// The baseline does not mention this vector: it was recorded before the vector existed.
    NotRun,
}

impl Cell {
    fn of(baseline: &Baseline, id: &str) -> Self {
        match baseline.results.get(id) {
            None => Self::NotRun,
            Some(r) if r == "pass" => Self::Pass,
            Some(r) => match r.split_once(": ") {
                Some(("fail", why)) => Self::Fail(why.to_owned()),
                Some(("skip", why)) => Self::Skip(why.to_owned()),
                _ => Self::Fail(r.clone()),
            },
        }
    }

    /// The few words a cell shows: for a failure, what the implementation answered instead.
    fn short(&self) -> String {
        match self {
            Self::Pass => "pass".into(),
            Self::Skip(_) => "skip".into(),
            Self::NotRun => "not run".into(),
            Self::Fail(why) => match why.rsplit_once(", got ") {
                Some((_, got)) => match serde_json::from_str::<Value>(got) {
                    Ok(v) => format!("FAIL: {}", summary(&v)),
                    Err(_) => "FAIL".into(),
                },
                None => "FAIL: error".into(),
            },
        }
    }

    /// The full text (the HTML page shows it on hover).
    fn detail(&self) -> String {
        match self {
            Self::Pass => "pass".into(),
            Self::Fail(why) => format!("fail: {why}"),
            Self::Skip(why) => format!("skip: {why}"),
            Self::NotRun => "not in this baseline: recorded before the vector existed".into(),
        }
    }

    fn class(&self) -> &'static str {
        match self {
            Self::Pass => "pass",
            Self::Fail(_) => "fail",
            Self::Skip(_) => "skip",
            Self::NotRun => "notrun",
        }
    }

    /// A failure that says ALLOW where the vector says DENY or that there is no verdict (an
    /// unusable CASE): the action would have run.
    fn wrong_allow(&self) -> bool {
        let Self::Fail(why) = self else { return false };
        let Some((expected, got)) = why.rsplit_once(", got ") else {
            return false;
        };
        let effective = |text: &str| {
            serde_json::from_str::<Value>(text).ok().and_then(|v| {
                v.get("effective")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            })
        };
        // DENY, or no verdict at all (an unusable CASE, on which nothing runs).
        effective(expected.trim_start_matches("expected ")).as_deref() != Some("ALLOW")
            && effective(got).as_deref() == Some("ALLOW")
    }
}

/// A verdict in a few words: `ALLOW AAL2`, `DENY stale`, `op_hash Vxyn2PnZ…`, `error
/// action_inadmissible`, `unusable policy`; anything else as compact JSON.
pub fn summary(v: &Value) -> String {
    let s = |k: &str| v.get(k).and_then(Value::as_str);
    if let Some(effective) = s("effective") {
        return match (effective, s("reason_code")) {
            ("ALLOW", _) => format!("ALLOW {}", s("identity_assurance_level").unwrap_or("?")),
            (e, Some(reason)) => format!("{e} {reason}"),
            (e, None) => e.to_owned(),
        };
    }
    if let Some(h) = s("op_hash") {
        return format!("op_hash {}…", h.chars().take(8).collect::<String>());
    }
    if let Some(e) = s("error") {
        return format!("error {e}");
    }
    if let Some(member) = s("unusable_case") {
        return format!("unusable {member}");
    }
    v.to_string()
}

/// Per-group counts for one column.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub pass: usize,
    pub fail: usize,
    pub skip: usize,
    pub not_run: usize,
    pub wrong_allow: usize,
}

impl Counts {
    fn add(&mut self, c: &Cell) {
        match c {
            Cell::Pass => self.pass += 1,
            Cell::Fail(_) => self.fail += 1,
            Cell::Skip(_) => self.skip += 1,
            Cell::NotRun => self.not_run += 1,
        }
        if c.wrong_allow() {
            self.wrong_allow += 1;
        }
    }

    fn text(&self) -> String {
        let mut s = format!("{}/{}/{}", self.pass, self.fail, self.skip);
        if self.not_run > 0 {
            let _ = write!(s, " ({} not run)", self.not_run);
        }
        s
    }
}

/// The report, ready to render.
#[derive(Clone, Debug)]
pub struct Report<'a> {
    pub vectors: &'a [Loaded],
    pub columns: &'a [Column],
    /// Flags in the registry's order, with their meaning.
    pub flags: Vec<(String, String)>,
    /// Both sides of every reason code and flag (the table CI checks).
    pub coverage: Coverage,
}

impl<'a> Report<'a> {
    /// `readme` is `vectors/README.md` (the flag registry: its order and meanings). Flags a
    /// vector uses that the registry lacks come last, in name order.
    pub fn new(vectors: &'a [Loaded], columns: &'a [Column], readme: &str) -> Self {
        let meanings = crate::flags::documented(readme);
        let mut flags: Vec<(String, String)> = meanings
            .iter()
            .map(|(f, m)| (f.clone(), m.clone()))
            .collect();
        flags.sort_by_key(|(f, _)| readme.find(&format!("| `{f}`")).unwrap_or(usize::MAX));
        let mut extra: Vec<String> = vectors
            .iter()
            .flat_map(|v| v.vector.flags.iter().cloned())
            .filter(|f| !meanings.contains_key(f))
            .collect();
        extra.sort();
        extra.dedup();
        flags.extend(extra.into_iter().map(|f| (f, String::new())));
        flags.retain(|(f, _)| vectors.iter().any(|v| v.vector.flags.contains(f)));
        let registry = meanings.into_keys().collect();
        let coverage = crate::coverage::measure(vectors, &registry);
        Self {
            vectors,
            columns,
            flags,
            coverage,
        }
    }

    fn with_flag(&self, flag: &str) -> impl Iterator<Item = &'a Loaded> + '_ {
        let flag = flag.to_owned();
        self.vectors
            .iter()
            .filter(move |v| v.vector.flags.contains(&flag))
    }

    fn counts<'b>(&self, col: &Column, vs: impl Iterator<Item = &'b Loaded>) -> Counts {
        let mut c = Counts::default();
        for v in vs {
            c.add(&Cell::of(&col.baseline, &v.vector.id));
        }
        c
    }

    /// Each column's skip reasons, deduplicated, with how many vectors each covers.
    fn skip_reasons(&self, col: &Column) -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        for v in self.vectors {
            if let Cell::Skip(why) = Cell::of(&col.baseline, &v.vector.id) {
                *out.entry(why).or_insert(0) += 1;
            }
        }
        out
    }

    fn evidence_and_ophash(&self) -> (usize, usize) {
        let evidence = self
            .vectors
            .iter()
            .filter(|v| v.kind == Kind::Evidence)
            .count();
        (evidence, self.vectors.len() - evidence)
    }

    /// `REPORT.md`.
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let (evidence, ophash) = self.evidence_and_ophash();
        let _ = writeln!(s, "# Countersign conformance report\n");
        let _ = writeln!(
            s,
            "Generated by `countersign-conformance report` from the committed vectors ({} vectors: {evidence} evidence, {ophash} op_hash) and baselines; do not edit. \
             How to read it and how to add your implementation: [conformance/README.md](../README.md). \
             The same table with every reason on hover: [report.html](report.html).\n",
            self.vectors.len()
        );
        let _ = writeln!(s, "## Implementations\n");
        let _ = writeln!(
            s,
            "| column | implementation | pass | fail | skip | wrong ALLOW |\n|---|---|---:|---:|---:|---:|"
        );
        for col in self.columns {
            let c = self.counts(col, self.vectors.iter());
            let _ = writeln!(
                s,
                "| `{}` | {} | {} | {} | {} | {} |",
                col.key,
                md(&col.baseline.implementation),
                c.pass,
                c.fail,
                c.skip + c.not_run,
                c.wrong_allow
            );
        }
        let _ = writeln!(
            s,
            "\n*wrong ALLOW*: vectors whose answer is DENY (or no verdict: an unusable CASE) but the implementation said ALLOW: the action would have run.\n"
        );
        let _ = writeln!(s, "## What each implementation does not check\n");
        for col in self.columns {
            let reasons = self.skip_reasons(col);
            if reasons.is_empty() {
                let _ = writeln!(s, "- `{}`: nothing skipped.", col.key);
                continue;
            }
            let _ = writeln!(s, "- `{}`:", col.key);
            for (why, n) in reasons {
                let _ = writeln!(s, "  - {} ({})", md(&why), vectors(n));
            }
        }
        s.push_str(&self.coverage_markdown());
        let _ = writeln!(s, "\n## By flag\n");
        let _ = writeln!(s, "Each cell is pass/fail/skip.\n");
        let _ = write!(s, "| flag | vectors |");
        for col in self.columns {
            let _ = write!(s, " `{}` |", col.key);
        }
        let _ = write!(s, "\n|---|---:|");
        s.push_str(&"---|".repeat(self.columns.len()));
        s.push('\n');
        for (flag, _) in &self.flags {
            let n = self.with_flag(flag).count();
            let _ = write!(s, "| [`{flag}`](#{}) | {n} |", anchor(flag));
            for col in self.columns {
                let _ = write!(s, " {} |", self.counts(col, self.with_flag(flag)).text());
            }
            s.push('\n');
        }
        let _ = writeln!(
            s,
            "\n## Vectors\n\nA vector with several flags appears under each. A failing cell says what the implementation answered instead.\n"
        );
        for (flag, meaning) in &self.flags {
            let _ = writeln!(s, "### {flag}\n");
            if !meaning.is_empty() {
                let _ = writeln!(s, "{}\n", meaning.trim());
            }
            let _ = write!(s, "| vector | expected |");
            for col in self.columns {
                let _ = write!(s, " `{}` |", col.key);
            }
            let _ = write!(s, "\n|---|---|");
            s.push_str(&"---|".repeat(self.columns.len()));
            s.push('\n');
            for v in self.with_flag(flag) {
                let _ = write!(
                    s,
                    "| `{}` | {} |",
                    v.vector.id,
                    md(&summary(&v.vector.expected))
                );
                for col in self.columns {
                    let cell = Cell::of(&col.baseline, &v.vector.id);
                    let text = md(&cell.short());
                    if matches!(cell, Cell::Fail(_)) {
                        let _ = write!(s, " **{text}** |");
                    } else {
                        let _ = write!(s, " {text} |");
                    }
                }
                s.push('\n');
            }
            s.push('\n');
        }
        s
    }

    /// The coverage tables in Markdown: every reason code, then every flag, with the vectors on
    /// each side and what is missing.
    fn coverage_markdown(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "\n## Coverage\n");
        let _ = writeln!(s, "{COVERAGE_INTRO}\n");
        let gaps = self.coverage.gaps();
        if gaps.is_empty() {
            let _ = writeln!(s, "No gaps.\n");
        } else {
            let _ = writeln!(s, "**Gaps** (CI fails on these):\n");
            for g in gaps {
                let _ = writeln!(s, "- {}", md(&g));
            }
            s.push('\n');
        }
        let _ = writeln!(
            s,
            "| reason code | expect it | accepting vectors of its rule | rule flags |\n|---|---:|---:|---|"
        );
        for r in &self.coverage.codes {
            let _ = writeln!(
                s,
                "| `{}` | {} | {} | {}{} |",
                r.name,
                r.positive,
                r.negative,
                md(&r.note),
                gap_md(r)
            );
        }
        let _ = writeln!(
            s,
            "\n| flag | accepting | refusing | note |\n|---|---:|---:|---|"
        );
        for r in &self.coverage.flags {
            let _ = writeln!(
                s,
                "| `{}` | {} | {} | {}{} |",
                r.name,
                r.positive,
                r.negative,
                md(&r.note),
                gap_md(r)
            );
        }
        s
    }

    /// The coverage tables in HTML.
    fn coverage_html(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "<h2>Coverage</h2>\n<p>{}</p>", esc(COVERAGE_INTRO));
        let gaps = self.coverage.gaps();
        if gaps.is_empty() {
            s.push_str("<p>No gaps.</p>\n");
        } else {
            s.push_str("<p><strong>Gaps</strong> (CI fails on these):</p>\n<ul>\n");
            for g in gaps {
                let _ = writeln!(s, "<li>{}</li>", esc(&g));
            }
            s.push_str("</ul>\n");
        }
        for (head, rows) in [
            (
                "<th>reason code</th><th>expect it</th><th>accepting vectors of its rule</th><th>rule flags</th>",
                &self.coverage.codes,
            ),
            (
                "<th>flag</th><th>accepting</th><th>refusing</th><th>note</th>",
                &self.coverage.flags,
            ),
        ] {
            let _ = writeln!(s, "<table>\n<thead><tr>{head}</tr></thead>\n<tbody>");
            for r in rows {
                let class = if r.gap.is_some() {
                    " class=\"fail\""
                } else {
                    ""
                };
                let _ = writeln!(
                    s,
                    "<tr{class}><td><code>{}</code></td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}{}</td></tr>",
                    esc(&r.name),
                    r.positive,
                    r.negative,
                    esc(&r.note),
                    esc(&gap_md(r))
                );
            }
            s.push_str("</tbody>\n</table>\n");
        }
        s
    }

    /// `report.html`: one file, no scripts, no external resources.
    pub fn html(&self) -> String {
        let mut s = String::new();
        let (evidence, ophash) = self.evidence_and_ophash();
        s.push_str(concat!(
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n",
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n",
            "<title>Countersign conformance report</title>\n<style>\n",
            "body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#1b1b1b}\n",
            "h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.6em}\n",
            "table{border-collapse:collapse;margin:.5em 0}\n",
            "th,td{border:1px solid #ccc;padding:.2em .5em;text-align:left;vertical-align:top}\n",
            "thead th{position:sticky;top:0;background:#f3f3f3}\n",
            "td.n{text-align:right}code{font-size:.95em}\n",
            "td.pass{background:#e3f5e1}td.fail{background:#fbd9d6;font-weight:bold}\n",
            "td.skip{background:#f1f1f1;color:#555}td.notrun{background:#fff5cc}\n",
            "td[title]{cursor:help}\n",
            "details{margin:.4em 0}summary{cursor:pointer;font-weight:600}\n",
            "summary small{font-weight:normal;color:#555}\n",
            ".legend span{display:inline-block;padding:0 .5em;margin-right:.4em;border:1px solid #ccc}\n",
            "</style>\n</head>\n<body>\n<h1>Countersign conformance report</h1>\n"
        ));
        let _ = writeln!(
            s,
            "<p>Generated by <code>countersign-conformance report</code> from the committed vectors ({} vectors: {evidence} evidence, {ophash} op_hash) and baselines. Hover over a cell for the reason: the expected and the actual verdict of a failure, the declared reason of a skip.</p>",
            self.vectors.len()
        );
        s.push_str("<p class=\"legend\"><span class=\"pass\" style=\"background:#e3f5e1\">pass</span><span style=\"background:#fbd9d6\">FAIL: what it answered</span><span style=\"background:#f1f1f1\">skip (declared unsupported)</span><span style=\"background:#fff5cc\">not run (baseline older than the vector)</span></p>\n");
        s.push_str("<h2>Implementations</h2>\n<table>\n<thead><tr><th>column</th><th>implementation</th><th>pass</th><th>fail</th><th>skip</th><th title=\"the vector says DENY (or the CASE is unusable), the implementation said ALLOW: the action would have run\">wrong ALLOW</th></tr></thead>\n<tbody>\n");
        for col in self.columns {
            let c = self.counts(col, self.vectors.iter());
            let reasons: Vec<String> = self
                .skip_reasons(col)
                .into_iter()
                .map(|(why, n)| format!("{why} ({})", vectors(n)))
                .collect();
            let title = if reasons.is_empty() {
                String::new()
            } else {
                format!(" title=\"{}\"", esc(&reasons.join("\n")))
            };
            let _ = writeln!(
                s,
                "<tr><td><code>{}</code></td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\"{title}>{}</td><td class=\"n\">{}</td></tr>",
                esc(&col.key),
                esc(&col.baseline.implementation),
                c.pass,
                c.fail,
                c.skip + c.not_run,
                c.wrong_allow
            );
        }
        s.push_str("</tbody>\n</table>\n");
        s.push_str(&self.coverage_html());
        s.push_str("<h2>By flag</h2>\n<p>Counts are pass/fail/skip. A flag's name leads to its vectors below.</p>\n<table>\n<thead><tr><th>flag</th><th>vectors</th>");
        for col in self.columns {
            let _ = write!(
                s,
                "<th title=\"{}\">{}</th>",
                esc(&col.baseline.implementation),
                esc(&col.key)
            );
        }
        s.push_str("</tr></thead>\n<tbody>\n");
        for (flag, meaning) in &self.flags {
            let _ = write!(
                s,
                "<tr><td title=\"{}\"><a href=\"#{}\"><code>{}</code></a></td><td class=\"n\">{}</td>",
                esc(meaning.trim()),
                anchor(flag),
                esc(flag),
                self.with_flag(flag).count()
            );
            for col in self.columns {
                let c = self.counts(col, self.with_flag(flag));
                // The cell takes the colour of its worst outcome.
                let class = if c.fail > 0 {
                    "fail"
                } else if c.not_run > 0 {
                    "notrun"
                } else if c.pass == 0 {
                    "skip"
                } else {
                    "pass"
                };
                let _ = write!(s, "<td class=\"{class}\">{}</td>", esc(&c.text()));
            }
            s.push_str("</tr>\n");
        }
        s.push_str("</tbody>\n</table>\n<h2>Vectors</h2>\n<p>Each flag opens to its vectors; a vector with several flags appears under each. Hover over a vector for its description, over a cell for the reason.</p>\n");
        for (flag, meaning) in &self.flags {
            let n = self.with_flag(flag).count();
            let _ = writeln!(
                s,
                "<details id=\"{}\"><summary><code>{}</code> ({n}) <small>{}</small></summary>",
                anchor(flag),
                esc(flag),
                esc(meaning.trim())
            );
            s.push_str("<table>\n<thead><tr><th>vector</th><th>expected</th>");
            for col in self.columns {
                let _ = write!(
                    s,
                    "<th title=\"{}\">{}</th>",
                    esc(&col.baseline.implementation),
                    esc(&col.key)
                );
            }
            s.push_str("</tr></thead>\n<tbody>\n");
            for v in self.with_flag(flag) {
                let _ = write!(
                    s,
                    "<tr><td title=\"{}\"><code>{}</code></td><td title=\"{}\">{}</td>",
                    esc(&format!(
                        "{} [{}]",
                        v.vector.description,
                        v.vector.flags.join(", ")
                    )),
                    esc(&v.vector.id),
                    esc(&v.vector.expected.to_string()),
                    esc(&summary(&v.vector.expected))
                );
                for col in self.columns {
                    let cell = Cell::of(&col.baseline, &v.vector.id);
                    if cell == Cell::Pass {
                        // Nothing to explain: no title keeps the page small.
                        s.push_str("<td class=\"pass\">pass</td>");
                        continue;
                    }
                    let _ = write!(
                        s,
                        "<td class=\"{}\" title=\"{}\">{}</td>",
                        cell.class(),
                        esc(&cell.detail()),
                        esc(&cell.short())
                    );
                }
                s.push_str("</tr>\n");
            }
            s.push_str("</tbody>\n</table>\n</details>\n");
        }
        s.push_str("</body>\n</html>\n");
        s
    }
}

const COVERAGE_INTRO: &str = "A vector accepts when it expects ALLOW or an op_hash, and refuses otherwise. \
A reason code needs a vector that expects it and an accepting vector carrying a flag of its rule (a near miss the check lets through). \
A flag needs an accepting and a refusing vector, unless it names one side by definition: then the note says why and which flag holds the other side.";

/// A row's gap, as a suffix for its note cell.
fn gap_md(r: &Row) -> String {
    match &r.gap {
        Some(g) => format!(" **GAP: {g}**"),
        None => String::new(),
    }
}

fn vectors(n: usize) -> String {
    if n == 1 {
        "1 vector".into()
    } else {
        format!("{n} vectors")
    }
}

/// A Markdown/HTML anchor for a flag (flags are lowercase ASCII words joined by `-`).
fn anchor(flag: &str) -> String {
    flag.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// Text safe inside a Markdown table cell.
fn md(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

/// Text safe inside HTML content and double-quoted attributes.
fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\n' => out.push_str("&#10;"),
            c => out.push(c),
        }
    }
    out
}

/// Render both files: `(name, contents)`, in [`FILES`] order.
pub fn render(vectors: &[Loaded], columns: &[Column], readme: &str) -> Vec<(&'static str, String)> {
    let report = Report::new(vectors, columns, readme);
    let [markdown, html] = FILES;
    vec![(markdown, report.markdown()), (html, report.html())]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vectors::{Input, Vector};
    use serde_json::json;

    fn vector(id: &str, flags: &[&str], expected: Value) -> Loaded {
        Loaded {
            kind: Kind::Evidence,
            vector: Vector {
                id: id.into(),
                description: format!("<{id}> & \"quotes\""),
                flags: flags.iter().map(|f| (*f).to_owned()).collect(),
                input: Input::Json(json!({})),
                expected,
            },
        }
    }

    fn column(key: &str, results: &[(&str, &str)]) -> Column {
        Column {
            key: key.into(),
            baseline: Baseline {
                implementation: format!("{key} 1.0"),
                passed: 0,
                failed: 0,
                skipped: 0,
                results: results
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            },
        }
    }

    const README: &str = "# v\n## Flags\n| flag | meaning |\n|---|---|\n| `zeta` | last word first |\n| `alpha` | second |\n";

    fn fixture() -> (Vec<Loaded>, Vec<Column>) {
        let deny = json!({"effective": "DENY", "decision": "APPROVED", "reason_code": "stale", "identity_assurance_level": "declared"});
        let vectors = vec![
            vector("a::one", &["alpha", "zeta"], deny.clone()),
            vector("a::two", &["alpha"], deny),
        ];
        let got_allow = r#"fail: expected {"decision":"APPROVED","effective":"DENY","identity_assurance_level":"declared","reason_code":"stale"}, got {"decision":"APPROVED","effective":"ALLOW","identity_assurance_level":"declared","reason_code":null}"#;
        let columns = vec![
            column("ours", &[("a::one", "pass"), ("a::two", "pass")]),
            column(
                "theirs",
                &[("a::one", got_allow), ("a::two", "skip: flag alpha: no")],
            ),
            column("old", &[("a::one", "pass")]),
        ];
        (vectors, columns)
    }

    #[test]
    fn cells_read_every_outcome() {
        let (_, columns) = fixture();
        let theirs = &columns[1].baseline;
        let fail = Cell::of(theirs, "a::one");
        assert!(fail.wrong_allow());
        assert_eq!(fail.short(), "FAIL: ALLOW declared");
        assert_eq!(
            Cell::of(theirs, "a::two"),
            Cell::Skip("flag alpha: no".into())
        );
        assert_eq!(Cell::of(&columns[2].baseline, "a::two"), Cell::NotRun);
        assert!(!Cell::of(&columns[0].baseline, "a::one").wrong_allow());
        let unusable = r#"expected {"unusable_case":"policy"}, got {"effective":"ALLOW","decision":"APPROVED","reason_code":null,"identity_assurance_level":"declared"}"#;
        assert!(Cell::Fail(unusable.into()).wrong_allow());
        let weaker = r#"expected {"effective":"ALLOW","identity_assurance_level":"AAL3"}, got {"effective":"ALLOW","identity_assurance_level":"AAL2"}"#;
        assert!(!Cell::Fail(weaker.into()).wrong_allow());
        assert_eq!(
            Cell::Fail("error: harness died".into()).short(),
            "FAIL: error"
        );
        assert_eq!(
            summary(&json!({"unusable_case": "policy"})),
            "unusable policy"
        );
        assert_eq!(
            summary(&json!({"error": "profile_unknown"})),
            "error profile_unknown"
        );
        assert_eq!(summary(&json!({"something": 1})), r#"{"something":1}"#);
    }

    #[test]
    fn flags_follow_the_registry_order_and_vectors_appear_under_each_flag() {
        let (vectors, columns) = fixture();
        let report = Report::new(&vectors, &columns, README);
        let names: Vec<&str> = report.flags.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(names, ["zeta", "alpha"]);
        let md = report.markdown();
        assert!(md.find("### zeta").unwrap() < md.find("### alpha").unwrap());
        assert_eq!(md.matches("| `a::one` |").count(), 2);
        assert!(md.contains("| `theirs` | theirs 1.0 | 0 | 1 | 1 | 1 |"));
        assert!(md.contains("| [`alpha`](#alpha) | 2 | 2/0/0 | 0/1/1 | 1/0/0 (1 not run) |"));
        assert!(md.contains("**FAIL: ALLOW declared**"));
    }

    #[test]
    fn html_is_escaped_and_carries_the_reason_on_hover() {
        let (vectors, columns) = fixture();
        let html = Report::new(&vectors, &columns, README).html();
        assert!(html.contains("title=\"skip: flag alpha: no\">skip</td>"));
        assert!(html.contains("&lt;a::one&gt; &amp; &quot;quotes&quot;"));
        assert!(!html.contains("<a::one>"));
        assert!(!html.contains("<script"));
        assert!(!html.contains("http://") && !html.contains("https://"));
    }

    #[test]
    fn rendering_is_deterministic() {
        let (vectors, columns) = fixture();
        assert_eq!(
            render(&vectors, &columns, README),
            render(&vectors, &columns, README)
        );
    }
}
