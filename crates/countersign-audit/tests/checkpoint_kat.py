#!/usr/bin/env python3
"""Known answer for the audit checkpoint (src/audit/checkpoint.rs), computed independently.

Builds the C2SP signed note (https://c2sp.org/signed-note) whose text is a tlog-checkpoint
(https://c2sp.org/tlog-checkpoint) with Countersign's version-1 extension lines, using only
Python's hashlib/base64 and the `cryptography` package's Ed25519 (pip install cryptography).
Writes checkpoint_kat.txt beside this script; the Rust unit test compares byte for byte.
"""
import base64
import hashlib
import pathlib

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

seed = bytes([7] * 32)
origin = "approvals.example.com/countersign/audit"
size = 3
head = hashlib.sha256(b"line 3").digest()
time = "2026-11-20T10:00:00.000Z"

text = f"{origin}\n{size}\n{base64.b64encode(head).decode()}\ncountersign.audit-checkpoint/1\ntime {time}\n"
key = Ed25519PrivateKey.from_private_bytes(seed)
public = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
key_id = hashlib.sha256(origin.encode() + b"\n" + b"\x01" + public).digest()[:4]
signature = key.sign(text.encode())
note = f"{text}\n\u2014 {origin} {base64.b64encode(key_id + signature).decode()}\n"

out = pathlib.Path(__file__).with_name("checkpoint_kat.txt")
out.write_text(note, encoding="utf-8")
print(note, end="")
