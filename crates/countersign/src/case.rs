//! CASE: one self-contained verification question, as `countersign verify` and the conformance
//! vectors take it: `{"action", "result", "registry", "policy", "now"}`.

use crate::policy::{Policy, PolicyError};
use crate::registry::{CredentialRegistry, RegistryError};
use crate::replay::ReplayState;
use crate::result::{ApprovalResult, ResultError};
use crate::verify::{Action, Verdict, verify_evidence_with};
use crate::webauthn::SignatureBackend;
use serde::Deserialize;
use serde_json::value::RawValue;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// A parsed CASE document.
#[derive(Debug, Clone)]
pub struct Case {
    /// The action the verifier is about to authorize: a profile id and its fields.
    pub action: Action,
    /// What the approval callback returned for it, evidence included.
    pub result: ApprovalResult,
    /// The enrolled public keys the evidence is checked against.
    pub registry: CredentialRegistry,
    /// The verifier's rules, already validated ([`Policy::validate`]).
    pub policy: Policy,
    /// The verifier's clock at the time of the question; freshness and expiry are judged against it.
    pub now: OffsetDateTime,
}

/// Why a CASE document is unusable (the CLI's exit code 2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CaseError {
    /// The document is not one JSON object with exactly the five members.
    #[error("CASE is not a JSON object with action, result, registry, policy and now: {0}")]
    Shape(String),
    #[error(
        "CASE action must be {{\"profile\": string, \"fields\": object, \"tool\"?: string}}: {0}"
    )]
    /// `action` does not have the profile/fields/tool shape.
    Action(String),
    /// `result` is not an approval result document.
    #[error("CASE result: {0}")]
    Result(#[from] ResultError),
    /// `registry` is not a credential registry, or one of its keys does not parse.
    #[error("CASE registry: {0}")]
    Registry(#[from] RegistryError),
    /// `policy` does not parse as a policy document.
    #[error("CASE policy: {0}")]
    Policy(String),
    /// The policy parsed but cannot be applied ([`Policy::validate`]).
    #[error("CASE policy: {0}")]
    ContradictoryPolicy(#[from] PolicyError),
    /// `now` is not an RFC 3339 timestamp.
    #[error("CASE now {0:?} is not an RFC 3339 timestamp")]
    Now(String),
}

impl CaseError {
    /// The CASE member that makes the document unusable: `case` (its shape), `action`,
    /// `result`, `registry`, `policy` or `now`. The conformance harness answers with it.
    pub fn member(&self) -> &'static str {
        match self {
            Self::Shape(_) => "case",
            Self::Action(_) => "action",
            Self::Result(_) => "result",
            Self::Registry(_) => "registry",
            Self::Policy(_) | Self::ContradictoryPolicy(_) => "policy",
            Self::Now(_) => "now",
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCase<'a> {
    #[serde(borrow)]
    action: &'a RawValue,
    #[serde(borrow)]
    result: &'a RawValue,
    #[serde(borrow)]
    registry: &'a RawValue,
    #[serde(borrow)]
    policy: &'a RawValue,
    now: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAction<'a> {
    profile: String,
    #[serde(borrow)]
    fields: &'a RawValue,
    #[serde(default, deserialize_with = "not_null::tool")]
    tool: Option<String>,
}

/// `tool` absent means the action names no tool; `null` is refused, not read as absent (see
/// `crate::absent_or_value`).
mod not_null {
    crate::absent_or_value::refuse_null! { tool => "tool" }
}

impl Case {
    /// Parse a CASE document. The action's fields stay raw: admission looks at their bytes.
    pub fn from_json(bytes: &[u8]) -> Result<Self, CaseError> {
        let raw: RawCase<'_> =
            serde_json::from_slice(bytes).map_err(|e| CaseError::Shape(e.to_string()))?;
        let action: RawAction<'_> =
            serde_json::from_str(raw.action.get()).map_err(|e| CaseError::Action(e.to_string()))?;
        let result = ApprovalResult::from_json(raw.result.get().as_bytes())?;
        let registry = CredentialRegistry::from_json(raw.registry.get().as_bytes())?;
        let policy: Policy =
            serde_json::from_str(raw.policy.get()).map_err(|e| CaseError::Policy(e.to_string()))?;
        policy.validate()?;
        let now = OffsetDateTime::parse(&raw.now, &Rfc3339)
            .map_err(|_| CaseError::Now(raw.now.clone()))?;
        let mut parsed_action =
            Action::new(action.profile, action.fields.get().as_bytes().to_vec());
        parsed_action.tool = action.tool;
        Ok(Self {
            action: parsed_action,
            result,
            registry,
            policy,
            now,
        })
    }

    /// Verify the case with `backend` and `replay`.
    pub fn verify_with(
        &self,
        backend: &dyn SignatureBackend,
        replay: &mut dyn ReplayState,
    ) -> Verdict {
        verify_evidence_with(
            backend,
            &self.policy,
            &self.action,
            &self.result,
            &self.registry,
            replay,
            self.now,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn action_tool_may_be_absent_or_a_string_but_not_null() {
        let action = |extra: &str| format!(r#"{{"profile":"p","fields":{{}}{extra}}}"#);
        let parse = |text: &str| serde_json::from_str::<RawAction<'_>>(text).map(|a| a.tool);
        assert_eq!(parse(&action("")).ok(), Some(None));
        assert_eq!(
            parse(&action(r#","tool":"payments.transfer""#)).ok(),
            Some(Some("payments.transfer".to_owned()))
        );
        let null = parse(&action(r#","tool":null"#))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(null.contains("\"tool\" is null"), "{null}");
    }
}
