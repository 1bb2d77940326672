"""Every conformance vector through the binding agrees with its expected verdict.

The same count as the Rust runner (`countersign-conformance run`): every evidence vector through
`verify_case`, every op_hash vector through `op_hash_document`, none skipped.
"""

import base64
import json

import pytest

import countersign
from countersign import UnusableInput


def _vectors(repo, name):
    doc = json.loads((repo / "vectors" / name).read_text(encoding="utf-8"))
    assert doc["number_of_vectors"] == len(doc["vectors"])
    return doc["vectors"]


def _input(vector):
    # Exactly the runner's rule: `input` any serialization, `input_text` / `input_base64` exact.
    if "input_text" in vector:
        return vector["input_text"].encode("utf-8")
    if "input_base64" in vector:
        return base64.b64decode(vector["input_base64"])
    return json.dumps(vector["input"], ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _compact(verdict):
    return {
        "effective": verdict.effective,
        "decision": verdict.decision,
        "reason_code": None if verdict.reason_code is None else verdict.reason_code.value,
        "identity_assurance_level": verdict.assurance_level,
    }


def _ophash(raw):
    try:
        return {"op_hash": countersign.op_hash_document(raw)}
    except countersign.UnusableInput as e:
        return {"error": e.reason_code}


def test_every_vector_agrees_with_its_expected_verdict(repo):
    evidence = _vectors(repo, "evidence.json")
    ophash = _vectors(repo, "op_hash.json")
    disagreements = []
    for v in evidence:
        try:
            got = _compact(countersign.verify_case(_input(v)))
        except UnusableInput as e:
            # No verdict for an unusable CASE (contradictory policy, ...): the member at fault.
            got = {"unusable_case": e.member}
        if got != v["expected"]:
            disagreements.append((v["id"], v["expected"], got))
    for v in ophash:
        got = _ophash(_input(v))
        if got != v["expected"]:
            disagreements.append((v["id"], v["expected"], got))
    assert disagreements == []
    # Every vector ran, none skipped: the Rust runner's count.
    assert len(evidence) + len(ophash) >= 432


@pytest.mark.parametrize(
    "name, effective, reason",
    [
        ("approve-account-a", "ALLOW", None),
        ("replay-to-account-b", "DENY", "binding_mismatch"),
        ("refuse-account-a", "DENY", "approver_refused"),
        ("flipped-decision", "DENY", "binding_mismatch"),
    ],
)
def test_the_worked_example(repo, name, effective, reason):
    case = (repo / "fixtures" / "worked-example" / f"{name}.case.json").read_bytes()
    verdict = countersign.verify_case(case)
    assert verdict.effective == effective
    assert verdict.reason_code == (None if reason is None else countersign.ReasonCode(reason))
    if name == "approve-account-a":
        assert verdict.allowed and verdict.decision == "APPROVED"
        assert verdict.assurance_level == "AAL2"
        assert [a["principal"] for a in verdict.approvers] == ["alice"]
    if name == "refuse-account-a":
        # A refusal is evidence too: the approver who refused is named.
        assert verdict.decision == "DENIED"
        assert [a["decision"] for a in verdict.approvers] == ["DENIED"]
