//! `countersign-conformance`: generate the vectors, run them, compare baselines.

use anyhow::{Context as _, bail};
use clap::{Parser, Subcommand};
use countersign_conformance::{flags, generate, repo_root, run, vectors};
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
    /// Fail when the committed vectors differ from what the generator produces, or the flag
    /// registry is not closed.
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
    }
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
