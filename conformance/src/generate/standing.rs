//! Evidence vectors for calls approved under an approver-signed standing grant (SPEC §14): the
//! evidence signs the grant's fields under `countersign.standing-grant/2`; the CASE's action is
//! the later call, checked against the grant's scope, expiry and use number.
//!
//! Revocation and the total of uses are service-side (the service's audit log shows them): no
//! single record can, so there is no vector for them (docs/THREAT-MODEL.md §10). Nor is there
//! one for the gateways a grant names: a CASE does not say which gateway asks, so only the
//! service can hold a call's gateway against them (SPEC §14.5; its tests do). That the list is
//! signed has a vector (`standing::gateways-widened`).

use super::Out;
use super::case::*;
use countersign::Decision::{Approved, Denied};
use countersign_testkit as tk;
use serde_json::{Value, json};

const ALICE: &str = "alice-es256";
/// A day after the vectors' `now`: the grant is in force.
const EXPIRES: &str = "2026-11-21T10:00:00Z";

/// Payments by agent-7 up to 500.00 EUR to `ops-` accounts tagged `rent` or `utilities`, ten
/// times until [`EXPIRES`].
fn grant_fields() -> Value {
    tk::standing_grant_fields(
        "agent-7",
        "payments.*",
        json!([
            {"kind": "max", "arg": "/amount", "max": "500.00"},
            {"kind": "currency", "arg": "/currency", "allowed": ["EUR"]},
            {"kind": "prefix", "arg": "/to", "prefix": "ops-"},
            {"kind": "one_of", "arg": "/tag", "values": ["rent", "utilities", null]},
        ]),
        10,
        EXPIRES,
    )
}

fn params() -> Value {
    json!({"amount": "120.00", "currency": "EUR", "to": "ops-landlord", "tag": "rent"})
}

/// The call agent-7 makes with `params`, run by `payments.transfer`.
pub(super) fn call(agent: &str, tool: &str, params: Value) -> Action {
    tk::tool_call_action(agent, tool, params).with_tool(tool)
}

/// A CASE: `call` approved under the grant `fields`, signed (`decision`) by alice a day before
/// `now` (older than `max_age_seconds`, which does not apply to a grant), as use `use_number`.
pub(super) fn under_grant(
    call: Action,
    fields: &Value,
    decision: countersign::Decision,
    use_number: u64,
) -> Case {
    let grant = tk::standing_grant_action(fields);
    let entry = signed(ALICE, &grant, decision, |s| {
        s.assertion_at = "2026-11-19T10:00:00Z".to_owned();
    });
    let mut case = Case::new(call, "APPROVED", vec![entry], &[ALICE]);
    case.result["standing_grant"] =
        json!({"grant_id": "apv_standing", "fields": fields, "use": use_number});
    case
}

fn covered() -> Case {
    under_grant(
        call("agent-7", "payments.transfer", params()),
        &grant_fields(),
        Approved,
        1,
    )
}

/// DENY after the grant's evidence verified: the signer is known, the level is theirs.
fn out_of_scope() -> Value {
    deny_as("APPROVED", "out_of_scope", "AAL2")
}

pub(crate) fn standing(out: &mut Out) {
    out.ev(
        "standing::in-scope",
        "a call inside every rule of a grant signed a day earlier: ALLOW, the signer as approver",
        &["standing-grant", "tool-call"],
        covered(),
        allow("AAL2"),
    );
    out.ev(
        "standing::last-use",
        "use 10 of a grant allowing 10",
        &["standing-grant", "standing-uses"],
        under_grant(
            call("agent-7", "payments.transfer", params()),
            &grant_fields(),
            Approved,
            10,
        ),
        allow("AAL2"),
    );
    out.ev(
        "standing::use-beyond-max",
        "use 11 of a grant allowing 10: out of scope (the service gave more uses than signed)",
        &["standing-grant", "standing-uses"],
        under_grant(
            call("agent-7", "payments.transfer", params()),
            &grant_fields(),
            Approved,
            11,
        ),
        out_of_scope(),
    );
    out.ev(
        "standing::agent-not-covered",
        "another agent than the grant's pattern",
        &["standing-grant", "standing-scope"],
        under_grant(
            call("agent-8", "payments.transfer", params()),
            &grant_fields(),
            Approved,
            1,
        ),
        out_of_scope(),
    );
    out.ev(
        "standing::tool-pattern-covers",
        "another tool inside the grant's pattern payments.*: the pattern, not one name, is signed",
        &["standing-grant", "standing-scope"],
        under_grant(
            call("agent-7", "payments.refund", params()),
            &grant_fields(),
            Approved,
            1,
        ),
        allow("AAL2"),
    );
    out.ev(
        "standing::tool-not-covered",
        "a tool outside the grant's pattern payments.*",
        &["standing-grant", "standing-scope"],
        under_grant(
            call("agent-7", "accounts.close", params()),
            &grant_fields(),
            Approved,
            1,
        ),
        out_of_scope(),
    );
    for (id, name, value, description) in [
        ("max-at-limit", "amount", json!("500.00"), None),
        (
            "max-above",
            "amount",
            json!("500.01"),
            Some("an amount above the max rule"),
        ),
        (
            "max-negative",
            "amount",
            json!("-1.00"),
            Some("a negative amount under a max rule"),
        ),
        (
            "max-not-amount",
            "amount",
            json!("lots"),
            Some("text that is not an amount under a max rule"),
        ),
        (
            "currency-other",
            "currency",
            json!("USD"),
            Some("a currency outside the currency rule"),
        ),
        (
            "prefix-other",
            "to",
            json!("personal-1"),
            Some("an account outside the prefix rule"),
        ),
        (
            "one-of-other",
            "tag",
            json!("bonus"),
            Some("a value outside the one_of rule"),
        ),
        ("one-of-null-allowed", "tag", Value::Null, None),
    ] {
        let mut p = params();
        p[name] = value;
        let case = under_grant(
            call("agent-7", "payments.transfer", p),
            &grant_fields(),
            Approved,
            1,
        );
        match description {
            // An explicit null that the one_of rule lists is present and allowed: the
            // accepting side of absent-vs-null.
            None if id == "one-of-null-allowed" => out.ev(
                &format!("standing::{id}"),
                "the argument a one_of rule names is present as null, which the rule lists",
                &[
                    "standing-grant",
                    "standing-constraint",
                    "standing-absent-null",
                ],
                case,
                allow("AAL2"),
            ),
            None => out.ev(
                &format!("standing::{id}"),
                &format!("{name} at an edge the rule admits ({id})"),
                &["standing-grant", "standing-constraint"],
                case,
                allow("AAL2"),
            ),
            Some(d) => out.ev(
                &format!("standing::{id}"),
                d,
                &["standing-grant", "standing-constraint"],
                case,
                out_of_scope(),
            ),
        }
    }
    let mut p = params();
    if let Some(map) = p.as_object_mut() {
        map.remove("tag");
    }
    out.ev(
        "standing::absent-not-null",
        "the argument a one_of rule names is absent, and null is allowed: absence never matches",
        &[
            "standing-grant",
            "standing-constraint",
            "standing-absent-null",
        ],
        under_grant(
            call("agent-7", "payments.transfer", p),
            &grant_fields(),
            Approved,
            1,
        ),
        out_of_scope(),
    );
    let mut fields = grant_fields();
    fields["expires_at"] = json!(tk::NOW);
    out.ev(
        "standing::expired",
        "the grant expires exactly at the call (expires_at is exclusive)",
        &["standing-grant", "standing-expiry"],
        under_grant(
            call("agent-7", "payments.transfer", params()),
            &fields,
            Approved,
            1,
        ),
        deny_as("APPROVED", "standing_grant_expired", "AAL2"),
    );
    let mut fields = grant_fields();
    fields["expires_at"] = json!("2026-11-20T10:00:01Z");
    out.ev(
        "standing::expires-after-the-call",
        "the grant expires one second after the call",
        &["standing-grant", "standing-expiry"],
        under_grant(
            call("agent-7", "payments.transfer", params()),
            &fields,
            Approved,
            1,
        ),
        allow("AAL2"),
    );
    let mut c = covered();
    c.result["standing_grant"]["fields"]["max_uses"] = json!(1000);
    out.ev(
        "standing::fields-widened",
        "the grant's fields widened after signing (max_uses 10 to 1000): the signature covers others",
        &["standing-grant", "binding-op-hash"],
        c,
        deny("binding_mismatch"),
    );
    let mut c = covered();
    c.result.as_object_mut().map(|r| r.remove("standing_grant"));
    out.ev(
        "standing::member-missing",
        "the grant's evidence presented as if it were about the call itself",
        &["standing-grant", "binding-profile"],
        c,
        deny("binding_mismatch"),
    );
    let mut c = covered();
    c.policy["approvers"] = json!(["bob"]);
    out.ev(
        "standing::signer-ineligible",
        "the grant's signer is not among the call's approvers",
        &["standing-grant", "policy-approvers"],
        c,
        deny("approver_ineligible"),
    );
    out.ev(
        "standing::grant-refused",
        "the approver signed a refusal of the grant",
        &["standing-grant", "refusal"],
        under_grant(
            call("agent-7", "payments.transfer", params()),
            &grant_fields(),
            Denied,
            1,
        ),
        deny_as("DENIED", "approver_refused", "AAL2"),
    );
    let mut c = covered();
    c.result["standing_grant"]["use"] = json!(0);
    out.ev(
        "standing::use-zero",
        "use 0: uses count from 1, the envelope is unusable",
        &["standing-grant", "result-malformed"],
        c,
        expect("DENY", None, Some("result_malformed"), "declared"),
    );
    let mut c = covered();
    c.result["standing_grant"] = Value::Null;
    out.ev(
        "standing::member-null",
        "standing_grant null: absent and null are not the same, the envelope is unusable",
        &["standing-grant", "result-malformed", "standing-absent-null"],
        c,
        expect("DENY", None, Some("result_malformed"), "declared"),
    );
    calls(out);
    let payment = pay(ACCOUNT_A);
    out.ev(
        "standing::not-a-tool-call",
        "a grant presented for a payment-profile action, which names no agent",
        &["standing-grant", "action-inadmissible"],
        under_grant(payment, &grant_fields(), Approved, 1),
        deny("action_inadmissible"),
    );
}

/// The grant of [`grant_fields`] for MCP calls to `server` through the same gateway.
fn mcp_grant_fields(server: &str) -> Value {
    let mut fields = grant_fields();
    fields["calls"] = tk::grant_calls(
        countersign::MCP_TOOL_CALL_PROFILE,
        Some(server),
        &[tk::GRANT_GATEWAY],
    );
    fields
}

/// agent-7's MCP call of `payments.transfer` on `server`, with [`params`].
fn mcp_call(server: &str) -> Action {
    mcp("agent-7", server, "payments.transfer", params()).with_tool("payments.transfer")
}

/// The calls a grant names (SPEC §14.1 `calls`): the profile and, for MCP calls, the server.
fn calls(out: &mut Out) {
    let flags = ["standing-grant", "standing-calls", "mcp-tool-call"];
    out.ev(
        "standing::mcp-in-scope",
        "an MCP call to the server the grant names: ALLOW",
        &flags,
        under_grant(
            mcp_call("payments-server"),
            &mcp_grant_fields("payments-server"),
            Approved,
            1,
        ),
        allow("AAL2"),
    );
    out.ev(
        "standing::mcp-other-server",
        "the same agent, tool and arguments on another MCP server than the grant names",
        &flags,
        under_grant(
            mcp_call("other-server"),
            &mcp_grant_fields("payments-server"),
            Approved,
            1,
        ),
        out_of_scope(),
    );
    out.ev(
        "standing::other-profile-mcp",
        "a grant for generic tool calls presented for an MCP call with the same agent, tool and arguments",
        &flags,
        under_grant(mcp_call("payments-server"), &grant_fields(), Approved, 1),
        out_of_scope(),
    );
    out.ev(
        "standing::other-profile-tool-call",
        "a grant for MCP calls presented for a generic tool call with the same agent, tool and arguments",
        &flags,
        under_grant(
            call("agent-7", "payments.transfer", params()),
            &mcp_grant_fields("payments-server"),
            Approved,
            1,
        ),
        out_of_scope(),
    );
    let mut fields = mcp_grant_fields("payments-server");
    if let Some(calls) = fields["calls"].as_object_mut() {
        calls.remove("server_id");
    }
    out.ev(
        "standing::mcp-server-unnamed",
        "a grant for MCP calls that names no server covers no MCP call (absent is not \"any\")",
        &flags,
        under_grant(mcp_call("payments-server"), &fields, Approved, 1),
        out_of_scope(),
    );
    let mut fields = mcp_grant_fields("payments-server");
    fields["calls"]["server_id"] = Value::Null;
    out.ev(
        "standing::calls-server-null",
        "the grant's calls.server_id is null: absent and null differ, the grant is unreadable",
        &["standing-grant", "standing-calls", "standing-absent-null"],
        under_grant(mcp_call("payments-server"), &fields, Approved, 1),
        deny("evidence_malformed"),
    );
    // The fields of the withdrawn version 1: no `calls`. The signature is over version 2's
    // fields; the verifier refuses the fields before it looks at any signature.
    let mut c = covered();
    if let Some(fields) = c.result["standing_grant"]["fields"].as_object_mut() {
        fields.remove("calls");
    }
    out.ev(
        "standing::calls-absent",
        "a grant whose fields name no calls (version 1's scope) covers none: its fields do not admit",
        &["standing-grant", "standing-calls"],
        c,
        deny("evidence_malformed"),
    );
    let mut c = covered();
    c.result["standing_grant"]["fields"]["calls"]["gateways"] =
        json!([tk::GRANT_GATEWAY, "other-team"]);
    out.ev(
        "standing::gateways-widened",
        "a gateway added to the grant's calls after signing: the gateways are signed like every field",
        &["standing-grant", "standing-calls", "binding-op-hash"],
        c,
        deny("binding_mismatch"),
    );
}
