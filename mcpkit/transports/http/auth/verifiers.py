"""Choosing the token verifier, the development (static) token, and what the bundled
verifiers share: one HTTP client with timeouts, bounded JSON fetches, claims to principal."""

from __future__ import annotations

import hmac
from typing import Any, Callable, Mapping

import httpx

from ...._extras import require
from ....client.oauth.fetch import TooLarge, json_or_none, read_bounded
from ....server.auth import AuthSettings, InvalidToken, Principal, TokenVerifier, VerifierUnavailable

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

    return {"jwt": _jwt_verifier, "introspection": IntrospectionVerifier, "static": StaticVerifier}


def _jwt_verifier(auth: AuthSettings) -> TokenVerifier:
    require("oauth", "auth verifier = jwt")  # PyJWT and cryptography: imported only for this verifier
    from .jwt_verifier import JwtVerifier

    return JwtVerifier(auth)


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
        status, body, _ = await read_bounded(client, method, url, **kwargs)
    except httpx.HTTPError as exc:
        raise VerifierUnavailable(f"{what} at {url} could not be fetched: {type(exc).__name__}: {exc or 'no detail'}") from None
    except TooLarge as exc:
        raise VerifierUnavailable(f"{what}: {exc}") from None
    if status >= 500:
        raise VerifierUnavailable(f"{what} at {url} answered HTTP {status}")
    doc = json_or_none(body)
    if doc is None and status < 400:
        raise VerifierUnavailable(f"{what} at {url} is not JSON (HTTP {status})")
    return status, doc


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
    """The principal a token's claims describe (JWT payload or introspection answer).

    A token with a ``sub`` is its subject's; one without (the client credentials grant of some
    issuers) is its client's, a principal of another kind (``client_only``) that owns nothing
    of a user's of the same name. A token naming neither is refused."""
    client_id = next((v for k in ("client_id", "azp", "appid") if isinstance(v := claims.get(k), str) and v), None)
    subject = claims.get("sub", "")
    if not isinstance(subject, str):
        raise InvalidToken("the token's sub claim is not a string")
    if not subject and not client_id:
        raise InvalidToken("the token names neither a subject nor a client")
    exp = claims.get("exp")
    iss = claims.get("iss")
    return Principal(subject=subject or client_id or "", client_id=client_id, client_only=not subject,
                     scopes=auth.expand(scopes_of(claims, auth.scope_claim)), claims=dict(claims),
                     issuer=iss if isinstance(iss, str) else None,
                     expires_at=float(exp) if isinstance(exp, (int, float)) and not isinstance(exp, bool) else None)


def audiences(auth: AuthSettings, resource: str) -> list[str]:
    """The ``aud`` values a token must carry one of."""
    return list(auth.audience) or [resource]
