//! The Countersign conformance suite: vectors, their generator, and a runner for any
//! implementation.
//!
//! - [`generate`] rebuilds `vectors/*.json` and `fixtures/worked-example/*.case.json` byte for
//!   byte from the fixture seeds.
//! - [`run`] checks this repository's library in process (on every signature backend), or any
//!   implementation through the JSON-lines harness protocol of `conformance/HARNESS.md`.
//! - [`coverage`] counts, for every reason code and flag, the vectors on each side.
//! - [`flags`] reads the closed flag registry of `vectors/README.md`.
//! - [`report`] renders the committed baselines side by side (`conformance/report/`).

pub mod coverage;
pub mod flags;
pub mod generate;
pub mod report;
pub mod run;
pub mod vectors;

use std::path::PathBuf;

/// The repository root (this crate lives in `<root>/conformance`).
pub fn repo_root() -> PathBuf {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    here.parent().map(PathBuf::from).unwrap_or(here)
}
