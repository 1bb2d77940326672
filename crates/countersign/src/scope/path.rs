//! Which argument a constraint reads: a JSON Pointer (RFC 6901) into the call's arguments.
//!
//! `/amount` is the top-level argument `amount`; `/to/iban` reads `iban` inside the object `to`;
//! `/items/0` the first element of the array `items`. `~1` spells `/` and `~0` spells `~` inside a
//! name. The pointer is relative to the arguments object (`params` of a tool call), never to the
//! whole request, so a constraint cannot be aimed at the agent or tool fields by mistake.

use super::error::ScopeError;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt;

/// The longest pointer accepted, in bytes.
pub const MAX_PATH_BYTES: usize = 256;
/// The most reference tokens a pointer may have.
pub const MAX_PATH_DEPTH: usize = 16;

/// A validated pointer to one argument.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ArgPath {
    text: String,
    tokens: Vec<String>,
}

impl ArgPath {
    /// Parse a pointer: starts with `/`, at most 16 non-empty tokens, valid `~` escapes.
    pub fn new(text: &str) -> Result<Self, ScopeError> {
        let bad = |why: &'static str| ScopeError::BadArgPath {
            path: text.chars().take(MAX_PATH_BYTES).collect(),
            why,
        };
        if text.len() > MAX_PATH_BYTES {
            return Err(bad("longer than 256 bytes"));
        }
        let Some(rest) = text.strip_prefix('/') else {
            return Err(bad("must start with '/'"));
        };
        if text.chars().any(char::is_control) {
            return Err(bad("contains a control character"));
        }
        let mut tokens = Vec::new();
        for raw in rest.split('/') {
            if raw.is_empty() {
                return Err(bad("has an empty name"));
            }
            tokens.push(unescape(raw).ok_or_else(|| bad("has a '~' not followed by 0 or 1"))?);
        }
        if tokens.len() > MAX_PATH_DEPTH {
            return Err(bad("deeper than 16 names"));
        }
        Ok(Self {
            text: text.to_owned(),
            tokens,
        })
    }

    /// The pointer as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The value the pointer names in `args`, or `None` when it is absent. An explicit `null`
    /// is `Some(Value::Null)`: absence and `null` are different answers.
    pub fn resolve<'v>(&self, args: &'v Value) -> Option<&'v Value> {
        let mut at = args;
        for token in &self.tokens {
            at = match at {
                Value::Object(map) => map.get(token)?,
                Value::Array(items) => items.get(array_index(token)?)?,
                _ => return None,
            };
        }
        Some(at)
    }
}

/// RFC 6901 array index: `0` or digits without a leading zero.
fn array_index(token: &str) -> Option<usize> {
    if token.is_empty()
        || !token.bytes().all(|b| b.is_ascii_digit())
        || (token.len() > 1 && token.starts_with('0'))
    {
        return None;
    }
    token.parse().ok()
}

fn unescape(raw: &str) -> Option<String> {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c == '~' {
            match chars.next() {
                Some('0') => out.push('~'),
                Some('1') => out.push('/'),
                _ => return None,
            }
        } else {
            out.push(c);
        }
    }
    Some(out)
}

impl TryFrom<String> for ArgPath {
    type Error = ScopeError;
    fn try_from(text: String) -> Result<Self, Self::Error> {
        Self::new(&text)
    }
}

impl From<ArgPath> for String {
    fn from(p: ArgPath) -> Self {
        p.text
    }
}

impl fmt::Display for ArgPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}
