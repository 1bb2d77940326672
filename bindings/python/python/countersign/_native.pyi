"""Type stubs for the native module (the Rust core, compiled in)."""
import os

from datetime import datetime
from typing import Any, Dict, List, Mapping, Optional, Union

from ._reason import ReasonCode

JsonInput = Union[str, bytes, bytearray, Mapping[str, Any], List[Any]]

BACKEND: str
"""The signature backend compiled in (``ring``)."""

REASON_CODES: List[str]
"""Every wire reason code the core knows, in declaration order."""

class UnusableInput(ValueError):
    """An input that cannot be read at all. Never a verdict, never permission."""

    input: str
    """Which argument (``registry``, ``policy``, ``action``, ``case``, ``fields``, ...)."""
    reason: str
    """Why it cannot be read."""
    reason_code: Optional[str]
    """The core's reason code when it has one (e.g. ``action_inadmissible``), else None."""
    member: Optional[str]
    """For ``verify_case``: the CASE member at fault (``case``, ``action``, ``registry``,
    ``policy``, ``now``); else None."""

class ReplayStateError(RuntimeError):
    """The replay state could not be read or written. No verdict was reached."""

class Action:
    """The action about to be authorized: a profile id and the JSON text of its fields."""

    def __init__(self, profile: str, fields: JsonInput, tool: Optional[str] = None) -> None: ...
    @property
    def profile(self) -> str: ...
    @property
    def tool(self) -> Optional[str]:
        """The tool the gateway will run (checked against the signed operation)."""
    @property
    def fields_json(self) -> str: ...

class ApprovalResult:
    """A parsed approval result (what ``approval_callback`` returned)."""

    @staticmethod
    def from_json(text: JsonInput) -> ApprovalResult:
        """Parse; raises ``UnusableInput`` when it is not an approval result."""
    @property
    def status(self) -> str: ...
    @property
    def approval_id(self) -> Optional[str]: ...
    @property
    def expires_at(self) -> Optional[str]: ...
    @property
    def redrive_url(self) -> Optional[str]: ...
    @property
    def evidence_count(self) -> int: ...

class Registry:
    """The enrolled public keys this verifier trusts."""

    @staticmethod
    def from_json(document: JsonInput) -> Registry:
        """A registry from ``{"credentials": [...]}``; raises ``UnusableInput``."""
    def __len__(self) -> int: ...
    @property
    def principals(self) -> List[str]: ...

class Policy:
    """A verifier policy; members are those of the CASE ``policy`` object.

    ``Policy("pay.example.com", ["https://pay.example.com"], min_assurance="AAL2", quorum=2)``;
    also ``approvers=[...]`` (who may decide), ``nfc="require"|"normalize"``,
    ``profile_tools={profile: tool}``. Omitted members take fail-closed defaults (evidence and UV
    required, quorum 1, 300 s max age, NFC required). Unknown members and contradictory policies
    raise ``UnusableInput``.
    """

    def __init__(self, rp_id: str, origins: List[str], **members: Any) -> None: ...
    @staticmethod
    def from_json(document: JsonInput) -> Policy: ...
    def to_json(self) -> str: ...
    @property
    def rp_id(self) -> str: ...
    @property
    def origins(self) -> List[str]: ...
    @property
    def quorum(self) -> int: ...
    @property
    def min_assurance(self) -> Optional[str]: ...
    @property
    def approvers(self) -> Optional[List[str]]: ...

class ReplayState:
    """Spent nonces and signature counters, shared by every verifier of the same actions."""

    @staticmethod
    def memory() -> ReplayState:
        """In this process's memory (lost on restart): tests and one-off tools."""
    @staticmethod
    def sqlite(path: Union[str, "os.PathLike[str]"]) -> ReplayState:
        """Durable, in a SQLite file several processes may share (each opens it itself)."""
    def spent_count(self) -> int: ...

class Verdict:
    """ALLOW or DENY, and why. Has no truth value: test ``allowed``."""

    @property
    def effective(self) -> str:
        """``"ALLOW"`` or ``"DENY"``."""
    @property
    def allowed(self) -> bool:
        """True exactly when the gateway may proceed."""
    @property
    def decision(self) -> Optional[str]:
        """``APPROVED``/``DENIED``/``PENDING``; None when the result was unreadable."""
    @property
    def reason_code(self) -> Optional[ReasonCode]:
        """Why the verdict is DENY; None exactly when it is ALLOW."""
    @property
    def identity_assurance(self) -> Dict[str, Any]:
        """``{"level", "source", "basis"}``, derived from the evidence."""
    @property
    def assurance_level(self) -> str:
        """``declared``, ``AAL1``, ``AAL2`` or ``AAL3``."""
    @property
    def approvers(self) -> List[Dict[str, Any]]:
        """The approvers whose evidence verified."""
    @property
    def replay(self) -> str: ...
    @property
    def detail(self) -> Optional[str]:
        """The check that failed and its evidence; None on ALLOW."""
    def to_dict(self) -> Dict[str, Any]: ...
    def to_json(self) -> str: ...

def op_hash(profile: str, decision: str, fields: JsonInput) -> str:
    """base64url op_hash of the admitted fields; raises ``UnusableInput`` when inadmissible."""

def op_hash_document(document: JsonInput) -> str:
    """op_hash of ``{"profile", "decision", "fields"}`` (as ``countersign op-hash`` reads it)."""

def verify_evidence(
    action: Union[Action, Mapping[str, Any]],
    result: Union[JsonInput, ApprovalResult],
    registry: Registry,
    policy: Policy,
    replay: ReplayState,
    now: Union[None, str, datetime] = None,
) -> Verdict:
    """Verify an approval result for ``action``; a DENY is a verdict. Releases the GIL."""

def verify_case(case: JsonInput) -> Verdict:
    """Verify a CASE document exactly as ``countersign verify`` does."""

