"""JWT access tokens (RFC 9068) checked against the issuer's published keys, with PyJWT.

The key set is fetched from ``jwks_uri`` (or the one the issuer's metadata names), cached for
``jwks_cache_s`` and fetched again sooner when a token names a key id it does not hold (key
rotation), at most every ``jwks_min_refresh_s``. Only asymmetric algorithms from the
allow-list are accepted, and each only with a key of its own family, so ``alg: none`` and
HS/RS key confusion have nothing to work with. ``exp`` and ``iss`` are required, ``aud`` must
name this server, ``nbf`` and ``iat`` are checked when present.
"""

from __future__ import annotations

import logging
from typing import Any

import jwt
import trio

from ....server.auth import ASYMMETRIC_ALGORITHMS, AuthSettings, InvalidToken, Principal, VerifierUnavailable
from .claims import audiences, principal_from
from .issuer import discover_issuer_metadata, fetch_json, http_client

log = logging.getLogger("mcpkit.auth")

#: which key type (and curve) each algorithm may be verified with
_FAMILY = {
    **{a: ("RSA", None) for a in ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512")},
    "ES256": ("EC", "P-256"), "ES384": ("EC", "P-384"), "ES512": ("EC", "P-521"),
    "EdDSA": ("OKP", None),
}


class JwtVerifier:
    def __init__(self, auth: AuthSettings) -> None:
        if not auth.issuer:
            raise ValueError('[server.auth] verifier = "jwt" needs auth.issuer')
        refused = [a for a in auth.algorithms if a not in ASYMMETRIC_ALGORITHMS]
        if refused:
            raise ValueError(f"auth.algorithms: {', '.join(refused)} cannot be verified with a published key set "
                             f"(allowed: {', '.join(ASYMMETRIC_ALGORITHMS)})")
        self.auth = auth
        self.algorithms = frozenset(auth.algorithms)
        self._http = http_client(auth)
        self._jwks_uri = auth.jwks_uri
        self._keys: list[dict[str, Any]] | None = None
        self._fetched_at = -1e18
        self._lock = trio.Lock()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def verify(self, token: str, resource: str) -> Principal:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise InvalidToken("the token is not a well-formed JWT") from None
        alg = header.get("alg")
        if not isinstance(alg, str) or alg not in self.algorithms or alg not in _FAMILY:
            raise InvalidToken("the token's signing algorithm is not accepted")
        kid = header.get("kid")
        if kid is not None and not isinstance(kid, str):
            raise InvalidToken("the token's key id is not a string")
        key = await self._key_for(kid, alg)
        try:
            claims = jwt.decode(
                token, key=key, algorithms=[alg], audience=audiences(self.auth, resource), issuer=self.auth.issuer,
                leeway=self.auth.leeway_s, options={"require": ["exp", "iss", "aud"], "strict_aud": False},
            )
        except jwt.ExpiredSignatureError:
            raise InvalidToken("the token has expired") from None
        except jwt.ImmatureSignatureError:
            raise InvalidToken("the token is not valid yet") from None
        except jwt.InvalidAudienceError:
            raise InvalidToken("the token was not issued for this server (audience)") from None
        except jwt.InvalidIssuerError:
            raise InvalidToken("the token comes from another issuer") from None
        except jwt.InvalidSignatureError:
            raise InvalidToken("the token's signature does not verify") from None
        except jwt.MissingRequiredClaimError as exc:
            raise InvalidToken(f"the token has no {exc.claim} claim") from None
        except (jwt.PyJWTError, ValueError, TypeError):
            raise InvalidToken("the token could not be verified") from None
        return principal_from(claims, self.auth)

    # -- keys ----------------------------------------------------------------------------------
    async def _key_for(self, kid: str | None, alg: str) -> jwt.PyJWK:
        keys = await self._current_keys(force=False)
        found = _select(keys, kid, alg)
        if found is None and kid is not None and trio.current_time() - self._fetched_at >= self.auth.jwks_min_refresh_s:
            found = _select(await self._current_keys(force=True), kid, alg)  # rotated?
        if found is None:
            raise InvalidToken("no key of the issuer matches the token")
        try:
            return jwt.PyJWK(found, algorithm=alg)
        except jwt.PyJWTError:
            raise InvalidToken("the issuer's key for this token is unusable") from None

    async def _current_keys(self, *, force: bool) -> list[dict[str, Any]]:
        asked = trio.current_time()
        if self._keys is not None and asked - self._fetched_at < self.auth.jwks_cache_s and not force:
            return self._keys
        async with self._lock:
            if self._keys is not None and self._fetched_at >= asked:
                return self._keys  # fetched by someone else while we waited
            try:
                self._keys = await self._fetch()
                self._fetched_at = trio.current_time()
            except VerifierUnavailable as exc:
                if self._keys is None:
                    raise
                log.warning("could not refresh the issuer's keys, using the ones fetched before: %s", exc)
                self._fetched_at = trio.current_time() - self.auth.jwks_cache_s + self.auth.jwks_min_refresh_s
        return self._keys

    async def _fetch(self) -> list[dict[str, Any]]:
        if self._jwks_uri is None:
            meta = await discover_issuer_metadata(self._http, self.auth.issuer or "")
            uri = meta.get("jwks_uri")
            if not isinstance(uri, str) or not uri.startswith(("https://", "http://")):
                raise VerifierUnavailable(f"the metadata of issuer {self.auth.issuer} names no jwks_uri")
            self._jwks_uri = uri
        status, doc = await fetch_json(self._http, "GET", self._jwks_uri, "the key set (JWKS)")
        keys = doc.get("keys") if isinstance(doc, dict) and status == 200 else None
        if not isinstance(keys, list):
            raise VerifierUnavailable(f"the key set at {self._jwks_uri} is not a JWKS (HTTP {status})")
        usable = [k for k in keys if isinstance(k, dict) and k.get("kty") in ("RSA", "EC", "OKP")
                  and k.get("use", "sig") == "sig" and "d" not in k]
        log.info("fetched %d signing keys from %s", len(usable), self._jwks_uri)
        return usable


def _select(keys: list[dict[str, Any]], kid: str | None, alg: str) -> dict[str, Any] | None:
    """The key for a token: by ``kid`` when it names one, else the only key of the right kind."""
    kty, crv = _FAMILY[alg]
    fitting = [k for k in keys if k.get("kty") == kty and (crv is None or k.get("crv") == crv)
               and k.get("alg", alg) == alg]
    if kid is not None:
        return next((k for k in fitting if k.get("kid") == kid), None)
    return fitting[0] if len(fitting) == 1 else None
