//! The `[[agents]]` of `countersign mcp http`: who is calling, known by the bearer credential
//! each agent presents (never by anything in its messages).

use serde::Deserialize;
use std::path::PathBuf;

/// One `[[agents]]` entry: an agent id and exactly one way to know its bearer credential.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentEntry {
    /// The agent's identity, signed with every held call.
    pub id: String,
    /// The bearer token itself (at least 16 characters).
    #[serde(default)]
    pub token: Option<String>,
    /// A file holding the token (so the configuration holds no secret).
    #[serde(default)]
    pub token_file: Option<PathBuf>,
    /// The token's SHA-256, 64 hex digits (`printf %s "$TOKEN" | sha256sum`): the interposer
    /// never needs the token itself.
    #[serde(default)]
    pub token_sha256: Option<String>,
}

impl std::fmt::Debug for AgentEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentEntry")
            .field("id", &self.id)
            .field("token", &self.token.as_ref().map(|_| "***"))
            .field("token_file", &self.token_file)
            .field("token_sha256", &self.token_sha256)
            .finish()
    }
}

/// An `[[agents]]` list that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum AgentsError {
    #[error(
        "HTTP mode needs at least one [[agents]] entry in --config (id, and token, token_file or token_sha256)"
    )]
    NoAgents,
    #[error("an [[agents]] entry has an empty id")]
    EmptyId,
    #[error("agent {0:?}: give exactly one of token, token_file, token_sha256")]
    Credential(String),
    #[error("agent {0:?}: a bearer token needs at least {MIN_TOKEN_LEN} characters")]
    Short(String),
    #[error("agent {0:?}: token_sha256 must be 64 hex digits")]
    Hash(String),
    #[error("agent {id:?}: reading {path}: {source}")]
    Read {
        id: String,
        path: String,
        source: std::io::Error,
    },
    #[error("agent id {0:?} is listed twice")]
    DuplicateId(String),
    #[error("agents {0:?} and {1:?} have the same token")]
    DuplicateToken(String, String),
}

/// Shortest bearer token accepted (a guessable token would let anyone act as the agent).
pub const MIN_TOKEN_LEN: usize = 16;

/// The agents and the SHA-256 of their tokens (the tokens themselves are not kept).
#[derive(Debug, Clone)]
pub struct Agents {
    known: Vec<(String, [u8; 32])>,
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    let d = ring::digest::digest(&ring::digest::SHA256, bytes);
    let mut out = [0; 32];
    out.copy_from_slice(d.as_ref());
    out
}

/// Equal without an early exit (only digests are compared, so a timing difference could at most
/// reveal a digest prefix, never the token; still, no shortcut).
fn same_digest(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn hex32(text: &str) -> Option<[u8; 32]> {
    let text = text.trim();
    if text.len() != 64 || !text.is_ascii() {
        return None;
    }
    let mut out = [0; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

impl Agents {
    /// Check the entries and read the token files.
    pub fn from_entries(entries: &[AgentEntry]) -> Result<Self, AgentsError> {
        if entries.is_empty() {
            return Err(AgentsError::NoAgents);
        }
        let mut known: Vec<(String, [u8; 32])> = Vec::with_capacity(entries.len());
        for e in entries {
            if e.id.is_empty() {
                return Err(AgentsError::EmptyId);
            }
            let token = |t: &str| {
                // A trailing newline in a file is not part of the token.
                let t = t.trim_end_matches(['\r', '\n']);
                if t.chars().count() < MIN_TOKEN_LEN {
                    Err(AgentsError::Short(e.id.clone()))
                } else {
                    Ok(sha256(t.as_bytes()))
                }
            };
            let digest = match (&e.token, &e.token_file, &e.token_sha256) {
                (Some(t), None, None) => token(t)?,
                (None, Some(path), None) => {
                    let text =
                        std::fs::read_to_string(path).map_err(|source| AgentsError::Read {
                            id: e.id.clone(),
                            path: path.display().to_string(),
                            source,
                        })?;
                    token(&text)?
                }
                (None, None, Some(h)) => hex32(h).ok_or_else(|| AgentsError::Hash(e.id.clone()))?,
                _ => return Err(AgentsError::Credential(e.id.clone())),
            };
            if let Some((other, _)) = known.iter().find(|(id, _)| *id == e.id) {
                return Err(AgentsError::DuplicateId(other.clone()));
            }
            if let Some((other, _)) = known.iter().find(|(_, d)| same_digest(d, &digest)) {
                return Err(AgentsError::DuplicateToken(other.clone(), e.id.clone()));
            }
            known.push((e.id.clone(), digest));
        }
        Ok(Self { known })
    }

    /// The agent whose token `bearer` is, if any. Every entry is compared.
    pub fn identify(&self, bearer: &str) -> Option<&str> {
        let presented = sha256(bearer.as_bytes());
        let mut found = None;
        for (id, digest) in &self.known {
            if same_digest(digest, &presented) {
                found = Some(id.as_str());
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    fn entry(id: &str, token: &str) -> AgentEntry {
        AgentEntry {
            id: id.into(),
            token: Some(token.into()),
            token_file: None,
            token_sha256: None,
        }
    }

    #[test]
    fn agents_are_known_by_their_token_or_its_hash() {
        let hash: String = sha256(b"second-agent-token-xyz")
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let agents = Agents::from_entries(&[
            entry("a", "first-agent-token-abc"),
            AgentEntry {
                id: "b".into(),
                token: None,
                token_file: None,
                token_sha256: Some(hash),
            },
        ])
        .unwrap();
        assert_eq!(agents.identify("first-agent-token-abc"), Some("a"));
        assert_eq!(agents.identify("second-agent-token-xyz"), Some("b"));
        assert_eq!(agents.identify("first-agent-token-ab"), None);
        assert_eq!(agents.identify(""), None);
    }

    #[test]
    fn weak_duplicate_or_ambiguous_credentials_are_refused() {
        assert!(matches!(
            Agents::from_entries(&[]),
            Err(AgentsError::NoAgents)
        ));
        assert!(matches!(
            Agents::from_entries(&[entry("a", "short")]),
            Err(AgentsError::Short(_))
        ));
        assert!(matches!(
            Agents::from_entries(&[
                entry("a", "same-token-for-both"),
                entry("b", "same-token-for-both")
            ]),
            Err(AgentsError::DuplicateToken(..))
        ));
        assert!(matches!(
            Agents::from_entries(&[
                entry("a", "one-token-for-agent-a"),
                entry("a", "two-token-for-agent-a")
            ]),
            Err(AgentsError::DuplicateId(_))
        ));
        let mut both = entry("a", "one-token-for-agent-a");
        both.token_sha256 = Some("00".repeat(32));
        assert!(matches!(
            Agents::from_entries(&[both]),
            Err(AgentsError::Credential(_))
        ));
    }
}
