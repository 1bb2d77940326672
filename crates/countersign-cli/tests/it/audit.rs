//! `countersign audit verify FILE --key PUB --checkpoint CP`: a log must contain every signed
//! checkpoint given. Cutting lines from its end, or replacing them, shows against a checkpoint
//! signed before, which the file alone cannot reveal.

use crate::support;

use countersign_audit::{
    AuditEvent, AuditSealer, Checkpoint, GENESIS_HASH, SealedLine, verify_log,
};
use std::path::{Path, PathBuf};
use std::process::Command;
use support::{BIN, code, scratch_dir, stderr, stdout};

const TIME: &str = "2026-11-20T10:00:00Z";
const ORIGIN: &str = "approvals.example.org/countersign/audit";

/// `n` sealed lines: each approval's PENDING outcome, then its withdrawal.
fn sealed(sealer: &AuditSealer, n: usize, salt: &str) -> Vec<SealedLine> {
    let mut lines: Vec<SealedLine> = Vec::new();
    for i in 0..n {
        let id = format!("apv_{}{salt}", i / 2);
        let event = if i % 2 == 0 {
            AuditEvent::outcome(&id, TIME, "PENDING", None)
        } else {
            AuditEvent::settlement(&id, TIME, "cancelled")
        };
        let prev = lines.last().map_or(GENESIS_HASH, |l| l.hash);
        lines.push(sealer.seal(i as u64 + 1, &prev, &event));
    }
    lines
}

fn text(lines: &[SealedLine]) -> String {
    lines.iter().map(|l| format!("{}\n", l.line)).collect()
}

/// The service's checkpoint of `lines` (its whole length).
fn checkpoint(sealer: &AuditSealer, lines: &[SealedLine]) -> String {
    sealer
        .sign_checkpoint(&Checkpoint {
            origin: ORIGIN.into(),
            size: lines.len() as u64,
            hash: countersign_audit::merkle::MerkleTree::from_lines(
                lines.iter().map(|l| l.line.as_bytes()),
            )
            .root(lines.len() as u64)
            .unwrap(),
            time: TIME.into(),
            kind: countersign_audit::CheckpointHash::MerkleRoot,
        })
        .unwrap()
}

struct Files {
    dir: PathBuf,
    key: PathBuf,
}

impl Files {
    fn new(label: &str, sealer: &AuditSealer) -> Self {
        let dir = scratch_dir(label);
        let key = dir.join("service-key.pub");
        std::fs::write(&key, sealer.public_key_b64()).unwrap();
        Self { dir, key }
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    /// `countersign audit verify LOG --key KEY --checkpoint CP...`.
    fn verify(&self, log: &Path, checkpoints: &[&Path]) -> std::process::Output {
        let mut command = Command::new(BIN);
        command
            .args(["audit", "verify"])
            .arg(log)
            .arg("--key")
            .arg(&self.key);
        for cp in checkpoints {
            command.arg("--checkpoint").arg(cp);
        }
        command.output().unwrap()
    }
}

impl Drop for Files {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

#[test]
fn a_log_consistent_with_its_checkpoints_verifies() {
    let sealer = AuditSealer::from_seed([3; 32]);
    let f = Files::new("cp-valid", &sealer);
    let lines = sealed(&sealer, 6, "");
    assert!(verify_log(text(&lines).as_bytes(), &sealer.public_key()).is_valid());
    let log = f.write("audit.jsonl", &text(&lines));
    // An older checkpoint (4 lines) and the current one (6): the log contains both.
    let older = f.write("older.cp", &checkpoint(&sealer, &lines[..4]));
    let latest = f.write("latest.cp", &checkpoint(&sealer, &lines));
    let out = f.verify(&log, &[&older, &latest]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert!(
        stdout(&out).contains("checkpoint_covered"),
        "{}",
        stdout(&out)
    );
    // An empty log's checkpoint (size 0) is covered by any log.
    let empty = f.write("empty.cp", &checkpoint(&sealer, &[]));
    assert_eq!(code(&f.verify(&log, &[&empty])), 0);
}

#[test]
fn a_truncated_log_is_refused_against_a_later_checkpoint() {
    let sealer = AuditSealer::from_seed([3; 32]);
    let f = Files::new("cp-truncated", &sealer);
    let lines = sealed(&sealer, 6, "");
    let cp = f.write("latest.cp", &checkpoint(&sealer, &lines));
    // The attack: the last two lines cut. The chain that is left is intact...
    let cut = f.write("cut.jsonl", &text(&lines[..4]));
    assert_eq!(code(&f.verify(&cut, &[])), 0, "the file alone cannot tell");
    // ...but it is shorter than what the service signed.
    let out = f.verify(&cut, &[&cp]);
    assert_eq!(code(&out), 1, "{}", stdout(&out));
    let report = stdout(&out);
    assert!(report.contains("checkpoint_truncated"), "{report}");
    assert!(
        report.contains("covers 6 lines but the log has 4"),
        "{report}"
    );
    assert!(
        report.contains("line 6: VIOLATION checkpoint_truncated"),
        "{report}"
    );
}

#[test]
fn a_log_that_diverges_from_a_checkpoint_is_refused() {
    let sealer = AuditSealer::from_seed([3; 32]);
    let f = Files::new("cp-diverges", &sealer);
    let lines = sealed(&sealer, 6, "");
    let cp = f.write("latest.cp", &checkpoint(&sealer, &lines));
    // Another history of the same length, sealed with the same key (a rewritten database, or a
    // writer that forked the chain): every line verifies, but line 6 is not the signed one.
    let other = sealed(&sealer, 6, "x");
    let forked = f.write("forked.jsonl", &text(&other));
    assert_eq!(
        code(&f.verify(&forked, &[])),
        0,
        "the file alone cannot tell"
    );
    let out = f.verify(&forked, &[&cp]);
    assert_eq!(code(&out), 1, "{}", stdout(&out));
    assert!(
        stdout(&out).contains("says the first 6 lines have Merkle root"),
        "{}",
        stdout(&out)
    );
    // An edited byte: a chain violation and a divergence.
    let edited = text(&lines).replacen("cancelled", "cancelleD", 3);
    let edited = f.write("edited.jsonl", &edited);
    let out = f.verify(&edited, &[&cp]);
    assert_eq!(code(&out), 1);
    assert!(
        stdout(&out).contains("checkpoint_diverges"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn a_checkpoint_not_signed_by_the_key_or_malformed_is_unusable() {
    let sealer = AuditSealer::from_seed([3; 32]);
    let f = Files::new("cp-forged", &sealer);
    let lines = sealed(&sealer, 6, "");
    let log = f.write("audit.jsonl", &text(&lines[..4]));
    // A checkpoint from another key, claiming 4 lines (it would pass if trusted).
    let forger = AuditSealer::from_seed([4; 32]);
    let forged = f.write("forged.cp", &checkpoint(&forger, &lines[..4]));
    let out = f.verify(&log, &[&forged]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("not signed by the given key"),
        "{}",
        stderr(&out)
    );
    // The right key's signature over an edited text (size 2 instead of 6).
    let edited = checkpoint(&sealer, &lines).replacen("\n6\n", "\n2\n", 1);
    let edited = f.write("edited.cp", &edited);
    let out = f.verify(&log, &[&edited]);
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("does not verify"), "{}", stderr(&out));
    // Not a checkpoint at all; a missing file.
    let junk = f.write("junk.cp", "hello\n");
    assert_eq!(code(&f.verify(&log, &[&junk])), 2);
    assert_eq!(code(&f.verify(&log, &[&f.dir.join("absent.cp")])), 2);
}

/// `countersign audit verify LOG --key KEY --from CP`.
fn verify_from(f: &Files, log: &Path, from: &Path) -> std::process::Output {
    Command::new(BIN)
        .args(["audit", "verify"])
        .arg(log)
        .arg("--key")
        .arg(&f.key)
        .arg("--from")
        .arg(from)
        .output()
        .unwrap()
}

#[test]
fn from_a_checkpoint_appended_honest_lines_verify() {
    let sealer = AuditSealer::from_seed([3; 32]);
    let f = Files::new("from-valid", &sealer);
    let lines = sealed(&sealer, 10, "");
    // Checkpoint after line 5: approval 2's PENDING is before it, its withdrawal after it.
    let cp = f.write("old.cp", &checkpoint(&sealer, &lines[..5]));
    let log = f.write("audit.jsonl", &text(&lines));
    let out = verify_from(&f, &log, &cp);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert!(
        stdout(&out).contains("valid: 10 line(s)"),
        "{}",
        stdout(&out)
    );
    // What changed after the checkpoint is still caught: a line edited after it.
    let mut edited: Vec<String> = lines.iter().map(|l| format!("{}\n", l.line)).collect();
    edited[9] = edited[9].replace("cancelled", "expired_unanswered");
    let log = f.write("edited.jsonl", &edited.concat());
    let out = verify_from(&f, &log, &cp);
    assert_eq!(code(&out), 1, "{}", stdout(&out));
    assert!(
        stdout(&out).contains("line 10: VIOLATION bad_signature"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn from_a_checkpoint_a_rewritten_prefix_another_log_or_a_wrong_size_is_refused() {
    let sealer = AuditSealer::from_seed([3; 32]);
    let f = Files::new("from-refused", &sealer);
    let lines = sealed(&sealer, 10, "");
    let log = f.write("audit.jsonl", &text(&lines));

    // A line before the checkpoint rewritten, and the log re-sealed after it with the key:
    // the chain and every signature hold, only the checkpoint's root can tell.
    let cp = f.write("old.cp", &checkpoint(&sealer, &lines[..6]));
    let mut rewritten = sealed(&sealer, 10, "");
    let first = AuditEvent::outcome("apv_0", TIME, "DENIED", None);
    rewritten[0] = sealer.seal(1, &GENESIS_HASH, &first);
    for i in 1..rewritten.len() {
        let event = if i % 2 == 0 {
            AuditEvent::outcome(&format!("apv_{}", i / 2), TIME, "PENDING", None)
        } else {
            AuditEvent::settlement(&format!("apv_{}", i / 2), TIME, "cancelled")
        };
        let prev = rewritten[i - 1].hash;
        rewritten[i] = sealer.seal(i as u64 + 1, &prev, &event);
    }
    let forged = f.write("forged.jsonl", &text(&rewritten));
    let out = verify_from(&f, &forged, &cp);
    assert_eq!(code(&out), 1, "{}", stdout(&out));
    assert!(
        stdout(&out).contains("line 7: VIOLATION checkpoint_inconsistent"),
        "{}",
        stdout(&out)
    );

    // Another log's checkpoint, signed by the same key.
    let other = f.write("other.cp", &checkpoint(&sealer, &sealed(&sealer, 6, "x")));
    let out = verify_from(&f, &log, &other);
    assert_eq!(code(&out), 1, "{}", stdout(&out));
    assert!(
        stdout(&out).contains("checkpoint_inconsistent"),
        "{}",
        stdout(&out)
    );

    // A checkpoint of 12 lines for a log of 10.
    let longer = sealed(&sealer, 12, "");
    let beyond = f.write("beyond.cp", &checkpoint(&sealer, &longer));
    let out = verify_from(&f, &log, &beyond);
    assert_eq!(code(&out), 1, "{}", stdout(&out));
    assert!(
        stdout(&out).contains("line 0: VIOLATION checkpoint_inconsistent"),
        "{}",
        stdout(&out)
    );

    // A checkpoint another key signed is unusable input, not a finding.
    let stranger = AuditSealer::from_seed([4; 32]);
    let foreign = f.write("foreign.cp", &checkpoint(&stranger, &lines[..6]));
    let out = verify_from(&f, &log, &foreign);
    assert_eq!(code(&out), 2, "{}{}", stdout(&out), stderr(&out));
}
