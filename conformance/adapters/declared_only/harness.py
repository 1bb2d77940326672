#!/usr/bin/env python3
"""The declared-only baseline: what a gateway does with an approval callback that carries no
evidence. It trusts the transport's `status`, ignores `approver_evidence`, the registry and the
policy, and so shows, vector by vector in the report, what verifying the evidence adds.

It is not a verifier and must never be used as one. It speaks conformance/HARNESS.md
(countersign-harness/1) with nothing but the Python standard library.

Usage: python3 harness.py      (serve the protocol on stdin/stdout)
"""

import base64
import json
import sys

TRANSPORT = {"approver_refused", "expired_unanswered", "no_eligible_approver", "callback_timeout", "cancelled"}


def verdict(effective, decision, reason):
    # Nothing is verified, so the level is always the transport's `declared`.
    return {"effective": effective, "decision": decision, "reason_code": reason,
            "identity_assurance_level": "declared"}


def declared(case):
    """Read the result envelope the way a callback client must (SPEC §2.1), then obey `status`."""
    result = case.get("result") if isinstance(case, dict) else None
    if isinstance(result, str):
        result = {"status": result}
    if not isinstance(result, dict) or result.get("status") not in ("APPROVED", "DENIED", "PENDING"):
        return verdict("DENY", None, "result_malformed")
    status = result["status"]
    if status == "PENDING":
        if not isinstance(result.get("approval_id"), str):
            return verdict("DENY", None, "result_malformed")
        return verdict("DENY", "PENDING", "pending")
    if status == "APPROVED":
        return verdict("ALLOW", "APPROVED", None)
    reason = result.get("reason_code")
    return verdict("DENY", "DENIED", reason if reason in TRANSPORT else "approver_refused")


def answer(req):
    rid = req.get("id")
    try:
        if "input" in req:
            case = req["input"]
        elif "input_text" in req:
            case = json.loads(req["input_text"])
        else:
            case = json.loads(base64.b64decode(req["input_base64"]))
        return {"id": rid, "verdict": declared(case)}
    except ValueError as e:
        return {"id": rid, "error": f"unusable CASE: {e}"}


def main():
    hello = {"protocol": "countersign-harness/1",
             "implementation": "declared-only (trusts status, ignores evidence)",
             "kinds": ["evidence"]}
    print(json.dumps(hello), flush=True)
    for line in sys.stdin:
        if line.strip():
            print(json.dumps(answer(json.loads(line))), flush=True)


if __name__ == "__main__":
    main()
