"""Origin / Host checks (DNS rebinding), CORS and bearer-token authentication."""

from __future__ import annotations

import hmac
import ipaddress
import urllib.parse

from .wire import Headers

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})
ALLOW_METHODS = b"GET, POST, DELETE, OPTIONS"
ALLOW_HEADERS = (b"Content-Type, Accept, Authorization, MCP-Protocol-Version, Mcp-Session-Id, Mcp-Method, "
                 b"Mcp-Name, Last-Event-ID, X-Request-ID")
EXPOSE_HEADERS = b"Mcp-Session-Id, MCP-Protocol-Version, X-Request-ID, WWW-Authenticate"


def _hostname(netloc: str) -> str:
    """Host name of ``host[:port]`` (IPv6 literals keep their brackets off)."""
    if netloc.startswith("["):
        return netloc[1 : netloc.find("]")] if "]" in netloc else netloc
    return netloc.rsplit(":", 1)[0] if netloc.count(":") == 1 else netloc


def is_loopback_host(name: str) -> bool:
    name = name.strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


class Guard:
    """The HTTP security policy of one server."""

    def __init__(self, bind_host: str, allow_origins: list[str], auth_token: str | None) -> None:
        self.allow_any = "*" in allow_origins
        self.extra = {o.rstrip("/").lower() for o in allow_origins if o != "*"}
        self.token = auth_token
        self.check_host = is_loopback_host(bind_host)
        self._hosts: dict[str, bool] = {}

    def origin_allowed(self, origin: str) -> bool:
        if self.allow_any:
            return True
        origin = origin.rstrip("/").lower()
        if origin in self.extra:
            return True
        parsed = urllib.parse.urlsplit(origin)
        return parsed.scheme in ("http", "https") and is_loopback_host(parsed.hostname or "")

    def host_allowed(self, host: str | None) -> bool:
        """On loopback binds only loopback Host headers are served (DNS rebinding)."""
        if not self.check_host or host is None:
            return True
        known = self._hosts.get(host)
        if known is None:
            known = is_loopback_host(_hostname(host))
            if len(self._hosts) < 1024:
                self._hosts[host] = known
        return known

    def authorized(self, authorization: str | None) -> bool:
        if self.token is None:
            return True
        if not authorization or not authorization.lower().startswith("bearer "):
            return False
        return hmac.compare_digest(authorization[7:].strip().encode(), self.token.encode())

    def cors_headers(self, origin: str | None) -> Headers:
        if origin is None:
            return []
        return [
            (b"access-control-allow-origin", origin.encode("latin-1")),
            (b"access-control-expose-headers", EXPOSE_HEADERS),
            (b"vary", b"Origin"),
        ]

    def preflight_headers(self) -> Headers:
        """What a preflight answer adds to the CORS headers every answer carries."""
        return [
            (b"access-control-allow-methods", ALLOW_METHODS),
            (b"access-control-allow-headers", ALLOW_HEADERS),
            (b"access-control-max-age", b"600"),
        ]
