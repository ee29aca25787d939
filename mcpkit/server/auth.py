"""Who is asking, and what they may do: the verified principal, the token verifier interface,
the authorization settings, and scope checks.

Transports establish the principal (HTTP: a bearer token checked by a :class:`TokenVerifier`);
the dispatcher only reads it. Where no principal is set (stdio, an HTTP server without
authorization) nothing is restricted: scopes are a property of authorized HTTP deployments.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Protocol, runtime_checkable

import msgspec

from ..protocol.jsonrpc import ProtocolError

#: JSON-RPC error code of a request the caller's token lacks the scopes for. Over HTTP it
#: travels as ``403`` with a ``WWW-Authenticate: Bearer error="insufficient_scope"`` challenge;
#: ``data.requiredScopes`` lists what the operation needs.
FORBIDDEN = -32003
#: the JWS algorithms a published key set can verify (no HMAC, never "none")
ASYMMETRIC_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")


@dataclass(frozen=True, slots=True)
class Principal:
    """The verified identity behind a request.

    ``subject`` is the token's ``sub``; a token without one (the client credentials grant of
    some issuers) is the client's own, ``client_only``, and ``subject`` is then its client id.
    The two never meet: ``owner`` and ``key``, what sessions and tasks belong to, keep users and
    clients in namespaces of their own, so a client named ``alice`` is not the user ``alice``.
    ``scopes`` are the token's scopes, already widened by the ``scope_implies`` setting;
    ``claims`` are the token's claims (JWT payload or introspection answer) for anything else a
    tool wants to know. ``all_scopes`` marks the development token, which may do everything.
    """

    subject: str
    client_id: str | None = None
    scopes: frozenset[str] = frozenset()
    claims: Mapping[str, Any] = field(default_factory=dict)
    issuer: str | None = None
    expires_at: float | None = None
    all_scopes: bool = False
    client_only: bool = False

    def missing(self, required: Iterable[str]) -> list[str]:
        """The scopes of ``required`` this principal does not hold (in the given order)."""
        if self.all_scopes:
            return []
        return [s for s in required if s not in self.scopes]

    def has_scopes(self, required: Iterable[str]) -> bool:
        return not self.missing(required)

    @property
    def owner(self) -> tuple[str, str]:
        """What sessions are bound to: ``(issuer, "sub:<subject>")`` for a token's subject,
        ``(issuer, "client:<client id>")`` for a client acting for itself."""
        return (self.issuer or "", f"{'client' if self.client_only else 'sub'}:{self.subject}")

    @property
    def key(self) -> str:
        """The same as a string (what tasks are filed under; use it for anything kept per
        caller): stable across the principal's tokens, so a refreshed token still reaches its
        tasks."""
        issuer, name = self.owner
        return f"{issuer}#{name}"


class InvalidToken(Exception):
    """The token is not acceptable (malformed, expired, wrong issuer or audience, revoked,
    bad signature). Answered with 401; the message goes into ``error_description``, so it must
    not quote the token."""


class VerifierUnavailable(Exception):
    """The token could not be checked now (JWKS or introspection endpoint unreachable).
    Answered with 503; the message is logged."""


@runtime_checkable
class TokenVerifier(Protocol):
    """Checks bearer tokens. One small interface, so providers are plugins.

    ``verify`` returns the :class:`Principal` for a good token, raises :class:`InvalidToken`
    for a bad one and :class:`VerifierUnavailable` when it cannot tell. ``resource`` is this
    server's canonical URI: a token must have been issued for it (RFC 8707 audience), or for
    one of the configured ``audience`` values. ``aclose`` releases what the verifier holds
    (HTTP clients, caches) when the server stops.
    """

    async def verify(self, token: str, resource: str) -> Principal: ...

    async def aclose(self) -> None: ...


class AuthSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """``[server.auth]``: the HTTP server as an OAuth 2.1 resource server (see docs/auth.md)."""

    #: "jwt", "introspection", "static", or the name a provider plugin registered; None means
    #: no authorization (or "static" when the top-level ``auth_token`` is set)
    verifier: str | None = None
    #: this server's canonical URI (RFC 8707/9728 ``resource``), e.g. https://mcp.example.com/mcp;
    #: required unless the server binds a loopback address (then the URL of the bound socket:
    #: scheme, address and port, with /mcp; see docs/auth.md)
    resource: str | None = None
    #: issuers clients should get tokens from (Protected Resource Metadata); default: [issuer]
    authorization_servers: list[str] = []
    #: the token issuer (``iss``) to accept
    issuer: str | None = None
    #: accepted ``aud`` values; default: [resource]
    audience: list[str] = []
    #: scopes every request needs (sent in the 401 challenge)
    required_scopes: list[str] = []
    #: Protected Resource Metadata ``scopes_supported``; default: every scope the server uses
    scopes_supported: list[str] | None = None
    #: scope hierarchy: a scope here implies the scopes it lists ({"admin" = ["read", "write"]})
    scope_implies: dict[str, list[str]] = {}
    # -- JWT access tokens --
    #: where the issuer's keys are; default: ``jwks_uri`` from its metadata (RFC 8414 / OIDC)
    jwks_uri: str | None = None
    #: signature algorithms accepted (asymmetric only: HS* and none are always refused)
    algorithms: list[str] = msgspec.field(default_factory=lambda: list(ASYMMETRIC_ALGORITHMS))
    #: seconds a fetched key set is used before it is fetched again (an unknown ``kid`` refetches
    #: sooner, at most every ``jwks_min_refresh_s``)
    jwks_cache_s: float = 300.0
    jwks_min_refresh_s: float = 30.0
    #: clock skew allowed on ``exp``/``nbf``/``iat``, seconds
    leeway_s: float = 30.0
    #: claim holding the scopes; default: "scope" (space-separated), then "scp" (Entra ID)
    scope_claim: str | None = None
    # -- RFC 7662 introspection --
    introspection_endpoint: str | None = None
    #: credentials this server authenticates to the introspection endpoint with (HTTP Basic)
    client_id: str | None = None
    client_secret: str | None = None
    #: seconds an introspection answer is reused (never past the token's ``exp``); a revoked
    #: token is refused at the latest this long after revocation
    introspection_cache_s: float = 60.0
    #: refuse introspection answers without an ``aud`` naming this server
    require_audience: bool = True
    # -- the development token --
    token: str | None = None
    #: scopes the static token holds; None means every scope
    token_scopes: list[str] | None = None
    # -- limits and metadata --
    max_token_bytes: int = 8192
    #: seconds for a JWKS, metadata or introspection request
    timeout_s: float = 5.0
    resource_name: str | None = None
    resource_documentation: str | None = None

    def expand(self, scopes: Iterable[str]) -> frozenset[str]:
        """``scopes`` with everything they imply under ``scope_implies`` (transitively)."""
        out: set[str] = set()
        todo = list(scopes)
        while todo:
            scope = todo.pop()
            if scope not in out:
                out.add(scope)
                todo.extend(self.scope_implies.get(scope, ()))
        return frozenset(out)


def check_scopes(principal: Principal | None, required: Iterable[str], what: str) -> None:
    """Raise the insufficient-scope error when ``principal`` lacks a scope ``what`` needs."""
    if principal is None:
        return
    missing = principal.missing(required)
    if missing:
        raise ProtocolError(FORBIDDEN, f"Forbidden: {what} needs scope {' '.join(missing)}",
                            {"requiredScopes": list(required)})


def may_use(principal: Principal | None, required: Iterable[str]) -> bool:
    """Whether ``principal`` may see and use an item needing ``required`` (lists filter by it)."""
    return principal is None or principal.has_scopes(required)


def normalize_scopes(scopes: Iterable[str] | str | None, what: str) -> tuple[str, ...]:
    """The ``scopes=`` argument of the decorators, checked: OAuth scope tokens, no spaces."""
    if scopes is None:
        return ()
    if isinstance(scopes, str):
        scopes = [scopes]
    out = tuple(scopes)
    for s in out:
        if not isinstance(s, str) or not s or any(c in s for c in ' "\\') or not s.isprintable():
            raise ValueError(f"{what}: invalid scope {s!r} (a scope is printable text without spaces, quotes or backslashes)")
    return out
