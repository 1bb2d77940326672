//! Building blocks for evidence vectors: a CASE under construction, signing with fixture keys, and
//! expected verdicts.
//!
//! Expected verdicts are written by hand from docs/SPEC.md, never computed by the verifier: a
//! vector that records whatever our code answers would prove nothing.

use crate::vectors::{EvidenceExpected, Input};
use countersign::{Aaguid, AttestationRecord, CredentialRecord, Decision, EvidenceEntry};
use countersign_softkey::{AssertionResponse, SoftKey, cbor};
use countersign_testkit as tk;
use serde_json::{Value, json};

pub(crate) use countersign::Action;
pub(crate) use tk::{Signing, payment_action};

/// The worked example's destinations.
pub(crate) const ACCOUNT_A: &str = "account-A";
pub(crate) const ACCOUNT_B: &str = "account-B";

/// A CASE under construction.
#[derive(Clone, Debug)]
pub(crate) struct Case {
    pub action: Action,
    /// Extra members written into the CASE's action object as given (e.g. `"tool": null`, which
    /// an `Action` cannot hold).
    pub action_members: serde_json::Map<String, Value>,
    /// Replaces the action's fields by this exact text in the CASE (lexical traps).
    pub fields_text: Option<String>,
    pub result: Value,
    /// Replaces the result by this exact text in the CASE (duplicate members).
    pub result_text: Option<String>,
    pub registry: Vec<CredentialRecord>,
    /// Raw registry entries appended after `registry` (keys the softkey cannot make).
    pub extra_credentials: Vec<Value>,
    pub policy: Value,
    pub now: String,
}

const FIELDS_PLACEHOLDER: &str = "\u{1}countersign-conformance fields\u{1}";
const RESULT_PLACEHOLDER: &str = "\u{1}countersign-conformance result\u{1}";

impl Case {
    /// A case for `action` with `status` and `entries`, the fixture keys `enrolled` registered.
    pub(crate) fn new(
        action: Action,
        status: &str,
        entries: Vec<Value>,
        enrolled: &[&str],
    ) -> Self {
        let mut result = json!({"status": status, "approval_id": "apr_conformance"});
        if !entries.is_empty() {
            result["approver_evidence"] = Value::Array(entries);
        }
        Self {
            action,
            action_members: serde_json::Map::new(),
            fields_text: None,
            result,
            result_text: None,
            registry: enrolled.iter().map(|name| enroll(name)).collect(),
            extra_credentials: Vec::new(),
            policy: tk::policy_json(),
            now: tk::NOW.to_owned(),
        }
    }

    /// The `i`th evidence entry, for tampering.
    pub(crate) fn entry(&mut self, i: usize) -> &mut Value {
        &mut self.result["approver_evidence"][i]
    }

    /// The registry record of fixture key `name`.
    pub(crate) fn record(&mut self, name: &str) -> &mut CredentialRecord {
        let id = key(name).credential_id().to_vec();
        match self.registry.iter_mut().find(|r| r.credential_id == id) {
            Some(r) => r,
            None => panic!("{name} is not enrolled in this case"),
        }
    }

    /// The CASE as a vector input.
    pub(crate) fn input(&self) -> Input {
        let fields = match &self.fields_text {
            Some(_) => Value::String(FIELDS_PLACEHOLDER.to_owned()),
            None => match serde_json::from_slice(&self.action.fields_json) {
                Ok(v) => v,
                Err(e) => panic!("fixture action fields are not JSON: {e}"),
            },
        };
        let mut credentials: Vec<Value> = self
            .registry
            .iter()
            .map(|r| serde_json::to_value(r).unwrap_or(Value::Null))
            .collect();
        credentials.extend(self.extra_credentials.iter().cloned());
        let mut action = json!({"profile": self.action.profile, "fields": fields});
        if let Some(tool) = &self.action.tool {
            action["tool"] = json!(tool);
        }
        if let Some(object) = action.as_object_mut() {
            object.extend(self.action_members.clone());
        }
        let result = match &self.result_text {
            Some(_) => Value::String(RESULT_PLACEHOLDER.to_owned()),
            None => self.result.clone(),
        };
        let case = json!({
            "action": action,
            "result": result,
            "registry": {"credentials": credentials},
            "policy": self.policy,
            "now": self.now,
        });
        if self.fields_text.is_none() && self.result_text.is_none() {
            return Input::Json(case);
        }
        let mut text = serde_json::to_string(&case).unwrap_or_default();
        for (placeholder, raw) in [
            (FIELDS_PLACEHOLDER, &self.fields_text),
            (RESULT_PLACEHOLDER, &self.result_text),
        ] {
            if let Some(raw) = raw {
                let quoted = serde_json::to_string(placeholder).unwrap_or_default();
                text = text.replacen(&quoted, raw, 1);
            }
        }
        Input::Text(text)
    }
}

/// A fixture key by name.
pub(crate) fn key(name: &str) -> SoftKey {
    tk::key(name)
}

/// The principal a fixture key is enrolled for: the name before the first `-`.
pub(crate) fn principal(name: &str) -> &str {
    name.split('-').next().unwrap_or(name)
}

/// The registry record of fixture key `name` (no attestation, counter 0).
pub(crate) fn enroll(name: &str) -> CredentialRecord {
    tk::enroll(&key(name), principal(name))
}

/// Mark a record as enrolled with a packed attestation whose chain verified, and its AAGUID.
pub(crate) fn attested(record: &mut CredentialRecord) {
    record.aaguid = Some(Aaguid(countersign_softkey::FIXTURE_AAGUID));
    record.attestation = Some(AttestationRecord {
        format: "packed".to_owned(),
        chain_verified: true,
        root: Some("countersign fixture root".to_owned()),
    });
}

/// Sign `decision` over `action` with fixture key `name`; `tweak` adjusts the request first and
/// `tamper` the response after signing.
pub(crate) fn signed_with(
    name: &str,
    action: &Action,
    decision: Decision,
    tweak: impl FnOnce(&mut Signing),
    tamper: impl FnOnce(&mut AssertionResponse),
) -> Value {
    let mut signing = Signing::new(decision, &format!("{name}/{}", decision.as_str()));
    tweak(&mut signing);
    let mut response = tk::assert(&key(name), action, &signing);
    tamper(&mut response);
    entry_value(&tk::entry(&response, action, &signing))
}

/// Sign with a request tweak only.
pub(crate) fn signed(
    name: &str,
    action: &Action,
    decision: Decision,
    tweak: impl FnOnce(&mut Signing),
) -> Value {
    signed_with(name, action, decision, tweak, |_| {})
}

/// A plain, valid entry.
pub(crate) fn good(name: &str, action: &Action, decision: Decision) -> Value {
    signed(name, action, decision, |_| {})
}

pub(crate) fn entry_value(entry: &EvidenceEntry) -> Value {
    match serde_json::to_value(entry) {
        Ok(v) => v,
        Err(e) => panic!("evidence entry does not serialize: {e}"),
    }
}

/// The worked example's action for `destination`.
pub(crate) fn pay(destination: &str) -> Action {
    payment_action(destination)
}

/// A tool-call action.
pub(crate) fn tool(params: Value) -> Action {
    tk::tool_call_action("agent-7", "payments.transfer", params)
}

/// An MCP tool-call action (`countersign.mcp-tool-call/1`).
pub(crate) fn mcp(agent: &str, server: &str, tool_name: &str, arguments: Value) -> Action {
    let fields = serde_json::json!({"agent_id": agent, "server_id": server,
        "tool_name": tool_name, "params": arguments});
    Action::new("countersign.mcp-tool-call/1", fields.to_string())
}

/// A single approval by fixture key `name` of the worked example's payment to account A.
pub(crate) fn approve(name: &str) -> Case {
    let action = pay(ACCOUNT_A);
    let entry = good(name, &action, Decision::Approved);
    Case::new(action, "APPROVED", vec![entry], &[name])
}

/// A single approval with a request tweak.
pub(crate) fn approve_with(name: &str, tweak: impl FnOnce(&mut Signing)) -> Case {
    let action = pay(ACCOUNT_A);
    let entry = signed(name, &action, Decision::Approved, tweak);
    Case::new(action, "APPROVED", vec![entry], &[name])
}

/// A single approval tampered with after signing.
pub(crate) fn approve_tampered(name: &str, tamper: impl FnOnce(&mut AssertionResponse)) -> Case {
    let action = pay(ACCOUNT_A);
    let entry = signed_with(name, &action, Decision::Approved, |_| {}, tamper);
    Case::new(action, "APPROVED", vec![entry], &[name])
}

/// A single refusal by fixture key `name`.
pub(crate) fn refuse(name: &str) -> Case {
    let action = pay(ACCOUNT_A);
    let entry = good(name, &action, Decision::Denied);
    Case::new(action, "DENIED", vec![entry], &[name])
}

/// A COSE_Key the verifier cannot use: an ES512 (P-521) public key. The coordinates are fixed
/// bytes; the algorithm is refused before they are looked at.
pub(crate) fn es512_cose_key() -> Vec<u8> {
    let coordinate = |tag: u8| -> Vec<u8> { (0..66u8).map(|i| i.wrapping_mul(7) ^ tag).collect() };
    cbor::Value::Map(vec![
        (cbor::Value::Int(1), cbor::Value::Int(2)),
        (cbor::Value::Int(3), cbor::Value::Int(-36)),
        (cbor::Value::Int(-1), cbor::Value::Int(3)),
        (cbor::Value::Int(-2), cbor::Value::bytes(coordinate(0x11))),
        (cbor::Value::Int(-3), cbor::Value::bytes(coordinate(0x22))),
    ])
    .encode()
}

// --- expected verdicts ------------------------------------------------------------------------

pub(crate) fn expect(
    effective: &str,
    decision: Option<&str>,
    reason: Option<&str>,
    level: &str,
) -> Value {
    let e = EvidenceExpected {
        effective: effective.to_owned(),
        decision: decision.map(str::to_owned),
        reason_code: reason.map(str::to_owned),
        identity_assurance_level: level.to_owned(),
    };
    serde_json::to_value(e).unwrap_or(Value::Null)
}

/// A CASE that is unusable because of its member `member` (`countersign verify` exits 2): no
/// verdict at all: contradictory and malformed policies.
pub(crate) fn unusable_case(member: &str) -> Value {
    json!({ "unusable_case": member })
}

/// ALLOW of an APPROVED result at `level`.
pub(crate) fn allow(level: &str) -> Value {
    expect("ALLOW", Some("APPROVED"), None, level)
}

/// DENY of an APPROVED result before any evidence verified (assurance `declared`).
pub(crate) fn deny(reason: &str) -> Value {
    expect("DENY", Some("APPROVED"), Some(reason), "declared")
}

/// DENY with an explicit decision and level.
pub(crate) fn deny_as(decision: &str, reason: &str, level: &str) -> Value {
    expect("DENY", Some(decision), Some(reason), level)
}

pub(crate) fn b64(bytes: &[u8]) -> String {
    countersign_softkey::b64url(bytes)
}
