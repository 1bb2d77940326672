//! Scopes: the bounded authority a standing permission grants.
//!
//! A [`Scope`] says which agent may call which tool with which arguments, until when, and how
//! many times. Operator preauthorizations (service config) and approver-signed standing grants
//! share this one language, so a rule means the same thing wherever it is written. It is pure
//! data plus [`Scope::covers`]: no I/O, no clock (the caller passes the time), no panics.
//!
//! The constraint kinds are closed: `one_of` (an allowlist of JSON values), `prefix` (a string
//! prefix), `path` (a file path inside a directory, compared name by name: [`NormalPath`]), `max`
//! (an exact decimal maximum for an amount) and `currency` (an allowlist of currency codes). An
//! unknown kind or member is refused when the scope is parsed, never ignored. A `prefix` holding
//! `/` or `\` is refused too: a string prefix is unsound for paths (and for anything else built
//! of `/`-separated names), and reading it as a path would be guessing what its author meant.
//! Every constraint names one argument by JSON Pointer and requires it to be present: an absent
//! argument never matches, even where `null` is allowed, because an omitted authority-bearing
//! field must not satisfy policy by accident. All constraints must hold (they are a conjunction).
//!
//! A standing grant adds [`Calls`] beside its scope: the exact call profile, MCP server and
//! gateways it covers (calls.rs), which agent and tool patterns alone cannot tell apart.
//!
//! The serialized form is deterministic (members in a fixed order, `expires_at` re-formatted from
//! its parsed value) and [`Scope::to_jcs`] gives the bytes a signer or a digest covers.

mod amount;
mod calls;
mod error;
mod file_path;
mod path;
mod pattern;
#[cfg(test)]
mod tests;

pub use amount::{Amount, MAX_DECIMAL_CHARS, MaxAmount};
pub use calls::{Calls, ExactName, Gateways, MAX_GATEWAY_BYTES, MAX_GATEWAYS, MAX_NAME_BYTES};
pub use error::{OutOfScope, ScopeError};
pub use file_path::{MAX_FILE_PATH_BYTES, NormalPath, PathRefusal, PathUnder};
pub use path::{ArgPath, MAX_PATH_BYTES, MAX_PATH_DEPTH};
pub use pattern::{MAX_PATTERN_BYTES, Pattern};

use crate::canon::jcs;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use sha2::{Digest, Sha256};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// The largest integer JCS (and every JSON implementation) represents exactly.
const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// A bounded standing permission: who, which tool, which arguments, until when, how often.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scope {
    /// Which agent ids are covered.
    pub agent: Pattern,
    /// Which tool names are covered.
    pub tool: Pattern,
    /// Rules on named arguments; all must hold. Empty: any arguments.
    #[serde(default)]
    pub constraints: Vec<Constraint>,
    /// The first instant the scope no longer covers (exclusive end).
    pub expires_at: Expiry,
    /// How many calls the scope may approve in total. Counted by whoever stores the uses.
    pub max_uses: MaxUses,
}

impl Scope {
    /// Parse a scope from JSON, refusing unknown members and constraint kinds.
    pub fn from_json(raw: &[u8]) -> Result<Self, ScopeError> {
        serde_json::from_slice(raw).map_err(|e| ScopeError::Syntax(e.to_string()))
    }

    /// Parse a scope from an already-decoded value (e.g. a table of a TOML config).
    pub fn from_value(value: Value) -> Result<Self, ScopeError> {
        serde_json::from_value(value).map_err(|e| ScopeError::Syntax(e.to_string()))
    }

    /// Whether a call by `agent` to `tool` with `args`, at time `at`, is inside the scope.
    /// The use count is not checked here (see [`Scope::admits_use`]).
    ///
    /// Checks, in order: agent pattern, tool pattern, expiry, the arguments are an object, then
    /// each constraint in the order written. The first failure is returned.
    pub fn covers(
        &self,
        agent: &str,
        tool: &str,
        args: &Value,
        at: OffsetDateTime,
    ) -> Result<(), OutOfScope> {
        if !self.agent.matches(agent) {
            return Err(OutOfScope::AgentNotCovered {
                pattern: self.agent.to_string(),
                agent: agent.to_owned(),
            });
        }
        if !self.tool.matches(tool) {
            return Err(OutOfScope::ToolNotCovered {
                pattern: self.tool.to_string(),
                tool: tool.to_owned(),
            });
        }
        if at >= self.expires_at.instant() {
            return Err(OutOfScope::Expired {
                expires_at: self.expires_at.to_string(),
                at: format_instant(at),
            });
        }
        if !args.is_object() {
            return Err(OutOfScope::ArgumentsNotObject);
        }
        for (rule, constraint) in self.constraints.iter().enumerate() {
            constraint.check(rule, args)?;
        }
        Ok(())
    }

    /// Whether the `use_number`-th use (1-based) is within `max_uses`.
    pub fn admits_use(&self, use_number: u64) -> Result<(), OutOfScope> {
        if use_number == 0 || use_number > self.max_uses.get() {
            return Err(OutOfScope::UsesExhausted {
                max_uses: self.max_uses.get(),
                use_number,
            });
        }
        Ok(())
    }

    /// The RFC 8785 (JCS) bytes of the serialized scope: what a signature or a digest covers.
    pub fn to_jcs(&self) -> Result<Vec<u8>, ScopeError> {
        let value = serde_json::to_value(self).map_err(|e| ScopeError::Syntax(e.to_string()))?;
        jcs::to_vec(&value).map_err(|e| ScopeError::Syntax(e.to_string()))
    }

    /// SHA-256 over [`Scope::to_jcs`].
    pub fn digest(&self) -> Result<[u8; 32], ScopeError> {
        Ok(Sha256::digest(self.to_jcs()?).into())
    }
}

/// One rule on a named argument. The `kind` member selects the rule; the set is closed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
#[non_exhaustive]
pub enum Constraint {
    /// The argument equals one of `values` (JSON equality; integers and strings compare
    /// exactly, `1` is not `"1"`; `null` matches only an explicit `null`).
    OneOf {
        /// The argument the rule reads, by path into the call's arguments.
        arg: ArgPath,
        /// The allowed values.
        values: AllowedValues,
    },
    /// The argument is a string starting with `prefix` (compared code point by code point).
    Prefix {
        /// The argument the rule reads, by path into the call's arguments.
        arg: ArgPath,
        /// The required prefix; never empty, never holding `/` or `\`.
        prefix: PrefixText,
    },
    /// The argument is an absolute file path that is `under` or inside it, compared name by name
    /// after the reading of [`NormalPath`] (which refuses `..`, `\`, `%` and control
    /// characters rather than guess how a tool reads them).
    Path {
        /// The argument the rule reads, by path into the call's arguments.
        arg: ArgPath,
        /// The directory; written in its normal form.
        under: PathUnder,
    },
    /// The argument is an amount from 0 to `max` inclusive, compared exactly (see [`Amount`]).
    Max {
        /// The argument the rule reads, by path into the call's arguments.
        arg: ArgPath,
        /// The largest amount covered.
        max: MaxAmount,
    },
    /// The argument is a currency code in `allowed`.
    Currency {
        /// The argument the rule reads, by path into the call's arguments.
        arg: ArgPath,
        /// The allowed currency codes.
        allowed: CurrencyList,
    },
}

impl Constraint {
    /// The `kind` spelling.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::OneOf { .. } => "one_of",
            Self::Prefix { .. } => "prefix",
            Self::Path { .. } => "path",
            Self::Max { .. } => "max",
            Self::Currency { .. } => "currency",
        }
    }

    /// The argument the rule reads.
    pub fn arg(&self) -> &ArgPath {
        match self {
            Self::OneOf { arg, .. }
            | Self::Prefix { arg, .. }
            | Self::Path { arg, .. }
            | Self::Max { arg, .. }
            | Self::Currency { arg, .. } => arg,
        }
    }

    fn check(&self, rule: usize, args: &Value) -> Result<(), OutOfScope> {
        let arg = self.arg().to_string();
        // Presence first: absence never matches, whatever the rule would say about `null`.
        let Some(value) = self.arg().resolve(args) else {
            return Err(OutOfScope::ArgumentMissing {
                rule,
                kind: self.kind(),
                arg,
            });
        };
        match self {
            Self::OneOf { values, .. } => {
                if values.0.iter().any(|v| v == value) {
                    return Ok(());
                }
                Err(OutOfScope::ValueNotAllowed {
                    rule,
                    arg,
                    got: excerpt_json(value),
                })
            }
            Self::Prefix { prefix, .. } => {
                let got = self.string_arg(rule, value)?;
                if got.starts_with(prefix.as_str()) {
                    return Ok(());
                }
                Err(OutOfScope::PrefixMismatch {
                    rule,
                    arg,
                    prefix: prefix.as_str().to_owned(),
                    got: amount::excerpt(got),
                })
            }
            Self::Path { under, .. } => {
                let got = self.string_arg(rule, value)?;
                let path = NormalPath::parse(got).map_err(|why| OutOfScope::PathRefused {
                    rule,
                    arg: arg.clone(),
                    got: excerpt_path(got),
                    why,
                })?;
                if path.is_within(under.path()) {
                    return Ok(());
                }
                Err(OutOfScope::PathOutside {
                    rule,
                    arg,
                    under: under.as_str().to_owned(),
                    got: excerpt_path(&path.to_string()),
                })
            }
            Self::Max { max, .. } => {
                let Some(amount) = Amount::from_json(value) else {
                    return Err(OutOfScope::NotAnAmount {
                        rule,
                        arg,
                        got: excerpt_json(value),
                    });
                };
                // A maximum bounds a quantity; a negative amount is another effect (a reversal,
                // a debit the other way), not a small one.
                if amount.is_negative() {
                    return Err(OutOfScope::NegativeAmount {
                        rule,
                        arg,
                        max: max.amount().to_string(),
                        got: amount.to_string(),
                    });
                }
                if &amount > max.amount() {
                    return Err(OutOfScope::AboveMaximum {
                        rule,
                        arg,
                        max: max.amount().to_string(),
                        got: amount.to_string(),
                    });
                }
                Ok(())
            }
            Self::Currency { allowed, .. } => {
                let got = self.string_arg(rule, value)?;
                if allowed.0.iter().any(|c| c.0 == got) {
                    return Ok(());
                }
                Err(OutOfScope::CurrencyNotAllowed {
                    rule,
                    arg,
                    allowed: allowed.0.iter().map(|c| c.0.clone()).collect(),
                    got: amount::excerpt(got),
                })
            }
        }
    }

    fn string_arg<'v>(&self, rule: usize, value: &'v Value) -> Result<&'v str, OutOfScope> {
        value.as_str().ok_or_else(|| OutOfScope::NotAString {
            rule,
            kind: self.kind(),
            arg: self.arg().to_string(),
            got: excerpt_json(value),
        })
    }
}

/// The allowlist of a `one_of` rule: at least one value, no floats, integers within ±(2^53-1).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Vec<Value>", into = "Vec<Value>")]
pub struct AllowedValues(Vec<Value>);

impl AllowedValues {
    /// The allowed values, in the order written.
    pub fn values(&self) -> &[Value] {
        &self.0
    }
}

impl TryFrom<Vec<Value>> for AllowedValues {
    type Error = ScopeError;
    fn try_from(values: Vec<Value>) -> Result<Self, Self::Error> {
        if values.is_empty() {
            return Err(ScopeError::EmptyAllowlist { kind: "one_of" });
        }
        for (index, v) in values.iter().enumerate() {
            if !is_exact(v) {
                return Err(ScopeError::InexactValue {
                    index,
                    value: excerpt_json(v),
                });
            }
        }
        Ok(Self(values))
    }
}

impl From<AllowedValues> for Vec<Value> {
    fn from(a: AllowedValues) -> Self {
        a.0
    }
}

/// Whether every number inside `v` is an integer JCS writes exactly.
fn is_exact(v: &Value) -> bool {
    match v {
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => i.unsigned_abs() <= MAX_SAFE_INTEGER,
            (None, Some(u)) => u <= MAX_SAFE_INTEGER,
            (None, None) => false,
        },
        Value::Array(items) => items.iter().all(is_exact),
        Value::Object(map) => map.values().all(is_exact),
        _ => true,
    }
}

/// The text of a `prefix` rule: not empty, and without `/` or `\`.
///
/// A prefix with a separator in it is a rule about names under a directory (a file path, a URL,
/// a ref), and a string prefix admits `/srv/data/../../etc` under `/srv/data/` and `/srv/data2`
/// under `/srv/data`. The rule for paths is `path`; other hierarchies have no rule but `one_of`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct PrefixText(String);

impl PrefixText {
    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for PrefixText {
    type Error = ScopeError;
    fn try_from(text: String) -> Result<Self, Self::Error> {
        if text.is_empty() {
            return Err(ScopeError::EmptyPrefix);
        }
        if text.contains(['/', '\\']) {
            return Err(ScopeError::SeparatorInPrefix {
                prefix: excerpt_path(&text),
            });
        }
        Ok(Self(text))
    }
}

impl From<PrefixText> for String {
    fn from(t: PrefixText) -> Self {
        t.0
    }
}

/// A currency code: exactly three ASCII capital letters (ISO 4217's shape).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct CurrencyCode(String);

impl TryFrom<String> for CurrencyCode {
    type Error = ScopeError;
    fn try_from(text: String) -> Result<Self, Self::Error> {
        if text.len() == 3 && text.bytes().all(|b| b.is_ascii_uppercase()) {
            return Ok(Self(text));
        }
        Err(ScopeError::BadCurrency {
            value: amount::excerpt(&text),
        })
    }
}

impl From<CurrencyCode> for String {
    fn from(c: CurrencyCode) -> Self {
        c.0
    }
}

/// The allowlist of a `currency` rule: at least one code.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Vec<CurrencyCode>", into = "Vec<CurrencyCode>")]
pub struct CurrencyList(Vec<CurrencyCode>);

impl CurrencyList {
    /// The codes, in the order written.
    pub fn codes(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|c| c.0.as_str())
    }
}

impl TryFrom<Vec<CurrencyCode>> for CurrencyList {
    type Error = ScopeError;
    fn try_from(codes: Vec<CurrencyCode>) -> Result<Self, Self::Error> {
        if codes.is_empty() {
            return Err(ScopeError::EmptyAllowlist { kind: "currency" });
        }
        Ok(Self(codes))
    }
}

impl From<CurrencyList> for Vec<CurrencyCode> {
    fn from(l: CurrencyList) -> Self {
        l.0
    }
}

/// `max_uses`: 1 to 2^53-1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "u64", into = "u64")]
pub struct MaxUses(u64);

impl MaxUses {
    /// Validate a count.
    pub fn new(n: u64) -> Result<Self, ScopeError> {
        if n == 0 || n > MAX_SAFE_INTEGER {
            return Err(ScopeError::BadMaxUses { got: n });
        }
        Ok(Self(n))
    }

    /// The count.
    pub fn get(self) -> u64 {
        self.0
    }
}

impl TryFrom<u64> for MaxUses {
    type Error = ScopeError;
    fn try_from(n: u64) -> Result<Self, Self::Error> {
        Self::new(n)
    }
}

impl From<MaxUses> for u64 {
    fn from(m: MaxUses) -> Self {
        m.0
    }
}

/// An absolute expiry instant, written in RFC 3339 with an explicit offset.
///
/// RFC 3339 requires an offset, so `2026-12-31T00:00:00` (a "local" time) is refused rather than
/// read in whatever zone the host is in. The serialized form is the parsed instant re-formatted
/// with the offset as written (`+00:00` becomes `Z`), so it is one spelling per value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expiry {
    at: OffsetDateTime,
    text: String,
}

impl Expiry {
    /// Parse an RFC 3339 timestamp with an explicit offset.
    pub fn parse(text: &str) -> Result<Self, ScopeError> {
        let bad = || ScopeError::BadExpiry {
            value: amount::excerpt(text),
        };
        let at = OffsetDateTime::parse(text, &Rfc3339).map_err(|_| bad())?;
        let text = at.format(&Rfc3339).map_err(|_| bad())?;
        Ok(Self { at, text })
    }

    /// The instant.
    pub fn instant(&self) -> OffsetDateTime {
        self.at
    }

    /// The normalized RFC 3339 text.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl std::fmt::Display for Expiry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl Serialize for Expiry {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for Expiry {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Self::parse(&text).map_err(serde::de::Error::custom)
    }
}

fn format_instant(at: OffsetDateTime) -> String {
    at.format(&Rfc3339)
        .unwrap_or_else(|_| format!("{} seconds since the epoch", at.unix_timestamp()))
}

/// A path for an error message: its first 256 characters (messages print it with `{:?}`, which
/// escapes control characters).
fn excerpt_path(text: &str) -> String {
    let mut cut: String = text.chars().take(MAX_PATH_BYTES).collect();
    if cut.len() < text.len() {
        cut.push('…');
    }
    cut
}

/// A short rendering of an untrusted JSON value for an error message.
fn excerpt_json(v: &Value) -> String {
    let text = v.to_string();
    if text.chars().count() <= MAX_DECIMAL_CHARS {
        return text;
    }
    let mut cut: String = text.chars().take(MAX_DECIMAL_CHARS).collect();
    cut.push('…');
    cut
}
