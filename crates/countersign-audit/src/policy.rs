//! C2SP tlog-policy (<https://c2sp.org/tlog-policy>, text of C2SP/C2SP commit 5ba5ee8; the
//! spec has no version tag yet): which logs to trust, which witnesses, and the quorum of
//! witnesses whose cosignatures make a checkpoint count.
//!
//! ```text
//! log example.com/countersign/audit+1a2b3c4d+AQ...
//! witness w1 witness.example/w1+99aabbcc+BA...
//! witness w2 witness.example/w2+00112233+BA...
//! group two 2 w1 w2
//! quorum two
//! ```
//!
//! Keys are Ed25519 only: a log's vkey of type 0x01 (a note signature) and a witness's of type
//! 0x04 (`cosignature/v1`). A policy naming an ML-DSA-44 witness (type 0x06) is refused as
//! unsupported rather than read as one that never cosigns, which could quietly make a quorum
//! unreachable or, in an `any` group, irrelevant.

use crate::CheckpointError;
use crate::note::{NoteVerifier, TYPE_COSIGNATURE_V1, TYPE_ED25519, verify_log_signature};
use std::collections::{HashMap, HashSet};

/// The most logs, witnesses or groups one policy may define (the spec asks for at least 32).
const MAX_DEFINITIONS: usize = 256;

/// A parsed policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// Trusted logs; empty when the log is known from context (the caller's `--key`).
    pub logs: Vec<NoteVerifier>,
    /// Witnesses by name, in file order.
    witnesses: Vec<(String, NoteVerifier)>,
    /// Groups by name: threshold and members.
    groups: HashMap<String, (usize, Vec<String>)>,
    /// The name of the quorum (a witness or group), or `None` for `quorum none`.
    quorum: Option<String>,
}

/// Why a policy file is refused; `line` is 1-based.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("policy line {line}: {why}")]
pub struct PolicyError {
    pub line: usize,
    pub why: String,
}

/// What a checkpoint's cosignatures amount to under a policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Witnessing {
    /// The policy's witnesses whose cosignature verifies, with its timestamp.
    pub cosigned: Vec<(String, u64)>,
    /// Whether they satisfy the quorum (always, for `quorum none`).
    pub quorum_met: bool,
}

fn err(line: usize, why: impl Into<String>) -> PolicyError {
    PolicyError {
        line,
        why: why.into(),
    }
}

/// A name the policy defines: the spec allows any octets but space, tab and newline; this
/// reader takes UTF-8 text (every vkey name is).
fn check_name(line: usize, name: &str, names: &HashSet<String>) -> Result<(), PolicyError> {
    if name == "none" {
        return Err(err(line, "the name none is predefined"));
    }
    if names.contains(name) {
        return Err(err(line, format!("{name:?} is defined twice")));
    }
    Ok(())
}

impl Policy {
    /// Parse a policy file.
    pub fn parse(bytes: &[u8]) -> Result<Self, PolicyError> {
        // Only tab, newline, printable ASCII and high-bit octets are allowed.
        if let Some(at) = bytes
            .iter()
            .position(|b| !(*b == b'\t' || *b == b'\n' || (0x20..0x7f).contains(b) || *b >= 0x80))
        {
            let line = 1 + bytes.iter().take(at).filter(|b| **b == b'\n').count();
            let octet = bytes.get(at).copied().unwrap_or_default();
            return Err(err(line, format!("the octet 0x{octet:02x} is not allowed")));
        }
        let text = std::str::from_utf8(bytes).map_err(|e| {
            let line = 1 + bytes
                .iter()
                .take(e.valid_up_to())
                .filter(|b| **b == b'\n')
                .count();
            err(line, "this reader takes UTF-8 text only")
        })?;
        let mut policy = Self {
            logs: Vec::new(),
            witnesses: Vec::new(),
            groups: HashMap::new(),
            quorum: None,
        };
        let mut names: HashSet<String> = HashSet::new();
        let mut quorum_seen = false;
        for (i, raw) in text.split('\n').enumerate() {
            let n = i + 1;
            let words: Vec<&str> = raw.split([' ', '\t']).filter(|w| !w.is_empty()).collect();
            let Some((&keyword, args)) = words.split_first() else {
                continue;
            };
            if keyword.starts_with('#') {
                continue;
            }
            match (keyword, args) {
                ("log", [vkey] | [vkey, _]) => {
                    let key = parse_key(n, vkey, TYPE_ED25519, "a log")?;
                    if policy.logs.iter().any(|l| l.key == key.key) {
                        return Err(err(n, "a log's key is listed twice"));
                    }
                    policy.logs.push(key);
                }
                ("witness", [name, vkey] | [name, vkey, _]) => {
                    check_name(n, name, &names)?;
                    let key = parse_key(n, vkey, TYPE_COSIGNATURE_V1, "a witness")?;
                    if policy.witnesses.iter().any(|(_, w)| w.key == key.key) {
                        return Err(err(n, "a witness's key is listed twice"));
                    }
                    names.insert((*name).to_owned());
                    policy.witnesses.push(((*name).to_owned(), key));
                }
                ("group", [name, k, members @ ..]) if !members.is_empty() => {
                    check_name(n, name, &names)?;
                    let mut seen: Vec<String> = Vec::new();
                    for m in members {
                        if !names.contains(*m) {
                            return Err(err(
                                n,
                                format!("member {m:?} is not defined on an earlier line"),
                            ));
                        }
                        if seen.iter().any(|s| s.as_str() == *m) {
                            return Err(err(n, format!("member {m:?} is listed twice")));
                        }
                        seen.push((*m).to_owned());
                    }
                    let k = match *k {
                        "all" => seen.len(),
                        "any" => 1,
                        text => text
                            .parse::<usize>()
                            .ok()
                            // Decimal as written: no sign, no leading zero.
                            .filter(|k| (1..=seen.len()).contains(k) && k.to_string() == text)
                            .ok_or_else(|| {
                                err(
                                    n,
                                    format!(
                                        "threshold {text:?} is not all, any or 1..={}",
                                        seen.len()
                                    ),
                                )
                            })?,
                    };
                    names.insert((*name).to_owned());
                    policy.groups.insert((*name).to_owned(), (k, seen));
                }
                ("quorum", [name]) => {
                    if quorum_seen {
                        return Err(err(n, "a second quorum line"));
                    }
                    quorum_seen = true;
                    if *name != "none" && !names.contains(*name) {
                        return Err(err(
                            n,
                            format!("quorum {name:?} is not defined on an earlier line"),
                        ));
                    }
                    policy.quorum = (*name != "none").then(|| (*name).to_owned());
                }
                ("log" | "witness" | "group" | "quorum", _) => {
                    return Err(err(n, format!("wrong number of items on a {keyword} line")));
                }
                _ => return Err(err(n, format!("unknown keyword {keyword:?}"))),
            }
            if policy.logs.len() > MAX_DEFINITIONS
                || policy.witnesses.len() > MAX_DEFINITIONS
                || policy.groups.len() > MAX_DEFINITIONS
            {
                return Err(err(
                    n,
                    format!("more than {MAX_DEFINITIONS} logs, witnesses or groups"),
                ));
            }
        }
        if !quorum_seen {
            return Err(err(1 + text.matches('\n').count(), "no quorum line"));
        }
        Ok(policy)
    }

    /// The witnesses' keys, for [`crate::note::valid_cosignatures`].
    pub fn witness_keys(&self) -> Vec<NoteVerifier> {
        self.witnesses.iter().map(|(_, k)| k.clone()).collect()
    }

    /// Whether the policy requires no cosignature (`quorum none`).
    pub fn needs_no_witness(&self) -> bool {
        self.quorum.is_none()
    }

    /// tlog-proof step 2 under this policy: the checkpoint's origin names a listed log and that
    /// log's signature verifies. Returns the log's key. A policy without logs accepts nothing
    /// here: the caller knows the log from elsewhere.
    pub fn check_log<'a>(&'a self, note: &str) -> Result<&'a NoteVerifier, CheckpointError> {
        let (text, _) = crate::note::note_parts(note)?;
        let (origin, _, _) = crate::note::checkpoint_head(text)?;
        let log = self.logs.iter().find(|l| l.name == origin).ok_or_else(|| {
            CheckpointError::NotSigned {
                key_name: origin.clone(),
                key_id: "(no log of the policy has this origin)".to_owned(),
            }
        })?;
        verify_log_signature(note, log)?;
        Ok(log)
    }

    /// tlog-proof step 3: the policy's witnesses whose cosignature on `note` verifies, and
    /// whether they make the quorum.
    pub fn witnessing(&self, note: &str) -> Result<Witnessing, CheckpointError> {
        let cosigned = crate::note::valid_cosignatures(note, &self.witness_keys())?;
        // Witness name in the policy for each key name that cosigned.
        let by_policy: Vec<&str> = self
            .witnesses
            .iter()
            .filter(|(_, k)| cosigned.iter().any(|(n, _)| *n == k.name))
            .map(|(name, _)| name.as_str())
            .collect();
        let quorum_met = match &self.quorum {
            None => true,
            Some(q) => self.satisfied(q, &by_policy),
        };
        Ok(Witnessing {
            cosigned,
            quorum_met,
        })
    }

    /// Whether `name` (a witness or a group) has witnessed, given the witnesses that cosigned.
    /// Groups refer only to earlier names, so the recursion ends.
    fn satisfied(&self, name: &str, cosigned: &[&str]) -> bool {
        if let Some((k, members)) = self.groups.get(name) {
            return members
                .iter()
                .filter(|m| self.satisfied(m, cosigned))
                .count()
                >= *k;
        }
        cosigned.contains(&name)
    }
}

/// A vkey of the given type.
fn parse_key(line: usize, vkey: &str, kind: u8, what: &str) -> Result<NoteVerifier, PolicyError> {
    let key = NoteVerifier::parse(vkey).map_err(|e| match e {
        CheckpointError::Malformed(m) if m.contains("0x06") => err(
            line,
            "ML-DSA-44 keys (type 0x06) are not supported by this verifier; Ed25519 only",
        ),
        e => err(line, format!("{what}'s key: {e}")),
    })?;
    if key.kind != kind {
        return Err(err(
            line,
            format!(
                "{what}'s key has type 0x{:02x}; it must be 0x{kind:02x}",
                key.kind
            ),
        ));
    }
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::note::NoteSigner;

    fn witness(n: u8) -> NoteSigner {
        NoteSigner::from_seed(&format!("witness.example/w{n}"), [n; 32]).unwrap()
    }

    const TEXT: &str = "example.com/log\n3\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n";

    fn log_key() -> (ed25519_dalek::SigningKey, NoteVerifier) {
        let sk = ed25519_dalek::SigningKey::from_bytes(&[1; 32]);
        let vk = NoteVerifier {
            name: "example.com/log".into(),
            kind: TYPE_ED25519,
            key: sk.verifying_key(),
        };
        (sk, vk)
    }

    /// The note `TEXT` signed by the log and cosigned by the witnesses `cosigners`.
    fn note(cosigners: &[u8]) -> String {
        use base64::Engine as _;
        use ed25519_dalek::Signer as _;
        let (sk, vk) = log_key();
        let mut blob = vk.key_id().to_vec();
        blob.extend_from_slice(&sk.sign(TEXT.as_bytes()).to_bytes());
        let mut out = format!(
            "{TEXT}\n\u{2014} example.com/log {}\n",
            base64::engine::general_purpose::STANDARD.encode(blob)
        );
        for w in cosigners {
            out.push_str(&witness(*w).cosign(TEXT, 1_700_000_000));
        }
        out
    }

    /// The spec's example shape: two groups of three, 2-of-X and any-of-Y, both required.
    fn example() -> String {
        let w = |n: u8| witness(n).cosigner().vkey();
        format!(
            "# example\nlog {}\n\nwitness X1 {}\nwitness X2 {}\nwitness X3 {}\n\
             group X-witnesses 2 X1 X2 X3\n\twitness Y1 {} https://y1.example/\n\
             witness Y2 {}\nwitness Y3 {}\ngroup Y-witnesses any Y1 Y2 Y3\n\
             group X-and-Y all X-witnesses Y-witnesses\nquorum X-and-Y\n",
            log_key().1.vkey(),
            w(1),
            w(2),
            w(3),
            w(4),
            w(5),
            w(6)
        )
    }

    #[test]
    fn the_specs_example_quorum_is_evaluated_by_groups() {
        let policy = Policy::parse(example().as_bytes()).unwrap();
        assert_eq!(
            policy.check_log(&note(&[])).map(|l| l.name.as_str()),
            Ok("example.com/log")
        );
        for (cosigners, met) in [
            (&[][..], false),
            (&[1, 2][..], false),   // X only
            (&[1, 4][..], false),   // one X
            (&[1, 2, 4][..], true), // 2 X and 1 Y
            (&[2, 3, 5, 6][..], true),
            (&[4, 5, 6][..], false), // Y only
        ] {
            let w = policy.witnessing(&note(cosigners)).unwrap();
            assert_eq!(w.quorum_met, met, "{cosigners:?}");
            assert_eq!(w.cosigned.len(), cosigners.len());
        }
    }

    #[test]
    fn quorum_none_and_a_single_witness() {
        let none = Policy::parse(b"quorum none\n").unwrap();
        assert!(none.needs_no_witness());
        assert!(none.witnessing(&note(&[])).unwrap().quorum_met);
        // No log listed: check_log accepts nothing (the caller knows the log otherwise).
        assert!(none.check_log(&note(&[])).is_err());
        let one = format!("witness a {}\nquorum a", witness(1).cosigner().vkey());
        let one = Policy::parse(one.as_bytes()).unwrap();
        assert!(!one.witnessing(&note(&[2])).unwrap().quorum_met);
        assert!(one.witnessing(&note(&[1])).unwrap().quorum_met);
    }

    #[test]
    fn a_checkpoint_of_another_origin_or_key_is_refused() {
        let other = NoteVerifier {
            name: "example.com/log".into(),
            kind: TYPE_ED25519,
            key: ed25519_dalek::SigningKey::from_bytes(&[2; 32]).verifying_key(),
        };
        let policy =
            Policy::parse(format!("log {}\nquorum none\n", other.vkey()).as_bytes()).unwrap();
        assert!(matches!(
            policy.check_log(&note(&[])),
            Err(CheckpointError::NotSigned { .. })
        ));
    }

    #[test]
    fn malformed_policies_name_their_line() {
        let w1 = witness(1).cosigner().vkey();
        let w2 = witness(2).cosigner().vkey();
        let log = log_key().1.vkey();
        let cases: Vec<(String, usize)> = vec![
            ("".into(), 1),                                             // no quorum
            ("quorum none\nquorum none\n".into(), 2),                   // two quorums
            ("quorum a\n".into(), 1),                                   // undefined
            (format!("witness a {w1}\nwitness a {w2}\nquorum a"), 2),   // a name twice
            (format!("witness a {w1}\nwitness b {w1}\nquorum a"), 2),   // a key twice
            (format!("log {log}\nlog {log}\nquorum none"), 2),          // a log twice
            (format!("witness none {w1}\nquorum none"), 1),             // the reserved name
            (format!("witness a {w1}\ngroup g 2 a\nquorum g"), 2),      // k > n
            (format!("witness a {w1}\ngroup g 0 a\nquorum g"), 2),      // k = 0
            (format!("witness a {w1}\ngroup g any a a\nquorum g"), 2),  // a member twice
            (format!("group g any a\nwitness a {w1}\nquorum g"), 1),    // a forward reference
            (format!("witness a {w1}\ngroup g any\nquorum g"), 2),      // no member
            (format!("witness a {w1}\ngroup g any none\nquorum g"), 2), // none as a member
            (format!("log {w1}\nquorum none"), 1),                      // a witness key as a log
            (format!("witness a {log}\nquorum none"), 1),               // a log key as a witness
            ("quorum none\nfrobnicate\n".into(), 2),                    // unknown keyword
            ("quorum none\r\n".into(), 1),                              // a control character
            ("quorum none extra\n".into(), 1),                          // too many items
        ];
        for (text, line) in cases {
            let e = Policy::parse(text.as_bytes()).unwrap_err();
            assert_eq!(e.line, line, "{text:?}: {e}");
        }
        // An ML-DSA-44 witness key says so.
        let mut data = vec![0x06];
        data.extend([0u8; 1312]);
        use base64::Engine as _;
        let mldsa = format!(
            "w.example+00000000+{}",
            base64::engine::general_purpose::STANDARD.encode(data)
        );
        let e = Policy::parse(format!("witness a {mldsa}\nquorum a").as_bytes()).unwrap_err();
        assert!(e.why.contains("ML-DSA-44"), "{e}");
    }

    proptest::proptest! {
        /// No input panics the parser; an error names a line of the input.
        #[test]
        fn any_bytes_are_answered(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200)) {
            if let Err(e) = Policy::parse(&bytes) {
                proptest::prop_assert!(e.line >= 1 && e.line <= 1 + bytes.iter().filter(|b| **b == b'\n').count());
            }
        }
    }
}
