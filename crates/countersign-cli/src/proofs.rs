//! `audit prove`, `witness serve|keygen`, and the crypto floor of `audit verify --floor`.

use crate::audit::ProveCommand;
use crate::exit::{EXIT_ALLOW, EXIT_DENY, EXIT_UNUSABLE};
use anyhow::Context as _;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use countersign_audit::merkle::{self, Hash};
use countersign_audit::note::{NoteSigner, NoteVerifier};
use countersign_audit::{Checkpoint, CheckpointHash};
use countersign_server::witness::WitnessRouter as _;
use ed25519_dalek::VerifyingKey;
use serde_json::Value;
use std::path::Path;

/// `--key`: base64url Ed25519 public key, or a file holding one.
pub(crate) fn service_key(key: &str) -> Option<VerifyingKey> {
    let text = std::fs::read_to_string(key).unwrap_or_else(|_| key.to_owned());
    countersign::b64::decode(text.trim())
        .ok()
        .and_then(|b| <[u8; 32]>::try_from(b).ok())
        .and_then(|b| VerifyingKey::from_bytes(&b).ok())
}

/// `--witness-key`: vkeys, or files holding one.
pub(crate) fn witness_keys(keys: &[String]) -> anyhow::Result<Vec<NoteVerifier>> {
    keys.iter()
        .map(|k| {
            let text = std::fs::read_to_string(k).unwrap_or_else(|_| k.clone());
            let key =
                NoteVerifier::parse(text.trim()).with_context(|| format!("--witness-key {k:?}"))?;
            anyhow::ensure!(
                key.kind == countersign_audit::note::TYPE_COSIGNATURE_V1,
                "--witness-key {k:?} is not a cosignature/v1 key (type 0x04)"
            );
            Ok(key)
        })
        .collect()
}

fn read_checkpoint(path: &Path, key: &VerifyingKey) -> anyhow::Result<Checkpoint> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let cp = Checkpoint::verify(&text, key, None)
        .with_context(|| format!("checkpoint {}", path.display()))?;
    anyhow::ensure!(
        cp.kind == CheckpointHash::MerkleRoot,
        "checkpoint {} is version 1 (a chain head): it carries no Merkle root to prove against",
        path.display()
    );
    Ok(cp)
}

fn read_json(path: &Path) -> anyhow::Result<Value> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_slice(&bytes).with_context(|| format!("{} is not JSON", path.display()))
}

fn hashes(v: &Value, member: &str) -> anyhow::Result<Vec<Hash>> {
    v.get(member)
        .and_then(Value::as_array)
        .with_context(|| format!("the proof has no {member:?} array"))?
        .iter()
        .map(|h| hash(h, member))
        .collect()
}

/// One standard-base64 hash of `member`.
fn hash(h: &Value, member: &str) -> anyhow::Result<Hash> {
    h.as_str()
        .and_then(|s| STANDARD.decode(s).ok())
        .and_then(|b| <[u8; 32]>::try_from(b).ok())
        .with_context(|| format!("{member}: {h} is not base64 of 32 bytes"))
}

fn number(v: &Value, member: &str) -> anyhow::Result<u64> {
    v.get(member)
        .and_then(Value::as_u64)
        .with_context(|| format!("the proof has no numeric {member:?}"))
}

/// `audit prove inclusion|consistency`: exit 0 the proof holds, 1 it does not, 2 unusable.
pub(crate) fn prove(command: ProveCommand) -> u8 {
    match check(command) {
        Ok(Ok(message)) => {
            println!("{message}");
            EXIT_ALLOW
        }
        Ok(Err(message)) => {
            println!("INVALID: {message}");
            EXIT_DENY
        }
        Err(e) => {
            eprintln!("countersign: {e:#}");
            EXIT_UNUSABLE
        }
    }
}

/// Outer error: unusable input. Inner: the verdict.
fn check(command: ProveCommand) -> anyhow::Result<Result<String, String>> {
    match command {
        ProveCommand::Inclusion {
            proof,
            checkpoint,
            key,
            line,
        } => check_inclusion(&proof, &checkpoint, &key, line.as_deref()),
        ProveCommand::Tlog {
            proof,
            policy,
            key,
            line,
            approval,
        } => prove_tlog(
            &proof,
            policy.as_deref(),
            key.as_deref(),
            line.as_deref(),
            approval,
        ),
        ProveCommand::Consistency {
            proof,
            old,
            new,
            key,
        } => check_consistency(&proof, &old, &new, &key),
    }
}

/// `audit prove inclusion`: outer error unusable input, inner the verdict.
fn check_inclusion(
    proof: &Path,
    checkpoint: &Path,
    key: &str,
    line: Option<&Path>,
) -> anyhow::Result<Result<String, String>> {
    let key = service_key(key).context("--key is not an Ed25519 public key")?;
    let cp = read_checkpoint(checkpoint, &key)?;
    let p = read_json(proof)?;
    let seq = number(&p, "seq")?;
    let size = number(&p, "size")?;
    let path = hashes(&p, "proof")?;
    let line = proved_line(line, &p)?;
    anyhow::ensure!(seq >= 1, "seq starts at 1");
    if size != cp.size {
        anyhow::bail!(
            "the proof is for a tree of {size} lines, the checkpoint covers {}: ask for \
             ?size={}",
            cp.size,
            cp.size
        );
    }
    let leaf = merkle::leaf_hash(line.as_bytes());
    // The proof's own leaf hash (absent from proofs of older services) must be this
    // line's: otherwise the proof is of another line.
    if let Some(stated) = p.get("leaf_hash")
        && hash(stated, "leaf_hash")? != leaf
    {
        return Ok(Err(format!(
            "the line given is not line {seq} of the proof: its leaf hash differs from \
             the proof's leaf_hash"
        )));
    }
    Ok(
        match merkle::verify_inclusion(seq - 1, size, &leaf, &path, &cp.hash) {
            Ok(()) => Ok(format!(
                "included: line {seq} is in the log of {size} lines signed at {} ({})",
                cp.time, cp.origin
            )),
            Err(e) => Err(format!(
                "line {seq} is not shown in the log of {size} lines signed at {}: {e}",
                cp.time
            )),
        },
    )
}

/// The line an inclusion proof is checked for: `--line FILE` (without its final newline), else
/// the proof's own `line` member.
fn proved_line(file: Option<&Path>, proof: &Value) -> anyhow::Result<String> {
    Ok(match file {
        Some(file) => {
            let text = std::fs::read_to_string(file)
                .with_context(|| format!("reading {}", file.display()))?;
            text.strip_suffix('\n').unwrap_or(&text).to_owned()
        }
        None => proof
            .get("line")
            .and_then(Value::as_str)
            .context(
                "the proof carries no \"line\" (a public proof never does): pass --line \
                 FILE with the line you kept, or fetch the proof with &include=line as \
                 the gateway whose approval the line records, or as an auditor",
            )?
            .to_owned(),
    })
}

/// `audit prove consistency`: outer error unusable input, inner the verdict.
fn check_consistency(
    proof: &Path,
    old: &Path,
    new: &Path,
    key: &str,
) -> anyhow::Result<Result<String, String>> {
    let key = service_key(key).context("--key is not an Ed25519 public key")?;
    let old = read_checkpoint(old, &key)?;
    let new = read_checkpoint(new, &key)?;
    anyhow::ensure!(
        old.origin == new.origin,
        "the checkpoints name two logs ({} and {})",
        old.origin,
        new.origin
    );
    let p = read_json(proof)?;
    let (from, to) = (number(&p, "from")?, number(&p, "to")?);
    if (from, to) != (old.size, new.size) {
        anyhow::bail!(
            "the proof is from {from} to {to}, the checkpoints are of {} and {} lines",
            old.size,
            new.size
        );
    }
    let path = hashes(&p, "proof")?;
    Ok(
        match merkle::verify_consistency(from, to, &old.hash, &new.hash, &path) {
            Ok(()) => Ok(format!(
                "consistent: the log of {from} lines ({}) is a prefix of the log of {to} \
                 lines ({})",
                old.time, new.time
            )),
            Err(e) => Err(format!(
                "the checkpoints of {from} and {to} lines are not one history: {e}"
            )),
        },
    )
}

/// `audit prove tlog`: outer error unusable input, inner the verdict.
fn prove_tlog(
    proof: &Path,
    policy: Option<&Path>,
    key: Option<&str>,
    line: Option<&Path>,
    approval: Option<String>,
) -> anyhow::Result<Result<String, String>> {
    let text =
        std::fs::read_to_string(proof).with_context(|| format!("reading {}", proof.display()))?;
    let parsed = countersign_audit::TlogProof::parse(&text)
        .with_context(|| format!("tlog-proof {}", proof.display()))?;
    let policy = tlog_policy(policy)?;
    let log = key.map(|key| tlog_log_key(key, &parsed)).transpose()?;
    anyhow::ensure!(
        !policy.logs.is_empty() || log.is_some(),
        "the policy lists no log: pass --key (the service's public key)"
    );
    let entry = match line {
        Some(file) => {
            let text = std::fs::read_to_string(file)
                .with_context(|| format!("reading {}", file.display()))?;
            let text = text.strip_suffix('\n').unwrap_or(&text).to_owned();
            if parsed.extra.as_ref().is_some_and(|e| *e != text.as_bytes()) {
                return Ok(Err(
                    "the line given is not the proof's extra line: they are two entries".into(),
                ));
            }
            text.into_bytes()
        }
        None => parsed
            .extra
            .clone()
            .context("the proof has no extra line: pass the audit line with --line FILE")?,
    };
    let verified = match parsed.verify(&entry, &policy, log.as_ref()) {
        Ok(v) => v,
        Err(e) => return Ok(Err(e.to_string())),
    };
    // What the now-proven line records.
    let record: Value = serde_json::from_slice(&entry).unwrap_or(Value::Null);
    let field = |name: &str| {
        record
            .get(name)
            .and_then(Value::as_str)
            .unwrap_or("-")
            .to_owned()
    };
    if let Some(expected) = approval
        && field("approval_id") != expected
    {
        return Ok(Err(format!(
            "line {} records approval {}, not {expected}",
            verified.index + 1,
            field("approval_id")
        )));
    }
    let witnesses: Vec<&str> = verified
        .witnessing
        .cosigned
        .iter()
        .map(|(n, _)| n.as_str())
        .collect();
    Ok(Ok(format!(
        "included: line {} ({} of approval {}) is in the log of {} lines of {}; witnesses: {}",
        verified.index + 1,
        field("kind"),
        field("approval_id"),
        verified.size,
        verified.origin,
        if witnesses.is_empty() {
            "none required".to_owned()
        } else {
            witnesses.join(", ")
        }
    )))
}

/// `audit prove tlog --policy`: the file's witness policy, or none (`quorum none`) without one.
fn tlog_policy(policy: Option<&Path>) -> anyhow::Result<countersign_audit::Policy> {
    Ok(match policy {
        Some(path) => {
            let bytes =
                std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
            countersign_audit::Policy::parse(&bytes)
                .with_context(|| format!("policy {}", path.display()))?
        }
        None => countersign_audit::Policy::parse(b"quorum none\n")?,
    })
}

/// `audit prove tlog --key`: the log's note verifier. The log key is named by the checkpoint's
/// origin: the signature binds the two.
fn tlog_log_key(key: &str, parsed: &countersign_audit::TlogProof) -> anyhow::Result<NoteVerifier> {
    let key = service_key(key).context("--key is not an Ed25519 public key")?;
    let (note_text, _) = countersign_audit::note::note_parts(&parsed.checkpoint)?;
    let (origin, _, _) = countersign_audit::note::checkpoint_head(note_text)?;
    Ok(NoteVerifier {
        name: origin,
        kind: countersign_audit::note::TYPE_ED25519,
        key,
    })
}

/// `witness keygen`.
pub(crate) fn witness_keygen(name: &str, out: &Path) -> anyhow::Result<u8> {
    use std::io::Write as _;
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).map_err(|e| anyhow::anyhow!("no randomness: {e}"))?;
    let signer = NoteSigner::from_seed(name, seed)?;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let mut f = options
        .open(out)
        .with_context(|| format!("creating {} (never overwritten)", out.display()))?;
    writeln!(f, "{}", signer.skey())?;
    f.sync_all()?;
    println!("{}", signer.cosigner().vkey());
    Ok(EXIT_ALLOW)
}

/// `witness serve`.
pub(crate) fn witness_serve(
    listen: std::net::SocketAddr,
    key: &Path,
    log_keys: &[String],
    state_dir: &Path,
) -> anyhow::Result<u8> {
    let text =
        std::fs::read_to_string(key).with_context(|| format!("reading {}", key.display()))?;
    let signer = NoteSigner::parse(&text).with_context(|| format!("key file {}", key.display()))?;
    let logs = log_keys
        .iter()
        .map(|k| NoteVerifier::parse(k).with_context(|| format!("--log-key {k:?}")))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let witness = std::sync::Arc::new(countersign_server::witness::Witness::new(
        signer, logs, state_dir,
    )?);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| format!("listening on {listen}"))?;
        let addr = listener.local_addr()?;
        println!("countersign witness: {}", witness.vkey());
        println!("countersign witness: listening on http://{addr}");
        use std::io::Write as _;
        let _ = std::io::stdout().flush();
        axum::serve(listener, witness.router())
            .with_graceful_shutdown(countersign_server::shutdown_signal())
            .await
            .context("serving")?;
        Ok::<_, anyhow::Error>(())
    })?;
    Ok(EXIT_ALLOW)
}

/// One seal: (message, signature).
type Seal = (Vec<u8>, ed25519_dalek::Signature);

/// What the floor times: every line's seal, and every Decision's evidence signatures with the
/// credential id they claim.
#[derive(Default)]
struct FloorWork {
    seals: Vec<Seal>,
    /// Credential id (base64url) to the key its enrollment line recorded.
    keys: std::collections::HashMap<String, countersign::webauthn::CosePublicKey>,
    /// (credential id, signed message, signature).
    evidence: Vec<(String, Vec<u8>, Vec<u8>)>,
    decisions: usize,
}

impl FloorWork {
    /// Parses the whole log; lines that are not sealed JSON are skipped.
    fn read(log: &[u8]) -> Self {
        let mut work = Self::default();
        for line in String::from_utf8_lossy(log).lines() {
            let Some(seal) = line_seal(line) else {
                continue;
            };
            work.seals.push(seal);
            let Ok(v) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            match v.get("kind").and_then(Value::as_str) {
                Some("enrollment") => work.enrollment(&v),
                Some("decision") => work.decision(&v),
                _ => {}
            }
        }
        work
    }

    fn enrollment(&mut self, v: &Value) {
        use countersign::webauthn::CosePublicKey;
        if let Some(record) = v
            .get("credential")
            .and_then(|c| serde_json::from_value::<countersign::CredentialRecord>(c.clone()).ok())
            && let Ok(cose) = CosePublicKey::from_cose(&record.public_key)
        {
            self.keys
                .insert(countersign::b64::encode(&record.credential_id), cose);
        }
    }

    fn decision(&mut self, v: &Value) {
        use sha2::Digest as _;
        self.decisions += 1;
        let entries = match v.get("evidence") {
            Some(Value::Array(a)) => a.clone(),
            Some(e @ Value::Object(_)) => vec![e.clone()],
            _ => Vec::new(),
        };
        for e in entries {
            let field = |name: &str| {
                e.get(name)
                    .and_then(Value::as_str)
                    .and_then(|s| countersign::b64::decode(s).ok())
            };
            let (Some(cred), Some(cd), Some(ad), Some(sig)) = (
                e.get("credential_id").and_then(Value::as_str),
                field("client_data_json"),
                field("authenticator_data"),
                field("signature"),
            ) else {
                continue;
            };
            let mut signed = ad;
            signed.extend_from_slice(&sha2::Sha256::digest(&cd));
            self.evidence.push((cred.to_owned(), signed, sig));
        }
    }
}

/// A line's seal: `...,"sig":"<86 base64url>"}` covers the domain and the line without it.
fn line_seal(line: &str) -> Option<Seal> {
    let cut = line.len().checked_sub(96)?;
    let (head, tail) = (line.get(..cut)?, line.get(cut..)?);
    let sig = tail
        .strip_prefix(",\"sig\":\"")
        .and_then(|t| t.strip_suffix("\"}"))
        .and_then(|s| countersign::b64::decode(s).ok())
        .and_then(|b| ed25519_dalek::Signature::from_slice(&b).ok())?;
    let mut message = countersign_audit::AUDIT_DOMAIN.to_vec();
    message.extend_from_slice(head.as_bytes());
    message.push(b'}');
    Some((message, sig))
}

/// `audit verify --floor`: time the raw verifications the log requires, one by one on one
/// thread: every line's Ed25519 seal (`verify_strict`) and every Decision's evidence signature
/// (with the default backend, under the key its enrollment line recorded). Parsing is done
/// before the clock starts, so the floor is signature arithmetic only.
pub(crate) fn print_floor(
    log: &[u8],
    key: &VerifyingKey,
    threads: usize,
    took: std::time::Duration,
) {
    use countersign::webauthn::{DerPolicy, PreparedSignature, default_backend};
    let FloorWork {
        seals,
        keys,
        evidence,
        decisions,
    } = FloorWork::read(log);
    let backend = default_backend();
    let started = std::time::Instant::now();
    let bad_seals = seals
        .iter()
        .filter(|(m, s)| key.verify_strict(m, s).is_err())
        .count();
    let seal_time = started.elapsed();
    let started = std::time::Instant::now();
    let mut bad_evidence = 0usize;
    for (cred, signed, sig) in &evidence {
        let ok = keys.get(cred).is_some_and(|k| {
            PreparedSignature::new(k, sig, DerPolicy::Strict)
                .is_ok_and(|p| backend.verify(k, signed, &p).is_ok())
        });
        bad_evidence += usize::from(!ok);
    }
    let evidence_time = started.elapsed();
    let floor = seal_time + evidence_time;
    let threads = match threads {
        0 => std::thread::available_parallelism().map_or(1, usize::from),
        n => n,
    };
    let lines = seals.len() as f64;
    let secs = took.as_secs_f64().max(1e-9);
    // With T threads the floor divides by T at best (the work is independent per signature).
    let parallel_floor = floor.as_secs_f64() / threads as f64;
    eprintln!(
        "floor: {} seals in {:.3} s ({:.0}/s, {} failed), {} evidence signatures of {} Decisions \
         in {:.3} s ({:.0}/s, {} failed, backend {})",
        seals.len(),
        seal_time.as_secs_f64(),
        lines / seal_time.as_secs_f64().max(1e-9),
        bad_seals,
        evidence.len(),
        decisions,
        evidence_time.as_secs_f64(),
        evidence.len() as f64 / evidence_time.as_secs_f64().max(1e-9),
        bad_evidence,
        backend.name()
    );
    eprintln!(
        "verify: {:.3} s on {threads} thread(s): {:.0} lines/s, {:.0} Decisions/s; floor {:.3} s \
         one thread, {:.3} s ideal on {threads}; verify/floor speed ratio {:.2} (1.00 = as fast as \
         the raw signatures on {threads} thread(s))",
        secs,
        lines / secs,
        decisions as f64 / secs,
        floor.as_secs_f64(),
        parallel_floor,
        parallel_floor / secs
    );
}
