//! `countersign audit recheck`: what a new configuration would have decided on a whole log.

use crate::exit::{EXIT_ALLOW, EXIT_DENY, EXIT_UNUSABLE};
use crate::input::read_input;
use countersign_audit::verify_log;
use countersign_server::audit::{RecheckVerdict, recheck};
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// Recheck `file` (verified under `key`) against the config at `config`.
pub(crate) fn run(file: &PathBuf, key: &str, config: &Path, json: bool) -> anyhow::Result<u8> {
    let Some(key) = crate::proofs::service_key(key) else {
        eprintln!(
            "countersign: --key is not a base64url Ed25519 public key (or a file holding one)"
        );
        return Ok(EXIT_UNUSABLE);
    };
    let config = match countersign_server::Config::from_file(config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("countersign: {e}");
            return Ok(EXIT_UNUSABLE);
        }
    };
    let bytes = match read_input(file) {
        Ok(bytes) => bytes,
        Err(e) => {
            eprintln!("countersign: {e:#}");
            return Ok(EXIT_UNUSABLE);
        }
    };
    // Only a log that verifies is worth replaying: an edited one would be rechecked as edited.
    let report = verify_log(&bytes, &key);
    if !report.is_valid() {
        eprintln!(
            "countersign: the log does not verify under KEY (run `countersign audit verify` for \
             the violations); nothing rechecked"
        );
        return Ok(EXIT_UNUSABLE);
    }
    let mut lines = Vec::new();
    for (n, text) in bytes.split(|b| *b == b'\n').enumerate() {
        if text.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<serde_json::Value>(text) {
            Ok(serde_json::Value::Object(map)) => lines.push(map),
            _ => {
                eprintln!("countersign: line {} is not a JSON object", n + 1);
                return Ok(EXIT_UNUSABLE);
            }
        }
    }
    let results = recheck(&lines, &config);
    let changed = results
        .iter()
        .filter(|r| r.verdict != RecheckVerdict::Unchanged)
        .count();
    let mut out = std::io::stdout().lock();
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&results)?)?;
    } else {
        for r in &results {
            writeln!(
                out,
                "{}  {:<22}  {}  (was {}{}) {}",
                r.approval_id,
                r.verdict.as_str(),
                r.tool_name,
                r.was,
                if r.granted { ", grant collected" } else { "" },
                r.detail
            )?;
        }
    }
    eprintln!(
        "countersign: {} approvals rechecked, {changed} would change",
        results.len()
    );
    Ok(if changed == 0 { EXIT_ALLOW } else { EXIT_DENY })
}
