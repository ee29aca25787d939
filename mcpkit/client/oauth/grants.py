"""Talking to the authorization server: client registration (RFC 7591), client
authentication at the token endpoint, and the token requests of each grant."""

from __future__ import annotations

import base64
import hashlib
import secrets
import time
import urllib.parse
from dataclasses import asdict, dataclass, field
from typing import Any

import httpx

from ..._extras import require
from ..errors import AuthorizationFailed
from .discovery import ServerInfo, request_json

JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
CLIENT_ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"


class TokenError(AuthorizationFailed):
    """The token endpoint refused (``error`` is its OAuth error code, e.g. invalid_grant)."""

    def __init__(self, message: str, error: str | None = None) -> None:
        super().__init__(message)
        self.error = error


@dataclass
class ClientIdentity:
    """Who this client is at one authorization server: pre-registered, a metadata-document
    URL, or what dynamic registration gave. ``issuer`` binds it to the server that issued it
    (None: pre-registered without saying where, used with whichever server the resource names)."""

    client_id: str
    client_secret: str | None = None
    #: none, client_secret_basic, client_secret_post or private_key_jwt (None: chosen from the
    #: server's token_endpoint_auth_methods_supported)
    auth_method: str | None = None
    #: PEM private key and algorithm for private_key_jwt
    private_key: str | None = None
    signing_alg: str = "ES256"
    issuer: str | None = None
    redirect_uris: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ClientIdentity":
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


@dataclass
class Tokens:
    access_token: str
    issuer: str
    resource: str
    token_type: str = "Bearer"
    expires_at: float | None = None
    refresh_token: str | None = None
    #: scopes the server granted (or, when it did not say, the ones asked for)
    scopes: list[str] = field(default_factory=list)
    obtained_at: float = field(default_factory=time.time)

    def expired(self, margin: float = 30.0) -> bool:
        """Run out, or about to: within ``margin`` seconds (at most a quarter of its life) of
        its expiry, so a request sent now does not arrive with a dead token."""
        if self.expires_at is None:
            return False
        margin = min(margin, max(self.expires_at - self.obtained_at, 0.0) / 4)
        return time.time() + margin >= self.expires_at

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Tokens":
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


def pkce_pair() -> tuple[str, str]:
    """(code_verifier, S256 code_challenge) per RFC 7636."""
    verifier = secrets.token_urlsafe(64)[:96]
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def choose_auth_method(server: ServerInfo, has_secret: bool, has_key: bool = False) -> str:
    """How to authenticate at the token endpoint: what the server lists, preferring the
    strongest the client can do (RFC 8414 says client_secret_basic when nothing is listed)."""
    listed = server.get("token_endpoint_auth_methods_supported")
    offered = [m for m in listed if isinstance(m, str)] if isinstance(listed, list) else ["client_secret_basic"]
    prefs = (["private_key_jwt"] if has_key else []) + (["client_secret_basic", "client_secret_post"] if has_secret else []) + ["none"]
    for method in prefs:
        if method in offered:
            return method
    return prefs[0]


async def post_form(http: httpx.AsyncClient, url: str, data: dict[str, str], headers: dict[str, str] | None = None,
                    *, json_body: Any = None, what: str = "the token endpoint",
                    answer_headers: dict[str, str] | None = None) -> tuple[int, Any]:
    """POST a form (or JSON) and decode the JSON answer (bounded)."""
    body: dict[str, Any] = {"json": json_body} if json_body is not None else {"data": data}
    return await request_json(http, "POST", url, what, headers=dict(headers or {}), answer_headers=answer_headers, **body)


async def register(http: httpx.AsyncClient, server: ServerInfo, metadata: dict[str, Any]) -> ClientIdentity:
    """Dynamic Client Registration at ``server`` with the given client metadata."""
    endpoint = server.endpoint("registration_endpoint")
    if endpoint is None:
        raise AuthorizationFailed(f"authorization server {server.issuer} offers no dynamic client registration, "
                                  "and this client has no client id for it (pre-register one)")
    status, doc = await post_form(http, endpoint, {}, json_body=metadata, what="the registration endpoint")
    if status not in (200, 201) or not isinstance(doc, dict) or not isinstance(doc.get("client_id"), str):
        detail = _error_text(doc)
        raise AuthorizationFailed(f"client registration at {server.issuer} failed (HTTP {status}){detail}")
    method = doc.get("token_endpoint_auth_method")
    secret = doc.get("client_secret")
    return ClientIdentity(
        client_id=doc["client_id"], client_secret=secret if isinstance(secret, str) else None,
        auth_method=method if isinstance(method, str) else metadata.get("token_endpoint_auth_method"),
        issuer=server.issuer, redirect_uris=list(metadata.get("redirect_uris") or []))


def authenticate_client(client: ClientIdentity, server: ServerInfo, data: dict[str, str], headers: dict[str, str]) -> None:
    """Add the client's authentication to a token request (form ``data`` and ``headers``)."""
    method = client.auth_method or choose_auth_method(server, bool(client.client_secret), bool(client.private_key))
    if method == "client_secret_basic" and client.client_secret is not None:
        pair = f"{urllib.parse.quote(client.client_id, safe='')}:{urllib.parse.quote(client.client_secret, safe='')}"
        headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
    elif method == "client_secret_post" and client.client_secret is not None:
        data["client_id"] = client.client_id
        data["client_secret"] = client.client_secret
    elif method == "private_key_jwt" and client.private_key:
        data["client_assertion_type"] = CLIENT_ASSERTION_TYPE
        data["client_assertion"] = signed_assertion(client.private_key, client.signing_alg, iss=client.client_id,
                                                    sub=client.client_id, aud=server.issuer)
    else:
        data["client_id"] = client.client_id


def signed_assertion(private_key: str, alg: str, *, iss: str, sub: str, aud: str, lifetime: int = 300) -> str:
    """A JWT signed with the client's key (RFC 7523): for private_key_jwt and assertions."""
    require("oauth", "a signed client assertion (private_key_jwt)")
    import jwt

    now = int(time.time())
    claims = {"iss": iss, "sub": sub, "aud": aud, "iat": now, "exp": now + lifetime, "jti": secrets.token_urlsafe(16)}
    try:
        return jwt.encode(claims, private_key, algorithm=alg)
    except (jwt.PyJWTError, ValueError, TypeError) as exc:
        raise AuthorizationFailed(f"could not sign the client assertion with the configured key: {exc}") from None


async def token_request(http: httpx.AsyncClient, server: ServerInfo, client: ClientIdentity | None, data: dict[str, str],
                        resource: str, *, asked_scopes: list[str] | None = None, dpop: Any = None) -> Tokens:
    """One request to the token endpoint (retried once with the server's nonce when a DPoP
    proof is asked for one); the tokens it answers, or TokenError."""
    endpoint = server.endpoint("token_endpoint")
    if endpoint is None:
        raise AuthorizationFailed(f"authorization server {server.issuer} names no token endpoint")
    for attempt in range(2):
        hdrs: dict[str, str] = {}
        form = dict(data)
        if client is not None:
            authenticate_client(client, server, form, hdrs)  # a fresh assertion each time
        if dpop is not None:
            hdrs["DPoP"] = dpop.proof("POST", endpoint)
        answer: dict[str, str] = {}
        status, doc = await post_form(http, endpoint, form, hdrs, answer_headers=answer)
        retry = (dpop is not None and status == 400 and isinstance(doc, dict) and doc.get("error") == "use_dpop_nonce"
                 and dpop.remember_nonce(endpoint, answer))
        if not retry or attempt:
            break
    if status != 200 or not isinstance(doc, dict):
        error = doc.get("error") if isinstance(doc, dict) and isinstance(doc.get("error"), str) else None
        raise TokenError(f"the token endpoint of {server.issuer} refused (HTTP {status}){_error_text(doc)}", error)
    token = doc.get("access_token")
    kind = doc.get("token_type")
    if not isinstance(token, str) or not token:
        raise AuthorizationFailed("the token endpoint answered no access_token")
    if not isinstance(kind, str) or kind.lower() not in ("bearer", "dpop"):
        raise AuthorizationFailed(f"the token endpoint answered an unsupported token_type {kind!r}")
    expires_in = doc.get("expires_in")
    scope = doc.get("scope")
    refresh = doc.get("refresh_token")
    return Tokens(
        access_token=token, issuer=server.issuer, resource=resource, token_type="DPoP" if kind.lower() == "dpop" else "Bearer",
        expires_at=time.time() + expires_in if isinstance(expires_in, (int, float)) and not isinstance(expires_in, bool) else None,
        refresh_token=refresh if isinstance(refresh, str) and refresh else None,
        scopes=scope.split() if isinstance(scope, str) else list(asked_scopes or []))


def _error_text(doc: Any) -> str:
    """``: error: description`` from an OAuth error answer (bounded, one line)."""
    if not isinstance(doc, dict):
        return ""
    parts = [str(doc[k])[:200] for k in ("error", "error_description") if isinstance(doc.get(k), str)]
    return (": " + ": ".join(parts)).replace("\n", " ") if parts else ""
