"""The software CTAP2 key (countersign_softkey::ctap2) checked by an independent CTAP2 client:
Yubico's python-fido2, talking to `examples/ctap2_stdio.rs` through its CtapDevice interface
(CTAPHID_CBOR requests and replies, without the HID packet framing).

    python ctap2_fido2.py PATH/TO/ctap2_stdio

Run by .ci/steps/terminal.sh in a venv with fido2 pinned. Exits non-zero on the first mismatch.
"""

import hashlib
import subprocess
import sys

from fido2 import cbor
from fido2.cose import CoseKey
from fido2.ctap import CtapDevice, CtapError
from fido2.ctap2 import Ctap2
from fido2.hid import CAPABILITY, CTAPHID

RP_ID = "pay.example.com"


class StdioKey(CtapDevice):
    """A CtapDevice whose CBOR commands go to the example process, one hex line each way."""

    def __init__(self, binary, *args):
        self.process = subprocess.Popen(
            [binary, "alice-es256", RP_ID, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        credential_id, cose = self.process.stdout.readline().split()
        self.credential_id = bytes.fromhex(credential_id)
        self.public_key = CoseKey.parse(cbor.decode(bytes.fromhex(cose)))

    @property
    def capabilities(self):
        return CAPABILITY.CBOR

    def call(self, cmd, data=b"", event=None, on_keepalive=None):
        assert cmd == CTAPHID.CBOR, cmd
        self.process.stdin.write(data.hex() + "\n")
        self.process.stdin.flush()
        return bytes.fromhex(self.process.stdout.readline().strip())

    def close(self):
        self.process.stdin.close()
        self.process.wait()

    @classmethod
    def list_devices(cls):
        return iter(())


def check(binary):
    key = StdioKey(binary)
    # strict_cbor: every reply must be canonical CTAP2 CBOR, or python-fido2 refuses it.
    ctap = Ctap2(key, strict_cbor=True)
    info = ctap.info
    assert info.versions == ["FIDO_2_0"], info.versions
    assert info.options.get("uv") is True and "clientPin" not in info.options, info.options

    client_data_hash = hashlib.sha256(b"client data").digest()
    for count in (1, 2):
        allow = [{"type": "public-key", "id": key.credential_id}] if count == 2 else None
        response = ctap.get_assertion(
            RP_ID, client_data_hash, allow_list=allow, options={"uv": True}
        )
        auth_data = response.auth_data
        assert auth_data.rp_id_hash == hashlib.sha256(RP_ID.encode()).digest()
        assert auth_data.is_user_present() and auth_data.is_user_verified()
        assert auth_data.counter == count, auth_data.counter
        assert response.credential["id"] == key.credential_id
        key.public_key.verify(bytes(auth_data) + client_data_hash, response.signature)

    for rp_id, allow, status in [
        ("other.example", None, CtapError.ERR.NO_CREDENTIALS),
        (RP_ID, [{"type": "public-key", "id": b"\x01\x02"}], CtapError.ERR.NO_CREDENTIALS),
    ]:
        try:
            ctap.get_assertion(rp_id, client_data_hash, allow_list=allow)
            raise SystemExit(f"no error for {rp_id} {allow}")
        except CtapError as e:
            assert e.code == status, e
    key.close()

    plain = StdioKey(binary, "--no-uv")
    ctap = Ctap2(plain, strict_cbor=True)
    assert "uv" not in ctap.info.options, ctap.info.options
    try:
        ctap.get_assertion(RP_ID, client_data_hash, options={"uv": True})
        raise SystemExit("a key without UV signed with uv requested")
    except CtapError as e:
        assert e.code == CtapError.ERR.UNSUPPORTED_OPTION, e
    plain.close()
    print("python-fido2 agrees with the software CTAP2 key")


if __name__ == "__main__":
    check(sys.argv[1])
