"""``WWW-Authenticate`` challenges (RFC 9110 section 11.6.1), as the OAuth client reads them."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_TOKEN = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_PARAM = re.compile(rf'\s*({_TOKEN})\s*=\s*(?:"((?:[^"\\]|\\.)*)"|({_TOKEN}))\s*(,|$)')
_SCHEME = re.compile(rf"\s*({_TOKEN})(?:\s+|$)")
_TOKEN68 = re.compile(r"\s*([A-Za-z0-9\-._~+/]+=*)\s*(,|$)")


@dataclass
class Challenge:
    scheme: str
    params: dict[str, str] = field(default_factory=dict)

    @property
    def scopes(self) -> list[str] | None:
        """The ``scope`` parameter as a list, or None when the challenge has none."""
        scope = self.params.get("scope")
        return scope.split() if scope is not None else None


def parse_challenges(header: str) -> list[Challenge]:
    """Every challenge in a ``WWW-Authenticate`` value (several may share one header).
    Unparseable rests are dropped rather than raised: a server's typo must not stop a client."""
    out: list[Challenge] = []
    pos, text = 0, header or ""
    while pos < len(text):
        while pos < len(text) and text[pos] in " ,":
            pos += 1
        m = _SCHEME.match(text, pos)
        if not m:
            break
        current = Challenge(m.group(1).lower())
        out.append(current)
        pos = m.end()
        t68 = _TOKEN68.match(text, pos)
        if t68 and not _PARAM.match(text, pos):
            pos = t68.end()
            continue
        while pos < len(text):
            p = _PARAM.match(text, pos)
            if not p:
                break
            name, quoted, bare = p.group(1).lower(), p.group(2), p.group(3)
            current.params[name] = re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else bare
            pos = p.end()
            if p.group(4) == ",":
                nxt = _SCHEME.match(text, pos)
                if nxt and not _PARAM.match(text, pos):
                    break  # the next challenge starts here
    return out
