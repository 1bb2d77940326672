//! `countersign-conformance`: generate the vectors, run them, compare baselines.

use anyhow::{Context as _, bail};
use clap::{Parser, Subcommand};
use countersign_conformance::{coverage, flags, generate, repo_root, report, run, vectors};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(
    name = "countersign-conformance",
    about = "Conformance vectors for Countersign verifiers: generate, run, check, compare."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Rebuild every vector file and the worked-example CASE files from the fixture seeds.
    Generate {
        /// Repository root to write under (vectors/ and fixtures/worked-example/).
        #[arg(long)]
        root: Option<PathBuf>,
    },
    /// Fail when the committed vectors differ from what the generator produces, the flag
    /// registry is not closed, or a reason code or flag lacks a positive or a negative vector
    /// (see `coverage` in conformance/README.md).
    Check,
    /// Run the vectors against our library in process (default) or a harness (--impl).
    Run {
        /// Directory holding evidence.json and op_hash.json.
        #[arg(long)]
        vectors: Option<PathBuf>,
        /// A harness command speaking conformance/HARNESS.md, run with `sh -c`.
        #[arg(long = "impl")]
        implementation: Option<String>,
        /// In process: only this signature backend (default: every backend compiled in).
        #[arg(long)]
        backend: Option<String>,
        /// Write JUnit XML here.
        #[arg(long)]
        junit: Option<PathBuf>,
        /// Write this run's baseline (every vector's outcome) here.
        #[arg(long)]
        baseline: Option<PathBuf>,
        /// Only vectors whose id starts with this.
        #[arg(long)]
        only: Option<String>,
    },
    /// Print a side-by-side table of baselines (vectors where they differ).
    Compare { baselines: Vec<PathBuf> },
    /// Write the side-by-side report (REPORT.md and report.html): every vector down, every
    /// baseline across, grouped by flag.
    Report {
        /// Baselines to show, in column order (default: the committed ones under
        /// conformance/baselines/, see conformance/README.md).
        baselines: Vec<PathBuf>,
        /// One more baseline after those (repeatable): how an assessor adds their column.
        #[arg(long = "with")]
        with: Vec<PathBuf>,
        /// Directory holding evidence.json and op_hash.json.
        #[arg(long)]
        vectors: Option<PathBuf>,
        /// Where to write the two files (default: conformance/report/).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Write nothing; exit 1 when the files in --out differ from what would be written.
        #[arg(long)]
        check: bool,
    },
}

fn main() -> ExitCode {
    match run_cli(Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("countersign-conformance: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run_cli(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Generate { root } => {
            let root = root.unwrap_or_else(repo_root);
            let n = generate::write(&root)?;
            println!("wrote {n} files under {}", root.display());
            Ok(ExitCode::SUCCESS)
        }
        Command::Check => check(),
        Command::Run {
            vectors: dir,
            implementation,
            backend,
            junit,
            baseline,
            only,
        } => {
            let dir = dir.unwrap_or_else(|| repo_root().join("vectors"));
            let mut all = vectors::load_dir(&dir)?;
            if let Some(prefix) = only {
                all.retain(|v| v.vector.id.starts_with(&prefix));
            }
            let report = match implementation {
                Some(command) => run::run_harness(&all, &command)?,
                None => {
                    let mut backends = countersign::webauthn::all_backends();
                    if let Some(name) = backend {
                        backends.retain(|b| b.name() == name);
                        if backends.is_empty() {
                            bail!("backend {name} is not compiled in");
                        }
                    }
                    run::run_in_process(&all, &backends)
                }
            };
            if let Some(path) = junit {
                std::fs::write(&path, report.junit())
                    .with_context(|| format!("writing {}", path.display()))?;
            }
            if let Some(path) = baseline {
                let mut text = serde_json::to_string_pretty(&report.baseline())?;
                text.push('\n');
                std::fs::write(&path, text)
                    .with_context(|| format!("writing {}", path.display()))?;
            }
            print!("{}", report.text());
            Ok(if report.tally().failed == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        Command::Compare { baselines } => {
            let mut loaded = Vec::new();
            for path in baselines {
                let text = std::fs::read_to_string(&path)
                    .with_context(|| format!("reading {}", path.display()))?;
                loaded.push(
                    serde_json::from_str(&text)
                        .with_context(|| format!("parsing {}", path.display()))?,
                );
            }
            print!("{}", run::compare(&loaded));
            Ok(ExitCode::SUCCESS)
        }
        Command::Report {
            baselines,
            with,
            vectors: dir,
            out,
            check,
        } => write_report(baselines, with, dir, out, check),
    }
}

fn write_report(
    baselines: Vec<PathBuf>,
    with: Vec<PathBuf>,
    dir: Option<PathBuf>,
    out: Option<PathBuf>,
    check: bool,
) -> anyhow::Result<ExitCode> {
    let root = repo_root();
    let all = vectors::load_dir(&dir.unwrap_or_else(|| root.join("vectors")))?;
    let readme =
        std::fs::read_to_string(root.join("vectors/README.md")).context("vectors/README.md")?;
    let mut paths: Vec<PathBuf> = if baselines.is_empty() {
        report::DEFAULT_COLUMNS
            .iter()
            .map(|k| root.join("conformance/baselines").join(format!("{k}.json")))
            .collect()
    } else {
        baselines
    };
    paths.extend(with);
    let mut columns = Vec::new();
    for path in &paths {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        columns.push(report::Column {
            key: path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default(),
            baseline: serde_json::from_str(&text)
                .with_context(|| format!("parsing {}", path.display()))?,
        });
    }
    let out = out.unwrap_or_else(|| root.join("conformance/report"));
    let files = report::render(&all, &columns, &readme);
    if check {
        let mut stale = false;
        for (name, text) in &files {
            let path = out.join(name);
            if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
                eprintln!(
                    "stale report: {} (run `countersign-conformance report`)",
                    path.display()
                );
                stale = true;
            }
        }
        println!(
            "{}",
            if stale {
                "report is NOT up to date"
            } else {
                "report is up to date"
            }
        );
        return Ok(if stale {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        });
    }
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    for (name, text) in &files {
        let path = out.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    println!(
        "wrote {} for {} implementations under {}",
        report::FILES.join(" and "),
        columns.len(),
        out.display()
    );
    Ok(ExitCode::SUCCESS)
}

fn check() -> anyhow::Result<ExitCode> {
    let root = repo_root();
    let mut ok = true;
    for rel in generate::stale(&root)? {
        eprintln!("stale generated file: {rel} (run `countersign-conformance generate`)");
        ok = false;
    }
    let readme =
        std::fs::read_to_string(root.join("vectors/README.md")).context("vectors/README.md")?;
    let documented = flags::documented(&readme);
    let used: std::collections::BTreeSet<String> = vectors::load_dir(&root.join("vectors"))?
        .into_iter()
        .flat_map(|v| v.vector.flags)
        .collect();
    for f in used.iter().filter(|f| !documented.contains_key(*f)) {
        eprintln!("flag {f} is used but not documented in vectors/README.md");
        ok = false;
    }
    for f in documented.keys().filter(|f| !used.contains(*f)) {
        eprintln!("flag {f} is documented but no vector uses it");
        ok = false;
    }
    let all = vectors::load_dir(&root.join("vectors"))?;
    let registry: std::collections::BTreeSet<String> = documented.keys().cloned().collect();
    for gap in coverage::measure(&all, &registry).gaps() {
        eprintln!("coverage: {gap}");
        ok = false;
    }
    println!(
        "{}",
        if ok {
            "vectors are up to date"
        } else {
            "vectors are NOT up to date"
        }
    );
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
