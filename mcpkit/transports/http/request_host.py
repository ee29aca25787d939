"""How a request names its host, for both HTTP servers: the syntax of a Host value (RFC 9110
§7.2) and a target in absolute form (``GET http://host/path``, RFC 9112 §3.2.2), whose
authority the server then takes as the Host."""

from __future__ import annotations

import re

#: a Host value: a name, IPv4 or bracketed IPv6 literal, and an optional port (RFC 9110 §7.2)
HOST = re.compile(rb"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9\-._~!$&'()*+,;=%]*)(:[0-9]*)?")
_ABSOLUTE = re.compile(rb"(?i)https?://")


#: Host values already found valid (a client sends the same one on every request): at most
#: _KNOWN_MAX, forgotten all at once past it
_known: set[bytes] = set()
_KNOWN_MAX = 256


def valid_host(value: bytes) -> bool:
    """Is ``value`` a Host field's valid value (:data:`HOST`)? Values seen valid are
    remembered, so a connection's requests do not run the pattern each time."""
    if value in _known:
        return True
    if HOST.fullmatch(value) is None:
        return False
    if len(_known) >= _KNOWN_MAX:
        _known.clear()
    _known.add(value)
    return True


def split_absolute_form(target: bytes) -> tuple[bytes, bytes] | None:
    """``http://authority/path?query`` -> (authority, ``/path?query``); None when ``target``
    is not in absolute form; ValueError when its authority is not a host (RFC 9112 §3.2.2:
    the server then uses the target's authority, not the Host field)."""
    if target.startswith(b"/"):  # origin form, nearly every request: no pattern to run
        return None
    if _ABSOLUTE.match(target) is None:
        return None
    rest = target.split(b"://", 1)[1]
    end = min((i for i in (rest.find(b"/"), rest.find(b"?")) if i != -1), default=len(rest))
    authority, path = rest[:end], rest[end:]
    if not authority or b"@" in authority or HOST.fullmatch(authority) is None:
        raise ValueError("the request target's authority is not a valid host")
    return authority, path if path.startswith(b"/") else b"/" + path
