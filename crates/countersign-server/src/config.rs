//! Service configuration: the TOML file `countersign serve --config FILE` reads.
//!
//! Every field has a default so the service starts with no file at all. Defaults fail closed: a
//! tool the file does not mention needs approval, and any enrolled principal may decide it only
//! because no group narrows the set.

use countersign::{AssuranceLevel, NfcMode, Policy, ProfileRegistry};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

mod notify;
pub use notify::{
    ChannelConfig, ChannelKind, EscalationStep, MAX_APPROVAL_SECONDS, MIN_REMINDER_SECONDS,
    NotifyConfig, RouteConfig, SmtpTls,
};

/// The whole configuration file.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// WebAuthn relying party id the approvers' credentials are enrolled for.
    #[serde(default = "default_rp_id")]
    pub rp_id: String,
    /// Origins allowed in clientDataJSON (the approver page's origin). Empty (the default):
    /// `public_url`'s origin, settled by `serve` (see [`crate::address`]).
    #[serde(default)]
    pub origins: Vec<String>,
    /// Base URL used in `redrive_url` and the approver link. Default: the listen address as a
    /// browser opens it, `http://localhost:PORT` for a loopback address (see
    /// [`crate::address::listen_url`]).
    #[serde(default)]
    pub public_url: Option<String>,
    /// A registry document (`{"credentials": [...]}`) imported at startup.
    #[serde(default)]
    pub registry: Option<PathBuf>,
    /// Timeouts.
    #[serde(default)]
    pub timeouts: Timeouts,
    /// Where to POST a notification for each new PENDING approval (reference only, no params):
    /// a generic webhook channel that gets every PENDING approval, kept from before `[notify]`.
    #[serde(default)]
    pub webhook_url: Option<String>,
    /// Named notification channels and which approvals each gets (`[notify]`).
    #[serde(default)]
    pub notify: NotifyConfig,
    /// Approver groups: name to principals.
    #[serde(default)]
    pub groups: BTreeMap<String, Vec<String>>,
    /// The rule for tools that have no `[[tools]]` entry.
    #[serde(default)]
    pub default_tool: ToolRule,
    /// Per-tool rules.
    #[serde(default)]
    pub tools: Vec<ToolRule>,
    /// Enrollment: attestation policy, trusted roots, invite lifetime.
    #[serde(default)]
    pub enrollment: crate::enroll::EnrollmentConfig,
    /// The WebAuthn `hints` the approver page passes to the browser, most preferred first, on
    /// every device. Absent (the default): chosen per request, a phone's own passkey first on
    /// a phone, a security key first elsewhere (see [`crate::hints`]).
    #[serde(default)]
    pub webauthn_hints: Option<Vec<crate::hints::Hint>>,
    /// `normal` (default: survives a killed process) or `full` (also survives power loss, slower).
    #[serde(default)]
    pub durability: Durability,
    /// `sqlite://PATH` or `postgres://…`; default: the embedded SQLite database in the data
    /// directory. Replicas of the service share one PostgreSQL database (and one service key).
    #[serde(default)]
    pub database: Option<String>,
    /// Serve `/v1/registry` and `/v1/credentials` to anyone (default false: only to gateways,
    /// because the registry lists every approver, which is an org chart and a phishing list).
    #[serde(default)]
    pub publish_registry: bool,
    /// The origin line (and note key name) of the signed audit checkpoints. Default: the host
    /// of `public_url` followed by `/countersign/audit`.
    #[serde(default)]
    pub audit_origin: Option<String>,
    /// Bounds on what clients may hold open.
    #[serde(default)]
    pub limits: Limits,
    /// C2SP tlog-witnesses that cosign the audit checkpoints (`[[witnesses]]`).
    #[serde(default)]
    pub witnesses: Vec<WitnessConfig>,
    /// How often, in seconds, a grown log's new checkpoint is sent to the witnesses.
    #[serde(default = "default_witness_interval")]
    pub witness_interval_seconds: u64,
    /// Operator preauthorizations: calls they cover are APPROVED without a human
    /// (see [`crate::preauth`]). Validated as the file is read.
    #[serde(default, deserialize_with = "crate::preauth::deserialize")]
    pub preauthorizations: Vec<crate::preauth::Preauthorization>,
    /// Accept the demo software key (see [`crate::demo`]). Never read from a file (a file that
    /// names it is refused as an unknown key): only `countersign demo` sets it, in code.
    #[serde(skip)]
    pub danger_accept_demo_key: bool,
}

/// One witness: where to send checkpoints and the key its cosignatures must verify under.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WitnessConfig {
    /// The witness's submission prefix (`POST {url}/add-checkpoint`).
    pub url: String,
    /// The witness's C2SP vkey (`name+keyid+base64(0x04 || key)`), as `countersign witness
    /// serve` prints it.
    pub key: String,
}

fn default_witness_interval() -> u64 {
    10
}

/// Bounds on what clients may hold open.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Long polls (`?wait=`) waiting at once; beyond it 429 `too_many_waiters`.
    #[serde(default = "default_long_poll_waiters")]
    pub long_poll_waiters: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            long_poll_waiters: default_long_poll_waiters(),
        }
    }
}

fn default_header_read() -> u64 {
    10
}

fn default_body_read() -> u64 {
    30
}

fn default_long_poll_waiters() -> usize {
    1024
}

/// Timeouts, in seconds.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Timeouts {
    /// How long a request waits for a human before it settles DENIED `expired_unanswered`.
    #[serde(default = "default_approval_ttl")]
    pub approval_seconds: u64,
    /// How long an APPROVED request's grant may be collected after the verdict.
    #[serde(default = "default_grant_ttl")]
    pub grant_seconds: u64,
    /// Upper bound of `?wait=` on the redrive URL.
    #[serde(default = "default_long_poll")]
    pub long_poll_max_seconds: u64,
    /// Lifetime of an approver session after login.
    #[serde(default = "default_session_ttl")]
    pub session_seconds: u64,
    /// Maximum age of an assertion (and lifetime of an issued challenge).
    #[serde(default = "default_max_age")]
    pub assertion_max_age_seconds: u64,
    /// How long a connection may take to deliver a request's complete headers, counted from
    /// when it opened or its previous response went out: a connection that sends nothing (idle,
    /// or idle between keep-alive requests) or dribbles its headers (slowloris) is closed after
    /// it. `countersign serve` only.
    #[serde(default = "default_header_read")]
    pub header_read_seconds: u64,
    /// How long a request's body may take to arrive once its headers have: a client that
    /// dribbles its body is answered 408 `body_timeout` instead of holding a worker until the
    /// body size limit.
    #[serde(default = "default_body_read")]
    pub body_read_seconds: u64,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            approval_seconds: default_approval_ttl(),
            grant_seconds: default_grant_ttl(),
            long_poll_max_seconds: default_long_poll(),
            session_seconds: default_session_ttl(),
            assertion_max_age_seconds: default_max_age(),
            header_read_seconds: default_header_read(),
            body_read_seconds: default_body_read(),
        }
    }
}

/// Whether a tool needs a human.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalRule {
    /// A human must approve (the default).
    #[default]
    Required,
    /// The callback answers APPROVED at once, without evidence.
    None,
}

/// Policy for one tool (or the default for unlisted tools).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolRule {
    /// The tool name this rule applies to (ignored for `default_tool`).
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub approval: ApprovalRule,
    /// Approver groups whose members may decide. Empty: every enrolled principal.
    #[serde(default)]
    pub approvers: Vec<String>,
    /// Severity shown in notifications when the request does not give one.
    #[serde(default)]
    pub severity: Option<Severity>,
    /// Weakest identity assurance a verdict may have.
    #[serde(default)]
    pub min_assurance: Option<AssuranceLevel>,
    /// Whether verdicts need user verification (default true).
    #[serde(default)]
    pub require_user_verification: Option<bool>,
    /// This tool's approval window, overriding `timeouts.approval_seconds` (at most seven
    /// days).
    #[serde(default)]
    pub approval_seconds: Option<u64>,
    /// How far an approver may extend a PENDING approval's window, counted from its creation
    /// (`POST /v1/approver/approvals/{id}/extend`). Absent: no extension.
    #[serde(default)]
    pub max_approval_seconds: Option<u64>,
    /// Remind the approval's channels every this many seconds while it waits (at least 60).
    #[serde(default)]
    pub reminder_every: Option<u64>,
    /// Tell further groups, through their channels, when the approval waits this long.
    #[serde(default)]
    pub escalation: Vec<EscalationStep>,
    /// The canonicalization profile this tool's requests use (default: the generic tool-call
    /// profile). A typed profile that does not sign the tool name (`countersign.payment/1`) can
    /// be used by the one tool that names it here and by no other: the rule that decides who may
    /// approve must follow from signed data, not from the unsigned tool name of the request.
    #[serde(default)]
    pub profile: Option<String>,
    /// Strings that are not already in Unicode NFC: refused (`require`, the default) or
    /// normalized for hashing (`normalize`, for a gateway that itself executes the NFC form).
    #[serde(default)]
    pub nfc: NfcMode,
}

/// How urgent a request is: one of four words, never free text. The severity is shown on the
/// approver page before sign-in and sent in the webhook, so free text there would be a side
/// channel for the parameters, which neither may carry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Low,
    #[default]
    Normal,
    High,
    Critical,
}

impl Severity {
    /// Every severity, in increasing order.
    pub const ALL: [Self; 4] = [Self::Low, Self::Normal, Self::High, Self::Critical];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Low => "low",
            Self::Normal => "normal",
            Self::High => "high",
            Self::Critical => "critical",
        }
    }

    /// The severity with this wire name (exact, lowercase).
    pub fn from_wire(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == text)
    }
}

/// SQLite `synchronous` setting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Durability {
    #[default]
    Normal,
    Full,
}

fn default_rp_id() -> String {
    "localhost".to_owned()
}
fn default_approval_ttl() -> u64 {
    300
}
fn default_grant_ttl() -> u64 {
    120
}
fn default_long_poll() -> u64 {
    30
}
fn default_session_ttl() -> u64 {
    900
}
fn default_max_age() -> u64 {
    countersign::DEFAULT_MAX_AGE_SECONDS
}

impl Default for Config {
    fn default() -> Self {
        Self {
            rp_id: default_rp_id(),
            origins: Vec::new(),
            public_url: None,
            registry: None,
            timeouts: Timeouts::default(),
            webhook_url: None,
            notify: NotifyConfig::default(),
            groups: BTreeMap::new(),
            default_tool: ToolRule::default(),
            tools: Vec::new(),
            durability: Durability::default(),
            enrollment: crate::enroll::EnrollmentConfig::default(),
            webauthn_hints: None,
            database: None,
            publish_registry: false,
            audit_origin: None,
            witnesses: Vec::new(),
            witness_interval_seconds: default_witness_interval(),
            limits: Limits::default(),
            preauthorizations: Vec::new(),
            danger_accept_demo_key: false,
        }
    }
}

/// Why a configuration is unusable.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("parsing {path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("tool {tool:?} names approver group {group:?}, which is not defined in [groups]")]
    UnknownGroup { tool: String, group: String },
    #[error("tool {0:?} appears twice in [[tools]]")]
    DuplicateTool(String),
    #[error("timeouts.{0} must be at least 1 second")]
    ZeroTimeout(&'static str),
    #[error("tool {tool:?} names profile {profile:?}, which this service does not pin")]
    UnknownProfile { tool: String, profile: String },
    #[error(
        "profile {profile:?} does not sign the tool name, so one tool only may use it; \
         it is named by tools {first:?} and {second:?}"
    )]
    ProfileBoundTwice {
        profile: String,
        first: String,
        second: String,
    },
    #[error(
        "default_tool names profile {0:?}: the default rule covers tools nobody listed, so it \
         cannot be the one tool a profile belongs to; name the tool in [[tools]]"
    )]
    DefaultToolProfile(String),
    #[error(
        "audit_origin {0:?} cannot name a signed note's key: it must be non-empty, without \
         spaces or '+', and not \"countersign.audit/1\""
    )]
    BadAuditOrigin(String),
    #[error("limits.long_poll_waiters must be at least 1")]
    ZeroWaiters,
    #[error(
        "notify channel {channel:?}: {field} is a secret and may not be written in the \
         configuration; use {field}_file or {field}_env"
    )]
    InlineSecret {
        channel: String,
        field: &'static str,
    },
    #[error("notify channel {channel:?}: {problem}")]
    Channel { channel: String, problem: String },
    #[error("{used_by} names notify channel {channel:?}, which is not defined")]
    UnknownChannel { channel: String, used_by: String },
    #[error("{0} is {1} s; an approval waits at most 604800 s (seven days)")]
    WindowTooLong(&'static str, u64),
    #[error("tool {tool:?}: {problem}")]
    Waiting { tool: String, problem: String },
}

impl Config {
    /// Read and check a TOML file.
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::from_toml(&text).map_err(|e| match e {
            ConfigError::Parse { message, .. } => ConfigError::Parse {
                path: path.to_owned(),
                message,
            },
            other => other,
        })
    }

    /// Parse and check TOML text.
    pub fn from_toml(text: &str) -> Result<Self, ConfigError> {
        let config: Self = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: PathBuf::new(),
            message: e.to_string(),
        })?;
        config.check()?;
        Ok(config)
    }

    /// Cross-field checks serde cannot express.
    pub fn check(&self) -> Result<(), ConfigError> {
        let t = &self.timeouts;
        for (name, value) in [
            ("approval_seconds", t.approval_seconds),
            ("grant_seconds", t.grant_seconds),
            ("long_poll_max_seconds", t.long_poll_max_seconds),
            ("session_seconds", t.session_seconds),
            ("assertion_max_age_seconds", t.assertion_max_age_seconds),
            ("header_read_seconds", t.header_read_seconds),
            ("body_read_seconds", t.body_read_seconds),
        ] {
            if value == 0 {
                return Err(ConfigError::ZeroTimeout(name));
            }
        }
        if let Some(origin) = &self.audit_origin
            && !crate::audit::valid_origin(origin)
        {
            return Err(ConfigError::BadAuditOrigin(origin.clone()));
        }
        if self.limits.long_poll_waiters == 0 {
            return Err(ConfigError::ZeroWaiters);
        }
        if self.tools.iter().any(|r| r.approval_seconds == Some(0)) {
            return Err(ConfigError::ZeroTimeout("tools.approval_seconds"));
        }
        let mut seen = std::collections::BTreeSet::new();
        for rule in self.tools.iter().chain(std::iter::once(&self.default_tool)) {
            for group in &rule.approvers {
                if !self.groups.contains_key(group) {
                    return Err(ConfigError::UnknownGroup {
                        tool: rule.name.clone(),
                        group: group.clone(),
                    });
                }
            }
        }
        for rule in &self.tools {
            if !seen.insert(rule.name.as_str()) {
                return Err(ConfigError::DuplicateTool(rule.name.clone()));
            }
        }
        if let Some(profile) = &self.default_tool.profile {
            return Err(ConfigError::DefaultToolProfile(profile.clone()));
        }
        self.check_notify()?;
        let pinned = ProfileRegistry::builtin();
        let mut bound: BTreeMap<&str, &str> = BTreeMap::new();
        for rule in &self.tools {
            let Some(id) = rule.profile.as_deref() else {
                continue;
            };
            let profile = pinned.get(id).ok_or_else(|| ConfigError::UnknownProfile {
                tool: rule.name.clone(),
                profile: id.to_owned(),
            })?;
            if countersign::signs_operation(profile) {
                continue;
            }
            if let Some(first) = bound.insert(id, &rule.name) {
                return Err(ConfigError::ProfileBoundTwice {
                    profile: id.to_owned(),
                    first: first.to_owned(),
                    second: rule.name.clone(),
                });
            }
        }
        Ok(())
    }

    /// Each typed profile that does not sign its operation, to the one tool allowed to use it:
    /// the verifier policy's `profile_tools`.
    pub fn profile_tools(&self) -> BTreeMap<String, String> {
        let pinned = ProfileRegistry::builtin();
        self.tools
            .iter()
            .filter_map(|rule| {
                let id = rule.profile.as_deref()?;
                let profile = pinned.get(id)?;
                (!countersign::signs_operation(profile)).then(|| (id.to_owned(), rule.name.clone()))
            })
            .collect()
    }

    /// The rule for `tool_name`.
    pub fn rule(&self, tool_name: &str) -> &ToolRule {
        self.tools
            .iter()
            .find(|r| r.name == tool_name)
            .unwrap_or(&self.default_tool)
    }

    /// The principals a rule admits; `None` means every enrolled principal.
    pub fn eligible_principals(&self, rule: &ToolRule) -> Option<Vec<&str>> {
        if rule.approvers.is_empty() {
            return None;
        }
        let mut out: Vec<&str> = rule
            .approvers
            .iter()
            .filter_map(|g| self.groups.get(g))
            .flatten()
            .map(String::as_str)
            .collect();
        out.sort_unstable();
        out.dedup();
        Some(out)
    }

    /// The verifier policy the service applies to a verdict on `rule`'s tool, `eligible` being
    /// the principals who may decide it (`None`: everyone enrolled), groups already expanded.
    ///
    /// Everything the service decides by configuration is in it, so the same checks hold offline:
    /// who may approve (`approvers`), which tool may use a typed profile (`profile_tools`) and
    /// whether non-NFC text is refused (`nfc`).
    pub fn policy(&self, rule: &ToolRule, eligible: Option<Vec<String>>) -> Policy {
        let mut policy = Policy::new(self.rp_id.clone(), self.origins.iter().cloned());
        policy.min_assurance = rule.min_assurance;
        policy.require_user_verification = rule.require_user_verification.unwrap_or(true);
        policy.max_age_seconds = self.timeouts.assertion_max_age_seconds;
        policy.nfc = rule.nfc;
        policy.profile_tools = self.profile_tools();
        policy.approvers = eligible;
        policy
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_file_gives_fail_closed_defaults() {
        let c = Config::from_toml("").ok();
        let c = c.as_ref();
        assert_eq!(
            c.map(|c| c.rule("anything").approval),
            Some(ApprovalRule::Required)
        );
        assert_eq!(c.map(|c| c.timeouts.approval_seconds), Some(300));
        assert_eq!(
            c.map(|c| c.eligible_principals(c.rule("x")).is_none()),
            Some(true)
        );
    }

    #[test]
    fn tools_groups_and_policy_are_read() {
        let c = Config::from_toml(
            r#"
            rp_id = "example.org"
            origins = ["https://approve.example.org"]
            [groups]
            finance = ["alice", "bob"]
            [[tools]]
            name = "payments.transfer"
            approvers = ["finance"]
            min_assurance = "AAL3"
            [[tools]]
            name = "read_file"
            approval = "none"
            "#,
        );
        let c = c.ok();
        let c = c.as_ref();
        let rule = c.map(|c| c.rule("payments.transfer"));
        assert_eq!(
            c.zip(rule).and_then(|(c, r)| c.eligible_principals(r)),
            Some(vec!["alice", "bob"])
        );
        assert_eq!(
            c.map(|c| c.rule("read_file").approval),
            Some(ApprovalRule::None)
        );
        assert_eq!(
            c.zip(rule)
                .and_then(|(c, r)| c.policy(r, None).min_assurance),
            Some(AssuranceLevel::Aal3)
        );
    }

    #[test]
    fn severities_are_four_words_and_anything_else_is_refused_at_load() {
        for s in Severity::ALL {
            let c = Config::from_toml(&format!(
                "[[tools]]\nname = \"t\"\nseverity = \"{}\"",
                s.as_str()
            ));
            assert_eq!(c.ok().and_then(|c| c.rule("t").severity), Some(s));
            assert_eq!(Severity::from_wire(s.as_str()), Some(s));
        }
        for bad in ["urgent", "HIGH", "", "high "] {
            let c = Config::from_toml(&format!("[[tools]]\nname = \"t\"\nseverity = \"{bad}\""));
            assert!(
                matches!(&c, Err(ConfigError::Parse { message, .. }) if message.contains("severity")),
                "{bad:?}: {c:?}"
            );
            assert_eq!(Severity::from_wire(bad), None);
        }
        let c = Config::from_toml("[default_tool]\nseverity = \"loud\"");
        assert!(matches!(c, Err(ConfigError::Parse { .. })));
    }

    #[test]
    fn the_registry_is_published_only_when_the_operator_says_so() {
        assert_eq!(
            Config::from_toml("").ok().map(|c| c.publish_registry),
            Some(false)
        );
        assert_eq!(
            Config::from_toml("publish_registry = true")
                .ok()
                .map(|c| c.publish_registry),
            Some(true)
        );
    }

    #[test]
    fn unknown_keys_groups_duplicates_and_zero_timeouts_are_refused() {
        assert!(matches!(
            Config::from_toml("rp_idd = \"x\""),
            Err(ConfigError::Parse { .. })
        ));
        assert!(matches!(
            Config::from_toml("[[tools]]\nname = \"t\"\napprovers = [\"nobody\"]"),
            Err(ConfigError::UnknownGroup { .. })
        ));
        assert!(matches!(
            Config::from_toml("[[tools]]\nname = \"t\"\n[[tools]]\nname = \"t\""),
            Err(ConfigError::DuplicateTool(_))
        ));
        assert!(matches!(
            Config::from_toml("[timeouts]\napproval_seconds = 0"),
            Err(ConfigError::ZeroTimeout("approval_seconds"))
        ));
    }

    #[test]
    fn a_typed_profile_binds_to_one_tool_and_must_be_pinned() {
        let c = Config::from_toml(
            r#"
            [[tools]]
            name = "payments.transfer"
            profile = "countersign.payment/1"
            nfc = "normalize"
            [[tools]]
            name = "generic.one"
            profile = "countersign.tool-call/1"
            [[tools]]
            name = "generic.two"
            profile = "countersign.tool-call/1"
            "#,
        )
        .unwrap();
        // The tool-call profile signs tool_name: shared by two tools, and not in profile_tools.
        let tools = c.profile_tools();
        assert_eq!(
            tools.into_iter().collect::<Vec<_>>(),
            vec![(
                "countersign.payment/1".to_owned(),
                "payments.transfer".to_owned()
            )]
        );
        let policy = c.policy(c.rule("payments.transfer"), Some(vec!["alice".into()]));
        assert_eq!(policy.nfc, NfcMode::Normalize);
        assert_eq!(policy.approvers, Some(vec!["alice".to_owned()]));
        assert_eq!(c.policy(c.rule("other"), None).nfc, NfcMode::Require);

        assert!(matches!(
            Config::from_toml(
                "[[tools]]\nname = \"a\"\nprofile = \"countersign.payment/1\"\n\
                 [[tools]]\nname = \"b\"\nprofile = \"countersign.payment/1\""
            ),
            Err(ConfigError::ProfileBoundTwice { .. })
        ));
        assert!(matches!(
            Config::from_toml("[[tools]]\nname = \"a\"\nprofile = \"acme.unknown/1\""),
            Err(ConfigError::UnknownProfile { .. })
        ));
        assert!(matches!(
            Config::from_toml("[default_tool]\nprofile = \"countersign.payment/1\""),
            Err(ConfigError::DefaultToolProfile(_))
        ));
        assert!(matches!(
            Config::from_toml("[default_tool]\nnfc = \"sometimes\""),
            Err(ConfigError::Parse { .. })
        ));
    }

    #[test]
    fn audit_origin_and_limits() {
        let c = Config::from_toml(
            "audit_origin = \"example.org/log\"\n[limits]\nlong_poll_waiters = 7",
        );
        assert_eq!(
            c.as_ref().ok().and_then(|c| c.audit_origin.as_deref()),
            Some("example.org/log")
        );
        assert_eq!(c.ok().map(|c| c.limits.long_poll_waiters), Some(7));
        assert_eq!(
            Config::from_toml("")
                .ok()
                .map(|c| c.limits.long_poll_waiters),
            Some(1024)
        );
        for bad in ["a b", "a+b", "", "countersign.audit/1"] {
            assert!(matches!(
                Config::from_toml(&format!("audit_origin = {bad:?}")),
                Err(ConfigError::BadAuditOrigin(_))
            ));
        }
        assert!(matches!(
            Config::from_toml("[limits]\nlong_poll_waiters = 0"),
            Err(ConfigError::ZeroWaiters)
        ));
    }
}
