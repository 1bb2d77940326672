//! The line format and its seal: append-only JSON lines, hash-chained and signed with the
//! service's Ed25519 key.
//!
//! Line format (docs/spec/service.md §Audit): one JSON object per line carrying `seq` (1, 2, ...),
//! `prev_hash` (base64url SHA-256 of the previous line's exact bytes, 32 zero bytes for the first
//! line), `kind`, `ts` and the kind's fields, and last of all `sig`. The signature covers
//! `"countersign.audit/1\n"` followed by the line's exact bytes with the `,"sig":"..."` member
//! removed. Signing exact bytes instead of a re-canonicalized object means the verifier never has
//! to agree with the writer on a serialization: any edited byte breaks the signature and, through
//! `prev_hash`, the next line.

use crate::checkpoint::{Checkpoint, CheckpointError};
use crate::events::AuditEvent;
use countersign::b64;
use ed25519_dalek::{Signer as _, SigningKey, VerifyingKey};
use hmac::{Hmac, Mac};
use sha2::{Digest as _, Sha256};
use std::path::Path;

/// Domain separation for audit signatures: a service key signs nothing else with this prefix.
pub const AUDIT_DOMAIN: &[u8] = b"countersign.audit/1\n";
/// `prev_hash` of the first line.
pub const GENESIS_HASH: [u8; 32] = [0; 32];
/// Length of the `,"sig":"<86 base64url chars>"}` suffix every line ends with.
pub(crate) const SIG_SUFFIX_LEN: usize = 8 + 86 + 2;

/// A line ready to be appended, with its chain hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealedLine {
    pub seq: u64,
    pub line: String,
    pub hash: [u8; 32],
}

/// Domain separation for the key that authenticates events waiting to be sealed (PostgreSQL):
/// derived from the service key, so every replica holds it and nothing else does.
const UNSEALED_KEY_DOMAIN: &[u8] = b"countersign.audit-unsealed/1\n";

/// The service's audit signing key.
#[derive(Clone)]
pub struct AuditSealer {
    key: SigningKey,
    /// HMAC-SHA-256 key for events committed but not yet sealed (see [`Self::tag_unsealed`]).
    unsealed_key: [u8; 32],
}

impl std::fmt::Debug for AuditSealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AuditSealer({})", self.public_key_b64())
    }
}

impl AuditSealer {
    /// A sealer from a 32-byte Ed25519 seed.
    pub fn from_seed(seed: [u8; 32]) -> Self {
        let mut derive = Sha256::new();
        derive.update(UNSEALED_KEY_DOMAIN);
        derive.update(seed);
        Self {
            key: SigningKey::from_bytes(&seed),
            unsealed_key: derive.finalize().into(),
        }
    }

    /// Load the key from `path`, creating it (owner-only permissions) if it does not exist.
    pub fn load_or_create(path: &Path) -> anyhow::Result<Self> {
        use anyhow::Context as _;
        if path.exists() {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            let seed = b64::decode(text.trim())
                .ok()
                .and_then(|v| <[u8; 32]>::try_from(v).ok())
                .with_context(|| format!("{} is not a base64url 32-byte seed", path.display()))?;
            return Ok(Self::from_seed(seed));
        }
        let seed = crate::random_bytes::<32>().context("generating the service key")?;
        write_private(path, &format!("{}\n", b64::encode(&seed)))
            .with_context(|| format!("writing {}", path.display()))?;
        Ok(Self::from_seed(seed))
    }

    /// The verifying key.
    pub fn public_key(&self) -> VerifyingKey {
        self.key.verifying_key()
    }

    /// The verifying key as base64url (what `audit verify --key` takes).
    pub fn public_key_b64(&self) -> String {
        b64::encode(self.public_key().as_bytes())
    }

    /// Sign a checkpoint of the log as a signed note (see [`Checkpoint`]).
    pub fn sign_checkpoint(&self, checkpoint: &Checkpoint) -> Result<String, CheckpointError> {
        checkpoint.sign(&self.key)
    }

    /// Sign the signing input of a compact JWS (RFC 7515 §5.1, `BASE64URL(header) "."
    /// BASE64URL(payload)`) with EdDSA (RFC 8037): the service's ARAP `approval.state`.
    ///
    /// `None` unless the input is exactly two base64url segments. Such an input holds no newline
    /// and no `/`, so it can never be an audit line's message (which starts with
    /// [`AUDIT_DOMAIN`]) nor a signed note (whose text has newlines): one key signs all three
    /// and none can be taken for another.
    pub fn sign_jws(&self, signing_input: &str) -> Option<[u8; 64]> {
        let (header, payload) = signing_input.split_once('.')?;
        let base64url = |s: &str| {
            !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        };
        (base64url(header) && base64url(payload))
            .then(|| self.key.sign(signing_input.as_bytes()).to_bytes())
    }

    /// The tag an event's JSON text carries while it waits, committed, to be sealed into the
    /// chain (PostgreSQL: `audit_unsealed`). Sealing signs with the service key whatever the
    /// table holds, so without this tag anyone able to write to the database could have the
    /// service sign a line it never wrote; with it, only a holder of the service key can.
    pub fn tag_unsealed(&self, event_json: &str) -> [u8; 32] {
        self.unsealed_mac(event_json).finalize().into_bytes().into()
    }

    /// Whether `tag` is [`Self::tag_unsealed`] of `event_json` (compared in constant time).
    pub fn check_unsealed(&self, event_json: &str, tag: &[u8]) -> bool {
        self.unsealed_mac(event_json).verify_slice(tag).is_ok()
    }

    fn unsealed_mac(&self, event_json: &str) -> Hmac<Sha256> {
        // A 32-byte key is always a valid HMAC key; the fallback keeps the function total.
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.unsealed_key)
            .unwrap_or_else(|_| <Hmac<Sha256> as Mac>::new(&Default::default()));
        mac.update(event_json.as_bytes());
        mac
    }

    /// Seal `event` as line `seq` after a line whose hash is `prev_hash`.
    pub fn seal(&self, seq: u64, prev_hash: &[u8; 32], event: &AuditEvent) -> SealedLine {
        self.sign(seq, &unsigned_line(seq, prev_hash, event))
    }

    /// Sign an [`unsigned_line`] made for `seq`: the sealed line.
    pub fn sign(&self, seq: u64, unsigned: &str) -> SealedLine {
        let mut message = Vec::with_capacity(AUDIT_DOMAIN.len() + unsigned.len());
        message.extend_from_slice(AUDIT_DOMAIN);
        message.extend_from_slice(unsigned.as_bytes());
        let signature = self.key.sign(&message);
        let open = unsigned.strip_suffix('}').unwrap_or(unsigned);
        let line = format!(
            "{open},\"sig\":\"{}\"}}",
            b64::encode(&signature.to_bytes())
        );
        let hash = Sha256::digest(line.as_bytes()).into();
        SealedLine { seq, line, hash }
    }
}

/// `event` as line `seq` after a line whose hash is `prev_hash`, without its signature: the text
/// a seal signs. The interposer writes it as it is for every line of a write but the last, which
/// it signs and which covers them through the chain (docs/spec/service.md, "Audit log").
pub fn unsigned_line(seq: u64, prev_hash: &[u8; 32], event: &AuditEvent) -> String {
    let mut body = event.body().clone();
    body.remove("sig");
    body.insert("seq".into(), seq.into());
    body.insert("prev_hash".into(), b64::encode(prev_hash).into());
    // A map always serializes; the fallback keeps the function total.
    serde_json::to_string(&body).unwrap_or_else(|_| "{}".to_owned())
}

/// SHA-256 of a line's bytes.
pub fn line_hash(line: &str) -> [u8; 32] {
    Sha256::digest(line.as_bytes()).into()
}

#[cfg(unix)]
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()
}

#[cfg(not(unix))]
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    std::fs::write(path, text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::verify_log;

    #[test]
    fn sealed_line_ends_with_the_signature_and_chains() {
        let sealer = AuditSealer::from_seed([7; 32]);
        let a = sealer.seal(1, &GENESIS_HASH, &AuditEvent::test("x"));
        assert!(a.line.ends_with("\"}"));
        assert_eq!(
            a.line.len() - a.line.rfind(",\"sig\":\"").unwrap_or(0),
            SIG_SUFFIX_LEN
        );
        assert_eq!(a.hash, line_hash(&a.line));
        let b = sealer.seal(2, &a.hash, &AuditEvent::test("y"));
        let log = format!("{}\n{}\n", a.line, b.line);
        let report = verify_log(log.as_bytes(), &sealer.public_key());
        assert!(report.is_valid(), "{report:?}");
    }

    #[test]
    fn a_jws_is_signed_only_over_two_base64url_segments() {
        use ed25519_dalek::Verifier as _;
        let sealer = AuditSealer::from_seed([7; 32]);
        let input = "eyJhbGciOiJFZERTQSJ9.eyJpc3MiOiJ4In0";
        let signature = sealer.sign_jws(input).expect("a JWS signing input");
        let signature = ed25519_dalek::Signature::from_bytes(&signature);
        assert!(
            sealer
                .public_key()
                .verify(input.as_bytes(), &signature)
                .is_ok()
        );
        // Nothing an audit line or a signed note could be made of.
        for other in [
            "countersign.audit/1\n{}",
            "origin\n1\nhash\n",
            "a.b.c",
            ".b",
            "a.",
            "a/b.c",
        ] {
            assert!(sealer.sign_jws(other).is_none(), "{other:?}");
        }
    }

    #[test]
    fn an_unsealed_event_tag_binds_the_text_and_the_service_key() {
        let sealer = AuditSealer::from_seed([7; 32]);
        let text = r#"{"kind":"request","approval_id":"a1"}"#;
        let tag = sealer.tag_unsealed(text);
        assert!(sealer.check_unsealed(text, &tag));
        // Another text, a cut tag, another service key: all refused.
        assert!(!sealer.check_unsealed(r#"{"kind":"request","approval_id":"a2"}"#, &tag));
        assert!(!sealer.check_unsealed(text, &tag[..31]));
        assert!(!AuditSealer::from_seed([8; 32]).check_unsealed(text, &tag));
        // The tag key is not the signing seed itself.
        assert_ne!(sealer.unsealed_key, [7; 32]);
    }
}
