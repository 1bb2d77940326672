//! A call approved under an approver-signed standing grant (docs/SPEC.md §14).
//!
//! The evidence is the grant's, not the call's: the approver signed `nonce || op_hash` where the
//! op_hash covers the grant's fields under `countersign.standing-grant/2` (its scope), possibly
//! days before this call. The checks therefore differ from a per-call approval in four places,
//! and only there:
//!
//! - each entry binds the grant's fields, carried in the result's `standing_grant.fields`;
//! - the call must satisfy the grant's scope (the profile and MCP server it names, agent and
//!   tool patterns, every argument constraint) and the grant must not have expired at `now`,
//!   the time of the call;
//! - freshness is the grant's expiry rather than `max_age_seconds` (an old signature is the
//!   point of a standing grant), though an assertion dated in the future is still `stale`;
//! - the single-use key is `nonce || use` (one signature, many calls, each use spendable once),
//!   and the signature counter is not compared: the authenticator has signed other things since.
//!
//! The last two are the entry checks' only differences, and `EntryMode::Grant` (in `entry.rs`)
//! carries them; the entries themselves go through the same `verify_entries` as a call's.
//!
//! `max_uses` is checked only as far as an offline verifier can: the use number the service
//! assigned must not exceed it. Whether the service really handed out each number once is
//! beyond what any single record can show (docs/THREAT-MODEL.md).

use super::entry::EntryMode;
use super::{Bound, Context, Outcome, VerifyError, deny_after_evidence};
use crate::canon::{self, CanonError, Decision, NfcMode, STANDING_GRANT_PROFILE};
use crate::policy::Policy;
use crate::result::{ApprovalResult, ApprovalStatus, StandingGrantUse};
use crate::scope::{Calls, OutOfScope, Scope};
use serde_json::Value;
use time::format_description::well_known::Rfc3339;

/// The fields a call's profile must declare for a standing grant to be able to cover it: who
/// calls, which tool, with which arguments. The generic tool-call profile has them.
const CALL_FIELDS: [&str; 3] = ["agent_id", "tool_name", "params"];

/// The field of a call profile that names its server (the MCP tool-call profile has it).
const SERVER_FIELD: &str = "server_id";

/// The grant's field naming the calls it covers.
const CALLS_FIELD: &str = "calls";

/// The replay key of one use of a grant: the grant's nonce and the use number. It is 40 bytes
/// long, so it can never equal a 32-byte per-call nonce.
pub(super) fn use_key(nonce: &[u8], use_number: u64) -> Vec<u8> {
    let mut key = Vec::with_capacity(nonce.len() + 8);
    key.extend_from_slice(nonce);
    key.extend_from_slice(&use_number.to_be_bytes());
    key
}

/// A standing grant's signed scope: the calls it covers (profile, MCP server, gateways) and the
/// shared scope language's rules (agent and tool patterns, constraints, uses, expiry).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrantScope {
    /// Which calls: profile, server, gateways.
    pub calls: Calls,
    /// Which agents, tools and arguments, until when, how often.
    pub scope: Scope,
}

/// A standing grant's scope read from its signed fields: `calls` as it is, and the scope's JSON
/// form with the agent and tool patterns under the names `agent_id` and `tool_name`.
pub fn scope_of_grant_fields(fields: &Value) -> Result<GrantScope, String> {
    let Value::Object(map) = fields else {
        return Err("the grant's fields are not an object".into());
    };
    // A grant that does not say which calls it covers covers none (grants signed under the
    // withdrawn version 1 of the profile never do: their fields do not admit under version 2).
    let calls = map
        .get(CALLS_FIELD)
        .ok_or("the grant names no calls (profile, server, gateways): it covers none")?;
    let calls: Calls = serde_json::from_value(calls.clone()).map_err(|e| format!("calls: {e}"))?;
    let mut scope = serde_json::Map::new();
    for (from, to) in [
        ("agent_id", "agent"),
        ("tool_name", "tool"),
        ("constraints", "constraints"),
        ("max_uses", "max_uses"),
        ("expires_at", "expires_at"),
    ] {
        if let Some(v) = map.get(from) {
            scope.insert(to.to_owned(), v.clone());
        }
    }
    let scope = Scope::from_value(Value::Object(scope)).map_err(|e| e.to_string())?;
    Ok(GrantScope { calls, scope })
}

/// The signed fields of a standing grant for `grant`: `calls`, then the scope's serialized form
/// (deterministic, `expires_at` re-formatted from its parsed value) with the agent and tool
/// patterns under the names `agent_id` and `tool_name`.
pub fn grant_fields_of_scope(grant: &GrantScope) -> Result<Value, String> {
    let Value::Object(mut map) = serde_json::to_value(&grant.scope).map_err(|e| e.to_string())?
    else {
        return Err("a scope serializes to an object".into());
    };
    let mut fields = serde_json::Map::new();
    fields.insert(
        CALLS_FIELD.to_owned(),
        serde_json::to_value(&grant.calls).map_err(|e| e.to_string())?,
    );
    for (from, to) in [
        ("agent", "agent_id"),
        ("tool", "tool_name"),
        ("constraints", "constraints"),
        ("max_uses", "max_uses"),
        ("expires_at", "expires_at"),
    ] {
        let value = map
            .remove(from)
            .ok_or_else(|| format!("a scope has no {from:?}"))?;
        fields.insert(to.to_owned(), value);
    }
    Ok(Value::Object(fields))
}

/// The call the gateway is about to run, as the grant's scope sees it.
struct Call<'v> {
    profile: &'v str,
    /// The call's signed `server_id`, for a profile that has one.
    server_id: Option<&'v str>,
    agent_id: &'v str,
    tool_name: &'v str,
    params: &'v Value,
}

impl<'v> Call<'v> {
    /// §14.3 step 2: the bound call as a grant's scope reads it. A profile without the three
    /// call fields cannot be covered, nor a server a grant could not name exactly (an operator
    /// profile typing `server_id` as something other than a string is refused, not read as "no
    /// server").
    fn of(bound: &'v Bound<'_>) -> Result<Self, VerifyError> {
        let value = bound.fields.as_value();
        let not_a_call = || VerifyError::StandingNotToolCall {
            profile: bound.profile.id.clone(),
        };
        let [agent_id, tool_name, params] = CALL_FIELDS.map(|name| value.get(name));
        let (Some(Value::String(agent_id)), Some(Value::String(tool_name)), Some(params)) =
            (agent_id, tool_name, params)
        else {
            return Err(not_a_call());
        };
        let server_id = match value.get(SERVER_FIELD) {
            None => None,
            Some(Value::String(server)) => Some(server.as_str()),
            Some(_) => return Err(not_a_call()),
        };
        Ok(Self {
            profile: &bound.profile.id,
            server_id,
            agent_id,
            tool_name,
            params,
        })
    }
}

impl<'a> Context<'a> {
    /// SPEC §14.3 in order: verify a result that carries `standing_grant`.
    pub(super) fn decide_standing(
        &mut self,
        result: &ApprovalResult,
        standing: &StandingGrantUse,
    ) -> Outcome {
        // §14.3 step 1: a grant only ever approves, and only with evidence.
        if result.status != ApprovalStatus::Approved {
            return Outcome::deny_with(
                result,
                VerifyError::StatusContradictsEvidence {
                    status: result.status.as_str(),
                    signed: "APPROVED",
                },
            );
        }
        if result.approver_evidence.is_empty() {
            return Outcome::deny_with(result, VerifyError::EvidenceMissing { status: "APPROVED" });
        }
        // §14.3 step 2: the call, bound as any action (§6 step 3) and readable as a tool call.
        let bound_call = match self.bind_action() {
            Ok(bound) => bound,
            Err(e) => return Outcome::deny_with(result, e),
        };
        let call = match Call::of(&bound_call) {
            Ok(call) => call,
            Err(e) => return Outcome::deny_with(result, e),
        };
        // §14.3 step 3: the grant's signed fields under its pinned profile, read as a scope.
        let (mut grant, scope) = match self.bind_grant(standing) {
            Ok(bound) => bound,
            Err(e) => return Outcome::deny_with(result, e),
        };
        // §14.3 steps 4–5: every entry binds the grant, this use spendable once; keys recorded.
        let mode = EntryMode::Grant {
            use_number: standing.use_number,
        };
        let approvers = match self.verify_entries(&result.approver_evidence, &mut grant, mode) {
            Ok(approvers) => approvers,
            Err(e) => return Outcome::deny_with(result, e),
        };
        // §14.3 step 5: a signed refusal of the grant is a veto like any other (§6 step 6).
        if approvers.iter().any(|a| a.decision == Decision::Denied) {
            return self.apply_policy(result, approvers);
        }
        // §14.3 steps 6–7: the grant covers this call, now.
        if let Err(error) = self.check_coverage(&scope, standing, &call) {
            return deny_after_evidence(error, approvers);
        }
        // §14.3 step 8: assurance and quorum, as for any approval.
        self.apply_policy(result, approvers)
    }

    /// §14.3 step 3: resolve the standing-grant profile in the verifier's registry and admit the
    /// grant's fields under it (NFC required: the service signs only NFC scopes), then read the
    /// scope.
    fn bind_grant(
        &self,
        standing: &StandingGrantUse,
    ) -> Result<(Bound<'a>, GrantScope), VerifyError> {
        let policy: &'a Policy = self.policy;
        let profile = policy.profiles.get(STANDING_GRANT_PROFILE).ok_or_else(|| {
            VerifyError::Action(CanonError::UnknownProfile(
                STANDING_GRANT_PROFILE.to_owned(),
            ))
        })?;
        let raw = serde_json::to_vec(&standing.fields)
            .map_err(|e| VerifyError::StandingGrantUnusable(e.to_string()))?;
        let fields = canon::admit_fields_with(profile, &raw, NfcMode::Require)
            .map_err(|e| VerifyError::StandingGrantUnusable(e.to_string()))?;
        let scope =
            scope_of_grant_fields(fields.as_value()).map_err(VerifyError::StandingGrantUnusable)?;
        Ok((
            Bound {
                profile,
                fields,
                approved: None,
                denied: None,
            },
            scope,
        ))
    }

    /// §14.3 steps 6–7: expiry, then the use number, then the call's profile and server, then the
    /// scope's patterns and constraints. The gateway is not checked here: the verdict does not know which gateway
    /// asks (the service checks it before spending a use, SPEC §14.5).
    fn check_coverage(
        &self,
        grant: &GrantScope,
        standing: &StandingGrantUse,
        call: &Call<'_>,
    ) -> Result<(), VerifyError> {
        let scope = &grant.scope;
        // Expiry first, so an expired grant says so whatever else the call does.
        if self.now >= scope.expires_at.instant() {
            return Err(VerifyError::StandingGrantExpired {
                expires_at: scope.expires_at.as_str().to_owned(),
                now: self.now.format(&Rfc3339).unwrap_or_default(),
            });
        }
        scope
            .admits_use(standing.use_number)
            .and_then(|()| grant.calls.covers(call.profile, call.server_id))
            .and_then(|()| scope.covers(call.agent_id, call.tool_name, call.params, self.now))
            .map_err(|e| match e {
                OutOfScope::Expired { expires_at, at } => VerifyError::StandingGrantExpired {
                    expires_at,
                    now: at,
                },
                other => VerifyError::OutOfScope(other),
            })
    }
}
