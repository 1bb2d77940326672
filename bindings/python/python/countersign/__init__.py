"""Countersign for Python: verify that an enrolled human approved (or refused) exactly this action.

The verifier is the Rust core, compiled in: the same rules and the same verdicts as
``countersign verify``, bit for bit. The GIL is released while verifying.

    import countersign

    verdict = countersign.verify_evidence(action, result_json, registry, policy, replay)
    if not verdict.allowed:
        raise PermissionError(verdict.reason_code, verdict.detail)

A DENY is a verdict, never an exception. Only input that cannot be read at all raises
``UnusableInput``; a replay state that cannot be read or written raises ``ReplayStateError``.
Neither is ever permission.

``Gateway`` is the gateway side of the approval service: hold a tool call, wait for the human,
verify with *your* registry and policy, collect the single-use grant. See ``Gateway`` and
``Gateway.requires_approval``.
"""

from ._native import (
    BACKEND,
    Action,
    ApprovalResult,
    Policy,
    Registry,
    ReplayState,
    ReplayStateError,
    UnusableInput,
    Verdict,
    op_hash,
    op_hash_document,
    verify_case,
    verify_evidence,
)
from ._reason import ReasonCode
from ._gateway import (
    TOOL_CALL_PROFILE,
    Authorization,
    Denied,
    Gateway,
    Grant,
    Held,
)

__all__ = [
    "BACKEND",
    "TOOL_CALL_PROFILE",
    "Action",
    "ApprovalResult",
    "Authorization",
    "Denied",
    "Gateway",
    "Grant",
    "Held",
    "Policy",
    "ReasonCode",
    "Registry",
    "ReplayState",
    "ReplayStateError",
    "UnusableInput",
    "Verdict",
    "op_hash",
    "op_hash_document",
    "verify_case",
    "verify_evidence",
]

__version__ = "0.1.0"
