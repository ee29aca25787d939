"""What a token's claims (a JWT payload or an introspection answer) say: its scopes, its
principal, and the audiences it must name. Shared by the bundled verifiers."""

from __future__ import annotations

from typing import Any, Mapping

from ....server.auth import AuthSettings, InvalidToken, Principal


def _scopes_of(claims: Mapping[str, Any], claim: str | None) -> list[str]:
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
                     scopes=auth.expand(_scopes_of(claims, auth.scope_claim)), claims=dict(claims),
                     issuer=iss if isinstance(iss, str) else None,
                     expires_at=float(exp) if isinstance(exp, (int, float)) and not isinstance(exp, bool) else None)


def audiences(auth: AuthSettings, resource: str) -> list[str]:
    """The ``aud`` values a token must carry one of."""
    return list(auth.audience) or [resource]
