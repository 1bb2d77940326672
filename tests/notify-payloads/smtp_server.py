"""A real SMTP server for the e-mail notification test (crates/countersign-server/tests/it/notify.rs).

aiosmtpd on 127.0.0.1 with STARTTLS required (`--mode starttls`) or TLS from the first byte
(`--mode implicit`), both with the given certificate, and AUTH required (LOGIN/PLAIN, one user).
Every accepted message is written to OUT/N.eml, with the user it was authenticated as in
OUT/N.auth. Prints the port on stdout, then serves until stdin closes.
"""

import argparse
import logging
import socket
import ssl
import sys
import warnings
from pathlib import Path

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword


class Save:
    def __init__(self, out: Path):
        self.out = out
        self.count = 0

    async def handle_DATA(self, server, session, envelope):
        self.count += 1
        user = session.auth_data.login.decode() if isinstance(session.auth_data, LoginPassword) else ""
        (self.out / f"{self.count}.eml").write_bytes(envelope.original_content or envelope.content)
        (self.out / f"{self.count}.auth").write_text(user)
        return "250 OK"


def main() -> None:
    # aiosmtpd warns about AUTH without STARTTLS, which implicit TLS makes moot.
    warnings.simplefilter("ignore")
    logging.disable(logging.WARNING)
    p = argparse.ArgumentParser()
    p.add_argument("--mode", choices=["starttls", "implicit"], required=True)
    p.add_argument("--cert", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--user", required=True)
    p.add_argument("--password", required=True)
    a = p.parse_args()

    def authenticator(server, session, envelope, mechanism, auth_data):
        ok = (
            isinstance(auth_data, LoginPassword)
            and auth_data.login == a.user.encode()
            and auth_data.password == a.password.encode()
        )
        return AuthResult(success=ok, handled=False, auth_data=auth_data if ok else None)

    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(a.cert, a.key)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    common = dict(hostname="127.0.0.1", port=port, authenticator=authenticator, auth_required=True)
    if a.mode == "starttls":
        controller = Controller(Save(out), tls_context=context, require_starttls=True, **common)
    else:
        # The whole connection is TLS, so AUTH needs no STARTTLS first.
        controller = Controller(Save(out), ssl_context=context, auth_require_tls=False, **common)
    controller.start()
    print(port, flush=True)
    sys.stdin.read()
    controller.stop()


if __name__ == "__main__":
    main()
