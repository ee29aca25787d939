"""DPoP (RFC 9449): tokens bound to a key the client holds, proven on every request.

Used when the resource server's challenge names the ``DPoP`` scheme and the authorization
server lists an algorithm we sign with in ``dpop_signing_alg_values_supported`` (or when asked
for with ``OAuth(dpop=True)``). Each request carries a fresh proof (``jti``, ``htm``, ``htu``,
``iat``, and ``ath`` for the token); a ``use_dpop_nonce`` answer is retried once with the
server's nonce, at the token endpoint and at the resource server alike.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import time
import urllib.parse
from typing import Any

from ..._extras import require

ALG = "ES256"


class DPoPKey:
    """An EC P-256 key pair and the proofs it signs. ``pem`` restores a saved one."""

    def __init__(self, pem: str | None = None) -> None:
        require("oauth", "a DPoP-bound token")
        import jwt
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ec

        if pem is None:
            self._key: Any = ec.generate_private_key(ec.SECP256R1())
        else:
            self._key = serialization.load_pem_private_key(pem.encode(), password=None)
        self.pem = self._key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()).decode()
        self.jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(self._key.public_key()))
        self.nonces: dict[str, str] = {}  # origin -> the last nonce its server gave

    def proof(self, method: str, url: str, *, access_token: str | None = None) -> str:
        import jwt

        parts = urllib.parse.urlsplit(url)
        htu = urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
        claims: dict[str, Any] = {"jti": secrets.token_urlsafe(16), "htm": method, "htu": htu, "iat": int(time.time())}
        if access_token is not None:
            claims["ath"] = base64.urlsafe_b64encode(hashlib.sha256(access_token.encode()).digest()).rstrip(b"=").decode()
        nonce = self.nonces.get(_origin(url))
        if nonce is not None:
            claims["nonce"] = nonce
        return jwt.encode(claims, self._key, algorithm=ALG, headers={"typ": "dpop+jwt", "jwk": self.jwk})

    def remember_nonce(self, url: str, headers: Any) -> bool:
        """Keep the ``DPoP-Nonce`` an answer carries; True when it is a new one."""
        nonce = headers.get("dpop-nonce")
        if not nonce or self.nonces.get(_origin(url)) == nonce:
            return False
        self.nonces[_origin(url)] = nonce
        return True


def _origin(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"
