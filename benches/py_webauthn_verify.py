#!/usr/bin/env python3
"""Time py_webauthn's verify_authentication_response on an ES256 and an Ed25519 assertion.

The assertions have the same shape as the ones in the Rust `verify` benchmark: a 64-byte challenge
(nonce || op_hash), a Chrome-shaped clientDataJSON, 37 bytes of authenticatorData with UP|UV.

    python3 -m venv .venv && .venv/bin/pip install webauthn==3.0.1 cryptography
    .venv/bin/python benches/py_webauthn_verify.py

Prints the median of several timing runs, in microseconds per verification.
"""

import base64
import hashlib
import json
import os
import statistics
import timeit

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from webauthn import verify_authentication_response


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def cose_key(public_key) -> bytes:
    """Encode a public key as a COSE_Key (hand-rolled canonical CBOR for the two key types)."""
    if isinstance(public_key, ec.EllipticCurvePublicKey):
        nums = public_key.public_numbers()
        x, y = nums.x.to_bytes(32, "big"), nums.y.to_bytes(32, "big")
        # {1: 2, 3: -7, -1: 1, -2: x, -3: y}
        return bytes([0xA5, 0x01, 0x02, 0x03, 0x26, 0x20, 0x01, 0x21, 0x58, 0x20]) + x + bytes([0x22, 0x58, 0x20]) + y
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    # {1: 1, 3: -8, -1: 6, -2: x}
    return bytes([0xA4, 0x01, 0x01, 0x03, 0x27, 0x20, 0x06, 0x21, 0x58, 0x20]) + raw


def assertion(private_key, rp_id: str, origin: str, challenge: bytes):
    cdj = json.dumps(
        {"type": "webauthn.get", "challenge": b64url(challenge), "origin": origin, "crossOrigin": False},
        separators=(",", ":"),
    ).encode()
    auth_data = hashlib.sha256(rp_id.encode()).digest() + bytes([0x05]) + (7).to_bytes(4, "big")
    signed = auth_data + hashlib.sha256(cdj).digest()
    if isinstance(private_key, ec.EllipticCurvePrivateKey):
        sig = private_key.sign(signed, ec.ECDSA(hashes.SHA256()))
    else:
        sig = private_key.sign(signed)
    cred_id = hashlib.sha256(cose_key(private_key.public_key())).digest()
    return {
        "id": b64url(cred_id),
        "rawId": b64url(cred_id),
        "type": "public-key",
        "response": {
            "clientDataJSON": b64url(cdj),
            "authenticatorData": b64url(auth_data),
            "signature": b64url(sig),
        },
    }


def bench(name: str, private_key) -> float:
    rp_id, origin = "example.org", "https://example.org"
    challenge = os.urandom(64)
    credential = assertion(private_key, rp_id, origin, challenge)
    public = cose_key(private_key.public_key())

    def once():
        verify_authentication_response(
            credential=credential,
            expected_challenge=challenge,
            expected_rp_id=rp_id,
            expected_origin=origin,
            credential_public_key=public,
            credential_current_sign_count=0,
            require_user_verification=True,
        )

    once()  # fail loudly before timing
    number = 2000
    runs = [t / number * 1e6 for t in timeit.repeat(once, number=number, repeat=7)]
    median = statistics.median(runs)
    print(f"py_webauthn verify_authentication_response {name}: median {median:.1f} us (runs: "
          + ", ".join(f"{r:.1f}" for r in runs) + ")")
    return median


if __name__ == "__main__":
    import webauthn

    print(f"py_webauthn {getattr(webauthn, '__version__', '?')}")
    bench("ES256", ec.generate_private_key(ec.SECP256R1()))
    bench("EdDSA", ed25519.Ed25519PrivateKey.generate())
