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
    /// An agent or tool pattern is empty.
    #[error("a pattern must not be empty")]
    EmptyPattern,
    /// A pattern is longer than the cap.
    #[error("pattern is {got} bytes, over the {limit}-byte cap")]
    PatternTooLong {
        /// The cap, in bytes.
        limit: usize,
        /// The length of the pattern, in bytes.
        got: usize,
    },
    /// A pattern holds a control character.
    #[error("pattern {pattern:?} contains control character U+{code_point:04X}")]
    PatternControlChar {
        /// The pattern as written.
        pattern: String,
        /// The control character.
        code_point: u32,
    },
    /// An argument path cannot name an argument.
    #[error("argument path {path:?} {why}")]
    BadArgPath {
        /// The path as written (at most its first 256 characters).
        path: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// An allowlist constraint lists nothing, so it could never match.
    #[error("a {kind} constraint has an empty allowlist (it could never match)")]
    EmptyAllowlist {
        /// The constraint's kind.
        kind: &'static str,
    },
    /// A `one_of` value is a float or an integer beyond ±(2^53-1), which JSON readers need not
    /// agree on.
    #[error("one_of value at index {index} is a float or an integer beyond ±(2^53-1): {value}")]
    InexactValue {
        /// Where the value is in the list, from 0.
        index: usize,
        /// The value as written.
        value: String,
    },
    /// A `max` amount is not a decimal.
    #[error(
        "{value:?} is not a decimal amount (-?(0|[1-9][0-9]*)(.[0-9]+)?, at most 64 characters)"
    )]
    BadDecimal {
        /// The value as written.
        value: String,
    },
    /// A `max` amount is negative.
    #[error("max {value:?} is negative: a maximum amount must be zero or more")]
    NegativeMax {
        /// The value as written.
        value: String,
    },
    /// A `prefix` constraint has an empty prefix, which would only test that the argument is
    /// present.
    #[error("a prefix constraint has an empty prefix (it would only test presence)")]
    EmptyPrefix,
    /// A `prefix` holds `/` or `\`: a string prefix does not bound names under a directory.
    #[error(
        "prefix {prefix:?} contains '/' or '\\': a string prefix admits '..' and sibling names \
         ('/srv/data2' under '/srv/data'); for a file path write {{\"kind\": \"path\", \"under\": ...}}"
    )]
    SeparatorInPrefix {
        /// The prefix as written (at most its first 256 characters).
        prefix: String,
    },
    /// A `path` rule's directory cannot be read as a path.
    #[error("path rule directory {under:?} {why}")]
    BadPathUnder {
        /// The directory as written (at most its first 256 characters).
        under: String,
        /// What is refused in it.
        why: super::PathRefusal,
    },
    /// A `path` rule's directory is not written in its normal form, so the text signed would not
    /// be the directory compared.
    #[error("path rule directory {under:?} is not in its normal form: write {normal:?}")]
    PathUnderNotNormal {
        /// The directory as written (at most its first 256 characters).
        under: String,
        /// Its normal form.
        normal: String,
    },
    /// `max_uses` is 0 or beyond 2^53-1.
    #[error("max_uses is {got}: it must be 1 to 2^53-1")]
    BadMaxUses {
        /// The value given.
        got: u64,
    },
    /// A currency is not three ASCII capital letters.
    #[error("{value:?} is not a currency code (three ASCII capital letters)")]
    BadCurrency {
        /// The value as written.
        value: String,
    },
    /// A grant's profile id or server id is empty, too long or holds a control character.
    #[error("name {name:?} {why}")]
    BadName {
        /// The name as written (at most its first 64 characters).
        name: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// A grant names no gateway, or more than the cap.
    #[error("a grant names {got} gateways: it must name 1 to 64")]
    GatewayCount {
        /// How many it names.
        got: usize,
    },
    /// A gateway name is not 1 to 64 bytes of `A-Z a-z 0-9 . _ -`.
    #[error("{name:?} is not a gateway name (1 to 64 of A-Z a-z 0-9 . _ -)")]
    BadGatewayName {
        /// The name as written (at most its first 64 characters).
        name: String,
    },
    /// A gateway is named twice.
    #[error("gateway {name:?} is named twice")]
    DuplicateGateway {
        /// The repeated name.
        name: String,
    },
    /// `expires_at` is not RFC 3339 with an explicit offset.
    #[error(
        "expires_at {value:?} is not an RFC 3339 timestamp with an explicit offset (Z or ±hh:mm); \
         a time without an offset is refused rather than read in local time"
    )]
    BadExpiry {
        /// The value as written.
        value: String,
    },
}

/// Why a call is not covered by a scope. Each variant names the rule that failed and carries the
/// evidence; [`OutOfScope::code`] is a stable snake_case label for logs and metrics.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OutOfScope {
    /// The call is signed under another profile than the one the grant names.
    #[error("the grant covers calls under {named:?}, not under {profile:?}")]
    ProfileNotCovered {
        /// The profile the grant names.
        named: String,
        /// The call's profile.
        profile: String,
    },
    /// The call goes to another MCP server than the one the grant names (or one of the two
    /// names none).
    #[error("the grant covers calls to server {named:?}, not to {server:?}")]
    ServerNotCovered {
        /// The server the grant names, if any.
        named: Option<String>,
        /// The server the call signs, if any.
        server: Option<String>,
    },
    /// The call comes from a gateway the grant does not name.
    #[error("the grant covers calls of the gateways {gateways:?}, not of {gateway:?}")]
    GatewayNotCovered {
        /// The gateways the grant names.
        gateways: Vec<String>,
        /// The gateway that asked.
        gateway: String,
    },
    /// The calling agent does not match the scope's agent pattern.
    #[error("agent {agent:?} does not match the pattern {pattern:?}")]
    AgentNotCovered {
        /// The pattern the scope grants.
        pattern: String,
        /// The agent that made the call.
        agent: String,
    },
    /// The tool does not match the scope's tool pattern.
    #[error("tool {tool:?} does not match the pattern {pattern:?}")]
    ToolNotCovered {
        /// The pattern the scope grants.
        pattern: String,
        /// The tool called.
        tool: String,
    },
    /// The call is at or after the first instant the scope no longer covers.
    #[error("the scope expired at {expires_at} (the call is at {at})")]
    Expired {
        /// The scope's `expires_at`.
        expires_at: String,
        /// The time of the call.
        at: String,
    },
    /// This call would be a use beyond `max_uses`.
    #[error("use {use_number} is beyond max_uses = {max_uses}")]
    UsesExhausted {
        /// The scope's `max_uses`.
        max_uses: u64,
        /// This call's use, counted from 1.
        use_number: u64,
    },
    /// The call's arguments are not a JSON object, so no constraint can read them.
    #[error("the call's arguments are not a JSON object")]
    ArgumentsNotObject,
    /// A constraint needs an argument the call does not have: absence never matches.
    #[error("constraint {rule} ({kind}) requires the argument {arg}, which is absent")]
    ArgumentMissing {
        /// Which constraint refused, from 0 in the scope's order.
        rule: usize,
        /// The constraint's kind.
        kind: &'static str,
        /// The argument path.
        arg: String,
    },
    /// A `one_of` argument is not in its allowlist.
    #[error("constraint {rule} (one_of): {arg} = {got} is not in the allowlist")]
    ValueNotAllowed {
        /// Which constraint refused, from 0 in the scope's order.
        rule: usize,
        /// The argument path.
        arg: String,
        /// The argument as the call has it.
        got: String,
    },
    /// A `prefix`, `path` or `currency` argument is not a string.
    #[error("constraint {rule} ({kind}): {arg} is {got}, not a string")]
    NotAString {
        /// Which constraint refused, from 0 in the scope's order.
        rule: usize,
        /// The constraint's kind.
        kind: &'static str,
        /// The argument path.
        arg: String,
        /// The argument as the call has it.
        got: String,
    },
    /// A `prefix` argument does not start with the prefix.
    #[error("constraint {rule} (prefix): {arg} = {got:?} does not start with {prefix:?}")]
    PrefixMismatch {
        /// Which constraint refused, from 0 in the scope's order.
        rule: usize,
        /// The argument path.
        arg: String,
        /// The required prefix.
        prefix: String,
        /// The argument as the call has it.
        got: String,
    },
    /// A `path` argument cannot be read as a path without guessing (docs/SPEC.md §14.4).
    #[error("constraint {rule} (path): {arg} = {got:?} {why}")]
    PathRefused {
        /// Which constraint refused, from 0 in the scope's order.
        rule: usize,
        /// The argument path.
        arg: String,
        /// The argument as the call has it (at most its first 256 characters).
        got: String,
        /// What is refused in it.
        why: super::PathRefusal,
    },
    /// A `path` argument, read, is neither the rule's directory nor inside it.
    #[error("constraint {rule} (path): {arg} = {got:?} is not inside {under:?}")]
    PathOutside {
        /// Which constraint refused, from 0 in the scope's order.
        rule: usize,
        /// The argument path.
        arg: String,
        /// The rule's directory.
        under: String,
        /// The argument in its normal form (at most its first 256 characters).
        got: String,
    },
    /// A `max` argument is neither a decimal string nor a JSON integer.
    #[error(
        "constraint {rule} (max): {arg} = {got} is not an amount (a decimal string or a JSON integer)"
    )]
    NotAnAmount {
        /// Which constraint refused, from 0 in the scope's order.
        rule: usize,
        /// The argument path.
        arg: String,
        /// The argument as the call has it.
        got: String,
    },
    /// A `max` argument is negative.
    #[error("constraint {rule} (max): {arg} = {got} is negative; only 0 to {max} is covered")]
    NegativeAmount {
        /// Which constraint refused, from 0 in the scope's order.
        rule: usize,
        /// The argument path.
        arg: String,
        /// The maximum amount.
        max: String,
        /// The argument as the call has it.
        got: String,
    },
    /// A `max` argument is above the maximum.
    #[error("constraint {rule} (max): {arg} = {got} is above the maximum {max}")]
    AboveMaximum {
        /// Which constraint refused, from 0 in the scope's order.
        rule: usize,
        /// The argument path.
        arg: String,
        /// The maximum amount.
        max: String,
        /// The argument as the call has it.
        got: String,
    },
    /// A `currency` argument is not one of the allowed codes.
    #[error("constraint {rule} (currency): {arg} = {got:?} is not one of {allowed:?}")]
    CurrencyNotAllowed {
        /// Which constraint refused, from 0 in the scope's order.
        rule: usize,
        /// The argument path.
        arg: String,
        /// The allowed codes.
        allowed: Vec<String>,
        /// The argument as the call has it.
        got: String,
    },
}

impl OutOfScope {
    /// A stable, low-cardinality label for the failed rule.
    pub fn code(&self) -> &'static str {
        match self {
            Self::ProfileNotCovered { .. } => "profile_not_covered",
            Self::ServerNotCovered { .. } => "server_not_covered",
            Self::GatewayNotCovered { .. } => "gateway_not_covered",
            Self::AgentNotCovered { .. } => "agent_not_covered",
            Self::ToolNotCovered { .. } => "tool_not_covered",
            Self::Expired { .. } => "expired",
            Self::UsesExhausted { .. } => "uses_exhausted",
            Self::ArgumentsNotObject => "arguments_not_object",
            Self::ArgumentMissing { .. } => "argument_missing",
            Self::ValueNotAllowed { .. } => "value_not_allowed",
            Self::NotAString { .. } => "not_a_string",
            Self::PrefixMismatch { .. } => "prefix_mismatch",
            Self::PathRefused { .. } => "path_refused",
            Self::PathOutside { .. } => "path_outside",
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
            | Self::PathRefused { arg, .. }
            | Self::PathOutside { arg, .. }
            | Self::NotAnAmount { arg, .. }
            | Self::NegativeAmount { arg, .. }
            | Self::AboveMaximum { arg, .. }
            | Self::CurrencyNotAllowed { arg, .. } => Some(arg),
            _ => None,
        }
    }
}
