#!/usr/bin/env python3
"""A second, independent Countersign verifier built on py_webauthn, speaking the conformance
harness protocol (conformance/HARNESS.md, countersign-harness/1).

The WebAuthn layer (clientDataJSON type/challenge/origin, rpIdHash, UP, UV, signature, counter) is
checked by py_webauthn's verify_authentication_response. Everything Countersign adds on top
(strict JSON admission, NFC require/normalize, profiles, JCS and op_hash, the binding of
nonce/op_hash/decision and of the operation, eligibility, BE against enrollment, exact freshness,
replay inside one CASE, assurance, quorum, contradictory policies, the MCP tool-call profile,
standing grants and the calls they name) is written here from
docs/SPEC.md, without looking at the Rust code. Rules py_webauthn lacks are declared unsupported
in the hello line, by flag, with the reason.

Usage:
    harness.py                      serve the protocol on stdin/stdout
    harness.py --external FILE      verify the assertions of shared/vectors/webauthn-external.json
"""

import base64
import datetime
import hashlib
import json
import re
import sys
import unicodedata
from fractions import Fraction

import cbor2
import webauthn
from webauthn.helpers.exceptions import InvalidAuthenticationResponse

from paths import path_covers, path_under, prefix_text_readable

PROTOCOL = "countersign-harness/1"
MAX_FIELDS_BYTES = 65536
MAX_DEPTH = 32
SAFE = 2**53 - 1
SUPPORTED_ALGS = {-7, -8, -257, -35}  # what a Countersign verifier implements (SPEC §5)
TRANSPORT = {"approver_refused", "expired_unanswered", "no_eligible_approver", "callback_timeout", "cancelled"}
LEVELS = ["declared", "AAL1", "AAL2", "AAL3"]

UNSUPPORTED = {
    "alg-es384": "py_webauthn 3.0.1 has no COSE algorithm -35 (ES384)",
    "cross-origin": "py_webauthn does not check crossOrigin",
    "top-origin": "py_webauthn does not check topOrigin",
    "policy-origin-tuple": "py_webauthn compares origins as strings",
    "policy-der-strict": "py_webauthn (pyca/cryptography) reports undecodable DER as a bad signature, not as malformed evidence",
    "signature-encoding": "py_webauthn reports a signature of the wrong length as a bad signature, not as malformed evidence",
}
if int(unicodedata.unidata_version.split(".")[0]) < 18:
    UNSUPPORTED["policy-unicode-18"] = f"Python's unicodedata is Unicode {unicodedata.unidata_version}, the vectors pin 18.0"


class Refused(Exception):
    """A DENY (or an op_hash refusal) with a reason code."""

    def __init__(self, code, detail=""):
        super().__init__(f"{code}: {detail}")
        self.code = code


class Unusable(Exception):
    """The CASE itself cannot be used (not a verdict)."""


class UnusableMember(Exception):
    """The CASE is unusable because of one member (answered as {"unusable_case": member})."""

    def __init__(self, member, detail=""):
        super().__init__(f"{member}: {detail}")
        self.member = member


# --- strict JSON admission (SPEC §3, docs/spec/canon.md) -------------------------------------

class _Float:
    def __init__(self, text):
        self.text = text


class _Obj(dict):
    duplicate = False


def _pairs(pairs):
    obj = _Obj()
    for k, v in pairs:
        if k in obj:
            obj.duplicate = True
        obj[k] = v
    return obj


def _constant(name):
    raise ValueError(f"{name} is not JSON")


def strict_loads(text):
    """json.loads keeping what strict admission must see: duplicates, floats as text."""
    return json.loads(text, object_pairs_hook=_pairs, parse_float=_Float, parse_constant=_constant)


def members(text, start=0):
    """(key, value_text) of the top-level object starting at text[start]: exact member spans."""
    dec = json.JSONDecoder()
    ws = re.compile(r"[ \t\n\r]*")
    i = ws.match(text, start).end()
    if text[i:i + 1] != "{":
        raise ValueError("not an object")
    i = ws.match(text, i + 1).end()
    out = []
    if text[i:i + 1] == "}":
        return out
    while True:
        key, i = dec.raw_decode(text, i)
        i = ws.match(text, i).end()
        if text[i:i + 1] != ":":
            raise ValueError("expected :")
        i = ws.match(text, i + 1).end()
        _, end = dec.raw_decode(text, i)
        out.append((key, text[i:end]))
        i = ws.match(text, end).end()
        if text[i:i + 1] == ",":
            i = ws.match(text, i + 1).end()
            continue
        if text[i:i + 1] == "}":
            return out
        raise ValueError("expected , or }")


def check_string(s):
    for ch in s:
        cp = ord(ch)
        if 0xD800 <= cp <= 0xDFFF:
            raise Refused("action_inadmissible", "lone surrogate")
        if (0xFDD0 <= cp <= 0xFDEF) or (cp & 0xFFFE) == 0xFFFE:
            raise Refused("action_inadmissible", "noncharacter")
        if unicodedata.category(ch) == "Cn":
            raise Refused("action_inadmissible", f"unassigned U+{cp:04X}")


def has_duplicate(v):
    """Whether any object inside v (as strict_loads parsed it) named a member twice."""
    if isinstance(v, dict):
        return getattr(v, "duplicate", False) or any(has_duplicate(x) for x in v.values())
    if isinstance(v, list):
        return any(has_duplicate(x) for x in v)
    return False


def nfc_checked(s, nfc_mode):
    """s in NFC; under nfc = require, a string NFC would change is refused (SPEC §3)."""
    n = unicodedata.normalize("NFC", s)
    if n != s and nfc_mode == "require":
        raise Refused("action_inadmissible", "not NFC")
    return n


def admit_value(v, depth, nfc_mode="normalize"):
    """Check one parsed value and return it with every string and key in NFC."""
    if isinstance(v, (dict, list)):
        depth += 1
        if depth > MAX_DEPTH:
            raise Refused("action_inadmissible", "too deep")
    if isinstance(v, _Float):
        raise Refused("action_inadmissible", "float")
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, int):
        if abs(v) > SAFE:
            raise Refused("action_inadmissible", "integer out of range")
        return v
    if isinstance(v, str):
        check_string(v)
        return nfc_checked(v, nfc_mode)
    if isinstance(v, list):
        return [admit_value(x, depth, nfc_mode) for x in v]
    if getattr(v, "duplicate", False):
        raise Refused("action_inadmissible", "duplicate key")
    out = {}
    for k, x in v.items():
        check_string(k)
        nk = unicodedata.normalize("NFC", k)
        if nk in out:
            raise Refused("action_inadmissible", "NFC key collision")
        nk = nfc_checked(k, nfc_mode)
        out[nk] = admit_value(x, depth, nfc_mode)
    return out


DECIMAL = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?")
STANDING_PROFILE = "countersign.standing-grant/2"
PROFILES = {
    "countersign.payment/1": [("amount", "decimal"), ("currency", "currency"), ("source_account", "identifier"),
                              ("destination_account", "identifier"), ("reference", "string")],
    "countersign.tool-call/1": [("agent_id", "string"), ("tool_name", "string"), ("params", "object")],
    "countersign.mcp-tool-call/1": [("agent_id", "string"), ("server_id", "string"), ("tool_name", "string"),
                                    ("params", "object")],
    # SPEC §14.1: the grant's scope is its fields.
    STANDING_PROFILE: [("calls", "object"), ("agent_id", "string"), ("tool_name", "string"),
                       ("constraints", "any"), ("max_uses", "integer"), ("expires_at", "string")],
}
EXACT = {"countersign.payment/1": {"amount", "currency", "source_account", "destination_account", "reference"},
         "countersign.tool-call/1": {"agent_id", "tool_name"},
         "countersign.mcp-tool-call/1": {"agent_id", "server_id", "tool_name"},
         STANDING_PROFILE: {"agent_id", "tool_name", "expires_at"}}


def admit_fields(profile, raw, nfc_mode="normalize"):
    """Admit the exact fields text under a built-in profile; return the NFC'd value.

    op-hash documents normalize; a CASE's action is admitted under its policy's `nfc` member."""
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogatepass")
    if len(raw) > MAX_FIELDS_BYTES:
        raise Refused("action_inadmissible", "too large")
    try:
        text = raw.decode("utf-8")
        value = strict_loads(text)
    except (UnicodeDecodeError, ValueError) as e:
        raise Refused("action_inadmissible", f"not strict JSON: {e}")
    if not isinstance(value, dict):
        raise Refused("action_inadmissible", "fields must be an object")
    admitted = admit_value(value, 0, nfc_mode)
    spec = PROFILES[profile]
    names = [n for n, _ in spec]
    for k in value:
        if unicodedata.normalize("NFC", k) not in names:
            raise Refused("action_inadmissible", f"undeclared field {k}")
    for name, kind in spec:
        if name not in value:
            raise Refused("action_inadmissible", f"missing {name}")
        v = value[name]
        ok = {
            "decimal": lambda v: isinstance(v, str) and len(v) <= 64 and DECIMAL.fullmatch(v)
            and not (v.startswith("-") and set(v[1:]) <= {"0", "."}),
            "currency": lambda v: isinstance(v, str) and re.fullmatch(r"[A-Z]{3}", v),
            "identifier": lambda v: isinstance(v, str) and 1 <= len(v) <= 256 and all(0x21 <= ord(c) <= 0x7E for c in v),
            "string": lambda v: isinstance(v, str),
            "object": lambda v: isinstance(v, dict),
            "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
            "any": lambda v: True,
        }[kind](v)
        if not ok:
            raise Refused("action_inadmissible", f"{name} is not a valid {kind}")
        if name in EXACT[profile] and isinstance(v, str) and unicodedata.normalize("NFC", v) != v:
            raise Refused("action_inadmissible", f"{name} is exact and not NFC")
    return admitted


# --- JCS (RFC 8785) and op_hash ----------------------------------------------------------------

def jcs(v):
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        out = ['"']
        for ch in v:
            cp = ord(ch)
            if ch == '"':
                out.append('\\"')
            elif ch == "\\":
                out.append("\\\\")
            elif cp < 0x20:
                out.append({8: "\\b", 9: "\\t", 10: "\\n", 12: "\\f", 13: "\\r"}.get(cp, f"\\u{cp:04x}"))
            else:
                out.append(ch)
        out.append('"')
        return "".join(out)
    if isinstance(v, list):
        return "[" + ",".join(jcs(x) for x in v) + "]"
    keys = sorted(v, key=lambda k: k.encode("utf-16-be"))
    return "{" + ",".join(jcs(k) + ":" + jcs(v[k]) for k in keys) + "}"


def op_hash(profile, decision, fields):
    doc = {"profile": profile, "decision": decision, "fields": fields}
    return hashlib.sha256(jcs(doc).encode("utf-8")).digest()


def op_hash_document(raw):
    try:
        text = raw.decode("utf-8")
        doc = strict_loads(text)
        spans = dict(members(text))
    except (UnicodeDecodeError, ValueError) as e:
        raise Refused("action_inadmissible", f"not strict JSON: {e}")
    if not isinstance(doc, dict) or getattr(doc, "duplicate", False):
        raise Refused("action_inadmissible", "document must be an object without duplicate members")
    if set(doc) != {"profile", "decision", "fields"}:
        raise Refused("action_inadmissible", "members must be profile, decision, fields")
    if not isinstance(doc["profile"], str):
        raise Refused("action_inadmissible", "profile must be a string")
    if doc["profile"] not in PROFILES:
        raise Refused("profile_unknown", doc["profile"])
    if doc["decision"] not in ("APPROVED", "DENIED"):
        raise Refused("action_inadmissible", "decision")
    fields = admit_fields(doc["profile"], spans["fields"])
    return op_hash(doc["profile"], doc["decision"], fields)


# --- evidence (SPEC §6) --------------------------------------------------------------------------

B64URL = re.compile(r"[A-Za-z0-9_-]*")


def b64url(text):
    """Strict unpadded base64url: one spelling per byte string."""
    if not isinstance(text, str) or not B64URL.fullmatch(text) or len(text) % 4 == 1:
        raise ValueError("not unpadded base64url")
    data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if base64.urlsafe_b64encode(data).decode().rstrip("=") != text:
        raise ValueError("non-zero trailing bits")
    return data


RFC3339 = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)")


def rfc3339(text):
    """An RFC 3339 timestamp as exact seconds since the epoch (a Fraction: nothing is rounded)."""
    m = RFC3339.fullmatch(text) if isinstance(text, str) else None
    if not m:
        raise ValueError("not RFC 3339")
    whole = datetime.datetime.fromisoformat(m.group(1) + m.group(3).replace("Z", "+00:00"))
    digits = m.group(2) or "0"
    return Fraction(int(whole.timestamp())) + Fraction(int(digits), 10 ** len(digits))


ENTRY_REQUIRED = {"format", "decision", "canonicalization_profile", "credential_id", "client_data_json",
                  "authenticator_data", "signature", "nonce", "op_hash", "assertion_at"}
ENTRY_OPTIONAL = {"aaguid", "attestation_ref", "co_signatures"}
UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def decode_entry(e):
    # SPEC §6 4.1: another format is named before its members are judged.
    if isinstance(e, dict) and isinstance(e.get("format"), str) and e["format"] != "webauthn.assertion/1":
        raise Refused("unsupported_format", e["format"])
    if not isinstance(e, dict) or not ENTRY_REQUIRED <= set(e) or not set(e) <= ENTRY_REQUIRED | ENTRY_OPTIONAL:
        raise Refused("evidence_malformed", "entry members")
    try:
        out = {k: b64url(e[k]) for k in ("credential_id", "client_data_json", "authenticator_data", "signature", "nonce", "op_hash")}
    except ValueError as err:
        raise Refused("evidence_malformed", str(err))
    for k in ("format", "canonicalization_profile", "assertion_at"):
        if not isinstance(e[k], str):
            raise Refused("evidence_malformed", k)
    if e["decision"] not in ("APPROVED", "DENIED"):
        raise Refused("evidence_malformed", "decision")
    # aaguid: absent or a UUID string; null is not absent.
    if "aaguid" in e and not (isinstance(e["aaguid"], str) and UUID.fullmatch(e["aaguid"])):
        raise Refused("evidence_malformed", "aaguid")
    if e.get("attestation_ref") is not None and not isinstance(e["attestation_ref"], str):
        raise Refused("evidence_malformed", "attestation_ref")
    if "co_signatures" in e and not isinstance(e["co_signatures"], list):
        raise Refused("evidence_malformed", "co_signatures")
    out.update({k: e[k] for k in ("format", "decision", "canonicalization_profile", "assertion_at")})
    # The timestamp is part of decoding the entry (before any signature work).
    try:
        out["at"] = rfc3339(e["assertion_at"])
    except ValueError:
        raise Refused("evidence_malformed", "assertion_at")
    return out


def parse_client_data(raw):
    """The members Countersign reads, strictly: duplicates of them are refused."""
    try:
        cd = strict_loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise Refused("evidence_malformed", f"clientDataJSON: {e}")
    if not isinstance(cd, dict) or getattr(cd, "duplicate", False):
        raise Refused("evidence_malformed", "clientDataJSON shape")
    for k in ("type", "challenge", "origin"):
        if not isinstance(cd.get(k), str):
            raise Refused("evidence_malformed", f"clientDataJSON {k}")
    # Absent or of its type: null is a wrong type, not "absent".
    if "crossOrigin" in cd and not isinstance(cd["crossOrigin"], bool):
        raise Refused("evidence_malformed", "crossOrigin")
    if "topOrigin" in cd and not isinstance(cd["topOrigin"], str):
        raise Refused("evidence_malformed", "topOrigin")
    try:
        cd["challenge_bytes"] = b64url(cd["challenge"])
    except ValueError:
        raise Refused("evidence_malformed", "challenge encoding")
    return cd


WEBAUTHN_REASONS = [
    ("Unexpected client data type", "evidence_malformed"),
    ("challenge was not expected", "binding_mismatch"),
    ("Unexpected client data origin", "origin_mismatch"),
    ("Unexpected RP ID hash", "rp_mismatch"),
    ("User was not present", "user_not_present"),
    ("User verification is required", "user_not_verified"),
    ("sign count", "counter_regression"),
    ("Could not verify authentication signature", "signature_invalid"),
    ("malformed", "evidence_malformed"),
]


def py_webauthn_check(entry, rec, policy, stored):
    """The WebAuthn layer, by py_webauthn. Returns the flags byte; raises Refused."""
    cred = {
        "id": base64.urlsafe_b64encode(entry["credential_id"]).decode().rstrip("="),
        "rawId": base64.urlsafe_b64encode(entry["credential_id"]).decode().rstrip("="),
        "type": "public-key",
        "response": {k2: base64.urlsafe_b64encode(entry[k1]).decode().rstrip("=") for k1, k2 in
                     [("client_data_json", "clientDataJSON"), ("authenticator_data", "authenticatorData"), ("signature", "signature")]},
    }

    def call(count):
        return webauthn.verify_authentication_response(
            credential=cred, expected_challenge=entry["nonce"] + entry["op_hash"], expected_rp_id=policy["rp_id"],
            expected_origin=list(policy["origins"]), credential_public_key=rec["public_key"],
            credential_current_sign_count=count, require_user_verification=policy["require_user_verification"])

    def reason(exc):
        msg = str(exc)
        return next((code for needle, code in WEBAUTHN_REASONS if needle in msg), "evidence_malformed")

    try:
        call(stored)
    except InvalidAuthenticationResponse as exc:
        code = reason(exc)
        if code == "counter_regression":
            # py_webauthn checks the counter before the signature; SPEC §5 checks the signature
            # first, so a counter finding only counts for signed data.
            try:
                call(0)
            except InvalidAuthenticationResponse as exc2:
                if reason(exc2) == "signature_invalid":
                    code = "signature_invalid"
            except Exception:
                pass
        raise Refused(code, str(exc))
    except Exception as exc:  # InvalidBackupFlags and friends
        raise Refused("evidence_malformed", repr(exc))
    return entry["authenticator_data"][32]


DEFAULT_POLICY = {"require_evidence": True, "require_user_verification": True, "min_assurance": None, "quorum": 1,
                  "max_age_seconds": 300, "clock_skew_seconds": 60, "allow_cross_origin": False, "top_origins": [],
                  "aal3_aaguids": None, "nfc": "require", "profile_tools": {}, "approvers": None}


def policy_shape_error(raw):
    """SPEC §8 and §11: a policy with an unknown member or a member of the wrong type is unusable.
    `null` is a value, not an absence, on every member: absent takes the default, null is refused
    (SPEC §2), also for min_assurance, aal3_aaguids and approvers, whose absence means "no
    restriction"."""
    if not isinstance(raw, dict):
        return "policy is not an object"
    unknown = set(raw) - set(DEFAULT_POLICY) - {"rp_id", "origins"}
    if unknown:
        return f"unknown members {sorted(unknown)}"
    strs = lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v)
    count = lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0
    checks = {
        "rp_id": lambda v: isinstance(v, str),
        "origins": strs,
        "require_evidence": lambda v: isinstance(v, bool),
        "require_user_verification": lambda v: isinstance(v, bool),
        "allow_cross_origin": lambda v: isinstance(v, bool),
        "min_assurance": lambda v: v in ("declared", "AAL1", "AAL2", "AAL3"),
        "quorum": lambda v: count(v) and v < 2**32,
        "max_age_seconds": count,
        "clock_skew_seconds": count,
        "top_origins": strs,
        "aal3_aaguids": lambda v: strs(v),
        "nfc": lambda v: v in ("require", "normalize"),
        "profile_tools": lambda v: isinstance(v, dict) and all(isinstance(x, str) for x in v.values()),
        "approvers": lambda v: strs(v),
    }
    for member in ("rp_id", "origins"):
        if member not in raw:
            return f"{member} is required"
    for member, value in raw.items():
        if not checks[member](value):
            return f"{member} has the wrong type or value: {value!r}"
    return None


def contradictory(policy):
    """SPEC §8: a policy that demands and waives evidence at once, or that nobody could satisfy."""
    if policy["require_evidence"] is False:
        if policy["min_assurance"] not in (None, "declared"):
            return "require_evidence false with min_assurance above declared"
        if policy["quorum"] > 1:
            return "require_evidence false with quorum above one"
    if policy["approvers"] is not None:
        if not policy["approvers"]:
            return "approvers is empty"
        if len(set(policy["approvers"])) < policy["quorum"]:
            return "fewer eligible principals than the quorum"
    return None


def check_operation(action, profile, fields, policy):
    """SPEC §6 step 3: the tool that runs is the one the evidence is about."""
    tool = action.get("tool")
    if "tool_name" in [n for n, _ in PROFILES[profile]]:
        if tool is not None and fields.get("tool_name") != tool:
            raise Refused("binding_mismatch", "tool differs from the signed tool_name")
        return
    bound = policy["profile_tools"].get(profile)
    if tool is not None and bound != tool:
        raise Refused("action_inadmissible", "profile not bound to this tool")
    if tool is None and bound is not None:
        raise Refused("action_inadmissible", "profile bound to a tool, action names none")


def verify_case(raw):
    try:
        text = raw.decode("utf-8")
        case = json.loads(text)
        spans = dict(members(text))
        action_fields = dict(members(spans["action"]))["fields"]
        result_text = spans["result"]
    except (UnicodeDecodeError, ValueError, KeyError) as e:
        raise Unusable(f"CASE: {e}")
    policy = dict(DEFAULT_POLICY)
    policy.update(case["policy"])
    # The result envelope (SPEC §2.1): read strictly, a duplicate member anywhere is unusable.
    try:
        if has_duplicate(strict_loads(result_text)):
            return verdict("DENY", None, "result_malformed")
    except ValueError:
        return verdict("DENY", None, "result_malformed")
    result = case["result"]
    if isinstance(result, str):
        result = {"status": result}
    if not isinstance(result, dict) or result.get("status") not in ("APPROVED", "DENIED", "PENDING"):
        return verdict("DENY", None, "result_malformed")
    # The transport's informational strings: null reads as absent (SPEC §2.1), except the
    # approval_id of a PENDING result, which is what the gateway asks again with.
    for k in ("approval_id", "expires_at", "redrive_url", "reason_code"):
        informational = k != "approval_id" or result["status"] != "PENDING"
        if k in result and not isinstance(result[k], str) and not (informational and result[k] is None):
            return verdict("DENY", None, "result_malformed")
    # Members that carry meaning are absent or of their type: null is refused, not "absent".
    for k in ("identity_assurance", "authority"):
        if k in result and result[k] is None:
            return verdict("DENY", None, "result_malformed")
    if "revises" in result and not isinstance(result["revises"], str):
        return verdict("DENY", None, "result_malformed")
    evidence = result.get("approver_evidence")
    # Absent means none; anything else, null included, must be an array.
    if "approver_evidence" in result and not isinstance(evidence, list):
        return verdict("DENY", None, "result_malformed")
    status = result["status"]
    if status == "PENDING" and result.get("approval_id") is None:
        return verdict("DENY", None, "result_malformed")
    if "standing_grant" in result and not standing_member_ok(result["standing_grant"]):
        return verdict("DENY", None, "result_malformed")
    # Optional CASE members are absent or of their type; null is refused (SPEC §2).
    if isinstance(case["action"], dict) and "tool" in case["action"] and case["action"]["tool"] is None:
        raise UnusableMember("action", "tool is null")
    for c in case["registry"]["credentials"]:
        for k in ("aaguid", "backup_eligible", "attestation"):
            if k in c and c[k] is None:
                raise UnusableMember("registry", f"{k} is null")
        if isinstance(c.get("attestation"), dict) and "root" in c["attestation"] and c["attestation"]["root"] is None:
            raise UnusableMember("registry", "attestation.root is null")
    # A usable result under an unusable policy: no verdict at all (SPEC §8, §11).
    why = policy_shape_error(case["policy"])
    if why:
        raise UnusableMember("policy", why)
    why = contradictory(policy)
    if why:
        raise UnusableMember("policy", why)
    now = rfc3339(case["now"])
    registry = {}
    for c in case["registry"]["credentials"]:
        c = dict(c)
        c["public_key"] = b64url(c["public_key"])
        registry[b64url(c["credential_id"])] = c

    if status == "PENDING":
        return verdict("DENY", "PENDING", "pending")
    if "standing_grant" in result:
        return verify_standing(case, result, action_fields, policy, registry, now)
    if not evidence:
        if status == "APPROVED":
            if policy["require_evidence"]:
                return verdict("DENY", "APPROVED", "evidence_missing")
            return verdict("ALLOW", "APPROVED", None)
        reason = result.get("reason_code")
        return verdict("DENY", status, reason if reason in TRANSPORT else "approver_refused")
    try:
        profile = case["action"]["profile"]
        if profile not in PROFILES:
            raise Refused("profile_unknown", profile)
        fields = admit_fields(profile, action_fields, policy["nfc"])
        check_operation(case["action"], profile, fields, policy)
        approvers = []
        seen = []
        for e in evidence:
            approvers.append(verify_entry(e, profile, fields, registry, policy, now, seen))
    except Refused as r:
        return verdict("DENY", status, r.code)
    # SPEC §6 steps 6-10.
    weakest = min((a["level"] for a in approvers), key=LEVELS.index)
    refusals = [a for a in approvers if a["decision"] == "DENIED"]
    if refusals:
        return verdict("DENY", "DENIED", "approver_refused", refusals[0]["level"])
    if status != "APPROVED":
        return verdict("DENY", status, "binding_mismatch", weakest)
    if policy["min_assurance"] and any(LEVELS.index(a["level"]) < LEVELS.index(policy["min_assurance"]) for a in approvers):
        return verdict("DENY", "APPROVED", "insufficient_assurance", weakest)
    if len({a["principal"] for a in approvers}) < max(policy["quorum"], 1):
        return verdict("DENY", "APPROVED", "quorum_not_met", weakest)
    return verdict("ALLOW", "APPROVED", None, weakest)


def verify_entry(e, profile, fields, registry, policy, now, seen, standing_use=None):
    """One entry (SPEC §6 step 4). With `standing_use`, an entry of a standing grant for that use
    (SPEC §14.3 step 4): replay key nonce || use, no counter comparison, no max_age."""
    entry = decode_entry(e)
    if entry["format"] != "webauthn.assertion/1":
        raise Refused("unsupported_format", entry["format"])
    if entry["canonicalization_profile"] not in PROFILES:
        raise Refused("profile_unknown", entry["canonicalization_profile"])
    if entry["canonicalization_profile"] != profile:
        raise Refused("binding_mismatch", "profile")
    rec = registry.get(entry["credential_id"])
    if rec is None:
        raise Refused("credential_unknown")
    if rec.get("revoked"):
        raise Refused("credential_revoked")
    # Eligibility right after the lookup, before any key or signature work (SPEC §6 4.4).
    if policy["approvers"] is not None and rec["principal"] not in policy["approvers"]:
        raise Refused("approver_ineligible", rec["principal"])
    if cbor2.loads(rec["public_key"]).get(3) not in SUPPORTED_ALGS:
        raise Refused("unsupported_algorithm")
    # Binding (SPEC §6 4.5): the decision is read from the signed challenge.
    if len(entry["nonce"]) != 32:
        raise Refused("evidence_malformed", "nonce length")
    cd = parse_client_data(entry["client_data_json"])
    challenge = cd["challenge_bytes"]
    if len(challenge) != 64 or challenge[:32] != entry["nonce"] or challenge[32:] != entry["op_hash"]:
        raise Refused("binding_mismatch", "challenge")
    if op_hash(profile, entry["decision"], fields) != challenge[32:]:
        raise Refused("binding_mismatch", "op_hash")
    # The WebAuthn layer, then BE against enrollment in its place (after UV, before the signature).
    be_enrolled = rec.get("backup_eligible")
    flags = entry["authenticator_data"][32] if len(entry["authenticator_data"]) > 32 else 0
    be, bs, uv = bool(flags & 0x08), bool(flags & 0x10), bool(flags & 0x04)
    be_problem = None
    if bs and not be:
        be_problem = "evidence_malformed"
    elif be_enrolled is not None and be_enrolled != be:
        be_problem = "backup_eligibility_mismatch"
    try:
        stored = rec.get("sign_count", 0) if standing_use is None else 0
        py_webauthn_check(entry, rec, policy, stored)
    except Refused as r:
        if be_problem and r.code in ("signature_invalid", "counter_regression"):
            raise Refused(be_problem)
        raise
    if be_problem:
        raise Refused(be_problem)
    # Freshness, then replay (SPEC §10): exact durations, never rounded.
    age = now - entry["at"]
    if age < 0 and -age > policy["clock_skew_seconds"]:
        raise Refused("stale", "future")
    if standing_use is None and age > policy["max_age_seconds"]:
        raise Refused("stale")
    key = entry["nonce"] if standing_use is None else entry["nonce"] + standing_use.to_bytes(8, "big")
    if key in seen:
        raise Refused("replayed")
    seen.append(key)
    # Assurance (SPEC §7).
    attestation = rec.get("attestation") or {}
    aaguids = policy["aal3_aaguids"]
    allowed = aaguids is None or (rec.get("aaguid") or "").lower() in [a.lower() for a in aaguids]
    device_bound = not be and be_enrolled is not True
    level = "AAL1" if not uv else ("AAL3" if device_bound and attestation.get("chain_verified") and allowed else "AAL2")
    return {"principal": rec["principal"], "decision": entry["decision"], "level": level}


# --- standing grants (SPEC §14) ------------------------------------------------------------------

class OutOfScope(Exception):
    """The call is outside the grant's scope (SPEC §14.3 step 7)."""


GATEWAY_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")
SCOPE_MEMBERS = {"calls", "agent_id", "tool_name", "constraints", "max_uses", "expires_at"}
CONSTRAINT_MEMBERS = {"one_of": {"arg", "values"}, "prefix": {"arg", "prefix"}, "path": {"arg", "under"},
                      "max": {"arg", "max"}, "currency": {"arg", "allowed"}}


def standing_member_ok(g):
    """SPEC §2.1: exactly grant_id (string), fields (object), use (integer >= 1); null is not absent."""
    return (isinstance(g, dict) and set(g) == {"grant_id", "fields", "use"} and isinstance(g["grant_id"], str)
            and isinstance(g["fields"], dict) and isinstance(g["use"], int) and not isinstance(g["use"], bool)
            and 1 <= g["use"] <= 2**64 - 1)


def no_control(s):
    return not any(unicodedata.category(c) == "Cc" for c in s)


def read_name(v, limit=256):
    if not isinstance(v, str) or not v or len(v.encode("utf-8", "surrogatepass")) > limit or not no_control(v):
        raise ValueError(f"bad name {v!r}")
    return v


def read_pointer(text):
    """A JSON Pointer into the call's arguments: tokens, or ValueError."""
    if not isinstance(text, str) or len(text.encode("utf-8", "surrogatepass")) > 256 or not text.startswith("/") \
            or not no_control(text):
        raise ValueError(f"bad argument path {text!r}")
    tokens = []
    for raw in text[1:].split("/"):
        if not raw or re.search(r"~(?![01])", raw):
            raise ValueError(f"bad argument path {text!r}")
        tokens.append(raw.replace("~1", "/").replace("~0", "~"))
    if len(tokens) > 16:
        raise ValueError("argument path deeper than 16")
    return tokens


def amount(v):
    """An exact amount (SPEC §12.1 `max`): a decimal string or a JSON integer, never a float."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        v = str(v)
    if not isinstance(v, str) or len(v) > 64 or not DECIMAL.fullmatch(v):
        return None
    if v.startswith("-") and set(v[1:]) <= {"0", "."}:
        return None  # negative zero
    return Fraction(v)


def read_scope(fields):
    """The grant's signed fields as a scope (SPEC §14.1); ValueError when unreadable."""
    if set(fields) != SCOPE_MEMBERS:
        raise ValueError("scope members")
    calls = fields["calls"]
    if not isinstance(calls, dict) or not {"profile", "gateways"} <= set(calls) \
            or not set(calls) <= {"profile", "server_id", "gateways"}:
        raise ValueError("calls members")
    read_name(calls["profile"])
    if "server_id" in calls:
        read_name(calls["server_id"])  # null is not absent: refused here
    gateways = calls["gateways"]
    if not isinstance(gateways, list) or not 1 <= len(gateways) <= 64 or len(set(map(str, gateways))) != len(gateways) \
            or not all(isinstance(g, str) and GATEWAY_NAME.fullmatch(g) for g in gateways):
        raise ValueError("calls.gateways")
    for member in ("agent_id", "tool_name"):
        read_name(fields[member])
    if not isinstance(fields["constraints"], list):
        raise ValueError("constraints")
    rules = []
    for c in fields["constraints"]:
        if not isinstance(c, dict) or c.get("kind") not in CONSTRAINT_MEMBERS \
                or set(c) != {"kind"} | CONSTRAINT_MEMBERS[c["kind"]]:
            raise ValueError(f"constraint {c!r}")
        kind, rule = c["kind"], dict(c)
        rule["path"] = read_pointer(c["arg"])
        if kind == "one_of" and not (isinstance(c["values"], list) and c["values"]):
            raise ValueError("one_of values")
        if kind == "prefix" and not prefix_text_readable(c["prefix"]):
            raise ValueError("prefix: empty, or holding '/' or '\\' (a file path is a path rule)")
        if kind == "path":
            # The directory must be a string written in normal form (SPEC §14.4); PathRefused is
            # a ValueError, so a grant holding another is unreadable.
            if not isinstance(c["under"], str):
                raise ValueError("path: under is not a string")
            path_under(c["under"])
        if kind == "max":
            if not isinstance(c["max"], str) or amount(c["max"]) is None or amount(c["max"]) < 0:
                raise ValueError("max")
        if kind == "currency" and not (isinstance(c["allowed"], list) and c["allowed"] and all(
                isinstance(x, str) and re.fullmatch(r"[A-Z]{3}", x) for x in c["allowed"])):
            raise ValueError("currency")
        rules.append(rule)
    max_uses = fields["max_uses"]
    if not 1 <= max_uses <= SAFE:
        raise ValueError("max_uses")
    m = RFC3339.fullmatch(fields["expires_at"])
    if not m:
        raise ValueError("expires_at without an explicit offset")
    return {"calls": calls, "agent": fields["agent_id"], "tool": fields["tool_name"], "rules": rules,
            "max_uses": max_uses, "expires_at": rfc3339(fields["expires_at"])}


def pattern_matches(pattern, text):
    """`*` matches any run of characters; everything else matches itself (SPEC §12.1)."""
    regex = "".join(".*" if c == "*" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, text, re.DOTALL) is not None


def json_equal(a, b):
    """JSON equality: 1 is not "1", true is not 1 (Python's == says it is)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return set(a) == set(b) and all(json_equal(a[k], b[k]) for k in a)
    return a == b


def resolve(tokens, args):
    at = args
    for t in tokens:
        if isinstance(at, dict) and t in at:
            at = at[t]
        elif isinstance(at, list) and re.fullmatch(r"0|[1-9][0-9]*", t) and int(t) < len(at):
            at = at[int(t)]
        else:
            raise OutOfScope(f"argument {t!r} absent")
    return at


def check_coverage(scope, use, call):
    """SPEC §14.3 step 7: uses, the calls (profile, server), agent, tool, then each constraint."""
    if use > scope["max_uses"]:
        raise OutOfScope("use beyond max_uses")
    calls = scope["calls"]
    if calls["profile"] != call["profile"]:
        raise OutOfScope("another profile")
    if calls.get("server_id") != call.get("server_id"):
        raise OutOfScope("another server (or one side names none)")
    if not pattern_matches(scope["agent"], call["agent_id"]):
        raise OutOfScope("agent")
    if not pattern_matches(scope["tool"], call["tool_name"]):
        raise OutOfScope("tool")
    args = call["params"]
    if not isinstance(args, dict):
        raise OutOfScope("arguments not an object")
    for rule in scope["rules"]:
        value = resolve(rule["path"], args)
        kind = rule["kind"]
        if kind == "one_of" and not any(json_equal(value, v) for v in rule["values"]):
            raise OutOfScope("one_of")
        if kind in ("prefix", "currency") and not isinstance(value, str):
            raise OutOfScope(f"{kind}: not a string")
        if kind == "prefix" and not value.startswith(rule["prefix"]):
            raise OutOfScope("prefix")
        if kind == "path" and not path_covers(rule["under"], value):
            raise OutOfScope("path: not a path inside the directory, or one read two ways")
        if kind == "currency" and value not in rule["allowed"]:
            raise OutOfScope("currency")
        if kind == "max":
            got = amount(value)
            if got is None or got < 0 or got > amount(rule["max"]):
                raise OutOfScope("max")


def verify_standing(case, result, action_fields, policy, registry, now):
    """SPEC §14.3: a call approved under a standing grant, checked against the grant's scope."""
    status, evidence, grant = result["status"], result.get("approver_evidence") or [], result["standing_grant"]
    if status != "APPROVED":
        return verdict("DENY", status, "binding_mismatch")
    if not evidence:
        return verdict("DENY", "APPROVED", "evidence_missing")
    try:
        # 2. The call, bound as any action; it must be a tool call to be covered.
        profile = case["action"]["profile"]
        if profile not in PROFILES:
            raise Refused("profile_unknown", profile)
        fields = admit_fields(profile, action_fields, policy["nfc"])
        check_operation(case["action"], profile, fields, policy)
        if not {"agent_id", "tool_name", "params"} <= {n for n, _ in PROFILES[profile]}:
            raise Refused("action_inadmissible", "a grant covers tool calls only")
        call = dict(fields, profile=profile)
        # 3. The grant's fields, admitted under its profile with NFC required, read as a scope.
        try:
            grant_fields = admit_fields(STANDING_PROFILE, json.dumps(grant["fields"], ensure_ascii=False), "require")
            scope = read_scope(grant_fields)
        except (Refused, ValueError) as e:
            raise Refused("evidence_malformed", f"grant unreadable: {e}")
        # 4.-5. Every entry binds the grant; eligibility is the call's policy's.
        seen, approvers = [], []
        for e in evidence:
            approvers.append(verify_entry(e, STANDING_PROFILE, grant_fields, registry, policy, now, seen,
                                          standing_use=grant["use"]))
    except Refused as r:
        return verdict("DENY", status, r.code)
    weakest = min((a["level"] for a in approvers), key=LEVELS.index)
    refusals = [a for a in approvers if a["decision"] == "DENIED"]
    if refusals:
        return verdict("DENY", "DENIED", "approver_refused", refusals[0]["level"])
    # 6.-7. Expiry (exclusive), then coverage.
    if now >= scope["expires_at"]:
        return verdict("DENY", "APPROVED", "standing_grant_expired", weakest)
    try:
        check_coverage(scope, grant["use"], call)
    except OutOfScope:
        return verdict("DENY", "APPROVED", "out_of_scope", weakest)
    # 8. Assurance and quorum, as for any approval.
    if policy["min_assurance"] and any(LEVELS.index(a["level"]) < LEVELS.index(policy["min_assurance"]) for a in approvers):
        return verdict("DENY", "APPROVED", "insufficient_assurance", weakest)
    if len({a["principal"] for a in approvers}) < max(policy["quorum"], 1):
        return verdict("DENY", "APPROVED", "quorum_not_met", weakest)
    return verdict("ALLOW", "APPROVED", None, weakest)


def verdict(effective, decision, reason, level="declared"):
    return {"effective": effective, "decision": decision, "reason_code": reason, "identity_assurance_level": level}


# --- protocol --------------------------------------------------------------------------------

def input_bytes(req):
    if "input" in req:
        return json.dumps(req["input"], ensure_ascii=False).encode("utf-8", "surrogatepass")
    if "input_text" in req:
        return req["input_text"].encode("utf-8", "surrogatepass")
    return base64.b64decode(req["input_base64"])


def answer(req):
    rid = req.get("id")
    try:
        raw = input_bytes(req)
        if req.get("kind") == "op_hash":
            try:
                h = op_hash_document(raw)
                return {"id": rid, "verdict": {"op_hash": base64.urlsafe_b64encode(h).decode().rstrip("=")}}
            except Refused as r:
                return {"id": rid, "verdict": {"error": r.code}}
        if req.get("kind") == "evidence":
            return {"id": rid, "verdict": verify_case(raw)}
        return {"id": rid, "unsupported": f"kind {req.get('kind')!r}"}
    except UnusableMember as e:
        return {"id": rid, "verdict": {"unusable_case": e.member}}
    except Unusable as e:
        return {"id": rid, "error": str(e)}
    except Exception as e:  # a bug in this adapter: report it, keep serving
        return {"id": rid, "error": f"adapter error: {e!r}"}


def serve():
    hello = {"protocol": PROTOCOL, "implementation": f"py_webauthn {webauthn.__version__} adapter",
             "kinds": ["evidence", "op_hash"], "unsupported_flags": UNSUPPORTED}
    print(json.dumps(hello), flush=True)
    for line in sys.stdin:
        if line.strip():
            print(json.dumps(answer(json.loads(line))), flush=True)


def external(path):
    """Verify the third-party assertions with py_webauthn; print one line each and a count."""
    with open(path) as f:
        items = json.load(f)
    passed = failed = skipped = 0
    for i, x in enumerate(items):
        alg = cbor2.loads(b64url(x["credential_public_key"])).get(3)
        name = f"external[{i}] {x['kind']} {x['alg']}"
        if alg not in {-7, -8, -36, -257, -258, -259, -37, -38, -39}:
            print(f"SKIP {name}: py_webauthn has no COSE algorithm {alg}")
            skipped += 1
            continue
        cred = {"id": x["credential_id_b64url"], "rawId": x["credential_id_b64url"], "type": "public-key",
                "response": {"clientDataJSON": x["client_data_json_b64url"],
                             "authenticatorData": x["authenticator_data_b64url"], "signature": x["signature_b64url"]}}
        try:
            webauthn.verify_authentication_response(
                credential=cred, expected_challenge=b64url(x["challenge_b64url"]), expected_rp_id=x["rp_id"],
                expected_origin=x["origin"], credential_public_key=b64url(x["credential_public_key"]),
                credential_current_sign_count=int(x.get("stored_sign_count") or 0))
            ok = x["expected_result"] == "valid"
            # The same assertion with one signature bit flipped must be refused.
            sig = bytearray(b64url(x["signature_b64url"]))
            sig[-2] ^= 0x01
            cred["response"]["signature"] = base64.urlsafe_b64encode(bytes(sig)).decode().rstrip("=")
            try:
                webauthn.verify_authentication_response(
                    credential=cred, expected_challenge=b64url(x["challenge_b64url"]), expected_rp_id=x["rp_id"],
                    expected_origin=x["origin"], credential_public_key=b64url(x["credential_public_key"]),
                    credential_current_sign_count=int(x.get("stored_sign_count") or 0))
                print(f"FAIL {name}: accepted with a flipped signature bit")
                ok = False
            except Exception:
                pass
        except Exception as e:
            ok = x["expected_result"] != "valid"
            if not ok:
                print(f"FAIL {name}: {e}")
        passed += ok
        failed += not ok
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--external":
        sys.exit(external(sys.argv[2]))
    serve()
