"""Opaque (or any) access tokens checked with the issuer's RFC 7662 introspection endpoint.

Answers are cached per token (by its SHA-256, never the token itself) for at most
``introspection_cache_s`` and never past the token's ``exp``; refusals for a few seconds, so a
flood of bad tokens does not become a flood of introspection calls. A revoked token is refused
at the latest ``introspection_cache_s`` after its revocation.
"""

from __future__ import annotations

import hashlib
import logging
import time
from typing import Any

import httpx

from ....server.auth import AuthSettings, InvalidToken, Principal, VerifierUnavailable
from .claims import audiences, principal_from
from .issuer import fetch_json, http_client

log = logging.getLogger("mcpkit.auth")
MAX_CACHED = 10_000
NEGATIVE_CACHE_S = 5.0


class IntrospectionVerifier:
    def __init__(self, auth: AuthSettings) -> None:
        if not auth.introspection_endpoint:
            raise ValueError('[server.auth] verifier = "introspection" needs auth.introspection_endpoint')
        self.auth = auth
        self._http = http_client(auth)
        self._basic = httpx.BasicAuth(auth.client_id, auth.client_secret or "") if auth.client_id else None
        self._cache: dict[str, tuple[float, Principal | str]] = {}

    async def aclose(self) -> None:
        await self._http.aclose()

    async def verify(self, token: str, resource: str) -> Principal:
        key = hashlib.sha256(token.encode()).hexdigest()
        now = time.time()
        hit = self._cache.get(key)
        if hit is not None and hit[0] > now:
            if isinstance(hit[1], str):
                raise InvalidToken(hit[1])
            return self._check_audience(hit[1], resource)
        try:
            principal = await self._introspect(token)
        except InvalidToken as exc:
            self._remember(key, now + min(NEGATIVE_CACHE_S, self.auth.introspection_cache_s), str(exc))
            raise
        until = now + self.auth.introspection_cache_s
        if principal.expires_at is not None:
            until = min(until, principal.expires_at)
        self._remember(key, until, principal)
        return self._check_audience(principal, resource)

    def _remember(self, key: str, until: float, value: Principal | str) -> None:
        if until <= time.time():
            return
        cache = self._cache
        if len(cache) >= MAX_CACHED:
            now = time.time()
            for k in [k for k, (t, _) in cache.items() if t <= now]:
                del cache[k]
            while len(cache) >= MAX_CACHED:
                del cache[next(iter(cache))]
        cache[key] = (until, value)

    def _check_audience(self, principal: Principal, resource: str) -> Principal:
        aud = principal.claims.get("aud")
        named = [aud] if isinstance(aud, str) else [a for a in aud if isinstance(a, str)] if isinstance(aud, list) else []
        if not named:
            if self.auth.require_audience:
                raise InvalidToken("the token's audience is unknown")
            return principal
        if not set(named) & set(audiences(self.auth, resource)):
            raise InvalidToken("the token was not issued for this server (audience)")
        return principal

    async def _introspect(self, token: str) -> Principal:
        endpoint = self.auth.introspection_endpoint or ""
        status, doc = await fetch_json(self._http, "POST", endpoint, "the introspection endpoint",
                                       data={"token": token, "token_type_hint": "access_token"}, auth=self._basic,
                                       headers={"Accept": "application/json"})
        if status in (401, 403):
            raise VerifierUnavailable(f"the introspection endpoint {endpoint} refused this server's credentials (HTTP {status})")
        if status != 200 or not isinstance(doc, dict) or not isinstance(doc.get("active"), bool):
            raise VerifierUnavailable(f"the introspection endpoint {endpoint} answered no introspection result (HTTP {status})")
        if doc["active"] is not True:
            raise InvalidToken("the token is not active (expired, revoked or unknown)")
        self._check_times(doc)
        issuer = self.auth.issuer
        if issuer is not None and doc.get("iss", issuer) != issuer:
            raise InvalidToken("the token comes from another issuer")
        return principal_from(doc, self.auth)

    def _check_times(self, doc: dict[str, Any]) -> None:
        now, leeway = time.time(), self.auth.leeway_s
        exp, nbf = doc.get("exp"), doc.get("nbf")
        if isinstance(exp, (int, float)) and not isinstance(exp, bool) and exp + leeway < now:
            raise InvalidToken("the token has expired")
        if isinstance(nbf, (int, float)) and not isinstance(nbf, bool) and nbf - leeway > now:
            raise InvalidToken("the token is not valid yet")
