"""Many threads verify at once (the GIL is released) and every verdict is right."""

import json
from concurrent.futures import ThreadPoolExecutor

import countersign
from countersign import ReasonCode


def _case(repo, name):
    return json.loads((repo / "fixtures" / "worked-example" / f"{name}.case.json").read_text())


def _args(case):
    return (
        countersign.Action(case["action"]["profile"], json.dumps(case["action"]["fields"])),
        countersign.ApprovalResult.from_json(json.dumps(case["result"])),
        countersign.Registry.from_json(json.dumps(case["registry"])),
        countersign.Policy.from_json(json.dumps(case["policy"])),
        case["now"],
    )


def test_many_threads_verify_concurrently_with_correct_verdicts(repo):
    names = ["approve-account-a", "replay-to-account-b", "refuse-account-a", "flipped-decision"]
    expected = {
        "approve-account-a": None,
        "replay-to-account-b": ReasonCode.BINDING_MISMATCH,
        "refuse-account-a": ReasonCode.APPROVER_REFUSED,
        "flipped-decision": ReasonCode.BINDING_MISMATCH,
    }
    args = {n: _args(_case(repo, n)) for n in names}

    def one(i):
        name = names[i % len(names)]
        action, result, registry, policy, now = args[name]
        # A fresh state per verification: each is the first sight of its evidence.
        v = countersign.verify_evidence(
            action, result, registry, policy, countersign.ReplayState.memory(), now
        )
        return name, v.reason_code, v.allowed

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(one, range(400)))
    assert len(results) == 400
    for name, code, allowed in results:
        assert code == expected[name], name
        assert allowed == (expected[name] is None)


def test_threads_sharing_one_state_spend_a_nonce_exactly_once(repo, tmp_path):
    action, result, registry, policy, now = _args(_case(repo, "approve-account-a"))
    for replay in (countersign.ReplayState.memory(), countersign.ReplayState.sqlite(tmp_path / "r.db")):
        with ThreadPoolExecutor(max_workers=8) as pool:
            verdicts = list(pool.map(
                lambda _: countersign.verify_evidence(action, result, registry, policy, replay, now),
                range(32),
            ))
        assert sum(v.allowed for v in verdicts) == 1, replay
        assert {v.reason_code for v in verdicts if not v.allowed} == {ReasonCode.REPLAYED}
        assert replay.spent_count() == 1
