//! Exact decimal amounts for the `max` constraint.
//!
//! Money is never a float here. An amount is either a JSON string in the decimal grammar the
//! payment profile uses (`-?(0|[1-9][0-9]*)(\.[0-9]+)?`, at most 64 characters, no negative zero)
//! or a JSON integer. Anything else — a number with a fraction or an exponent (`12.5`, `1e3`), a
//! string with a `+`, spaces, a leading zero or a comma — is not an amount, and a `max` constraint
//! refuses it. Comparison is on the digits: `"40000"`, `"40000.00"` and `40000` are equal.

use super::error::ScopeError;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::cmp::Ordering;
use std::fmt;

/// The longest decimal string accepted, in characters (the payment profile's bound).
pub const MAX_DECIMAL_CHARS: usize = 64;

/// A parsed decimal number, compared exactly.
#[derive(Clone, Debug)]
pub struct Amount {
    /// The text as written (kept so a scope serializes back to what the operator wrote).
    text: String,
    negative: bool,
    /// Integer digits without leading zeros ("" for zero).
    int: String,
    /// Fraction digits without trailing zeros ("" for none).
    frac: String,
}

impl Amount {
    /// Parse the decimal grammar; `None` when `text` is not in it.
    pub fn parse(text: &str) -> Option<Self> {
        if text.is_empty() || text.len() > MAX_DECIMAL_CHARS {
            return None;
        }
        let (negative, unsigned) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let (int, frac) = match unsigned.split_once('.') {
            Some((i, f)) => (i, Some(f)),
            None => (unsigned, None),
        };
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(int) || (int.len() > 1 && int.starts_with('0')) {
            return None;
        }
        if let Some(f) = frac
            && !digits(f)
        {
            return None;
        }
        let int = int.trim_start_matches('0').to_owned();
        let frac = frac.unwrap_or("").trim_end_matches('0').to_owned();
        if negative && int.is_empty() && frac.is_empty() {
            return None; // negative zero: one value, one spelling
        }
        Some(Self {
            text: text.to_owned(),
            negative,
            int,
            frac,
        })
    }

    /// Read an argument value as an amount: a decimal string or a JSON integer, nothing else.
    pub fn from_json(value: &Value) -> Option<Self> {
        match value {
            Value::String(s) => Self::parse(s),
            // `as_i64`/`as_u64` succeed only for numbers written without fraction or exponent.
            Value::Number(n) => match (n.as_i64(), n.as_u64()) {
                (Some(i), _) => Self::parse(&i.to_string()),
                (None, Some(u)) => Self::parse(&u.to_string()),
                (None, None) => None,
            },
            _ => None,
        }
    }

    /// Whether the amount is below zero.
    pub fn is_negative(&self) -> bool {
        self.negative
    }

    /// The text as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    fn cmp_magnitude(&self, other: &Self) -> Ordering {
        // Without leading zeros, a longer integer part is a larger number; then digit by digit.
        // Fractions without trailing zeros compare lexicographically (".5" > ".49").
        self.int
            .len()
            .cmp(&other.int.len())
            .then_with(|| self.int.cmp(&other.int))
            .then_with(|| self.frac.cmp(&other.frac))
    }
}

impl PartialEq for Amount {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Amount {}

impl PartialOrd for Amount {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Amount {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self.negative, other.negative) {
            (false, false) => self.cmp_magnitude(other),
            (true, true) => other.cmp_magnitude(self),
            (false, true) => Ordering::Greater,
            (true, false) => Ordering::Less,
        }
    }
}

impl fmt::Display for Amount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// The limit of a `max` constraint: a non-negative decimal string.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct MaxAmount(Amount);

impl MaxAmount {
    /// Parse a limit: the decimal grammar, not negative.
    pub fn new(text: &str) -> Result<Self, ScopeError> {
        let amount = Amount::parse(text).ok_or_else(|| ScopeError::BadDecimal {
            value: excerpt(text),
        })?;
        if amount.is_negative() {
            return Err(ScopeError::NegativeMax { value: amount.text });
        }
        Ok(Self(amount))
    }

    /// The limit.
    pub fn amount(&self) -> &Amount {
        &self.0
    }
}

impl TryFrom<String> for MaxAmount {
    type Error = ScopeError;
    fn try_from(text: String) -> Result<Self, Self::Error> {
        Self::new(&text)
    }
}

impl From<MaxAmount> for String {
    fn from(m: MaxAmount) -> Self {
        m.0.text
    }
}

/// At most 64 characters of untrusted text for an error message.
pub(crate) fn excerpt(text: &str) -> String {
    text.chars().take(MAX_DECIMAL_CHARS).collect()
}
