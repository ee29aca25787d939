"""Choosing the token verifier, the development (static) token, and what the bundled
verifiers share: one HTTP client with timeouts, bounded JSON fetches, claims to principal."""

from __future__ import annotations

import hmac
from typing import Any, Callable, Mapping

import httpx
import msgspec

from ....server.auth import AuthSettings, InvalidToken, Principal, TokenVerifier, VerifierUnavailable

#: JSON documents larger than this (key sets, metadata, introspection answers) are refused
MAX_DOCUMENT_BYTES = 1024 * 1024
Factory = Callable[[AuthSettings], TokenVerifier]


class StaticVerifier:
    """One shared secret token: for development and tests, not for deployments."""

    def __init__(self, auth: AuthSettings, token: str | None = None) -> None:
        secret = token if token is not None else auth.token
        if not secret:
            raise ValueError('[server.auth] verifier = "static" needs auth.token (or --auth-token)')
        self._token = secret.encode()
        scopes = auth.token_scopes
        self._principal = Principal(subject="static-token", scopes=auth.expand(scopes or ()),
                                    all_scopes=scopes is None)

    async def verify(self, token: str, resource: str) -> Principal:
        if not hmac.compare_digest(token.encode(), self._token):
            raise InvalidToken("the token is not valid")
        return self._principal

    async def aclose(self) -> None:
        return None


def builtin_factories() -> dict[str, Factory]:
    from .introspection import IntrospectionVerifier
    from .jwt_verifier import JwtVerifier

    return {"jwt": JwtVerifier, "introspection": IntrospectionVerifier, "static": StaticVerifier}


def build_verifier(auth: AuthSettings, legacy_token: str | None, plugin_factories: Mapping[str, Factory]) -> TokenVerifier | None:
    """The verifier the settings select (None: the server is open)."""
    name = auth.verifier
    if name is None:
        if legacy_token:
            return StaticVerifier(auth, legacy_token)
        if auth.token:
            name = "static"
        else:
            return None
    factories: dict[str, Factory] = {**builtin_factories(), **plugin_factories}
    factory = factories.get(name)
    if factory is None:
        raise ValueError(f"unknown token verifier {name!r} (known: {', '.join(sorted(factories))})")
    if name == "static" and legacy_token and not auth.token:
        return StaticVerifier(auth, legacy_token)
    verifier = factory(auth)
    if not callable(getattr(verifier, "verify", None)):
        raise ValueError(f"token verifier {name!r} has no verify(token, resource) method")
    return verifier


def http_client(auth: AuthSettings) -> httpx.AsyncClient:
    """The client a verifier talks to its issuer with: short timeouts, no redirects."""
    return httpx.AsyncClient(timeout=httpx.Timeout(auth.timeout_s), follow_redirects=False,
                             limits=httpx.Limits(max_connections=20, max_keepalive_connections=5))


async def fetch_json(client: httpx.AsyncClient, method: str, url: str, what: str, **kwargs: Any) -> tuple[int, Any]:
    """(status, decoded JSON) of one request; VerifierUnavailable when it cannot be had."""
    try:
        async with client.stream(method, url, **kwargs) as resp:
            body = b""
            async for chunk in resp.aiter_bytes():
                body += chunk
                if len(body) > MAX_DOCUMENT_BYTES:
                    raise VerifierUnavailable(f"{what} at {url} is larger than {MAX_DOCUMENT_BYTES} bytes")
            status = resp.status_code
    except httpx.HTTPError as exc:
        raise VerifierUnavailable(f"{what} at {url} could not be fetched: {type(exc).__name__}: {exc or 'no detail'}") from None
    if status >= 500:
        raise VerifierUnavailable(f"{what} at {url} answered HTTP {status}")
    try:
        return status, msgspec.json.decode(body)
    except msgspec.DecodeError:
        if status >= 400:
            return status, None
        raise VerifierUnavailable(f"{what} at {url} is not JSON (HTTP {status})") from None


def scopes_of(claims: Mapping[str, Any], claim: str | None) -> list[str]:
    """Scopes from ``claim``, else ``scope`` then ``scp``: a space-separated string or a list."""
    for name in ((claim,) if claim else ("scope", "scp")):
        value = claims.get(name)
        if isinstance(value, str):
            return value.split()
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return list(value)
    return []


def principal_from(claims: Mapping[str, Any], auth: AuthSettings) -> Principal:
    """The principal a token's claims describe (JWT payload or introspection answer)."""
    client_id = next((v for k in ("client_id", "azp", "appid") if isinstance(v := claims.get(k), str)), None)
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject:
        subject = client_id  # client-credentials tokens of some issuers carry no sub
    if not subject:
        raise InvalidToken("the token names no subject")
    exp = claims.get("exp")
    iss = claims.get("iss")
    return Principal(subject=subject, client_id=client_id, scopes=auth.expand(scopes_of(claims, auth.scope_claim)),
                     claims=dict(claims), issuer=iss if isinstance(iss, str) else None,
                     expires_at=float(exp) if isinstance(exp, (int, float)) and not isinstance(exp, bool) else None)


def audiences(auth: AuthSettings, resource: str) -> list[str]:
    """The ``aud`` values a token must carry one of."""
    return list(auth.audience) or [resource]
