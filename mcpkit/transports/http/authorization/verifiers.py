"""Choosing the token verifier (a bundled one or a plugin's), and the development (static)
token. What the bundled verifiers share is in ``issuer.py`` and ``claims.py``."""

from __future__ import annotations

import hmac
from typing import Callable, Mapping

from ...._extras import require
from ....server.auth import AuthSettings, InvalidToken, Principal, TokenVerifier

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
