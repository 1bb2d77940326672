//! The interposer's configuration (one file per upstream), the rule that says which calls are
//! held (docs/MCP.md, "Which calls are held") and who may approve each held tool (docs/MCP.md,
//! "Who may approve").

use countersign::{ApproverPolicy, ApproverRule, Groups, ToolRuleError, ToolRules};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Longest park of a retried call's response: below the MCP SDKs' 60 s default request timeout,
/// with room for the answer to travel.
pub const MAX_PARK_SECONDS: u64 = 55;
/// Default park budget.
pub const DEFAULT_PARK_SECONDS: u64 = 25;

/// How a held call is answered to a client that cannot take a URL elicitation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HeldAs {
    /// A `CallToolResult` with `isError: true` and model-readable text (the default: hosts
    /// show tool errors to the model, protocol errors often not).
    #[default]
    ToolError,
    /// A JSON-RPC error (-32010 pending, -32011 denied) with the ticket in `error.data`.
    JsonrpcError,
}

/// The configuration file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Relying party id the evidence must be for.
    #[serde(default = "default_rp_id")]
    pub rp_id: String,
    /// Origins the approver page is served from (default: the approver page's origin).
    #[serde(default)]
    pub origins: Vec<String>,
    /// The trusted credential registry (a `countersign registry export` document).
    #[serde(default)]
    pub registry: Option<PathBuf>,
    /// Base URL of the approver page (default: the service URL as a browser opens it,
    /// `localhost` for a loopback address).
    #[serde(default)]
    pub approver_url: Option<String>,
    /// Tool-name globs relayed without approval.
    #[serde(default)]
    pub allow: Vec<String>,
    /// Tool-name globs always held.
    #[serde(default)]
    pub hold: Vec<String>,
    /// Tool-name globs refused at once.
    #[serde(default)]
    pub deny: Vec<String>,
    /// Relay tools in no list that declare `readOnlyHint: true` (annotations are the server's
    /// claim: trust them only for a server you trust). Never a tool with a `[[tools]]` rule.
    #[serde(default)]
    pub trust_annotations: bool,
    /// Approver groups: name to principals (as in the service's configuration).
    #[serde(default)]
    pub groups: Groups,
    /// Who may approve a held tool without a `[[tools]]` rule, and how strongly.
    #[serde(default)]
    pub default_tool: ApproverRule,
    /// Per-tool approver rules: the interposer's own, checked against the evidence whatever the
    /// service decided.
    #[serde(default)]
    pub tools: Vec<ApproverRule>,
    #[serde(default)]
    pub held_as: HeldAs,
    /// How long a retry of a still-pending call waits for the verdict before answering.
    #[serde(default = "default_park")]
    pub park_seconds: u64,
    /// When the client leaves (stdio: closes its side; HTTP: `DELETE`s its session), withdraw at
    /// the service every approval still pending for a call held in that session (they settle
    /// DENIED `cancelled`). Off by default: a client that reconnects can then still retry the
    /// call and collect its approval.
    #[serde(default)]
    pub cancel_on_disconnect: bool,
    /// Offer tasks: a held call sent with `params.task` (protocol revision 2025-11-25), or from
    /// a 2026-07-28 request that declares the extension `io.modelcontextprotocol/tasks`, is
    /// answered with a task that runs once approved (docs/MCP.md, "Tasks"). On by default.
    #[serde(default = "default_tasks")]
    pub tasks: bool,
    /// Appended to held tools' descriptions in `tools/list` results.
    #[serde(default)]
    pub hold_description_suffix: Option<String>,
    /// The interposer's own audit log (JSON lines, signed and hash-chained).
    #[serde(default)]
    pub audit_log: Option<PathBuf>,
    /// Its Ed25519 seed (created if missing; default: `audit_log` with its extension replaced
    /// by `.key`, `mcp-audit.jsonl` → `mcp-audit.key`).
    #[serde(default)]
    pub audit_key: Option<PathBuf>,
    /// Directory of the replay store (spent evidence nonces); in memory when absent.
    #[serde(default)]
    pub state_dir: Option<PathBuf>,
    /// HTTP mode: the runtime's worker threads. One by default: a relay does little work per
    /// message, and one thread spares the cross-thread wake-ups that otherwise cost more than
    /// the work (docs/PERFORMANCE.md); raise it for many busy agents on a many-core host.
    #[serde(default = "default_http_threads")]
    pub http_threads: usize,
    /// HTTP mode: `Host` names let in besides loopback ones and the listening address (a name
    /// clients reach the relay by through a proxy or DNS, e.g. `mcp.internal.example`). Any
    /// other `Host` is refused (DNS rebinding).
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    /// HTTP mode: the agents and their bearer credentials (the agent id of a call comes from
    /// the credential it presents). Not used by stdio mode.
    #[serde(default)]
    pub agents: Vec<crate::http::AgentEntry>,
}

fn default_rp_id() -> String {
    "localhost".to_owned()
}

fn default_http_threads() -> usize {
    1
}

/// Most worker threads `http_threads` may ask for.
pub const MAX_HTTP_THREADS: usize = 256;

fn default_tasks() -> bool {
    true
}

fn default_park() -> u64 {
    DEFAULT_PARK_SECONDS
}

impl Default for Config {
    fn default() -> Self {
        Self {
            rp_id: default_rp_id(),
            origins: Vec::new(),
            registry: None,
            approver_url: None,
            allow: Vec::new(),
            hold: Vec::new(),
            deny: Vec::new(),
            trust_annotations: false,
            groups: Groups::new(),
            default_tool: ApproverRule::default(),
            tools: Vec::new(),
            held_as: HeldAs::ToolError,
            park_seconds: DEFAULT_PARK_SECONDS,
            cancel_on_disconnect: false,
            tasks: true,
            hold_description_suffix: None,
            audit_log: None,
            audit_key: None,
            state_dir: None,
            http_threads: default_http_threads(),
            allowed_hosts: Vec::new(),
            agents: Vec::new(),
        }
    }
}

/// A configuration that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("allowed_hosts entry {0:?} is no host name (a name or an IP, with or without a port)")]
    AllowedHost(String),
    #[error("reading {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("config: {0}")]
    Parse(#[from] toml::de::Error),
    #[error("park_seconds must be 1..={MAX_PARK_SECONDS} (below the SDKs' 60 s timeout), not {0}")]
    Park(u64),
    #[error("http_threads must be 1..={MAX_HTTP_THREADS}, not {0}")]
    HttpThreads(usize),
    #[error("pattern {0:?} in {1}: empty patterns match nothing useful")]
    EmptyPattern(String, &'static str),
    #[error("approver rules: {0}")]
    Rules(#[from] ToolRuleError),
    #[error(
        "tool {tool:?} has a [[tools]] approver rule, but allow pattern {pattern:?} relays it \
         without approval: remove one, or add it to hold"
    )]
    AllowedToolWithRule { tool: String, pattern: String },
}

impl Config {
    /// Parse and check a configuration text.
    pub fn from_toml(text: &str) -> Result<Self, ConfigError> {
        let config: Self = toml::from_str(text)?;
        config.check()?;
        Ok(config)
    }

    /// The checks serde cannot express; [`crate::interposer`] runs them again, for a
    /// configuration assembled in code.
    pub fn check(&self) -> Result<(), ConfigError> {
        if !(1..=MAX_PARK_SECONDS).contains(&self.park_seconds) {
            return Err(ConfigError::Park(self.park_seconds));
        }
        if !(1..=MAX_HTTP_THREADS).contains(&self.http_threads) {
            return Err(ConfigError::HttpThreads(self.http_threads));
        }
        for (list, name) in [
            (&self.allow, "allow"),
            (&self.hold, "hold"),
            (&self.deny, "deny"),
        ] {
            if let Some(p) = list.iter().find(|p| p.is_empty()) {
                return Err(ConfigError::EmptyPattern(p.clone(), name));
            }
        }
        if let Some(h) = self
            .allowed_hosts
            .iter()
            .find(|h| !crate::http::is_host_name(h))
        {
            return Err(ConfigError::AllowedHost(h.clone()));
        }
        self.approver_rules().check()?;
        // A rule nobody consults is a rule the operator believes in and the relay ignores.
        for tool in self.tools.iter().map(|r| r.name.as_str()) {
            let relayed = self.rule(tool, Some(&ListedTool::default())) == Rule::Allow;
            if let Some(pattern) = self.allow.iter().find(|p| relayed && glob_match(p, tool)) {
                return Err(ConfigError::AllowedToolWithRule {
                    tool: tool.to_owned(),
                    pattern: pattern.clone(),
                });
            }
        }
        Ok(())
    }

    /// The approver rules: `[groups]`, `[default_tool]`, `[[tools]]`.
    pub fn approver_rules(&self) -> ToolRules<'_> {
        ToolRules::new(&self.groups, &self.default_tool, &self.tools)
    }

    /// Who may approve a call of `tool`, and how strongly: what its evidence is verified under.
    pub fn approver_policy(&self, tool: &str) -> ApproverPolicy {
        self.approver_rules().policy_for(tool)
    }

    /// Read a configuration file; relative paths in it are resolved against its directory.
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.display().to_string(),
            source,
        })?;
        let mut config = Self::from_toml(&text)?;
        let base = path.parent().unwrap_or(Path::new("."));
        for p in [
            &mut config.registry,
            &mut config.audit_log,
            &mut config.audit_key,
            &mut config.state_dir,
        ]
        .into_iter()
        .flatten()
        {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        }
        for p in config
            .agents
            .iter_mut()
            .filter_map(|a| a.token_file.as_mut())
        {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        }
        Ok(config)
    }

    /// The park budget.
    pub fn park(&self) -> Duration {
        Duration::from_secs(self.park_seconds)
    }

    /// The rule for a call of `tool`, given what the last `tools/list` said about it
    /// (`None`: not listed, or no list seen yet).
    pub fn rule(&self, tool: &str, listed: Option<&ListedTool>) -> Rule {
        let matches = |list: &[String]| list.iter().any(|p| glob_match(p, tool));
        if matches(&self.deny) {
            return Rule::Deny;
        }
        if matches(&self.hold) {
            return Rule::Hold(HoldReason::Configured);
        }
        // An `allow` pattern is the operator's word about a name: it needs nothing from the
        // upstream's list. A client that calls without listing first (a reconnecting one, or a
        // stateless one) is relayed as configured.
        if matches(&self.allow) {
            return Rule::Allow;
        }
        // What follows reads the tool's annotations, so it needs the tool to have been listed:
        // fail closed when it was not.
        let Some(listed) = listed else {
            return Rule::Hold(HoldReason::NotListed);
        };
        // An approver rule of its own says the operator wants this tool approved: the server's
        // claim that it only reads does not override that.
        if self.trust_annotations
            && listed.read_only_hint
            && !self.approver_rules().has_own_rule(tool)
        {
            return Rule::Allow;
        }
        Rule::Hold(HoldReason::Unlisted)
    }
}

/// What the upstream's last `tools/list` said about one tool.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListedTool {
    /// `annotations.readOnlyHint == true`.
    pub read_only_hint: bool,
}

/// What happens to a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    Allow,
    Hold(HoldReason),
    Deny,
}

impl Rule {
    /// The audit word.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Hold(_) => "hold",
            Self::Deny => "deny",
        }
    }
}

/// Why a call is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldReason {
    /// A `hold` pattern matches.
    Configured,
    /// In no list, and not a trusted read-only tool.
    Unlisted,
    /// Missing from the last `tools/list` (or none seen).
    NotListed,
}

/// Whether `pattern` matches the whole of `name`: `*` is any run of characters, `?` one.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    // Iterative matching with one backtrack point: linear in practice, no recursion.
    let (mut pi, mut ni) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some((pi, ni));
                pi += 1;
            }
            Some(&c) if c == '?' || Some(&c) == n.get(ni) => {
                pi += 1;
                ni += 1;
            }
            _ => match star {
                Some((sp, sn)) => {
                    pi = sp + 1;
                    ni = sn + 1;
                    star = Some((sp, sn + 1));
                }
                None => return false,
            },
        }
    }
    p.get(pi..)
        .is_some_and(|rest| rest.iter().all(|&c| c == '*'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_whole_names() {
        assert!(glob_match("write_file", "write_file"));
        assert!(!glob_match("write_file", "write_file2"));
        assert!(glob_match("move_*", "move_file"));
        assert!(glob_match("move_*", "move_"));
        assert!(!glob_match("move_*", "remove_file"));
        assert!(glob_match("*_file", "edit_file"));
        assert!(glob_match("a*b*c", "aXXbYYc"));
        assert!(!glob_match("a*b*c", "aXXbYY"));
        assert!(glob_match("get_?", "get_x"));
        assert!(!glob_match("get_?", "get_xy"));
        assert!(glob_match("*", ""));
        assert!(!glob_match("a", ""));
    }

    fn config(text: &str) -> Config {
        Config::from_toml(text).unwrap()
    }

    #[test]
    fn allowed_hosts_must_name_hosts() {
        config("allowed_hosts = [\"mcp.example\", \"10.0.0.5:7300\", \"[fd00::1]\"]");
        for bad in ["\"\"", "\"user@mcp.example\"", "\"mcp.example/x\""] {
            let e = Config::from_toml(&format!("allowed_hosts = [{bad}]")).unwrap_err();
            assert!(matches!(e, ConfigError::AllowedHost(_)), "{bad}: {e}");
        }
    }

    #[test]
    fn deny_wins_over_hold_and_allow() {
        let c = config("allow = [\"*\"]\nhold = [\"delete_*\"]\ndeny = [\"delete_*\"]");
        let listed = ListedTool::default();
        assert_eq!(c.rule("delete_x", Some(&listed)), Rule::Deny);
        assert_eq!(c.rule("delete_x", None), Rule::Deny);
        assert_eq!(c.rule("read", Some(&listed)), Rule::Allow);
    }

    #[test]
    fn hold_wins_over_allow() {
        let c = config("allow = [\"*\"]\nhold = [\"write_file\"]");
        assert_eq!(
            c.rule("write_file", Some(&ListedTool::default())),
            Rule::Hold(HoldReason::Configured)
        );
    }

    #[test]
    fn an_allowed_tool_is_relayed_whether_or_not_it_was_listed() {
        let c = config("allow = [\"read_*\"]");
        assert_eq!(c.rule("read_file", None), Rule::Allow);
        assert_eq!(
            c.rule("read_file", Some(&ListedTool::default())),
            Rule::Allow
        );
    }

    #[test]
    fn a_tool_missing_from_the_last_list_is_held_unless_allowed_by_name() {
        let ro = ListedTool {
            read_only_hint: true,
        };
        let c = config("allow = [\"read_*\"]\ntrust_annotations = true");
        // Its annotations are unknown, so `trust_annotations` cannot relay it.
        assert_eq!(c.rule("list_dir", None), Rule::Hold(HoldReason::NotListed));
        assert_eq!(c.rule("list_dir", Some(&ro)), Rule::Allow);
        assert_eq!(
            c.rule("write_file", None),
            Rule::Hold(HoldReason::NotListed)
        );
    }

    #[test]
    fn unlisted_tools_are_held_unless_trusted_read_only() {
        let ro = ListedTool {
            read_only_hint: true,
        };
        let rw = ListedTool::default();
        let untrusting = config("");
        assert_eq!(
            untrusting.rule("read_file", Some(&ro)),
            Rule::Hold(HoldReason::Unlisted)
        );
        let trusting = config("trust_annotations = true");
        assert_eq!(trusting.rule("read_file", Some(&ro)), Rule::Allow);
        assert_eq!(
            trusting.rule("write_file", Some(&rw)),
            Rule::Hold(HoldReason::Unlisted)
        );
    }

    #[test]
    fn a_tool_with_its_own_approver_rule_is_held_whatever_its_annotations_say() {
        let ro = ListedTool {
            read_only_hint: true,
        };
        let c = config(
            "trust_annotations = true\n[[tools]]\nname = \"read_secrets\"\nmin_assurance = \"AAL3\"",
        );
        assert_eq!(
            c.rule("read_secrets", Some(&ro)),
            Rule::Hold(HoldReason::Unlisted)
        );
        assert_eq!(c.rule("read_file", Some(&ro)), Rule::Allow);
    }

    #[test]
    fn park_budget_is_bounded_below_sdk_timeouts() {
        assert_eq!(config("").park(), Duration::from_secs(25));
        assert!(Config::from_toml("park_seconds = 0").is_err());
        assert!(Config::from_toml("park_seconds = 60").is_err());
        assert_eq!(config("park_seconds = 55").park_seconds, 55);
    }

    #[test]
    fn http_threads_default_to_one_and_are_bounded() {
        assert_eq!(config("").http_threads, 1);
        assert_eq!(config("http_threads = 4").http_threads, 4);
        assert!(Config::from_toml("http_threads = 0").is_err());
        assert!(Config::from_toml("http_threads = 257").is_err());
    }

    #[test]
    fn tasks_are_offered_unless_turned_off() {
        assert!(config("").tasks);
        assert!(!config("tasks = false").tasks);
    }

    #[test]
    fn held_as_and_unknown_keys() {
        assert_eq!(config("").held_as, HeldAs::ToolError);
        assert_eq!(
            config("held_as = \"jsonrpc_error\"").held_as,
            HeldAs::JsonrpcError
        );
        assert!(Config::from_toml("held_as = \"http_403\"").is_err());
        assert!(Config::from_toml("alow = [\"x\"]").is_err());
        assert!(Config::from_toml("allow = [\"\"]").is_err());
    }
}
