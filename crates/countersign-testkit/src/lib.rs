//! Builders for signed evidence, registries and CASE documents.
//!
//! Tests, benchmarks, the conformance generator and the service tests all need "an approver's
//! authenticator signed this decision over this action"; this crate is the one place that knows how
//! to produce it with the software authenticator. Everything is deterministic: nonces are derived
//! from labels, keys from fixture seeds.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "test support: a builder given bad fixture input fails the test with a message"
)]

use countersign::{
    Action, ApprovalResult, ApprovalStatus, CredentialRecord, Decision, EvidenceEntry,
    ProfileRegistry, RegistryDocument, WEBAUTHN_ASSERTION_FORMAT, admit_fields, op_hash,
};
use countersign_softkey::{AssertionRequest, AssertionResponse, Ceremony, SoftKey};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

pub use countersign_softkey::{Flags, Part, SignatureQuirk};

/// The relying party of the worked example.
pub const RP_ID: &str = "pay.example.com";
/// The approval page's origin.
pub const ORIGIN: &str = "https://pay.example.com";
/// The verifier's clock in every fixture.
pub const NOW: &str = "2026-11-20T10:00:00Z";
/// When fixture assertions were received (one minute before [`NOW`]).
pub const ASSERTION_AT: &str = "2026-11-20T09:59:00Z";

/// The worked example's payment fields: 40,000.00 EUR to `destination`.
pub fn payment_fields(destination: &str) -> Value {
    json!({
        "amount": "40000.00",
        "currency": "EUR",
        "source_account": "ops-main",
        "destination_account": destination,
        "reference": "INV-2291",
    })
}

/// The worked example's action (profile `countersign.payment/1`).
pub fn payment_action(destination: &str) -> Action {
    Action::new(
        "countersign.payment/1",
        payment_fields(destination).to_string(),
    )
}

/// A generic tool-call action.
pub fn tool_call_action(agent_id: &str, tool_name: &str, params: Value) -> Action {
    let fields = json!({"agent_id": agent_id, "tool_name": tool_name, "params": params});
    Action::new("countersign.tool-call/1", fields.to_string())
}

/// An MCP tool-call action (profile `countersign.mcp-tool-call/1`): the call to `server_id`.
pub fn mcp_tool_call_action(
    agent_id: &str,
    server_id: &str,
    tool_name: &str,
    params: Value,
) -> Action {
    let fields = json!({"agent_id": agent_id, "server_id": server_id, "tool_name": tool_name,
                        "params": params});
    Action::new(countersign::MCP_TOOL_CALL_PROFILE, fields.to_string())
}

/// A deterministic 32-byte nonce derived from a label.
pub fn nonce(label: &str) -> [u8; 32] {
    Sha256::digest(format!("countersign-testkit nonce: {label}").as_bytes()).into()
}

/// A fixture key by name (e.g. `alice-es256`); panics on an unknown name (test code only).
pub fn key(name: &str) -> SoftKey {
    match SoftKey::fixture(name) {
        Ok(key) => key,
        Err(e) => panic!("fixture key {name}: {e}"),
    }
}

/// The op_hash of `action` with `decision` under the built-in profiles.
pub fn op_hash_of(action: &Action, decision: Decision) -> [u8; 32] {
    let registry = ProfileRegistry::builtin();
    let Some(profile) = registry.get(&action.profile) else {
        panic!("profile {} is not built in", action.profile)
    };
    match admit_fields(profile, &action.fields_json) {
        Ok(fields) => op_hash(profile, decision, &fields).0,
        Err(e) => panic!("fixture action is inadmissible: {e}"),
    }
}

/// `nonce || op_hash(action, decision)`.
pub fn challenge(nonce: &[u8; 32], action: &Action, decision: Decision) -> Vec<u8> {
    let mut c = nonce.to_vec();
    c.extend_from_slice(&op_hash_of(action, decision));
    c
}

/// The registry record of a fixture key enrolled for `principal` (no attestation, counter 0).
pub fn enroll(key: &SoftKey, principal: &str) -> CredentialRecord {
    CredentialRecord {
        credential_id: key.credential_id().to_vec(),
        principal: principal.to_owned(),
        public_key: key.cose_public_key(),
        aaguid: None,
        backup_eligible: None,
        attestation: None,
        sign_count: 0,
        revoked: false,
    }
}

/// A registry document from records.
pub fn registry(records: impl IntoIterator<Item = CredentialRecord>) -> RegistryDocument {
    RegistryDocument {
        credentials: records.into_iter().collect(),
    }
}

/// How to sign one evidence entry. Start from [`Signing::new`] and adjust fields.
#[derive(Clone, Debug)]
pub struct Signing {
    /// The decision the authenticator signs (inside op_hash).
    pub decision: Decision,
    pub nonce: [u8; 32],
    /// The assertion request; its challenge is filled in from nonce and op_hash unless
    /// `keep_challenge` is set.
    pub request: AssertionRequest,
    pub keep_challenge: bool,
    pub assertion_at: String,
}

impl Signing {
    /// Sign `decision` with UP+UV, counter 1, for the worked example's RP and origin.
    pub fn new(decision: Decision, nonce_label: &str) -> Self {
        Self {
            decision,
            nonce: nonce(nonce_label),
            request: AssertionRequest::from(Ceremony::get(RP_ID, ORIGIN, Vec::new())),
            keep_challenge: false,
            assertion_at: ASSERTION_AT.to_owned(),
        }
    }
}

/// Sign with `key` over `action` and return the raw authenticator response.
pub fn assert(key: &SoftKey, action: &Action, signing: &Signing) -> AssertionResponse {
    let mut request = signing.request.clone();
    if !signing.keep_challenge {
        request.ceremony.challenge = challenge(&signing.nonce, action, signing.decision);
    }
    match key.assert(&request) {
        Ok(resp) => resp,
        Err(e) => panic!("softkey assertion failed: {e}"),
    }
}

/// Package an authenticator response as a `webauthn.assertion/1` evidence entry.
pub fn entry(response: &AssertionResponse, action: &Action, signing: &Signing) -> EvidenceEntry {
    EvidenceEntry {
        format: WEBAUTHN_ASSERTION_FORMAT.to_owned(),
        decision: signing.decision,
        canonicalization_profile: action.profile.clone(),
        credential_id: response.credential_id.clone(),
        client_data_json: response.client_data_json.clone(),
        authenticator_data: response.authenticator_data.clone(),
        signature: response.signature.clone(),
        aaguid: None,
        attestation_ref: None,
        nonce: signing.nonce.to_vec(),
        op_hash: op_hash_of(action, signing.decision).to_vec(),
        assertion_at: signing.assertion_at.clone(),
        co_signatures: Vec::new(),
    }
}

/// Sign and package in one step.
pub fn evidence(key: &SoftKey, action: &Action, signing: &Signing) -> EvidenceEntry {
    entry(&assert(key, action, signing), action, signing)
}

/// An ApprovalResult with `status` and evidence entries.
pub fn result(
    status: ApprovalStatus,
    evidence: impl IntoIterator<Item = EvidenceEntry>,
) -> ApprovalResult {
    ApprovalResult {
        approval_id: Some("apr_worked_example".to_owned()),
        approver_evidence: evidence.into_iter().map(Into::into).collect(),
        ..ApprovalResult::bare(status)
    }
}

/// The gateway the test grants name, unless a test is about another.
pub const GRANT_GATEWAY: &str = "ci-gw";

/// The `calls` member of a standing grant: the call profile, the MCP server (for a profile that
/// signs one) and the gateways it covers.
pub fn grant_calls(profile: &str, server_id: Option<&str>, gateways: &[&str]) -> Value {
    let mut calls = json!({"profile": profile, "gateways": gateways});
    if let Some(server) = server_id {
        calls["server_id"] = json!(server);
    }
    calls
}

/// The `calls` of a grant for generic tool calls through [`GRANT_GATEWAY`].
pub fn tool_call_grant_calls() -> Value {
    grant_calls(countersign::TOOL_CALL_PROFILE, None, &[GRANT_GATEWAY])
}

/// The signed fields of a standing grant (`countersign.standing-grant/2`) for generic tool calls
/// through [`GRANT_GATEWAY`] ([`tool_call_grant_calls`]; a test about other calls replaces
/// `calls`): agent and tool patterns, argument constraints (the scope language's JSON form),
/// `max_uses`, `expires_at`.
pub fn standing_grant_fields(
    agent: &str,
    tool: &str,
    constraints: Value,
    max_uses: u64,
    expires_at: &str,
) -> Value {
    json!({
        "calls": tool_call_grant_calls(),
        "agent_id": agent,
        "tool_name": tool,
        "constraints": constraints,
        "max_uses": max_uses,
        "expires_at": expires_at,
    })
}

/// A standing grant as the action its approver signs.
pub fn standing_grant_action(fields: &Value) -> Action {
    Action::new(countersign::STANDING_GRANT_PROFILE, fields.to_string())
}

/// The result a service returns for a call approved under a standing grant: APPROVED, the
/// grant's evidence, and the `standing_grant` member naming the grant's fields and this use.
pub fn standing_result(
    fields: &Value,
    use_number: u64,
    evidence: impl IntoIterator<Item = EvidenceEntry>,
) -> ApprovalResult {
    ApprovalResult {
        standing_grant: Some(countersign::StandingGrantUse {
            grant_id: "apv_standing_example".to_owned(),
            fields: fields.clone(),
            use_number,
        }),
        ..result(ApprovalStatus::Approved, evidence)
    }
}

/// The worked example's policy as CASE JSON (evidence and UV required).
pub fn policy_json() -> Value {
    json!({
        "rp_id": RP_ID,
        "origins": [ORIGIN],
        "require_evidence": true,
        "require_user_verification": true,
        "quorum": 1,
        "max_age_seconds": 300,
    })
}

/// A CASE document.
pub fn case_json(
    action: &Action,
    result: &Value,
    registry: &RegistryDocument,
    policy: &Value,
    now: &str,
) -> Value {
    let fields: Value = serde_json::from_slice(&action.fields_json).unwrap_or(Value::Null);
    json!({
        "action": {"profile": action.profile, "fields": fields},
        "result": result,
        "registry": registry_json(registry),
        "policy": policy,
        "now": now,
    })
}

/// A registry document as JSON.
pub fn registry_json(registry: &RegistryDocument) -> Value {
    serde_json::to_value(registry).unwrap_or(Value::Null)
}

/// An approval result as JSON.
pub fn result_json(result: &ApprovalResult) -> Value {
    serde_json::to_value(result).unwrap_or(Value::Null)
}

/// A replay state that remembers nothing, so one record can be verified again and again in a
/// benchmark. Its lookups still run, as they would against a real state. Never use it to decide.
#[derive(Debug, Default, Clone, Copy)]
pub struct Forgetful;

impl countersign::ReplayState for Forgetful {
    fn is_spent(&self, _nonce: &[u8]) -> bool {
        false
    }
    fn sign_count(&self, _credential_id: &[u8]) -> Option<u32> {
        None
    }
    fn record(&mut self, _nonce: &[u8], _credential_id: &[u8], _sign_count: u32) {}
}

/// Everything the hot-path measurements need: a 10,000-credential registry, one approval signed
/// by `key_name` for a tool call, and the signed message for the raw-verify baseline.
#[derive(Debug)]
pub struct HotPath {
    pub key: SoftKey,
    pub registry: countersign::CredentialRegistry,
    pub policy: countersign::Policy,
    pub action: Action,
    pub result: ApprovalResult,
    pub response: AssertionResponse,
    /// `authenticatorData || SHA-256(clientDataJSON)`.
    pub signed: Vec<u8>,
    pub now: time::OffsetDateTime,
}

/// Build a [`HotPath`]: `key_name` approves, `filler_name`'s key fills the other 9,999 entries
/// under distinct credential ids.
pub fn hot_path(key_name: &str, filler_name: &str) -> HotPath {
    const REGISTRY_SIZE: usize = 10_000;
    let key = self::key(key_name);
    let filler = self::key(filler_name);
    let mut records: Vec<CredentialRecord> = (0..REGISTRY_SIZE - 1)
        .map(|i| {
            let id = Sha256::digest(format!("filler credential {i}").as_bytes()).to_vec();
            enroll(
                &filler.clone().with_credential_id(id),
                &format!("user{i}@example.com"),
            )
        })
        .collect();
    records.push(enroll(&key, "alice@example.com"));
    let registry = match countersign::CredentialRegistry::from_document(self::registry(records)) {
        Ok(registry) => registry,
        Err(e) => panic!("hot-path registry: {e}"),
    };
    let action = tool_call_action(
        "agent-7",
        "payments.transfer",
        json!({"amount": "40000.00", "currency": "EUR", "to": "account-A"}),
    );
    let signing = Signing::new(Decision::Approved, "bench");
    let response = assert(&key, &action, &signing);
    let result = self::result(
        ApprovalStatus::Approved,
        [entry(&response, &action, &signing)],
    );
    let signed = countersign_softkey::signed_message(
        &response.authenticator_data,
        &response.client_data_json,
    );
    let now = match time::OffsetDateTime::parse(NOW, &time::format_description::well_known::Rfc3339)
    {
        Ok(now) => now,
        Err(e) => panic!("NOW: {e}"),
    };
    HotPath {
        key,
        registry,
        policy: countersign::Policy::new(RP_ID, [ORIGIN]),
        action,
        result,
        response,
        signed,
        now,
    }
}
