"""A PDP's check of an ARAP approval.state with joserfc, which Countersign does not use.

Usage: arap_verify.py BASE_URL STATE AUDIENCE APPROVAL_ID. Discovers jwks_uri from BASE_URL's
/.well-known/authzen-configuration, verifies the compact JWS (EdDSA) against that JWK Set by
kid, checks iss, aud and exp with joserfc's claims registry (at the token's iat: the test's
service runs on a manual clock) and that approval_id is the one the PEP presented. Prints the
claims as JSON.
"""

import json
import sys
import urllib.request

from joserfc import jwt
from joserfc.jwk import KeySet


def get(url):
    with urllib.request.urlopen(url) as response:
        return json.load(response)


def main():
    base, state, audience, approval_id = sys.argv[1:5]
    metadata = get(base + "/.well-known/authzen-configuration")
    keys = KeySet.import_key_set(get(metadata["jwks_uri"]))
    token = jwt.decode(state, keys, algorithms=["EdDSA"])
    claims = token.claims
    registry = jwt.JWTClaimsRegistry(
        now=claims["iat"],
        iss={"essential": True, "value": base},
        aud={"essential": True, "value": audience},
        exp={"essential": True},
        approval_id={"essential": True, "value": approval_id},
    )
    registry.validate(claims)
    json.dump(claims, sys.stdout)


if __name__ == "__main__":
    main()
