"""The OAuth client as an ``httpx.Auth``: every request to the MCP server carries the token,
and a 401 or a 403 ``insufficient_scope`` starts what the spec says to do about it.

On a 401 it discovers the resource's metadata and authorization server (checking that the
metadata is for this server and that the authorization server's metadata names the issuer it
was fetched for), gets a client id (pre-registered, a Client ID Metadata Document URL, or
Dynamic Client Registration, each bound to its issuer), and runs the grant: authorization
code with PKCE S256, ``state`` and the RFC 9207 ``iss`` check, or client credentials, or a
JWT bearer assertion. Tokens are refreshed before they expire; a 403 asks again for the
union of the scopes held and the scopes challenged, a bounded number of times per request.
"""

from __future__ import annotations

import logging
import secrets
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, AsyncGenerator, Awaitable, Callable, Iterable

import httpx
import trio

from ..._extras import require
from ..errors import AuthorizationFailed
from .authorizers import Authorizer, LoopbackAuthorizer
from ._challenge import Challenge, parse_challenges
from ._dpop import ALG as DPOP_ALG, DPoPKey
from .discovery import ResourceInfo, ServerInfo, find_resource_info, find_server_info
from .grants import JWT_BEARER, ClientIdentity, TokenError, Tokens, pkce_pair, register, token_request
from .store import MemoryTokenStore, TokenStore

log = logging.getLogger("mcpkit.client.oauth")
#: a JWT bearer assertion, or what makes one for (issuer, resource, scopes)
Assertion = str | Callable[[str, str, list[str]], "str | Awaitable[str]"]


@dataclass
class _Grant:
    """What the client holds for one MCP server URL."""

    tokens: Tokens
    client: ClientIdentity | None
    requested: list[str] = field(default_factory=list)
    #: the key a DPoP-bound token is bound to (None: a bearer token)
    dpop: DPoPKey | None = None


class OAuth(httpx.Auth):
    """OAuth 2.1 for MCP servers; pass it as ``connect(url, oauth=OAuth(...))``.

    ``grant``: "authorization_code" (a person consents through ``authorizer``, by default a
    browser and a loopback listener), "client_credentials" (the client acts for itself: give
    ``client_id`` and ``client_secret`` or ``private_key``), or "jwt_bearer" (a signed
    ``assertion`` from elsewhere: a workload identity token, or an ``IdJagExchange`` for
    enterprise-managed authorization). ``client_id`` (and secret) are
    pre-registered credentials, bound to ``client_issuer`` when given; ``client_metadata_url``
    is this client's metadata document (used where the server supports them); otherwise the
    client registers itself where the server allows it. ``scopes`` replaces the scopes the
    server suggests. ``store`` keeps tokens and registrations (memory by default; a
    :class:`FileTokenStore` keeps them between runs). ``dpop``: bind tokens to a key of the
    client's (RFC 9449) — None does so when the resource server's challenge asks for DPoP and
    the authorization server supports it.
    """

    requires_request_body = True

    def __init__(self, *, authorizer: Authorizer | None = None, store: TokenStore | None = None,
                 grant: str = "authorization_code", client_name: str = "mcpkit", client_id: str | None = None,
                 client_secret: str | None = None, client_auth_method: str | None = None,
                 private_key: str | None = None, signing_alg: str = "ES256", client_issuer: str | None = None,
                 client_metadata_url: str | None = None, scopes: Iterable[str] | None = None,
                 assertion: Assertion | None = None, application_type: str = "native",
                 offline_access: bool = True, max_step_ups: int = 2, timeout: float = 30.0,
                 dpop: bool | None = None) -> None:
        if grant not in ("authorization_code", "client_credentials", "jwt_bearer"):
            raise ValueError(f"unknown grant {grant!r}")
        if grant == "client_credentials" and not client_id:
            raise ValueError("the client_credentials grant needs client_id (and client_secret or private_key)")
        if grant == "jwt_bearer" and assertion is None:
            raise ValueError("the jwt_bearer grant needs an assertion")
        if dpop:
            require("oauth", "OAuth(dpop=True)")
        if private_key and client_id:
            require("oauth", "OAuth(private_key=...) (private_key_jwt)")
        self.authorizer = authorizer
        self.store: TokenStore = store or MemoryTokenStore()
        self.grant = grant
        self.client_name = client_name
        self.client = ClientIdentity(client_id, client_secret, client_auth_method, private_key, signing_alg,
                                     client_issuer) if client_id else None
        self.client_metadata_url = client_metadata_url
        self.scopes = list(scopes) if scopes is not None else None
        self.assertion = assertion
        self.application_type = application_type
        self.offline_access = offline_access
        self.max_step_ups = max_step_ups
        self.timeout = timeout
        self.dpop = dpop
        self._grants: dict[str, _Grant] = {}
        self._lock = trio.Lock()

    # -- the httpx.Auth flow -----------------------------------------------------------------
    async def async_auth_flow(self, request: httpx.Request) -> AsyncGenerator[httpx.Request, httpx.Response]:
        url = _server_url(request.url)
        async with self._lock:
            grant = await self._usable(url)
        sent = self._apply(request, grant)
        response = yield request
        if self._nonce_asked(grant, sent, response):  # DPoP: once more, with the server's nonce
            sent = self._apply(request, grant)
            response = yield request
        if response.status_code == 401:
            challenge, dpop_wanted = auth_challenge(response.headers.get("www-authenticate"))
            async with self._lock:
                grant = self._grants.get(url)
                if grant is None or grant.tokens.access_token == sent:
                    grant = await self._authorize(url, challenge, grant, step_up=False, dpop_wanted=dpop_wanted)
            sent = self._apply(request, grant)
            response = yield request
            if self._nonce_asked(grant, sent, response):
                sent = self._apply(request, grant)
                response = yield request
        for _ in range(self.max_step_ups):
            challenge, dpop_wanted = auth_challenge(response.headers.get("www-authenticate"))
            if response.status_code != 403 or challenge is None or challenge.params.get("error") != "insufficient_scope":
                break
            async with self._lock:
                grant = self._grants.get(url)
                if grant is not None and grant.tokens.access_token == sent:
                    needed = challenge.scopes or []
                    if needed and set(needed) <= set(grant.tokens.scopes) | set(grant.requested):
                        log.warning("the server asks for scopes %s, which the token already has: not asking again",
                                    " ".join(needed))
                        break
                    grant = await self._authorize(url, challenge, grant, step_up=True, dpop_wanted=dpop_wanted)
            sent = self._apply(request, grant)
            response = yield request

    def _apply(self, request: httpx.Request, grant: _Grant | None) -> str | None:
        request.headers.pop("DPoP", None)
        if grant is None:
            request.headers.pop("Authorization", None)
            return None
        token = grant.tokens.access_token
        if grant.dpop is not None:  # a fresh proof for every request, the token hashed in
            request.headers["Authorization"] = f"DPoP {token}"
            request.headers["DPoP"] = grant.dpop.proof(request.method, str(request.url), access_token=token)
        else:
            request.headers["Authorization"] = f"Bearer {token}"
        return token

    def _nonce_asked(self, grant: _Grant | None, sent: str | None, response: httpx.Response) -> bool:
        """Keep a DPoP nonce the server sent; True when it refused the request for want of it."""
        if grant is None or grant.dpop is None or sent != grant.tokens.access_token:
            return False
        fresh = grant.dpop.remember_nonce(str(response.request.url), response.headers)
        challenge = next((c for c in parse_challenges(response.headers.get("www-authenticate", "")) if c.scheme == "dpop"), None)
        return fresh and response.status_code == 401 and challenge is not None and challenge.params.get("error") == "use_dpop_nonce"

    # -- tokens held -----------------------------------------------------------------------------
    async def _usable(self, url: str) -> _Grant | None:
        """The grant for ``url`` whose access token is good, refreshed if it has run out."""
        grant = self._grants.get(url)
        if grant is None:
            saved = await self.store.get(f"tokens {url}")
            if saved and isinstance(saved.get("tokens"), dict):
                client = saved.get("client")
                key = saved.get("dpop_key")
                grant = _Grant(Tokens.from_dict(saved["tokens"]), ClientIdentity.from_dict(client) if isinstance(client, dict) else None,
                               list(saved.get("requested") or []), DPoPKey(key) if isinstance(key, str) else None)
                self._grants[url] = grant
        if grant is None or not grant.tokens.expired():
            return grant
        if grant.tokens.refresh_token:
            try:
                async with self._http() as http:
                    server = await find_server_info(http, grant.tokens.issuer)
                    return await self._refresh(http, url, server, grant)
            except AuthorizationFailed as exc:
                log.info("could not refresh the token for %s: %s", url, exc)
        await self._forget(url)
        return None

    async def _refresh(self, http: httpx.AsyncClient, url: str, server: ServerInfo, grant: _Grant) -> _Grant:
        old = grant.tokens
        data = {"grant_type": "refresh_token", "refresh_token": old.refresh_token or "", "resource": old.resource}
        tokens = await token_request(http, server, grant.client, data, old.resource, asked_scopes=old.scopes, dpop=grant.dpop)
        tokens.refresh_token = tokens.refresh_token or old.refresh_token
        log.info("refreshed the access token for %s", url)
        return await self._keep(url, _Grant(tokens, grant.client, grant.requested, grant.dpop))

    async def _keep(self, url: str, grant: _Grant) -> _Grant:
        if grant.tokens.token_type != "DPoP":
            grant.dpop = None  # the server issued a bearer token after all
        self._grants[url] = grant
        await self.store.set(f"tokens {url}", {"tokens": grant.tokens.to_dict(),
                                               "client": grant.client.to_dict() if grant.client else None,
                                               "requested": grant.requested,
                                               "dpop_key": grant.dpop.pem if grant.dpop else None})
        return grant

    async def _forget(self, url: str) -> None:
        self._grants.pop(url, None)
        await self.store.set(f"tokens {url}", None)

    def _http(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(timeout=self.timeout, follow_redirects=False)

    # -- getting a token -----------------------------------------------------------------------
    async def _authorize(self, url: str, challenge: Challenge | None, held: _Grant | None, *, step_up: bool,
                         dpop_wanted: bool = False) -> _Grant:
        async with self._http() as http:
            info = await find_resource_info(http, url, challenge)
            if info is None:
                raise AuthorizationFailed(f"{url} asks for authorization but publishes no protected resource metadata")
            issuer = info.authorization_servers[0]
            server = await find_server_info(http, issuer)
            if held is not None and held.tokens.issuer != issuer:
                log.info("the authorization server of %s changed from %s to %s", url, held.tokens.issuer, issuer)
                held = None  # nothing from the previous server is used with the new one
            if held is not None and held.tokens.refresh_token and not step_up:
                try:
                    return await self._refresh(http, url, server, held)
                except TokenError as exc:
                    log.info("refresh refused (%s); authorizing again", exc.error or exc)
            scopes = self._scopes(challenge, info, server, held, step_up)
            key = self._dpop_key(server, held, dpop_wanted)
            if self.grant == "authorization_code":
                tokens, client = await self._authorization_code(http, info, server, scopes, key)
            else:
                tokens, client = await self._direct_grant(http, info, server, scopes, key), self.client
            return await self._keep(url, _Grant(tokens, client, scopes, key))

    def _dpop_key(self, server: ServerInfo, held: _Grant | None, wanted: bool) -> DPoPKey | None:
        """The key to bind the next token to, or None for a bearer token."""
        if self.dpop is False or not (self.dpop or wanted or (held is not None and held.dpop is not None)):
            return None
        if not server.supports("dpop_signing_alg_values_supported", DPOP_ALG):
            if self.dpop:
                raise AuthorizationFailed(f"authorization server {server.issuer} does not bind tokens with DPoP {DPOP_ALG}")
            return None
        return held.dpop if held is not None and held.dpop is not None else DPoPKey()

    def _scopes(self, challenge: Challenge | None, info: ResourceInfo, server: ServerInfo, held: _Grant | None,
                step_up: bool) -> list[str]:
        """Which scopes to ask for: the challenge's, else the resource's ``scopes_supported``,
        else none; on a repeat, together with what was asked for before."""
        if self.scopes is not None:
            base = list(self.scopes)
        elif challenge is not None and challenge.scopes is not None:
            base = challenge.scopes
        else:
            base = list(info.scopes_supported or [])
        if held is not None:
            before = list(held.requested or held.tokens.scopes)
            base = before + [s for s in base if s not in before]
            if step_up and challenge is not None:
                base += [s for s in challenge.scopes or [] if s not in base]
        if (base and self.offline_access and self.grant == "authorization_code"
                and server.supports("scopes_supported", "offline_access") and "offline_access" not in base):
            base.append("offline_access")
        return base

    async def _client_for(self, http: httpx.AsyncClient, server: ServerInfo, redirect: str) -> ClientIdentity:
        """The client id to use at ``server``: pre-registered, metadata document, stored
        registration, or a new registration (in that order)."""
        if self.client is not None:
            if self.client.issuer not in (None, server.issuer):
                raise AuthorizationFailed(f"the pre-registered client is for {self.client.issuer}, but the server now "
                                          f"uses {server.issuer}: register a client there")
            return self.client
        if self.client_metadata_url and server.get("client_id_metadata_document_supported") is True:
            return ClientIdentity(self.client_metadata_url, auth_method="none", issuer=server.issuer)
        key = f"client {server.issuer} {redirect}"
        saved = await self.store.get(key)
        if saved:
            return ClientIdentity.from_dict(saved)
        listed = server.get("token_endpoint_auth_methods_supported")
        offered = listed if isinstance(listed, list) else ["client_secret_basic"]
        method = next((m for m in ("none", "client_secret_basic", "client_secret_post") if m in offered), "none")
        metadata = {"client_name": self.client_name, "redirect_uris": [redirect], "response_types": ["code"],
                    "grant_types": ["authorization_code", "refresh_token"], "token_endpoint_auth_method": method,
                    "application_type": self.application_type}
        client = await register(http, server, metadata)
        log.info("registered client %s at %s", client.client_id, server.issuer)
        await self.store.set(key, client.to_dict())
        return client

    async def _authorization_code(self, http: httpx.AsyncClient, info: ResourceInfo, server: ServerInfo,
                                  scopes: list[str], dpop: DPoPKey | None) -> tuple[Tokens, ClientIdentity]:
        if not server.supports("code_challenge_methods_supported", "S256"):
            raise AuthorizationFailed(f"authorization server {server.issuer} does not advertise PKCE with S256: refusing to use it")
        endpoint = server.endpoint("authorization_endpoint")
        if endpoint is None:
            raise AuthorizationFailed(f"authorization server {server.issuer} names no authorization endpoint")
        if self.authorizer is None:
            self.authorizer = LoopbackAuthorizer()
        redirect = await self.authorizer.redirect_uri()
        client = await self._client_for(http, server, redirect)
        verifier, code_challenge = pkce_pair()
        state = secrets.token_urlsafe(32)
        params = {"response_type": "code", "client_id": client.client_id, "redirect_uri": redirect,
                  "code_challenge": code_challenge, "code_challenge_method": "S256", "state": state,
                  "resource": info.resource}
        if scopes:
            params["scope"] = " ".join(scopes)
        url = endpoint + ("&" if "?" in endpoint else "?") + urllib.parse.urlencode(params)
        answer = await self.authorizer.authorize(url)
        check_authorization_response(answer, server, state)
        data = {"grant_type": "authorization_code", "code": answer["code"], "redirect_uri": redirect,
                "code_verifier": verifier, "resource": info.resource}
        return await token_request(http, server, client, data, info.resource, asked_scopes=scopes, dpop=dpop), client

    async def _direct_grant(self, http: httpx.AsyncClient, info: ResourceInfo, server: ServerInfo, scopes: list[str],
                            dpop: DPoPKey | None) -> Tokens:
        """client_credentials or jwt_bearer: no person involved."""
        data = {"resource": info.resource}
        if scopes:
            data["scope"] = " ".join(scopes)
        if self.grant == "client_credentials":
            data["grant_type"] = "client_credentials"
        else:
            value = self.assertion(server.issuer, info.resource, scopes) if callable(self.assertion) else self.assertion
            if isinstance(value, Awaitable):
                value = await value
            data.update(grant_type=JWT_BEARER, assertion=str(value))
        if self.client is not None and self.client.issuer not in (None, server.issuer):
            raise AuthorizationFailed(f"the client credentials are for {self.client.issuer}, not {server.issuer}")
        return await token_request(http, server, self.client, data, info.resource, asked_scopes=scopes, dpop=dpop)


def auth_challenge(header: str | None) -> tuple[Challenge | None, bool]:
    """The challenge to act on (Bearer, else DPoP) and whether the server asks for DPoP."""
    found = parse_challenges(header or "")
    dpop = next((c for c in found if c.scheme == "dpop"), None)
    return next((c for c in found if c.scheme == "bearer"), dpop), dpop is not None


def check_authorization_response(answer: dict[str, str], server: ServerInfo, state: str) -> None:
    """RFC 9207 issuer check (before anything in the answer is acted on, errors included),
    then ``state``, then the answer itself."""
    iss = answer.get("iss")
    if iss is not None:
        if iss != server.issuer:  # simple string comparison: no normalization
            raise AuthorizationFailed(f"the authorization response names issuer {iss!r}, not {server.issuer!r}: "
                                      "refusing it (possible mix-up attack)")
    elif server.get("authorization_response_iss_parameter_supported") is True:
        raise AuthorizationFailed("the authorization server promised an iss parameter but its response has none: refusing it")
    if answer.get("state") != state:
        raise AuthorizationFailed("the authorization response does not carry this request's state: refusing it")
    if "error" in answer:
        detail = answer.get("error_description")
        raise AuthorizationFailed(f"authorization refused: {answer['error']}" + (f": {detail[:200]}" if detail else ""))
    if not answer.get("code"):
        raise AuthorizationFailed("the authorization response carries no code")


def _server_url(url: httpx.URL) -> str:
    """The MCP server a request is for: the URL without query or fragment."""
    return str(url.copy_with(query=None, fragment=None))
