//! The two ways a scope says no: it cannot be read ([`ScopeError`], at load or parse time) or a
//! call falls outside it ([`OutOfScope`], at decision time).

/// A scope definition that is refused before it can grant anything.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ScopeError {
    /// The JSON (or TOML-derived) document does not have the scope's shape: an unknown member,
    /// an unknown constraint `kind`, a missing member or a wrong type. The message is serde's.
    #[error("scope definition refused: {0}")]
    Syntax(String),
    #[error("a pattern must not be empty")]
    EmptyPattern,
    #[error("pattern is {got} bytes, over the {limit}-byte cap")]
    PatternTooLong { limit: usize, got: usize },
    #[error("pattern {pattern:?} contains control character U+{code_point:04X}")]
    PatternControlChar { pattern: String, code_point: u32 },
    #[error("argument path {path:?} {why}")]
    BadArgPath { path: String, why: &'static str },
    #[error("a {kind} constraint has an empty allowlist (it could never match)")]
    EmptyAllowlist { kind: &'static str },
    #[error("one_of value at index {index} is a float or an integer beyond ±(2^53-1): {value}")]
    InexactValue { index: usize, value: String },
    #[error(
        "{value:?} is not a decimal amount (-?(0|[1-9][0-9]*)(.[0-9]+)?, at most 64 characters)"
    )]
    BadDecimal { value: String },
    #[error("max {value:?} is negative: a maximum amount must be zero or more")]
    NegativeMax { value: String },
    #[error("a prefix constraint has an empty prefix (it would only test presence)")]
    EmptyPrefix,
    #[error("max_uses is {got}: it must be 1 to 2^53-1")]
    BadMaxUses { got: u64 },
    #[error("{value:?} is not a currency code (three ASCII capital letters)")]
    BadCurrency { value: String },
    #[error(
        "expires_at {value:?} is not an RFC 3339 timestamp with an explicit offset (Z or ±hh:mm); \
         a time without an offset is refused rather than read in local time"
    )]
    BadExpiry { value: String },
}

/// Why a call is not covered by a scope. Each variant names the rule that failed and carries the
/// evidence; [`OutOfScope::code`] is a stable snake_case label for logs and metrics.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OutOfScope {
    #[error("agent {agent:?} does not match the pattern {pattern:?}")]
    AgentNotCovered { pattern: String, agent: String },
    #[error("tool {tool:?} does not match the pattern {pattern:?}")]
    ToolNotCovered { pattern: String, tool: String },
    #[error("the scope expired at {expires_at} (the call is at {at})")]
    Expired { expires_at: String, at: String },
    #[error("use {use_number} is beyond max_uses = {max_uses}")]
    UsesExhausted { max_uses: u64, use_number: u64 },
    #[error("the call's arguments are not a JSON object")]
    ArgumentsNotObject,
    #[error("constraint {rule} ({kind}) requires the argument {arg}, which is absent")]
    ArgumentMissing {
        rule: usize,
        kind: &'static str,
        arg: String,
    },
    #[error("constraint {rule} (one_of): {arg} = {got} is not in the allowlist")]
    ValueNotAllowed {
        rule: usize,
        arg: String,
        got: String,
    },
    #[error("constraint {rule} ({kind}): {arg} is {got}, not a string")]
    NotAString {
        rule: usize,
        kind: &'static str,
        arg: String,
        got: String,
    },
    #[error("constraint {rule} (prefix): {arg} = {got:?} does not start with {prefix:?}")]
    PrefixMismatch {
        rule: usize,
        arg: String,
        prefix: String,
        got: String,
    },
    #[error(
        "constraint {rule} (max): {arg} = {got} is not an amount (a decimal string or a JSON integer)"
    )]
    NotAnAmount {
        rule: usize,
        arg: String,
        got: String,
    },
    #[error("constraint {rule} (max): {arg} = {got} is negative; only 0 to {max} is covered")]
    NegativeAmount {
        rule: usize,
        arg: String,
        max: String,
        got: String,
    },
    #[error("constraint {rule} (max): {arg} = {got} is above the maximum {max}")]
    AboveMaximum {
        rule: usize,
        arg: String,
        max: String,
        got: String,
    },
    #[error("constraint {rule} (currency): {arg} = {got:?} is not one of {allowed:?}")]
    CurrencyNotAllowed {
        rule: usize,
        arg: String,
        allowed: Vec<String>,
        got: String,
    },
}

impl OutOfScope {
    /// A stable, low-cardinality label for the failed rule.
    pub fn code(&self) -> &'static str {
        match self {
            Self::AgentNotCovered { .. } => "agent_not_covered",
            Self::ToolNotCovered { .. } => "tool_not_covered",
            Self::Expired { .. } => "expired",
            Self::UsesExhausted { .. } => "uses_exhausted",
            Self::ArgumentsNotObject => "arguments_not_object",
            Self::ArgumentMissing { .. } => "argument_missing",
            Self::ValueNotAllowed { .. } => "value_not_allowed",
            Self::NotAString { .. } => "not_a_string",
            Self::PrefixMismatch { .. } => "prefix_mismatch",
            Self::NotAnAmount { .. } => "not_an_amount",
            Self::NegativeAmount { .. } => "negative_amount",
            Self::AboveMaximum { .. } => "above_maximum",
            Self::CurrencyNotAllowed { .. } => "currency_not_allowed",
        }
    }

    /// The argument path the failed rule reads, when the failure is about an argument.
    pub fn arg(&self) -> Option<&str> {
        match self {
            Self::ArgumentMissing { arg, .. }
            | Self::ValueNotAllowed { arg, .. }
            | Self::NotAString { arg, .. }
            | Self::PrefixMismatch { arg, .. }
            | Self::NotAnAmount { arg, .. }
            | Self::NegativeAmount { arg, .. }
            | Self::AboveMaximum { arg, .. }
            | Self::CurrencyNotAllowed { arg, .. } => Some(arg),
            _ => None,
        }
    }
}
