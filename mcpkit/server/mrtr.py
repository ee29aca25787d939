"""Tamper-proof ``requestState`` for multi round-trip requests (2026-07-28).

The state a tool hands back travels through the client, so it is sealed with an HMAC over the
method, the tool or prompt name and an expiry; anything altered or stale is refused.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from typing import Any

import msgspec


class _Sealed(msgspec.Struct, array_like=True):
    method: str
    name: str
    expires: int
    state: Any


class StateSealer:
    def __init__(self, secret: bytes | None = None, ttl_s: int = 3600) -> None:
        # Several worker processes must share one secret (setting ``state_secret``).
        self._key = secret or secrets.token_bytes(32)
        self._ttl = ttl_s

    def seal(self, method: str, name: str, state: Any) -> str:
        body = msgspec.json.encode(_Sealed(method, name, int(time.time()) + self._ttl, state))
        mac = hmac.new(self._key, body, hashlib.sha256).digest()
        return _b64(body) + "." + _b64(mac)

    def open(self, method: str, name: str, token: str) -> Any:
        """The state inside ``token``; ValueError if forged, altered, expired or misdirected."""
        try:
            body_s, mac_s = token.split(".")
            body, mac = _unb64(body_s), _unb64(mac_s)
        except (ValueError, TypeError):
            raise ValueError("Invalid or expired requestState") from None
        if not hmac.compare_digest(mac, hmac.new(self._key, body, hashlib.sha256).digest()):
            raise ValueError("Invalid or expired requestState")
        sealed = msgspec.json.decode(body, type=_Sealed)
        if sealed.method != method or sealed.name != name or sealed.expires < time.time():
            raise ValueError("Invalid or expired requestState")
        return sealed.state


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)
