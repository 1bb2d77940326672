//! C2SP signed-note keys and tlog-cosignature `cosignature/v1` (Ed25519), as witnesses use them.
//!
//! - A verifier key (vkey) is `<name>+<hex key id>+<base64(type || public key)>`, type `0x01` for
//!   an Ed25519 note signer (the log) and `0x04` for an Ed25519 cosigner (a witness).
//! - A signer key file holds `PRIVATE+KEY+<name>+<hex key id>+<base64(type || 32-byte seed)>`
//!   (the format of Go's `golang.org/x/mod/sumdb/note`, which other witness tools read).
//! - A cosignature line is `— <name> base64(key id || u64 big-endian timestamp || signature)`,
//!   the signature over `cosignature/v1\ntime <timestamp>\n` followed by the checkpoint text.
//!   The key id is `SHA-256(name || 0x0A || 0x04 || public key)[:4]`.

use crate::checkpoint::{CheckpointError, malformed, parse_signature_line, split_note};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::{Signature, Signer as _, SigningKey, Verifier as _, VerifyingKey};
use sha2::{Digest as _, Sha256};

/// signed-note type byte of an Ed25519 note signature (a log's checkpoint signature).
pub const TYPE_ED25519: u8 = 0x01;
/// tlog-cosignature type byte of an Ed25519 `cosignature/v1`.
pub const TYPE_COSIGNATURE_V1: u8 = 0x04;

/// A named Ed25519 public key of one signature type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoteVerifier {
    pub name: String,
    pub kind: u8,
    pub key: VerifyingKey,
}

fn key_id_of(name: &str, kind: u8, key: &VerifyingKey) -> [u8; 4] {
    let mut h = Sha256::new();
    h.update(name.as_bytes());
    h.update([b'\n', kind]);
    h.update(key.as_bytes());
    let digest: [u8; 32] = h.finalize().into();
    let [a, b, c, d, ..] = digest;
    [a, b, c, d]
}

fn hex8(id: &[u8; 4]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

impl NoteVerifier {
    /// The signed-note key id of this key.
    pub fn key_id(&self) -> [u8; 4] {
        key_id_of(&self.name, self.kind, &self.key)
    }

    /// The vkey text.
    pub fn vkey(&self) -> String {
        let mut data = vec![self.kind];
        data.extend_from_slice(self.key.as_bytes());
        format!(
            "{}+{}+{}",
            self.name,
            hex8(&self.key_id()),
            STANDARD.encode(data)
        )
    }

    /// Parse a vkey; its key id must match its name, type and key.
    pub fn parse(vkey: &str) -> Result<Self, CheckpointError> {
        let vkey = vkey.trim();
        let mut parts = vkey.splitn(3, '+');
        let (Some(name), Some(id), Some(data)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(malformed(format!(
                "{vkey:?} is not a vkey (name+keyid+base64)"
            )));
        };
        if !crate::valid_origin(name) {
            return Err(malformed(format!("invalid key name {name:?}")));
        }
        let data = STANDARD
            .decode(data)
            .map_err(|_| malformed(format!("the key of {name} is not base64")))?;
        let Some((&kind, key)) = data.split_first() else {
            return Err(malformed(format!("the key of {name} is empty")));
        };
        if kind != TYPE_ED25519 && kind != TYPE_COSIGNATURE_V1 {
            return Err(malformed(format!(
                "key type 0x{kind:02x} of {name} is not Ed25519 (0x01) or cosignature/v1 (0x04)"
            )));
        }
        let key = <[u8; 32]>::try_from(key)
            .ok()
            .and_then(|k| VerifyingKey::from_bytes(&k).ok())
            .ok_or_else(|| malformed(format!("the key of {name} is not an Ed25519 key")))?;
        let verifier = Self {
            name: name.to_owned(),
            kind,
            key,
        };
        if hex8(&verifier.key_id()) != id {
            return Err(malformed(format!(
                "the key id {id} of {name} does not match its key"
            )));
        }
        Ok(verifier)
    }
}

/// A named Ed25519 signing key (a witness's cosigning key).
#[derive(Clone)]
pub struct NoteSigner {
    pub name: String,
    key: SigningKey,
}

impl std::fmt::Debug for NoteSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NoteSigner({})", self.name)
    }
}

impl NoteSigner {
    /// A signer from a seed.
    pub fn from_seed(name: &str, seed: [u8; 32]) -> Result<Self, CheckpointError> {
        if !crate::valid_origin(name) {
            return Err(malformed(format!("invalid key name {name:?}")));
        }
        Ok(Self {
            name: name.to_owned(),
            key: SigningKey::from_bytes(&seed),
        })
    }

    /// Parse `PRIVATE+KEY+<name>+<hex id>+<base64(type || seed)>` (type 0x01 or 0x04; the id
    /// must match the type written).
    pub fn parse(text: &str) -> Result<Self, CheckpointError> {
        let text = text.trim();
        let rest = text
            .strip_prefix("PRIVATE+KEY+")
            .ok_or_else(|| malformed("a signer key starts with PRIVATE+KEY+"))?;
        let mut parts = rest.splitn(3, '+');
        let (Some(name), Some(id), Some(data)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(malformed("a signer key is PRIVATE+KEY+name+keyid+base64"));
        };
        let data = STANDARD
            .decode(data)
            .map_err(|_| malformed("the signer key is not base64"))?;
        let Some((&kind, seed)) = data.split_first() else {
            return Err(malformed("the signer key is empty"));
        };
        let seed = <[u8; 32]>::try_from(seed)
            .map_err(|_| malformed("the signer key is not a 32-byte Ed25519 seed"))?;
        if kind != TYPE_ED25519 && kind != TYPE_COSIGNATURE_V1 {
            return Err(malformed(format!(
                "signer key type 0x{kind:02x} is not Ed25519"
            )));
        }
        let signer = Self::from_seed(name, seed)?;
        if hex8(&key_id_of(name, kind, &signer.key.verifying_key())) != id {
            return Err(malformed("the signer key's id does not match its key"));
        }
        Ok(signer)
    }

    /// The key file text (type 0x04: a cosigner).
    pub fn skey(&self) -> String {
        let verifier = self.cosigner();
        let mut data = vec![TYPE_COSIGNATURE_V1];
        data.extend_from_slice(self.key.as_bytes());
        format!(
            "PRIVATE+KEY+{}+{}+{}",
            self.name,
            hex8(&verifier.key_id()),
            STANDARD.encode(data)
        )
    }

    /// The cosigner's public key (type 0x04).
    pub fn cosigner(&self) -> NoteVerifier {
        NoteVerifier {
            name: self.name.clone(),
            kind: TYPE_COSIGNATURE_V1,
            key: self.key.verifying_key(),
        }
    }

    /// A `cosignature/v1` signature line (with its newline) over a checkpoint's text.
    pub fn cosign(&self, checkpoint_text: &str, timestamp: u64) -> String {
        let message = cosigned_message(checkpoint_text, timestamp);
        let signature = self.key.sign(message.as_bytes());
        let mut blob = self.cosigner().key_id().to_vec();
        blob.extend_from_slice(&timestamp.to_be_bytes());
        blob.extend_from_slice(&signature.to_bytes());
        format!("\u{2014} {} {}\n", self.name, STANDARD.encode(blob))
    }
}

fn cosigned_message(text: &str, timestamp: u64) -> String {
    format!("cosignature/v1\ntime {timestamp}\n{text}")
}

/// The first three lines of any tlog-checkpoint text: origin, size, root hash. Extension lines
/// may follow (they are signed but not interpreted here).
pub fn checkpoint_head(text: &str) -> Result<(String, u64, [u8; 32]), CheckpointError> {
    let mut lines = text.strip_suffix('\n').unwrap_or(text).split('\n');
    let (Some(origin), Some(size), Some(root)) = (lines.next(), lines.next(), lines.next()) else {
        return Err(malformed(
            "a checkpoint has at least origin, size and root lines",
        ));
    };
    if lines.any(str::is_empty) {
        return Err(malformed("an extension line is empty"));
    }
    if !crate::valid_origin(origin) {
        return Err(malformed(format!("invalid origin {origin:?}")));
    }
    let size = (!size.is_empty()
        && size.bytes().all(|b| b.is_ascii_digit())
        && (size == "0" || !size.starts_with('0')))
    .then(|| size.parse::<u64>().ok())
    .flatten()
    .ok_or_else(|| malformed(format!("size {size:?} is not a decimal")))?;
    let root = STANDARD
        .decode(root)
        .ok()
        .filter(|h| STANDARD.encode(h) == root)
        .and_then(|h| <[u8; 32]>::try_from(h).ok())
        .ok_or_else(|| malformed(format!("root {root:?} is not base64 of 32 bytes")))?;
    Ok((origin.to_owned(), size, root))
}

/// A signed note's text (with its final newline) and its signature lines.
pub fn note_parts(note: &str) -> Result<(&str, Vec<&str>), CheckpointError> {
    split_note(note)
}

/// Whether `note` carries a valid Ed25519 note signature (type 0x01) of `log`: its text if so.
/// Signatures of other keys are ignored; a signature of `log` that fails refuses the note.
pub fn verify_log_signature<'a>(
    note: &'a str,
    log: &NoteVerifier,
) -> Result<&'a str, CheckpointError> {
    let (text, signatures) = split_note(note)?;
    let id = log.key_id();
    let mut verified = false;
    for line in signatures {
        let (name, blob) = parse_signature_line(line)?;
        let Some(rest) = blob.strip_prefix(&id[..]).filter(|_| name == log.name) else {
            continue;
        };
        let ok = <[u8; 64]>::try_from(rest)
            .map(|b| log.key.verify(text.as_bytes(), &Signature::from_bytes(&b)))
            .is_ok_and(|r| r.is_ok());
        if !ok {
            return Err(CheckpointError::BadSignature {
                key_name: log.name.clone(),
            });
        }
        verified = true;
    }
    if verified {
        Ok(text)
    } else {
        Err(CheckpointError::NotSigned {
            key_name: log.name.clone(),
            key_id: hex8(&id),
        })
    }
}

/// The witnesses among `witnesses` (type 0x04 keys) with a valid cosignature on `note`, each
/// with its timestamp; one per witness. Lines of unknown keys are ignored; a line of a known
/// witness that does not verify is not counted.
pub fn valid_cosignatures(
    note: &str,
    witnesses: &[NoteVerifier],
) -> Result<Vec<(String, u64)>, CheckpointError> {
    let (text, signatures) = split_note(note)?;
    let mut found: Vec<(String, u64)> = Vec::new();
    for line in signatures {
        let (name, blob) = parse_signature_line(line)?;
        for w in witnesses
            .iter()
            .filter(|w| w.kind == TYPE_COSIGNATURE_V1 && w.name == name)
        {
            let Some(rest) = blob.strip_prefix(&w.key_id()[..]) else {
                continue;
            };
            let Ok(rest) = <[u8; 72]>::try_from(rest) else {
                continue;
            };
            let (ts, sig) = rest.split_at(8);
            let Ok(ts) = <[u8; 8]>::try_from(ts) else {
                continue;
            };
            let timestamp = u64::from_be_bytes(ts);
            let Ok(sig) = <[u8; 64]>::try_from(sig) else {
                continue;
            };
            let message = cosigned_message(text, timestamp);
            if timestamp <= i64::MAX as u64
                && w.key
                    .verify(message.as_bytes(), &Signature::from_bytes(&sig))
                    .is_ok()
                && !found.iter().any(|(n, _)| n == &w.name)
            {
                found.push((w.name.clone(), timestamp));
            }
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "example.com/log\n3\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n";

    #[test]
    fn keys_round_trip_and_ids_are_checked() {
        let w = NoteSigner::from_seed("witness.example/w1", [5; 32]).unwrap();
        let parsed = NoteSigner::parse(&w.skey()).unwrap();
        assert_eq!(parsed.cosigner(), w.cosigner());
        let vkey = w.cosigner().vkey();
        assert_eq!(NoteVerifier::parse(&vkey), Ok(w.cosigner()));
        // A key id that does not match: refused.
        let mut bad = vkey.clone();
        bad.replace_range(
            vkey.find('+').unwrap_or(0) + 1..vkey.find('+').unwrap_or(0) + 3,
            "zz",
        );
        assert!(NoteVerifier::parse(&bad).is_err());
        assert!(NoteVerifier::parse("no-plus").is_err());
        assert!(NoteSigner::parse("PRIVATE+KEY+x+00000000+AQ==").is_err());
    }

    #[test]
    fn cosignatures_verify_under_their_witness_only() {
        let w1 = NoteSigner::from_seed("witness.example/w1", [5; 32]).unwrap();
        let w2 = NoteSigner::from_seed("witness.example/w2", [6; 32]).unwrap();
        let line = w1.cosign(TEXT, 1_700_000_000);
        let note = format!("{TEXT}\n{line}");
        let both = [w1.cosigner(), w2.cosigner()];
        assert_eq!(
            valid_cosignatures(&note, &both),
            Ok(vec![("witness.example/w1".to_owned(), 1_700_000_000)])
        );
        // Another text under the same signature: not counted.
        let edited = note.replacen("\n3\n", "\n4\n", 1);
        assert_eq!(valid_cosignatures(&edited, &both), Ok(vec![]));
        // A same-named key of another seed: not counted.
        let impostor = NoteSigner::from_seed("witness.example/w1", [7; 32]).unwrap();
        assert_eq!(
            valid_cosignatures(&note, &[impostor.cosigner()]),
            Ok(vec![])
        );
        // The same witness twice counts once.
        let twice = format!("{TEXT}\n{line}{}", w1.cosign(TEXT, 1_700_000_001));
        assert_eq!(valid_cosignatures(&twice, &both).map(|v| v.len()), Ok(1));
    }

    #[test]
    fn checkpoint_heads_are_read_with_extensions() {
        let (origin, size, root) = checkpoint_head(TEXT).unwrap();
        assert_eq!(
            (origin.as_str(), size, root),
            ("example.com/log", 3, [0; 32])
        );
        assert!(checkpoint_head(&format!("{TEXT}ext line\n")).is_ok());
        assert!(checkpoint_head("example.com/log\n03\nAAAA\n").is_err());
        assert!(checkpoint_head("example.com/log\n3\n").is_err());
    }
}
