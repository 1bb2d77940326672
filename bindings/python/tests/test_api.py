"""The API: same verdicts as the core and the CLI, typed errors on garbage, replay state."""

import json
import subprocess
import sys
import textwrap
from datetime import datetime, timezone

import pytest

import countersign
from countersign import ReasonCode, UnusableInput


def worked(repo, name="approve-account-a"):
    return json.loads((repo / "fixtures" / "worked-example" / f"{name}.case.json").read_text())


def parts(case):
    """A CASE split into verify_evidence's arguments (fields kept as JSON text)."""
    action = countersign.Action(case["action"]["profile"], json.dumps(case["action"]["fields"]))
    registry = countersign.Registry.from_json(json.dumps(case["registry"]))
    policy = countersign.Policy.from_json(json.dumps(case["policy"]))
    return action, json.dumps(case["result"]), registry, policy, case["now"]


def test_reason_codes_are_the_cores():
    from countersign import _native

    assert [c.value for c in ReasonCode] == list(_native.REASON_CODES)
    assert ReasonCode.REPLAYED == "replayed" and isinstance(ReasonCode.REPLAYED, str)


@pytest.mark.parametrize(
    "name", ["approve-account-a", "replay-to-account-b", "refuse-account-a", "flipped-decision"]
)
def test_verdicts_are_the_clis_bit_for_bit(repo, countersign_bin, name):
    path = repo / "fixtures" / "worked-example" / f"{name}.case.json"
    out = subprocess.run([countersign_bin, "verify", str(path)], capture_output=True, text=True)
    assert out.returncode in (0, 1), out.stderr
    verdict = countersign.verify_case(path.read_bytes())
    assert verdict.to_dict() == json.loads(out.stdout)
    assert out.returncode == (0 if verdict.allowed else 1)


def test_verify_evidence_agrees_with_verify_case(repo):
    case = worked(repo)
    action, result, registry, policy, now = parts(case)
    verdict = countersign.verify_evidence(
        action, result, registry, policy, countersign.ReplayState.memory(), now
    )
    assert verdict.to_dict() == countersign.verify_case(json.dumps(case)).to_dict()
    assert verdict.allowed and verdict.reason_code is None and verdict.detail is None
    assert verdict.identity_assurance["level"] == "AAL2"
    assert verdict.identity_assurance["source"] == "evidence"


def test_the_action_may_be_a_dict_and_the_result_parsed_once(repo):
    case = worked(repo)
    _, result, registry, policy, now = parts(case)
    parsed = countersign.ApprovalResult.from_json(result)
    assert parsed.status == "APPROVED" and parsed.evidence_count == 1
    verdict = countersign.verify_evidence(
        {"profile": case["action"]["profile"], "fields": case["action"]["fields"]},
        parsed, registry, policy, countersign.ReplayState.memory(),
        datetime(2026, 11, 20, 10, 0, tzinfo=timezone.utc),
    )
    assert verdict.allowed


def test_the_same_evidence_is_spent_once(repo):
    action, result, registry, policy, now = parts(worked(repo))
    replay = countersign.ReplayState.memory()
    first = countersign.verify_evidence(action, result, registry, policy, replay, now)
    second = countersign.verify_evidence(action, result, registry, policy, replay, now)
    assert first.allowed
    assert second.effective == "DENY" and second.reason_code is ReasonCode.REPLAYED
    assert "already spent" in second.detail
    assert replay.spent_count() == 1


def test_a_rejected_record_burns_nothing(repo):
    case = worked(repo)
    action, result, registry, policy, now = parts(case)
    other = countersign.Action(case["action"]["profile"], json.dumps(
        dict(case["action"]["fields"], destination_account="account-B")))
    replay = countersign.ReplayState.memory()
    denied = countersign.verify_evidence(other, result, registry, policy, replay, now)
    assert denied.reason_code is ReasonCode.BINDING_MISMATCH
    assert replay.spent_count() == 0
    assert countersign.verify_evidence(action, result, registry, policy, replay, now).allowed


def test_sqlite_state_survives_a_restart_and_is_shared_by_processes(repo, tmp_path):
    action, result, registry, policy, now = parts(worked(repo))
    path = tmp_path / "replay.sqlite"
    assert countersign.verify_evidence(
        action, result, registry, policy, countersign.ReplayState.sqlite(path), now
    ).allowed
    # Another process, its own connection to the same file: the nonce is spent.
    script = textwrap.dedent(
        """
        import json, sys, countersign
        case = json.load(open(sys.argv[1]))
        v = countersign.verify_evidence(
            countersign.Action(case["action"]["profile"], json.dumps(case["action"]["fields"])),
            json.dumps(case["result"]),
            countersign.Registry.from_json(json.dumps(case["registry"])),
            countersign.Policy.from_json(json.dumps(case["policy"])),
            countersign.ReplayState.sqlite(sys.argv[2]), case["now"])
        print(v.reason_code)
        """
    )
    case_file = repo / "fixtures" / "worked-example" / "approve-account-a.case.json"
    out = subprocess.run(
        [sys.executable, "-c", script, str(case_file), str(path)], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "replayed"
    assert countersign.ReplayState.sqlite(path).spent_count() == 1


def test_an_unreadable_result_is_a_verdict_not_an_exception(repo):
    action, _, registry, policy, now = parts(worked(repo))
    for garbage in ["{", "[]", '"MAYBE"', '{"status": "APPROVED", "approver_evidence": 7}', b"\xff"]:
        v = countersign.verify_evidence(
            action, garbage, registry, policy, countersign.ReplayState.memory(), now
        )
        assert v.effective == "DENY" and v.reason_code is ReasonCode.RESULT_MALFORMED
        assert v.decision is None and v.assurance_level == "declared"


def test_a_bare_approved_is_refused(repo):
    action, _, registry, policy, now = parts(worked(repo))
    v = countersign.verify_evidence(
        action, '"APPROVED"', registry, policy, countersign.ReplayState.memory(), now
    )
    assert v.reason_code is ReasonCode.EVIDENCE_MISSING


@pytest.mark.parametrize(
    "build, argument",
    [
        (lambda: countersign.Registry.from_json("not json"), "registry"),
        (lambda: countersign.Registry.from_json({"credentials": [{"principal": "x"}]}), "registry"),
        (lambda: countersign.Policy("a", ["https://a"], quorom=2), "policy"),
        (lambda: countersign.Policy("a", ["https://a"], min_assurance="AAL4"), "policy"),
        (lambda: countersign.Policy.from_json(b"\x00"), "policy"),
        (lambda: countersign.verify_case("{}"), "case"),
        (lambda: countersign.verify_case(b"\xff\xfe"), "case"),
        (lambda: countersign.op_hash("countersign.payment/1", "MAYBE", "{}"), "decision"),
        (lambda: countersign.op_hash("no.such/1", "APPROVED", "{}"), "profile"),
        (lambda: countersign.op_hash("countersign.tool-call/1", "APPROVED", '{"a":1,"a":2}'), "fields"),
        (lambda: countersign.op_hash("countersign.tool-call/1", "APPROVED", {"x": float("nan")}), "fields"),
        (lambda: countersign.Action("countersign.tool-call/1", object()), "action.fields"),
    ],
)
def test_garbage_raises_a_typed_error(build, argument):
    with pytest.raises(UnusableInput) as e:
        build()
    assert e.value.input == argument
    assert e.value.reason
    assert isinstance(e.value, ValueError)


def test_inadmissible_fields_carry_the_reason_code():
    with pytest.raises(UnusableInput) as e:
        countersign.op_hash("countersign.tool-call/1", "APPROVED", '{"a":1,"a":2}')
    assert e.value.reason_code == "action_inadmissible"
    with pytest.raises(UnusableInput) as e:
        countersign.op_hash("no.such/1", "APPROVED", "{}")
    assert e.value.reason_code == "profile_unknown"


def test_garbage_action_and_now_raise(repo):
    _, result, registry, policy, _ = parts(worked(repo))
    replay = countersign.ReplayState.memory()
    with pytest.raises(UnusableInput, match="action"):
        countersign.verify_evidence(42, result, registry, policy, replay)
    with pytest.raises(UnusableInput, match="naive"):
        countersign.verify_evidence(
            {"profile": "p", "fields": "{}"}, result, registry, policy, replay, datetime(2026, 1, 1)
        )
    with pytest.raises(UnusableInput, match="RFC 3339"):
        countersign.verify_evidence(
            {"profile": "p", "fields": "{}"}, result, registry, policy, replay, "yesterday"
        )


def test_op_hash_of_the_worked_example():
    fields = (
        '{"amount":"40000.00","currency":"EUR","source_account":"ops-main",'
        '"destination_account":"account-A","reference":"INV-2291"}'
    )
    h = countersign.op_hash("countersign.payment/1", "APPROVED", fields)
    assert h == "Vxyn2PnZkaf3jZmtZb5ZQm99KTxWn-m4oTyg9MmWN1s"
    assert countersign.op_hash("countersign.payment/1", "APPROVED", json.loads(fields)) == h
    assert countersign.op_hash("countersign.payment/1", "APPROVED", fields.encode()) == h
    assert countersign.op_hash("countersign.payment/1", "DENIED", fields) != h


def test_a_verdict_has_no_truth_value(repo):
    v = countersign.verify_case((repo / "fixtures/worked-example/refuse-account-a.case.json").read_bytes())
    with pytest.raises(TypeError):
        bool(v)
    assert "DENY" in repr(v)


def test_policy_keywords_map_to_the_case_policy():
    p = countersign.Policy("pay.example.com", ["https://pay.example.com"], min_assurance="AAL3", quorum=2)
    assert (p.rp_id, p.quorum, p.min_assurance) == ("pay.example.com", 2, "AAL3")
    doc = json.loads(p.to_json())
    assert doc["require_evidence"] is True and doc["max_age_seconds"] == 300
    assert countersign.Policy.from_json(p.to_json()).to_json() == p.to_json()


def test_only_the_policys_approvers_may_decide(repo):
    action, result, registry, _, now = parts(worked(repo))
    only_bob = countersign.Policy("pay.example.com", ["https://pay.example.com"], approvers=["bob"])
    assert only_bob.approvers == ["bob"]
    v = countersign.verify_evidence(action, result, registry, only_bob, countersign.ReplayState.memory(), now)
    assert v.reason_code is ReasonCode.APPROVER_INELIGIBLE
    alice = countersign.Policy("pay.example.com", ["https://pay.example.com"], approvers=["alice"])
    assert countersign.verify_evidence(
        action, result, registry, alice, countersign.ReplayState.memory(), now
    ).allowed


@pytest.mark.parametrize(
    "members",
    [
        {"require_evidence": False, "quorum": 2},
        {"require_evidence": False, "min_assurance": "AAL2"},
        {"approvers": []},
        {"approvers": ["alice"], "quorum": 2},
    ],
)
def test_a_contradictory_policy_is_refused(members):
    with pytest.raises(UnusableInput, match="contradict") as e:
        countersign.Policy("pay.example.com", ["https://pay.example.com"], **members)
    assert e.value.input == "policy"


def test_a_profile_that_does_not_sign_its_operation_needs_its_tool_bound(repo):
    case = worked(repo)
    _, result, registry, policy, now = parts(case)
    fields = json.dumps(case["action"]["fields"])
    payment = case["action"]["profile"]

    def verify(action, policy):
        return countersign.verify_evidence(
            action, result, registry, policy, countersign.ReplayState.memory(), now
        )

    # The payment profile does not sign a tool name: a named tool must be the bound one.
    unbound = verify(countersign.Action(payment, fields, tool="payments.transfer"), policy)
    assert unbound.reason_code is ReasonCode.ACTION_INADMISSIBLE
    bound = countersign.Policy(
        "pay.example.com", ["https://pay.example.com"], profile_tools={payment: "payments.transfer"}
    )
    assert verify(countersign.Action(payment, fields, tool="payments.transfer"), bound).allowed
    other = verify(countersign.Action(payment, fields, tool="shell.exec"), bound)
    assert other.reason_code is ReasonCode.ACTION_INADMISSIBLE
    # The verifier knows the profile belongs to one tool, and the action does not say which.
    assert verify({"profile": payment, "fields": fields}, bound).reason_code is ReasonCode.ACTION_INADMISSIBLE


def test_strings_not_in_nfc_are_refused_unless_the_policy_normalizes():
    from countersign._native import testing

    fx = testing.hot_path()  # an approved tool call: {"agent_id", "tool_name", "params"}
    fields = json.loads(fx["fields"])
    fields["params"]["to"] = "account-\u212a"  # KELVIN SIGN; NFC makes it "K"
    action = countersign.Action(fx["profile"], json.dumps(fields, ensure_ascii=False))
    registry = countersign.Registry.from_json(fx["registry"])

    def verify(policy):
        return countersign.verify_evidence(
            action, fx["result"], registry, policy, countersign.ReplayState.memory(), fx["now"]
        )

    refused = verify(countersign.Policy(testing.RP_ID, [testing.ORIGIN]))
    assert refused.reason_code is ReasonCode.ACTION_INADMISSIBLE
    assert "/params/to" in refused.detail and "U+212A" in refused.detail
    # Admitted once normalized, and then simply not the action that was signed.
    normalized = verify(countersign.Policy(testing.RP_ID, [testing.ORIGIN], nfc="normalize"))
    assert normalized.reason_code is ReasonCode.BINDING_MISMATCH
