//! `countersign witness serve` over loopback, `audit verify --witness-key --quorum`, and
//! `audit prove inclusion|consistency` offline (issue 16 items 3 and 4).

use crate::support;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use countersign_audit::merkle::MerkleTree;
use countersign_audit::{
    AuditEvent, AuditSealer, Checkpoint, CheckpointHash, GENESIS_HASH, SealedLine,
};
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use support::{BIN, code, scratch_dir, stdout};

const TIME: &str = "2026-12-03T10:00:00Z";
const ORIGIN: &str = "approvals.example.org/countersign/audit";

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

fn tree(lines: &[SealedLine]) -> MerkleTree {
    MerkleTree::from_lines(lines.iter().map(|l| l.line.as_bytes()))
}

fn note(sealer: &AuditSealer, lines: &[SealedLine], size: usize) -> String {
    sealer
        .sign_checkpoint(&Checkpoint {
            origin: ORIGIN.into(),
            size: size as u64,
            hash: tree(lines).root(size as u64).unwrap(),
            time: TIME.into(),
            kind: CheckpointHash::MerkleRoot,
        })
        .unwrap()
}

fn body(old: usize, proof: &[[u8; 32]], note: &str) -> String {
    let mut b = format!("old {old}\n");
    for h in proof {
        b.push_str(&STANDARD.encode(h));
        b.push('\n');
    }
    format!("{b}\n{note}")
}

/// The log key as a vkey (what GET /v1/service-key's checkpoint_vkey says).
fn log_vkey(sealer: &AuditSealer) -> String {
    countersign_audit::note::NoteVerifier {
        name: ORIGIN.into(),
        kind: countersign_audit::note::TYPE_ED25519,
        key: sealer.public_key(),
    }
    .vkey()
}

/// A running `countersign witness serve`; killed on drop.
struct WitnessProcess {
    child: Child,
    addr: String,
    _log: support::ShownOnFailure,
}

impl WitnessProcess {
    fn start(key: &Path, log_key: &str, state: &Path) -> Self {
        let log = support::ShownOnFailure::next_to(state, "witness");
        let mut child = Command::new(BIN)
            .args(["witness", "serve", "--listen", "127.0.0.1:0", "--key"])
            .arg(key)
            .args(["--log-key", log_key, "--state-dir"])
            .arg(state)
            .stdout(Stdio::piped())
            .stderr(log.stdio())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut addr = String::new();
        for _ in 0..2 {
            let mut line = String::new();
            out.read_line(&mut line).unwrap();
            if let Some(a) = line
                .trim()
                .strip_prefix("countersign witness: listening on http://")
            {
                addr = a.to_owned();
            }
        }
        assert!(!addr.is_empty(), "the witness printed no address");
        Self {
            child,
            addr,
            _log: log,
        }
    }

    /// POST /add-checkpoint: (status, body).
    fn add(&self, body: &str) -> (u16, String) {
        let mut s = TcpStream::connect(&self.addr).unwrap();
        write!(
            s,
            "POST /add-checkpoint HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            self.addr,
            body.len()
        )
        .unwrap();
        let mut response = String::new();
        s.read_to_string(&mut response).unwrap();
        let status = response
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let body = response
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_owned())
            .unwrap_or_default();
        (status, body)
    }
}

impl Drop for WitnessProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn keygen(dir: &Path, name: &str) -> (PathBuf, String) {
    let path = dir.join(format!("{}.key", name.replace('/', "_")));
    let out = Command::new(BIN)
        .args(["witness", "keygen", "--name", name, "--out"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(code(&out), 0);
    (path, stdout(&out).trim().to_owned())
}

#[test]
fn a_witness_cosigns_one_history_and_refuses_forks_and_rollbacks_across_restarts() {
    let dir = scratch_dir("witness");
    let sealer = AuditSealer::from_seed([3; 32]);
    let lines = sealed(&sealer, 12, "");
    let t = tree(&lines);
    let (key, vkey) = keygen(&dir, "witness.example/w1");
    let state = dir.join("state");
    let w = WitnessProcess::start(&key, &log_vkey(&sealer), &state);

    let (status, cosig4) = w.add(&body(0, &[], &note(&sealer, &lines, 4)));
    assert_eq!(status, 200, "{cosig4}");
    assert!(cosig4.starts_with("\u{2014} witness.example/w1 "));
    let proof = t.consistency_proof(4, 8).unwrap();
    let cp8 = note(&sealer, &lines, 8);
    let (status, cosig8) = w.add(&body(4, &proof, &cp8));
    assert_eq!(status, 200, "{cosig8}");

    // A fork: another history under the same key, grown from the same size.
    let other = sealed(&sealer, 12, "x");
    let fork = tree(&other);
    let proof = fork.consistency_proof(8, 10).unwrap();
    assert_eq!(w.add(&body(8, &proof, &note(&sealer, &other, 10))).0, 422);
    // A fork at the size it holds: 409.
    assert_eq!(w.add(&body(8, &[], &note(&sealer, &other, 8))).0, 409);
    // A rollback: an old size above the checkpoint's, or a stale one.
    assert_eq!(w.add(&body(8, &[], &note(&sealer, &lines, 4))).0, 400);
    assert_eq!(
        w.add(&body(4, &[], &note(&sealer, &lines, 4))),
        (409, "8\n".to_owned())
    );

    // Restart: the state is kept, so the rollback is still refused and growth still works.
    drop(w);
    let w = WitnessProcess::start(&key, &log_vkey(&sealer), &state);
    assert_eq!(
        w.add(&body(0, &[], &note(&sealer, &lines, 4))),
        (409, "8\n".to_owned())
    );
    let proof = t.consistency_proof(8, 12).unwrap();
    assert_eq!(w.add(&body(8, &proof, &note(&sealer, &lines, 12))).0, 200);
    drop(w);

    // audit verify: a checkpoint cosigned by the witness passes a quorum of 1 ...
    let log = dir.join("audit.jsonl");
    let text: String = lines[..8].iter().map(|l| format!("{}\n", l.line)).collect();
    std::fs::write(&log, text).unwrap();
    let service_key = dir.join("service-key.pub");
    std::fs::write(&service_key, sealer.public_key_b64()).unwrap();
    let cosigned = dir.join("cp8.cosigned");
    std::fs::write(&cosigned, format!("{cp8}{cosig8}")).unwrap();
    let bare = dir.join("cp8.bare");
    std::fs::write(&bare, &cp8).unwrap();
    let (_, vkey2) = keygen(&dir, "witness.example/w2");
    let verify = |cp: &Path, keys: &[&str], quorum: &str| {
        let mut c = Command::new(BIN);
        c.args(["audit", "verify"])
            .arg(&log)
            .arg("--key")
            .arg(&service_key)
            .arg("--checkpoint")
            .arg(cp);
        for k in keys {
            c.args(["--witness-key", k]);
        }
        c.args(["--quorum", quorum]).output().unwrap()
    };
    let out = verify(&cosigned, &[&vkey], "1");
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    assert!(
        stdout(&out).contains("checkpoint_witnessed"),
        "{}",
        stdout(&out)
    );
    // ... but not a quorum of 2 when the second witness never cosigned ...
    let out = verify(&cosigned, &[&vkey, &vkey2], "2");
    assert_eq!(code(&out), 1, "{}", stdout(&out));
    assert!(
        stdout(&out).contains("checkpoint_no_quorum"),
        "{}",
        stdout(&out)
    );
    // ... and a checkpoint without cosignature has no quorum at all.
    let out = verify(&bare, &[&vkey], "1");
    assert_eq!(code(&out), 1, "{}", stdout(&out));
    // A quorum larger than the keys given is unusable input.
    assert_eq!(code(&verify(&cosigned, &[&vkey], "2")), 2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn audit_prove_checks_inclusion_and_consistency_offline() {
    let dir = scratch_dir("prove");
    let sealer = AuditSealer::from_seed([3; 32]);
    let lines = sealed(&sealer, 9, "");
    let t = tree(&lines);
    let key = dir.join("service-key.pub");
    std::fs::write(&key, sealer.public_key_b64()).unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let cp5 = write("cp5", &note(&sealer, &lines, 5));
    let cp9 = write("cp9", &note(&sealer, &lines, 9));
    let b64s = |v: &[[u8; 32]]| v.iter().map(|h| STANDARD.encode(h)).collect::<Vec<_>>();
    let inclusion = |seq: u64, line: &str, proof: &[[u8; 32]]| {
        serde_json::json!({"seq": seq, "size": 9, "line": line, "proof": b64s(proof)}).to_string()
    };
    let prove = |args: &[&str], files: &[(&str, &Path)]| {
        let mut c = Command::new(BIN);
        c.args(["audit", "prove"]).args(args).arg("--key").arg(&key);
        for (flag, path) in files {
            c.arg(flag).arg(path);
        }
        c.output().unwrap()
    };
    let proof = t.inclusion_proof(2, 9).unwrap();
    let good = write("inc.json", &inclusion(3, &lines[2].line, &proof));
    let out = prove(
        &["inclusion"],
        &[("--proof", &good), ("--checkpoint", &cp9)],
    );
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    // Another line on the same path, or an altered path: exit 1.
    let wrong = write("wrong.json", &inclusion(3, &lines[3].line, &proof));
    assert_eq!(
        code(&prove(
            &["inclusion"],
            &[("--proof", &wrong), ("--checkpoint", &cp9)]
        )),
        1
    );
    let mut altered = proof.clone();
    altered[0][0] ^= 1;
    let altered = write("altered.json", &inclusion(3, &lines[2].line, &altered));
    assert_eq!(
        code(&prove(
            &["inclusion"],
            &[("--proof", &altered), ("--checkpoint", &cp9)]
        )),
        1
    );
    // A proof for another size than the checkpoint's: unusable.
    assert_eq!(
        code(&prove(
            &["inclusion"],
            &[("--proof", &good), ("--checkpoint", &cp5)]
        )),
        2
    );

    let consistency = |proof: &[[u8; 32]]| {
        serde_json::json!({"from": 5, "to": 9, "proof": b64s(proof)}).to_string()
    };
    let proof = t.consistency_proof(5, 9).unwrap();
    let good = write("con.json", &consistency(&proof));
    let files = |p: &Path| {
        [("--proof", p), ("--old", &cp5), ("--new", &cp9)].map(|(f, p)| (f, p.to_owned()))
    };
    let run = |p: &Path| {
        let f = files(p);
        let refs: Vec<(&str, &Path)> = f.iter().map(|(a, b)| (*a, b.as_path())).collect();
        prove(&["consistency"], &refs)
    };
    let out = run(&good);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    let mut altered = proof.clone();
    altered[1][31] ^= 0x80;
    assert_eq!(
        code(&run(&write("con-altered.json", &consistency(&altered)))),
        1
    );
    // A checkpoint of another history at size 5: the same proof does not join them.
    let other = sealed(&sealer, 9, "x");
    let forked = write("cp5-fork", &note(&sealer, &other, 5));
    let out = prove(
        &["consistency"],
        &[("--proof", &good), ("--old", &forked), ("--new", &cp9)],
    );
    assert_eq!(code(&out), 1, "{}", stdout(&out));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 29 §4: `audit verify --policy` judges each checkpoint by a C2SP tlog-policy (its logs
/// and its quorum), and `audit prove tlog` checks a tlog-proof@v1 offline under one.
#[test]
fn a_tlog_policy_judges_checkpoints_and_tlog_proofs() {
    use countersign_audit::note::{NoteSigner, note_parts};
    let dir = scratch_dir("policy");
    let sealer = AuditSealer::from_seed([3; 32]);
    let lines = sealed(&sealer, 8, "");
    let cp8 = note(&sealer, &lines, 8);
    let (text, _) = note_parts(&cp8).unwrap();
    let w1 = NoteSigner::from_seed("witness.example/w1", [5; 32]).unwrap();
    let w2 = NoteSigner::from_seed("witness.example/w2", [6; 32]).unwrap();
    let cosigned = format!("{cp8}{}", w1.cosign(text, 1_790_000_000));
    let write = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let log: String = lines.iter().map(|l| format!("{}\n", l.line)).collect();
    let log = write("audit.jsonl", &log);
    let key = write("service-key.pub", &sealer.public_key_b64());
    let cp = write("cp8", &cosigned);
    let witnesses = format!(
        "witness a {}\nwitness b {}\n",
        w1.cosigner().vkey(),
        w2.cosigner().vkey()
    );
    let policy = |name: &str, log_line: &str, group: &str| {
        write(
            name,
            &format!("# test\n{log_line}\n{witnesses}group g {group} a b\nquorum g\n"),
        )
    };
    let any = policy("any.policy", &format!("log {}", log_vkey(&sealer)), "any");
    let all = policy("all.policy", &format!("log {}", log_vkey(&sealer)), "all");
    let no_log = policy("nolog.policy", "", "any");
    let other = AuditSealer::from_seed([4; 32]);
    let foreign = policy(
        "foreign.policy",
        &format!("log {}", log_vkey(&other)),
        "any",
    );
    let verify = |extra: &[&str]| {
        let mut args: Vec<std::ffi::OsString> = vec!["audit".into(), "verify".into()];
        for (flag, file) in [("", &log), ("--key", &key), ("--checkpoint", &cp)] {
            args.extend((!flag.is_empty()).then(|| flag.into()));
            args.push(file.into());
        }
        args.extend(extra.iter().map(Into::into));
        Command::new(BIN).args(args).output().unwrap()
    };
    let path = |p: &Path| p.to_str().unwrap().to_owned();
    let out = verify(&["--policy", &path(&any)]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    assert!(
        stdout(&out).contains("checkpoint_witnessed"),
        "{}",
        stdout(&out)
    );
    let out = verify(&["--policy", &path(&all)]);
    assert_eq!(code(&out), 1, "{}", stdout(&out));
    assert!(
        stdout(&out).contains("checkpoint_no_quorum"),
        "{}",
        stdout(&out)
    );
    assert_eq!(code(&verify(&["--policy", &path(&no_log)])), 0);
    // A policy whose log is another key: unusable, like a checkpoint of another key.
    assert_eq!(code(&verify(&["--policy", &path(&foreign)])), 2);
    // --policy replaces --quorum and --witness-key; both at once is a usage error.
    assert_eq!(
        code(&verify(&["--policy", &path(&any), "--quorum", "1"])),
        2
    );

    // A tlog-proof of line 3 in the cosigned checkpoint.
    let t = tree(&lines);
    let tlog = |extra: &str| {
        countersign_audit::TlogProof {
            extra: Some(extra.as_bytes().to_vec()),
            index: 2,
            path: t.inclusion_proof(2, 8).unwrap(),
            checkpoint: cosigned.clone(),
        }
        .to_text()
    };
    let proof = write("line3.tlog-proof", &tlog(&lines[2].line));
    let prove = |file: &Path, extra: &[&str]| {
        Command::new(BIN)
            .args(["audit", "prove", "tlog"])
            .arg(file)
            .args(extra)
            .output()
            .unwrap()
    };
    let out = prove(&proof, &["--policy", &path(&any), "--approval", "apv_1"]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    assert!(
        stdout(&out).contains("included: line 3 (outcome of approval apv_1)"),
        "{}",
        stdout(&out)
    );
    assert_eq!(code(&prove(&proof, &["--policy", &path(&all)])), 1);
    assert_eq!(
        code(&prove(
            &proof,
            &["--policy", &path(&any), "--approval", "apv_2"]
        )),
        1
    );
    assert_eq!(code(&prove(&proof, &["--key", &path(&key)])), 0);
    assert_eq!(code(&prove(&proof, &["--policy", &path(&no_log)])), 2);
    assert_eq!(
        code(&prove(
            &proof,
            &["--policy", &path(&no_log), "--key", &path(&key)]
        )),
        0
    );
    assert_eq!(code(&prove(&proof, &["--policy", &path(&foreign)])), 1);
    // Another line in `extra`, on line 3's path: not included.
    let swapped = write("swapped.tlog-proof", &tlog(&lines[3].line));
    assert_eq!(code(&prove(&swapped, &["--policy", &path(&any)])), 1);
    let _ = std::fs::remove_dir_all(&dir);
}
