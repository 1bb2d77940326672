//! Per-tool approver rules: who may approve a tool's calls, and how strongly.
//!
//! The rule language is the service's configuration (`[groups]`, `[default_tool]`, `[[tools]]`
//! with `approvers` naming groups, `min_assurance`, `require_user_verification`), plus `quorum`.
//! A gateway that verifies evidence without rules of its own accepts an approval by any enrolled
//! principal for any tool: whether the approver was eligible would be the service's word, not a
//! check. [`ToolRules`] resolves the rule of each call's tool into an [`ApproverPolicy`], whose
//! [`ApproverPolicy::apply_to`] sets those members of the verifier [`Policy`].
//!
//! Rules are checked where they are loaded ([`ToolRules::check`]): a rule that names a group
//! nobody defined, that nobody could satisfy, or that is given twice refuses the configuration
//! instead of failing every call later.

use crate::{AssuranceLevel, CredentialRegistry, Policy};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};

/// Approver groups: group name to the principals in it.
pub type Groups = BTreeMap<String, Vec<String>>;

/// One `[[tools]]` entry, or the `[default_tool]` (which has no `name`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApproverRule {
    /// The tool this rule applies to, matched exactly (empty for `[default_tool]`).
    #[serde(default)]
    pub name: String,
    /// Groups whose members may approve. Empty: every enrolled principal.
    #[serde(default)]
    pub approvers: Vec<String>,
    /// The weakest identity assurance an approval may have.
    #[serde(default)]
    pub min_assurance: Option<AssuranceLevel>,
    /// How many distinct eligible principals must approve (default 1).
    #[serde(default)]
    pub quorum: Option<u32>,
    /// Whether every counted assertion needs user verification (default true).
    #[serde(default)]
    pub require_user_verification: Option<bool>,
}

/// What one tool's rule demands of an approval, groups expanded: the members of a verifier
/// [`Policy`] that say who may approve and how strongly.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApproverPolicy {
    /// The principals who may approve, sorted and distinct; `None`: every enrolled principal.
    pub approvers: Option<Vec<String>>,
    /// The weakest identity assurance an approval may have.
    pub min_assurance: Option<AssuranceLevel>,
    /// How many distinct eligible principals must approve.
    pub quorum: u32,
    /// Whether every counted assertion needs user verification.
    pub require_user_verification: bool,
}

impl Default for ApproverPolicy {
    /// The defaults of [`Policy::new`]: any enrolled principal, one of them, with user
    /// verification, no minimum assurance.
    fn default() -> Self {
        Self {
            approvers: None,
            min_assurance: None,
            quorum: 1,
            require_user_verification: true,
        }
    }
}

impl ApproverPolicy {
    /// `policy` with its approver members replaced by these (everything else, the relying
    /// party, origins, ages and profiles, stays the gateway's).
    pub fn apply_to(&self, mut policy: Policy) -> Policy {
        policy.approvers = self.approvers.clone();
        policy.min_assurance = self.min_assurance;
        policy.quorum = self.quorum;
        policy.require_user_verification = self.require_user_verification;
        policy
    }
}

/// The rules of one configuration, borrowed from wherever they were read.
#[derive(Clone, Copy, Debug)]
pub struct ToolRules<'a> {
    groups: &'a Groups,
    default_tool: &'a ApproverRule,
    tools: &'a [ApproverRule],
}

/// A rule set that cannot be used. Each names the rule (`[default_tool]` or the tool) and what
/// is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolRuleError {
    /// `approvers` names a group `[groups]` does not define.
    #[error("{rule} names approver group {group:?}, which is not defined in [groups]")]
    UnknownGroup {
        /// The rule.
        rule: String,
        /// The undefined group.
        group: String,
    },
    /// The groups `approvers` names have nobody in them.
    #[error("{rule}: its approver groups {groups:?} have no members, so nobody could approve")]
    NoMembers {
        /// The rule.
        rule: String,
        /// Its groups.
        groups: Vec<String>,
    },
    /// `quorum = 0`.
    #[error("{rule}: quorum must be at least 1")]
    ZeroQuorum {
        /// The rule.
        rule: String,
    },
    /// More approvers required than the groups name.
    #[error(
        "{rule}: quorum {quorum} is more than the {eligible} principal(s) its approver groups \
         name, so it could never be met"
    )]
    QuorumAboveEligible {
        /// The rule.
        rule: String,
        /// Its quorum.
        quorum: u32,
        /// The distinct principals its groups name.
        eligible: usize,
    },
    /// More approvers required than eligible principals hold a credential in the registry.
    #[error(
        "{rule}: quorum {quorum} is more than the {enrolled} eligible principal(s) with a \
         credential in the registry, so it could never be met"
    )]
    QuorumAboveEnrolled {
        /// The rule.
        rule: String,
        /// Its quorum.
        quorum: u32,
        /// The eligible principals with an unrevoked credential.
        enrolled: usize,
    },
    /// Two `[[tools]]` entries for one tool.
    #[error("tool {0:?} appears twice in [[tools]]")]
    DuplicateTool(String),
    /// A `[[tools]]` entry without `name`.
    #[error("a [[tools]] entry has no name")]
    UnnamedTool,
    /// `[default_tool]` with a `name`.
    #[error("[default_tool] has name {0:?}: it is the rule of every tool without its own entry")]
    NamedDefault(String),
}

impl<'a> ToolRules<'a> {
    /// The rules `[groups]`, `[default_tool]` and `[[tools]]`.
    pub fn new(
        groups: &'a Groups,
        default_tool: &'a ApproverRule,
        tools: &'a [ApproverRule],
    ) -> Self {
        Self {
            groups,
            default_tool,
            tools,
        }
    }

    /// The rule for `tool`: its own entry, else the default.
    pub fn rule(&self, tool: &str) -> &'a ApproverRule {
        self.tools
            .iter()
            .find(|r| r.name == tool)
            .unwrap_or(self.default_tool)
    }

    /// Whether `tool` has a `[[tools]]` entry of its own.
    pub fn has_own_rule(&self, tool: &str) -> bool {
        self.tools.iter().any(|r| r.name == tool)
    }

    /// What the rule for `tool` demands. A group missing from `[groups]` adds nobody (it can
    /// only narrow who may approve); [`ToolRules::check`] refuses such rules where they load.
    pub fn policy_for(&self, tool: &str) -> ApproverPolicy {
        self.resolve(self.rule(tool))
    }

    fn resolve(&self, rule: &ApproverRule) -> ApproverPolicy {
        let approvers = (!rule.approvers.is_empty()).then(|| {
            let members: BTreeSet<&String> = rule
                .approvers
                .iter()
                .filter_map(|g| self.groups.get(g))
                .flatten()
                .collect();
            members.into_iter().cloned().collect()
        });
        ApproverPolicy {
            approvers,
            min_assurance: rule.min_assurance,
            quorum: rule.quorum.unwrap_or(1),
            require_user_verification: rule.require_user_verification.unwrap_or(true),
        }
    }

    /// Every rule, the default first.
    fn all(&self) -> impl Iterator<Item = &'a ApproverRule> {
        std::iter::once(self.default_tool).chain(self.tools)
    }

    /// Refuse rules that contradict themselves or each other: an entry without a name (or a
    /// default with one), a tool given twice, a group that is not defined, groups with nobody in
    /// them, a quorum of 0 or above the principals the groups name.
    pub fn check(&self) -> Result<(), ToolRuleError> {
        if !self.default_tool.name.is_empty() {
            return Err(ToolRuleError::NamedDefault(self.default_tool.name.clone()));
        }
        let mut seen = BTreeSet::new();
        for rule in self.tools {
            if rule.name.is_empty() {
                return Err(ToolRuleError::UnnamedTool);
            }
            if !seen.insert(rule.name.as_str()) {
                return Err(ToolRuleError::DuplicateTool(rule.name.clone()));
            }
        }
        for rule in self.all() {
            let label = label(rule);
            if let Some(group) = rule
                .approvers
                .iter()
                .find(|g| !self.groups.contains_key(*g))
            {
                return Err(ToolRuleError::UnknownGroup {
                    rule: label,
                    group: group.clone(),
                });
            }
            // Core reads a quorum of 0 as 1; in a configuration it is a mistake, not a request.
            if rule.quorum == Some(0) {
                return Err(ToolRuleError::ZeroQuorum { rule: label });
            }
            let policy = self.resolve(rule);
            match &policy.approvers {
                Some(eligible) if eligible.is_empty() => {
                    return Err(ToolRuleError::NoMembers {
                        rule: label,
                        groups: rule.approvers.clone(),
                    });
                }
                Some(eligible) if count(eligible.len()) < policy.quorum => {
                    return Err(ToolRuleError::QuorumAboveEligible {
                        rule: label,
                        quorum: policy.quorum,
                        eligible: eligible.len(),
                    });
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Refuse a rule whose quorum (above one) needs more eligible principals than `registry`
    /// holds unrevoked credentials for: checkable only once the trusted registry is known. A
    /// quorum of one is not held against a registry nobody eligible has enrolled in yet: that is
    /// a deployment still being set up, not a rule that contradicts itself.
    pub fn check_enrolled(&self, registry: &CredentialRegistry) -> Result<(), ToolRuleError> {
        let enrolled: BTreeSet<&str> = registry
            .iter()
            .filter(|c| !c.record().revoked)
            .map(|c| c.principal())
            .collect();
        for rule in self.all() {
            let policy = self.resolve(rule);
            if policy.quorum <= 1 {
                continue;
            }
            let eligible = match &policy.approvers {
                None => enrolled.len(),
                Some(list) => list
                    .iter()
                    .filter(|p| enrolled.contains(p.as_str()))
                    .count(),
            };
            if count(eligible) < policy.quorum {
                return Err(ToolRuleError::QuorumAboveEnrolled {
                    rule: label(rule),
                    quorum: policy.quorum,
                    enrolled: eligible,
                });
            }
        }
        Ok(())
    }
}

/// How a rule is named in an error.
fn label(rule: &ApproverRule) -> String {
    if rule.name.is_empty() {
        "[default_tool]".to_owned()
    } else {
        format!("tool {:?}", rule.name)
    }
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn groups() -> Groups {
        Groups::from([
            ("finance".into(), vec!["bob".into(), "alice".into()]),
            ("ops".into(), vec!["alice".into(), "carol".into()]),
            ("empty".into(), Vec::new()),
        ])
    }

    fn rule(name: &str, approvers: &[&str], quorum: Option<u32>) -> ApproverRule {
        ApproverRule {
            name: name.into(),
            approvers: approvers.iter().map(|s| (*s).to_owned()).collect(),
            quorum,
            ..ApproverRule::default()
        }
    }

    #[test]
    fn a_tool_gets_its_own_rule_and_every_other_tool_the_default() {
        let groups = groups();
        let default = ApproverRule {
            min_assurance: Some(AssuranceLevel::Aal2),
            ..rule("", &["ops"], None)
        };
        let tools = [ApproverRule {
            require_user_verification: Some(false),
            ..rule("pay", &["finance", "ops"], Some(2))
        }];
        let rules = ToolRules::new(&groups, &default, &tools);
        assert_eq!(rules.check(), Ok(()));
        assert_eq!(
            rules.policy_for("pay"),
            ApproverPolicy {
                approvers: Some(vec!["alice".into(), "bob".into(), "carol".into()]),
                min_assurance: None,
                quorum: 2,
                require_user_verification: false,
            }
        );
        assert_eq!(
            rules.policy_for("other"),
            ApproverPolicy {
                approvers: Some(vec!["alice".into(), "carol".into()]),
                min_assurance: Some(AssuranceLevel::Aal2),
                ..ApproverPolicy::default()
            }
        );
        let policy = rules
            .policy_for("pay")
            .apply_to(Policy::new("example.org", ["https://example.org"]));
        assert_eq!(policy.quorum, 2);
        assert_eq!(policy.rp_id, "example.org");
        assert_eq!(policy.validate(), Ok(()));
    }

    #[test]
    fn no_rules_mean_the_fail_closed_defaults() {
        let groups = Groups::new();
        let default = ApproverRule::default();
        let rules = ToolRules::new(&groups, &default, &[]);
        assert_eq!(rules.check(), Ok(()));
        assert_eq!(rules.policy_for("x"), ApproverPolicy::default());
    }

    #[test]
    fn a_quorum_above_one_needs_that_many_eligible_principals_in_the_registry() {
        let groups = groups();
        let default = ApproverRule::default();
        let tools = [rule("pay", &["finance"], Some(2))];
        let rules = ToolRules::new(&groups, &default, &tools);
        let empty = CredentialRegistry::from_json(br#"{"credentials":[]}"#).unwrap();
        // Only `pay` asks for two: a default of one is not held against an empty registry.
        assert_eq!(
            rules.check_enrolled(&empty),
            Err(ToolRuleError::QuorumAboveEnrolled {
                rule: "tool \"pay\"".into(),
                quorum: 2,
                enrolled: 0
            })
        );
        assert_eq!(
            ToolRules::new(&groups, &default, &[]).check_enrolled(&empty),
            Ok(())
        );
    }

    #[test]
    fn contradictory_rules_are_refused_naming_the_rule() {
        let groups = groups();
        let default = ApproverRule::default();
        let refused = |tools: &[ApproverRule], default: &ApproverRule| {
            ToolRules::new(&groups, default, tools).check().err()
        };
        assert_eq!(
            refused(&[rule("t", &["nobody"], None)], &default),
            Some(ToolRuleError::UnknownGroup {
                rule: "tool \"t\"".into(),
                group: "nobody".into()
            })
        );
        assert!(matches!(
            refused(&[rule("t", &["empty"], None)], &default),
            Some(ToolRuleError::NoMembers { .. })
        ));
        assert_eq!(
            refused(&[rule("t", &["finance"], Some(3))], &default),
            Some(ToolRuleError::QuorumAboveEligible {
                rule: "tool \"t\"".into(),
                quorum: 3,
                eligible: 2
            })
        );
        // Two groups naming alice twice count her once.
        assert!(matches!(
            refused(&[rule("t", &["finance", "ops"], Some(4))], &default),
            Some(ToolRuleError::QuorumAboveEligible { eligible: 3, .. })
        ));
        assert!(matches!(
            refused(&[rule("t", &[], Some(0))], &default),
            Some(ToolRuleError::ZeroQuorum { .. })
        ));
        assert_eq!(
            refused(&[rule("t", &[], None), rule("t", &[], None)], &default),
            Some(ToolRuleError::DuplicateTool("t".into()))
        );
        assert_eq!(
            refused(&[rule("", &[], None)], &default),
            Some(ToolRuleError::UnnamedTool)
        );
        assert_eq!(
            refused(&[], &rule("x", &[], None)),
            Some(ToolRuleError::NamedDefault("x".into()))
        );
        let unknown = refused(&[], &rule("", &["nobody"], None));
        assert_eq!(
            unknown.map(|e| e.to_string()),
            Some(
                "[default_tool] names approver group \"nobody\", which is not defined in [groups]"
                    .into()
            )
        );
    }
}
