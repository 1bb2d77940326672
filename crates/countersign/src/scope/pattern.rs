//! Agent and tool patterns: literal text with `*` wildcards.
//!
//! The language is deliberately tiny so that an operator and an approver can read a pattern and
//! know exactly what it admits: `*` matches any run of characters (including none and including
//! `.` or `/`), every other character matches itself, case-sensitively. There is no `?`, no
//! character class and no escape, so a pattern cannot match a literal `*` other than by a `*`.
//! `payments.*` admits `payments.transfer` and `payments.` but not `payments`; `*` admits anything.

use super::error::ScopeError;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The longest pattern accepted, in bytes (agent ids and tool names are at most 256 bytes too).
pub const MAX_PATTERN_BYTES: usize = 256;

/// A validated glob over agent ids or tool names.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Pattern(String);

impl Pattern {
    /// Parse a pattern: 1 to 256 bytes, no control characters.
    pub fn new(text: &str) -> Result<Self, ScopeError> {
        if text.is_empty() {
            return Err(ScopeError::EmptyPattern);
        }
        if text.len() > MAX_PATTERN_BYTES {
            return Err(ScopeError::PatternTooLong {
                limit: MAX_PATTERN_BYTES,
                got: text.len(),
            });
        }
        if let Some(c) = text.chars().find(|c| c.is_control()) {
            return Err(ScopeError::PatternControlChar {
                pattern: text.escape_debug().to_string(),
                code_point: u32::from(c),
            });
        }
        Ok(Self(text.to_owned()))
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `candidate` matches the whole pattern.
    ///
    /// Greedy matching with one backtrack point (the last `*` seen): linear in practice, at worst
    /// O(pattern × candidate), and both are bounded to 256 bytes by the service.
    pub fn matches(&self, candidate: &str) -> bool {
        let pat: Vec<char> = self.0.chars().collect();
        let text: Vec<char> = candidate.chars().collect();
        let (mut p, mut t) = (0usize, 0usize);
        // (index in pat just after the last `*`, index in text that star currently absorbs up to)
        let mut backtrack: Option<(usize, usize)> = None;
        while t < text.len() {
            match pat.get(p) {
                Some('*') => {
                    p += 1;
                    backtrack = Some((p, t));
                }
                Some(&c) if text.get(t) == Some(&c) => {
                    p += 1;
                    t += 1;
                }
                _ => match backtrack {
                    // Let the last star absorb one more character and retry from there.
                    Some((star_p, star_t)) => {
                        p = star_p;
                        t = star_t + 1;
                        backtrack = Some((star_p, star_t + 1));
                    }
                    None => return false,
                },
            }
        }
        // The text is used up: only trailing stars may remain in the pattern.
        pat.get(p..)
            .is_some_and(|rest| rest.iter().all(|&c| c == '*'))
    }
}

impl TryFrom<String> for Pattern {
    type Error = ScopeError;
    fn try_from(text: String) -> Result<Self, Self::Error> {
        Self::new(&text)
    }
}

impl From<Pattern> for String {
    fn from(p: Pattern) -> Self {
        p.0
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
