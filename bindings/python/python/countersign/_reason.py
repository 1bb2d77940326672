"""The closed set of wire reason codes, as a ``str`` enum (``ReasonCode.REPLAYED == "replayed"``).

The members mirror the core's ``ReasonCode::ALL``; a test checks that the two sets are equal.
"""

from enum import Enum


class ReasonCode(str, Enum):
    """Why a verdict is DENY. Low cardinality on purpose: switch on it, count it."""

    APPROVER_REFUSED = "approver_refused"
    EXPIRED_UNANSWERED = "expired_unanswered"
    NO_ELIGIBLE_APPROVER = "no_eligible_approver"
    CALLBACK_TIMEOUT = "callback_timeout"
    CANCELLED = "cancelled"
    PENDING = "pending"
    EVIDENCE_MISSING = "evidence_missing"
    EVIDENCE_MALFORMED = "evidence_malformed"
    UNSUPPORTED_FORMAT = "unsupported_format"
    PROFILE_UNKNOWN = "profile_unknown"
    ACTION_INADMISSIBLE = "action_inadmissible"
    BINDING_MISMATCH = "binding_mismatch"
    SIGNATURE_INVALID = "signature_invalid"
    RP_MISMATCH = "rp_mismatch"
    ORIGIN_MISMATCH = "origin_mismatch"
    USER_NOT_PRESENT = "user_not_present"
    USER_NOT_VERIFIED = "user_not_verified"
    CREDENTIAL_UNKNOWN = "credential_unknown"
    CREDENTIAL_REVOKED = "credential_revoked"
    APPROVER_INELIGIBLE = "approver_ineligible"
    BACKUP_ELIGIBILITY_MISMATCH = "backup_eligibility_mismatch"
    COUNTER_REGRESSION = "counter_regression"
    REPLAYED = "replayed"
    STALE = "stale"
    INSUFFICIENT_ASSURANCE = "insufficient_assurance"
    QUORUM_NOT_MET = "quorum_not_met"
    RESULT_MALFORMED = "result_malformed"
    UNSUPPORTED_ALGORITHM = "unsupported_algorithm"
    OUT_OF_SCOPE = "out_of_scope"
    STANDING_GRANT_EXPIRED = "standing_grant_expired"

    def __str__(self) -> str:
        return self.value
