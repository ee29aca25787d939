"""Who may use the console: a client on a trusted address (loopback by default), judged by the
socket's peer address, or anyone holding the operator token; never a plain MCP client.

- The peer address decides trust, never the Host header; but the Host header can take trust
  away: without the token, the Host must be a loopback name or an IP literal, so a page whose
  domain was rebound to this machine (DNS rebinding) gets nothing from a browser on it.
- A request that came through a proxy (``Forwarded``, ``X-Forwarded-For``, ``X-Real-IP``) is
  not trusted by its peer address (the proxy's): it needs the token.
- The token travels as ``Authorization: Bearer <token>`` (scripts) or as a cookie the page's
  login form sets (``HttpOnly``, ``SameSite=Strict``, a keyed hash of the token, not the token).
  It is never an MCP token: the console's routes do not take MCP bearer tokens, and a
  ``console_token`` equal to ``auth_token`` is refused at start.
- A request that carries an ``Origin`` must come from the console's own origin (no other site's
  page can call a tool through a trusting browser).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import urllib.parse
from typing import Any

from ..exchange import Exchange
from ..security import is_loopback_host

COOKIE = "mcpkit_console"
_PROXY_HEADERS = ("forwarded", "x-forwarded-for", "x-real-ip")


def check_console_settings(settings: Any) -> None:
    """Refuse settings the console cannot work with (ValueError, one line)."""
    ConsoleAccess(settings)


def _host_name(host: str) -> str:
    if host.startswith("["):
        return host[1:host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _is_ip_literal(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        return False


class ConsoleAccess:
    def __init__(self, settings: Any) -> None:
        token = settings.console_token or None
        if token is not None and settings.auth_token and hmac.compare_digest(token.encode(), settings.auth_token.encode()):
            raise ValueError("console_token must not be the MCP auth_token: the console's operator token opens "
                             "more than MCP calls; give it a token of its own")
        self.token = token
        self.trusted = []
        for net in settings.console_trusted:
            try:
                self.trusted.append(ipaddress.ip_network(net, strict=False))
            except ValueError:
                raise ValueError(f"console_trusted: {net!r} is not an IP address or network") from None
        self.cookie = hmac.new(token.encode(), b"mcpkit console", hashlib.sha256).hexdigest() if token else None
        self.secure_cookie = bool(settings.certfile)

    # -- the rule -------------------------------------------------------------------------------
    def peer_trusted(self, client: tuple[str, int] | None) -> bool:
        """Whether the socket peer is on a trusted address (no peer known: not trusted)."""
        if not client or not self.trusted:
            return False
        try:
            ip = ipaddress.ip_address(client[0].split("%", 1)[0])
        except ValueError:
            return False
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        return any(ip in net for net in self.trusted)

    def has_token(self, ex: Exchange) -> bool:
        if self.token is None:
            return False
        auth = ex.headers.get("authorization", "")
        scheme, _, value = auth.partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(), self.token.encode()):
            return True
        got = cookie_of(ex.headers.get("cookie", ""), COOKIE)
        return got is not None and self.cookie is not None and hmac.compare_digest(got.encode(), self.cookie.encode())

    def refusal(self, ex: Exchange) -> tuple[int, str] | None:
        """None when ``ex`` may use the console, else (status, why)."""
        origin = ex.headers.get("origin")
        host = ex.headers.get("host", "")
        if origin is not None and urllib.parse.urlsplit(origin).netloc.lower() != host.lower():  # "null" too (sandboxed frames)
            return 403, "the console answers only pages of its own origin"
        if self.has_token(ex):
            return None
        if any(h in ex.headers for h in _PROXY_HEADERS):
            why = "a request through a proxy needs the console token"
        elif not self.peer_trusted(ex.client):
            why = "the console is open to trusted addresses (console_trusted) or with the console token"
        else:
            name = _host_name(host)
            if is_loopback_host(name) or _is_ip_literal(name):
                return None
            why = "without the console token, the console is reached by a loopback name or an IP address"
        return (401 if self.token is not None else 403), why

    def login(self, token: str) -> str | None:
        """The ``Set-Cookie`` value for a right token, else None."""
        if self.token is None or self.cookie is None or not hmac.compare_digest(token.encode(), self.token.encode()):
            return None
        flags = "; Path=/console; HttpOnly; SameSite=Strict" + ("; Secure" if self.secure_cookie else "")
        return f"{COOKIE}={self.cookie}{flags}"


def cookie_of(header: str, name: str) -> str | None:
    for part in header.split(";"):
        key, sep, value = part.strip().partition("=")
        if sep and key == name:
            return value
    return None
