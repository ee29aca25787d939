"""The HTTP server as an OAuth 2.1 resource server: Protected Resource Metadata (RFC 9728),
bearer tokens (RFC 6750) checked by the configured verifier, and the 401/403 challenges that
tell clients where to get a token and which scopes to ask for.

Every refusal is a 401 (no token, or a bad one), a 403 (a good token without the scopes) or a
503 (the issuer could not be asked); the token itself never appears in a log line or an answer.
"""

from __future__ import annotations

import ipaddress
import logging
import re
import urllib.parse
from typing import Any, Awaitable, Callable

import msgspec

from ....protocol.jsonrpc import Answer
from ....protocol.oauth import PRM_SUFFIX
from ....server.app import App
from ....server.auth import FORBIDDEN, InvalidToken, Principal, TokenVerifier, VerifierUnavailable
from ..exchange import Exchange
from ..security import is_loopback_host
from ..wire import Headers
from .verifiers import build_verifier

log = logging.getLogger("mcpkit.auth")
PRM_PATH = PRM_SUFFIX
#: RFC 6750 b64token: what a bearer token may look like
_B64TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
_UNSAFE = re.compile(r'[^\x20-\x7e]|["\\]')
Refuse = Callable[[Exchange, int, str, Headers], Awaitable[None]]


class ResourceServer:
    def __init__(self, app: App, verifier: TokenVerifier, refuse: Refuse) -> None:
        self.app = app
        self.auth = app.settings.auth
        self.verifier = verifier
        self.refuse = refuse
        self.tls = bool(app.settings.certfile)
        s = app.settings
        if self.auth.resource is None and not is_loopback_host(s.host):
            raise ValueError(f"authorization on {s.host}, which is not a loopback address, needs this server's URL: pass "
                             "--auth-resource URL (or set [server.auth] resource), e.g. https://mcp.example.com/mcp")
        if self.auth.resource is not None:
            _check_resource(self.auth.resource)
        self._bound = (s.host, s.port)  # for a request that does not say which socket it came in on

    @classmethod
    def from_app(cls, app: App, refuse: Refuse) -> "ResourceServer | None":
        s = app.settings
        verifier = build_verifier(s.auth, s.auth_token, app.verifier_factories)
        return None if verifier is None else cls(app, verifier, refuse)

    async def aclose(self) -> None:
        try:
            await self.verifier.aclose()
        except Exception as exc:
            log.warning("closing the token verifier failed: %s: %s", type(exc).__name__, exc)

    # -- metadata ----------------------------------------------------------------------------
    def resource(self, ex: Exchange) -> str | None:
        """This server's canonical URI: the configured one, else (a loopback bind) the URL of
        the socket the request came in on: this server's scheme, its loopback address and its
        port. The Host header only picks which of that address's names the client used (see
        :func:`loopback_resource`); another port or host there is not this server. None when
        the port cannot be known (an ASGI server that does not say; set ``resource`` then)."""
        if self.auth.resource is not None:
            return self.auth.resource
        local = ex.local
        address, port = local if local is not None and isinstance(local[1], int) and local[1] else self._bound
        if not port:
            return None
        return loopback_resource("https" if self.tls else "http", address, port, ex.headers.get("host"))

    def metadata_url(self, ex: Exchange) -> str | None:
        resource = self.resource(ex)
        if resource is None:
            return None
        parts = urllib.parse.urlsplit(resource)
        return f"{parts.scheme}://{parts.netloc}{PRM_PATH}{parts.path.rstrip('/')}"

    def scopes_supported(self) -> list[str]:
        if self.auth.scopes_supported is not None:
            return list(self.auth.scopes_supported)
        reg = self.app.registry
        used: dict[str, None] = dict.fromkeys(self.auth.required_scopes)
        for item in [*reg.tools.values(), *reg.resources, *reg.templates, *reg.prompts.values()]:
            used.update(dict.fromkeys(item.scopes))
        return list(used)

    def metadata(self, ex: Exchange) -> dict[str, Any]:
        """The Protected Resource Metadata document."""
        a = self.auth
        servers = list(a.authorization_servers) or ([a.issuer] if a.issuer else [])
        doc: dict[str, Any] = {"resource": self.resource(ex), "authorization_servers": servers,
                               "bearer_methods_supported": ["header"]}
        scopes = self.scopes_supported()
        if scopes:
            doc["scopes_supported"] = scopes
        if a.resource_name:
            doc["resource_name"] = a.resource_name
        if a.resource_documentation:
            doc["resource_documentation"] = a.resource_documentation
        return doc

    @staticmethod
    def is_metadata_path(path: str) -> bool:
        return path == PRM_PATH or path.startswith(PRM_PATH + "/")

    async def serve_metadata(self, ex: Exchange) -> None:
        if ex.method != "GET":
            await ex.respond(405, msgspec.json.encode({"error": "method_not_allowed"}), [(b"allow", b"GET, OPTIONS")])
            return
        if self.resource(ex) is None:
            await self._no_resource(ex)
            return
        await ex.respond(200, msgspec.json.encode(self.metadata(ex)), [(b"cache-control", b"public, max-age=300")])

    async def _no_resource(self, ex: Exchange) -> None:
        log.error("cannot tell which port this server serves on, so no token can be checked for it: set --auth-resource")
        await self.refuse(ex, 503, "Service Unavailable: this server does not know its own URL (--auth-resource)",
                          [(b"retry-after", b"5")])

    # -- tokens ------------------------------------------------------------------------------
    def challenge(self, ex: Exchange, *, error: str | None = None, description: str | None = None,
                  scopes: list[str] | None = None) -> Headers:
        """``WWW-Authenticate: Bearer resource_metadata=…, scope=…[, error=…]``."""
        where = self.metadata_url(ex)
        params = [f'resource_metadata="{_quoted(where)}"'] if where is not None else []
        wanted = self.auth.required_scopes if scopes is None else scopes
        if wanted:
            params.append(f'scope="{_quoted(" ".join(wanted))}"')
        if error:
            params.append(f'error="{error}"')
        if description:
            params.append(f'error_description="{_quoted(description)}"')
        return [(b"www-authenticate", ("Bearer " + ", ".join(params)).encode("latin-1", "replace"))]

    async def authenticate(self, ex: Exchange) -> Principal | None:
        """The verified principal of the request, or None after answering 401/403/503."""
        header = ex.headers.get("authorization")
        if not header:
            await self.refuse(ex, 401, "Unauthorized: a bearer token is required", self.challenge(ex))
            return None
        scheme, _, token = header.strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            await self.refuse(ex, 401, "Unauthorized: a bearer token is required", self.challenge(ex))
            return None
        reason = None
        if len(token) > self.auth.max_token_bytes:
            reason = "the token is too large"
        elif not _B64TOKEN.fullmatch(token):
            reason = "the token is malformed"
        principal = None
        resource = self.resource(ex)
        if resource is None:
            await self._no_resource(ex)
            return None
        if reason is None:
            try:
                principal = await self.verifier.verify(token, resource)
                if not isinstance(principal, Principal) or not principal.subject:
                    raise TypeError(f"verify() returned {type(principal).__name__}, not a Principal with a subject")
            except InvalidToken as exc:
                # a provider's message must not carry the token out (into the answer, the log)
                reason = (str(exc) or "the token is not valid").replace(token, "[token]")
            except VerifierUnavailable as exc:
                log.warning("token verification unavailable: %s", exc)
                await self.refuse(ex, 503, "Service Unavailable: the token cannot be verified now; try again", [(b"retry-after", b"5")])
                return None
            except Exception as exc:
                log.error("token verifier %s failed: %s: %s", type(self.verifier).__name__, type(exc).__name__, exc)
                await self.refuse(ex, 503, "Service Unavailable: the token cannot be verified now", [(b"retry-after", b"5")])
                return None
        if principal is None:
            log.info("refused a bearer token on %s %s: %s", ex.method, ex.path, reason)
            await self.refuse(ex, 401, f"Unauthorized: {reason}",
                              self.challenge(ex, error="invalid_token", description=reason))
            return None
        missing = principal.missing(self.auth.required_scopes)
        if missing:
            await self.refuse(ex, 403, f"Forbidden: this server needs scope {' '.join(missing)}",
                              self.challenge(ex, error="insufficient_scope", scopes=list(self.auth.required_scopes),
                                             description="the token lacks scopes this server requires"))
            return None
        return principal

    def step_up(self, ex: Exchange, answer: Answer) -> Headers | None:
        """The 403 challenge for an answer that is an insufficient-scope error (a tool,
        resource or prompt the token lacks scopes for), else None."""
        err = answer.error
        if err is None or err.code != FORBIDDEN:
            return None
        data = err.data
        needed = data.get("requiredScopes") if isinstance(data, dict) else None
        scopes = [s for s in needed if isinstance(s, str)] if isinstance(needed, list) else []
        # the union with what every request needs: a token for this one must work for the rest
        union = list(dict.fromkeys([*self.auth.required_scopes, *scopes]))
        return self.challenge(ex, error="insufficient_scope", scopes=union, description=err.message)


def _quoted(value: str) -> str:
    return _UNSAFE.sub("", value)


def loopback_resource(scheme: str, address: str, port: int, host: str | None) -> str:
    """The resource URL of a loopback socket at ``address``:``port``: ``scheme://NAME:port/mcp``
    where NAME is the Host header's name when it is one of this address's (its literal, and
    ``localhost`` for 127.0.0.1 and ::1), else the literal. A token for another port, scheme or
    loopback address is for another server."""
    names = _loopback_names(address)
    netlocs = [f"{name}:{port}" for name in names]
    if port == (443 if scheme == "https" else 80):
        netlocs += names
    asked = (host or "").strip().lower()
    return f"{scheme}://{asked if asked in netlocs else netlocs[0]}/mcp"


def _loopback_names(address: str) -> list[str]:
    bare = address.strip("[]").lower()
    try:
        ip = ipaddress.ip_address(bare)
    except ValueError:
        return [bare]  # a name ("localhost"): only when the socket's address is unknown
    literal = f"[{ip.compressed}]" if ip.version == 6 else ip.compressed
    return [literal, "localhost"] if ip in _LOCALHOST else [literal]


_LOCALHOST = (ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1"))


def _check_resource(resource: str) -> None:
    parts = urllib.parse.urlsplit(resource)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.fragment:
        raise ValueError(f"auth.resource must be an absolute http(s) URL without a fragment, got {resource!r}")
